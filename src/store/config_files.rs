//! The JSON config files under `config/`, read and written in the exact shape Java 4.9.x gives
//! them (`reference/store-format.md` §11): `topics.json` ([`TopicConfigTable`]),
//! `subscriptionGroup.json` ([`SubscriptionGroupTable`]), `consumerOffset.json`
//! ([`ConsumerOffsetTable`]) and `delayOffset.json` ([`DelayOffsetTable`]).
//!
//! All four are fastjson's `PrettyFormat`: one member per line, one tab per nesting level,
//! `"key":value` with no spaces, bean fields in alphabetical order, an empty map as `{}`, and no
//! newline at the end of the file.
//!
//! ```text
//! {
//! <TAB>"dataVersion":{
//! <TAB><TAB>"counter":5,
//! <TAB><TAB>"timestamp":1795964365247
//! <TAB>},
//! <TAB>"topicConfigTable":{
//! <TAB><TAB>"TopicA":{
//! <TAB><TAB><TAB>"order":false,
//! <TAB><TAB><TAB>"perm":6,
//! <TAB><TAB><TAB>"readQueueNums":4,
//! <TAB><TAB><TAB>"topicFilterType":"SINGLE_TAG",
//! <TAB><TAB><TAB>"topicName":"TopicA",
//! <TAB><TAB><TAB>"topicSysFlag":0,
//! <TAB><TAB><TAB>"writeQueueNums":4
//! <TAB><TAB>}
//! <TAB>}
//! }
//! ```
//!
//! Integer-keyed maps are the exception: fastjson puts their entries on one line with bare
//! keys and the closing brace on the next.
//!
//! ```text
//! {
//! <TAB>"offsetTable":{
//! <TAB><TAB>"TopicA@group":{0:150,1:150
//! <TAB><TAB>},
//! <TAB><TAB>"%RETRY%group@group":{0:1
//! <TAB><TAB>}
//! <TAB>}
//! }
//! ```
//!
//! Map order: Java writes these maps from a `ConcurrentHashMap`, so its files are in hash
//! order. Here every table is a `Vec` that keeps the order entries were read or inserted in:
//! a file read and written back is byte for byte what Java wrote, and an entry added here goes
//! last rather than where Java's hash would put it. Java reads any order.
//!
//! Reading is lenient, as fastjson is: keys quoted or bare, unknown fields ignored, missing
//! fields take Java's defaults. 5.x additions are read too: `dataVersion.stateVersion` and a
//! topic's `attributes` are kept (and written back only when set, so a 4.x file stays a 4.x
//! file); `forbiddenTable`, `groupTopicMap` and the 5.x subscription-group fields
//! (`groupRetryPolicy`, `consumeMessageOrderly`, `attributes`, ...) are dropped, as a 4.9
//! broker drops them.

use crate::config::fastjson::parse_lenient;
pub use crate::config::topic::{DataVersion, TopicConfig};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

/// A versioned config table in file order: `topics.json` ([`TopicConfigTable`]) and
/// `subscriptionGroup.json` ([`SubscriptionGroupTable`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VersionedTable<T> {
    /// Version of the table; the broker bumps it on every change.
    pub data_version: DataVersion,
    /// Name → entry, in file order (see the module doc on map order).
    pub entries: Vec<(String, T)>,
}

/// `topics.json`: every topic's config and the table's version.
#[doc(alias = "TopicConfigSerializeWrapper")]
#[doc(alias = "TopicConfigManager")]
pub type TopicConfigTable = VersionedTable<TopicConfig>;

/// `subscriptionGroup.json`: every consumer group's settings and the table's version.
#[doc(alias = "SubscriptionGroupManager")]
#[doc(alias = "SubscriptionGroupWrapper")]
pub type SubscriptionGroupTable = VersionedTable<SubscriptionGroupConfig>;

/// An entry type of a [`VersionedTable`].
pub trait TableEntry: DeserializeOwned + WriteJson {
    /// The file name, for errors.
    const FILE: &'static str;
    /// The key of the table inside the file.
    const TABLE_KEY: &'static str;
    /// The entry's name (topic or group).
    fn name(&self) -> &str;
    /// The name, to fill from the map key when the entry lacks it.
    fn name_mut(&mut self) -> &mut String;
}

