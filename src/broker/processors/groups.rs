//! Subscription groups and their consumers (`AdminBrokerProcessor`):
//! UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, DELETE_SUBSCRIPTIONGROUP,
//! GET_ALL_SUBSCRIPTIONGROUP_CONFIG, GET_ALL_CONSUMER_OFFSET, CLONE_GROUP_OFFSET,
//! GET_ALL_DELAY_OFFSET,
//! GET_CONSUME_STATS, INVOKE_BROKER_TO_RESET_OFFSET, GET_CONSUMER_CONNECTION_LIST,
//! GET_PRODUCER_CONNECTION_LIST, GET_ALL_PRODUCER_INFO, and the queue locks of orderly
//! consumers (LOCK_BATCH_MQ,
//! UNLOCK_BATCH_MQ).

use super::{last_store_time, queue_keyed_map, Context, DISPATCH_WAIT_MAX};
use crate::broker::reply::{error, with_body, Response};
use crate::broker::state::BrokerState;
use crate::config::fastjson::parse_lenient;
use crate::remoting::headers::{
    CloneGroupOffsetRequestHeader, DeleteSubscriptionGroupRequestHeader,
    GetConsumeStatsRequestHeader, GetConsumerConnectionListRequestHeader,
    GetProducerConnectionListRequestHeader, ResetOffsetRequestHeader,
};
use crate::remoting::heartbeat::MessageQueue;
use crate::remoting::version::V3_0_7_SNAPSHOT;
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use crate::store::config_files::SubscriptionGroupConfig;
use crate::store::reader::StoreReader;
use crate::store::time_search::Boundary;
use serde::Deserialize;

/// The requests of the module header.
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    let state = &ctx.state;
    match request.request_code() {
        RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
            update_subscription_group(state, request).await
        }
        RequestCode::DELETE_SUBSCRIPTIONGROUP => delete_subscription_group(state, request).await,
        RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => all_subscription_groups(state, request),
        RequestCode::GET_ALL_CONSUMER_OFFSET => all_consumer_offsets(state, request),
        RequestCode::CLONE_GROUP_OFFSET => clone_group_offset(state, request),
        RequestCode::GET_ALL_DELAY_OFFSET => all_delay_offsets(state, request),
        RequestCode::GET_CONSUME_STATS => {
            ctx.reader.dispatched_to_committed(DISPATCH_WAIT_MAX).await;
            consume_stats(state, &ctx.reader, request).await
        }
        RequestCode::INVOKE_BROKER_TO_RESET_OFFSET => {
            reset_offset(state, &ctx.reader, request).await
        }
        RequestCode::GET_CONSUMER_CONNECTION_LIST => consumer_connections(state, request),
        RequestCode::GET_PRODUCER_CONNECTION_LIST => producer_connections(state, request),
        RequestCode::GET_ALL_PRODUCER_INFO => {
            with_body(request, state.producer_table_json().to_string())
        }
        RequestCode::LOCK_BATCH_MQ => lock_batch(state, request),
        _ => unlock_batch(state, request),
    }
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200): the body is a `SubscriptionGroupConfig`.
#[must_use]
pub async fn update_subscription_group(state: &BrokerState, request: &RemotingCommand) -> Response {
    let config = parse_lenient(&request.body)
        .and_then(|value| SubscriptionGroupConfig::deserialize(value).map_err(|e| e.to_string()));
    match config {
        Ok(config) if !config.group_name.is_empty() => {
            state.put_group(config).await;
            Some(RemotingCommand::success_to(request))
        }
        Ok(_) => error(request, ResponseCode::SYSTEM_ERROR, "groupName is empty"),
        Err(e) => error(request, ResponseCode::SYSTEM_ERROR, e),
    }
}

/// DELETE_SUBSCRIPTIONGROUP (207).
#[must_use]
pub async fn delete_subscription_group(state: &BrokerState, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<DeleteSubscriptionGroupRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    state.delete_group(&header.group_name).await;
    Some(RemotingCommand::success_to(request))
}

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201).
#[must_use]
pub fn all_subscription_groups(state: &BrokerState, request: &RemotingCommand) -> Response {
    with_body(request, state.groups_json())
}

/// GET_ALL_CONSUMER_OFFSET (43).
#[must_use]
pub fn all_consumer_offsets(state: &BrokerState, request: &RemotingCommand) -> Response {
    with_body(request, state.offsets_json())
}

