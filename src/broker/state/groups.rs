//! The subscription groups (`subscriptionGroup.json`, Java's `SubscriptionGroupManager`):
//! each consumer group's settings (retry queues, broadcast, notification of member changes).
//!
//! Invariant: a group is created with Java's defaults only when `autoCreateSubscriptionGroup`
//! allows, and a change is answered once its file is written. The send, pull and heartbeat
//! paths read the lock-free snapshot ([`Groups::get_or_create`]); the table's lock is taken only by
//! changes (admin requests, a new group's first heartbeat) and whole-table reads.

use super::persisted::{write_change, PersistedTable};
use crate::store::config_files::{DataVersion, SubscriptionGroupConfig};
use std::path::Path;

/// The subscription group table.
#[doc(alias = "SubscriptionGroupManager")]
#[derive(Debug)]
pub(super) struct Groups {
    table: PersistedTable<SubscriptionGroupConfig>,
}

impl Groups {
    /// Loads `subscriptionGroup.json` from `dir`.
    ///
    /// # Errors
    /// A file that exists but is not valid (named in the message).
    pub(super) fn load(dir: &Path) -> Result<Groups, String> {
        let table = PersistedTable::load(dir.join("subscriptionGroup.json"))?;
        Ok(Groups { table })
    }

    /// A group's config, if the table has it.
    pub(super) fn get(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.table.get(group)
    }

    /// A group's config, created with Java's defaults when `auto_create` (the runtime
    /// `autoCreateSubscriptionGroup`).
    pub(super) async fn get_or_create(
        &self,
        group: &str,
        auto_create: bool,
    ) -> Option<SubscriptionGroupConfig> {
        if let Some(config) = self.get(group) {
            return Some(config);
        }
        if !auto_create {
            return None;
        }
        let config = SubscriptionGroupConfig::new(group);
        self.put(config.clone()).await;
        Some(config)
    }

    /// Adds or replaces a group; ends once `subscriptionGroup.json` holds it.
    pub(super) async fn put(&self, config: SubscriptionGroupConfig) {
        let file = self.table.update(|table| {
            if table.get(&config.group_name) == Some(&config) {
                return false;
            }
            table.insert(config);
            true
        });
        write_change(file).await;
    }

    /// Removes a group; whether it existed. Ends once `subscriptionGroup.json` lacks it.
    pub(super) async fn delete(&self, group: &str) -> bool {
        let file = self.table.update(|table| {
            let before = table.entries.len();
            table.entries.retain(|(name, _)| name != group);
            table.entries.len() != before
        });
        let existed = file.is_some();
        write_change(file).await;
        existed
    }

    /// Whether the members of `group` are told when its members change
    /// (`notifyConsumerIdsChangedEnable`, on for a group not in the table).
    pub(super) fn notifies_consumer_ids_changed(&self, group: &str) -> bool {
        self.table
            .get(group)
            .is_none_or(|config| config.notify_consumer_ids_changed_enable)
    }

    /// Every group with the table's version.
    pub(super) fn entries(&self) -> (DataVersion, Vec<(String, SubscriptionGroupConfig)>) {
        self.table.entries()
    }

    /// `subscriptionGroup.json` as it stands.
    pub(super) fn to_json(&self) -> String {
        self.table.to_json()
    }

    /// A master's table taken whole when its version differs (see
    /// [`PersistedTable::take_masters`]).
    pub(super) fn take_masters(&self, body: &[u8]) -> Result<bool, String> {
        self.table.take_masters(body)
    }
}
