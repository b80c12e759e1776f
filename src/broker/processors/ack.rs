//! ACK_MESSAGE (200051) and BATCH_ACK_MESSAGE (200151) (Java 5.x's `AckMessageProcessor`),
//! and CHANGE_MESSAGE_INVISIBLETIME (200053, `ChangeInvisibleTimeProcessor`), for non-order
//! pops: an ack is an `ack` (`bAck`) message on the revive queue of the message's
//! checkpoint, due when the checkpoint is; a change of invisible time is a new checkpoint
//! of the one message, due at the new time, then an ack of the old handle.

use super::Context;
use crate::broker::pop::format::PopCheckPoint;
use crate::broker::pop::format::{real_topic, AckMsg, BatchAck, BatchAckBody, ExtraInfo};
use crate::broker::pop::{ack_message, ck_message, put_revive, POP_ORDER_REVIVE_QUEUE};
use crate::broker::reply::{error, header_refusal, Response, FAQ};
use crate::broker::state::now_ms;
use crate::remoting::headers::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
};
use crate::remoting::server::ConnectionInfo;
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};

/// The refusal of an ordered pop's handle, which this broker never hands out.
const ORDER_UNSUPPORTED: &str = "ordered POP is not supported by this broker yet";

/// ACK_MESSAGE, BATCH_ACK_MESSAGE and CHANGE_MESSAGE_INVISIBLETIME.
pub(super) async fn process(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    match request.request_code() {
        RequestCode::ACK_MESSAGE => ack(ctx, connection, request).await,
        RequestCode::BATCH_ACK_MESSAGE => batch_ack(ctx, request).await,
        _ => change_invisible_time(ctx, connection, request).await,
    }
}

/// The checks both single requests start with (topic, queue); the queue's bounds.
fn checked_queue(
    ctx: &Context,
    connection: &ConnectionInfo,
    topic: &str,
    queue_id: i32,
) -> Result<(i64, i64), (ResponseCode, String)> {
    let Some(config) = ctx.state.topic(topic) else {
        let remark = format!("topic[{topic}] not exist, apply first please! {FAQ}");
        return Err((ResponseCode::TOPIC_NOT_EXIST, remark));
    };
    if queue_id < 0 || queue_id >= config.read_queue_nums {
        let remark = format!(
            "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] \
             consumer:[/{}]",
            config.read_queue_nums, connection.peer
        );
        return Err((ResponseCode::MESSAGE_ILLEGAL, remark));
    }
    let min = ctx.reader.min_offset_in_queue(topic, queue_id);
    let max = ctx.reader.max_offset_in_queue(topic, queue_id);
    Ok((min, max))
}

/// Stores the ack (`AckMsg`) of the message at `offset` popped with `handle`, on the
/// handle's revive queue, due when its checkpoint is.
async fn put_ack(
    ctx: &Context,
    group: &str,
    (topic, queue_id): (&str, i32),
    offset: i64,
    handle: &ExtraInfo,
) -> Result<(), String> {
    let ack = AckMsg {
        ack_offset: offset,
        ack_offset_list: None,
        broker_name: Some(handle.broker_name.clone()),
        consumer_group: group.to_owned(),
        pop_time: handle.pop_time,
        queue_id,
        start_offset: handle.ck_queue_offset,
        topic: topic.to_owned(),
    };
    let message = ack_message(&ctx.state, &ack, handle.revive_qid, handle.invisible_time);
    put_revive(&ctx.state, &ctx.store, message).await
}

/// The handle (`extraInfo`) of a single request, or the remark of its refusal (always
/// SYSTEM_ERROR): one that does not parse (Java's `ExtraInfoUtil` throws), or an ordered
/// pop's.
fn handle_of(extra_info: &str) -> Result<ExtraInfo, String> {
    let Some(handle) = ExtraInfo::parse(extra_info) else {
        return Err(format!("extraInfo is illegal: {extra_info}"));
    };
    if handle.revive_qid == POP_ORDER_REVIVE_QUEUE {
        return Err(ORDER_UNSUPPORTED.to_owned());
    }
    Ok(handle)
}

async fn ack(ctx: &Context, connection: &ConnectionInfo, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<AckMessageRequestHeader>() {
        Ok(header) => header,
        Err(e) => return header_refusal(request, &e),
    };
    let (topic, queue_id) = (&header.topic, header.queue_id);
    let (min, max) = match checked_queue(ctx, connection, topic, queue_id) {
        Ok(bounds) => bounds,
        Err((code, remark)) => return error(request, code, remark),
    };
    if header.offset < min || header.offset > max {
        let remark = format!(
            "offset is illegal, key:{topic}@{queue_id}, commit:{}, store:{min}~{max}",
            header.offset
        );
        return error(request, ResponseCode::NO_MESSAGE, remark);
    }
    let handle = match handle_of(&header.extra_info) {
        Ok(handle) => handle,
        Err(remark) => return error(request, ResponseCode::SYSTEM_ERROR, remark),
    };
    let queue = (topic.as_str(), queue_id);
    match put_ack(ctx, &header.consumer_group, queue, header.offset, &handle).await {
        Ok(()) => Some(RemotingCommand::success_to(request)),
        Err(failure) => {
            tracing::warn!(failure, topic, queue_id, "ack not stored");
            error(request, ResponseCode::SYSTEM_ERROR, failure)
        }
    }
}

