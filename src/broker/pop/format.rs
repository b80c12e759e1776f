//! The byte shapes of POP as Java 5.x writes them: the handle of a popped message
//! (`ExtraInfoUtil`: `extraInfo`, `POP_CK`, `startOffsetInfo`, `msgOffsetInfo`), the
//! checkpoint (`PopCheckPoint`), the ack (`AckMsg`, `BatchAckMsg`) bodies on the revive
//! topic, and the body of BATCH_ACK_MESSAGE (`BatchAckMessageRequestBody`).
//!
//! The JSON bodies are fastjson2's output of the 5.5.0 classes: short names, sorted, the
//! derived `reviveTime` of a checkpoint included, absent values left out.

use crate::protocol::names::RETRY_GROUP_TOPIC_PREFIX;
use serde::{Deserialize, Serialize};

/// `ExtraInfoUtil`'s retry marks: the first word of each info entry.
const NORMAL_TOPIC: &str = "0";
const RETRY_TOPIC_V1: &str = "1";
const RETRY_TOPIC_V2: &str = "2";

/// The retry mark of `topic` (`ExtraInfoUtil.getRetry`).
#[must_use]
pub fn retry_mark(topic: &str) -> &'static str {
    if is_retry_topic_v2(topic) {
        RETRY_TOPIC_V2
    } else if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        RETRY_TOPIC_V1
    } else {
        NORMAL_TOPIC
    }
}

/// `KeyBuilder.isPopRetryTopicV2`: a `%RETRY%` topic with a `+` in it.
#[must_use]
pub fn is_retry_topic_v2(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) && topic.contains('+')
}

/// `KeyBuilder.buildPopRetryTopicV1`: `%RETRY%<group>_<topic>`.
#[must_use]
pub fn retry_topic_v1(topic: &str, group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}_{topic}")
}

/// `KeyBuilder.buildPopRetryTopicV2`: `%RETRY%<group>+<topic>`.
#[must_use]
pub fn retry_topic_v2(topic: &str, group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}+{topic}")
}

/// `KeyBuilder.parseNormalTopic`: the topic a POP retry topic of `group` stands for.
#[must_use]
pub fn normal_topic<'a>(topic: &'a str, group: &str) -> &'a str {
    let Some(rest) = topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) else {
        return topic;
    };
    let Some(rest) = rest.strip_prefix(group) else {
        return topic;
    };
    rest.strip_prefix('+')
        .or_else(|| rest.strip_prefix('_'))
        .unwrap_or(topic)
}

/// The topic a handle's retry mark names (`ExtraInfoUtil.getRealTopic`).
#[must_use]
pub fn real_topic(topic: &str, group: &str, mark: &str) -> Option<String> {
    match mark {
        NORMAL_TOPIC => Some(topic.to_owned()),
        RETRY_TOPIC_V1 => Some(retry_topic_v1(topic, group)),
        RETRY_TOPIC_V2 => Some(retry_topic_v2(topic, group)),
        _ => None,
    }
}

/// A popped message's handle (`extraInfo`, the `POP_CK` property):
/// `ckQueueOffset popTime invisibleTime reviveQid retry brokerName queueId [queueOffset]`.
#[doc(alias = "ExtraInfoUtil")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtraInfo {
    /// The checkpoint's start offset.
    pub ck_queue_offset: i64,
    /// When the message was popped, ms.
    pub pop_time: i64,
    /// Its invisible time, ms.
    pub invisible_time: i64,
    /// The revive queue of its checkpoint (999 for an ordered pop).
    pub revive_qid: i32,
    /// The retry mark of the topic popped: "0", "1" or "2".
    pub retry: String,
    /// The broker that popped it.
    pub broker_name: String,
    /// The queue popped.
    pub queue_id: i32,
    /// The message's queue offset, when the handle names it.
    pub queue_offset: Option<i64>,
}

impl ExtraInfo {
    /// Parses a handle; `None` when a field is missing or is no number, where Java's
    /// `ExtraInfoUtil` throws.
    #[must_use]
    pub fn parse(text: &str) -> Option<ExtraInfo> {
        let words: Vec<&str> = text.split(' ').collect();
        if words.len() < 7 {
            return None;
        }
        Some(ExtraInfo {
            ck_queue_offset: words[0].parse().ok()?,
            pop_time: words[1].parse().ok()?,
            invisible_time: words[2].parse().ok()?,
            revive_qid: words[3].parse().ok()?,
            retry: words[4].to_owned(),
            broker_name: words[5].to_owned(),
            queue_id: words[6].parse().ok()?,
            queue_offset: match words.get(7) {
                Some(word) => Some(word.parse().ok()?),
                None => None,
            },
        })
    }

