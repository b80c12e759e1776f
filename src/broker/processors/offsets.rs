//! Consumer offsets and queue bounds (`ConsumerManageProcessor`, part of
//! `AdminBrokerProcessor`): QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET, GET_MAX_OFFSET,
//! GET_MIN_OFFSET, GET_EARLIEST_MSG_STORETIME and SEARCH_OFFSET_BY_TIMESTAMP.

use super::{Context, DISPATCH_WAIT_MAX};
use crate::broker::reply::{error, Response};
use crate::remoting::headers::{
    GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, OffsetResponseHeader,
    QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader, SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use crate::store::time_search::Boundary;

/// QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET, GET_MAX_OFFSET, GET_MIN_OFFSET,
/// GET_EARLIEST_MSG_STORETIME and SEARCH_OFFSET_BY_TIMESTAMP.
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    match request.request_code() {
        RequestCode::QUERY_CONSUMER_OFFSET => query_consumer_offset(ctx, request),
        RequestCode::UPDATE_CONSUMER_OFFSET => update_consumer_offset(ctx, request).await,
        RequestCode::GET_MAX_OFFSET => max_offset(ctx, request).await,
        RequestCode::GET_MIN_OFFSET => min_offset(ctx, request),
        RequestCode::GET_EARLIEST_MSG_STORETIME => earliest_time(ctx, request).await,
        _ => search_offset(ctx, request).await,
    }
}

fn query_consumer_offset(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<QueryConsumerOffsetRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let committed =
        ctx.state
            .committed_offset(&header.consumer_group, &header.topic, header.queue_id);
    let offset = match committed {
        Some(offset) if offset >= 0 => offset,
        // Never consumed: as 5.x, QUERY_NOT_FOUND when the client asked not to be given 0,
        // for a topic or queue the broker does not have, and when the queue no longer
        // begins at 0; else 0. Unlike 5.x, which answers QUERY_NOT_FOUND for an empty queue
        // too (its source; no differential step has one), a known empty queue answers 0, as
        // 4.9.8: a consumer that starts from the last offset then misses nothing sent while
        // it starts.
        _ if header.set_zero_if_not_found == Some(false) => {
            return error(
                request,
                ResponseCode::QUERY_NOT_FOUND,
                "Not found, do not set to zero, maybe this group boot first",
            );
        }
        _ => {
            let known = ctx.state.topic(&header.topic).is_some_and(|topic| {
                let queues = topic.read_queue_nums.max(topic.write_queue_nums);
                (0..queues).contains(&header.queue_id)
            });
            let min = ctx
                .reader
                .min_offset_in_queue(&header.topic, header.queue_id);
            if !known || min > 0 {
                return error(
                    request,
                    ResponseCode::QUERY_NOT_FOUND,
                    "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
                );
            }
            0
        }
    };
    let mut response = RemotingCommand::success_to(request);
    response.set_header(&QueryConsumerOffsetResponseHeader {
        offset: Some(offset),
    });
    Some(response)
}

/// UPDATE_CONSUMER_OFFSET, checked as 5.x checks it: the group (created if
/// `autoCreateSubscriptionGroup` allows, as a pull creates it), the topic, then the queue and
/// the offset, each refusal with its own code (4.9.8 committed anything).
async fn update_consumer_offset(ctx: &Context, request: &RemotingCommand) -> Response {
    let (Some(group), Some(topic)) = (request.ext("consumerGroup"), request.ext("topic")) else {
        let remark = match request.decode_header::<UpdateConsumerOffsetRequestHeader>() {
            Err(e) => e.to_string(),
            Ok(_) => "the custom field <consumerGroup> is null".to_owned(),
        };
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    };
    if ctx.state.group_or_create(group).await.is_none() {
        let remark = format!("Group {group} not exist!");
        return error(request, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, remark);
    }
    if ctx.state.topic(topic).is_none() {
        let remark = format!("Topic {topic} not exist!");
        return error(request, ResponseCode::TOPIC_NOT_EXIST, remark);
    }
    for (field, name) in [("queueId", "QueueId"), ("commitOffset", "Offset")] {
        if request.ext(field).is_none() {
            let remark = format!("{name} is null, topic is {topic}");
            return error(request, ResponseCode::INVALID_PARAMETER, remark);
        }
    }
    let header = match request.decode_header::<UpdateConsumerOffsetRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    ctx.state.commit_offset(
        &header.consumer_group,
        &header.topic,
        header.queue_id,
        header.commit_offset,
    );
    Some(RemotingCommand::success_to(request))
}

async fn max_offset(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<GetMaxOffsetRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    // A put answered before this request counts, as against Java's broker.
    ctx.reader.dispatched_to_committed(DISPATCH_WAIT_MAX).await;
    let offset = ctx
        .reader
        .max_offset_in_queue(&header.topic, header.queue_id);
    offset_response(request, offset)
}

fn min_offset(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<GetMinOffsetRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let offset = ctx
        .reader
        .min_offset_in_queue(&header.topic, header.queue_id);
    offset_response(request, offset)
}

async fn earliest_time(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<GetEarliestMsgStoretimeRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let time = match ctx
        .reader
        .earliest_message_time(&header.topic, header.queue_id)
        .await
    {
        Ok(time) => time.unwrap_or(-1),
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let mut response = RemotingCommand::success_to(request);
    response.set_header(&GetEarliestMsgStoretimeResponseHeader { timestamp: time });
    Some(response)
}

/// As 5.x: the side of the time `boundaryType` names, the lower one by default (4.x
/// clients send none; 4.9.8 answered the offset stored nearest the time instead).
async fn search_offset(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<SearchOffsetRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    match ctx
        .reader
        .offset_by_time(
            &header.topic,
            header.queue_id,
            header.timestamp,
            Boundary::from_header(header.boundary_type.as_deref()),
        )
        .await
    {
        Ok(offset) => offset_response(request, offset),
        Err(e) => error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}

fn offset_response(request: &RemotingCommand, offset: i64) -> Response {
    let mut response = RemotingCommand::success_to(request);
    response.set_header(&OffsetResponseHeader { offset });
    Some(response)
}
