//! What a broker knows besides messages, shared by every net shard: the configuration as
//! started and as UPDATE_BROKER_CONFIG left it, and the parts below, each of which owns its
//! data and states its invariant in its own file.
//!
//! - `topics.rs`: the topic table (`topics.json`, `TopicConfigManager`), system topics,
//!   auto-creation, and how far the name servers have been told of changes;
//! - `groups.rs`: the subscription groups (`subscriptionGroup.json`,
//!   `SubscriptionGroupManager`);
//! - `persisted.rs`: the versioned JSON table under both, with its lock-free snapshot;
//! - `offsets.rs`: committed consumer offsets (`consumerOffset.json`,
//!   `ConsumerOffsetManager`);
//! - `clients.rs`: the heartbeat clients (`ConsumerManager`, `ProducerManager`);
//! - `filters.rs`: the SQL92 selectors groups registered (`ConsumerFilterManager`);
//! - `locks.rs`: the queue locks of orderly consumers (`RebalanceLockManager`);
//! - `pop.rs`: the queue locks and waiting counts of POP (`QueueLockManager`).
//!
//! Architecture Invariant: no lock covers a whole table on the send, pull or heartbeat path.
//! Topic and group configs are read from immutable snapshots (`ArcSwap`); offsets, clients
//! and queue locks are maps sharded by key (`DashMap`), so a request locks only its key's
//! shard, for one map operation. What still takes a whole-table lock is rare and off those
//! paths: changes of topics and groups (admin requests, auto-creation, a new group's first
//! heartbeat), snapshots of the offsets (every `flushConsumerOffsetInterval`), and
//! `config_version` (UPDATE_BROKER_CONFIG). Files are written atomically (temp file, `.bak`,
//! rename) on the shard's blocking threads: a change to the topics or groups is answered once
//! its file is written, as Java persists before it answers, while the shard's other
//! connections go on.

mod clients;
mod filters;
mod groups;
mod locks;
mod offsets;
mod persisted;
pub mod pop;
mod replication;
pub mod request_modes;
pub mod role;
pub mod routes;
pub mod timer;
mod topics;
mod transactions;

pub use clients::{ClientChannel, ConsumerMember};
pub use filters::ConsumerFilterData;
pub use locks::{LockTable, REBALANCE_LOCK_MAX_LIVE_TIME};
pub use replication::{
    run_replica_waits, LinkState, LocalReplicaWaits, MasterAddrs, ReplicaStatus, SlaveLink,
    SlaveLinkStatus, SlaveProgress,
};
pub use transactions::EndedTransactions;

use super::stats::BrokerStats;
use crate::config::broker::{BrokerConfig, BrokerRole};
use crate::config::persist::{next_snapshot_version, write_snapshot_off_shard};
use crate::config::properties::{set_keys, Property};
use crate::remoting::heartbeat::{HeartbeatData, SubscriptionData};
use crate::remoting::server::{ConnectionId, Outbound};
use crate::store::config_files::{DataVersion, SubscriptionGroupConfig, TopicConfig};
use arc_swap::ArcSwap;
use clients::Clients;
pub use ferromq_protocol::calendar::now_ms;
pub use ferromq_protocol::names::*;
use groups::Groups;
use offsets::ConsumerOffsets;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};
use topics::Topics;

