//! The topic table (`topics.json`, Java's `TopicConfigManager`): the system topics a broker
//! always has, auto-creation at a send, and how far the name servers have been told of it.
//!
//! Invariants: the system topics are in the table once the broker state has loaded; every change of
//! the table counts one topic change and wakes the registration thread, and
//! `announced <= changes` (the registration thread reports a count it read from
//! [`Topics::changes`]). Reads on the send path ([`Topics::get`]) take the table's
//! lock-free snapshot; the table's lock is taken only by changes (admin requests, the first
//! send to a new topic, a new group's retry topic) and whole-table reads.

use super::persisted::{write_change, PersistedTable};
use crate::config::broker::BrokerConfig;
use crate::store::config_files::{DataVersion, TopicConfig};
use ferromq_protocol::names::{
    AUTO_CREATE_TOPIC_KEY_TOPIC, PERM_INHERIT, PERM_READ, PERM_WRITE, REPLY_TOPIC_POSTFIX,
    SYSTEM_TOPICS, SYSTEM_TOPIC_PREFIX,
};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// How long a request that changed the topic table waits for the name servers to be sent
/// it: less than a Java client's 3 s request timeout, so that a dead name server delays the
/// answer instead of failing it.
const ANNOUNCE_WAIT: Duration = Duration::from_secs(2);

/// The topic table and its announcement to the name servers.
#[doc(alias = "TopicConfigManager")]
#[derive(Debug)]
pub(super) struct Topics {
    table: PersistedTable<TopicConfig>,
    /// The names that make a topic a system topic besides [`SYSTEM_TOPICS`].
    own: OwnTopicNames,
    /// Whether name servers are configured, so that a change waits for them to hear of it.
    announce: bool,
    /// Changes of the table so far, and how many of them the name servers have been sent:
    /// they hear of a change at once, not at the next periodic registration, and a request
    /// that made a topic is answered after that (Java registers after every topic change,
    /// before it answers).
    changes: AtomicU64,
    announced: AtomicU64,
}

/// The cluster's and broker's own topic names and the trace topic, as the broker started.
#[derive(Debug)]
struct OwnTopicNames {
    cluster: String,
    broker: String,
    trace: Option<String>,
}

impl Topics {
    /// Loads `topics.json` from `dir`; [`Topics::add_system_topics`] completes it.
    ///
    /// # Errors
    /// A file that exists but is not valid (named in the message).
    pub(super) fn load(dir: &Path, config: &BrokerConfig) -> Result<Topics, String> {
        let topics = Topics {
            table: PersistedTable::load(dir.join("topics.json"))?,
            own: OwnTopicNames {
                cluster: config.broker_cluster_name.clone(),
                broker: config.broker_name.clone(),
                trace: config
                    .trace_topic_enable
                    .then(|| config.msg_trace_topic_name.clone()),
            },
            announce: !config.namesrv_addr.is_empty(),
            changes: AtomicU64::new(0),
            announced: AtomicU64::new(0),
        };
        Ok(topics)
    }

