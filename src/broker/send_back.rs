//! Retry and dead letter: CONSUMER_SEND_MSG_BACK (`asyncConsumerSendMsgBack` in Java's
//! `SendMessageProcessor`) and the `%RETRY%` check of a producer's send
//! (`handleRetryAndDLQ`).
//!
//! A consumer hands back a message it could not consume by its CommitLog offset. The broker
//! stores a copy for the group's `%RETRY%<group>` topic with `reconsumeTimes + 1`, the
//! original topic in `RETRY_TOPIC` and the first message's id in `ORIGIN_MESSAGE_ID`, delayed
//! by the asked level (`3 + reconsumeTimes` when the consumer asks 0), so it waits in
//! `SCHEDULE_TOPIC_XXXX` first. A message already redelivered `maxReconsumeTimes` times (the
//! request's, else the group's `retryMaxTimes`), or handed back with a negative level, goes
//! to `%DLQ%<group>` at once instead.

use super::admin::{error, Response};
use super::processor::FAQ;
use super::schedule::{encode_properties, redirect_delayed, set_property, PROPERTY_DELAY};
use super::state::{
    invalid_topic_remark, BrokerState, DLQ_GROUP_TOPIC_PREFIX, PERM_READ, PERM_WRITE,
    RETRY_GROUP_TOPIC_PREFIX,
};
use crate::remoting::headers::ConsumerSendMsgBackRequestHeader;
use crate::remoting::{RemotingCommand, ResponseCode};
use crate::store::commit_log::PutMessage;
use crate::store::message::{decode_record, offset_msg_id, parse_properties, Record};
use crate::store::message_store::StoreHandle;
use crate::store::reader::StoreReader;
use crate::store::segment_writer::StoreError;

/// `MessageConst.PROPERTY_RETRY_TOPIC`.
pub const PROPERTY_RETRY_TOPIC: &str = "RETRY_TOPIC";
/// `MessageConst.PROPERTY_ORIGIN_MESSAGE_ID`.
pub const PROPERTY_ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";
/// Queues of a `%DLQ%` topic (`DLQ_NUMS_PER_GROUP`).
pub const DLQ_NUMS_PER_GROUP: i32 = 1;
/// `MQVersion.Version.V3_4_9.ordinal()`: clients from this version on send their own
/// `maxReconsumeTimes`.
const V3_4_9: i32 = 165;

/// SUBSCRIPTION_GROUP_NOT_EXIST with Java's remark.
fn group_not_exist(request: &RemotingCommand, group: &str) -> Response {
    let remark = format!("subscription group not exist, {group} {FAQ}");
    error(request, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, remark)
}

/// The `PutMessageStatus` name Java answers a failed send-back put with.
fn put_status_name(failure: &StoreError) -> &'static str {
    match failure {
        StoreError::TooLarge { .. } | StoreError::Illegal(_) => "MESSAGE_ILLEGAL",
        StoreError::DiskFull { .. }
        | StoreError::NotWritable
        | StoreError::ShuttingDown
        | StoreError::Diverged(_)
        | StoreError::Slave => "SERVICE_NOT_AVAILABLE",
        StoreError::Io(_) | StoreError::Layout(_) => "UNKNOWN_ERROR",
    }
}

/// The queue of a retry or DLQ topic with `queues` queues (Java picks at random).
fn queue_for(opaque: i32, queues: i32) -> i32 {
    opaque.rem_euclid(queues.max(1))
}

/// The `%DLQ%` topic of `group`, created on demand with one queue, readable and writable
/// (`createTopicInSendMessageBackMethod` with `PERM_WRITE | PERM_READ` in 4.9.8).
async fn ensure_dlq(state: &BrokerState, group: &str) -> String {
    let topic = format!("{DLQ_GROUP_TOPIC_PREFIX}{group}");
    state
        .ensure_topic(&topic, DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE)
        .await;
    topic
}

/// The maximum redeliveries a request allows: its own `maxReconsumeTimes` from clients of
/// 3.4.9 on, else the group's `retryMaxTimes`.
fn max_reconsume_times(request: &RemotingCommand, from_header: Option<i32>, group: i32) -> i32 {
    match from_header {
        Some(times) if request.version >= V3_4_9 => times,
        _ => group,
    }
}