/// Locks `mutex`; every critical section of this module leaves its data consistent, so a
/// poisoned lock is usable.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Broker-wide state.
#[derive(Debug)]
pub struct BrokerState {
    /// Configuration as the broker started with it: the shape of the broker (ports, paths,
    /// shards) and every setting read only at start.
    pub config: BrokerConfig,
    /// Configuration as UPDATE_BROKER_CONFIG left it (see [`BrokerState::runtime`]).
    runtime: ArcSwap<BrokerConfig>,
    /// Version of the configuration (`Configuration.dataVersion`), bumped by each update.
    config_version: Mutex<DataVersion>,
    /// The port the broker listens on, once bound (the config may ask for 0).
    listen_port: std::sync::atomic::AtomicU16,
    topics: Topics,
    groups: Groups,
    offsets: ConsumerOffsets,
    clients: Clients,
    filters: filters::ConsumerFilters,
    /// Queue locks of orderly consumers.
    pub locks: LockTable,
    /// Messages stored and pulled, put latencies, TPS.
    pub stats: BrokerStats,
    /// Transactions ended lately, by their first half's queue offset.
    pub ended_transactions: transactions::EndedTransactions,
    /// The slaves this master feeds over the HA link.
    pub slaves: Arc<replication::SlaveProgress>,
    /// The timer service's progress, for GET_BROKER_RUNTIME_INFO.
    pub timer: timer::TimerProgress,
    /// POP's queue locks and waiting pops.
    pub pop: pop::PopState,
    /// How each group consumes each topic, PULL or POP (`messageRequestMode.json`).
    pub request_modes: request_modes::RequestModes,
    /// Route lookups from the shards to the name servers.
    pub routes: routes::RouteLookups,
    /// For a slave: its master's addresses, as the name server told them.
    pub master: Arc<replication::MasterAddrs>,
    /// Role and id now (changed by the controller in controller mode).
    pub role: role::RuntimeRole,
    /// Wakes the controller-mode thread to ask for the group's master now (after
    /// NOTIFY_BROKER_ROLE_CHANGED).
    pub controller_poke: tokio::sync::Notify,
    /// Wakes the registration thread after a change of the topic table (its permit is kept
    /// if none waits).
    pub registration_wanted: tokio::sync::Notify,
    /// The plain ACL rules, with `aclEnable`.
    pub acl: Option<Arc<crate::broker::acl::AclRules>>,
    /// TLS on the remoting ports (`tls.server.mode` not `disabled`).
    pub server_tls: Option<crate::remoting::tls::ServerTls>,
    /// TLS on the broker's own connections (`tls.enable`).
    pub own_tls: Option<ferromq_client::tls::TlsClient>,
}

impl BrokerState {
    /// Loads the config files under the store's `config/` directory and adds the system
    /// topics a broker always has; `shards` is the number of shards (one slot of statistics
    /// each).
    ///
    /// # Errors
    /// A file that exists but is not valid (named in the message).
    pub fn load(config: BrokerConfig, shards: usize) -> Result<BrokerState, String> {
        let dir = config.store.config_dir();
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let topics = Topics::load(&dir, &config)?;
        let groups = Groups::load(&dir)?;
        let offsets = ConsumerOffsets::load(dir.join("consumerOffset.json"))?;
        let request_modes = request_modes::RequestModes::load(&dir)?;
        let locks = LockTable::new(config.rebalance_lock_max_live_time);
        let acl = match config.acl_enable {
            true => Some(Arc::new(crate::broker::acl::AclRules::load(
                &config.rocketmq_home,
            )?)),
            false => None,
        };
        let mut tls = config.tls.clone();
        tls.apply_config_file()?;
        let server_tls = tls.server().map_err(|e| format!("TLS: {e}"))?;
        let own_tls = tls.own_client().map_err(|e| format!("TLS: {e}"))?;
        // In controller mode a broker takes no puts until the controller names it master.
        let role = match config.controller_mode.enable {
            true => role::RuntimeRole::new(BrokerRole::Slave, config.broker_id),
            false => role::RuntimeRole::new(config.broker_role, config.broker_id),
        };
        let state = BrokerState {
            runtime: ArcSwap::from_pointee(config.clone()),
            config_version: Mutex::new(DataVersion {
                counter: 0,
                timestamp: now_ms(),
                ..DataVersion::default()
            }),
            listen_port: std::sync::atomic::AtomicU16::new(config.listen_port),
            config,
            topics,
            groups,
            offsets,
            clients: Clients::default(),
            filters: filters::ConsumerFilters::default(),
            locks,
            stats: BrokerStats::new(shards, now_ms()),
            ended_transactions: transactions::EndedTransactions::default(),
            slaves: Arc::default(),
            timer: timer::TimerProgress::default(),
            pop: pop::PopState::default(),
            request_modes,
            routes: routes::RouteLookups::default(),
            master: Arc::default(),
            role,
            controller_poke: tokio::sync::Notify::new(),
            registration_wanted: tokio::sync::Notify::new(),
            acl,
            server_tls,
            own_tls,
        };
        // Written only once every other part has loaded, as the broker then starts.
        state.topics.add_system_topics(&state.config);
        Ok(state)
    }