impl TableEntry for TopicConfig {
    const FILE: &'static str = "topics.json";
    const TABLE_KEY: &'static str = "topicConfigTable";
    fn name(&self) -> &str {
        &self.topic_name
    }
    fn name_mut(&mut self) -> &mut String {
        &mut self.topic_name
    }
}

impl TableEntry for SubscriptionGroupConfig {
    const FILE: &'static str = "subscriptionGroup.json";
    const TABLE_KEY: &'static str = "subscriptionGroupTable";
    fn name(&self) -> &str {
        &self.group_name
    }
    fn name_mut(&mut self) -> &mut String {
        &mut self.group_name
    }
}

/// One consumer group's settings, an entry of `subscriptionGroup.json`
/// (Java `org.apache.rocketmq.common.subscription.SubscriptionGroupConfig`, 4.9 fields).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionGroupConfig {
    /// Group name; read from the map key when the entry lacks it.
    pub group_name: String,
    /// Whether the group may consume at all.
    pub consume_enable: bool,
    /// Whether a new consumer may start from the minimum offset.
    pub consume_from_min_enable: bool,
    /// Whether broadcasting consumption is allowed.
    pub consume_broadcast_enable: bool,
    /// Queues of the group's `%RETRY%` topic.
    pub retry_queue_nums: i32,
    /// Redeliveries before a message goes to `%DLQ%`.
    pub retry_max_times: i32,
    /// Broker id consumers pull from (0 is the master).
    pub broker_id: i64,
    /// Broker id to redirect to when consumption falls behind.
    pub which_broker_when_consume_slowly: i64,
    /// Whether consumers are told when the group's membership changes.
    pub notify_consumer_ids_changed_enable: bool,
}

/// `consumerOffset.json`: `topic@group` → queue id → next offset to consume.
#[doc(alias = "ConsumerOffsetManager")]
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConsumerOffsetTable {
    /// Entries in file order.
    pub offset_table: Vec<(String, Vec<(i32, i64)>)>,
}

/// `delayOffset.json`: delay level → next offset in that level's queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DelayOffsetTable {
    /// Entries in file order.
    pub offset_table: Vec<(i32, i64)>,
}

/// A config file that is not what it should be.
#[derive(Debug, thiserror::Error)]
#[error("config file is not valid: {0}")]
pub struct ConfigFileError(String);

impl<T: TableEntry> VersionedTable<T> {
    /// Parses the file, as written by Java 4.9 or 5.x.
    ///
    /// # Errors
    /// [`ConfigFileError`] naming the file and what is wrong with it.
    pub fn parse(bytes: &[u8]) -> Result<VersionedTable<T>, ConfigFileError> {
        let root = parse_root(bytes, T::FILE)?;
        let mut entries = Vec::new();
        for (key, entry) in optional_object(&root, T::TABLE_KEY, T::FILE)?
            .into_iter()
            .flatten()
        {
            let mut config: T = typed(entry, T::FILE, key)?;
            if config.name().is_empty() {
                config.name_mut().clone_from(key);
            }
            entries.push((key.clone(), config));
        }
        Ok(VersionedTable {
            data_version: data_version(&root, T::FILE)?,
            entries,
        })
    }

    /// The file as Java 4.9 writes it.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut w = PrettyWriter::default();
        w.open();
        w.key("dataVersion");
        self.data_version.write(&mut w);
        w.key(T::TABLE_KEY);
        w.open();
        for (key, config) in &self.entries {
            w.key(key);
            config.write(&mut w);
        }
        w.close();
        w.close();
        w.finish()
    }

    /// The entry named `name`.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&T> {
        lookup(&self.entries, name)
    }

    /// Adds `config` under its name, or replaces the entry of that name in place; returns the
    /// replaced entry. Leaves [`data_version`](Self::data_version) to the caller.
    pub fn insert(&mut self, config: T) -> Option<T> {
        let name = config.name().to_owned();
        upsert(&mut self.entries, name, config)
    }
}

impl WriteJson for TopicConfig {
    fn write(&self, w: &mut PrettyWriter) {
        w.open();
        if !self.attributes.is_empty() {
            w.key("attributes");
            w.open();
            for (key, value) in &self.attributes {
                w.key(key);
                w.string(value);
            }
            w.close();
        }
        w.key("order");
        w.value(self.order);
        w.key("perm");
        w.value(self.perm);
        w.key("readQueueNums");
        w.value(self.read_queue_nums);
        w.key("topicFilterType");
        w.string(&self.topic_filter_type);
        w.key("topicName");
        w.string(&self.topic_name);
        w.key("topicSysFlag");
        w.value(self.topic_sys_flag);
        w.key("writeQueueNums");
        w.value(self.write_queue_nums);
        w.close();
    }
}

