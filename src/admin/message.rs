//! Message lookups: queryMsgById, queryMsgByKey, queryMsgByOffset
//! (`tools/.../command/message/QueryMsg*SubCommand`), and mqadmin's message printout.
//!
//! The body is shown as UTF-8 text (invalid bytes replaced) cut at [`BODY_PREVIEW_BYTES`];
//! mqadmin writes it to a file under /tmp instead. Compressed bodies are inflated first.

use super::client::{bad_body, check, route_masters};
use super::output::{human_time, Report, Table};
use super::{AdminClient, AdminError};
use crate::remoting::headers::{
    PullMessageRequestHeader, QueryMessageRequestHeader, SendMessageRequestHeaderV2,
    ViewMessageRequestHeader,
};
use crate::remoting::{ExtFields, RemotingCommand, RequestCode, ResponseCode};
use crate::store::message::{
    decode_offset_msg_id, decode_record, offset_msg_id, parse_properties, properties_to_string,
    Record,
};
use ferromq_protocol::message::{PROPERTY_TAGS, PROPERTY_UNIQ_KEY};
use ferromq_protocol::names::{DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX};
use serde_json::{json, Value};
use std::io::Read;

/// How much of a body the table and the printout show.
pub const BODY_PREVIEW_BYTES: usize = 4096;

/// Largest body inflated for display.
const INFLATED_BODY_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// `sysFlag` bit of a zlib-compressed body (`MessageSysFlag.COMPRESSED_FLAG`).
const COMPRESSED_FLAG: i32 = 0x1;

/// Consumer group mqadmin pulls with (`MixAll.TOOLS_CONSUMER_GROUP`).
const TOOLS_CONSUMER_GROUP: &str = "TOOLS_CONSUMER";

/// Flags of `queryMsgById`.
#[derive(Debug, clap::Args)]
pub struct QueryMsgByIdArgs {
    /// Message id: the offset id (store host and CommitLog offset), or the UNIQ_KEY id a
    /// producer assigns (then -t is needed).
    #[arg(short = 'i', long = "msgId")]
    pub msg_id: String,
    /// Topic; lets the UNIQ_KEY id be looked up in its brokers' index.
    #[arg(short = 't', long = "topic")]
    pub topic: Option<String>,
}

/// Flags of `queryMsgByKey`.
#[derive(Debug, clap::Args)]
pub struct QueryMsgByKeyArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// Key (one of the message's KEYS, or its UNIQ_KEY).
    #[arg(short = 'k', long = "msgKey")]
    pub key: String,
    /// Earliest store time, epoch ms.
    #[arg(short = 'b', long = "beginTimestamp", default_value_t = 0)]
    pub begin_timestamp: i64,
    /// Latest store time, epoch ms.
    #[arg(short = 'e', long = "endTimestamp", default_value_t = i64::MAX)]
    pub end_timestamp: i64,
    /// Most messages per broker.
    #[arg(short = 'm', long = "maxNum", default_value_t = 64)]
    pub max_num: i32,
}

/// Flags of `queryMsgByOffset`.
#[derive(Debug, clap::Args)]
pub struct QueryMsgByOffsetArgs {
    /// Topic.
    #[arg(short = 't', long = "topic")]
    pub topic: String,
    /// Broker name (not address).
    #[arg(short = 'b', long = "brokerName")]
    pub broker_name: String,
    /// Queue id.
    #[arg(short = 'i', long = "queueId")]
    pub queue_id: i32,
    /// Queue offset.
    #[arg(short = 'o', long = "offset")]
    pub offset: i64,
}

