//! PULL_MESSAGE and LITE_PULL_MESSAGE (`PullMessageProcessor`): Java's checks, the offset
//! commit a pull carries, the tag and SQL92 filters, and the long-polling wait when nothing
//! is there.

use super::Context;
use crate::broker::filter::{compile, is_tag_type, stored_properties, tag_codes, Filter};
use crate::broker::reply::{error, Response, FAQ};
use crate::broker::retry::PROPERTY_RETRY_TOPIC;
use crate::broker::state::PERM_READ;
use crate::broker::state::RETRY_GROUP_TOPIC_PREFIX;
use crate::remoting::headers::{PullMessageRequestHeader, PullMessageResponseHeader};
use crate::remoting::heartbeat::SubscriptionData;
use crate::remoting::server::ConnectionInfo;
use crate::remoting::{ExtFields, RemotingCommand, ResponseCode};
use crate::store::reader::GetMessageStatus;
use ferromq_protocol::filter::sql92::Properties;
use futures::future::select;
use std::sync::Arc;
use std::time::Duration;

/// `PullSysFlag` bits.
const PULL_COMMIT_OFFSET: i32 = 0x1;

const PULL_SUSPEND: i32 = 0x2;

const PULL_SUBSCRIPTION: i32 = 0x4;

pub(super) async fn process(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header_strict::<PullMessageRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let config = ctx.state.runtime();
    if config.broker_permission & PERM_READ == 0 {
        let remark = format!(
            "the broker[{}] pulling message is forbidden",
            config.broker_ip1
        );
        return error(request, ResponseCode::NO_PERMISSION, remark);
    }
    let Some(group) = ctx.state.group_or_create(&header.consumer_group).await else {
        let remark = format!(
            "subscription group [{}] does not exist, {FAQ}",
            header.consumer_group
        );
        return error(request, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, remark);
    };
    if !group.consume_enable {
        let remark = format!(
            "subscription group no permission, {}",
            header.consumer_group
        );
        return error(request, ResponseCode::NO_PERMISSION, remark);
    }
    let Some(topic) = ctx.state.topic(&header.topic) else {
        let remark = format!(
            "topic[{}] not exist, apply first please! {FAQ}",
            header.topic
        );
        return error(request, ResponseCode::TOPIC_NOT_EXIST, remark);
    };
    if topic.perm & PERM_READ == 0 {
        let remark = format!("the topic[{}] pulling message is forbidden", header.topic);
        return error(request, ResponseCode::NO_PERMISSION, remark);
    }
    if header.queue_id < 0 || header.queue_id >= topic.read_queue_nums {
        let remark = format!(
            "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[/{}]",
            header.queue_id, header.topic, topic.read_queue_nums, connection.peer
        );
        // As 5.x (4.9.8: SYSTEM_ERROR).
        return error(request, ResponseCode::INVALID_PARAMETER, remark);
    }
    let filter = if header.sys_flag & PULL_SUBSCRIPTION != 0 {
        let kind = header.expression_type.as_deref().unwrap_or_default();
        let expression = header.subscription.as_deref().unwrap_or("*");
        if is_tag_type(kind) {
            Filter::Tags(tag_codes(expression))
        } else {
            if let Some(refusal) = unsupported_filter(ctx, request, kind) {
                return Some(refusal);
            }
            match compile(kind, expression) {
                Ok(selector) => Filter::Sql92(Arc::new(selector)),
                Err(e) => {
                    tracing::warn!(
                        group = %header.consumer_group,
                        expression,
                        error = %e,
                        "the pull's subscription does not parse"
                    );
                    let remark = "parse the consumer's subscription failed";
                    return error(request, ResponseCode::SUBSCRIPTION_PARSE_FAILED, remark);
                }
            }
        }
    } else if !ctx.state.has_consumer_group(&header.consumer_group) {
        let remark = format!("the consumer's group info not exist{FAQ}");
        return error(request, ResponseCode::SUBSCRIPTION_NOT_EXIST, remark);
    } else if !group.consume_broadcast_enable
        && ctx.state.consumes_by_broadcast(&header.consumer_group)
    {
        let remark = format!(
            "the consumer group[{}] can not consume by broadcast way",
            header.consumer_group
        );
        let mut refusal = error(request, ResponseCode::NO_PERMISSION, remark);
        if let Some(refusal) = refusal.as_mut() {
            // As 5.x says why (`ForbiddenType.BROADCASTING_DISABLE_FORBIDDEN`).
            let fields = refusal.ext_fields.get_or_insert_with(ExtFields::new);
            fields.insert("forbiddenType", BROADCASTING_DISABLE_FORBIDDEN.to_string());
        }
        return refusal;
    } else {
        match ctx
            .state
            .subscription(&header.consumer_group, &header.topic)
        {
            None => {
                let remark = format!("the consumer's subscription not exist{FAQ}");
                return error(request, ResponseCode::SUBSCRIPTION_NOT_EXIST, remark);
            }
            Some(subscription) if subscription.sub_version < header.sub_version => {
                let remark = "the consumer's subscription not latest";
                return error(request, ResponseCode::SUBSCRIPTION_NOT_LATEST, remark);
            }
            Some(subscription) if is_tag_type(subscription.expression_type()) => {
                Filter::Tags(subscription_codes(&subscription))
            }
            Some(subscription) => {
                let registered = ctx
                    .state
                    .consumer_filter(&header.topic, &header.consumer_group);
                let Some(registered) = registered else {
                    let remark = concat!(
                        "The broker's consumer filter data is not exist!",
                        "Your expression may be wrong!"
                    );
                    return error(request, ResponseCode::FILTER_DATA_NOT_EXIST, remark);
                };
                if registered.client_version < header.sub_version {
                    let remark = "the consumer's consumer filter data not latest";
                    return error(request, ResponseCode::FILTER_DATA_NOT_LATEST, remark);
                }
                let kind = subscription.expression_type();
                if let Some(refusal) = unsupported_filter(ctx, request, kind) {
                    return Some(refusal);
                }
                Filter::Sql92(Arc::clone(&registered.selector))
            }
        }
    };
    if header.sys_flag & PULL_COMMIT_OFFSET != 0 && header.commit_offset >= 0 {
        ctx.state.commit_offset(
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            header.commit_offset,
        );
    }
    let max = usize::try_from(header.max_msg_nums).unwrap_or(0).max(1);
    let route = Route {
        broker_id: group.broker_id,
        when_slow: group.which_broker_when_consume_slowly,
        topic_sys_flag: topic.topic_sys_flag,
    };
    let mut answer = pull_once(ctx, request, &header, max, &filter, &route).await;
    let not_found = answer
        .as_ref()
        .is_some_and(|r| r.code == ResponseCode::PULL_NOT_FOUND.0);
    if not_found && header.sys_flag & PULL_SUSPEND != 0 {
        let wait = if config.long_polling_enable {
            Duration::from_millis(u64::try_from(header.suspend_timeout_millis).unwrap_or(0))
        } else {
            config.short_polling_time
        };
        let woken = ctx.long_poll.wait(
            ctx.store.shared(),
            &header.topic,
            header.queue_id,
            header.queue_offset,
        );
        let timer = glommio::timer::sleep(wait);
        let _ = select(woken, Box::pin(timer)).await;
        answer = pull_once(ctx, request, &header, max, &filter, &route).await;
    }
    answer
}

