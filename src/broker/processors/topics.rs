//! Topic administration (`AdminBrokerProcessor`): UPDATE_AND_CREATE_TOPIC,
//! GET_ALL_TOPIC_CONFIG, DELETE_TOPIC_IN_BROKER, GET_TOPIC_STATS_INFO,
//! GET_SYSTEM_TOPIC_LIST_FROM_BROKER and QUERY_TOPIC_CONSUME_BY_WHO.

use super::{last_store_time, queue_keyed_map, Context, DISPATCH_WAIT_MAX};
use crate::broker::reply::{error, header_refusal, with_body, with_defaults, Response};
use crate::broker::state::{invalid_topic_remark, BrokerState};
use crate::broker::stats::items::StatsName;
use crate::broker::stats::java_double;
use crate::remoting::headers::{
    CreateTopicRequestHeader, DeleteTopicRequestHeader, GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
};
use crate::remoting::heartbeat::MessageQueue;
use crate::remoting::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use crate::store::config_files::TopicConfig;
use crate::store::message_store::StoreHandle;
use crate::store::reader::StoreReader;

/// UPDATE_AND_CREATE_TOPIC, GET_ALL_TOPIC_CONFIG, DELETE_TOPIC_IN_BROKER,
/// GET_TOPIC_STATS_INFO and QUERY_TOPIC_CONSUME_BY_WHO.
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    match request.request_code() {
        RequestCode::UPDATE_AND_CREATE_TOPIC => create_topic(ctx, request).await,
        RequestCode::GET_ALL_TOPIC_CONFIG => all_topic_config(&ctx.state, request),
        RequestCode::DELETE_TOPIC_IN_BROKER => delete_topic(&ctx.state, &ctx.store, request).await,
        RequestCode::GET_TOPIC_STATS_INFO => {
            ctx.reader.dispatched_to_committed(DISPATCH_WAIT_MAX).await;
            topic_stats(&ctx.state, &ctx.reader, request).await
        }
        RequestCode::GET_SYSTEM_TOPIC_LIST_FROM_BROKER => system_topics(&ctx.state, request),
        _ => topic_consumers(&ctx.state, request),
    }
}

async fn create_topic(ctx: &Context, request: &RemotingCommand) -> Response {
    // `order` starts false in Java's header and stays so when absent; the template topic
    // is not used (the queues and perm come with the request).
    let defaults = [("order", "false"), ("defaultTopic", "")];
    let header = match CreateTopicRequestHeader::read_from(&with_defaults(request, &defaults)) {
        Ok(header) => header,
        Err(e) => return header_refusal(request, &e),
    };
    // INVALID_PARAMETER for a request that fails a check, as 5.x (4.9.8: SYSTEM_ERROR).
    if let Some(problem) = invalid_topic_remark(&header.topic) {
        return error(request, ResponseCode::INVALID_PARAMETER, problem);
    }
    // A client may not redefine the broker's own topics (`TBW102` without its inherit
    // bit would end auto-creation; the delay levels live in `SCHEDULE_TOPIC_XXXX`).
    if ctx.state.is_system_topic(&header.topic) {
        let remark = format!("The topic[{}] is conflict with system topic.", header.topic);
        return error(request, ResponseCode::INVALID_PARAMETER, remark);
    }
    ctx.state
        .put_topic(TopicConfig {
            read_queue_nums: header.read_queue_nums,
            write_queue_nums: header.write_queue_nums,
            perm: header.perm,
            topic_filter_type: header.topic_filter_type.clone(),
            topic_sys_flag: header.topic_sys_flag.unwrap_or(0),
            order: header.order,
            ..TopicConfig::named(&header.topic)
        })
        .await;
    Some(RemotingCommand::success_to(request))
}

/// GET_ALL_TOPIC_CONFIG (21): every topic's config with the table's version.
#[must_use]
pub fn all_topic_config(state: &BrokerState, request: &RemotingCommand) -> Response {
    with_body(request, state.topics_json())
}

