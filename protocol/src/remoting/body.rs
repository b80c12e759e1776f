//! JSON bodies exchanged with the name server: route data, cluster info, broker registration,
//! KV tables and topic lists.
//!
//! Mirrors `RP/route/*.java` and `RP/body/*.java` (`reference/remoting.md` §8). Reading is
//! lenient (missing fields take Java's defaults, unknown fields are ignored); writing follows
//! fastjson exactly where clients depend on it: keys in alphabetical order, nulls omitted, and
//! the two route flavours of §10.3 — bare numeric map keys (`{0:"host:port"}`, fastjson's
//! default) or standard JSON with quoted, sorted keys and non-ASCII escaped.

pub use crate::topic::{DataVersion, TopicConfig};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Read;

/// How to write maps with numeric keys (`reference/remoting.md` §10.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JsonFlavour {
    /// fastjson default: numeric map keys unquoted. Not valid JSON; what clients below 4.9.4
    /// (version < 401) and the Go client parse.
    Fastjson,
    /// Standard JSON: keys quoted and sorted, non-ASCII escaped as `\uXXXX`.
    Standard,
}

/// All topic configs of a broker with their version (`TopicConfigSerializeWrapper`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TopicConfigSerializeWrapper {
    /// Topic name to config.
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    /// Version of this table.
    pub data_version: DataVersion,
}

impl TopicConfigSerializeWrapper {
    /// Adds or replaces a topic's config, keyed by its name.
    pub fn insert(&mut self, config: TopicConfig) {
        self.topic_config_table
            .insert(config.topic_name.clone(), config);
    }
}

/// Body of REGISTER_BROKER (`RegisterBrokerBody`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RegisterBrokerBody {
    /// The broker's topics.
    pub topic_config_serialize_wrapper: TopicConfigSerializeWrapper,
    /// Legacy filter servers.
    pub filter_server_list: Vec<String>,
}

/// Why a registration body could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    /// The JSON did not parse.
    #[error("bad JSON body: {0}")]
    Json(#[from] serde_json::Error),
    /// The compressed form was truncated or corrupt.
    #[error("bad compressed register body: {0}")]
    Compressed(String),
}

impl RegisterBrokerBody {
    /// Decodes a registration body in any of its forms: the JSON `RegisterBrokerBody`, the
    /// bare `TopicConfigSerializeWrapper` that brokers before 3.0.11 (version < 37) send, or the
    /// zlib-compressed form (header `compressed=true`).
    ///
    /// # Errors
    /// [`BodyError`] when the bytes match none of them.
    pub fn decode(
        body: &[u8],
        compressed: bool,
        broker_version: i32,
    ) -> Result<RegisterBrokerBody, BodyError> {
        const V3_0_11: i32 = 37;
        const V5_0_0: i32 = 413;
        if compressed {
            return Self::decode_compressed(body, broker_version >= V5_0_0);
        }
        if broker_version < V3_0_11 {
            let wrapper: TopicConfigSerializeWrapper = serde_json::from_slice(body)?;
            return Ok(RegisterBrokerBody {
                topic_config_serialize_wrapper: wrapper,
                filter_server_list: Vec::new(),
            });
        }
        if body.is_empty() {
            return Ok(RegisterBrokerBody::default());
        }
        Ok(serde_json::from_slice(body)?)
    }

    fn decode_compressed(body: &[u8], has_mapping: bool) -> Result<RegisterBrokerBody, BodyError> {
        // Inflated size is bounded by the frame limit times zlib's worst ratio; cap it at
        // 64 MiB so a zip bomb cannot take the server's memory.
        const INFLATED_SIZE_MAX: u64 = 64 << 20;
        let mut inflated = Vec::new();
        flate2::read::ZlibDecoder::new(body)
            .take(INFLATED_SIZE_MAX)
            .read_to_end(&mut inflated)
            .map_err(|e| BodyError::Compressed(e.to_string()))?;
        let mut reader = ChunkReader {
            bytes: &inflated,
            at: 0,
        };
        let data_version: DataVersion = serde_json::from_slice(reader.chunk()?)?;
        let topic_count = reader.int()?;
        let mut wrapper = TopicConfigSerializeWrapper {
            data_version,
            ..Default::default()
        };
        for _ in 0..topic_count {
            let text = std::str::from_utf8(reader.chunk()?)
                .map_err(|_| BodyError::Compressed("topic config is not UTF-8".into()))?;
            let config = TopicConfig::decode_text(text)
                .ok_or_else(|| BodyError::Compressed(format!("bad topic config `{text}`")))?;
            wrapper.insert(config);
        }
        let filter_server_list = serde_json::from_slice(reader.chunk()?).unwrap_or_default();
        if has_mapping {
            // Static-topic mappings (5.x) are read past but not kept: ferromq has none.
            let mapping_count = reader.int()?;
            for _ in 0..mapping_count {
                reader.chunk()?;
            }
        }
        Ok(RegisterBrokerBody {
            topic_config_serialize_wrapper: wrapper,
            filter_server_list,
        })
    }

