//! SendMessage, EndTransaction and RecallMessage (Java `SendMessageActivity`,
//! `EndTransactionActivity`, `RecallMessageActivity`, `ProducerProcessor`).
//!
//! A gRPC message becomes a SEND_MESSAGE_V2 with the properties the proxy builds: user
//! properties, `TAGS`, `KEYS` (joined by spaces), `UNIQ_KEY` = `message_id`, `TRAN_MSG` and
//! the prepared flag for a transaction message, `TIMER_DELIVER_MS` for a delivery
//! timestamp (the broker's timer delivers it), `RECONSUME_TIME`, `PGROUP` = the topic,
//! `__SHARDINGKEY` = `message_group`, `TRACE_CONTEXT`, `__BORNHOST`, `BORN_TIMESTAMP`.
//! The queue: for a single message with a group, Guava's `consistentHash` of the group's
//! Java hash over the write queues (the proxy's `SendMessageQueueSelector`); otherwise round
//! robin.
//!
//! Differences from the proxy: a request of several messages is sent as one
//! SEND_MESSAGE_V2 each, in order, one result entry each (the proxy sends one batch);
//! the prepared messages of a transaction are remembered here, by transaction id, for
//! EndTransaction (the proxy's `TransactionDataManager`), at most [`TRANSACTIONS_MAX`].

use super::proto::{
    Code, EndTransactionRequest, EndTransactionResponse, Message, MessageType,
    RecallMessageRequest, RecallMessageResponse, SendMessageRequest, SendMessageResponse,
    SendResultEntry, TransactionResolution,
};
use super::{broker_error, name_of, ok, status, topic_problem, Caller, Inner};
use crate::calendar::now_ms;
use crate::protocol::message::{decode_offset_msg_id, java_string_hash, properties_to_string};
use crate::protocol::message::{PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY};
use crate::protocol::names::PERM_WRITE;
use crate::remoting::headers::{
    EndTransactionRequestHeader, RecallMessageRequestHeader, RecallMessageResponseHeader,
    SendMessageRequestHeaderV2, SendMessageResponseHeader,
};
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Mutex, PoisonError};

/// Prepared transaction messages remembered for EndTransaction; the oldest go first.
pub const TRANSACTIONS_MAX: usize = 100_000;

/// `MessageSysFlag.COMPRESSED_FLAG`.
const FLAG_COMPRESSED: i32 = 0x1;
/// `MessageSysFlag.TRANSACTION_PREPARED_TYPE`.
const FLAG_TRANSACTION_PREPARED: i32 = 0x1 << 2;
/// `MessageSysFlag.TRANSACTION_COMMIT_TYPE`.
const TRANSACTION_COMMIT: i32 = 0x2 << 2;
/// `MessageSysFlag.TRANSACTION_ROLLBACK_TYPE`.
const TRANSACTION_ROLLBACK: i32 = 0x3 << 2;
/// `MessageSysFlag.TRANSACTION_NOT_TYPE`.
const TRANSACTION_NOT_TYPE: i32 = 0;

/// Prepared transaction messages by transaction id (the proxy's `TransactionDataManager`).
#[derive(Debug, Default)]
pub(super) struct Transactions {
    table: Mutex<(HashMap<String, Prepared>, VecDeque<String>)>,
}

/// Where a prepared message is, as END_TRANSACTION names it.
#[derive(Clone, Debug)]
struct Prepared {
    producer_group: String,
    /// The offset message id the broker answered (`msgId` of the send response).
    offset_msg_id: String,
    commit_log_offset: i64,
    queue_offset: i64,
}

impl Transactions {
    fn insert(&self, transaction_id: String, prepared: Prepared) {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let (by_id, order) = &mut *table;
        while by_id.len() >= TRANSACTIONS_MAX {
            let Some(oldest) = order.pop_front() else {
                break;
            };
            by_id.remove(&oldest);
        }
        if by_id.insert(transaction_id.clone(), prepared).is_none() {
            order.push_back(transaction_id);
        }
    }

    fn take(&self, transaction_id: &str) -> Option<Prepared> {
        let mut table = self.table.lock().unwrap_or_else(PoisonError::into_inner);
        let (by_id, order) = &mut *table;
        let prepared = by_id.remove(transaction_id)?;
        order.retain(|id| id != transaction_id);
        Some(prepared)
    }
}