    /// The configuration with every UPDATE_BROKER_CONFIG applied. The settings that take
    /// effect at once are read from it: `brokerPermission` (sends, pulls and the routes
    /// registered), `autoCreateTopicEnable`, `autoCreateSubscriptionGroup`,
    /// `longPollingEnable` and `shortPollingTimeMills`; the others take effect at the next
    /// start (the update is written to the config file).
    #[must_use]
    pub fn runtime(&self) -> Arc<BrokerConfig> {
        self.runtime.load_full()
    }

    /// The configuration's version as Java's `DataVersion` JSON.
    #[must_use]
    pub fn config_version_json(&self) -> String {
        let version = *lock(&self.config_version);
        format!(
            r#"{{"counter":{},"timestamp":{}}}"#,
            version.counter, version.timestamp
        )
    }

    /// Records the port the broker listens on.
    pub fn set_listen_port(&self, port: u16) {
        self.listen_port.store(port, Ordering::Release);
    }

    /// The port the broker listens on (the configured one until bound).
    #[must_use]
    pub fn listen_port(&self) -> u16 {
        self.listen_port.load(Ordering::Acquire)
    }

    /// Applies `properties` (UPDATE_BROKER_CONFIG, Java's `Configuration.update`): each key
    /// ferromq knows with a valid value changes the runtime configuration; an unknown key or
    /// a bad value is ignored (logged), as Java ignores them. The accepted keys are written
    /// to the config file the broker started with, if any, before this returns. A change of
    /// `brokerPermission` re-registers with the name servers at once, under a new topic
    /// table version, so that routes show it. Returns the accepted keys.
    pub async fn update_config(&self, properties: &[Property]) -> Vec<(String, String)> {
        let mut accepted = Vec::new();
        let mut updated = BrokerConfig::clone(&self.runtime());
        for property in properties {
            let mut candidate = updated.clone();
            match candidate.apply("UPDATE_BROKER_CONFIG", std::slice::from_ref(property)) {
                Ok(unknown) if unknown.is_empty() => {
                    updated = candidate;
                    accepted.push((property.key.clone(), property.value.trim().to_owned()));
                }
                Ok(_) => tracing::warn!(key = %property.key, "unknown broker config key ignored"),
                Err(error) => tracing::warn!(%error, "broker config value ignored"),
            }
        }
        let permission_changed = accepted.iter().any(|(key, _)| key == "brokerPermission");
        self.runtime.store(Arc::new(updated));
        {
            let mut version = lock(&self.config_version);
            version.counter += 1;
            version.timestamp = now_ms();
        }
        tracing::info!(?accepted, "broker config updated");
        if let Some(path) = &self.config.config_path {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let bytes = set_keys(&text, &accepted).into_bytes();
            let written =
                write_snapshot_off_shard(path.clone(), next_snapshot_version(), bytes).await;
            if let Err(error) = written {
                tracing::error!(path = %path.display(), %error, "cannot persist broker config");
            }
        }
        if permission_changed {
            // As Java: a new topic version, so that name servers take the routes again.
            self.topics.bump_version(&self.registration_wanted).await;
        }
        accepted
    }

    /// Whether `topic` is a system topic (`TopicValidator.isSystemTopic`): one of
    /// [`SYSTEM_TOPICS`], the cluster's or the broker's own, the reply or trace topic, or
    /// a name with the system prefix.
    #[must_use]
    pub fn is_system_topic(&self, topic: &str) -> bool {
        self.topics.is_system(topic)
    }

    /// A topic's config.
    #[must_use]
    pub fn topic(&self, topic: &str) -> Option<TopicConfig> {
        self.topics.get(topic)
    }