impl Default for SubscriptionGroupConfig {
    /// Java's defaults with no name; see [`SubscriptionGroupConfig::new`].
    fn default() -> Self {
        SubscriptionGroupConfig::new("")
    }
}

impl SubscriptionGroupConfig {
    /// `group` with Java 4.9's defaults: consumption, start-from-minimum, broadcasting and
    /// change notification enabled; 1 retry queue; 16 retries; pull from the master (0), and
    /// from broker 1 when slow.
    #[must_use]
    pub fn new(group: &str) -> SubscriptionGroupConfig {
        SubscriptionGroupConfig {
            group_name: group.to_owned(),
            consume_enable: true,
            consume_from_min_enable: true,
            consume_broadcast_enable: true,
            retry_queue_nums: 1,
            retry_max_times: 16,
            broker_id: 0,
            which_broker_when_consume_slowly: 1,
            notify_consumer_ids_changed_enable: true,
        }
    }
}

impl WriteJson for SubscriptionGroupConfig {
    fn write(&self, w: &mut PrettyWriter) {
        w.open();
        w.key("brokerId");
        w.value(self.broker_id);
        w.key("consumeBroadcastEnable");
        w.value(self.consume_broadcast_enable);
        w.key("consumeEnable");
        w.value(self.consume_enable);
        w.key("consumeFromMinEnable");
        w.value(self.consume_from_min_enable);
        w.key("groupName");
        w.string(&self.group_name);
        w.key("notifyConsumerIdsChangedEnable");
        w.value(self.notify_consumer_ids_changed_enable);
        w.key("retryMaxTimes");
        w.value(self.retry_max_times);
        w.key("retryQueueNums");
        w.value(self.retry_queue_nums);
        w.key("whichBrokerWhenConsumeSlowly");
        w.value(self.which_broker_when_consume_slowly);
        w.close();
    }
}

impl WriteJson for DataVersion {
    fn write(&self, w: &mut PrettyWriter) {
        w.open();
        w.key("counter");
        w.value(self.counter);
        if self.state_version != 0 {
            w.key("stateVersion");
            w.value(self.state_version);
        }
        w.key("timestamp");
        w.value(self.timestamp);
        w.close();
    }
}

impl ConsumerOffsetTable {
    /// Parses the file.
    ///
    /// # Errors
    /// [`ConfigFileError`] naming what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<ConsumerOffsetTable, ConfigFileError> {
        let root = parse_root(bytes, "consumerOffset.json")?;
        let mut offset_table = Vec::new();
        for (key, queues) in object(&root["offsetTable"], "offsetTable")? {
            offset_table.push((key.clone(), int_map(queues, key)?));
        }
        Ok(ConsumerOffsetTable { offset_table })
    }

    /// The file as Java writes it.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\n\t\"offsetTable\":{");
        for (index, (key, queues)) in self.offset_table.iter().enumerate() {
            out.push_str(if index == 0 { "\n\t\t" } else { ",\n\t\t" });
            out.push_str(&serde_json::to_string(key).expect("strings serialize"));
            out.push(':');
            push_int_map(&mut out, queues, "\t\t");
        }
        out.push_str(if self.offset_table.is_empty() {
            "}\n}"
        } else {
            "\n\t}\n}"
        });
        out
    }

    /// The committed offset of `queue_id` of `topic` for `group`.
    #[must_use]
    pub fn offset(&self, topic: &str, group: &str, queue_id: i32) -> Option<i64> {
        let key = format!("{topic}@{group}");
        let (_, queues) = self.offset_table.iter().find(|(k, _)| *k == key)?;
        queues
            .iter()
            .find(|(q, _)| *q == queue_id)
            .map(|(_, offset)| *offset)
    }
}

impl DelayOffsetTable {
    /// Parses the file.
    ///
    /// # Errors
    /// [`ConfigFileError`] naming what is wrong.
    pub fn parse(bytes: &[u8]) -> Result<DelayOffsetTable, ConfigFileError> {
        let root = parse_root(bytes, "delayOffset.json")?;
        Ok(DelayOffsetTable {
            offset_table: int_map(&root["offsetTable"], "offsetTable")?,
        })
    }

