//! Topic settings shared by the broker's `topics.json`, its registration with the name
//! server and admin requests: `TopicConfig` and the `DataVersion` stamp of a config table
//! (Java `org.apache.rocketmq.common.TopicConfig` and `DataVersion`).
//!
//! Reading is lenient: missing fields take Java's defaults, unknown fields are ignored.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A broker's topic-config version (`DataVersion` in Java).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct DataVersion {
    /// Change counter.
    pub counter: i64,
    /// 5.x state version (election epoch); 0 from 4.x brokers.
    pub state_version: i64,
    /// Time of the last change, ms since the epoch.
    pub timestamp: i64,
}

/// One topic's configuration as a broker reports it (`TopicConfig` in Java).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfig {
    /// Topic name.
    pub topic_name: String,
    /// Readable queues.
    pub read_queue_nums: i32,
    /// Writable queues.
    pub write_queue_nums: i32,
    /// Permission bits (`PermName`): 4 read, 2 write, 1 inherit.
    pub perm: i32,
    /// `SINGLE_TAG` or `MULTI_TAG`.
    pub topic_filter_type: String,
    /// System flag bits (unit, unit-sub).
    pub topic_sys_flag: i32,
    /// Ordered topic.
    pub order: bool,
    /// 5.x attributes (e.g. `message.type`); absent from 4.x.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub attributes: BTreeMap<String, String>,
}

impl Default for TopicConfig {
    fn default() -> Self {
        TopicConfig {
            topic_name: String::new(),
            read_queue_nums: 16,
            write_queue_nums: 16,
            perm: 6,
            topic_filter_type: "SINGLE_TAG".into(),
            topic_sys_flag: 0,
            order: false,
            attributes: BTreeMap::new(),
        }
    }
}

impl TopicConfig {
    /// A topic with Java's default settings (16 queues, read-write).
    #[must_use]
    pub fn named(topic: &str) -> TopicConfig {
        TopicConfig {
            topic_name: topic.to_owned(),
            ..TopicConfig::default()
        }
    }

    /// Parses the space-separated text form used inside a compressed registration body:
    /// `name readQueueNums writeQueueNums perm filterType [attributesJson]`.
    #[must_use]
    pub fn decode_text(text: &str) -> Option<TopicConfig> {
        let mut parts = text.splitn(6, ' ');
        let topic_name = parts.next()?.to_owned();
        let read_queue_nums = parts.next()?.parse().ok()?;
        let write_queue_nums = parts.next()?.parse().ok()?;
        let perm = parts.next()?.parse().ok()?;
        let topic_filter_type = parts.next()?.to_owned();
        let attributes = match parts.next() {
            Some(json) => serde_json::from_str(json).ok()?,
            None => BTreeMap::new(),
        };
        Some(TopicConfig {
            topic_name,
            read_queue_nums,
            write_queue_nums,
            perm,
            topic_filter_type,
            attributes,
            ..TopicConfig::default()
        })
    }
}
