//! Messages as producers build them and consumers receive them.
//!
//! [`Message`] is what a producer sends: topic, body, flag and properties (tags, keys, delay
//! level and user properties are all properties, as in Java). [`MessageExt`] is a stored
//! message as a pull, view or query returns it; [`decode_messages`] reads those bodies.

use super::error::{ClientError, Result};
use ferromq_protocol::message::{
    decode_record, offset_msg_id, parse_properties, properties_to_string, Record,
};
use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;

pub use ferromq_protocol::remoting::heartbeat::MessageQueue;

/// Property names with a meaning to brokers and clients (Java `MessageConst`).
#[doc(alias = "MessageConst")]
pub mod property {
    /// Space-separated keys, indexed by the broker.
    pub const KEYS: &str = "KEYS";
    /// The tag.
    pub const TAGS: &str = "TAGS";
    /// Whether the producer waits for the store (`waitStoreMsgOK`).
    pub const WAIT_STORE_MSG_OK: &str = "WAIT";
    /// Delay level of a scheduled message.
    pub const DELAY_TIME_LEVEL: &str = "DELAY";
    /// Client-side unique message id.
    pub const UNIQ_CLIENT_MESSAGE_ID_KEYIDX: &str = "UNIQ_KEY";
    /// When a timer message is delivered, epoch ms (5.x).
    pub const TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
    /// A timer message's delay in seconds (5.x).
    pub const TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
    /// A timer message's delay in ms (5.x).
    pub const TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
    /// Original topic of a retried or scheduled message.
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    /// Original queue id of a retried or scheduled message.
    pub const REAL_QUEUE_ID: &str = "REAL_QID";
    /// Retry topic of a retried message.
    pub const RETRY_TOPIC: &str = "RETRY_TOPIC";
    /// Transaction prepared flag.
    pub const TRANSACTION_PREPARED: &str = "TRAN_MSG";
    /// Producer group.
    pub const PRODUCER_GROUP: &str = "PGROUP";
    /// Original message id of a retried message.
    pub const ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
    /// How many times a retried message was consumed before.
    pub const RECONSUME_TIME: &str = "RECONSUME_TIME";
    /// The retry limit a retried message carries.
    pub const MAX_RECONSUME_TIMES: &str = "MAX_RECONSUME_TIMES";
    /// Minimum offset of the queue at pull time.
    pub const MIN_OFFSET: &str = "MIN_OFFSET";
    /// Maximum offset of the queue at pull time.
    pub const MAX_OFFSET: &str = "MAX_OFFSET";
    /// Separator of keys in [`KEYS`].
    pub const KEY_SEPARATOR: &str = " ";
}

/// Message system flag: the body is zlib-compressed (`MessageSysFlag.COMPRESSED_FLAG`).
pub const COMPRESSED_FLAG: i32 = 0x1;

/// A message to send (Java `Message`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    /// Topic.
    pub topic: String,
    /// Body bytes, as the application gave them.
    pub body: Vec<u8>,
    /// Application flag, stored as is.
    pub flag: i32,
    /// Properties, system and user alike.
    pub properties: BTreeMap<String, String>,
}

impl Message {
    /// A message with `body` for `topic`, waiting for the store (`WAIT=true`) as Java's
    /// constructor sets it.
    #[must_use]
    pub fn new(topic: impl Into<String>, body: impl Into<Vec<u8>>) -> Message {
        let mut message = Message {
            topic: topic.into(),
            body: body.into(),
            ..Message::default()
        };
        message.set_wait_store_msg_ok(true);
        message
    }

    /// Sets the tag.
    #[must_use]
    pub fn with_tags(mut self, tags: &str) -> Message {
        self.put_property(property::TAGS, tags);
        self
    }