    /// The file as Java writes it.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\n\t\"offsetTable\":");
        push_int_map(&mut out, &self.offset_table, "\t");
        out.push_str("\n}");
        out
    }
}

/// fastjson's `PrettyFormat` for string-keyed objects: each member on its own line, indented
/// one tab per level; the closing brace on its own line at the parent's level, or right
/// after the opening one when the object is empty.
/// A value that writes itself in Java's pretty-printed form.
pub trait WriteJson {
    /// Writes the value.
    #[doc(hidden)]
    fn write(&self, w: &mut PrettyWriter);
}

/// Java's pretty printer (fastjson, tab-indented).
#[doc(hidden)]
#[derive(Debug, Default)]
pub struct PrettyWriter {
    out: String,
    depth: usize,
    /// Whether the innermost open object has a member yet.
    has_member: bool,
}

impl PrettyWriter {
    fn open(&mut self) {
        self.out.push('{');
        self.depth += 1;
        self.has_member = false;
    }

    fn key(&mut self, key: &str) {
        assert!(self.depth > 0, "a key belongs in an object");
        if self.has_member {
            self.out.push(',');
        }
        self.newline();
        self.string(key);
        self.out.push(':');
        self.has_member = true;
    }

    fn close(&mut self) {
        assert!(self.depth > 0, "close matches an open");
        self.depth -= 1;
        if self.has_member {
            self.newline();
        }
        self.out.push('}');
        // The enclosing object got a member: the key this object is the value of.
        self.has_member = true;
    }

    fn value(&mut self, value: impl std::fmt::Display) {
        self.out.push_str(&value.to_string());
    }

    fn string(&mut self, value: &str) {
        self.out
            .push_str(&serde_json::to_string(value).expect("strings serialize"));
    }

    fn newline(&mut self) {
        self.out.push('\n');
        for _ in 0..self.depth {
            self.out.push('\t');
        }
    }

    fn finish(self) -> String {
        assert_eq!(self.depth, 0, "every object closed");
        self.out
    }
}

/// The top-level object of `file`.
fn parse_root(bytes: &[u8], file: &str) -> Result<Value, ConfigFileError> {
    let root = parse_lenient(bytes).map_err(|e| ConfigFileError(format!("{file}: {e}")))?;
    if !root.is_object() {
        return Err(ConfigFileError(format!(
            "{file}: the top level is not an object"
        )));
    }
    Ok(root)
}

/// `root[key]` as an object; `None` when missing or null, which Java reads as an empty map.
fn optional_object<'a>(
    root: &'a Value,
    key: &str,
    file: &str,
) -> Result<Option<&'a serde_json::Map<String, Value>>, ConfigFileError> {
    match root.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => object(value, key)
            .map(Some)
            .map_err(|e| ConfigFileError(format!("{file}: {}", e.0))),
    }
}

/// `dataVersion`, zeros when missing.
fn data_version(root: &Value, file: &str) -> Result<DataVersion, ConfigFileError> {
    match root.get("dataVersion") {
        None | Some(Value::Null) => Ok(DataVersion::default()),
        Some(value) => typed(value, file, "dataVersion"),
    }
}

/// `value` as a `T`; missing fields take `T`'s defaults, unknown ones are ignored.
fn typed<T: DeserializeOwned>(value: &Value, file: &str, what: &str) -> Result<T, ConfigFileError> {
    T::deserialize(value).map_err(|e| ConfigFileError(format!("{file}: `{what}`: {e}")))
}

fn lookup<'a, T>(table: &'a [(String, T)], name: &str) -> Option<&'a T> {
    table
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, entry)| entry)
}

fn upsert<T>(table: &mut Vec<(String, T)>, name: String, entry: T) -> Option<T> {
    match table.iter_mut().find(|(key, _)| *key == name) {
        Some((_, slot)) => Some(std::mem::replace(slot, entry)),
        None => {
            table.push((name, entry));
            None
        }
    }
}

fn object<'a>(
    value: &'a Value,
    what: &str,
) -> Result<&'a serde_json::Map<String, Value>, ConfigFileError> {
    match value {
        Value::Object(map) => Ok(map),
        other => Err(ConfigFileError(format!(
            "`{what}` is not an object: {other}"
        ))),
    }
}