    /// The handle as Java builds it (`buildExtraInfo`).
    #[must_use]
    pub fn build(&self) -> String {
        let mut text = format!(
            "{} {} {} {} {} {} {}",
            self.ck_queue_offset,
            self.pop_time,
            self.invisible_time,
            self.revive_qid,
            self.retry,
            self.broker_name,
            self.queue_id
        );
        if let Some(offset) = self.queue_offset {
            text.push_str(&format!(" {offset}"));
        }
        text
    }
}

/// Appends one `startOffsetInfo` entry (`buildStartOffsetInfo`): `retry queueId offset`.
pub fn push_start_offset_info(info: &mut String, topic: &str, queue_id: i32, offset: i64) {
    if !info.is_empty() {
        info.push(';');
    }
    info.push_str(&format!("{} {queue_id} {offset}", retry_mark(topic)));
}

/// Appends one `msgOffsetInfo` entry (`buildMsgOffsetInfo`): `retry queueId o1,o2,...`.
pub fn push_msg_offset_info(info: &mut String, topic: &str, queue_id: i32, offsets: &[i64]) {
    if !info.is_empty() {
        info.push(';');
    }
    let offsets: Vec<String> = offsets.iter().map(i64::to_string).collect();
    info.push_str(&format!(
        "{} {queue_id} {}",
        retry_mark(topic),
        offsets.join(",")
    ));
}

/// A checkpoint (`PopCheckPoint`, tag `ck` on the revive topic): the messages of one pop of
/// one queue and which of them are acked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PopCheckPoint {
    /// `bm`: the acked messages, bit i for the i-th.
    #[serde(rename = "bm", default)]
    pub bit_map: i32,
    /// `bn`: the broker that popped.
    #[serde(rename = "bn", default, skip_serializing_if = "Option::is_none")]
    pub broker_name: Option<String>,
    /// `c`: the consumer group.
    #[serde(rename = "c", default)]
    pub cid: String,
    /// `d`: each message's queue offset less `so`; absent in old checkpoints, whose
    /// messages are `so..so+n`.
    #[serde(rename = "d", default, skip_serializing_if = "Option::is_none")]
    pub queue_offset_diff: Option<Vec<i32>>,
    /// `it`: invisible time, ms.
    #[serde(rename = "it", default)]
    pub invisible_time: i64,
    /// `n`: messages popped.
    #[serde(rename = "n", default)]
    pub num: i8,
    /// `pt`: pop time, ms.
    #[serde(rename = "pt", default)]
    pub pop_time: i64,
    /// `q`: the queue popped.
    #[serde(rename = "q", default)]
    pub queue_id: i32,
    /// `reviveTime`, `pt + it` (a getter fastjson writes; ignored on reading).
    #[serde(rename = "reviveTime", default)]
    revive_time: i64,
    /// `ro`: the checkpoint's own offset in its revive queue, set when read back.
    #[serde(rename = "ro", default)]
    pub revive_offset: i64,
    /// `rp`: how often the checkpoint was written again.
    #[serde(rename = "rp", default, skip_serializing_if = "Option::is_none")]
    pub re_put_times: Option<String>,
    /// `so`: the first message's queue offset.
    #[serde(rename = "so", default)]
    pub start_offset: i64,
    /// `sp`: suspended (5.5.0; always false here).
    #[serde(rename = "sp", default)]
    pub suspend: bool,
    /// `t`: the topic popped (a retry topic for retried messages).
    #[serde(rename = "t", default)]
    pub topic: String,
}