async fn batch_ack(ctx: &Context, request: &RemotingCommand) -> Response {
    let body: Option<BatchAckBody> = serde_json::from_slice(&request.body).ok();
    let broker_name = body.as_ref().and_then(|body| body.broker_name.clone());
    let acks = body.and_then(|body| body.acks).unwrap_or_default();
    if acks.is_empty() {
        return Some(RemotingCommand::response_to(
            request,
            ResponseCode::NO_MESSAGE,
            None,
        ));
    }
    for batch in &acks {
        if batch.revive_queue_id == POP_ORDER_REVIVE_QUEUE {
            return error(request, ResponseCode::SYSTEM_ERROR, ORDER_UNSUPPORTED);
        }
        if let Err(failure) = append_batch(ctx, batch, broker_name.clone()).await {
            tracing::warn!(failure, topic = batch.topic, "batch ack not stored");
            return error(request, ResponseCode::SYSTEM_ERROR, failure);
        }
    }
    Some(RemotingCommand::success_to(request))
}

/// One entry of a batch ack: a `bAck` of its offsets inside the queue's bounds.
async fn append_batch(
    ctx: &Context,
    batch: &BatchAck,
    broker_name: Option<String>,
) -> Result<(), String> {
    let Some(topic) = real_topic(&batch.topic, &batch.consumer_group, &batch.retry) else {
        return Err(format!("getRetry fail, format is wrong: {}", batch.retry));
    };
    let (min, max) = (
        ctx.reader.min_offset_in_queue(&topic, batch.queue_id),
        ctx.reader.max_offset_in_queue(&topic, batch.queue_id),
    );
    let Some(indexes) = batch.indexes() else {
        return Err("the bit set of a batch ack is no base64".to_owned());
    };
    let offsets: Vec<i64> = indexes
        .into_iter()
        .filter_map(|index| i64::try_from(index).ok())
        // An offset past i64::MAX names no message: skipped, as one outside the queue.
        .filter_map(|index| batch.start_offset.checked_add(index))
        .filter(|offset| (min..=max).contains(offset))
        .collect();
    if offsets.is_empty() {
        return Ok(());
    }
    let ack = AckMsg {
        ack_offset: -1,
        ack_offset_list: Some(offsets),
        broker_name,
        consumer_group: batch.consumer_group.clone(),
        pop_time: batch.pop_time,
        queue_id: batch.queue_id,
        start_offset: batch.start_offset,
        topic,
    };
    let message = ack_message(
        &ctx.state,
        &ack,
        batch.revive_queue_id,
        batch.invisible_time,
    );
    put_revive(&ctx.state, &ctx.store, message).await
}

async fn change_invisible_time(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<ChangeInvisibleTimeRequestHeader>() {
        Ok(header) => header,
        Err(e) => return header_refusal(request, &e),
    };
    let (topic, queue_id) = (&header.topic, header.queue_id);
    let (min, max) = match checked_queue(ctx, connection, topic, queue_id) {
        Ok(bounds) => bounds,
        Err((code, remark)) => return error(request, code, remark),
    };
    if header.offset < min || header.offset >= max {
        // Java's response starts with this remark and keeps it.
        let remark = "not set any response code";
        return error(request, ResponseCode::NO_MESSAGE, remark);
    }
    let handle = match handle_of(&header.extra_info) {
        Ok(handle) => handle,
        Err(remark) => return error(request, ResponseCode::SYSTEM_ERROR, remark),
    };
    let now = now_ms();
    let ck = PopCheckPoint::new(
        topic,
        &header.consumer_group,
        queue_id,
        header.offset,
        &[header.offset],
        (now, header.invisible_time),
        &handle.broker_name,
    );
    let state = &ctx.state;
    let message = ck_message(state, &ck, handle.revive_qid);
    if let Err(failure) = put_revive(state, &ctx.store, message).await {
        tracing::warn!(failure, topic, queue_id, "new checkpoint not stored");
        return error(
            request,
            ResponseCode::SYSTEM_ERROR,
            "not set any response code",
        );
    }
    // The old handle's ack: should it be lost, the message comes back at the old time too
    // (Java answers success all the same).
    let queue = (topic.as_str(), queue_id);
    if let Err(failure) = put_ack(ctx, &header.consumer_group, queue, header.offset, &handle).await
    {
        tracing::warn!(failure, topic, queue_id, "ack of the old handle not stored");
    }
    let mut response = RemotingCommand::success_to(request);
    response.set_header(&ChangeInvisibleTimeResponseHeader {
        pop_time: now,
        invisible_time: header.invisible_time,
        revive_qid: handle.revive_qid,
    });
    Some(response)
}