/// SendMessage.
pub(super) async fn send_message(
    inner: &Inner,
    caller: &Caller,
    request: SendMessageRequest,
) -> SendMessageResponse {
    let refused = |status| SendMessageResponse {
        status: Some(status),
        entries: Vec::new(),
    };
    let Some(first) = request.messages.first() else {
        return refused(status(Code::MessageCorrupted, "no message to send"));
    };
    let topic = first.topic.clone().unwrap_or_default();
    if let Some(problem) = topic_problem(&inner.state, &topic.name) {
        return refused(problem);
    }
    let mut outgoing = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        if message.topic.as_ref() != Some(&topic) {
            return refused(status(
                Code::MessageCorrupted,
                "topic in message is not same",
            ));
        }
        match build(inner, caller, message) {
            Ok(built) => outgoing.push(built),
            Err(problem) => return refused(problem),
        }
    }
    let config = match super::topic_config(&inner.state, &topic.name) {
        Ok(config) => config,
        Err(problem) => return refused(problem),
    };
    let writes = if config.perm & PERM_WRITE == 0 {
        0
    } else {
        config.write_queue_nums.max(0)
    };
    if writes == 0 {
        return refused(status(
            Code::Forbidden,
            format!("the topic {} has no writable queue", topic.name),
        ));
    }
    let group = (request.messages.len() == 1)
        .then_some(first.system_properties.as_ref())
        .flatten()
        .and_then(|system| system.message_group.as_deref())
        .filter(|group| !group.is_empty());
    let mut entries = Vec::with_capacity(outgoing.len());
    for built in outgoing {
        let queue_id = match group {
            Some(group) => consistent_hash(i64::from(java_string_hash(group)), writes),
            None => {
                let next = inner.next_queue.fetch_add(1, Ordering::Relaxed);
                i32::try_from(next % usize::try_from(writes).unwrap_or(1)).unwrap_or(0)
            }
        };
        entries.push(send_one(inner, caller, &topic.name, queue_id, built).await);
    }
    let codes = entries.iter().map(|entry| entry.status.as_ref());
    let overall = super::overall(
        codes,
        status(Code::InternalServerError, "send status is empty"),
    );
    SendMessageResponse {
        status: Some(overall),
        entries,
    }
}

/// A message ready for the broker.
struct Built {
    properties: String,
    body: Vec<u8>,
    sys_flag: i32,
    reconsume_times: i32,
    message_id: String,
    transaction: bool,
}