    /// Sets the keys, joined by spaces.
    #[must_use]
    pub fn with_keys<I, S>(mut self, keys: I) -> Message
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let joined: Vec<String> = keys.into_iter().map(|k| k.as_ref().to_owned()).collect();
        self.put_property(property::KEYS, &joined.join(property::KEY_SEPARATOR));
        self
    }

    /// Sets the delay level (1 = 1 s ... 18 = 2 h with the default `messageDelayLevel`).
    #[must_use]
    pub fn with_delay_level(mut self, level: i32) -> Message {
        self.put_property(property::DELAY_TIME_LEVEL, &level.to_string());
        self
    }

    /// Makes a timer message delivered at `deliver_time_ms` (epoch ms), as 5.x's
    /// `Message.setDeliverTimeMs`: the broker rounds it down to its `timerPrecisionMs`
    /// (never delivering early) and refuses a time more than `timerMaxDelaySec` ahead.
    #[must_use]
    pub fn with_deliver_time_ms(mut self, deliver_time_ms: i64) -> Message {
        self.set_deliver_time_ms(deliver_time_ms);
        self
    }

    /// [`Message::with_deliver_time_ms`] in place.
    pub fn set_deliver_time_ms(&mut self, deliver_time_ms: i64) {
        self.put_property(property::TIMER_DELIVER_MS, &deliver_time_ms.to_string());
    }

    /// The delivery time of a timer message, if set.
    #[must_use]
    pub fn deliver_time_ms(&self) -> Option<i64> {
        self.property(property::TIMER_DELIVER_MS)
            .and_then(|ms| ms.parse().ok())
    }

    /// Sets the application flag.
    #[must_use]
    pub fn with_flag(mut self, flag: i32) -> Message {
        self.flag = flag;
        self
    }

    /// Adds a user property.
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] for an empty name or value, or a name reserved for the
    /// system (Java `MessageConst.STRING_HASH_SET`, the common ones).
    pub fn put_user_property(&mut self, name: &str, value: &str) -> Result<()> {
        if name.trim().is_empty() || value.trim().is_empty() {
            return Err(ClientError::InvalidMessage(
                "the name or value of property can not be null or blank string!".to_owned(),
            ));
        }
        if RESERVED.contains(&name) {
            return Err(ClientError::InvalidMessage(format!(
                "The Property<{name}> is used by system, input another please"
            )));
        }
        self.put_property(name, value);
        Ok(())
    }

    /// Sets any property (system ones included).
    pub fn put_property(&mut self, name: &str, value: &str) {
        self.properties.insert(name.to_owned(), value.to_owned());
    }

    /// A property's value.
    #[must_use]
    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties.get(name).map(String::as_str)
    }

    /// The tag, if set.
    #[must_use]
    pub fn tags(&self) -> Option<&str> {
        self.property(property::TAGS)
    }

    /// The keys, if set.
    #[must_use]
    pub fn keys(&self) -> Option<&str> {
        self.property(property::KEYS)
    }

    /// The delay level, 0 when unset.
    #[must_use]
    pub fn delay_level(&self) -> i32 {
        self.property(property::DELAY_TIME_LEVEL)
            .and_then(|level| level.parse().ok())
            .unwrap_or(0)
    }

    /// Whether the producer waits for the store.
    #[must_use]
    pub fn wait_store_msg_ok(&self) -> bool {
        self.property(property::WAIT_STORE_MSG_OK) != Some("false")
    }

    /// Sets `WAIT`.
    pub fn set_wait_store_msg_ok(&mut self, wait: bool) {
        let value = if wait { "true" } else { "false" };
        self.put_property(property::WAIT_STORE_MSG_OK, value);
    }

    /// The properties in the 4.9 client's wire form: `name 0x01 value`, 0x02 between.
    #[must_use]
    pub fn properties_string(&self) -> String {
        properties_to_string(
            self.properties
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str())),
        )
    }
}

/// Property names applications may not set (Java `MessageConst.STRING_HASH_SET`, in part).
const RESERVED: &[&str] = &[
    "TRACE_ON",
    "MSG_REGION",
    "KEYS",
    "TAGS",
    "WAIT",
    "DELAY",
    "RETRY_TOPIC",
    "REAL_TOPIC",
    "REAL_QID",
    "TRAN_MSG",
    "PGROUP",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "BUYER_ID",
    "ORIGIN_MESSAGE_ID",
    "TRANSFER_FLAG",
    "CORRECTION_FLAG",
    "MQ2_FLAG",
    "RECONSUME_TIME",
    "UNIQ_KEY",
    "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME",
    "__STARTDELIVERTIME",
    "INSTANCE_ID",
];