impl PopCheckPoint {
    /// A checkpoint of `offsets` (ascending, from `start_offset` on) popped at `pop_time`.
    #[must_use]
    pub fn new(
        topic: &str,
        group: &str,
        queue_id: i32,
        start_offset: i64,
        offsets: &[i64],
        times: (i64, i64),
        broker_name: &str,
    ) -> PopCheckPoint {
        let (pop_time, invisible_time) = times;
        let diff = offsets
            .iter()
            .map(|offset| i32::try_from(offset - start_offset).unwrap_or(i32::MAX))
            .collect();
        PopCheckPoint {
            bit_map: 0,
            broker_name: Some(broker_name.to_owned()),
            cid: group.to_owned(),
            queue_offset_diff: Some(diff),
            invisible_time,
            num: i8::try_from(offsets.len()).unwrap_or(i8::MAX),
            pop_time,
            queue_id,
            revive_time: pop_time.wrapping_add(invisible_time),
            revive_offset: 0,
            re_put_times: None,
            start_offset,
            suspend: false,
            topic: topic.to_owned(),
        }
    }

    /// `getReviveTime`: when unacked messages come back.
    #[must_use]
    pub fn revive_time(&self) -> i64 {
        self.pop_time.wrapping_add(self.invisible_time)
    }

    /// The body Java writes.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut out = self.clone();
        out.revive_time = self.revive_time();
        serde_json::to_string(&out).unwrap_or_default()
    }

    /// `indexOfAck`: which message of the checkpoint `offset` is.
    #[must_use]
    pub fn index_of(&self, offset: i64) -> Option<usize> {
        if offset < self.start_offset {
            return None;
        }
        let delta = offset - self.start_offset;
        match &self.queue_offset_diff {
            Some(diff) if !diff.is_empty() => diff.iter().position(|d| i64::from(*d) == delta),
            _ => usize::try_from(delta)
                .ok()
                .filter(|i| *i < usize::try_from(self.num).unwrap_or(0)),
        }
    }

    /// `ackOffsetByIndex`: the queue offset of the `index`-th message.
    #[must_use]
    pub fn offset_at(&self, index: usize) -> i64 {
        let diff = self
            .queue_offset_diff
            .as_ref()
            .filter(|diff| !diff.is_empty())
            .and_then(|diff| diff.get(index));
        match diff {
            Some(d) => self.start_offset + i64::from(*d),
            None => self.start_offset + i64::try_from(index).unwrap_or(0),
        }
    }

    /// Whether the `index`-th message is acked.
    #[must_use]
    pub fn is_acked(&self, index: usize) -> bool {
        index < 32 && self.bit_map & (1 << index) != 0
    }

    /// Marks the `index`-th message acked.
    pub fn set_acked(&mut self, index: usize) {
        if index < 32 {
            self.bit_map |= 1 << index;
        }
    }

    /// What pairs a checkpoint with its acks (`PopReviveService`'s merge key).
    #[must_use]
    pub fn merge_key(&self, own_broker: &str) -> String {
        merge_key(
            &self.topic,
            &self.cid,
            self.queue_id,
            self.start_offset,
            self.pop_time,
            self.broker_name.as_deref().unwrap_or(own_broker),
        )
    }
}

/// The merge key of a checkpoint or an ack: topic, group, queue, start offset, pop time and
/// broker, concatenated as Java does.
fn merge_key(
    topic: &str,
    group: &str,
    queue_id: i32,
    start: i64,
    pop_time: i64,
    broker: &str,
) -> String {
    format!("{topic}{group}{queue_id}{start}{pop_time}{broker}")
}

/// An ack (`AckMsg`, tag `ack`) or a batch of them (`BatchAckMsg`, tag `bAck`, with `aol`).
#[doc(alias = "BatchAckMsg")]
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AckMsg {
    /// `ao`: the acked queue offset (-1 in a batch).
    #[serde(rename = "ao", default)]
    pub ack_offset: i64,
    /// `aol`: the acked queue offsets of a batch.
    #[serde(rename = "aol", default, skip_serializing_if = "Option::is_none")]
    pub ack_offset_list: Option<Vec<i64>>,
    /// `bn`: the broker that popped.
    #[serde(rename = "bn", default, skip_serializing_if = "Option::is_none")]
    pub broker_name: Option<String>,
    /// `c`: the consumer group.
    #[serde(rename = "c", default)]
    pub consumer_group: String,
    /// `pt`: the pop time of the checkpoint.
    #[serde(rename = "pt", default)]
    pub pop_time: i64,
    /// `q`: the queue.
    #[serde(rename = "q", default)]
    pub queue_id: i32,
    /// `so`: the checkpoint's start offset.
    #[serde(rename = "so", default)]
    pub start_offset: i64,
    /// `t`: the topic popped.
    #[serde(rename = "t", default)]
    pub topic: String,
}