/// The broker's message of `message` (`buildMessage`, `buildMessageProperty`), or the
/// proxy's refusal.
fn build(inner: &Inner, caller: &Caller, message: &Message) -> Result<Built, super::proto::Status> {
    let config = &inner.state.config.grpc;
    let body_max = inner.state.config.store.max_message_size;
    if config.enable_message_body_empty_check && message.body.is_empty() {
        return Err(status(
            Code::MessageBodyEmpty,
            "message body cannot be empty",
        ));
    }
    if body_max > 0 && message.body.len() > body_max {
        return Err(status(
            Code::MessageBodyTooLarge,
            format!("message body cannot exceed the max {body_max}"),
        ));
    }
    let system = message.system_properties.clone().unwrap_or_default();
    if message.user_properties.len() > config.user_property_max_num {
        return Err(status(
            Code::MessagePropertiesTooLarge,
            format!(
                "too many user properties, max is {}",
                config.user_property_max_num
            ),
        ));
    }
    let mut user_size = 0;
    let mut properties: Vec<(String, String)> = Vec::new();
    let mut user: Vec<(&String, &String)> = message.user_properties.iter().collect();
    user.sort();
    for (key, value) in user {
        if super::SYSTEM_PROPERTIES.contains(&key.as_str()) {
            return Err(status(
                Code::IllegalMessagePropertyKey,
                format!("property is used by system: {key}"),
            ));
        }
        if has_control(key) {
            return Err(status(
                Code::IllegalMessagePropertyKey,
                "the key of property cannot contain control character",
            ));
        }
        if has_control(value) {
            return Err(status(
                Code::IllegalMessagePropertyKey,
                "the value of property cannot contain control character",
            ));
        }
        user_size += key.len() + value.len();
        properties.push((key.clone(), value.clone()));
    }
    let tag = system.tag.clone().unwrap_or_default();
    if !tag.is_empty() {
        if tag.trim().is_empty() {
            return Err(status(
                Code::IllegalMessageTag,
                "tag cannot be the char sequence of whitespace",
            ));
        }
        if tag.contains('|') {
            return Err(status(Code::IllegalMessageTag, "tag cannot contain '|'"));
        }
        if has_control(&tag) {
            return Err(status(
                Code::IllegalMessageTag,
                "tag cannot contain control character",
            ));
        }
        user_size += tag.len();
        properties.push((PROPERTY_TAGS.to_owned(), tag));
    }
    for key in &system.keys {
        if !key.is_empty() && key.trim().is_empty() {
            return Err(status(
                Code::IllegalMessageKey,
                "key cannot be the char sequence of whitespace",
            ));
        }
        if has_control(key) {
            return Err(status(
                Code::IllegalMessageKey,
                "key cannot contain control character",
            ));
        }
        user_size += key.len();
    }
    if !system.keys.is_empty() {
        properties.push((PROPERTY_KEYS.to_owned(), system.keys.join(" ")));
    }
    if user_size > config.max_user_property_size {
        return Err(status(
            Code::MessagePropertiesTooLarge,
            format!(
                "the total size of user property is too large, max is {}",
                config.max_user_property_size
            ),
        ));
    }
    if system.message_id.trim().is_empty() {
        return Err(status(Code::IllegalMessageId, "message id cannot be empty"));
    }
    properties.push((PROPERTY_UNIQ_KEY.to_owned(), system.message_id.clone()));
    let transaction = system.message_type() == MessageType::Transaction;
    if transaction {
        properties.push(("TRAN_MSG".to_owned(), "true".to_owned()));
        if let Some(recovery) = &system.orphaned_transaction_recovery_duration {
            let seconds = u64::try_from(recovery.seconds).unwrap_or(0);
            if config.max_transaction_recovery_second > 0
                && seconds > config.max_transaction_recovery_second
            {
                return Err(status(
                    Code::BadRequest,
                    format!(
                        "the max transaction recovery time of message is too large, max is {}",
                        config.max_transaction_recovery_second
                    ),
                ));
            }
            properties.push((
                "CHECK_IMMUNITY_TIME_IN_SECONDS".to_owned(),
                seconds.to_string(),
            ));
        }
    }
    if let Some(delivery) = &system.delivery_timestamp {
        let deliver_ms = millis_of(delivery);
        let max_delay_ms = i64::try_from(config.max_delay_time.as_millis()).unwrap_or(i64::MAX);
        if max_delay_ms > 0 && deliver_ms.saturating_sub(now_ms()) > max_delay_ms {
            return Err(status(
                Code::IllegalDeliveryTime,
                format!("the max delay time of message is too large, max is {max_delay_ms}"),
            ));
        }
        properties.push(("TIMER_DELIVER_MS".to_owned(), deliver_ms.to_string()));
    }
    let reconsume_times = system.delivery_attempt.unwrap_or(0);
    properties.push(("RECONSUME_TIME".to_owned(), reconsume_times.to_string()));
    let topic = name_of(message.topic.as_ref());
    properties.push(("PGROUP".to_owned(), topic.to_owned()));
    if let Some(group) = system.message_group.as_deref().filter(|g| !g.is_empty()) {
        if group.trim().is_empty() {
            return Err(status(
                Code::IllegalMessageGroup,
                "message group cannot be the char sequence of whitespace",
            ));
        }
        let max = config.max_message_group_size;
        if max > 0 && group.len() >= max {
            return Err(status(
                Code::IllegalMessageGroup,
                format!("message group exceed the max size {max}"),
            ));
        }
        if has_control(group) {
            return Err(status(
                Code::IllegalMessageGroup,
                "message group cannot contain control character",
            ));
        }
        properties.push(("__SHARDINGKEY".to_owned(), group.to_owned()));
    }
    if let Some(trace) = system.trace_context.as_deref().filter(|t| !t.is_empty()) {
        properties.push(("TRACE_CONTEXT".to_owned(), trace.to_owned()));
    }
    let born_host = if system.born_host.trim().is_empty() {
        caller.connection.peer.to_string()
    } else {
        system.born_host.clone()
    };
    properties.push(("__BORNHOST".to_owned(), born_host));
    if let Some(born) = &system.born_timestamp {
        properties.push(("BORN_TIMESTAMP".to_owned(), millis_of(born).to_string()));
    }
    let mut sys_flag = 0;
    if system.body_encoding() == super::proto::Encoding::Gzip {
        sys_flag |= FLAG_COMPRESSED;
    }
    if transaction {
        sys_flag |= FLAG_TRANSACTION_PREPARED;
    }
    Ok(Built {
        properties: properties_to_string(properties.iter().map(|(k, v)| (k.as_str(), v.as_str()))),
        body: message.body.clone(),
        sys_flag,
        reconsume_times,
        message_id: system.message_id,
        transaction,
    })
}