/// DELETE_TOPIC_IN_BROKER (215): forgets a topic's config and drops its ConsumeQueues (its
/// queues start again at 0); its records stay in the CommitLog until retention.
#[must_use]
pub async fn delete_topic(
    state: &BrokerState,
    store: &StoreHandle,
    request: &RemotingCommand,
) -> Response {
    // INVALID_PARAMETER for a missing topic or a system topic, as 5.x (4.9.8: SYSTEM_ERROR);
    // a name no topic can have stays SYSTEM_ERROR, as 4.9.8 (5.x deletes nothing and says
    // SUCCESS).
    let header = match request.decode_header::<DeleteTopicRequestHeader>() {
        Ok(header) => header,
        Err(e) => {
            let mut refusal = header_refusal(request, &e);
            if let Some(refusal) = refusal.as_mut() {
                refusal.code = ResponseCode::INVALID_PARAMETER.0;
            }
            return refusal;
        }
    };
    if let Some(problem) = invalid_topic_remark(&header.topic) {
        return error(request, ResponseCode::SYSTEM_ERROR, problem);
    }
    if state.is_system_topic(&header.topic) {
        let remark = format!("The topic[{}] is conflict with system topic.", header.topic);
        return error(request, ResponseCode::INVALID_PARAMETER, remark);
    }
    state.delete_topic(&header.topic).await;
    // As Java's `cleanUnusedTopic`: the queues go too, so a topic made again under the
    // name starts empty instead of handing its old messages to new groups.
    if let Err(error) = store.drop_topic(&header.topic).await {
        tracing::warn!(topic = header.topic, %error, "the deleted topic's queues stay");
    }
    Some(RemotingCommand::success_to(request))
}

/// GET_TOPIC_STATS_INFO (202): min and max offsets of every queue of a topic
/// (`TopicStatsTable`).
pub async fn topic_stats(
    state: &BrokerState,
    reader: &StoreReader,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<GetTopicStatsInfoRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let Some(topic) = state.topic(&header.topic) else {
        let remark = format!("topic[{}] not exist", header.topic);
        return error(request, ResponseCode::TOPIC_NOT_EXIST, remark);
    };
    let mut entries = Vec::new();
    for queue_id in 0..topic.write_queue_nums {
        let max = reader.max_offset_in_queue(&header.topic, queue_id);
        let value = serde_json::json!({
            "lastUpdateTimestamp": last_store_time(reader, &header.topic, queue_id, max).await,
            "maxOffset": max,
            "minOffset": reader.min_offset_in_queue(&header.topic, queue_id),
        });
        let queue = MessageQueue {
            topic: header.topic.clone(),
            broker_name: state.config.broker_name.clone(),
            queue_id,
        };
        entries.push((queue, value));
    }
    // As 5.x: the topic's puts per second over the last minute (`tpsTopicPutNums`).
    let put_tps = state
        .stats
        .items
        .figures(StatsName::TopicPutNums, &header.topic)
        .map_or(0.0, |figures| figures.minute.tps);
    with_body(
        request,
        format!(
            r#"{{"offsetTable":{},"topicPutTps":{}}}"#,
            queue_keyed_map(&entries),
            java_double(put_tps)
        ),
    )
}

/// GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305): the broker's system topics that exist, as a
/// `TopicList` (the topics 4.9.8 makes at start, and those 5.x lists that were made since).
#[must_use]
pub fn system_topics(state: &BrokerState, request: &RemotingCommand) -> Response {
    let (_, topics) = state.topics();
    let system: Vec<String> = topics
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| state.is_system_topic(name))
        .collect();
    with_body(
        request,
        serde_json::json!({ "topicList": system }).to_string(),
    )
}

/// QUERY_TOPIC_CONSUME_BY_WHO (300): the groups consuming a topic, as a `GroupList`
/// (mqadmin `topicList -c` and the message track of `queryMsgById`).
#[must_use]
pub fn topic_consumers(state: &BrokerState, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<QueryTopicConsumeByWhoRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let groups = state.groups_of_topic(&header.topic);
    with_body(
        request,
        serde_json::json!({ "groupList": groups }).to_string(),
    )
}