fn int_map(value: &Value, what: &str) -> Result<Vec<(i32, i64)>, ConfigFileError> {
    object(value, what)?
        .iter()
        .map(|(key, offset)| {
            let queue = key
                .parse()
                .map_err(|_| ConfigFileError(format!("{what}: bad key {key}")))?;
            let offset = offset
                .as_i64()
                .ok_or_else(|| ConfigFileError(format!("{what}: bad offset {offset}")))?;
            Ok((queue, offset))
        })
        .collect()
}

fn push_int_map(out: &mut String, entries: &[(i32, i64)], indent: &str) {
    out.push('{');
    for (index, (key, value)) in entries.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str(&format!("{key}:{value}"));
    }
    if !entries.is_empty() {
        out.push('\n');
        out.push_str(indent);
    }
    out.push('}');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consumer_offsets_round_trip_and_look_up() {
        let text = "{\n\t\"offsetTable\":{\n\t\t\"T@g\":{0:5,1:6\n\t\t}\n\t}\n}";
        let table = ConsumerOffsetTable::parse(text.as_bytes()).unwrap();
        assert_eq!(table.offset("T", "g", 1), Some(6));
        assert_eq!(table.offset("T", "g", 2), None);
        assert_eq!(table.to_json(), text);
        let quoted = br#"{"offsetTable":{"T@g":{"0":5,"1":6}},"dataVersion":{"counter":1}}"#;
        assert_eq!(ConsumerOffsetTable::parse(quoted).unwrap(), table);
        assert!(ConsumerOffsetTable::parse(b"{\"offsetTable\":[]}").is_err());
    }

    #[test]
    fn empty_tables_write_valid_files() {
        let empty = ConsumerOffsetTable::default().to_json();
        assert_eq!(
            ConsumerOffsetTable::parse(empty.as_bytes()).unwrap(),
            ConsumerOffsetTable::default()
        );
        let empty = DelayOffsetTable::default().to_json();
        assert_eq!(
            DelayOffsetTable::parse(empty.as_bytes()).unwrap(),
            DelayOffsetTable::default()
        );
    }

    #[test]
    fn empty_topic_and_group_tables_write_empty_maps() {
        let version = "{\n\t\"dataVersion\":{\n\t\t\"counter\":0,\n\t\t\"timestamp\":0\n\t},";
        let topics = TopicConfigTable::default().to_json();
        assert_eq!(
            topics,
            format!("{version}\n\t\"topicConfigTable\":{{}}\n}}")
        );
        assert_eq!(
            TopicConfigTable::parse(topics.as_bytes()).unwrap(),
            TopicConfigTable::default()
        );
        let groups = SubscriptionGroupTable::default().to_json();
        assert_eq!(
            groups,
            format!("{version}\n\t\"subscriptionGroupTable\":{{}}\n}}")
        );
        assert_eq!(
            SubscriptionGroupTable::parse(groups.as_bytes()).unwrap(),
            SubscriptionGroupTable::default()
        );
    }

    #[test]
    fn five_x_state_version_and_attributes_are_written_back_only_when_set() {
        let mut table = TopicConfigTable::default();
        table.data_version.state_version = 3;
        let mut config = TopicConfig::named("T");
        config
            .attributes
            .insert("+message.type".into(), "FIFO".into());
        table.insert(config);
        let json = table.to_json();
        assert!(json.contains("\"counter\":0,\n\t\t\"stateVersion\":3,\n\t\t\"timestamp\":0"));
        let attributes = concat!(
            "\t\t\"T\":{\n\t\t\t\"attributes\":{\n",
            "\t\t\t\t\"+message.type\":\"FIFO\"\n\t\t\t},\n\t\t\t\"order\":false,"
        );
        assert!(json.contains(attributes), "{json}");
        assert_eq!(TopicConfigTable::parse(json.as_bytes()).unwrap(), table);
    }

    #[test]
    fn subscription_group_defaults_are_java_4_9() {
        let config = SubscriptionGroupConfig::new("g");
        assert_eq!((config.retry_queue_nums, config.retry_max_times), (1, 16));
        assert_eq!(
            (config.broker_id, config.which_broker_when_consume_slowly),
            (0, 1)
        );
        assert!(config.consume_enable && config.consume_from_min_enable);
        assert!(config.consume_broadcast_enable && config.notify_consumer_ids_changed_enable);
        let parsed = SubscriptionGroupTable::parse(br#"{"subscriptionGroupTable":{"g":{}}}"#);
        assert_eq!(parsed.unwrap().get("g"), Some(&config));
    }
}