    /// Encodes the compressed form (for tests and for brokers with `compressedRegister`).
    #[must_use]
    pub fn encode_compressed(&self) -> Vec<u8> {
        use std::io::Write;
        let mut raw = Vec::new();
        let chunk = |raw: &mut Vec<u8>, bytes: &[u8]| {
            raw.extend_from_slice(&i32::try_from(bytes.len()).expect("small").to_be_bytes());
            raw.extend_from_slice(bytes);
        };
        let wrapper = &self.topic_config_serialize_wrapper;
        let version = serde_json::to_vec(&wrapper.data_version).expect("plain struct");
        chunk(&mut raw, &version);
        let count = i32::try_from(wrapper.topic_config_table.len()).expect("topic count");
        raw.extend_from_slice(&count.to_be_bytes());
        for config in wrapper.topic_config_table.values() {
            let text = format!(
                "{} {} {} {} {}",
                config.topic_name,
                config.read_queue_nums,
                config.write_queue_nums,
                config.perm,
                config.topic_filter_type
            );
            chunk(&mut raw, text.as_bytes());
        }
        let filters = serde_json::to_vec(&self.filter_server_list).expect("strings");
        chunk(&mut raw, &filters);
        raw.extend_from_slice(&0i32.to_be_bytes());
        let mut encoder =
            flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(&raw).expect("in-memory write");
        encoder.finish().expect("in-memory write")
    }
}

struct ChunkReader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> ChunkReader<'a> {
    fn int(&mut self) -> Result<usize, BodyError> {
        let end = self.at + 4;
        let bytes = self
            .bytes
            .get(self.at..end)
            .ok_or_else(|| BodyError::Compressed("truncated length".into()))?;
        self.at = end;
        let value = i32::from_be_bytes(bytes.try_into().expect("4 bytes"));
        usize::try_from(value).map_err(|_| BodyError::Compressed("negative length".into()))
    }

    fn chunk(&mut self) -> Result<&'a [u8], BodyError> {
        let len = self.int()?;
        let end = self
            .at
            .checked_add(len)
            .filter(|end| *end <= self.bytes.len());
        let end = end.ok_or_else(|| BodyError::Compressed("truncated chunk".into()))?;
        let slice = &self.bytes[self.at..end];
        self.at = end;
        Ok(slice)
    }
}

/// A topic's queues on one broker (`QueueData`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueData {
    /// Broker name.
    pub broker_name: String,
    /// Readable queues.
    #[serde(default)]
    pub read_queue_nums: i32,
    /// Writable queues.
    #[serde(default)]
    pub write_queue_nums: i32,
    /// Permission bits.
    #[serde(default)]
    pub perm: i32,
    /// Topic system flag (`topicSynFlag` up to 4.8.0).
    #[serde(default, alias = "topicSynFlag")]
    pub topic_sys_flag: i32,
}

/// A broker group: one name, a master (id 0) and slaves (`BrokerData`).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerData {
    /// Cluster name.
    pub cluster: String,
    /// Broker name.
    pub broker_name: String,
    /// Broker id to `host:port`.
    #[serde(deserialize_with = "numeric_keys")]
    pub broker_addrs: BTreeMap<i64, String>,
    /// 5.x: whether a slave may act as master.
    #[serde(default)]
    pub enable_acting_master: bool,
    /// 5.x zone, if the broker reported one.
    #[serde(default)]
    pub zone_name: Option<String>,
}

/// Route of one topic (`TopicRouteData`), body of GET_ROUTEINFO_BY_TOPIC.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicRouteData {
    /// `brokerName:queueNum;...` when ordered messages are configured.
    #[serde(default)]
    pub order_topic_conf: Option<String>,
    /// Queue data per broker.
    #[serde(default)]
    pub queue_datas: Vec<QueueData>,
    /// Brokers serving the topic.
    #[serde(default)]
    pub broker_datas: Vec<BrokerData>,
    /// Legacy filter servers per broker address.
    #[serde(default)]
    pub filter_server_table: BTreeMap<String, Vec<String>>,
}

