//! Admin and lookup requests of a broker (`AdminBrokerProcessor`, `QueryMessageProcessor`):
//! topic and subscription-group management, config and offset dumps, queue locks of orderly
//! consumers, and message lookups by key and by offset id. Free functions over the shared
//! state and a shard's reader, each answering with Java's codes and remarks.

use super::state::{invalid_topic_remark, now_ms, BrokerState};
use crate::config::fastjson::parse_lenient;
use crate::config::properties::parse as parse_properties_text;
use crate::remoting::command::CURRENT_VERSION;
use crate::remoting::headers::{
    DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader, GetBrokerConfigResponseHeader,
    GetConsumeStatsRequestHeader, GetConsumerConnectionListRequestHeader,
    GetProducerConnectionListRequestHeader, GetTopicStatsInfoRequestHeader,
    QueryMessageRequestHeader, QueryMessageResponseHeader, QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader, ViewMessageRequestHeader,
};
use crate::remoting::heartbeat::MessageQueue;
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use crate::store::config_files::SubscriptionGroupConfig;
use crate::store::message::{decode_record, Record};
use crate::store::message_store::StoreHandle;
use crate::store::reader::StoreReader;
use crate::store::shared::StoreShared;
use serde::Deserialize;

/// A response or nothing (oneway).
pub type Response = Option<RemotingCommand>;

/// A response with `code` and `remark` to `request`.
pub fn error(request: &RemotingCommand, code: ResponseCode, remark: impl Into<String>) -> Response {
    Some(RemotingCommand::response_to(
        request,
        code,
        Some(remark.into()),
    ))
}

