//! PEEK_MESSAGE (200052, Java 5.x's `PeekMessageProcessor`): the messages a pop of the group
//! would take next, as stored, without a checkpoint and without moving the group's offset.
//!
//! As Java: the group's retry topic is read first one time in five (else after the topic,
//! when the answer has room left), the topic's queues from a random one on when `queueId` is
//! -1, and the answer is SUCCESS `FOUND` with the records, or PULL_NOT_FOUND
//! `NO_MESSAGE_IN_QUEUE`; `restNum` counts what is left behind in the queues looked at.

use super::Context;
use crate::broker::pop::{pop_offset, random_percent, retry_topic, INIT_MODE_MIN};
use crate::broker::reply::{error, header_refusal, Response, FAQ};
use crate::broker::state::PERM_READ;
use crate::remoting::headers::{PeekMessageRequestHeader, PopMessageResponseHeader};
use crate::remoting::server::ConnectionInfo;
use crate::remoting::{RemotingCommand, ResponseCode};
use crate::store::reader::{GetMessageStatus, PullFilter};
use bytes::Bytes;

/// What a peek has found so far.
struct Peek {
    parts: Vec<Bytes>,
    rest: i64,
    max: usize,
}

/// PEEK_MESSAGE.
pub(super) async fn process(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<PeekMessageRequestHeader>() {
        Ok(header) => header,
        Err(e) => return header_refusal(request, &e),
    };
    let state = &ctx.state;
    let (topic, group) = (header.topic.as_str(), header.consumer_group.as_str());
    if state.runtime().broker_permission & PERM_READ == 0 {
        let remark = format!(
            "the broker[{}] peeking message is forbidden",
            state.config.broker_ip1
        );
        return error(request, ResponseCode::NO_PERMISSION, remark);
    }
    let Some(config) = state.topic(topic) else {
        let remark = format!("topic[{topic}] not exist, apply first please! {FAQ}");
        return error(request, ResponseCode::TOPIC_NOT_EXIST, remark);
    };
    if config.perm & PERM_READ == 0 {
        let remark = format!("the topic[{topic}] peeking message is forbidden");
        return error(request, ResponseCode::NO_PERMISSION, remark);
    }
    if header.queue_id >= config.read_queue_nums {
        let remark = format!(
            "queueId[{}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] \
             consumer:[/{}]",
            header.queue_id, config.read_queue_nums, connection.peer
        );
        return error(request, ResponseCode::INVALID_PARAMETER, remark);
    }
    let Some(group_config) = state.group_or_create(group).await else {
        let remark = format!("subscription group [{group}] does not exist, {FAQ}");
        return error(request, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, remark);
    };
    if !group_config.consume_enable {
        let remark = format!("subscription group no permission, {group}");
        return error(request, ResponseCode::NO_PERMISSION, remark);
    }
    let random = usize::try_from(random_percent()).unwrap_or(0);
    let retry_first = random % 5 == 0;
    let retry = retry_topic(state, topic, group);
    let mut peek = Peek {
        parts: Vec::new(),
        rest: 0,
        max: usize::try_from(header.max_msg_nums).unwrap_or(0),
    };
    if retry_first {
        peek_topic(ctx, &mut peek, &retry, group, None, random).await;
    }
    let queue = (header.queue_id >= 0).then_some(header.queue_id);
    peek_topic(ctx, &mut peek, topic, group, queue, random).await;
    if !retry_first && peek.parts.len() < peek.max {
        peek_topic(ctx, &mut peek, &retry, group, None, random).await;
    }
    let (code, remark) = if peek.parts.is_empty() {
        (ResponseCode::PULL_NOT_FOUND, "NO_MESSAGE_IN_QUEUE")
    } else {
        (ResponseCode::SUCCESS, "FOUND")
    };
    let mut response = RemotingCommand::response_to(request, code, Some(remark.to_owned()));
    response.set_header(&PopMessageResponseHeader {
        pop_time: 0,
        invisible_time: 0,
        revive_qid: 0,
        rest_num: peek.rest,
        start_offset_info: None,
        msg_offset_info: None,
        order_count_info: None,
    });
    response.body_parts = peek.parts;
    Some(response)
}

/// Peeks at `queue` of `topic`, or at each of its read queues from `random` on.
async fn peek_topic(
    ctx: &Context,
    peek: &mut Peek,
    topic: &str,
    group: &str,
    queue: Option<i32>,
    random: usize,
) {
    let queues = match queue {
        Some(queue_id) => vec![queue_id],
        None => {
            let Some(config) = ctx.state.topic(topic) else {
                return;
            };
            let count = usize::try_from(config.read_queue_nums).unwrap_or(0);
            (0..count)
                .filter_map(|i| i32::try_from((random + i) % count).ok())
                .collect()
        }
    };
    for queue_id in queues {
        peek_queue(ctx, peek, topic, group, queue_id).await;
    }
}

/// Peeks at one queue from the group's pop offset (Java's `peekMsgFromQueue`).
async fn peek_queue(ctx: &Context, peek: &mut Peek, topic: &str, group: &str, queue_id: i32) {
    let (mut offset, _) = pop_offset(
        &ctx.state,
        &ctx.reader,
        (topic, queue_id),
        group,
        INIT_MODE_MIN,
    );
    peek.rest += ctx.reader.max_offset_in_queue(topic, queue_id) - offset;
    let want = peek.max.saturating_sub(peek.parts.len());
    if want == 0 {
        return;
    }
    let everything = PullFilter {
        tags_codes: None,
        records: None,
    };
    let read = |offset| {
        ctx.reader
            .get_message(topic, queue_id, offset, want, &everything)
    };
    let mut result = match read(offset).await {
        Ok(result) => result,
        Err(error) => {
            tracing::warn!(%error, topic, queue_id, "peek cannot read");
            return;
        }
    };
    if matches!(
        result.status,
        GetMessageStatus::OffsetTooSmall | GetMessageStatus::OffsetOverflowBadly
    ) {
        offset = result.next_begin_offset;
        result = match read(offset).await {
            Ok(result) => result,
            Err(error) => {
                tracing::warn!(%error, topic, queue_id, "peek cannot read");
                return;
            }
        };
    }
    for found in &result.messages {
        let part = result.parts[found.part].slice(found.start..found.start + found.size);
        peek.parts.push(part);
    }
}
