//! What a broker knows besides messages: topic configs (`topics.json`), subscription groups
//! (`subscriptionGroup.json`), committed consumer offsets (`consumerOffset.json`) and the
//! clients that sent heartbeats (`TopicConfigManager`, `SubscriptionGroupManager`,
//! `ConsumerOffsetManager`, `ConsumerManager`, `ProducerManager` in Java).
//!
//! Shared by every net shard. Reads on the send and pull paths take an immutable snapshot
//! (`ArcSwap`); changes — rare: admin requests, auto-creation, heartbeats, offset commits —
//! take a short lock. Files are written atomically (temp file, `.bak`, rename), on the
//! shard's blocking threads: a change to the topics or groups is answered once its file is
//! written, as Java persists before it answers, while the shard's other connections go on.

use super::stats::BrokerStats;
use crate::config::broker::BrokerConfig;
use crate::config::persist::{
    next_snapshot_version, read_with_backup, write_snapshot, write_snapshot_off_shard,
};
use crate::config::properties::{set_keys, Property};
use crate::remoting::headers::NotifyConsumerIdsChangedRequestHeader;
use crate::remoting::heartbeat::{HeartbeatData, MessageQueue, SubscriptionData};
use crate::remoting::server::{ConnectionId, Outbound};
use crate::remoting::{RemotingCommand, RequestCode};
use crate::store::config_files::{
    ConsumerOffsetTable, DataVersion, SubscriptionGroupConfig, TableEntry, TopicConfig,
    VersionedTable,
};
use arc_swap::ArcSwap;
pub use ferromq_protocol::calendar::now_ms;
pub use ferromq_protocol::names::*;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