    /// The config of `topic`, creating it from the `default_topic` template when the broker
    /// allows it (`createTopicInSendMessageMethod`); `None` if it does not exist and cannot
    /// be created.
    pub async fn topic_or_create(
        &self,
        topic: &str,
        default_topic: &str,
        queue_nums: i32,
    ) -> Option<TopicConfig> {
        let auto_create = self.runtime().auto_create_topic_enable;
        let wake = &self.registration_wanted;
        self.topics
            .get_or_create(topic, default_topic, queue_nums, auto_create, wake)
            .await
    }

    /// Creates `topic` if absent with `queues` queues (retry topics and the like).
    pub async fn ensure_topic(&self, topic: &str, queues: i32, perm: i32) -> TopicConfig {
        let wake = &self.registration_wanted;
        self.topics.ensure(topic, queues, perm, wake).await
    }

    /// Adds or replaces a topic's config; ends once `topics.json` holds it.
    pub async fn put_topic(&self, config: TopicConfig) {
        self.topics.put(config, &self.registration_wanted).await;
    }

    /// Removes a topic's config; whether it existed. Ends once `topics.json` lacks it.
    pub async fn delete_topic(&self, topic: &str) -> bool {
        self.topics.delete(topic, &self.registration_wanted).await
    }

    /// The topic-table changes so far: a registration that reads the table after this call
    /// covers them ([`Self::announced`]).
    pub fn topic_changes(&self) -> u64 {
        self.topics.changes()
    }

    /// Whether the topic table changed since the name servers were last sent it.
    pub fn registration_due(&self) -> bool {
        self.topics.registration_due()
    }

    /// The name servers have been sent the table as it was after `changes` changes.
    pub fn announced(&self, changes: u64) {
        self.topics.announced(changes);
    }

    /// Every topic's config with the table's version (for registration and admin).
    #[must_use]
    pub fn topics(&self) -> (DataVersion, Vec<(String, TopicConfig)>) {
        self.topics.entries()
    }

    /// A subscription group's config, if the table has it (never created here).
    #[must_use]
    pub fn group(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.groups.get(group)
    }

    /// A subscription group's config, creating it with Java's defaults when
    /// `autoCreateSubscriptionGroup` allows.
    pub async fn group_or_create(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        let auto_create = self.runtime().auto_create_subscription_group;
        self.groups.get_or_create(group, auto_create).await
    }

    /// Adds or replaces a subscription group; ends once `subscriptionGroup.json` holds it.
    pub async fn put_group(&self, config: SubscriptionGroupConfig) {
        self.groups.put(config).await;
    }

    /// Removes a subscription group; whether it existed. Ends once `subscriptionGroup.json`
    /// lacks it.
    pub async fn delete_group(&self, group: &str) -> bool {
        self.groups.delete(group).await
    }

    /// `subscriptionGroup.json` as it stands.
    #[must_use]
    pub fn groups_json(&self) -> String {
        self.groups.to_json()
    }

    /// `topics.json` as it stands.
    #[must_use]
    pub fn topics_json(&self) -> String {
        self.topics.to_json()
    }

    /// Every subscription group with the table's version.
    #[must_use]
    pub fn groups(&self) -> (DataVersion, Vec<(String, SubscriptionGroupConfig)>) {
        self.groups.entries()
    }