/// CONSUMER_SEND_MSG_BACK (36).
#[doc(alias = "asyncConsumerSendMsgBack")]
pub async fn consumer_send_msg_back(
    state: &BrokerState,
    store: &StoreHandle,
    reader: &StoreReader,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<ConsumerSendMsgBackRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    // The group names a topic and its directories: a name no Java client may send (its
    // `Validators.checkGroup`) is refused before it reaches the store, where Java would make
    // `consumequeue/%RETRY%<group>/` of whatever it is (`../`, or too long for a file name).
    let retry_topic = format!("{RETRY_GROUP_TOPIC_PREFIX}{}", header.group);
    if let Some(problem) = invalid_topic_remark(&retry_topic) {
        let remark = format!("the retry topic of group[{}]: {problem}", header.group);
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let Some(group) = state.group_or_create(&header.group).await else {
        return group_not_exist(request, &header.group);
    };
    let config = &state.config;
    if config.broker_permission & PERM_WRITE == 0 {
        let remark = format!(
            "the broker[{}] sending message is forbidden",
            config.broker_ip1
        );
        return error(request, ResponseCode::NO_PERMISSION, remark);
    }
    if group.retry_queue_nums <= 0 {
        return Some(RemotingCommand::success_to(request));
    }
    let retry_config = state
        .ensure_topic(&retry_topic, group.retry_queue_nums, PERM_READ | PERM_WRITE)
        .await;
    if retry_config.perm & PERM_WRITE == 0 {
        let remark = format!("the topic[{retry_topic}] sending message is forbidden");
        return error(request, ResponseCode::NO_PERMISSION, remark);
    }
    let not_found = || {
        let remark = format!("look message by offset failed, {}", header.offset);
        error(request, ResponseCode::SYSTEM_ERROR, remark)
    };
    let bytes = match reader.record_at(header.offset).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return not_found(),
        Err(error) => {
            tracing::warn!(%error, offset = header.offset, "cannot read a sent-back message");
            return not_found();
        }
    };
    let Ok(Record::Message { record, .. }) = decode_record(&bytes, false) else {
        return not_found();
    };
    let mut properties = parse_properties(record.properties);
    if !properties
        .iter()
        .any(|(name, _)| name == PROPERTY_RETRY_TOPIC)
    {
        set_property(
            &mut properties,
            PROPERTY_RETRY_TOPIC,
            record.topic.to_owned(),
        );
    }
    let max = max_reconsume_times(request, header.max_reconsume_times, group.retry_max_times);
    let (topic, queue_id, level) = if record.reconsume_times >= max || header.delay_level < 0 {
        let dlq = ensure_dlq(state, &header.group).await;
        (dlq, queue_for(request.opaque, DLQ_NUMS_PER_GROUP), 0)
    } else {
        let level = match header.delay_level {
            0 => record.reconsume_times.saturating_add(3),
            level => level,
        };
        let queue_id = queue_for(request.opaque, group.retry_queue_nums);
        (retry_topic, queue_id, level)
    };
    set_property(&mut properties, PROPERTY_DELAY, level.to_string());
    // Java's send-back stores its copy with `setWaitStoreMsgOK(false)`.
    set_property(&mut properties, "WAIT", "false".to_owned());
    let origin = properties
        .iter()
        .find(|(name, _)| name == PROPERTY_ORIGIN_MESSAGE_ID)
        .map(|(_, id)| id.clone())
        .filter(|id| !id.trim().is_empty())
        .unwrap_or_else(|| offset_msg_id(record.store_host, record.physical_offset));
    set_property(&mut properties, PROPERTY_ORIGIN_MESSAGE_ID, origin);
    let mut message = PutMessage {
        reconsume_times: record.reconsume_times.saturating_add(1),
        properties: encode_properties(&properties),
        ..PutMessage::from_record(&record, topic, queue_id)
    };
    redirect_delayed(&mut message, &config.store.message_delay_level);
    match store.put(message).await {
        Ok(_) => Some(RemotingCommand::success_to(request)),
        Err(failure) => error(
            request,
            ResponseCode::SYSTEM_ERROR,
            put_status_name(&failure),
        ),
    }
}

/// Where a producer's send to a `%RETRY%` topic goes (`handleRetryAndDLQ`): its own topic
/// and queue, or the group's `%DLQ%` topic when the message was already redelivered
/// `maxReconsumeTimes` times. Other topics pass through.
///
/// # Errors
/// The refusal: SUBSCRIPTION_GROUP_NOT_EXIST when the group is unknown and may not be
/// created.
pub async fn retry_or_dlq(
    state: &BrokerState,
    request: &RemotingCommand,
    topic: &str,
    queue_id: i32,
    reconsume_times: Option<i32>,
    max_from_header: Option<i32>,
) -> Result<(String, i32), Response> {
    let Some(group_name) = topic.strip_prefix(RETRY_GROUP_TOPIC_PREFIX) else {
        return Ok((topic.to_owned(), queue_id));
    };
    let Some(group) = state.group_or_create(group_name).await else {
        return Err(group_not_exist(request, group_name));
    };
    let max = max_reconsume_times(request, max_from_header, group.retry_max_times);
    if reconsume_times.unwrap_or(0) >= max {
        let dlq = ensure_dlq(state, group_name).await;
        return Ok((dlq, queue_for(request.opaque, DLQ_NUMS_PER_GROUP)));
    }
    Ok((topic.to_owned(), queue_id))
}