/// The consumer offsets as `consumerOffset.json` lays them out.
fn offset_table(offsets: &BTreeMap<String, BTreeMap<i32, i64>>) -> ConsumerOffsetTable {
    ConsumerOffsetTable {
        offset_table: offsets
            .iter()
            .map(|(key, queues)| (key.clone(), queues.iter().map(|(q, o)| (*q, *o)).collect()))
            .collect(),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section below leaves its map consistent, so a poisoned lock is usable.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A versioned table kept in a file, with a lock-free snapshot of its entries by name.
#[derive(Debug)]
struct PersistedTable<T> {
    path: PathBuf,
    table: Mutex<VersionedTable<T>>,
    snapshot: ArcSwap<HashMap<String, T>>,
}

impl<T> PersistedTable<T>
where
    T: TableEntry + Clone,
{
    fn load(path: PathBuf) -> Result<PersistedTable<T>, String> {
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

    fn get(&self, name: &str) -> Option<T> {
        self.snapshot.load().get(name).cloned()
    }

    /// Applies `change` (returning whether it changed anything); if so bumps the version,
    /// publishes the snapshot and returns the file as it now stands, for the caller to write.
    fn update(&self, change: impl FnOnce(&mut VersionedTable<T>) -> bool) -> Option<TableFile> {
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
    fn take_masters(&self, body: &[u8]) -> Result<bool, String> {
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

    /// Publishes `table`'s entries to the snapshot; the file as it now stands.
    fn publish(&self, table: &VersionedTable<T>) -> TableFile {
        self.snapshot
            .store(Arc::new(table.entries.iter().cloned().collect()));
        TableFile {
            path: self.path.clone(),
            version: next_snapshot_version(),
            bytes: table.to_json().into_bytes(),
        }
    }

    fn entries(&self) -> (DataVersion, Vec<(String, T)>) {
        let table = lock(&self.table);
        (table.data_version, table.entries.clone())
    }
}

/// A config table's file as it stood after a change ([`PersistedTable::update`]); written
/// as a versioned snapshot, so that whichever order the writes of two changes run in, the
/// newer one stays.
#[derive(Debug)]
#[must_use = "the change reaches the disk only when its file is written"]
struct TableFile {
    path: PathBuf,
    version: u64,
    bytes: Vec<u8>,
}

impl TableFile {
    /// Writes it on the executor's blocking threads. Call from inside a glommio executor.
    async fn write(self) {
        let written = write_snapshot_off_shard(self.path.clone(), self.version, self.bytes).await;
        if let Err(error) = written {
            tracing::error!(path = %self.path.display(), %error, "cannot persist config");
        }
    }

    /// Writes it here, blocking (at start-up, before the shards run).
    fn write_now(self) {
        if let Err(error) = write_snapshot(&self.path, self.version, &self.bytes) {
            tracing::error!(path = %self.path.display(), %error, "cannot persist config");
        }
    }
}

/// Writes `file`, if a change made one.
async fn write_change(file: Option<TableFile>) {
    if let Some(file) = file {
        file.write().await;
    }
}

/// A client connection of a group.
#[derive(Clone, Debug)]
struct Member {
    client_id: String,
    client: ClientChannel,
    last_seen: Instant,
}

/// Where a client connects from and what it runs (`ClientChannelInfo`).
#[derive(Clone, Debug)]
pub struct ClientChannel {
    /// The connection.
    pub connection: ConnectionId,
    /// The peer's address.
    pub addr: std::net::SocketAddr,
    /// Its language name (`JAVA`, `RUST`, …).
    pub language: String,
    /// Its `MQVersion` ordinal.
    pub version: i32,
}

/// A consumer group's members and subscriptions.
#[derive(Clone, Debug, Default)]
struct ConsumerGroup {
    members: HashMap<ConnectionId, Member>,
    subscriptions: HashMap<String, SubscriptionData>,
    consume_type: Option<String>,
    message_model: Option<String>,
    consume_from_where: Option<String>,
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
    topics: PersistedTable<TopicConfig>,
    groups: PersistedTable<SubscriptionGroupConfig>,
    offsets_path: PathBuf,
    offsets: Mutex<BTreeMap<String, BTreeMap<i32, i64>>>,
    consumers: Mutex<HashMap<String, ConsumerGroup>>,
    producers: Mutex<HashMap<String, HashMap<ConnectionId, Member>>>,
    outbounds: Mutex<HashMap<ConnectionId, Outbound>>,
    /// Queue locks of orderly consumers.
    pub locks: LockTable,
    /// Messages stored and pulled, put latencies, TPS.
    pub stats: BrokerStats,
    /// Transactions ended lately, by their first half's queue offset.
    pub ended_transactions: super::transaction::EndedTransactions,
    /// The slaves this master feeds over the HA link.
    pub slaves: Arc<super::ha::SlaveProgress>,
    /// For a slave: its master's addresses, as the name server told them.
    pub master: Arc<super::ha_slave::MasterAddrs>,
    /// Changes of the topic table so far, and how many of them the name servers have been
    /// sent: they hear of a change at once, not at the next periodic registration, and a
    /// request that made a topic is answered after that (Java registers after every topic
    /// change, before it answers).
    topic_changes: AtomicU64,
    announced_changes: AtomicU64,
    /// Wakes the registration thread after a change (its permit is kept if none waits).
    pub registration_wanted: tokio::sync::Notify,
    /// The plain ACL rules, with `aclEnable`.
    pub acl: Option<Arc<super::acl::AclRules>>,
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
        let topics = PersistedTable::load(dir.join("topics.json"))?;
        let groups = PersistedTable::load(dir.join("subscriptionGroup.json"))?;
        let offsets_path = dir.join("consumerOffset.json");
        let offsets = load_offsets(&offsets_path)?;
        let locks = LockTable::new(config.rebalance_lock_max_live_time);
        let acl = match config.acl_enable {
            true => Some(Arc::new(super::acl::AclRules::load(&config.rocketmq_home)?)),
            false => None,
        };
        let mut tls = config.tls.clone();
        tls.apply_config_file()?;
        let server_tls = tls.server().map_err(|e| format!("TLS: {e}"))?;
        let own_tls = tls.own_client().map_err(|e| format!("TLS: {e}"))?;
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
            offsets_path,
            offsets: Mutex::new(offsets),
            consumers: Mutex::new(HashMap::new()),
            producers: Mutex::new(HashMap::new()),
            outbounds: Mutex::new(HashMap::new()),
            locks,
            stats: BrokerStats::new(shards, now_ms()),
            ended_transactions: super::transaction::EndedTransactions::default(),
            slaves: Arc::default(),
            master: Arc::default(),
            topic_changes: AtomicU64::new(0),
            announced_changes: AtomicU64::new(0),
            registration_wanted: tokio::sync::Notify::new(),
            acl,
            server_tls,
            own_tls,
        };
        state.add_system_topics();
        Ok(state)
    }

    fn add_system_topics(&self) {
        let config = &self.config;
        let read_write = PERM_READ | PERM_WRITE;
        // The cluster and broker topics are templates (inherit) that clients may also use
        // when `clusterTopicEnable` / `brokerTopicEnable` (`TopicConfigManager`).
        let named = |enabled: bool| PERM_INHERIT | if enabled { read_write } else { 0 };
        let mut system = Vec::new();
        system.push(("SELF_TEST_TOPIC".to_owned(), 1, read_write));
        if config.auto_create_topic_enable {
            system.push((
                AUTO_CREATE_TOPIC_KEY_TOPIC.to_owned(),
                config.default_topic_queue_nums,
                read_write | PERM_INHERIT,
            ));
        }
        system.push(("BenchmarkTest".to_owned(), 1024, read_write));
        system.push((
            config.broker_cluster_name.clone(),
            16,
            named(config.cluster_topic_enable),
        ));
        system.push((
            config.broker_name.clone(),
            1,
            named(config.broker_topic_enable),
        ));
        system.push(("OFFSET_MOVED_EVENT".to_owned(), 1, read_write));
        system.push(("SCHEDULE_TOPIC_XXXX".to_owned(), 18, read_write));
        if config.trace_topic_enable {
            system.push((config.msg_trace_topic_name.clone(), 1, read_write));
        }
        system.push((
            format!("{}_{REPLY_TOPIC_POSTFIX}", config.broker_cluster_name),
            1,
            read_write,
        ));
        let file = self.topics.update(|table| {
            let mut changed = false;
            for (topic, queues, perm) in system {
                if table.get(&topic).is_none() {
                    table.insert(TopicConfig {
                        read_queue_nums: queues,
                        write_queue_nums: queues,
                        perm,
                        ..TopicConfig::named(&topic)
                    });
                    changed = true;
                }
            }
            changed
        });
        // At start-up, before any shard runs.
        if let Some(file) = file {
            file.write_now();
        }
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
            write_change(self.topics.update(|_| true)).await;
            self.topics_changed();
        }
        accepted
    }

    /// Whether `topic` is a system topic (`TopicValidator.isSystemTopic`): one of
    /// [`SYSTEM_TOPICS`], the cluster's or the broker's own, the reply or trace topic, or
    /// a name with the system prefix.
    #[must_use]
    pub fn is_system_topic(&self, topic: &str) -> bool {
        let config = &self.config;
        SYSTEM_TOPICS.contains(&topic)
            || topic.starts_with(SYSTEM_TOPIC_PREFIX)
            || topic == config.broker_cluster_name
            || topic == config.broker_name
            || (config.trace_topic_enable && topic == config.msg_trace_topic_name)
            || topic
                .strip_prefix(config.broker_cluster_name.as_str())
                .and_then(|rest| rest.strip_prefix('_'))
                == Some(REPLY_TOPIC_POSTFIX)
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
        if let Some(config) = self.topics.get(topic) {
            return Some(config);
        }
        let template = self.topics.get(default_topic)?;
        // Without `autoCreateTopicEnable` the `TBW102` template creates nothing
        // (`createTopicInSendMessageMethod`), even if it is still in the table.
        let auto_create = self.runtime().auto_create_topic_enable;
        if template.perm & PERM_INHERIT == 0
            || (default_topic == AUTO_CREATE_TOPIC_KEY_TOPIC && !auto_create)
        {
            return None;
        }
        let queues = queue_nums.clamp(1, template.write_queue_nums.max(1));
        let created = TopicConfig {
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: template.perm & !PERM_INHERIT,
            topic_sys_flag: 0,
            ..TopicConfig::named(topic)
        };
        self.put_topic(created.clone()).await;
        tracing::info!(topic, queues, "auto-created topic");
        Some(created)
    }

    /// Creates `topic` if absent with `queues` queues (retry topics and the like).
    pub async fn ensure_topic(&self, topic: &str, queues: i32, perm: i32) -> TopicConfig {
        if let Some(config) = self.topics.get(topic) {
            return config;
        }
        let config = TopicConfig {
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm,
            ..TopicConfig::named(topic)
        };
        self.put_topic(config.clone()).await;
        config
    }

    /// Adds or replaces a topic's config; ends once `topics.json` holds it.
    pub async fn put_topic(&self, config: TopicConfig) {
        let file = self.topics.update(|table| {
            if table.get(&config.topic_name) == Some(&config) {
                return false;
            }
            table.insert(config);
            true
        });
        let changed = file.is_some();
        if changed {
            self.topics_changed();
        }
        write_change(file).await;
        if changed {
            self.until_announced().await;
        }
    }

    /// Removes a topic's config; whether it existed. Ends once `topics.json` lacks it.
    pub async fn delete_topic(&self, topic: &str) -> bool {
        let file = self.topics.update(|table| {
            let before = table.entries.len();
            table.entries.retain(|(name, _)| name != topic);
            table.entries.len() != before
        });
        let existed = file.is_some();
        if existed {
            self.topics_changed();
        }
        write_change(file).await;
        existed
    }

    /// Counts a change of the topic table and wakes the registration thread.
    fn topics_changed(&self) {
        self.topic_changes.fetch_add(1, Ordering::AcqRel);
        self.registration_wanted.notify_one();
    }

    /// The topic-table changes so far: a registration that reads the table after this call
    /// covers them ([`Self::announced`]).
    pub fn topic_changes(&self) -> u64 {
        self.topic_changes.load(Ordering::Acquire)
    }

    /// Whether the topic table changed since the name servers were last sent it.
    pub fn registration_due(&self) -> bool {
        self.topic_changes() > self.announced_changes.load(Ordering::Acquire)
    }

    /// The name servers have been sent the table as it was after `changes` changes.
    pub fn announced(&self, changes: u64) {
        self.announced_changes.fetch_max(changes, Ordering::AcqRel);
    }

    /// Waits (on a shard) until the name servers have been sent the topic table as it is now,
    /// at most [`ANNOUNCE_WAIT`]: a client that made a topic (a new group's retry topic at its
    /// heartbeat, an auto-created or admin-created one) finds its route once answered. Java
    /// registers synchronously in the request's thread (`registerBrokerAll`).
    async fn until_announced(&self) {
        if self.config.namesrv_addr.is_empty() {
            return;
        }
        let changes = self.topic_changes();
        let deadline = Instant::now() + ANNOUNCE_WAIT;
        while self.announced_changes.load(Ordering::Acquire) < changes {
            if Instant::now() >= deadline {
                tracing::warn!("the name servers have not taken the new topic table yet");
                return;
            }
            glommio::timer::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    /// Every topic's config with the table's version (for registration and admin).
    #[must_use]
    pub fn topics(&self) -> (DataVersion, Vec<(String, TopicConfig)>) {
        self.topics.entries()
    }

    /// A subscription group's config, creating it with Java's defaults when
    /// `autoCreateSubscriptionGroup` allows.
    pub async fn group_or_create(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        if let Some(config) = self.groups.get(group) {
            return Some(config);
        }
        if !self.runtime().auto_create_subscription_group {
            return None;
        }
        let config = SubscriptionGroupConfig::new(group);
        self.put_group(config.clone()).await;
        Some(config)
    }

    /// Adds or replaces a subscription group; ends once `subscriptionGroup.json` holds it.
    pub async fn put_group(&self, config: SubscriptionGroupConfig) {
        let file = self.groups.update(|table| {
            if table.get(&config.group_name) == Some(&config) {
                return false;
            }
            table.insert(config);
            true
        });
        write_change(file).await;
    }

    /// Removes a subscription group; whether it existed. Ends once `subscriptionGroup.json`
    /// lacks it.
    pub async fn delete_group(&self, group: &str) -> bool {
        let file = self.groups.update(|table| {
            let before = table.entries.len();
            table.entries.retain(|(name, _)| name != group);
            table.entries.len() != before
        });
        let existed = file.is_some();
        write_change(file).await;
        existed
    }

    /// `subscriptionGroup.json` as it stands.
    #[must_use]
    pub fn groups_json(&self) -> String {
        lock(&self.groups.table).to_json()
    }

    /// `topics.json` as it stands.
    #[must_use]
    pub fn topics_json(&self) -> String {
        lock(&self.topics.table).to_json()
    }

    /// Every subscription group with the table's version.
    #[must_use]
    pub fn groups(&self) -> (DataVersion, Vec<(String, SubscriptionGroupConfig)>) {
        self.groups.entries()
    }

    /// The committed offset of `group` in a queue.
    #[must_use]
    pub fn committed_offset(&self, group: &str, topic: &str, queue_id: i32) -> Option<i64> {
        lock(&self.offsets)
            .get(&format!("{topic}@{group}"))?
            .get(&queue_id)
            .copied()
    }

    /// Commits `offset` for `group` in a queue (persisted every
    /// `flushConsumerOffsetInterval`).
    pub fn commit_offset(&self, group: &str, topic: &str, queue_id: i32, offset: i64) {
        lock(&self.offsets)
            .entry(format!("{topic}@{group}"))
            .or_default()
            .insert(queue_id, offset);
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
        match ConsumerOffsetTable::parse(offsets) {
            Ok(table) => {
                let mut mine = lock(&self.offsets);
                let mut moved = false;
                for (key, queues) in table.offset_table {
                    let queues: BTreeMap<i32, i64> = queues.into_iter().collect();
                    if mine.get(&key) != Some(&queues) {
                        mine.insert(key, queues);
                        moved = true;
                    }
                }
                drop(mine);
                if moved {
                    if let Err(e) = self.persist_offsets() {
                        problems.push(format!("consumer offsets not written: {e}"));
                    }
                    changed.push("consumer offsets");
                }
            }
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
        let table = offset_table(&lock(&self.offsets));
        table.to_json()
    }

    /// `consumerOffset.json` and its snapshot version, taken together.
    fn offsets_snapshot(&self) -> (u64, String) {
        let offsets = lock(&self.offsets);
        let version = next_snapshot_version();
        let table = offset_table(&offsets);
        drop(offsets);
        (version, table.to_json())
    }

    /// Writes `consumerOffset.json` (unless a newer snapshot is written already).
    ///
    /// # Errors
    /// The I/O error.
    pub fn persist_offsets(&self) -> std::io::Result<()> {
        let (version, json) = self.offsets_snapshot();
        write_snapshot(&self.offsets_path, version, json.as_bytes()).map(|_| ())
    }

    /// Writes `consumerOffset.json` without blocking the calling shard (see
    /// [`write_snapshot_off_shard`]).
    ///
    /// # Errors
    /// The I/O error.
    pub async fn persist_offsets_off_shard(&self) -> std::io::Result<()> {
        let (version, json) = self.offsets_snapshot();
        write_snapshot_off_shard(self.offsets_path.clone(), version, json.into_bytes())
            .await
            .map(|_| ())
    }

    /// Remembers how to reach `connection` with requests of the broker's own.
    pub fn connection_opened(&self, connection: ConnectionId, outbound: Outbound) {
        lock(&self.outbounds).insert(connection, outbound);
    }

    /// Tells every member of `group` that its members changed
    /// (NOTIFY_CONSUMER_IDS_CHANGED, oneway), so that they rebalance at once instead of at
    /// their next timer (`notifyConsumerIdsChangedEnable`).
    pub fn notify_consumer_ids_changed(&self, group: &str) {
        let enabled = self
            .groups
            .get(group)
            .is_none_or(|config| config.notify_consumer_ids_changed_enable);
        if !enabled {
            return;
        }
        let members = self.consumer_connections(group);
        let outbounds = lock(&self.outbounds);
        let header = NotifyConsumerIdsChangedRequestHeader {
            consumer_group: group.to_owned(),
        };
        for member in members {
            if let Some(outbound) = outbounds.get(&member) {
                let request = RemotingCommand::request_with_header(
                    RequestCode::NOTIFY_CONSUMER_IDS_CHANGED,
                    &header,
                );
                outbound.send_oneway(request);
            }
        }
    }

    /// Records a heartbeat from `connection`; returns the consumer groups whose membership
    /// changed (their members are notified).
    pub fn heartbeat(&self, client: &ClientChannel, data: &HeartbeatData) -> Vec<String> {
        let connection = client.connection;
        let now = Instant::now();
        let mut changed = Vec::new();
        {
            let mut consumers = lock(&self.consumers);
            for consumer in &data.consumer_data_set {
                let group = consumers.entry(consumer.group_name.clone()).or_default();
                let member = Member {
                    client_id: data.client_id.clone(),
                    client: client.clone(),
                    last_seen: now,
                };
                group.consume_type.clone_from(&consumer.consume_type);
                group.message_model.clone_from(&consumer.message_model);
                group
                    .consume_from_where
                    .clone_from(&consumer.consume_from_where);
                if group.members.insert(connection, member).is_none() {
                    changed.push(consumer.group_name.clone());
                }
                for subscription in &consumer.subscription_data_set {
                    let replace = group
                        .subscriptions
                        .get(&subscription.topic)
                        .is_none_or(|old| old.sub_version < subscription.sub_version);
                    if replace {
                        group
                            .subscriptions
                            .insert(subscription.topic.clone(), subscription.clone());
                    }
                }
            }
        }
        let mut producers = lock(&self.producers);
        for producer in &data.producer_data_set {
            producers
                .entry(producer.group_name.clone())
                .or_default()
                .insert(
                    connection,
                    Member {
                        client_id: data.client_id.clone(),
                        client: client.clone(),
                        last_seen: now,
                    },
                );
        }
        drop(producers);
        for group in &changed {
            self.notify_consumer_ids_changed(group);
        }
        changed
    }

    /// Removes `connection` from a group (UNREGISTER_CLIENT), or from every group when
    /// `group` is `None` (connection closed); returns consumer groups that changed (their
    /// remaining members are notified).
    pub fn unregister(&self, connection: ConnectionId, group: Option<&str>) -> Vec<String> {
        if group.is_none() {
            lock(&self.outbounds).remove(&connection);
        }
        let mut changed = Vec::new();
        let mut consumers = lock(&self.consumers);
        for (name, members) in consumers.iter_mut() {
            if group.is_none_or(|g| g == name) && members.members.remove(&connection).is_some() {
                changed.push(name.clone());
            }
        }
        consumers.retain(|_, g| !g.members.is_empty());
        drop(consumers);
        let mut producers = lock(&self.producers);
        for (name, members) in producers.iter_mut() {
            if group.is_none_or(|g| g == name) {
                members.remove(&connection);
            }
        }
        producers.retain(|_, m| !m.is_empty());
        drop(producers);
        for group in &changed {
            self.notify_consumer_ids_changed(group);
        }
        changed
    }

    /// Drops members silent for `channelExpiredTimeout`; returns groups that changed.
    pub fn expire_clients(&self) -> Vec<String> {
        let timeout = self.config.channel_expired_timeout;
        let mut changed = Vec::new();
        let mut consumers = lock(&self.consumers);
        for (name, group) in consumers.iter_mut() {
            let before = group.members.len();
            group.members.retain(|_, m| m.last_seen.elapsed() < timeout);
            if group.members.len() != before {
                changed.push(name.clone());
            }
        }
        consumers.retain(|_, g| !g.members.is_empty());
        drop(consumers);
        for group in &changed {
            self.notify_consumer_ids_changed(group);
        }
        changed
    }

    /// A way to reach one live producer of `group` (`ProducerManager.getAvailableChannel`):
    /// the one heard from last.
    #[must_use]
    pub fn producer_outbound(&self, group: &str) -> Option<Outbound> {
        let producers = lock(&self.producers);
        let mut members: Vec<(&ConnectionId, &Member)> = producers.get(group)?.iter().collect();
        members.sort_by_key(|(_, member)| std::cmp::Reverse(member.last_seen));
        let outbounds = lock(&self.outbounds);
        members
            .into_iter()
            .find_map(|(connection, _)| outbounds.get(connection).cloned())
    }

    /// Client ids of a consumer group, sorted.
    #[must_use]
    pub fn consumer_ids(&self, group: &str) -> Vec<String> {
        let consumers = lock(&self.consumers);
        let mut ids: Vec<String> = consumers
            .get(group)
            .map(|g| g.members.values().map(|m| m.client_id.clone()).collect())
            .unwrap_or_default();
        ids.sort();
        ids.dedup();
        ids
    }

    /// The consumer group's connections and settings as JSON (`ConsumerConnection`), `None`
    /// when no member is online.
    #[must_use]
    pub fn consumer_connection_json(&self, group: &str) -> Option<serde_json::Value> {
        let consumers = lock(&self.consumers);
        let group = consumers.get(group).filter(|g| !g.members.is_empty())?;
        let connections: Vec<serde_json::Value> =
            group.members.values().map(connection_json).collect();
        let subscriptions: serde_json::Map<String, serde_json::Value> = group
            .subscriptions
            .iter()
            .map(|(topic, s)| {
                let value = serde_json::json!({
                    "classFilterMode": s.class_filter_mode,
                    "topic": s.topic, "subString": s.sub_string, "tagsSet": s.tags_set,
                    "codeSet": s.code_set, "subVersion": s.sub_version,
                    "expressionType": s.expression_type.as_deref().unwrap_or("TAG"),
                });
                (topic.clone(), value)
            })
            .collect();
        Some(serde_json::json!({
            "connectionSet": connections,
            "consumeFromWhere": group.consume_from_where,
            "consumeType": group.consume_type,
            "messageModel": group.message_model,
            "subscriptionTable": subscriptions,
        }))
    }

    /// The producer group's connections as JSON (`ProducerConnection`), `None` when none.
    #[must_use]
    pub fn producer_connection_json(&self, group: &str) -> Option<serde_json::Value> {
        let producers = lock(&self.producers);
        let members = producers.get(group).filter(|m| !m.is_empty())?;
        let connections: Vec<serde_json::Value> = members.values().map(connection_json).collect();
        Some(serde_json::json!({ "connectionSet": connections }))
    }

    /// Topics `group` has committed offsets in (`whichTopicByConsumer`).
    #[must_use]
    pub fn topics_of_group(&self, group: &str) -> Vec<String> {
        let suffix = format!("@{group}");
        lock(&self.offsets)
            .keys()
            .filter_map(|key| key.strip_suffix(&suffix).map(str::to_owned))
            .collect()
    }

    /// The consumer groups of `topic` (`queryTopicConsumeByWho`): those online that
    /// subscribe to it and those that committed offsets in it.
    #[must_use]
    pub fn groups_of_topic(&self, topic: &str) -> std::collections::BTreeSet<String> {
        let mut groups: std::collections::BTreeSet<String> = lock(&self.consumers)
            .iter()
            .filter(|(_, group)| group.subscriptions.contains_key(topic))
            .map(|(name, _)| name.clone())
            .collect();
        // Keys are `topic@group`; topic names cannot hold an `@`.
        groups.extend(lock(&self.offsets).keys().filter_map(|key| {
            let (key_topic, group) = key.split_once('@')?;
            (key_topic == topic).then(|| group.to_owned())
        }));
        groups
    }

    /// How to reach each member of a consumer group, with its `MQVersion` ordinal.
    #[must_use]
    pub fn consumer_outbounds(&self, group: &str) -> Vec<(Outbound, i32)> {
        let consumers = lock(&self.consumers);
        let Some(members) = consumers.get(group) else {
            return Vec::new();
        };
        let outbounds = lock(&self.outbounds);
        members
            .members
            .iter()
            .filter_map(|(connection, member)| {
                let outbound = outbounds.get(connection)?.clone();
                Some((outbound, member.client.version))
            })
            .collect()
    }

    /// Connections of a consumer group (to notify them).
    #[must_use]
    pub fn consumer_connections(&self, group: &str) -> Vec<ConnectionId> {
        lock(&self.consumers)
            .get(group)
            .map(|g| g.members.keys().copied().collect())
            .unwrap_or_default()
    }

    /// How many topics the online members of a consumer group subscribe to (0 when none
    /// is online).
    #[must_use]
    pub fn subscription_count(&self, group: &str) -> usize {
        lock(&self.consumers)
            .get(group)
            .map_or(0, |g| g.subscriptions.len())
    }

    /// The subscription a consumer group registered for `topic`.
    #[must_use]
    pub fn subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        lock(&self.consumers)
            .get(group)?
            .subscriptions
            .get(topic)
            .cloned()
    }

    /// Whether any member of `group` has sent a heartbeat and is still connected (Java's
    /// `ConsumerManager` has a `ConsumerGroupInfo` for it).
    #[must_use]
    pub fn has_consumer_group(&self, group: &str) -> bool {
        lock(&self.consumers).contains_key(group)
    }

    /// Whether the members of `group` said they consume by broadcast (`BROADCASTING`).
    #[must_use]
    pub fn consumes_by_broadcast(&self, group: &str) -> bool {
        lock(&self.consumers)
            .get(group)
            .is_some_and(|g| g.message_model.as_deref() == Some("BROADCASTING"))
    }
}

fn load_offsets(path: &Path) -> Result<BTreeMap<String, BTreeMap<i32, i64>>, String> {
    let accept = |bytes: &[u8]| ConsumerOffsetTable::parse(bytes).is_ok();
    let table = match read_with_backup(path, accept) {
        Ok(Some(bytes)) => {
            ConsumerOffsetTable::parse(&bytes).map_err(|e| format!("{}: {e}", path.display()))?
        }
        Ok(None) => ConsumerOffsetTable::default(),
        Err(error) => return Err(format!("{}: {error}", path.display())),
    };
    Ok(table
        .offset_table
        .into_iter()
        .map(|(key, queues)| (key, queues.into_iter().collect()))
        .collect())
}

/// How long a request that changed the topic table waits for the name servers to be sent
/// it: less than a Java client's 3 s request timeout, so that a dead name server delays the
/// answer instead of failing it.
const ANNOUNCE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// How long a queue lock lasts without renewal by default (`rebalanceLockMaxLiveTime`, 60 s;
/// [`BrokerConfig::rebalance_lock_max_live_time`] sets it).
pub const REBALANCE_LOCK_MAX_LIVE_TIME: std::time::Duration = std::time::Duration::from_secs(60);

/// Who holds a queue of a group, and since when (`LockEntry`).
#[derive(Clone, Debug)]
struct LockEntry {
    client_id: String,
    renewed: Instant,
}

/// The queue locks of orderly consumers (`RebalanceLockManager`).
#[derive(Debug)]
pub struct LockTable {
    groups: Mutex<HashMap<String, HashMap<MessageQueue, LockEntry>>>,
    max_live_time: std::time::Duration,
}

impl Default for LockTable {
    fn default() -> Self {
        LockTable::new(REBALANCE_LOCK_MAX_LIVE_TIME)
    }
}

impl LockTable {
    /// A table whose locks expire `max_live_time` after their last renewal.
    #[must_use]
    pub fn new(max_live_time: std::time::Duration) -> LockTable {
        LockTable {
            groups: Mutex::new(HashMap::new()),
            max_live_time,
        }
    }

    /// Locks (or renews) each queue free, expired or already held by `client_id`; returns
    /// the queues `client_id` now holds (`tryLockBatch`).
    pub fn lock(&self, group: &str, client_id: &str, queues: &[MessageQueue]) -> Vec<MessageQueue> {
        let mut groups = lock(&self.groups);
        let table = groups.entry(group.to_owned()).or_default();
        let now = Instant::now();
        let mut locked = Vec::new();
        for queue in queues {
            let free = table.get(queue).is_none_or(|entry| {
                entry.client_id == client_id
                    || now.duration_since(entry.renewed) > self.max_live_time
            });
            if free {
                table.insert(
                    queue.clone(),
                    LockEntry {
                        client_id: client_id.to_owned(),
                        renewed: now,
                    },
                );
                locked.push(queue.clone());
            }
        }
        locked
    }

    /// Releases the queues `client_id` holds (`unlockBatch`).
    pub fn unlock(&self, group: &str, client_id: &str, queues: &[MessageQueue]) {
        let mut groups = lock(&self.groups);
        if let Some(table) = groups.get_mut(group) {
            for queue in queues {
                if table.get(queue).is_some_and(|e| e.client_id == client_id) {
                    table.remove(queue);
                }
            }
        }
    }
}

fn connection_json(member: &Member) -> serde_json::Value {
    serde_json::json!({
        "clientAddr": member.client.addr.to_string(),
        "clientId": member.client_id,
        "language": member.client.language,
        "version": member.client.version,
    })
}