/// One SEND_MESSAGE_V2 and its result entry (`convertToSendMessageResponse`).
async fn send_one(
    inner: &Inner,
    caller: &Caller,
    topic: &str,
    queue_id: i32,
    built: Built,
) -> SendResultEntry {
    let header = SendMessageRequestHeaderV2 {
        a: topic.to_owned(),
        b: topic.to_owned(),
        c: crate::protocol::names::AUTO_CREATE_TOPIC_KEY_TOPIC.to_owned(),
        d: 0,
        e: queue_id,
        f: built.sys_flag,
        g: now_ms(),
        h: 0,
        i: Some(built.properties),
        j: Some(built.reconsume_times),
        k: Some(false),
        l: None,
        m: Some(false),
        n: Some(inner.state.config.broker_name.clone()),
    };
    let request = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header)
        .with_body(built.body);
    let failed = |status| SendResultEntry {
        status: Some(status),
        ..SendResultEntry::default()
    };
    let response = match inner.call(caller, request).await {
        Ok(response) => response,
        Err(problem) => return failed(problem),
    };
    let persistence = |code: Code, send_status: &str| {
        failed(status(
            code,
            format!("send message failed, sendStatus={send_status}"),
        ))
    };
    match response.response_code() {
        ResponseCode::SUCCESS => {}
        ResponseCode::FLUSH_DISK_TIMEOUT => {
            return persistence(Code::MasterPersistenceTimeout, "FLUSH_DISK_TIMEOUT");
        }
        ResponseCode::FLUSH_SLAVE_TIMEOUT => {
            return persistence(Code::SlavePersistenceTimeout, "FLUSH_SLAVE_TIMEOUT");
        }
        ResponseCode::SLAVE_NOT_AVAILABLE => {
            return persistence(Code::HaNotAvailable, "SLAVE_NOT_AVAILABLE");
        }
        _ => return failed(broker_error(&response)),
    }
    let Ok(header) = response.decode_header::<SendMessageResponseHeader>() else {
        return failed(status(
            Code::InternalServerError,
            "the broker's answer has no header",
        ));
    };
    let transaction_id = header.transaction_id.clone().unwrap_or_default();
    if built.transaction && !transaction_id.is_empty() {
        inner.transactions.insert(
            transaction_id.clone(),
            Prepared {
                producer_group: topic.to_owned(),
                commit_log_offset: decode_offset_msg_id(&header.msg_id)
                    .map_or(-1, |(_, offset)| offset),
                offset_msg_id: header.msg_id.clone(),
                queue_offset: header.queue_offset,
            },
        );
    }
    SendResultEntry {
        status: Some(ok()),
        message_id: built.message_id,
        transaction_id,
        offset: header.queue_offset,
        recall_handle: header.recall_handle.unwrap_or_default(),
    }
}