/// A stored message as pulled, viewed or queried (Java `MessageExt`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageExt {
    /// Topic.
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
    /// Logical offset in its queue.
    pub queue_offset: i64,
    /// CommitLog offset.
    pub commit_log_offset: i64,
    /// Body; decompressed when the sender compressed it.
    pub body: Vec<u8>,
    /// Application flag.
    pub flag: i32,
    /// System flags as stored (bit 0: the stored body was compressed).
    pub sys_flag: i32,
    /// Producer time, ms.
    pub born_timestamp: i64,
    /// Producer address.
    pub born_host: SocketAddr,
    /// Store time, ms.
    pub store_timestamp: i64,
    /// Broker address.
    pub store_host: SocketAddr,
    /// Retry count.
    pub reconsume_times: i32,
    /// Half message offset of a committed transactional message.
    pub prepared_transaction_offset: i64,
    /// BODYCRC as stored.
    pub body_crc: i32,
    /// Properties.
    pub properties: BTreeMap<String, String>,
}

impl MessageExt {
    /// The message id: the `UNIQ_KEY` property if present, else the offset message id.
    #[must_use]
    pub fn msg_id(&self) -> String {
        match self.property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX) {
            Some(id) => id.to_owned(),
            None => self.offset_msg_id(),
        }
    }

    /// The broker-side id: store host and CommitLog offset as hex.
    #[must_use]
    pub fn offset_msg_id(&self) -> String {
        offset_msg_id(self.store_host, self.commit_log_offset)
    }

    /// A property's value.
    #[must_use]
    pub fn property(&self, name: &str) -> Option<&str> {
        self.properties.get(name).map(String::as_str)
    }

    /// The tag.
    #[must_use]
    pub fn tags(&self) -> Option<&str> {
        self.property(property::TAGS)
    }

    /// The keys (space-separated).
    #[must_use]
    pub fn keys(&self) -> Option<&str> {
        self.property(property::KEYS)
    }

    /// The delay level, 0 when unset.
    #[must_use]
    pub fn delay_level(&self) -> i32 {
        self.property(property::DELAY_TIME_LEVEL)
            .and_then(|level| level.parse().ok())
            .unwrap_or(0)
    }
}

/// Decodes every stored message in a PULL_MESSAGE, QUERY_MESSAGE or VIEW_MESSAGE_BY_ID body
/// (Java `MessageDecoder.decodes`), decompressing bodies with the compressed flag.
///
/// # Errors
/// [`ClientError::BadResponse`] for bytes that are not whole records or a body that does
/// not inflate.
pub fn decode_messages(mut body: &[u8]) -> Result<Vec<MessageExt>> {
    let mut messages = Vec::new();
    while !body.is_empty() {
        let (record, size) = match decode_record(body, false) {
            Ok(Record::Message { record, size }) => (record, size),
            Ok(Record::Blank { .. }) => {
                return Err(ClientError::BadResponse("blank record in a body".into()))
            }
            Err(error) => return Err(ClientError::BadResponse(error.to_string())),
        };
        let message_body = if record.sys_flag & COMPRESSED_FLAG != 0 {
            inflate(record.body)?
        } else {
            record.body.to_vec()
        };
        messages.push(MessageExt {
            topic: record.topic.to_owned(),
            queue_id: record.queue_id,
            queue_offset: record.queue_offset,
            commit_log_offset: record.physical_offset,
            body: message_body,
            flag: record.flag,
            sys_flag: record.sys_flag,
            born_timestamp: record.born_timestamp,
            born_host: record.born_host,
            store_timestamp: record.store_timestamp,
            store_host: record.store_host,
            reconsume_times: record.reconsume_times,
            prepared_transaction_offset: record.prepared_transaction_offset,
            body_crc: record.body_crc,
            properties: parse_properties(record.properties).into_iter().collect(),
        });
        body = &body[size..];
    }
    Ok(messages)
}

