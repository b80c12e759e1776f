//! POP_MESSAGE (200050, Java 5.x's `PopMessageProcessor`, non-order pops): messages of one
//! queue or of every queue of a topic, and of the group's POP retry topic (first with
//! `popFromRetryProbability` percent, else when the topic has too few), each batch of a
//! queue recorded by a checkpoint on the revive topic before it is answered; the group's
//! offset moves past what was popped at once. A pop that finds nothing waits up to its
//! `pollTime` for any of those queues to grow.
//!
//! The answer carries the handle fields Java's client rebuilds each message's `POP_CK`
//! from (`startOffsetInfo`, `msgOffsetInfo`); a message of the retry topic is re-encoded
//! under the topic asked for, with its `POP_CK` set, as Java does.

use super::Context;
use crate::broker::filter::{compile, is_tag_type, tag_codes, Filter};
use crate::broker::pop::format::{
    push_msg_offset_info, push_start_offset_info, retry_mark, ExtraInfo, PopCheckPoint,
};
use crate::broker::pop::{
    check_pop_target, ck_message, ensure_revive_topic, pop_offset, pop_queue_ends, put_revive,
    random_percent, retry_topic, POP_MSG_NUMS_MAX, PROPERTY_POP_CK,
};
use crate::broker::reply::{error, header_refusal, Response};
use crate::broker::state::pop::{pop_key, PopPolling};
use crate::broker::state::{now_ms, PERM_READ};
use crate::remoting::headers::{PopMessageRequestHeader, PopMessageResponseHeader};
use crate::remoting::server::ConnectionInfo;
use crate::remoting::{RemotingCommand, ResponseCode};
use crate::store::message::{
    append_property, decode_record, encode_record, parse_properties, MessageVersion, Record,
};
use crate::store::reader::{GetMessageStatus, PullFilter};
use bytes::Bytes;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Checkpoints written so far, for the round robin over revive queues (`ckMessageNumber`).
static CK_NUMBER: AtomicU64 = AtomicU64::new(0);

/// One pop in progress: what it asked and what it has found so far.
struct Pop<'a> {
    ctx: &'a Context,
    header: &'a PopMessageRequestHeader,
    filter: &'a PullFilter<'a>,
    pop_time: i64,
    revive_qid: i32,
    max: usize,
    /// The records to answer, one per part.
    parts: Vec<Bytes>,
    start_offset_info: String,
    msg_offset_info: String,
    /// Messages left behind in the queues looked at (`restNum`).
    rest: i64,
}