fn numeric_keys<'de, D>(deserializer: D) -> Result<BTreeMap<i64, String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let raw = BTreeMap::<String, String>::deserialize(deserializer)?;
    raw.into_iter()
        .map(|(k, v)| k.parse().map(|k| (k, v)).map_err(serde::de::Error::custom))
        .collect()
}

impl TopicRouteData {
    /// Writes the route as the Java name server does, in `flavour`.
    #[must_use]
    pub fn to_json(&self, flavour: JsonFlavour) -> Vec<u8> {
        let mut w = JsonWriter::new(flavour);
        w.open('{');
        w.key("brokerDatas");
        w.open('[');
        for broker in &self.broker_datas {
            w.comma();
            broker.write(&mut w);
        }
        w.close(']');
        w.key("filterServerTable");
        w.open('{');
        for (addr, servers) in &self.filter_server_table {
            w.key(addr);
            w.string_list(servers);
        }
        w.close('}');
        if let Some(conf) = &self.order_topic_conf {
            w.key("orderTopicConf");
            w.string(conf);
        }
        w.key("queueDatas");
        w.open('[');
        for queue in &self.queue_datas {
            w.comma();
            w.open('{');
            w.key("brokerName");
            w.string(&queue.broker_name);
            w.key("perm");
            w.int(i64::from(queue.perm));
            w.key("readQueueNums");
            w.int(i64::from(queue.read_queue_nums));
            w.key("topicSysFlag");
            w.int(i64::from(queue.topic_sys_flag));
            w.key("writeQueueNums");
            w.int(i64::from(queue.write_queue_nums));
            w.close('}');
        }
        w.close(']');
        w.close('}');
        w.finish()
    }
}

impl BrokerData {
    fn write(&self, w: &mut JsonWriter) {
        w.open('{');
        w.key("brokerAddrs");
        w.open('{');
        for (id, addr) in &self.broker_addrs {
            w.numeric_key(*id);
            w.string(addr);
        }
        w.close('}');
        w.key("brokerName");
        w.string(&self.broker_name);
        w.key("cluster");
        w.string(&self.cluster);
        w.key("enableActingMaster");
        w.bool(self.enable_acting_master);
        if let Some(zone) = &self.zone_name {
            w.key("zoneName");
            w.string(zone);
        }
        w.close('}');
    }
}

/// Brokers and clusters (`ClusterInfo`), body of GET_BROKER_CLUSTER_INFO; always written in
/// fastjson's default flavour, as Java does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterInfo {
    /// Broker name to broker data.
    pub broker_addr_table: BTreeMap<String, BrokerData>,
    /// Cluster name to broker names.
    pub cluster_addr_table: BTreeMap<String, Vec<String>>,
}

impl ClusterInfo {
    /// Writes the body.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        let mut w = JsonWriter::new(JsonFlavour::Fastjson);
        w.open('{');
        w.key("brokerAddrTable");
        w.open('{');
        for (name, broker) in &self.broker_addr_table {
            w.key(name);
            broker.write(&mut w);
        }
        w.close('}');
        w.key("clusterAddrTable");
        w.open('{');
        for (cluster, names) in &self.cluster_addr_table {
            w.key(cluster);
            w.string_list(names);
        }
        w.close('}');
        w.close('}');
        w.finish()
    }
}

/// `{"table":{...}}` (`KVTable`).
#[doc(alias = "KVTable")]
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KvTable {
    /// Key to value.
    #[serde(default)]
    pub table: BTreeMap<String, String>,
}

/// `{"brokerAddr":..., "topicList":[...]}` (`TopicList`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicList {
    /// Some broker address (only for the system topic list).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub broker_addr: Option<String>,
    /// Topic names.
    #[serde(default)]
    pub topic_list: Vec<String>,
}

/// A minimal writer for the bodies whose shape fastjson fixes and serde cannot express (bare
/// numeric keys). Keeps track of commas itself.
struct JsonWriter {
    out: Vec<u8>,
    flavour: JsonFlavour,
    need_comma: bool,
}

impl JsonWriter {
    fn new(flavour: JsonFlavour) -> JsonWriter {
        JsonWriter {
            out: Vec::with_capacity(256),
            flavour,
            need_comma: false,
        }
    }

    fn comma(&mut self) {
        if self.need_comma {
            self.out.push(b',');
        }
        self.need_comma = false;
    }

    fn open(&mut self, bracket: char) {
        self.out.push(u8::try_from(bracket).expect("ASCII bracket"));
        self.need_comma = false;
    }