/// Inflates a zlib stream (Java `UtilAll.uncompress`), at most
/// [`INFLATED_BODY_MAX`](ferromq_protocol::limits::INFLATED_BODY_MAX) bytes.
///
/// # Errors
/// [`ClientError::BadResponse`] when the bytes are not zlib or inflate past the limit.
pub fn inflate(compressed: &[u8]) -> Result<Vec<u8>> {
    inflate_at_most(compressed, ferromq_protocol::limits::INFLATED_BODY_MAX)
}

/// [`inflate`] with the limit `max`.
fn inflate_at_most(compressed: &[u8], max: usize) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(compressed.len().saturating_mul(4).min(max));
    // One byte past the limit tells a body of exactly `max` from a longer one.
    let limit = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    flate2::read::ZlibDecoder::new(compressed)
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|error| ClientError::BadResponse(format!("cannot inflate a body: {error}")))?;
    if out.len() > max {
        return Err(ClientError::BadResponse(format!(
            "a compressed body inflates past {max} bytes; refused"
        )));
    }
    Ok(out)
}

/// Deflates with zlib at `level` (0–9; Java's producer uses 5); `None` if the encoder
/// failed, and the body is then sent as it is.
#[must_use]
pub fn deflate(body: &[u8], level: u32) -> Option<Vec<u8>> {
    use std::io::Write;
    let mut encoder =
        flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(level.min(9)));
    encoder.write_all(body).ok()?;
    encoder.finish().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferromq_protocol::message::MessageRecord;

    fn record(body: &[u8], sys_flag: i32, properties: &str, offset: i64) -> Vec<u8> {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        MessageRecord {
            body_crc: 0,
            queue_id: 1,
            flag: 7,
            queue_offset: offset,
            physical_offset: offset * 100,
            sys_flag,
            born_timestamp: 1,
            born_host: host,
            store_timestamp: 2,
            store_host: host,
            ..MessageRecord::new("T", body, properties.as_bytes())
        }
        .to_bytes()
    }

    #[test]
    fn decodes_records_and_inflates_compressed_bodies() {
        let plain = b"hello".to_vec();
        let big = vec![b'x'; 10_000];
        let mut body = record(&plain, 0, "TAGS\u{1}a\u{2}UNIQ_KEY\u{1}ABC\u{2}", 0);
        body.extend(record(
            &deflate(&big, 5).unwrap(),
            COMPRESSED_FLAG,
            "KEYS\u{1}k1 k2\u{2}",
            1,
        ));
        let messages = decode_messages(&body).unwrap();
        assert_eq!(messages.len(), 2);
        assert_eq!(messages[0].body, plain);
        assert_eq!(messages[0].tags(), Some("a"));
        assert_eq!(messages[0].msg_id(), "ABC");
        assert_eq!(messages[1].body, big);
        assert_eq!(messages[1].keys(), Some("k1 k2"));
        assert_eq!(messages[1].msg_id(), messages[1].offset_msg_id());
        assert!(decode_messages(&body[..body.len() - 1]).is_err());
    }

    #[test]
    fn message_properties_in_java_form() {
        let mut message = Message::new("T", "b").with_tags("t").with_keys(["a", "b"]);
        message.put_user_property("u", "v").unwrap();
        assert!(message.put_user_property("KEYS", "x").is_err());
        assert!(message.put_user_property("", "x").is_err());
        assert_eq!(
            message.properties_string(),
            "KEYS\u{1}a b\u{2}TAGS\u{1}t\u{2}WAIT\u{1}true\u{2}u\u{1}v"
        );
        assert!(message.wait_store_msg_ok());
        assert_eq!(message.with_delay_level(3).delay_level(), 3);
    }

    #[test]
    fn a_body_inflating_past_the_limit_is_refused() {
        let zeros = vec![0u8; 1 << 20];
        let compressed = deflate(&zeros, 9).unwrap();
        assert!(compressed.len() < 4096, "{}", compressed.len());
        assert_eq!(inflate_at_most(&compressed, 1 << 20).unwrap(), zeros);
        let refused = inflate_at_most(&compressed, (1 << 20) - 1).unwrap_err();
        assert!(refused.to_string().contains("inflates past"), "{refused}");
    }
}