/// EndTransaction: commit or roll back a prepared message this endpoint sent.
pub(super) async fn end_transaction(
    inner: &Inner,
    caller: &Caller,
    request: &EndTransactionRequest,
) -> EndTransactionResponse {
    let answer = |status| EndTransactionResponse {
        status: Some(status),
    };
    let topic = name_of(request.topic.as_ref());
    if let Some(problem) = topic_problem(&inner.state, topic) {
        return answer(problem);
    }
    if request.transaction_id.trim().is_empty() {
        return answer(status(
            Code::InvalidTransactionId,
            "transaction id cannot be empty",
        ));
    }
    let Some(prepared) = inner.transactions.take(&request.transaction_id) else {
        return answer(status(
            Code::InternalServerError,
            "cannot found transaction data",
        ));
    };
    let commit_or_rollback = match request.resolution() {
        TransactionResolution::Commit => TRANSACTION_COMMIT,
        TransactionResolution::Rollback => TRANSACTION_ROLLBACK,
        TransactionResolution::Unspecified => TRANSACTION_NOT_TYPE,
    };
    let header = EndTransactionRequestHeader {
        producer_group: prepared.producer_group.clone(),
        tran_state_table_offset: prepared.queue_offset,
        commit_log_offset: prepared.commit_log_offset,
        commit_or_rollback,
        from_transaction_check: Some(
            request.source() == super::proto::TransactionSource::SourceServerCheck,
        ),
        msg_id: prepared.offset_msg_id.clone(),
        transaction_id: Some(request.transaction_id.clone()),
        topic: Some(topic.to_owned()),
    };
    // Java's producer sends END_TRANSACTION oneway; here the broker's answer is awaited (a
    // oneway call would give the bridge no answer to wait for).
    let end = RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &header);
    match inner.call(caller, end).await {
        Ok(response) if response.response_code() == ResponseCode::SUCCESS => answer(ok()),
        Ok(response) => {
            // A resolution the broker refused leaves the message for the transaction check.
            inner
                .transactions
                .insert(request.transaction_id.clone(), prepared);
            answer(broker_error(&response))
        }
        Err(problem) => answer(problem),
    }
}

/// RecallMessage: a RECALL_MESSAGE for the handle a timer message's send gave.
pub(super) async fn recall_message(
    inner: &Inner,
    caller: &Caller,
    request: &RecallMessageRequest,
) -> RecallMessageResponse {
    let answer = |status, message_id: String| RecallMessageResponse {
        status: Some(status),
        message_id,
    };
    let topic = name_of(request.topic.as_ref());
    if let Some(problem) = topic_problem(&inner.state, topic) {
        return answer(problem, String::new());
    }
    let header = RecallMessageRequestHeader {
        producer_group: Some(topic.to_owned()),
        topic: topic.to_owned(),
        recall_handle: request.recall_handle.clone(),
    };
    let recall = RemotingCommand::request_with_header(RequestCode::RECALL_MESSAGE, &header);
    match inner.call(caller, recall).await {
        Ok(response) if response.response_code() == ResponseCode::SUCCESS => {
            let id = response
                .decode_header::<RecallMessageResponseHeader>()
                .map(|header| header.msg_id)
                .unwrap_or_default();
            answer(ok(), id)
        }
        Ok(response) => answer(broker_error(&response), String::new()),
        Err(problem) => answer(problem, String::new()),
    }
}

/// Whether `text` has a Java ISO control character (`CharMatcher.javaIsoControl`).
fn has_control(text: &str) -> bool {
    text.chars().any(char::is_control)
}

/// A protobuf timestamp in milliseconds since the epoch.
fn millis_of(timestamp: &super::proto::Timestamp) -> i64 {
    timestamp
        .seconds
        .saturating_mul(1000)
        .saturating_add(i64::from(timestamp.nanos / 1_000_000))
}

/// Guava's `Hashing.consistentHash(input, buckets)`: the bucket a key keeps as buckets are
/// added (its linear congruential walk).
fn consistent_hash(input: i64, buckets: i32) -> i32 {
    assert!(buckets > 0, "a topic with writable queues has at least one");
    let mut state = input;
    let mut candidate: i32 = 0;
    loop {
        state = state
            .wrapping_mul(2_862_933_555_777_941_757)
            .wrapping_add(1);
        // Java: (double) ((int) (state >>> 33) + 1) / 0x1.0p31.
        #[allow(clippy::cast_possible_truncation)]
        let high = ((state as u64) >> 33) as i32;
        let next_double = (f64::from(high) + 1.0) / 2_147_483_648.0;
        #[allow(clippy::cast_possible_truncation)]
        let next = (f64::from(candidate + 1) / next_double) as i32;
        if next >= 0 && next < buckets {
            candidate = next;
        } else {
            return candidate;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consistent_hash_one_bucket_is_zero() {
        assert_eq!(consistent_hash(12345, 1), 0);
    }

    #[test]
    fn consistent_hash_stays_in_range_and_is_stable() {
        for input in [-5_i64, 0, 1, 99, i64::from(java_string_hash("order-1"))] {
            let bucket = consistent_hash(input, 8);
            assert!((0..8).contains(&bucket));
            assert_eq!(bucket, consistent_hash(input, 8));
        }
    }
}