/// POP_MESSAGE.
pub(super) async fn process(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    let mut header = match request.decode_header::<PopMessageRequestHeader>() {
        Ok(header) => header,
        Err(e) => return header_refusal(request, &e),
    };
    let started = now_ms();
    if header.born_time == 0 {
        header.born_time = started;
    }
    let config = ctx.state.runtime();
    let ip = config.broker_ip1;
    // Java's long arithmetic: a bornTime or pollTime near the limits wraps, never panics.
    if started
        .wrapping_sub(header.born_time)
        .wrapping_sub(header.poll_time)
        > 500
    {
        let remark = format!("the broker[{ip}] pop message is timeout too much");
        return error(request, ResponseCode::POLLING_TIMEOUT, remark);
    }
    if config.broker_permission & PERM_READ == 0 {
        let remark = format!("the broker[{ip}] pop message is forbidden");
        return error(request, ResponseCode::NO_PERMISSION, remark);
    }
    if header.max_msg_nums > POP_MSG_NUMS_MAX {
        let remark = format!("the broker[{ip}] pop message's num is greater than 32");
        return error(request, ResponseCode::INVALID_PARAMETER, remark);
    }
    if !config.store.timer_wheel_enable {
        let remark =
            format!("the broker[{ip}] pop message is forbidden because timerWheelEnable is false");
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let target = check_pop_target(
        &ctx.state,
        &header.topic,
        header.queue_id,
        &header.consumer_group,
        connection.peer,
    );
    if let Err((code, remark)) = target.await {
        return error(request, code, remark);
    }
    if header.order == Some(true) {
        // Not yet served: ordered POP (consumerOrderInfo.json, attemptId) is left of issue 40.
        let remark = "ordered POP is not supported by this broker yet";
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let filter = match filter_of(&header) {
        Ok(filter) => filter,
        Err(e) => {
            tracing::warn!(group = %header.consumer_group, error = %e, "the pop's filter");
            let remark = "parse the consumer's subscription failed";
            return error(request, ResponseCode::SUBSCRIPTION_PARSE_FAILED, remark);
        }
    };
    let accepts = |code: i64| filter.accepts_code(code);
    let by_selector = |record: &[u8]| filter.accepts_record(record);
    let filter = filter.pull_filter(&accepts, &by_selector);
    ensure_revive_topic(&ctx.state).await;
    let deadline = started.saturating_add(header.poll_time.max(0));
    let mut polling = None;
    loop {
        // The queues' ends before reading: a message that comes while this pop reads wakes
        // its wait below at once.
        let ends = pop_queue_ends(
            &ctx.state,
            &ctx.reader,
            &header.topic,
            header.queue_id,
            &header.consumer_group,
        );
        let pop = pop_once(ctx, &header, &filter).await;
        if pop.found() > 0 {
            return Some(answer(request, &header, pop, ResponseCode::SUCCESS));
        }
        let now = now_ms();
        if header.poll_time <= 0 || now >= deadline {
            return Some(answer(request, &header, pop, ResponseCode::POLLING_TIMEOUT));
        }
        let target = (
            header.topic.as_str(),
            header.consumer_group.as_str(),
            header.queue_id,
        );
        if !wait_for_growth(ctx, &mut polling, target, ends, (now, deadline)).await {
            return Some(answer(request, &header, pop, ResponseCode::POLLING_FULL));
        }
    }
}

/// Waits from `now` until a queue of `ends` grows past its end or `deadline` passes,
/// counted from the first wait on as a pop waiting on `(topic, group, queue_id)` for as long
/// as `polling` lives (POLLING_INFO). False, at once, when too many pops wait already
/// (Java's POLLING_FULL). POP_MESSAGE and NOTIFICATION wait alike.
pub(super) async fn wait_for_growth<'a>(
    ctx: &'a Context,
    polling: &mut Option<PopPolling<'a>>,
    (topic, group, queue_id): (&str, &str, i32),
    ends: Vec<(String, i32, i64)>,
    (now, deadline): (i64, i64),
) -> bool {
    if polling.is_none() {
        let pop = &ctx.state.runtime().pop;
        let key = pop_key(topic, group, queue_id);
        *polling = ctx
            .state
            .pop
            .start_polling(key, pop.pop_polling_size, pop.max_pop_polling_size);
        if polling.is_none() {
            return false;
        }
    }
    let waits: Vec<_> = ends
        .into_iter()
        .map(|(topic, queue, end)| ctx.long_poll.wait(ctx.store.shared(), &topic, queue, end))
        .collect();
    let left = Duration::from_millis(u64::try_from(deadline - now).unwrap_or(0));
    let timer = Box::pin(glommio::timer::sleep(left));
    // No queue to wait on (a topic and retry topic of no read queues): the time only;
    // `select_all` of nothing panics.
    if waits.is_empty() {
        timer.await;
    } else {
        let _ = futures::future::select(futures::future::select_all(waits), timer).await;
    }
    true
}

/// The response: `code`, the handle fields, and the records found.
fn answer(
    request: &RemotingCommand,
    header: &PopMessageRequestHeader,
    pop: Pop<'_>,
    code: ResponseCode,
) -> RemotingCommand {
    let status = if pop.found() > 0 {
        GetMessageStatus::Found
    } else {
        GetMessageStatus::NoMessageInQueue
    };
    let mut response =
        RemotingCommand::response_to(request, code, Some(status.java_name().to_owned()));
    response.set_header(&PopMessageResponseHeader {
        pop_time: pop.pop_time,
        invisible_time: header.invisible_time,
        revive_qid: pop.revive_qid,
        rest_num: pop.rest,
        start_offset_info: Some(pop.start_offset_info),
        msg_offset_info: Some(pop.msg_offset_info),
        order_count_info: None,
    });
    response.body_parts = pop.parts;
    response
}

/// The pop's filter from `expType`/`exp` (`FilterAPI.build`, `ConsumerFilterManager.build`).
fn filter_of(header: &PopMessageRequestHeader) -> Result<Filter, String> {
    let expression = header.exp.as_deref().unwrap_or("");
    let kind = header.exp_type.as_deref().unwrap_or("");
    if expression.is_empty() || is_tag_type(kind) {
        return Ok(Filter::Tags(tag_codes(expression)));
    }
    compile(kind, expression).map(|selector| Filter::Sql92(Arc::new(selector)))
}

/// One pass over the queues (the body of Java's `processRequest`).
async fn pop_once<'a>(
    ctx: &'a Context,
    header: &'a PopMessageRequestHeader,
    filter: &'a PullFilter<'a>,
) -> Pop<'a> {
    let revive_queues = u64::try_from(ctx.state.runtime().pop.revive_queue_num.max(1)).unwrap_or(1);
    let revive_qid =
        i32::try_from(CK_NUMBER.fetch_add(1, Ordering::Relaxed) % revive_queues).unwrap_or(0);
    let mut pop = Pop {
        ctx,
        header,
        filter,
        pop_time: now_ms(),
        revive_qid,
        max: usize::try_from(header.max_msg_nums).unwrap_or(0).max(1),
        parts: Vec::new(),
        start_offset_info: String::new(),
        msg_offset_info: String::new(),
        rest: 0,
    };
    let random = random_percent();
    let need_retry = random < ctx.state.runtime().pop.pop_from_retry_probability;
    let retry = retry_topic(&ctx.state, &header.topic, &header.consumer_group);
    if need_retry {
        pop.topic(&retry, true, random).await;
    }
    if header.queue_id < 0 {
        pop.topic(&header.topic, false, random).await;
    } else {
        pop.queue(&header.topic, false, header.queue_id).await;
    }
    if !need_retry && pop.found() < pop.max {
        pop.topic(&retry, true, random).await;
    }
    pop
}

