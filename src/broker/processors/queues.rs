//! What a consume queue holds and how far groups are behind in it (`AdminBrokerProcessor`):
//! QUERY_CONSUME_QUEUE (mqadmin `queryCq`), QUERY_CONSUME_TIME_SPAN (the admin API's
//! `queryConsumeTimeSpan`) and QUERY_CORRECTION_OFFSET.

use super::{Context, DISPATCH_WAIT_MAX};
use crate::broker::reply::{error, with_body, Response};
use crate::broker::state::now_ms;
use crate::remoting::headers::{
    QueryConsumeQueueRequestHeader, QueryConsumeTimeSpanRequestHeader, QueryCorrectionOffsetHeader,
};
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use crate::store::reader::StoreReader;

/// Units one QUERY_CONSUME_QUEUE answers at most (Java's answer is bounded by the mapped
/// file the index falls in).
const QUERY_UNITS_MAX: i64 = 10_000;

/// The requests of the module header.
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    ctx.reader.dispatched_to_committed(DISPATCH_WAIT_MAX).await;
    match request.request_code() {
        RequestCode::QUERY_CONSUME_QUEUE => query_consume_queue(ctx, request).await,
        RequestCode::QUERY_CORRECTION_OFFSET => correction_offsets(ctx, request),
        _ => consume_time_span(ctx, request).await,
    }
}

