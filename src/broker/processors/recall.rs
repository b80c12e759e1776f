//! RECALL_MESSAGE (370, `RecallMessageProcessor` of Java 5.x): cancels a timer message
//! before its time by the recall handle its send answered (`broker::timer::RecallHandle`).
//! The cancellation is a message of its own: parked in the timer topic for the same slot,
//! with `TIMER_DEL_UNIQKEY` naming `<topic>+<UNIQ_KEY>`; when the slot comes, the timer
//! delivers neither. Off unless `recallMessageEnable`, as in Java.

use super::Context;
use crate::broker::delay::encode_properties;
use crate::broker::reply::{error, header_refusal, with_region_fields, Response};
use crate::broker::state::now_ms;
use crate::broker::timer::{
    delete_key, handle_schedule, RecallHandle, PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_DEL_UNIQKEY,
};
use crate::config::broker::BrokerRole;
use crate::remoting::headers::{RecallMessageRequestHeader, RecallMessageResponseHeader};
use crate::remoting::server::ConnectionInfo;
use crate::remoting::{RemotingCommand, ResponseCode};
use crate::store::commit_log::PutMessage;
use crate::store::message::{PROPERTY_TAGS, PROPERTY_UNIQ_KEY};
use crate::store::segment_writer::StoreError;

/// `RecallMessageProcessor.RECALL_MESSAGE_TAG`.
const RECALL_MESSAGE_TAG: &str = "_RECALL_TAG_";

/// RECALL_MESSAGE, with Java's checks, codes and remarks in Java's order.
pub(super) async fn process(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    with_region_fields(recall(ctx, connection, request).await)
}

async fn recall(ctx: &Context, connection: &ConnectionInfo, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<RecallMessageRequestHeader>() {
        Ok(header) => header,
        Err(e) => return header_refusal(request, &e),
    };
    let config = &ctx.state.config;
    if !ctx.state.runtime().recall_message_enable {
        let remark = "recall failed, operation is forbidden";
        return error(request, ResponseCode::NO_PERMISSION, remark.to_owned());
    }
    let unavailable = "recall failed, broker service not available".to_owned();
    if ctx.state.role.get() == BrokerRole::Slave {
        return error(request, ResponseCode::SLAVE_NOT_AVAILABLE, unavailable);
    }
    if ctx.state.topic(&header.topic).is_none() {
        let remark = format!("recall failed, the topic[{}] not exist", header.topic);
        return error(request, ResponseCode::TOPIC_NOT_EXIST, remark);
    }
    let Some(handle) = RecallHandle::decode(&header.recall_handle) else {
        let remark = "recall handle is invalid".to_owned();
        return error(request, ResponseCode::ILLEGAL_OPERATION, remark);
    };
    if handle.topic != header.topic {
        let remark = "recall failed, topic not match".to_owned();
        return error(request, ResponseCode::ILLEGAL_OPERATION, remark);
    }
    if handle.broker_name != config.broker_name {
        return error(request, ResponseCode::ILLEGAL_OPERATION, unavailable);
    }
    let now = now_ms();
    let time_left = handle
        .timestamp
        .parse::<i64>()
        .unwrap_or(-1)
        .wrapping_sub(now);
    if time_left <= 0 || time_left >= config.store.timer_max_delay_sec.wrapping_mul(1000) {
        let remark = "recall failed, timestamp invalid".to_owned();
        return error(request, ResponseCode::ILLEGAL_OPERATION, remark);
    }
    let mut message = recall_message(ctx, connection, &header, &handle, now);
    let stored = match handle_schedule(&mut message, &config.store, now) {
        Ok(()) => ctx.store.put(message).await.map(|_| ()),
        Err(_) => Err(StoreError::Illegal("timer refused".to_owned())),
    };
    match stored {
        Ok(()) => {
            let mut response = RemotingCommand::success_to(request);
            response.set_header(&RecallMessageResponseHeader {
                msg_id: handle.message_id,
            });
            Some(response)
        }
        Err(failure) => {
            tracing::warn!(%failure, topic = handle.topic, "recall not stored");
            let remark = "recall failed, execute error".to_owned();
            error(request, ResponseCode::SYSTEM_ERROR, remark)
        }
    }
}

/// The delete message (`buildMessage`): body "0", tag `_RECALL_TAG_`, queue 0, and the
/// recalled message's `UNIQ_KEY` and time.
fn recall_message(
    ctx: &Context,
    connection: &ConnectionInfo,
    header: &RecallMessageRequestHeader,
    handle: &RecallHandle,
    now: i64,
) -> PutMessage {
    let mut properties = vec![
        (PROPERTY_TAGS.to_owned(), RECALL_MESSAGE_TAG.to_owned()),
        (
            PROPERTY_TIMER_DEL_UNIQKEY.to_owned(),
            delete_key(&handle.topic, &handle.message_id),
        ),
        (PROPERTY_UNIQ_KEY.to_owned(), handle.message_id.clone()),
        (
            PROPERTY_TIMER_DELIVER_MS.to_owned(),
            handle.timestamp.clone(),
        ),
        ("BORN_TIMESTAMP".to_owned(), now.to_string()),
        ("TRACE_CONTEXT".to_owned(), String::new()),
    ];
    if let Some(group) = &header.producer_group {
        properties.push(("PGROUP".to_owned(), group.clone()));
    }
    PutMessage {
        topic: handle.topic.clone(),
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: now,
        born_host: connection.peer,
        store_host: ctx.store_host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: b"0".to_vec(),
        properties: encode_properties(&properties),
    }
}
