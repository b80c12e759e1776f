//! CONSUMER_SEND_MSG_BACK (`asyncConsumerSendMsgBack` in Java's `SendMessageProcessor`): a
//! consumer hands back a message it could not consume, by its CommitLog offset; the broker
//! stores a copy for the group's `%RETRY%` topic, delayed, or for its `%DLQ%` topic.

use super::Context;
use crate::broker::delay::{encode_properties, set_property, PROPERTY_DELAY};
use crate::broker::reply::{error, Response};
use crate::broker::retry::{
    ensure_dlq, group_not_exist, max_reconsume_times, queue_for, DLQ_NUMS_PER_GROUP,
    PROPERTY_ORIGIN_MESSAGE_ID, PROPERTY_RETRY_TOPIC,
};
use crate::broker::state::{invalid_topic_remark, PERM_READ, PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX};
use crate::broker::timer::handle_schedule;
use crate::remoting::headers::ConsumerSendMsgBackRequestHeader;
use crate::remoting::{RemotingCommand, ResponseCode};
use crate::store::commit_log::PutMessage;
use crate::store::message::{decode_record, offset_msg_id, parse_properties, Record};
use crate::store::segment_writer::StoreError;

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

/// CONSUMER_SEND_MSG_BACK (36).
#[doc(alias = "asyncConsumerSendMsgBack")]
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    let (state, store, reader) = (&*ctx.state, &ctx.store, &ctx.reader);
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
        let origin = header.origin_topic.as_deref().unwrap_or(record.topic);
        state
            .stats
            .items
            .record_dlq(ctx.shard, &header.group, origin);
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
    if let Err(refusal) =
        handle_schedule(&mut message, &config.store, crate::broker::state::now_ms())
    {
        let (code, remark) = refusal.answer(&config.store);
        return error(request, code, remark);
    }
    match store.put(message).await {
        Ok(_) => Some(RemotingCommand::success_to(request)),
        Err(failure) => error(
            request,
            ResponseCode::SYSTEM_ERROR,
            put_status_name(&failure),
        ),
    }
}