/// A stored message as mqadmin shows it (`MessageExt`).
#[doc(alias = "MessageExt")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageView {
    /// Its id: UNIQ_KEY when the producer set one, else the offset id.
    pub msg_id: String,
    /// Store host and CommitLog offset as hex.
    pub offset_msg_id: String,
    /// Topic.
    pub topic: String,
    /// Queue id.
    pub queue_id: i32,
    /// Queue offset.
    pub queue_offset: i64,
    /// CommitLog offset.
    pub commit_log_offset: i64,
    /// Redeliveries so far.
    pub reconsume_times: i32,
    /// Born time, epoch ms.
    pub born_timestamp: i64,
    /// Store time, epoch ms.
    pub store_timestamp: i64,
    /// Producer address.
    pub born_host: String,
    /// Broker address.
    pub store_host: String,
    /// `sysFlag`.
    pub sys_flag: i32,
    /// Properties in stored order.
    pub properties: Vec<(String, String)>,
    /// Body, inflated when it was compressed.
    pub body: Vec<u8>,
}

impl MessageView {
    fn property(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.as_str())
    }

    /// The body as text, cut at `limit` bytes.
    #[must_use]
    pub fn body_preview(&self, limit: usize) -> String {
        let shown = &self.body[..self.body.len().min(limit)];
        let mut text = String::from_utf8_lossy(shown).into_owned();
        if self.body.len() > limit {
            text.push_str(&format!("... ({} bytes)", self.body.len()));
        }
        text
    }

    /// The JSON form: every field, properties as an object, the body as UTF-8 text.
    #[must_use]
    pub fn to_json(&self) -> Value {
        let properties: serde_json::Map<String, Value> = self
            .properties
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        json!({
            "msgId": self.msg_id,
            "offsetMsgId": self.offset_msg_id,
            "topic": self.topic,
            "tags": self.property(PROPERTY_TAGS),
            "keys": self.property("KEYS"),
            "queueId": self.queue_id,
            "queueOffset": self.queue_offset,
            "commitLogOffset": self.commit_log_offset,
            "reconsumeTimes": self.reconsume_times,
            "bornTimestamp": self.born_timestamp,
            "storeTimestamp": self.store_timestamp,
            "bornHost": self.born_host,
            "storeHost": self.store_host,
            "sysFlag": self.sys_flag,
            "properties": properties,
            "bodySize": self.body.len(),
            "body": String::from_utf8_lossy(&self.body),
        })
    }

    /// mqadmin's `printMsg` lines.
    #[must_use]
    pub fn to_text(&self) -> String {
        let properties: Vec<String> = self
            .properties
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let fields = [
            ("OffsetID:", self.offset_msg_id.clone()),
            ("Message ID:", self.msg_id.clone()),
            ("Topic:", self.topic.clone()),
            (
                "Tags:",
                format!("[{}]", self.property(PROPERTY_TAGS).unwrap_or("null")),
            ),
            (
                "Keys:",
                format!("[{}]", self.property("KEYS").unwrap_or("null")),
            ),
            ("Queue ID:", self.queue_id.to_string()),
            ("Queue Offset:", self.queue_offset.to_string()),
            ("CommitLog Offset:", self.commit_log_offset.to_string()),
            ("Reconsume Times:", self.reconsume_times.to_string()),
            ("Born Timestamp:", human_time(self.born_timestamp)),
            ("Store Timestamp:", human_time(self.store_timestamp)),
            ("Born Host:", self.born_host.clone()),
            ("Store Host:", self.store_host.clone()),
            ("System Flag:", self.sys_flag.to_string()),
            ("Properties:", format!("{{{}}}", properties.join(", "))),
            ("Message Body:", self.body_preview(BODY_PREVIEW_BYTES)),
        ];
        fields
            .iter()
            .map(|(label, value)| format!("{label:<20} {value}\n"))
            .collect()
    }
}