/// 5.x's `forbiddenType` of a broadcast pull its group may not make.
const BROADCASTING_DISABLE_FORBIDDEN: i32 = 4;

/// What a pull's answer takes from the group's and the topic's configs.
struct Route {
    /// The group's `brokerId`, the broker the answer suggests.
    broker_id: i64,
    /// The group's `whichBrokerWhenConsumeSlowly`, suggested when the pull read from disk.
    when_slow: i64,
    /// The topic's `topicSysFlag`, which 5.x answers (as `groupSysFlag`, 0 here: ferromq's
    /// groups have no sys flags).
    topic_sys_flag: i32,
}

/// One pull; `route` says which broker the answer suggests.
async fn pull_once(
    ctx: &Context,
    request: &RemotingCommand,
    header: &PullMessageRequestHeader,
    max: usize,
    filter: &Filter,
    route: &Route,
) -> Response {
    let accepts = |code: i64| filter.accepts_code(code);
    let by_selector = |record: &[u8]| filter.accepts_record(record);
    // `filterSupportRetry`: a retry topic's message is filtered by the selector its group
    // registered for the message's original topic (`ExpressionForRetryMessageFilter`).
    let retry_group = header
        .topic
        .strip_prefix(RETRY_GROUP_TOPIC_PREFIX)
        .filter(|_| ctx.state.runtime().filter_support_retry);
    let by_original_topic = |record: &[u8]| {
        let Some(properties) = stored_properties(record) else {
            return false;
        };
        let registered = properties
            .property(PROPERTY_RETRY_TOPIC)
            .zip(retry_group)
            .and_then(|(topic, group)| ctx.state.consumer_filter(topic, group));
        registered.is_none_or(|data| data.selector.matches(&properties))
    };
    let mut filter = filter.pull_filter(&accepts, &by_selector);
    if retry_group.is_some() {
        filter.records = Some(&by_original_topic);
    }
    let started = std::time::Instant::now();
    let result = match ctx
        .reader
        .get_message(
            &header.topic,
            header.queue_id,
            header.queue_offset,
            max,
            &filter,
        )
        .await
    {
        Ok(result) => result,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let stats = &ctx.state.stats;
    stats.record_get(ctx.shard, result.messages.len() as u64, elapsed);
    if !result.messages.is_empty() {
        let bytes = result.messages.iter().map(|m| m.size as u64).sum();
        let group = &header.consumer_group;
        let found = result.messages.len() as u64;
        stats
            .items
            .record_get(ctx.shard, &header.topic, group, found, bytes);
    }
    let code = match result.status {
        GetMessageStatus::Found => ResponseCode::SUCCESS,
        GetMessageStatus::MessageWasRemoving | GetMessageStatus::NoMatchedMessage => {
            ResponseCode::PULL_RETRY_IMMEDIATELY
        }
        GetMessageStatus::NoMatchedLogicQueue | GetMessageStatus::NoMessageInQueue => {
            if header.queue_offset == 0 {
                ResponseCode::PULL_NOT_FOUND
            } else {
                ResponseCode::PULL_OFFSET_MOVED
            }
        }
        GetMessageStatus::OffsetFoundNull | GetMessageStatus::OffsetOverflowOne => {
            ResponseCode::PULL_NOT_FOUND
        }
        GetMessageStatus::OffsetOverflowBadly | GetMessageStatus::OffsetTooSmall => {
            ResponseCode::PULL_OFFSET_MOVED
        }
    };
    // Java names the status in every answer, FOUND too.
    let remark = Some(result.status.java_name().to_owned());
    // 4.9's rule, whatever the role: with slaveReadEnable, a pull reading what is no
    // longer in memory goes to the group's slow-consumer broker, others to its broker;
    // without, to the master.
    let suggest_which_broker_id = if !ctx.state.runtime().slave_read_enable {
        0
    } else if result.suggest_pulling_from_slave {
        route.when_slow
    } else {
        route.broker_id
    };
    let mut response = RemotingCommand::response_to(request, code, remark);
    response.set_header(&PullMessageResponseHeader {
        suggest_which_broker_id,
        next_begin_offset: result.next_begin_offset,
        min_offset: result.min_offset,
        max_offset: result.max_offset,
        offset_delta: None,
        topic_sys_flag: Some(route.topic_sys_flag),
        group_sys_flag: Some(0),
        forbidden_type: None,
    });
    response.body_parts = result.parts;
    Some(response)
}

/// The refusal of a pull whose subscription is not a tag expression when the broker has no
/// `enablePropertyFilter`, as Java words it.
fn unsupported_filter(ctx: &Context, request: &RemotingCommand, kind: &str) -> Response {
    if ctx.state.runtime().enable_property_filter {
        return None;
    }
    let remark = format!("The broker does not support consumer to filter message by {kind}");
    error(request, ResponseCode::SYSTEM_ERROR, remark)
}

/// Tag codes of a heartbeat subscription, from its `subString` as Java's `FilterAPI` builds
/// them (each tag trimmed). The `codeSet` the client sent is not used: a Java client sends
/// exactly these codes, while rocketmq-client-rust 1.0.0 hashes the tags untrimmed (for
/// `TagA || TagC`, the codes of `"TagA "` and `" TagC"`), which would match no message.
fn subscription_codes(subscription: &SubscriptionData) -> Option<Vec<i64>> {
    tag_codes(&subscription.sub_string)
}
