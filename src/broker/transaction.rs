//! Transactional messages on the broker (`TransactionalMessageBridge`,
//! `TransactionalMessageServiceImpl`, `EndTransactionProcessor` and
//! `TransactionalMessageCheckService` in Java).
//!
//! A send whose `TRAN_MSG` property is `true` is stored as a *half* message: topic
//! `RMQ_SYS_TRANS_HALF_TOPIC`, queue 0, the real topic and queue in `REAL_TOPIC` /
//! `REAL_QID`, its transaction bits cleared so that it enters the half queue (which no
//! consumer subscribes to). END_TRANSACTION finds the half by its CommitLog offset; a commit
//! stores it again under its real topic (commit type, `preparedTransactionOffset` = the
//! half's offset), and commit and rollback both write an *op* message to
//! `RMQ_SYS_TRANS_OP_HALF_TOPIC` queue 0, tag `d`, body = the half's queue offset in decimal.
//!
//! The check runs on the control shard every `transactionCheckInterval`: it walks the half
//! queue from the progress offset of group `CID_RMQ_SYS_TRANS`, skips halves an op message
//! ended, and for each half older than `transactionTimeOut` stores a copy with
//! `TRANSACTION_CHECK_TIMES` incremented and sends CHECK_TRANSACTION_STATE (oneway, the copy
//! as body) to a live producer of its `PGROUP`; a half already checked `transactionCheckMax`
//! times goes to `TRANS_CHECK_MAX_TIME_TOPIC` instead (4.9.8's `resolveDiscardMsg`). Both
//! progress offsets are consumer offsets, persisted with the others, so a restart resumes the
//! walk; a stale offset after a crash only makes the walk read some halves and ops again.

use super::state::{now_ms, BrokerState, PERM_READ, PERM_WRITE};
use crate::store::commit_log::PutMessage;
pub(crate) use crate::store::message::TRANSACTION_TYPE_MASK;
use crate::store::message::{
    decode_record, parse_properties, properties_to_string, rewrite_properties, MessageRecord,
    Record, PROPERTY_TAGS,
};
use crate::store::message_store::StoreHandle;

/// Where half messages wait (`TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC`).
pub const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Where op messages mark halves done (`TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC`).
pub const OP_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Where halves checked too often go (`TopicValidator.TRANS_CHECK_MAX_TIME_TOPIC`).
pub const CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// The group whose offsets record the check's progress (`MixAll.CID_SYS_RMQ_TRANS`).
pub const TRANS_GROUP: &str = "CID_RMQ_SYS_TRANS";
/// Tag of an op message that ends a half (`TransactionalMessageUtil.REMOVETAG`).
pub const REMOVE_TAG: &str = "d";
/// `MessageSysFlag.TRANSACTION_NOT_TYPE`.
pub const TRANSACTION_NOT_TYPE: i32 = 0;
/// `MessageSysFlag.TRANSACTION_PREPARED_TYPE`.
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x1 << 2;
/// `MessageSysFlag.TRANSACTION_COMMIT_TYPE`.
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x2 << 2;
/// `MessageSysFlag.TRANSACTION_ROLLBACK_TYPE`.
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0x3 << 2;

pub(crate) const TRAN_MSG: &str = "TRAN_MSG";
pub(crate) const PGROUP: &str = "PGROUP";
pub(crate) const REAL_TOPIC: &str = "REAL_TOPIC";
pub(crate) const REAL_QID: &str = "REAL_QID";
pub(crate) const CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
pub(crate) const CHECK_IMMUNITY: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
pub(crate) const PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
/// Longest properties string a record holds.
pub(crate) const PROPERTIES_MAX: usize = 32_767;
/// Whether stored properties mark a transaction half (`TRAN_MSG` = `true`, as Java's
/// `Boolean.parseBoolean`).
#[must_use]
pub fn is_half(properties: &[u8]) -> bool {
    parse_properties(properties)
        .iter()
        .any(|(name, value)| name == TRAN_MSG && value.eq_ignore_ascii_case("true"))
}

/// Turns a send into its half message (`parseHalfMessageInner`): real topic and queue into
/// properties, the half topic's queue 0, transaction bits cleared.
pub async fn into_half(state: &BrokerState, mut message: PutMessage) -> PutMessage {
    state
        .ensure_topic(HALF_TOPIC, 1, PERM_READ | PERM_WRITE)
        .await;
    // Replacing, as Java's `putProperty`: a REAL_TOPIC the client sent along must not
    // decide where the commit goes.
    let queue = message.queue_id.to_string();
    message.properties = rewrite_properties(
        &message.properties,
        &[],
        &[(REAL_TOPIC, &message.topic), (REAL_QID, &queue)],
    );
    message.topic = HALF_TOPIC.to_owned();
    message.queue_id = 0;
    message.sys_flag &= !TRANSACTION_TYPE_MASK;
    message
}

/// A stored record, owned.
pub(crate) struct Stored {
    bytes: Vec<u8>,
    properties: Vec<(String, String)>,
}

impl Stored {
    pub(crate) fn decode(bytes: Vec<u8>) -> Option<Stored> {
        let properties = match decode_record(&bytes, false) {
            Ok(Record::Message { record, .. }) => parse_properties(record.properties),
            _ => return None,
        };
        Some(Stored { bytes, properties })
    }

    pub(crate) fn record(&self) -> Option<MessageRecord<'_>> {
        match decode_record(&self.bytes, false) {
            Ok(Record::Message { record, .. }) => Some(record),
            _ => None,
        }
    }

    pub(crate) fn property(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The queue a half message was sent to (`REAL_QID`).
    pub(crate) fn real_queue(&self) -> i32 {
        self.property(REAL_QID)
            .and_then(|q| q.parse().ok())
            .unwrap_or(0)
    }

    /// The properties without `drop`, with `set` replacing or adding entries.
    pub(crate) fn properties_with(&self, drop: &[&str], set: &[(&str, &str)]) -> Vec<u8> {
        let kept = self
            .properties
            .iter()
            .filter(|(k, _)| !drop.contains(&k.as_str()) && !set.iter().any(|(n, _)| n == k))
            .map(|(k, v)| (k.as_str(), v.as_str()));
        properties_to_string(kept.chain(set.iter().copied())).into_bytes()
    }

    /// A put of the same message, fields as stored.
    pub(crate) fn put(&self, record: &MessageRecord<'_>, topic: &str, queue_id: i32) -> PutMessage {
        PutMessage::from_record(record, topic.to_owned(), queue_id)
    }
}

/// Marks the half at `half_offset` done (`deletePrepareMessage` / `putOpMessage`).
pub(crate) async fn put_op(
    state: &BrokerState,
    store: &StoreHandle,
    half_offset: i64,
    host: std::net::SocketAddr,
) {
    state
        .ensure_topic(OP_TOPIC, 1, PERM_READ | PERM_WRITE)
        .await;
    let op = PutMessage {
        topic: OP_TOPIC.to_owned(),
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: now_ms(),
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: half_offset.to_string().into_bytes(),
        properties: properties_to_string([(PROPERTY_TAGS, REMOVE_TAG)]).into_bytes(),
    };
    if let Err(error) = store.put(op).await {
        // The half stays open: the check asks its producer again, which at worst delivers
        // a committed message twice (at least once, as in Java).
        tracing::error!(%error, half_offset, "cannot store the transaction op message");
    }
}