/// Decodes the records of a VIEW_MESSAGE_BY_ID, QUERY_MESSAGE or PULL_MESSAGE body.
///
/// # Errors
/// A description of the first bytes that are not a record.
pub fn decode_messages(body: &[u8]) -> Result<Vec<MessageView>, String> {
    let mut at = 0;
    let mut views = Vec::new();
    while at < body.len() {
        let (record, size) = match decode_record(&body[at..], false) {
            Ok(Record::Message { record, size }) => (record, size),
            Ok(Record::Blank { .. }) => break,
            Err(e) => return Err(format!("not a message record at byte {at}: {e}")),
        };
        let properties = parse_properties(record.properties);
        let offset_id = offset_msg_id(record.store_host, record.physical_offset);
        let msg_id = properties
            .iter()
            .find(|(k, _)| k == PROPERTY_UNIQ_KEY)
            .map_or_else(|| offset_id.clone(), |(_, v)| v.clone());
        let body = if record.sys_flag & COMPRESSED_FLAG != 0 {
            let mut inflated = Vec::new();
            flate2::read::ZlibDecoder::new(record.body)
                .take(INFLATED_BODY_MAX_BYTES)
                .read_to_end(&mut inflated)
                .map_err(|e| format!("compressed body does not inflate: {e}"))?;
            inflated
        } else {
            record.body.to_vec()
        };
        views.push(MessageView {
            msg_id,
            offset_msg_id: offset_id,
            topic: record.topic.to_owned(),
            queue_id: record.queue_id,
            queue_offset: record.queue_offset,
            commit_log_offset: record.physical_offset,
            reconsume_times: record.reconsume_times,
            born_timestamp: record.born_timestamp,
            store_timestamp: record.store_timestamp,
            born_host: record.born_host.to_string(),
            store_host: record.store_host.to_string(),
            sys_flag: record.sys_flag,
            properties,
            body,
        });
        at += size;
    }
    Ok(views)
}

fn messages_report(messages: &[MessageView]) -> Report {
    let text = messages
        .iter()
        .map(MessageView::to_text)
        .collect::<Vec<_>>()
        .join("\n");
    let list: Vec<Value> = messages.iter().map(MessageView::to_json).collect();
    Report {
        json: json!({ "messages": list }),
        text,
    }
}

/// QUERY_MESSAGE for `key` on every master of `topic`'s route; QUERY_NOT_FOUND counts as
/// none.
fn query_index(
    client: &mut AdminClient,
    topic: &str,
    key: &str,
    range: (i64, i64),
    max_num: i32,
    unique_key: bool,
) -> Result<Vec<MessageView>, AdminError> {
    let route = client.topic_route(topic)?;
    let header = QueryMessageRequestHeader {
        topic: topic.to_owned(),
        key: key.to_owned(),
        max_num,
        begin_timestamp: range.0,
        end_timestamp: range.1,
    };
    let mut found = Vec::new();
    for (_, addr) in route_masters(&route) {
        let mut request = RemotingCommand::request_with_header(RequestCode::QUERY_MESSAGE, &header);
        if unique_key {
            request
                .ext_fields
                .get_or_insert_with(ExtFields::new)
                .insert("_UNIQUE_KEY_QUERY", "true");
        }
        let response = client.call(&addr, request)?;
        if response.code == ResponseCode::QUERY_NOT_FOUND.0 {
            continue;
        }
        let response = check(&addr, RequestCode::QUERY_MESSAGE, response)?;
        found.extend(decode_messages(&response.body).map_err(|r| bad_body(&addr, r))?);
    }
    Ok(found)
}

/// `queryMsgById`: with a topic, the UNIQ_KEY id through the brokers' index (as
/// `queryMsgByUniqueKey`); otherwise, or when that finds nothing, the offset id through
/// VIEW_MESSAGE_BY_ID at the store host it names.
///
/// # Errors
/// [`AdminError::NotFound`] when neither way finds it; the store host's refusal.
pub fn query_by_id(
    client: &mut AdminClient,
    args: &QueryMsgByIdArgs,
) -> Result<Report, AdminError> {
    if let Some(topic) = &args.topic {
        let mut found = query_index(client, topic, &args.msg_id, (0, i64::MAX), 32, true)?;
        found.retain(|m| m.msg_id == args.msg_id);
        if !found.is_empty() {
            return Ok(messages_report(&found));
        }
    }
    let Some((store_host, offset)) = decode_offset_msg_id(&args.msg_id) else {
        return Err(AdminError::NotFound(format!(
            "message [{}] not found: not an offset id{}",
            args.msg_id,
            if args.topic.is_some() {
                ", and no UNIQ_KEY match in the topic"
            } else {
                "; give -t to look it up as a UNIQ_KEY id"
            }
        )));
    };
    let header = ViewMessageRequestHeader {
        offset,
        topic: args.topic.clone(),
    };
    let addr = store_host.to_string();
    let response = client.request(&addr, RequestCode::VIEW_MESSAGE_BY_ID, &header)?;
    let found = decode_messages(&response.body).map_err(|r| bad_body(&addr, r))?;
    Ok(messages_report(&found))
}