impl AckMsg {
    /// The body Java writes.
    #[must_use]
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// The offsets it acks.
    #[must_use]
    pub fn offsets(&self) -> Vec<i64> {
        match &self.ack_offset_list {
            Some(list) => list.clone(),
            None => vec![self.ack_offset],
        }
    }

    /// The merge key of its checkpoint.
    #[must_use]
    pub fn merge_key(&self, own_broker: &str) -> String {
        let broker = self
            .broker_name
            .as_deref()
            .filter(|name| !name.trim().is_empty())
            .unwrap_or(own_broker);
        merge_key(
            &self.topic,
            &self.consumer_group,
            self.queue_id,
            self.start_offset,
            self.pop_time,
            broker,
        )
    }
}

/// One entry of a BATCH_ACK_MESSAGE body (`BatchAck`).
#[derive(Clone, Debug, Deserialize)]
pub struct BatchAck {
    /// `c`.
    #[serde(rename = "c", alias = "consumerGroup", default)]
    pub consumer_group: String,
    /// `t`: the topic as the client knows it.
    #[serde(rename = "t", alias = "topic", default)]
    pub topic: String,
    /// `r`: the retry mark.
    #[serde(rename = "r", alias = "retry", default)]
    pub retry: String,
    /// `so`.
    #[serde(rename = "so", alias = "startOffset", default)]
    pub start_offset: i64,
    /// `q`.
    #[serde(rename = "q", alias = "queueId", default)]
    pub queue_id: i32,
    /// `rq`.
    #[serde(rename = "rq", alias = "reviveQueueId", default)]
    pub revive_queue_id: i32,
    /// `pt`.
    #[serde(rename = "pt", alias = "popTime", default)]
    pub pop_time: i64,
    /// `it`.
    #[serde(rename = "it", alias = "invisibleTime", default)]
    pub invisible_time: i64,
    /// `b`: the acked messages as a `java.util.BitSet`'s bytes in base64.
    #[serde(rename = "b", alias = "bitSet", default)]
    pub bit_set: Option<String>,
}

impl BatchAck {
    /// The indexes the bit set holds (`BitSet.valueOf`: little-endian bytes); `None` when it
    /// is no base64.
    #[must_use]
    pub fn indexes(&self) -> Option<Vec<usize>> {
        let bytes = base64_decode(self.bit_set.as_deref().unwrap_or(""))?;
        let mut set = Vec::new();
        for (byte_index, byte) in bytes.iter().enumerate() {
            for bit in 0..8 {
                if byte & (1 << bit) != 0 {
                    set.push(byte_index * 8 + bit);
                }
            }
        }
        Some(set)
    }
}

/// A BATCH_ACK_MESSAGE body (`BatchAckMessageRequestBody`).
#[derive(Clone, Debug, Deserialize)]
pub struct BatchAckBody {
    /// `brokerName`.
    #[serde(rename = "brokerName", default)]
    pub broker_name: Option<String>,
    /// `acks`.
    #[serde(default)]
    pub acks: Option<Vec<BatchAck>>,
}

