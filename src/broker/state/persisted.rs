//! A versioned config table kept in a JSON file of Java's shape (`topics.json`,
//! `subscriptionGroup.json`: `ConfigManager` in Java), and the file as one change left it.
//!
//! Invariant: the snapshot ([`PersistedTable::get`], lock-free) always holds the entries of
//! the table as its last change left it, and every change bumps the table's `DataVersion`.
//! The table's `Mutex` is taken only by changes (admin requests, auto-creation, a slave's
//! sync) and by whole-table reads (registration every 30 s, admin dumps), never by the send
//! or pull path, which read the snapshot. Files are written as versioned snapshots, so
//! whichever order the writes of two changes run in, the newer one stays.

use super::lock;
use crate::config::persist::{
    next_snapshot_version, read_with_backup, write_snapshot, write_snapshot_off_shard,
};
use crate::store::config_files::{DataVersion, TableEntry, VersionedTable};
use arc_swap::ArcSwap;
use ferromq_protocol::calendar::now_ms;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// A versioned table kept in a file, with a lock-free snapshot of its entries by name.
#[derive(Debug)]
pub(super) struct PersistedTable<T> {
    path: PathBuf,
    table: Mutex<VersionedTable<T>>,
    snapshot: ArcSwap<HashMap<String, T>>,
}

impl<T> PersistedTable<T>
where
    T: TableEntry + Clone,
{
    /// Reads the table from `path` (or its `.bak`); empty when neither exists.
    ///
    /// # Errors
    /// A file that exists but is not such a table (named in the message).
    pub(super) fn load(path: PathBuf) -> Result<PersistedTable<T>, String> {
        let accept = |bytes: &[u8]| VersionedTable::<T>::parse(bytes).is_ok();
        let table = match read_with_backup(&path, accept) {
            Ok(Some(bytes)) => VersionedTable::<T>::parse(&bytes)
                .map_err(|e| format!("{}: {e}", path.display()))?,
            Ok(None) => VersionedTable {
                data_version: DataVersion::default(),
                entries: Vec::new(),
            },
            Err(error) => return Err(format!("{}: {error}", path.display())),
        };
        let snapshot = ArcSwap::from_pointee(table.entries.iter().cloned().collect());
        Ok(PersistedTable {
            path,
            table: Mutex::new(table),
            snapshot,
        })
    }

    /// An entry, from the snapshot (no lock).
    pub(super) fn get(&self, name: &str) -> Option<T> {
        self.snapshot.load().get(name).cloned()
    }

    /// Applies `change` (returning whether it changed anything); if so bumps the version,
    /// publishes the snapshot and returns the file as it now stands, for the caller to write.
    pub(super) fn update(
        &self,
        change: impl FnOnce(&mut VersionedTable<T>) -> bool,
    ) -> Option<TableFile> {
        let mut table = lock(&self.table);
        if !change(&mut table) {
            return None;
        }
        table.data_version.counter += 1;
        table.data_version.timestamp = now_ms();
        Some(self.publish(&table))
    }

    /// Takes a master's table (a GET_ALL_TOPIC_CONFIG or GET_ALL_SUBSCRIPTIONGROUP_CONFIG
    /// body) whole when its version differs from this one's (a slave's `syncTopicConfig` /
    /// `syncSubscriptionGroupConfig`), and writes the file here, blocking; whether it did.
    ///
    /// # Errors
    /// Why the body is not such a table.
    pub(super) fn take_masters(&self, body: &[u8]) -> Result<bool, String> {
        let incoming = VersionedTable::<T>::parse(body).map_err(|e| e.to_string())?;
        let mut table = lock(&self.table);
        if table.data_version == incoming.data_version {
            return Ok(false);
        }
        *table = incoming;
        let file = self.publish(&table);
        drop(table);
        file.write_now();
        Ok(true)
    }

    /// Every entry in file order, with the table's version.
    pub(super) fn entries(&self) -> (DataVersion, Vec<(String, T)>) {
        let table = lock(&self.table);
        (table.data_version, table.entries.clone())
    }

    /// The file's JSON as the table stands.
    pub(super) fn to_json(&self) -> String {
        lock(&self.table).to_json()
    }

    /// Publishes `table`'s entries to the snapshot; the file as it now stands. Called with
    /// the table's lock held, so that snapshots and file versions follow the changes' order.
    fn publish(&self, table: &VersionedTable<T>) -> TableFile {
        self.snapshot
            .store(Arc::new(table.entries.iter().cloned().collect()));
        TableFile {
            path: self.path.clone(),
            version: next_snapshot_version(),
            bytes: table.to_json().into_bytes(),
        }
    }
}

/// A config table's file as it stood after a change ([`PersistedTable::update`]); written
/// as a versioned snapshot, so that whichever order the writes of two changes run in, the
/// newer one stays.
#[derive(Debug)]
#[must_use = "the change reaches the disk only when its file is written"]
pub(super) struct TableFile {
    path: PathBuf,
    version: u64,
    bytes: Vec<u8>,
}

impl TableFile {
    /// Writes it on the executor's blocking threads. Call from inside a glommio executor.
    pub(super) async fn write(self) {
        let written = write_snapshot_off_shard(self.path.clone(), self.version, self.bytes).await;
        if let Err(error) = written {
            tracing::error!(path = %self.path.display(), %error, "cannot persist config");
        }
    }

    /// Writes it here, blocking (at start-up, before the shards run).
    pub(super) fn write_now(self) {
        if let Err(error) = write_snapshot(&self.path, self.version, &self.bytes) {
            tracing::error!(path = %self.path.display(), %error, "cannot persist config");
        }
    }
}

/// Writes `file`, if a change made one.
pub(super) async fn write_change(file: Option<TableFile>) {
    if let Some(file) = file {
        file.write().await;
    }
}