/// Sends a message of `group`'s dead-letter queue (`%DLQ%<group>`, found by its id as
/// `queryMsgById -t` finds it) back to the group's `%RETRY%<group>` topic on the broker
/// that stores it, so the group's consumers receive it again: the same body, properties
/// and message id, its reconsume count started over. rocketmq-dashboard's "resend" asks an
/// online consumer to consume the message directly; a retry topic also reaches a group
/// with no member online now.
///
/// # Errors
/// [`AdminError::NotFound`] when the dead-letter queue has no such message; the broker's
/// refusal of the send.
pub fn resend_dead_letter(
    client: &mut AdminClient,
    group: &str,
    msg_id: &str,
) -> Result<Report, AdminError> {
    let dlq = format!("{DLQ_GROUP_TOPIC_PREFIX}{group}");
    let mut found = query_index(client, &dlq, msg_id, (0, i64::MAX), 32, true)?;
    found.retain(|m| m.msg_id == msg_id || m.offset_msg_id == msg_id);
    let Some(message) = found.into_iter().next() else {
        return Err(AdminError::NotFound(format!(
            "no message [{msg_id}] in the dead-letter queue {dlq}"
        )));
    };
    let retry = format!("{RETRY_GROUP_TOPIC_PREFIX}{group}");
    let header = SendMessageRequestHeaderV2 {
        a: group.to_owned(),
        b: retry.clone(),
        c: "TBW102".to_owned(),
        d: 1,
        e: 0,
        // The body is stored inflated: no compression flag.
        f: 0,
        g: message.born_timestamp,
        h: 0,
        i: Some(properties_to_string(
            message
                .properties
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str())),
        )),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    let mut request = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header);
    request.body = message.body.clone();
    let addr = message.store_host.clone();
    client.call_ok(&addr, request)?;
    Ok(Report {
        json: json!({ "msgId": message.msg_id, "from": dlq, "to": retry, "broker": addr }),
        text: format!(
            "resent [{}] from {dlq} to {retry} on {addr}\n",
            message.msg_id
        ),
    })
}

/// `queryMsgByKey`: QUERY_MESSAGE on every master of the topic, as a table of ids with a
/// body preview; `--json` gives every message in full.
///
/// # Errors
/// [`AdminError::NotFound`] when no broker has the key.
pub fn query_by_key(
    client: &mut AdminClient,
    args: &QueryMsgByKeyArgs,
) -> Result<Report, AdminError> {
    let range = (args.begin_timestamp, args.end_timestamp);
    let found = query_index(client, &args.topic, &args.key, range, args.max_num, false)?;
    if found.is_empty() {
        return Err(AdminError::NotFound(format!(
            "no message with key [{}] in topic [{}]",
            args.key, args.topic
        )));
    }
    let mut table = Table::new(&["#Message ID", "#QID", "#Offset", "#Store Time", "#Body"]);
    for message in &found {
        table.row(vec![
            message.msg_id.clone(),
            message.queue_id.to_string(),
            message.queue_offset.to_string(),
            human_time(message.store_timestamp),
            message.body_preview(64).replace(['\n', '\r'], " "),
        ]);
    }
    let list: Vec<Value> = found.iter().map(MessageView::to_json).collect();
    Ok(Report {
        json: json!({ "messages": list }),
        text: table.render(),
    })
}