    /// The committed offset of `group` in a queue.
    #[must_use]
    pub fn committed_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        self.offsets.committed(group, topic, queue_id)
    }

    /// Copies `src`'s committed offsets in `topic` to `dest` (CLONE_GROUP_OFFSET); whether
    /// `src` had any there.
    pub fn clone_offsets(&self, src: &str, dest: &str, topic: &str) -> bool {
        self.offsets.clone_offsets(src, dest, topic)
    }

    /// Commits `offset` for `group` in a queue (persisted every
    /// `flushConsumerOffsetInterval`).
    pub fn commit_offset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        self.offsets.commit(group, topic, queue_id, offset);
    }

    /// A slave takes its master's tables (4.9's `SlaveSynchronize.syncAll`, from
    /// GET_ALL_TOPIC_CONFIG, GET_ALL_CONSUMER_OFFSET and GET_ALL_SUBSCRIPTIONGROUP_CONFIG
    /// bodies): topics and groups whole when the master's version differs, offsets merged
    /// in (each group's queues as the master has them); each written to its file here,
    /// blocking (call off the shards). Returns what changed, for the log.
    ///
    /// # Errors
    /// Which body is not such a table; the others are still taken.
    pub fn take_masters_tables(
        &self,
        topics: &[u8],
        offsets: &[u8],
        groups: &[u8],
    ) -> Result<Vec<&'static str>, String> {
        let mut changed = Vec::new();
        let mut problems = Vec::new();
        for (name, taken) in [
            ("topics", self.topics.take_masters(topics)),
            ("subscription groups", self.groups.take_masters(groups)),
        ] {
            match taken {
                Ok(true) => changed.push(name),
                Ok(false) => {}
                Err(e) => problems.push(format!("{name}: {e}")),
            }
        }
        match self.offsets.merge_masters(offsets) {
            Ok(true) => {
                if let Err(e) = self.persist_offsets() {
                    problems.push(format!("consumer offsets not written: {e}"));
                }
                changed.push("consumer offsets");
            }
            Ok(false) => {}
            Err(e) => problems.push(format!("consumer offsets: {e}")),
        }
        if problems.is_empty() {
            Ok(changed)
        } else {
            Err(problems.join("; "))
        }
    }

    /// `consumerOffset.json` as Java writes it.
    #[must_use]
    pub fn offsets_json(&self) -> String {
        self.offsets.to_json()
    }

    /// Writes `consumerOffset.json` (unless a newer snapshot is written already).
    ///
    /// # Errors
    /// The I/O error.
    pub fn persist_offsets(&self) -> std::io::Result<()> {
        self.offsets.persist()
    }

    /// Writes `consumerOffset.json` without blocking the calling shard (see
    /// [`write_snapshot_off_shard`]).
    ///
    /// # Errors
    /// The I/O error.
    pub async fn persist_offsets_off_shard(&self) -> std::io::Result<()> {
        self.offsets.persist_off_shard().await
    }

    /// Remembers how to reach `connection` with requests of the broker's own.
    pub fn connection_opened(&self, connection: ConnectionId, outbound: Outbound) {
        self.clients.connection_opened(connection, outbound);
    }

    /// Tells every member of `group` that its members changed
    /// (NOTIFY_CONSUMER_IDS_CHANGED, oneway), so that they rebalance at once instead of at
    /// their next timer (`notifyConsumerIdsChangedEnable`).
    pub fn notify_consumer_ids_changed(&self, group: &str) {
        if self.groups.notifies_consumer_ids_changed(group) {
            self.clients.notify_consumer_ids_changed(group);
        }
    }

    /// Records a heartbeat from `connection`; returns the consumer groups whose membership
    /// changed (their members are notified).
    pub fn heartbeat(&self, client: &ClientChannel, data: &HeartbeatData) -> Vec<String> {
        let changed = self.clients.heartbeat(client, data);
        for group in &changed {
            self.notify_consumer_ids_changed(group);
        }
        // Every heartbeat, as Java's REGISTER event after `registerConsumer`.
        for consumer in &data.consumer_data_set {
            let subscriptions = &consumer.subscription_data_set;
            self.filters
                .register(&consumer.group_name, subscriptions, now_ms());
        }
        changed
    }

    /// Removes `connection` from a group (UNREGISTER_CLIENT), or from every group when
    /// `group` is `None` (connection closed); returns consumer groups that changed (their
    /// remaining members are notified).
    pub fn unregister(&self, connection: ConnectionId, group: Option<&str>) -> Vec<String> {
        let changed = self.clients.unregister(connection, group);
        for group in &changed {
            self.notify_consumer_ids_changed(group);
        }
        self.unregister_filters(&changed);
        changed
    }

    /// Drops members silent for `channelExpiredTimeout`; returns groups that changed.
    pub fn expire_clients(&self) -> Vec<String> {
        let changed = self.clients.expire(self.config.channel_expired_timeout);
        for group in &changed {
            self.notify_consumer_ids_changed(group);
        }
        self.unregister_filters(&changed);
        changed
    }

    /// A way to reach one live producer of `group` (`ProducerManager.getAvailableChannel`):
    /// the one heard from last.
    #[must_use]
    pub fn producer_outbound(&self, group: &str) -> Option<Outbound> {
        self.clients.producer_outbound(group)
    }

    /// Client ids of a consumer group, sorted.
    #[must_use]
    pub fn consumer_ids(&self, group: &str) -> Vec<String> {
        self.clients.consumer_ids(group)
    }

    /// The consumer group's connections and settings as JSON (`ConsumerConnection`), `None`
    /// when no member is online.
    #[must_use]
    pub fn consumer_connection_json(&self, group: &str) -> Option<serde_json::Value> {
        self.clients.consumer_connection_json(group)
    }

    /// The producer group's connections as JSON (`ProducerConnection`), `None` when none.
    #[must_use]
    pub fn producer_connection_json(&self, group: &str) -> Option<serde_json::Value> {
        self.clients.producer_connection_json(group)
    }

    /// Topics `group` has committed offsets in (`whichTopicByConsumer`).
    #[must_use]
    pub fn topics_of_group(&self, group: &str) -> Vec<String> {
        self.offsets.topics_of_group(group)
    }

    /// The consumer groups of `topic` (`queryTopicConsumeByWho`): those online that
    /// subscribe to it and those that committed offsets in it.
    #[must_use]
    pub fn groups_of_topic(&self, topic: &str) -> std::collections::BTreeSet<String> {
        let mut groups = self.clients.groups_subscribed_to(topic);
        groups.extend(self.offsets.groups_of_topic(topic));
        groups
    }

    /// Each online member of a consumer group, by client id.
    #[must_use]
    pub fn consumer_members(&self, group: &str) -> Vec<ConsumerMember> {
        self.clients.consumer_members(group)
    }

    /// How to reach the producer with client id `client_id`, in whatever group.
    #[must_use]
    pub fn producer_by_client_id(&self, client_id: &str) -> Option<Outbound> {
        self.clients.producer_by_client_id(client_id)
    }

    /// Every producer group's members, as GET_ALL_PRODUCER_INFO's `ProducerTableInfo`.
    #[must_use]
    pub fn producer_table_json(&self) -> serde_json::Value {
        self.clients.producer_table_json()
    }

    /// Connections of a consumer group (to notify them).
    #[must_use]
    pub fn consumer_connections(&self, group: &str) -> Vec<ConnectionId> {
        self.clients.consumer_connections(group)
    }

    /// How many topics the online members of a consumer group subscribe to (0 when none
    /// is online).
    #[must_use]
    pub fn subscription_count(&self, group: &str) -> usize {
        self.clients.subscription_count(group)
    }

    /// The subscription a consumer group registered for `topic`.
    #[must_use]
    pub fn subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        self.clients.subscription(group, topic)
    }

    /// Whether any member of `group` has sent a heartbeat and is still connected (Java's
    /// `ConsumerManager` has a `ConsumerGroupInfo` for it).
    #[must_use]
    pub fn has_consumer_group(&self, group: &str) -> bool {
        self.clients.has_consumer_group(group)
    }

    /// The SQL92 selector `group` registered for `topic` by heartbeat
    /// (`ConsumerFilterManager.get`).
    #[must_use]
    pub fn consumer_filter(&self, topic: &str, group: &str) -> Option<Arc<ConsumerFilterData>> {
        self.filters.get(topic, group)
    }

    /// Marks the selectors of the groups among `changed` that have no member left dead
    /// (Java's UNREGISTER event).
    fn unregister_filters(&self, changed: &[String]) {
        let clean_after = self.runtime().filter_data_clean_time_span;
        let clean_after_ms = i64::try_from(clean_after.as_millis()).unwrap_or(i64::MAX);
        for group in changed {
            if !self.clients.has_consumer_group(group) {
                self.filters.unregister(group, now_ms(), clean_after_ms);
            }
        }
    }

    /// Whether the members of `group` said they consume by broadcast (`BROADCASTING`).
    #[must_use]
    pub fn consumes_by_broadcast(&self, group: &str) -> bool {
        self.clients.consumes_by_broadcast(group)
    }
}
