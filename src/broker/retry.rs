//! Retry and dead letter, shared by the send and send-back processors: the `%RETRY%` and
//! `%DLQ%` topics of a group, and where a producer's send to a `%RETRY%` topic goes
//! (`handleRetryAndDLQ`).
//!
//! A consumer hands back a message it could not consume by its CommitLog offset. The broker
//! stores a copy for the group's `%RETRY%<group>` topic with `reconsumeTimes + 1`, the
//! original topic in `RETRY_TOPIC` and the first message's id in `ORIGIN_MESSAGE_ID`, delayed
//! by the asked level (`3 + reconsumeTimes` when the consumer asks 0), so it waits in
//! `SCHEDULE_TOPIC_XXXX` first. A message already redelivered `maxReconsumeTimes` times (the
//! request's, else the group's `retryMaxTimes`), or handed back with a negative level, goes
//! to `%DLQ%<group>` at once instead.

use super::reply::{error, Response, FAQ};
use super::state::{
    BrokerState, DLQ_GROUP_TOPIC_PREFIX, PERM_READ, PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX,
};
use crate::remoting::{RemotingCommand, ResponseCode};

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
pub(crate) fn group_not_exist(request: &RemotingCommand, group: &str) -> Response {
    let remark = format!("subscription group not exist, {group} {FAQ}");
    error(request, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, remark)
}

/// The queue of a retry or DLQ topic with `queues` queues (Java picks at random).
pub(crate) fn queue_for(opaque: i32, queues: i32) -> i32 {
    opaque.rem_euclid(queues.max(1))
}

/// The `%DLQ%` topic of `group`, created on demand with one queue, readable and writable
/// (`createTopicInSendMessageBackMethod` with `PERM_WRITE | PERM_READ` in 4.9.8).
pub(crate) async fn ensure_dlq(state: &BrokerState, group: &str) -> String {
    let topic = format!("{DLQ_GROUP_TOPIC_PREFIX}{group}");
    state
        .ensure_topic(&topic, DLQ_NUMS_PER_GROUP, PERM_READ | PERM_WRITE)
        .await;
    topic
}

/// The maximum redeliveries a request allows: its own `maxReconsumeTimes` from clients of
/// 3.4.9 on, else the group's `retryMaxTimes`.
pub(crate) fn max_reconsume_times(
    request: &RemotingCommand,
    from_header: Option<i32>,
    group: i32,
) -> i32 {
    match from_header {
        Some(times) if request.version >= V3_4_9 => times,
        _ => group,
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