/// `queryMsgByOffset`: one PULL_MESSAGE of one message at the offset, from the named
/// broker's master, as the tools consumer group.
///
/// # Errors
/// The broker's answer when it has no message there (PULL_NOT_FOUND, PULL_OFFSET_MOVED),
/// [`AdminError::NotFound`] for an unknown broker name.
pub fn query_by_offset(
    client: &mut AdminClient,
    args: &QueryMsgByOffsetArgs,
) -> Result<Report, AdminError> {
    let route = client.topic_route(&args.topic)?;
    let Some((_, addr)) = route_masters(&route)
        .into_iter()
        .find(|(name, _)| *name == args.broker_name)
    else {
        return Err(AdminError::NotFound(format!(
            "broker [{}] does not serve topic [{}]",
            args.broker_name, args.topic
        )));
    };
    let header = PullMessageRequestHeader {
        consumer_group: TOOLS_CONSUMER_GROUP.to_owned(),
        topic: args.topic.clone(),
        queue_id: args.queue_id,
        queue_offset: args.offset,
        max_msg_nums: 1,
        // The subscription travels in the request (FLAG_SUBSCRIPTION 0x4); no commit, no
        // suspension.
        sys_flag: 0x4,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".to_owned()),
        sub_version: 0,
        expression_type: Some("TAG".to_owned()),
        max_msg_bytes: None,
        request_source: None,
        broker_name: Some(args.broker_name.clone()),
    };
    let response = client.request(&addr, RequestCode::PULL_MESSAGE, &header)?;
    let mut found = decode_messages(&response.body).map_err(|r| bad_body(&addr, r))?;
    found.truncate(1);
    if found.first().is_none_or(|m| m.queue_offset != args.offset) {
        return Err(AdminError::NotFound(format!(
            "no message at offset {} of queue {} of [{}] on [{}]",
            args.offset, args.queue_id, args.topic, args.broker_name
        )));
    }
    Ok(messages_report(&found))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::message::MessageRecord;
    use std::io::Write;

    fn record(body: &[u8], sys_flag: i32, properties: &[u8], out: &mut Vec<u8>) {
        let record = MessageRecord {
            queue_id: 2,
            queue_offset: 7,
            physical_offset: 4096,
            sys_flag,
            born_timestamp: 1_700_000_000_000,
            born_host: "10.0.0.1:5000".parse().unwrap(),
            store_timestamp: 1_700_000_000_123,
            store_host: "10.0.0.2:10911".parse().unwrap(),
            reconsume_times: 1,
            ..MessageRecord::new("T", body, properties)
        };
        out.extend(record.to_bytes());
    }

    #[test]
    fn records_decode_with_inflated_bodies_and_both_ids() {
        let mut zlib = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        zlib.write_all(&[b'x'; 5000]).unwrap();
        let compressed = zlib.finish().unwrap();
        let mut body = Vec::new();
        record(
            &compressed,
            COMPRESSED_FLAG,
            b"UNIQ_KEY\x01ABC\x02TAGS\x01t\x02",
            &mut body,
        );
        record(b"plain", 0, b"", &mut body);
        let views = decode_messages(&body).unwrap();
        assert_eq!(views.len(), 2);
        assert_eq!(views[0].body, vec![b'x'; 5000]);
        assert_eq!(views[0].msg_id, "ABC");
        assert_eq!(views[0].offset_msg_id, "0A00000200002A9F0000000000001000");
        assert_eq!(views[1].msg_id, views[1].offset_msg_id);
        assert_eq!(views[1].body_preview(3), "pla... (5 bytes)");
        let text = views[0].to_text();
        assert!(text.contains("Tags:                [t]\n"), "{text}");
        assert!(
            text.contains("Store Timestamp:     2023-11-14 22:13:20,123\n"),
            "{text}"
        );
        assert_eq!(views[0].to_json()["bodySize"], 5000);
        assert!(decode_messages(&body[..body.len() - 1]).is_err());
    }
}