/// CLONE_GROUP_OFFSET (314, mqadmin `cloneGroupOffset`): `srcGroup`'s committed offsets in
/// the topic (each topic it committed in when none is named) become `destGroup`'s. As Java's
/// `AdminBrokerProcessor`: a topic the broker does not have is skipped, and unless `offline`,
/// so is a topic an online source group does not subscribe to; the answer is SUCCESS.
pub fn clone_group_offset(state: &BrokerState, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<CloneGroupOffsetRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let src = &header.src_group;
    let topics = match header.topic.as_deref().map(str::trim) {
        Some(topic) if !topic.is_empty() => vec![topic.to_owned()],
        _ => state.topics_of_group(src),
    };
    let online = state.subscription_count(src) > 0;
    for topic in topics {
        if state.topic(&topic).is_none() {
            tracing::warn!(topic, "cloneGroupOffset: no such topic");
            continue;
        }
        if header.offline != Some(true) && online && state.subscription(src, &topic).is_none() {
            tracing::warn!(topic, group = %src, "cloneGroupOffset: not subscribed");
            continue;
        }
        state.clone_offsets(src, &header.dest_group, &topic);
    }
    Some(RemotingCommand::success_to(request))
}

/// GET_ALL_DELAY_OFFSET (45): `delayOffset.json` as last written (every
/// `flushDelayOffsetInterval`; Java answers from memory), for slaves.
#[must_use]
pub fn all_delay_offsets(state: &BrokerState, request: &RemotingCommand) -> Response {
    let path = state.config.store.config_dir().join("delayOffset.json");
    let accept = |bytes: &[u8]| crate::store::config_files::DelayOffsetTable::parse(bytes).is_ok();
    match crate::config::persist::read_with_backup(&path, accept) {
        Ok(Some(bytes)) => with_body(request, bytes),
        Ok(None) => with_body(request, "{\"offsetTable\":{}}".to_owned()),
        Err(e) => error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}

/// Body of LOCK_BATCH_MQ and UNLOCK_BATCH_MQ (`LockBatchRequestBody`).
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct LockBatchBody {
    consumer_group: String,
    client_id: String,
    mq_set: Vec<MessageQueue>,
}

fn lock_body(request: &RemotingCommand) -> Result<LockBatchBody, String> {
    parse_lenient(&request.body)
        .and_then(|value| LockBatchBody::deserialize(value).map_err(|e| e.to_string()))
}

/// LOCK_BATCH_MQ (41): locks the queues an orderly consumer asks for; answers those it holds.
#[must_use]
pub fn lock_batch(state: &BrokerState, request: &RemotingCommand) -> Response {
    let body = match lock_body(request) {
        Ok(body) => body,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e),
    };
    let locked = state
        .locks
        .lock(&body.consumer_group, &body.client_id, &body.mq_set);
    with_body(
        request,
        serde_json::json!({ "lockOKMQSet": locked }).to_string(),
    )
}

/// UNLOCK_BATCH_MQ (42).
#[must_use]
pub fn unlock_batch(state: &BrokerState, request: &RemotingCommand) -> Response {
    let body = match lock_body(request) {
        Ok(body) => body,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e),
    };
    state
        .locks
        .unlock(&body.consumer_group, &body.client_id, &body.mq_set);
    Some(RemotingCommand::success_to(request))
}

/// GET_CONSUMER_CONNECTION_LIST (203): the members of a consumer group and their settings.
#[must_use]
pub fn consumer_connections(state: &BrokerState, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<GetConsumerConnectionListRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    match state.consumer_connection_json(&header.consumer_group) {
        Some(body) => with_body(request, body.to_string()),
        None => error(
            request,
            ResponseCode::CONSUMER_NOT_ONLINE,
            format!("the consumer group[{}] not online", header.consumer_group),
        ),
    }
}

/// GET_PRODUCER_CONNECTION_LIST (204).
#[must_use]
pub fn producer_connections(state: &BrokerState, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<GetProducerConnectionListRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    match state.producer_connection_json(&header.producer_group) {
        Some(body) => with_body(request, body.to_string()),
        None => error(
            request,
            ResponseCode::SYSTEM_ERROR,
            format!("the producer group[{}] not exist", header.producer_group),
        ),
    }
}

/// GET_CONSUME_STATS (208): per queue, the broker's max offset and the group's committed
/// offset (`ConsumeStats`), for the given topic or every topic the group committed in;
/// `consumeTps` is the messages the group pulled per second over the last minute
/// (`GROUP_GET_NUMS`), summed over those topics.
pub async fn consume_stats(
    state: &BrokerState,
    reader: &StoreReader,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<GetConsumeStatsRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let topics = match header.topic.as_deref().filter(|t| !t.trim().is_empty()) {
        Some(topic) => vec![topic.to_owned()],
        None => state.topics_of_group(&header.consumer_group),
    };
    // An online group shows only the topics it subscribes to now, not those it left
    // offsets in before (`ConsumerManager.findSubscriptionData`).
    let online = state.subscription_count(&header.consumer_group) > 0;
    let mut entries = Vec::new();
    let mut consume_tps = 0.0;
    for name in topics {
        let Some(topic) = state.topic(&name) else {
            continue;
        };
        if online && state.subscription(&header.consumer_group, &name).is_none() {
            continue;
        }
        consume_tps += state
            .stats
            .items
            .group_get_tps(&name, &header.consumer_group);
        for queue_id in 0..topic.read_queue_nums {
            let broker_offset = reader.max_offset_in_queue(&name, queue_id);
            let consumer_offset = state
                .committed_offset(&header.consumer_group, &name, queue_id)
                .unwrap_or(0)
                .max(0);
            let value = serde_json::json!({
                "brokerOffset": broker_offset,
                "consumerOffset": consumer_offset,
                "lastTimestamp": last_store_time(reader, &name, queue_id, consumer_offset).await,
            });
            let queue = MessageQueue {
                topic: name.clone(),
                broker_name: state.config.broker_name.clone(),
                queue_id,
            };
            entries.push((queue, value));
        }
    }
    with_body(
        request,
        format!(
            r#"{{"consumeTps":{},"offsetTable":{}}}"#,
            crate::broker::stats::java_double(consume_tps),
            queue_keyed_map(&entries)
        ),
    )
}