fn with_body(request: &RemotingCommand, body: impl Into<Vec<u8>>) -> Response {
    let mut response = RemotingCommand::success_to(request);
    response.body = body.into();
    Some(response)
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
    let header = match request.decode_header::<DeleteTopicRequestHeader>() {
        Ok(header) => header,
        Err(e) => return super::processor::header_refusal(request, &e),
    };
    if let Some(problem) = invalid_topic_remark(&header.topic) {
        return error(request, ResponseCode::SYSTEM_ERROR, problem);
    }
    if state.is_system_topic(&header.topic) {
        let remark = format!("The topic[{}] is conflict with system topic.", header.topic);
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    state.delete_topic(&header.topic).await;
    // As Java's `cleanUnusedTopic`: the queues go too, so a topic made again under the
    // name starts empty instead of handing its old messages to new groups.
    if let Err(error) = store.drop_topic(&header.topic).await {
        tracing::warn!(topic = header.topic, %error, "the deleted topic's queues stay");
    }
    Some(RemotingCommand::success_to(request))
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

/// GET_BROKER_CONFIG (26): the settings as properties text (the runtime configuration,
/// [`BrokerConfig::java_properties`](crate::config::broker::BrokerConfig::java_properties)),
/// with the configuration's version in the header.
#[must_use]
pub fn broker_config(state: &BrokerState, request: &RemotingCommand) -> Response {
    let text: String = state
        .runtime()
        .java_properties(state.listen_port())
        .iter()
        .map(|(key, value)| format!("{key}={value}\n"))
        .collect();
    let mut response = RemotingCommand::success_to(request);
    response.set_header(&GetBrokerConfigResponseHeader {
        version: state.config_version_json(),
    });
    response.body = text.into_bytes();
    Some(response)
}

/// Keys no UPDATE_BROKER_CONFIG may change, besides those `configBlackList` names
/// (`AdminBrokerProcessor.initConfigBlackList`).
const CONFIG_BLACK_LIST: [&str; 3] = ["brokerConfigPath", "rocketmqHome", "configBlackList"];

/// UPDATE_BROKER_CONFIG (25): the body is properties text; see
/// [`BrokerState::update_config`] for what takes effect when. NO_PERMISSION for a key of
/// the black list, as Java.
pub async fn update_broker_config(state: &BrokerState, request: &RemotingCommand) -> Response {
    if request.body.is_empty() {
        return Some(RemotingCommand::success_to(request));
    }
    let Ok(text) = std::str::from_utf8(&request.body) else {
        return error(
            request,
            ResponseCode::SYSTEM_ERROR,
            "string2Properties error",
        );
    };
    let properties = parse_properties_text(text);
    let black_list = state.runtime().config_black_list.clone();
    let blocked = properties.iter().any(|p| {
        CONFIG_BLACK_LIST.contains(&p.key.as_str())
            || black_list
                .split(';')
                .any(|key| !key.is_empty() && key == p.key)
    });
    if blocked {
        return error(
            request,
            ResponseCode::NO_PERMISSION,
            "Can not update config in black list.",
        );
    }
    state.update_config(&properties).await;
    Some(RemotingCommand::success_to(request))
}

/// Java's default capacities of the request queues its thread pools take from
/// (`sendThreadPoolQueueCapacity` and the like). ferromq runs a request where its connection
/// is read, in no queue: the runtime info reports each queue empty, with Java's capacity, so
/// that tools reading these keys find them.
const JAVA_QUEUE_CAPACITIES: [(&str, &str, u32); 4] = [
    (
        "sendThreadPoolQueueSize",
        "sendThreadPoolQueueCapacity",
        10_000,
    ),
    (
        "pullThreadPoolQueueSize",
        "pullThreadPoolQueueCapacity",
        100_000,
    ),
    (
        "queryThreadPoolQueueSize",
        "queryThreadPoolQueueCapacity",
        20_000,
    ),
    (
        "EndTransactionQueueSize",
        "EndTransactionThreadPoolQueueCapacity",
        100_000,
    ),
];

/// GET_BROKER_RUNTIME_INFO (28): Java's runtime keys as a `KVTable`
/// (`AdminBrokerProcessor.prepareRuntimeInfo` and `DefaultMessageStore.getRuntimeInfo`),
/// read by `mqadmin clusterList` and `brokerStatus`.
pub async fn runtime_info(
    state: &BrokerState,
    reader: &StoreReader,
    shared: &StoreShared,
    request: &RemotingCommand,
) -> Response {
    use super::stats::{format_runtime, human_bytes, java_double};
    let stats = &state.stats;
    let totals = stats.totals();
    let (put_max, get_max) = stats.time_max_ms();
    let ((put_yesterday, get_yesterday), (put_today, get_today)) = stats.mornings();
    let config = &shared.config;
    let commit_log_dir = config.commit_log_dir();
    let disk_ratio = |path: &std::path::Path| {
        ferromq_uring::disk::used_ratio(path).map_or_else(|_| "-1.0".to_owned(), java_double)
    };
    let commit_log_ratio = disk_ratio(&commit_log_dir);
    // The oldest message's store time. Java 4.9.8 reads it through a window of twice
    // `maxMessageSize` from the CommitLog's start, which fails (-1) until the CommitLog
    // holds 8 MiB, so its clusterList shows a 56-year-old broker; ferromq reads the record
    // itself, on purpose.
    let earliest = match reader
        .record_at(i64::try_from(shared.min_physical_offset()).unwrap_or(i64::MAX))
        .await
    {
        Ok(Some(bytes)) => match decode_record(&bytes, false) {
            Ok(Record::Message { record, .. }) => record.store_timestamp,
            _ => -1,
        },
        _ => -1,
    };
    // Java never reports fewer than one put (`getRuntimeInfo`), so that its average divides.
    let put_times = totals.put_times.max(1);
    #[allow(clippy::cast_precision_loss)] // an average
    let average_size = totals.put_size as f64 / put_times as f64;
    let mut table: Vec<(String, String)> = vec![
        ("bootTimestamp".into(), stats.boot_ms.to_string()),
        ("runtime".into(), format_runtime(now_ms() - stats.boot_ms)),
        ("putMessageEntireTimeMax".into(), put_max.to_string()),
        ("putMessageTimesTotal".into(), put_times.to_string()),
        (
            "putMessageFailedTimes".into(),
            totals.put_failed.to_string(),
        ),
        ("putMessageSizeTotal".into(), totals.put_size.to_string()),
        ("putMessageDistributeTime".into(), stats.put_distribution()),
        ("putMessageAverageSize".into(), java_double(average_size)),
        // ferromq hands records to dispatch as they are committed, never buffering them.
        ("dispatchMaxBuffer".into(), "0".into()),
        ("getMessageEntireTimeMax".into(), get_max.to_string()),
        ("putTps".into(), stats.tps(|t| t.put_times)),
        ("getFoundTps".into(), stats.tps(|t| t.get_found)),
        ("getMissTps".into(), stats.tps(|t| t.get_miss)),
        ("getTotalTps".into(), stats.get_total_tps()),
        ("getTransferedTps".into(), stats.tps(|t| t.get_transferred)),
        (
            "putLatency99".into(),
            format!("{:.2}", stats.put_latency(0.99)),
        ),
        (
            "putLatency999".into(),
            format!("{:.2}", stats.put_latency(0.999)),
        ),
        (
            format!("commitLogDiskRatio_{}", commit_log_dir.display()),
            commit_log_ratio.clone(),
        ),
        ("commitLogDiskRatio".into(), commit_log_ratio),
        (
            "consumeQueueDiskRatio".into(),
            disk_ratio(&config.consume_queue_dir()),
        ),
        (
            "commitLogMinOffset".into(),
            shared.min_physical_offset().to_string(),
        ),
        (
            "commitLogMaxOffset".into(),
            shared.committed_end().to_string(),
        ),
        (
            "brokerVersionDesc".into(),
            crate::remoting::version::version_desc(CURRENT_VERSION),
        ),
        ("brokerVersion".into(), CURRENT_VERSION.to_string()),
        (
            "msgPutTotalYesterdayMorning".into(),
            put_yesterday.to_string(),
        ),
        ("msgPutTotalTodayMorning".into(), put_today.to_string()),
        ("msgPutTotalTodayNow".into(), totals.put_times.to_string()),
        (
            "msgGetTotalYesterdayMorning".into(),
            get_yesterday.to_string(),
        ),
        ("msgGetTotalTodayMorning".into(), get_today.to_string()),
        (
            "msgGetTotalTodayNow".into(),
            totals.get_transferred.to_string(),
        ),
        // Dispatch follows the writer's commits without a backlog of its own to report.
        ("dispatchBehindBytes".into(), "0".into()),
        // No lock guards the CommitLog's memory (Java's `lockTimeMills`).
        ("pageCacheLockTimeMills".into(), "0".into()),
        ("sendThreadPoolQueueHeadWaitTimeMills".into(), "0".into()),
        ("pullThreadPoolQueueHeadWaitTimeMills".into(), "0".into()),
        ("queryThreadPoolQueueHeadWaitTimeMills".into(), "0".into()),
        ("earliestMessageTimeStamp".into(), earliest.to_string()),
        ("startAcceptSendRequestTimeStamp".into(), "0".into()),
        // Java's value without `transientStorePoolEnable`: no pool to run out of.
        (
            "remainTransientStoreBufferNumbs".into(),
            i32::MAX.to_string(),
        ),
        ("remainHowManyDataToFlush".into(), human_bytes(0)),
    ];
    for (size, capacity, value) in JAVA_QUEUE_CAPACITIES {
        table.push((size.into(), "0".into()));
        table.push((capacity.into(), value.to_string()));
    }
    table.extend(ha_runtime_info(state, shared.committed_end()));
    if let Ok(space) = ferromq_uring::disk::space(&config.store_path_root_dir) {
        table.push((
            "commitLogDirCapacity".into(),
            format!(
                "Total : {}, Free : {}.",
                human_bytes(space.total),
                human_bytes(space.usable)
            ),
        ));
    }
    let table: serde_json::Map<String, serde_json::Value> = table
        .into_iter()
        .map(|(key, value)| (key, serde_json::Value::String(value)))
        .collect();
    with_body(request, serde_json::json!({ "table": table }).to_string())
}

/// ferromq's own runtime keys on replication (4.9.8 reports none): the role; on a master,
/// each connected slave's last acknowledged offset and how many bytes it lags behind `end`;
/// on a slave, the master it follows and whether the link is up.
fn ha_runtime_info(state: &BrokerState, end: u64) -> Vec<(String, String)> {
    use super::ha_slave::LinkState;
    use crate::config::broker::BrokerRole;
    let role = state.config.broker_role;
    let mut table = vec![("brokerRole".to_owned(), role.java_name().to_owned())];
    let end = i64::try_from(end).unwrap_or(i64::MAX);
    if role == BrokerRole::Slave {
        let master = &state.master;
        let ha = master.ha_target(state.config.ha_master_address.as_deref());
        table.push(("haMasterAddress".into(), ha.unwrap_or_default()));
        table.push(("masterAddr".into(), master.master().unwrap_or_default()));
        let link = match master.link() {
            LinkState::Down(None) => "DOWN".to_owned(),
            LinkState::Down(Some(reason)) => format!("DOWN {reason}"),
            LinkState::Up(addr) => format!("UP {addr}"),
            LinkState::Stopped(reason) => format!("STOPPED {reason}"),
        };
        table.push(("haConnection".into(), link));
        return table;
    }
    let links = state.slaves.links();
    table.push(("haConnectedSlaves".into(), links.len().to_string()));
    table.push(("haSlaveAckOffset".into(), state.slaves.acked().to_string()));
    if let Some(best) = links.iter().map(|(_, acked)| *acked).max() {
        table.push(("haSlaveLagBytes".into(), (end - best.max(0)).to_string()));
    }
    for (addr, acked) in links {
        table.push((format!("haSlaveAckOffset_{addr}"), acked.to_string()));
        table.push((
            format!("haSlaveLagBytes_{addr}"),
            (end - acked.max(0)).to_string(),
        ));
    }
    table
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

/// VIEW_MESSAGE_BY_ID (33): the record at a CommitLog offset (from an offset message id).
pub async fn view_message(reader: &StoreReader, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<ViewMessageRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    match reader.record_at(header.offset).await {
        Ok(Some(bytes)) => with_body(request, bytes),
        Ok(None) => {
            let remark = format!("can not find message by the offset, {}", header.offset);
            error(request, ResponseCode::SYSTEM_ERROR, remark)
        }
        Err(e) => error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}

/// QUERY_MESSAGE (12): records of a topic by key within a time range, newest first.
pub async fn query_message(
    reader: &StoreReader,
    shared: &StoreShared,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<QueryMessageRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let max = usize::try_from(header.max_num)
        .unwrap_or(0)
        .clamp(1, shared.config.default_query_max_num.max(1) * 64);
    let found = match reader
        .query_by_key(
            &header.topic,
            &header.key,
            max,
            header.begin_timestamp,
            header.end_timestamp,
        )
        .await
    {
        Ok(found) => found,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    // The index's progress goes with "not found" too, as in Java.
    let mut response = if found.is_empty() {
        RemotingCommand::response_to(
            request,
            ResponseCode::QUERY_NOT_FOUND,
            Some("can not find message, maybe time range not correct".to_owned()),
        )
    } else {
        RemotingCommand::success_to(request)
    };
    response.set_header(&QueryMessageResponseHeader {
        index_last_update_timestamp: shared.synced_store_timestamp(),
        index_last_update_phyoffset: i64::try_from(shared.committed_end()).unwrap_or(i64::MAX),
    });
    response.body = found.concat();
    Some(response)
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

/// A fastjson map keyed by `MessageQueue` objects, as Java writes `offsetTable`s: the key is
/// the queue's JSON, unquoted (the Java and fastjson-compatible clients read it so).
fn queue_keyed_map(entries: &[(MessageQueue, serde_json::Value)]) -> String {
    let fields: Vec<String> = entries
        .iter()
        .map(|(queue, value)| {
            let key = serde_json::json!({
                "brokerName": queue.broker_name,
                "queueId": queue.queue_id,
                "topic": queue.topic,
            });
            format!("{key}:{value}")
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

async fn last_store_time(reader: &StoreReader, topic: &str, queue_id: i32, offset: i64) -> i64 {
    if offset <= 0 {
        return 0;
    }
    reader
        .store_time_at(topic, queue_id, offset - 1)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
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
    with_body(
        request,
        format!(r#"{{"offsetTable":{}}}"#, queue_keyed_map(&entries)),
    )
}

/// GET_CONSUME_STATS (208): per queue, the broker's max offset and the group's committed
/// offset (`ConsumeStats`), for the given topic or every topic the group committed in.
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
    for name in topics {
        let Some(topic) = state.topic(&name) else {
            continue;
        };
        if online && state.subscription(&header.consumer_group, &name).is_none() {
            continue;
        }
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
            r#"{{"consumeTps":0.0,"offsetTable":{}}}"#,
            queue_keyed_map(&entries)
        ),
    )
}

/// `MQVersion.Version.V3_0_7_SNAPSHOT`: the first client that applies a pushed reset.
const V3_0_7_SNAPSHOT: i32 = 28;

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
        let remark = format!(
            "[reset-offset] reset offset failed, no topic in this broker. topic={}",
            header.topic
        );
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    };
    let members = state.consumer_outbounds(&header.group);
    if members.is_empty() {
        let remark = format!(
            "Consumer not online, so can not reset offset, Group: {} Topic: {} Timestamp: {}",
            header.group, header.topic, header.timestamp
        );
        return error(request, ResponseCode::CONSUMER_NOT_ONLINE, remark);
    }
    if let Some((_, version)) = members.iter().find(|(_, v)| *v < V3_0_7_SNAPSHOT) {
        let remark = format!("the client does not support this feature. version={version}");
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
                .offset_by_time(&header.topic, queue_id, header.timestamp)
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
    for (outbound, _) in &members {
        let mut push = RemotingCommand::request_with_header(
            RequestCode::RESET_CONSUMER_CLIENT_OFFSET,
            &push_header,
        );
        push.body = push_body.clone().into_bytes();
        outbound.send_oneway(push);
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

/// The ACL admin requests (50–53: UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG,
/// GET_BROKER_CLUSTER_ACL_INFO, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG), as Java's
/// `AdminBrokerProcessor` answers them: the change written to the ACL files and in force at
/// once, or the request's failure code (209, 210, 211) with the reason. Without `aclEnable`
/// Java fails on a missing validator (a null remark, or SYSTEM_ERROR for 52); ferromq says so.
pub fn acl_admin(state: &BrokerState, request: &RemotingCommand) -> Response {
    use super::acl::AclChange;
    use crate::remoting::headers::{
        CreateAccessConfigRequestHeader, DeleteAccessConfigRequestHeader,
        GetBrokerAclConfigResponseHeader, UpdateGlobalWhiteAddrsConfigRequestHeader,
    };
    let code = request.request_code();
    let failure = ResponseCode(match code {
        RequestCode::UPDATE_AND_CREATE_ACL_CONFIG => 209,
        RequestCode::DELETE_ACL_CONFIG => 210,
        RequestCode::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG => 211,
        _ => ResponseCode::SYSTEM_ERROR.0,
    });
    let Some(rules) = &state.acl else {
        return error(request, failure, "aclEnable is false on this broker");
    };
    let split = |list: Option<String>| {
        list.map(|l| {
            l.split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect()
        })
    };
    let change = match code {
        RequestCode::UPDATE_AND_CREATE_ACL_CONFIG => {
            match request.decode_header::<CreateAccessConfigRequestHeader>() {
                Ok(h) => AclChange::Upsert {
                    access_key: h.access_key,
                    secret_key: h.secret_key,
                    white_remote_address: h.white_remote_address,
                    admin: h.admin.unwrap_or(false),
                    default_topic_perm: h.default_topic_perm,
                    default_group_perm: h.default_group_perm,
                    topic_perms: split(h.topic_perms),
                    group_perms: split(h.group_perms),
                },
                Err(e) => return error(request, failure, e.to_string()),
            }
        }
        RequestCode::DELETE_ACL_CONFIG => {
            match request.decode_header::<DeleteAccessConfigRequestHeader>() {
                Ok(h) => AclChange::Delete {
                    access_key: h.access_key,
                },
                Err(e) => return error(request, failure, e.to_string()),
            }
        }
        RequestCode::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG => {
            match request.decode_header::<UpdateGlobalWhiteAddrsConfigRequestHeader>() {
                Ok(h) => AclChange::GlobalWhite {
                    addresses: split(Some(h.global_white_addrs)).unwrap_or_default(),
                    file: h
                        .acl_file_full_path
                        .filter(|p| !p.is_empty())
                        .map(std::path::PathBuf::from),
                },
                Err(e) => return error(request, failure, e.to_string()),
            }
        }
        _ => {
            let (version, all) = rules.versions();
            let mut response = RemotingCommand::success_to(request);
            response.set_header(&GetBrokerAclConfigResponseHeader {
                version,
                all_acl_file_version: Some(all),
                broker_name: state.config.broker_name.clone(),
                broker_addr: format!("{}:{}", state.config.broker_ip1, state.listen_port()),
                cluster_name: state.config.broker_cluster_name.clone(),
            });
            return Some(response);
        }
    };
    match rules.change(&change) {
        Ok(()) => Some(RemotingCommand::success_to(request)),
        Err(reason) => {
            tracing::warn!(%reason, code = code.0, "ACL change refused");
            error(request, failure, reason)
        }
    }
}