/// QUERY_CONSUME_QUEUE (321): the queue's bounds and up to `count` of its units from
/// `index` (CommitLog offset, size, tags code); with a group, that group's subscription to
/// the topic, or that it is not online. An index outside the queue is answered SUCCESS
/// without a body, with Java's remark.
async fn query_consume_queue(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<QueryConsumeQueueRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let (topic, queue_id) = (header.topic.as_str(), header.queue_id);
    if ctx.store.shared().queue(topic, queue_id).is_none() {
        let remark = format!("{queue_id}@{topic} is not exist!");
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let mut body = serde_json::Map::new();
    if let Some(group) = &header.consumer_group {
        match ctx.state.subscription(group, topic) {
            Some(subscription) => {
                body.insert("filterData".into(), "null".into());
                let value = serde_json::to_value(subscription).unwrap_or_default();
                body.insert("subscriptionData".into(), value);
            }
            None => {
                let text = format!("{group}@{topic} is not online!");
                body.insert("filterData".into(), text.into());
            }
        }
    }
    let reader = &ctx.reader;
    let end = header
        .index
        .saturating_add(i64::from(header.count.max(0)).min(QUERY_UNITS_MAX));
    let mut units = Vec::new();
    for offset in header.index..end {
        match reader.unit_at(topic, queue_id, offset).await {
            Ok(Some(unit)) => units.push(serde_json::json!({
                "eval": false,
                "physicOffset": unit.physical_offset,
                "physicSize": unit.size,
                "tagsCode": unit.tags_code,
            })),
            Ok(None) => break,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        }
    }
    if units.is_empty() {
        let mut response = RemotingCommand::success_to(request);
        response.remark = Some(format!(
            "Index {} of {queue_id}@{topic} is not exist!",
            header.index
        ));
        return Some(response);
    }
    body.insert(
        "maxQueueIndex".into(),
        reader.max_offset_in_queue(topic, queue_id).into(),
    );
    body.insert(
        "minQueueIndex".into(),
        reader.min_offset_in_queue(topic, queue_id).into(),
    );
    body.insert("queueData".into(), units.into());
    with_body(request, serde_json::Value::Object(body).to_string())
}

/// QUERY_CONSUME_TIME_SPAN (303): per writable queue of the topic, the store times of its
/// first and last message, of the last message the group consumed (its first message's
/// when it consumed none), and how long its next message has waited (`QueueTimeSpan`);
/// Java's -1 where a time cannot be read.
async fn consume_time_span(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<QueryConsumeTimeSpanRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let state = &ctx.state;
    let topic = header.topic.as_str();
    let Some(config) = state.topic(topic) else {
        let remark = format!("topic[{topic}] not exist");
        return error(request, ResponseCode::TOPIC_NOT_EXIST, remark);
    };
    let reader = &ctx.reader;
    let mut spans = Vec::new();
    for queue_id in 0..config.write_queue_nums {
        let min_time = time_or_minus_one(reader, topic, queue_id, None).await;
        let max = reader.max_offset_in_queue(topic, queue_id);
        let max_time = time_or_minus_one(reader, topic, queue_id, Some(max - 1)).await;
        let consumed = state
            .committed_offset(&header.group, topic, queue_id)
            .unwrap_or(-1);
        let consume_time = if consumed > 0 {
            time_or_minus_one(reader, topic, queue_id, Some(consumed - 1)).await
        } else {
            min_time
        };
        let delay = if consumed < max {
            let next = time_or_minus_one(reader, topic, queue_id, Some(consumed)).await;
            now_ms() - next
        } else {
            0
        };
        spans.push(serde_json::json!({
            "consumeTimeStamp": consume_time,
            "delayTime": delay,
            "maxTimeStamp": max_time,
            "messageQueue": {
                "brokerName": state.config.broker_name,
                "queueId": queue_id,
                "topic": topic,
            },
            "minTimeStamp": min_time,
        }));
    }
    with_body(
        request,
        serde_json::json!({ "consumeTimeSpanSet": spans }).to_string(),
    )
}

/// The store time at `offset` of a queue (its first message's for `None`), -1 when it
/// cannot be read (Java's `getMessageStoreTimeStamp`).
async fn time_or_minus_one(
    reader: &StoreReader,
    topic: &str,
    queue_id: i32,
    offset: Option<i64>,
) -> i64 {
    let read = match offset {
        None => reader.earliest_message_time(topic, queue_id).await,
        Some(offset) => reader.store_time_at(topic, queue_id, offset).await,
    };
    read.ok().flatten().unwrap_or(-1)
}

/// QUERY_CORRECTION_OFFSET (308, `queryMinOffsetInAllGroup`): per queue of the topic, the
/// lowest offset any group committed (but those `filterGroups` names, and offsets below the
/// queue's min offset); where that lies past what `compareGroup` committed, `Long.MAX_VALUE`
/// (`QueryCorrectionOffsetBody`, its integer keys bare as fastjson writes them). A queue the
/// compare group committed in but no other group did is left out (Java fails on it).
fn correction_offsets(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<QueryCorrectionOffsetHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let state = &ctx.state;
    let topic = header.topic.as_str();
    let filtered: Vec<&str> = header
        .filter_groups
        .as_deref()
        .unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|g| !g.is_empty())
        .collect();
    let queues = state
        .topic(topic)
        .map_or(0, |t| t.read_queue_nums.max(t.write_queue_nums));
    let groups = state.groups_of_topic(topic);
    let mut corrections: Vec<(i32, i64)> = Vec::new();
    for queue_id in 0..queues {
        let min_in_queue = ctx.reader.min_offset_in_queue(topic, queue_id);
        let lowest = groups
            .iter()
            .filter(|group| !filtered.contains(&group.as_str()))
            .filter_map(|group| state.committed_offset(group, topic, queue_id))
            .filter(|offset| *offset >= min_in_queue)
            .min();
        let Some(lowest) = lowest else {
            continue;
        };
        let corrected = match state.committed_offset(&header.compare_group, topic, queue_id) {
            Some(compared) if lowest > compared => i64::MAX,
            _ => lowest,
        };
        corrections.push((queue_id, corrected));
    }
    let entries: Vec<String> = corrections
        .iter()
        .map(|(queue, offset)| format!("{queue}:{offset}"))
        .collect();
    let body = format!("{{\"correctionOffsets\":{{{}}}}}", entries.join(","));
    with_body(request, body)
}