/// INVOKE_BROKER_TO_RESET_OFFSET (222), `Broker2Client.resetOffset`: per writable queue of
/// the topic, the offset found by `timestamp` (the max offset for -1) when forced or when it
/// lies before the group's committed offset, else the committed one; the table goes to every
/// online member of the group (RESET_CONSUMER_CLIENT_OFFSET, oneway), which commits it
/// itself; the broker's own offsets stay as they are, as in Java. CONSUMER_NOT_ONLINE when
/// no member is connected; unlike Java, that is checked before the group's committed offsets,
/// so that a group with no member online gets it even when it never committed in some queue
/// (Java answers "consumer group not exist" then, and mqadmin gives up instead of falling
/// back to committing the offsets itself).
pub async fn reset_offset(
    state: &BrokerState,
    reader: &StoreReader,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<ResetOffsetRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let Some(topic) = state.topic(&header.topic) else {
        // As 5.x (4.9.8 answered SYSTEM_ERROR).
        let remark = format!("Topic {} does not exist", header.topic);
        return error(request, ResponseCode::TOPIC_NOT_EXIST, remark);
    };
    let members = state.consumer_members(&header.group);
    if members.is_empty() {
        let remark = format!(
            "Consumer not online, so can not reset offset, Group: {} Topic: {} Timestamp: {}",
            header.group, header.topic, header.timestamp
        );
        return error(request, ResponseCode::CONSUMER_NOT_ONLINE, remark);
    }
    if let Some(member) = members.iter().find(|m| m.version < V3_0_7_SNAPSHOT) {
        let remark = format!(
            "the client does not support this feature. version={}",
            member.version
        );
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let mut entries = Vec::new();
    for queue_id in 0..topic.write_queue_nums {
        let Some(committed) = state.committed_offset(&header.group, &header.topic, queue_id) else {
            let remark = format!("THe consumer group <{}> not exist", header.group);
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        };
        let by_time = if header.timestamp == -1 {
            reader.max_offset_in_queue(&header.topic, queue_id)
        } else {
            match reader
                .offset_by_time(&header.topic, queue_id, header.timestamp, Boundary::Lower)
                .await
            {
                Ok(offset) => offset,
                Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
            }
        }
        .max(0);
        let offset = if header.is_force || by_time < committed {
            by_time
        } else {
            committed
        };
        let queue = MessageQueue {
            topic: header.topic.clone(),
            broker_name: state.config.broker_name.clone(),
            queue_id,
        };
        entries.push((queue, offset));
    }
    let body = reset_offset_body(&entries);
    let push_body = if request.language.name() == Some("CPP") {
        // `ResetOffsetBodyForC`: a list of `MessageQueueForC`.
        let list: Vec<serde_json::Value> = entries
            .iter()
            .map(|(queue, offset)| {
                serde_json::json!({
                    "brokerName": queue.broker_name,
                    "offset": offset,
                    "queueId": queue.queue_id,
                    "topic": queue.topic,
                })
            })
            .collect();
        serde_json::json!({ "offsetTable": list }).to_string()
    } else {
        body.clone()
    };
    let push_header = ResetOffsetRequestHeader {
        topic: header.topic.clone(),
        group: header.group.clone(),
        timestamp: header.timestamp,
        is_force: false,
        queue_id: None,
        offset: None,
    };
    for member in &members {
        let mut push = RemotingCommand::request_with_header(
            RequestCode::RESET_CONSUMER_CLIENT_OFFSET,
            &push_header,
        );
        push.body = push_body.clone().into_bytes();
        member.outbound.send_oneway(push);
    }
    tracing::info!(
        topic = %header.topic,
        group = %header.group,
        members = members.len(),
        "[reset-offset] pushed to the group's consumers"
    );
    with_body(request, body)
}

/// `ResetOffsetBody`: `{"offsetTable":{<MessageQueue>:offset}}`.
fn reset_offset_body(entries: &[(MessageQueue, i64)]) -> String {
    let entries: Vec<(MessageQueue, serde_json::Value)> = entries
        .iter()
        .map(|(queue, offset)| (queue.clone(), serde_json::Value::from(*offset)))
        .collect();
    format!(r#"{{"offsetTable":{}}}"#, queue_keyed_map(&entries))
}