/// Standard base64 (with or without padding), as fastjson writes a `byte[]`.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    use base64::Engine as _;
    const LENIENT: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_padding_mode(DecodePaddingMode::Indifferent)
            .with_decode_allow_trailing_bits(true),
    );
    LENIENT.decode(text).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Printed by fastjson2 from the 5.5.0 classes (`JSON.toJSONString`).
    const JAVA_CK: &str = concat!(
        r#"{"bm":0,"bn":"broker-a","c":"G","d":[0,1,3],"it":60000,"n":3,"#,
        r#""pt":1700000000000,"q":1,"reviveTime":1700000060000,"ro":0,"so":5,"sp":false,"#,
        r#""t":"T"}"#
    );
    const JAVA_ACK: &str =
        r#"{"ao":6,"bn":"broker-a","c":"G","pt":1700000000000,"q":1,"so":5,"t":"T"}"#;
    const JAVA_BATCH_ACK: &str = concat!(
        r#"{"ao":-1,"aol":[5,8],"bn":"broker-a","c":"G","pt":1700000000000,"q":1,"#,
        r#""so":5,"t":"T"}"#
    );

    #[test]
    fn checkpoint_is_written_as_java_writes_it() {
        let ck = PopCheckPoint::new(
            "T",
            "G",
            1,
            5,
            &[5, 6, 8],
            (1_700_000_000_000, 60_000),
            "broker-a",
        );
        assert_eq!(ck.to_json(), JAVA_CK);
        let back: PopCheckPoint = serde_json::from_str(JAVA_CK).unwrap();
        assert_eq!(back.to_json(), JAVA_CK);
        assert_eq!(back.index_of(8), Some(2));
        assert_eq!(back.index_of(7), None);
        assert_eq!(back.offset_at(2), 8);
        let with_rp = r#"{"bm":5,"c":"G","it":1,"n":2,"pt":1,"q":1,"rp":"1","so":5,"t":"T"}"#;
        let old: PopCheckPoint = serde_json::from_str(with_rp).unwrap();
        assert_eq!(old.index_of(6), Some(1));
        assert!(old.is_acked(0) && !old.is_acked(1) && old.is_acked(2));
        assert_eq!(old.re_put_times.as_deref(), Some("1"));
    }

    #[test]
    fn acks_are_written_as_java_writes_them() {
        let ack = AckMsg {
            ack_offset: 6,
            ack_offset_list: None,
            broker_name: Some("broker-a".to_owned()),
            consumer_group: "G".to_owned(),
            pop_time: 1_700_000_000_000,
            queue_id: 1,
            start_offset: 5,
            topic: "T".to_owned(),
        };
        assert_eq!(ack.to_json(), JAVA_ACK);
        let batch = AckMsg {
            ack_offset: -1,
            ack_offset_list: Some(vec![5, 8]),
            ..ack.clone()
        };
        assert_eq!(batch.to_json(), JAVA_BATCH_ACK);
        let ck = PopCheckPoint::new("T", "G", 1, 5, &[5, 6], (1_700_000_000_000, 1), "broker-a");
        assert_eq!(ack.merge_key("x"), ck.merge_key("x"));
    }

    #[test]
    fn batch_ack_body_of_the_java_client_parses() {
        let body = concat!(
            r#"{"acks":[{"b":"CQI=","c":"G","it":60000,"pt":1700000000000,"q":1,"r":"0","#,
            r#""rq":2,"so":5,"t":"T"}],"brokerName":"broker-a"}"#
        );
        let body: BatchAckBody = serde_json::from_str(body).unwrap();
        let acks = body.acks.unwrap();
        assert_eq!(acks[0].indexes(), Some(vec![0, 3, 9]));
        assert_eq!(acks[0].revive_queue_id, 2);
        let unpadded = BatchAck {
            bit_set: Some("CQI".to_owned()),
            ..acks[0].clone()
        };
        assert_eq!(unpadded.indexes(), Some(vec![0, 3, 9]));
        let garbled = BatchAck {
            bit_set: Some("C*I=".to_owned()),
            ..acks[0].clone()
        };
        assert_eq!(garbled.indexes(), None);
    }

    #[test]
    fn handles_are_built_as_extra_info_util_builds_them() {
        let info = ExtraInfo {
            ck_queue_offset: 5,
            pop_time: 1_700_000_000_000,
            invisible_time: 60_000,
            revive_qid: 3,
            retry: retry_mark("%RETRY%G_T").to_owned(),
            broker_name: "broker-a".to_owned(),
            queue_id: 0,
            queue_offset: Some(7),
        };
        let text = "5 1700000000000 60000 3 1 broker-a 0 7";
        assert_eq!(info.build(), text);
        assert_eq!(ExtraInfo::parse(text), Some(info));
        assert_eq!(ExtraInfo::parse("5 x 1 1 0 b 0"), None);
        let mut start = String::new();
        push_start_offset_info(&mut start, "T", 2, 10);
        push_start_offset_info(&mut start, "%RETRY%G_T", 0, 4);
        assert_eq!(start, "0 2 10;1 0 4");
        let mut offsets = String::new();
        push_msg_offset_info(&mut offsets, "T", 2, &[10, 11, 13]);
        assert_eq!(offsets, "0 2 10,11,13");
        assert_eq!(retry_mark("%RETRY%G+T"), "2");
        assert_eq!(normal_topic("%RETRY%G_T", "G"), "T");
        assert_eq!(normal_topic("%RETRY%G+T", "G"), "T");
        assert_eq!(real_topic("T", "G", "1").as_deref(), Some("%RETRY%G_T"));
    }
}