    fn close(&mut self, bracket: char) {
        self.out.push(u8::try_from(bracket).expect("ASCII bracket"));
        self.need_comma = true;
    }

    fn key(&mut self, key: &str) {
        self.comma();
        self.raw_string(key);
        self.out.push(b':');
    }

    fn numeric_key(&mut self, key: i64) {
        self.comma();
        match self.flavour {
            JsonFlavour::Fastjson => self.out.extend_from_slice(key.to_string().as_bytes()),
            JsonFlavour::Standard => self.raw_string(&key.to_string()),
        }
        self.out.push(b':');
    }

    fn string(&mut self, value: &str) {
        self.raw_string(value);
        self.need_comma = true;
    }

    fn int(&mut self, value: i64) {
        // BrowserCompatible writes longs outside ±2^53 as strings.
        const SAFE: i64 = 1 << 53;
        if self.flavour == JsonFlavour::Standard && !(-SAFE..=SAFE).contains(&value) {
            self.raw_string(&value.to_string());
        } else {
            self.out.extend_from_slice(value.to_string().as_bytes());
        }
        self.need_comma = true;
    }

    fn bool(&mut self, value: bool) {
        self.out
            .extend_from_slice(if value { b"true" } else { b"false" });
        self.need_comma = true;
    }

    fn string_list(&mut self, values: &[String]) {
        self.open('[');
        for value in values {
            self.comma();
            self.string(value);
        }
        self.close(']');
    }

    fn raw_string(&mut self, value: &str) {
        match self.flavour {
            JsonFlavour::Fastjson => {
                serde_json::to_writer(&mut self.out, value).expect("write to Vec");
            }
            JsonFlavour::Standard => {
                self.out.push(b'"');
                for unit in value.encode_utf16() {
                    match unit {
                        0x22 => self.out.extend_from_slice(b"\\\""),
                        0x5C => self.out.extend_from_slice(b"\\\\"),
                        0x20..=0x7E => self.out.push(u8::try_from(unit).expect("ASCII")),
                        _ => self
                            .out
                            .extend_from_slice(format!("\\u{unit:04X}").as_bytes()),
                    }
                }
                self.out.push(b'"');
            }
        }
    }

    fn finish(self) -> Vec<u8> {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route() -> TopicRouteData {
        TopicRouteData {
            order_topic_conf: None,
            queue_datas: vec![QueueData {
                broker_name: "broker-a".into(),
                read_queue_nums: 4,
                write_queue_nums: 4,
                perm: 6,
                topic_sys_flag: 0,
            }],
            broker_datas: vec![BrokerData {
                cluster: "DefaultCluster".into(),
                broker_name: "broker-a".into(),
                broker_addrs: [(0, "127.0.0.1:10911".to_string())].into_iter().collect(),
                enable_acting_master: false,
                zone_name: None,
            }],
            filter_server_table: BTreeMap::new(),
        }
    }

    #[test]
    fn route_fastjson_flavour_has_bare_numeric_keys() {
        let json = String::from_utf8(route().to_json(JsonFlavour::Fastjson)).unwrap();
        assert_eq!(
            json,
            concat!(
                r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","#,
                r#""cluster":"DefaultCluster","enableActingMaster":false}],"#,
                r#""filterServerTable":{},"#,
                r#""queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"#,
                r#""topicSysFlag":0,"writeQueueNums":4}]}"#
            )
        );
    }

    #[test]
    fn route_standard_flavour_parses_back() {
        let json = route().to_json(JsonFlavour::Standard);
        assert!(String::from_utf8_lossy(&json).contains(r#"{"0":"127.0.0.1:10911"}"#));
        let parsed: TopicRouteData = serde_json::from_slice(&json).unwrap();
        assert_eq!(parsed, route());
    }

    #[test]
    fn standard_flavour_escapes_non_ascii() {
        let mut w = JsonWriter::new(JsonFlavour::Standard);
        w.string("é\u{1F600}\"");
        assert_eq!(
            String::from_utf8(w.finish()).unwrap(),
            r#""\u00E9\uD83D\uDE00\"""#
        );
    }

    #[test]
    fn compressed_register_body_round_trips() {
        let mut body = RegisterBrokerBody::default();
        body.topic_config_serialize_wrapper
            .insert(TopicConfig::named("T"));
        body.topic_config_serialize_wrapper.data_version.counter = 3;
        let bytes = body.encode_compressed();
        assert_eq!(RegisterBrokerBody::decode(&bytes, true, 479).unwrap(), body);
        assert!(RegisterBrokerBody::decode(&bytes[..bytes.len() / 2], true, 479).is_err());
    }
}