impl Pop<'_> {
    /// Messages found so far.
    fn found(&self) -> usize {
        self.parts.len()
    }

    /// Every readable queue of `topic`, from a random one on (`popMsgFromTopic`).
    async fn topic(&mut self, topic: &str, is_retry: bool, random: i32) {
        let Some(config) = self.ctx.state.topic(topic) else {
            return;
        };
        let queues = config.read_queue_nums.max(0);
        for i in 0..queues {
            self.queue(topic, is_retry, (random + i) % queues).await;
        }
    }

    /// One queue (`popMsgFromQueue`).
    async fn queue(&mut self, topic: &str, is_retry: bool, queue_id: i32) {
        let (ctx, group) = (self.ctx, self.header.consumer_group.as_str());
        let state = &ctx.state;
        let Some(_lock) = state.pop.try_lock(pop_key(topic, group, queue_id)) else {
            let offset = self.offset(topic, queue_id, false);
            self.rest += ctx.reader.max_offset_in_queue(topic, queue_id) - offset;
            return;
        };
        let mut offset = self.offset(topic, queue_id, true);
        if self.found() >= self.max {
            self.rest += ctx.reader.max_offset_in_queue(topic, queue_id) - offset;
            return;
        }
        let want = self.max - self.found();
        let read = |offset| {
            ctx.reader
                .get_message(topic, queue_id, offset, want, self.filter)
        };
        let mut result = match read(offset).await {
            Ok(result) => result,
            Err(error) => {
                tracing::warn!(%error, topic, queue_id, "pop cannot read");
                return;
            }
        };
        if matches!(
            result.status,
            GetMessageStatus::OffsetTooSmall
                | GetMessageStatus::OffsetOverflowBadly
                | GetMessageStatus::OffsetFoundNull
        ) {
            // The committed offset is outside the queue: start where the store says.
            offset = result.next_begin_offset;
            state.commit_offset(group, topic, queue_id, offset);
            result = match read(offset).await {
                Ok(result) => result,
                Err(error) => {
                    tracing::warn!(%error, topic, queue_id, "pop cannot read");
                    return;
                }
            };
        }
        if !result.messages.is_empty() {
            let offsets: Vec<i64> = result.messages.iter().map(|m| m.queue_offset).collect();
            let ck = PopCheckPoint::new(
                topic,
                group,
                queue_id,
                offset,
                &offsets,
                (self.pop_time, self.header.invisible_time),
                &state.config.broker_name,
            );
            let message = ck_message(state, &ck, self.revive_qid);
            if let Err(error) = put_revive(state, &ctx.store, message).await {
                // Nothing is handed out without its checkpoint (Java skips them too).
                tracing::warn!(error, topic, queue_id, "pop's checkpoint not stored");
                self.rest += result.max_offset - offset;
                return;
            }
            state.commit_offset(group, topic, queue_id, result.next_begin_offset);
            push_start_offset_info(&mut self.start_offset_info, topic, queue_id, offset);
            push_msg_offset_info(&mut self.msg_offset_info, topic, queue_id, &offsets);
        } else if matches!(
            result.status,
            GetMessageStatus::NoMatchedMessage
                | GetMessageStatus::OffsetFoundNull
                | GetMessageStatus::MessageWasRemoving
                | GetMessageStatus::NoMatchedLogicQueue
        ) && result.next_begin_offset > offset
        {
            // Filtered out: nothing to revive there, the group moves past (`addCkMock`).
            state.commit_offset(group, topic, queue_id, result.next_begin_offset);
        }
        self.rest += result.max_offset - result.next_begin_offset;
        for found in &result.messages {
            let part = result.parts[found.part].slice(found.start..found.start + found.size);
            if !is_retry {
                self.parts.push(part);
                continue;
            }
            let handle = ExtraInfo {
                ck_queue_offset: offset,
                pop_time: self.pop_time,
                invisible_time: self.header.invisible_time,
                revive_qid: self.revive_qid,
                retry: retry_mark(topic).to_owned(),
                broker_name: state.config.broker_name.clone(),
                queue_id,
                queue_offset: Some(found.queue_offset),
            };
            match as_popped(&part, &self.header.topic, &handle.build()) {
                Some(record) => {
                    self.parts.push(Bytes::from(record));
                }
                None => tracing::warn!(topic, queue_id, "a retry record does not decode"),
            }
        }
    }

    /// The offset to pop `queue_id` of `topic` from (`getPopOffset`), committed when
    /// `init` and new.
    fn offset(&self, topic: &str, queue_id: i32, init: bool) -> i64 {
        let (state, group) = (&self.ctx.state, self.header.consumer_group.as_str());
        let init_mode = self.header.init_mode;
        let (offset, committed) =
            pop_offset(state, &self.ctx.reader, (topic, queue_id), group, init_mode);
        if init && !committed {
            state.commit_offset(group, topic, queue_id, offset);
        }
        offset
    }
}

/// A retry topic's record as a pop answers it: under `topic`, with `POP_CK` set unless it
/// has one, re-encoded (its size and layout version follow).
fn as_popped(record: &[u8], topic: &str, handle: &str) -> Option<Vec<u8>> {
    let Ok(Record::Message { record, .. }) = decode_record(record, false) else {
        return None;
    };
    let mut properties = record.properties.to_vec();
    if !parse_properties(&properties)
        .iter()
        .any(|(key, _)| key == PROPERTY_POP_CK)
    {
        append_property(&mut properties, PROPERTY_POP_CK, handle);
    }
    let popped = crate::store::message::MessageRecord {
        version: MessageVersion::for_topic(topic),
        topic,
        properties: &properties,
        ..record
    };
    let mut out = Vec::new();
    encode_record(&popped, &mut out);
    Some(out)
}