    /// Adds the system topics `config` asks for, writing the file here if any was missing
    /// (at start-up, before any shard runs).
    pub(super) fn add_system_topics(&self, config: &BrokerConfig) {
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
        let file = self.table.update(|table| {
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

    /// Whether `topic` is a system topic (`TopicValidator.isSystemTopic`).
    pub(super) fn is_system(&self, topic: &str) -> bool {
        let own = &self.own;
        SYSTEM_TOPICS.contains(&topic)
            || topic.starts_with(SYSTEM_TOPIC_PREFIX)
            || topic == own.cluster
            || topic == own.broker
            || own.trace.as_deref() == Some(topic)
            || topic
                .strip_prefix(own.cluster.as_str())
                .and_then(|rest| rest.strip_prefix('_'))
                == Some(REPLY_TOPIC_POSTFIX)
    }

    /// A topic's config, from the snapshot (no lock).
    pub(super) fn get(&self, topic: &str) -> Option<TopicConfig> {
        self.table.get(topic)
    }

    /// The config of `topic`, created from the `default_topic` template when it allows
    /// (`createTopicInSendMessageMethod`); `auto_create` is the runtime
    /// `autoCreateTopicEnable`.
    pub(super) async fn get_or_create(
        &self,
        topic: &str,
        default_topic: &str,
        queue_nums: i32,
        auto_create: bool,
        wake: &Notify,
    ) -> Option<TopicConfig> {
        if let Some(config) = self.table.get(topic) {
            return Some(config);
        }
        let template = self.table.get(default_topic)?;
        // Without `autoCreateTopicEnable` the `TBW102` template creates nothing
        // (`createTopicInSendMessageMethod`), even if it is still in the table.
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
        self.put(created.clone(), wake).await;
        tracing::info!(topic, queues, "auto-created topic");
        Some(created)
    }

    /// The config of `topic`, created with `queues` queues and `perm` if absent.
    pub(super) async fn ensure(
        &self,
        topic: &str,
        queues: i32,
        perm: i32,
        wake: &Notify,
    ) -> TopicConfig {
        if let Some(config) = self.table.get(topic) {
            return config;
        }
        let config = TopicConfig {
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm,
            ..TopicConfig::named(topic)
        };
        self.put(config.clone(), wake).await;
        config
    }

    /// Adds or replaces a topic's config; ends once `topics.json` holds it and the name
    /// servers have been sent it.
    pub(super) async fn put(&self, config: TopicConfig, wake: &Notify) {
        let file = self.table.update(|table| {
            if table.get(&config.topic_name) == Some(&config) {
                return false;
            }
            table.insert(config);
            true
        });
        let changed = file.is_some();
        if changed {
            self.changed(wake);
        }
        write_change(file).await;
        if changed {
            self.until_announced().await;
        }
    }

    /// Removes a topic's config; whether it existed. Ends once `topics.json` lacks it.
    pub(super) async fn delete(&self, topic: &str, wake: &Notify) -> bool {
        let file = self.table.update(|table| {
            let before = table.entries.len();
            table.entries.retain(|(name, _)| name != topic);
            table.entries.len() != before
        });
        let existed = file.is_some();
        if existed {
            self.changed(wake);
        }
        write_change(file).await;
        existed
    }

    /// A new table version with the same topics, so that name servers take the routes again
    /// (as Java does after a change of `brokerPermission`); ends once `topics.json` has it.
    pub(super) async fn bump_version(&self, wake: &Notify) {
        write_change(self.table.update(|_| true)).await;
        self.changed(wake);
    }

    /// The topic-table changes so far.
    pub(super) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// Whether the table changed since the name servers were last sent it.
    pub(super) fn registration_due(&self) -> bool {
        self.changes() > self.announced.load(Ordering::Acquire)
    }

    /// The name servers have been sent the table as it was after `changes` changes.
    pub(super) fn announced(&self, changes: u64) {
        assert!(changes <= self.changes(), "announced a change not made yet");
        self.announced.fetch_max(changes, Ordering::AcqRel);
    }

    /// Every topic's config with the table's version.
    pub(super) fn entries(&self) -> (DataVersion, Vec<(String, TopicConfig)>) {
        self.table.entries()
    }

    /// `topics.json` as it stands.
    pub(super) fn to_json(&self) -> String {
        self.table.to_json()
    }

    /// A master's table taken whole when its version differs (see
    /// [`PersistedTable::take_masters`]).
    pub(super) fn take_masters(&self, body: &[u8]) -> Result<bool, String> {
        self.table.take_masters(body)
    }

    /// Counts a change of the table and wakes the registration thread.
    fn changed(&self, wake: &Notify) {
        self.changes.fetch_add(1, Ordering::AcqRel);
        wake.notify_one();
    }

    /// Waits (on a shard) until the name servers have been sent the table as it is now, at
    /// most [`ANNOUNCE_WAIT`]: a client that made a topic (a new group's retry topic at its
    /// heartbeat, an auto-created or admin-created one) finds its route once answered. Java
    /// registers synchronously in the request's thread (`registerBrokerAll`).
    async fn until_announced(&self) {
        if !self.announce {
            return;
        }
        let changes = self.changes();
        let deadline = Instant::now() + ANNOUNCE_WAIT;
        while self.announced.load(Ordering::Acquire) < changes {
            if Instant::now() >= deadline {
                tracing::warn!("the name servers have not taken the new topic table yet");
                return;
            }
            glommio::timer::sleep(Duration::from_millis(2)).await;
        }
    }
}
