//! ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue
//! (Java `ReceiveMessageActivity`, `AckMessageActivity`, `ChangeInvisibleDurationActivity`,
//! `ForwardMessageToDLQActivity`, `ConsumerProcessor`), on the broker's POP requests.
//!
//! A receive is one POP_MESSAGE; each message's handle is rebuilt as Java's client and
//! proxy rebuild it (`processPopResponse`: the `startOffsetInfo` entry of its queue, the
//! answer's pop time, invisible time and revive queue, its queue offset), unless the broker
//! set `POP_CK` itself, and the receipt handle is that handle, a space and the message's
//! CommitLog offset (the proxy's `ReceiptHandle`). Ack and change of invisible time send
//! the handle back as `extraInfo` for the queue and offset it names, to the topic its retry
//! mark names; a changed invisible time answers a new handle with the new pop time,
//! invisible time and revive queue. Forward to the DLQ is a CONSUMER_SEND_MSG_BACK with
//! delay level -1, then an ack.
//!
//! Frames of a receive, as the proxy writes them: a status (OK, MESSAGE_NOT_FOUND "no new
//! message", TOO_MANY_REQUESTS "polling full"), then the messages. The stream's headers go
//! out at once; the pop runs on its own task.

use super::proto::{
    self, receive_message_response, AckMessageRequest, AckMessageResponse, AckMessageResultEntry,
    ChangeInvisibleDurationRequest, ChangeInvisibleDurationResponse, Code, Digest, DigestType,
    Encoding, ForwardMessageToDeadLetterQueueRequest, ForwardMessageToDeadLetterQueueResponse,
    MessageType, ReceiveMessageRequest, ReceiveMessageResponse, Resource, SystemProperties,
};
use super::{broker_error, existing_topic, group_problem, name_of, ok, status, Caller, Inner};
use crate::broker::pop::format::{real_topic, retry_mark, ExtraInfo};
use crate::broker::pop::PROPERTY_POP_CK;
use crate::calendar::now_ms;
use crate::protocol::message::{decode_record, parse_properties, MessageRecord, Record};
use crate::protocol::message::{PROPERTY_KEYS, PROPERTY_TAGS, PROPERTY_UNIQ_KEY};
use crate::remoting::headers::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    ConsumerSendMsgBackRequestHeader, PopMessageRequestHeader, PopMessageResponseHeader,
};
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use futures::{SinkExt, Stream};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// The frames of a ReceiveMessage call.
pub(super) type ReceiveStream =
    Pin<Box<dyn Stream<Item = Result<ReceiveMessageResponse, tonic::Status>> + Send>>;

/// Messages one receive may ask for (the proxy's `maxMessageNums` cap).
const RECEIVE_BATCH_MAX: i32 = 32;
/// The invisible time of an auto-renewed receive (`defaultInvisibleTimeMills`, 60 s).
const AUTO_RENEW_INVISIBLE: Duration = Duration::from_secs(60);
/// Longest invisible time a client may ask for (`maxInvisibleTimeMills`, 12 h).
const INVISIBLE_MAX: Duration = Duration::from_secs(12 * 3600);
/// What a long poll leaves of the client's deadline (`longPollingReserveTimeInMillis`).
const LONG_POLLING_RESERVE: Duration = Duration::from_millis(100);
/// `MessageSysFlag.COMPRESSED_FLAG`.
const FLAG_COMPRESSED: i32 = 0x1;
/// Java's `ConsumeInitMode.MAX`: a group new to a queue starts at its end.
const INIT_MODE_MAX: i32 = 0;
/// The proxy's "broker acting queue" (`MessageQueueSelector.BROKER_ACTING_QUEUE_ID`): a
/// receive pops every queue of the broker, whatever queue the client named. The Node.js
/// client names queue 0 only, so a pop of the named queue would never see the others.
const BROKER_ACTING_QUEUE_ID: i32 = -1;

/// ReceiveMessage: validates, then pops on a task of its own and streams the frames.
pub(super) fn receive_message(
    inner: &Arc<Inner>,
    caller: Caller,
    request: ReceiveMessageRequest,
    deadline: Option<Duration>,
) -> ReceiveStream {
    let (mut frames, stream) = futures::channel::mpsc::channel(4);
    let inner = Arc::clone(inner);
    tokio::spawn(async move {
        // The proxy's `settings.getRequestTimeout()`: what the client waits for an answer.
        let request_timeout = inner
            .sessions
            .settings_of(&caller.client_id)
            .and_then(|settings| settings.request_timeout)
            .map_or(Duration::ZERO, |timeout| duration_of(&timeout));
        let answer = match pop_request(&inner, &request, deadline, request_timeout) {
            Ok((pop, topic)) => receive(&inner, &caller, pop, &topic).await,
            Err(problem) => vec![status_frame(problem)],
        };
        for frame in answer {
            if frames.send(Ok(frame)).await.is_err() {
                // The client went: what it was not sent becomes visible again in time.
                return;
            }
        }
    });
    Box::pin(stream)
}

/// The POP_MESSAGE a receive asks for, or the proxy's refusal.
fn pop_request(
    inner: &Inner,
    request: &ReceiveMessageRequest,
    deadline: Option<Duration>,
    request_timeout: Duration,
) -> Result<(PopMessageRequestHeader, Resource), proto::Status> {
    let config = &inner.state.config.grpc;
    let group = name_of(request.group.as_ref());
    let queue = request.message_queue.clone().unwrap_or_default();
    existing_topic(&inner.state, queue.topic.as_ref())?;
    if let Some(problem) = group_problem(group) {
        return Err(problem);
    }
    // `GrpcConfig::check` refused a minimum above the maximum when the config was read.
    let min = config.consumer_min_long_polling_timeout;
    let time_left = deadline.map(|deadline| deadline.saturating_sub(LONG_POLLING_RESERVE));
    let mut polling = request
        .long_polling_timeout
        .as_ref()
        .map(duration_of)
        // The proxy's rule: half the client's request timeout left for the answer to travel
        // (a poll to the last 100 ms of its deadline answers too late for the Go client).
        .or(time_left.map(|left| left.saturating_sub(request_timeout / 2)))
        .unwrap_or(config.consumer_max_long_polling_timeout)
        .clamp(min, config.consumer_max_long_polling_timeout);
    // The proxy's rule: the poll ends before the client's deadline, or is refused.
    if let Some(time_left) = time_left.filter(|left| polling > *left) {
        if time_left < min {
            return Err(status(
                Code::IllegalPollingTime,
                "The deadline time remaining is not enough for polling, please check network \
                 condition",
            ));
        }
        polling = time_left;
    }
    let invisible = if request.auto_renew {
        AUTO_RENEW_INVISIBLE
    } else {
        let asked = request
            .invisible_duration
            .as_ref()
            .map_or(Duration::ZERO, duration_of);
        let min = config.min_invisible_time_for_recv;
        if asked < min {
            return Err(status(
                Code::IllegalInvisibleTime,
                format!("the invisibleTime is too small. min is {}", min.as_millis()),
            ));
        }
        if asked > INVISIBLE_MAX {
            return Err(status(
                Code::IllegalInvisibleTime,
                format!(
                    "the invisibleTime is too large. max is {}",
                    INVISIBLE_MAX.as_millis()
                ),
            ));
        }
        asked
    };
    let filter = request.filter_expression.clone().unwrap_or_default();
    let (exp_type, exp) = if filter.r#type() == proto::FilterType::Sql {
        ("SQL92", filter.expression)
    } else if filter.expression.is_empty() {
        ("TAG", "*".to_owned())
    } else {
        ("TAG", filter.expression)
    };
    let millis = |duration: Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    let header = PopMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: name_of(queue.topic.as_ref()).to_owned(),
        queue_id: BROKER_ACTING_QUEUE_ID,
        max_msg_nums: request.batch_size.clamp(1, RECEIVE_BATCH_MAX),
        invisible_time: millis(invisible),
        poll_time: millis(polling),
        born_time: now_ms(),
        init_mode: INIT_MODE_MAX,
        exp_type: Some(exp_type.to_owned()),
        exp: Some(exp),
        order: Some(false),
        attempt_id: request.attempt_id.clone(),
    };
    Ok((header, queue.topic.unwrap_or_default()))
}

/// Runs one POP_MESSAGE and turns its answer into frames.
async fn receive(
    inner: &Inner,
    caller: &Caller,
    pop: PopMessageRequestHeader,
    topic: &Resource,
) -> Vec<ReceiveMessageResponse> {
    let request = RemotingCommand::request_with_header(RequestCode::POP_MESSAGE, &pop);
    let response = match inner.call(caller, request).await {
        Ok(response) => response,
        Err(problem) => return vec![status_frame(problem)],
    };
    match response.response_code() {
        ResponseCode::SUCCESS => {}
        ResponseCode::POLLING_FULL => {
            return vec![status_frame(status(Code::TooManyRequests, "polling full"))];
        }
        ResponseCode::NO_MESSAGE | ResponseCode::POLLING_TIMEOUT => {
            return vec![status_frame(status(
                Code::MessageNotFound,
                "no new message",
            ))];
        }
        _ => return vec![status_frame(broker_error(&response))],
    }
    let Ok(header) = response.decode_header::<PopMessageResponseHeader>() else {
        let problem = status(
            Code::InternalServerError,
            "the broker's pop answer has no header",
        );
        return vec![status_frame(problem)];
    };
    let starts = start_offsets(header.start_offset_info.as_deref().unwrap_or(""));
    let broker_name = &inner.state.config.broker_name;
    // Records may come as slices of the CommitLog beside the body (`body_parts`, each
    // whole records), as a connection writes them without copying; they are read in place.
    let chunks =
        std::iter::once(&response.body[..]).chain(response.body_parts.iter().map(|p| &p[..]));
    let mut records = Vec::new();
    for chunk in chunks {
        let mut at = 0;
        while at < chunk.len() {
            let Ok(Record::Message { record, size }) = decode_record(&chunk[at..], false) else {
                tracing::warn!(
                    group = pop.consumer_group,
                    "a popped record does not decode"
                );
                break;
            };
            at += size;
            records.push(record);
        }
    }
    let mut messages = Vec::new();
    for record in records {
        let properties = parse_properties(record.properties);
        let handle = properties
            .iter()
            .find(|(name, _)| name == PROPERTY_POP_CK)
            .map(|(_, handle)| handle.clone())
            .unwrap_or_else(|| {
                let mark = retry_mark(record.topic);
                let start = starts
                    .get(&(mark.to_owned(), record.queue_id))
                    .copied()
                    .unwrap_or(record.queue_offset);
                ExtraInfo {
                    ck_queue_offset: start,
                    pop_time: header.pop_time,
                    invisible_time: header.invisible_time,
                    revive_qid: header.revive_qid,
                    retry: mark.to_owned(),
                    broker_name: broker_name.clone(),
                    queue_id: record.queue_id,
                    queue_offset: Some(record.queue_offset),
                }
                .build()
            });
        let receipt = format!("{handle} {}", record.physical_offset);
        let invisible = Duration::from_millis(u64::try_from(header.invisible_time).unwrap_or(0));
        messages.push(message_of(&record, &properties, topic, receipt, invisible));
    }
    if messages.is_empty() {
        return vec![status_frame(status(
            Code::MessageNotFound,
            "no match message",
        ))];
    }
    let mut frames = vec![status_frame(ok())];
    frames.extend(messages.into_iter().map(|message| ReceiveMessageResponse {
        content: Some(receive_message_response::Content::Message(message)),
    }));
    frames
}

/// `startOffsetInfo` (`retry queueId offset;…`) by retry mark and queue.
fn start_offsets(info: &str) -> HashMap<(String, i32), i64> {
    info.split(';')
        .filter_map(|entry| {
            let mut words = entry.split(' ');
            let mark = words.next()?.to_owned();
            let queue_id = words.next()?.parse().ok()?;
            let offset = words.next()?.parse().ok()?;
            Some(((mark, queue_id), offset))
        })
        .collect()
}

/// A stored message as the client sees it (`GrpcConverter.buildMessage`).
fn message_of(
    record: &MessageRecord<'_>,
    properties: &[(String, String)],
    topic: &Resource,
    receipt_handle: String,
    invisible: Duration,
) -> proto::Message {
    let property = |name: &str| {
        properties
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    };
    let timestamp = |ms: i64| prost_types::Timestamp {
        seconds: ms.div_euclid(1000),
        nanos: i32::try_from(ms.rem_euclid(1000) * 1_000_000).unwrap_or(0),
    };
    let message_type = if property("TRAN_MSG").is_some_and(|v| v == "true") {
        MessageType::Transaction
    } else if property("TIMER_DELIVER_MS").is_some() || property("DELAY").is_some() {
        MessageType::Delay
    } else if property("__SHARDINGKEY").is_some() {
        MessageType::Fifo
    } else {
        MessageType::Normal
    };
    let delivery = property("TIMER_DELIVER_MS").and_then(|ms| ms.parse::<i64>().ok());
    let keys = property(PROPERTY_KEYS)
        .map(|keys| {
            keys.split(' ')
                .filter(|key| !key.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    let user_properties = properties
        .iter()
        .filter(|(key, _)| {
            !super::SYSTEM_PROPERTIES.contains(&key.as_str())
                && !matches!(key.as_str(), "__SHARDINGKEY" | "TRACE_CONTEXT")
        })
        .cloned()
        .collect();
    let encoding = if record.sys_flag & FLAG_COMPRESSED != 0 {
        Encoding::Gzip
    } else {
        Encoding::Identity
    };
    let system = SystemProperties {
        tag: property(PROPERTY_TAGS),
        keys,
        message_id: property(PROPERTY_UNIQ_KEY).unwrap_or_default(),
        body_digest: Some(Digest {
            r#type: DigestType::Crc32 as i32,
            checksum: format!("{:X}", crc32fast::hash(record.body)),
        }),
        body_encoding: encoding as i32,
        message_type: message_type as i32,
        born_timestamp: Some(timestamp(record.born_timestamp)),
        born_host: record.born_host.ip().to_string(),
        store_timestamp: Some(timestamp(record.store_timestamp)),
        store_host: record.store_host.to_string(),
        delivery_timestamp: delivery.map(timestamp),
        receipt_handle: Some(receipt_handle),
        queue_id: record.queue_id,
        queue_offset: Some(record.queue_offset),
        invisible_duration: Some(prost_types::Duration {
            seconds: i64::try_from(invisible.as_secs()).unwrap_or(i64::MAX),
            nanos: 0,
        }),
        delivery_attempt: Some(record.reconsume_times.saturating_add(1)),
        message_group: property("__SHARDINGKEY"),
        trace_context: property("TRACE_CONTEXT"),
        orphaned_transaction_recovery_duration: None,
        dead_letter_queue: None,
    };
    proto::Message {
        topic: Some(topic.clone()),
        user_properties,
        system_properties: Some(system),
        body: record.body.to_vec(),
    }
}

fn status_frame(status: proto::Status) -> ReceiveMessageResponse {
    ReceiveMessageResponse {
        content: Some(receive_message_response::Content::Status(status)),
    }
}

fn duration_of(duration: &prost_types::Duration) -> Duration {
    let seconds = u64::try_from(duration.seconds).unwrap_or(0);
    let nanos = u32::try_from(duration.nanos).unwrap_or(0);
    Duration::new(seconds, nanos.min(999_999_999))
}

/// A receipt handle taken apart: the broker's handle (`extraInfo`), what it names, and the
/// CommitLog offset the proxy appends.
struct Receipt {
    extra_info: ExtraInfo,
    text: String,
    commit_log_offset: i64,
}

/// Reads a receipt handle (`ReceiptHandle.decode`): the handle's fields, the queue offset
/// and the CommitLog offset required.
fn receipt_of(handle: &str) -> Result<Receipt, proto::Status> {
    let invalid = || status(Code::InvalidReceiptHandle, "receipt handle is not valid");
    let extra_info = ExtraInfo::parse(handle).ok_or_else(invalid)?;
    extra_info.queue_offset.ok_or_else(invalid)?;
    let commit_log_offset = handle
        .split(' ')
        .nth(8)
        .and_then(|word| word.parse().ok())
        .ok_or_else(invalid)?;
    Ok(Receipt {
        extra_info,
        text: handle.to_owned(),
        commit_log_offset,
    })
}

/// The topic a handle's message is acked on (its retry mark's topic).
fn ack_topic(receipt: &Receipt, topic: &str, group: &str) -> Result<String, proto::Status> {
    real_topic(topic, group, &receipt.extra_info.retry)
        .ok_or_else(|| status(Code::InvalidReceiptHandle, "receipt handle is not valid"))
}

/// One ACK_MESSAGE.
async fn ack_one(
    inner: &Inner,
    caller: &Caller,
    group: &str,
    topic: &str,
    handle: &str,
) -> proto::Status {
    let receipt = match receipt_of(handle) {
        Ok(receipt) => receipt,
        Err(problem) => return problem,
    };
    let real = match ack_topic(&receipt, topic, group) {
        Ok(real) => real,
        Err(problem) => return problem,
    };
    let header = AckMessageRequestHeader {
        consumer_group: group.to_owned(),
        topic: real,
        queue_id: receipt.extra_info.queue_id,
        extra_info: receipt.text.clone(),
        offset: receipt.extra_info.queue_offset.unwrap_or(0),
    };
    let ack = RemotingCommand::request_with_header(RequestCode::ACK_MESSAGE, &header);
    match inner.call(caller, ack).await {
        Ok(response) if response.response_code() == ResponseCode::SUCCESS => ok(),
        Ok(response) => broker_error(&response),
        Err(problem) => problem,
    }
}

/// AckMessage: one ACK_MESSAGE per entry, each entry its own status.
pub(super) async fn ack_message(
    inner: &Inner,
    caller: &Caller,
    request: &AckMessageRequest,
) -> AckMessageResponse {
    let refused = |status| AckMessageResponse {
        status: Some(status),
        entries: Vec::new(),
    };
    if let Err(problem) = existing_topic(&inner.state, request.topic.as_ref()) {
        return refused(problem);
    }
    let group = name_of(request.group.as_ref());
    if let Some(problem) = group_problem(group) {
        return refused(problem);
    }
    let topic = name_of(request.topic.as_ref());
    let mut entries = Vec::with_capacity(request.entries.len());
    for entry in &request.entries {
        let status = ack_one(inner, caller, group, topic, &entry.receipt_handle).await;
        entries.push(AckMessageResultEntry {
            message_id: entry.message_id.clone(),
            receipt_handle: entry.receipt_handle.clone(),
            status: Some(status),
        });
    }
    let overall = super::overall(entries.iter().map(|entry| entry.status.as_ref()), ok());
    AckMessageResponse {
        status: Some(overall),
        entries,
    }
}

/// ChangeInvisibleDuration: a CHANGE_MESSAGE_INVISIBLETIME; the new receipt handle.
pub(super) async fn change_invisible(
    inner: &Inner,
    caller: &Caller,
    request: &ChangeInvisibleDurationRequest,
) -> ChangeInvisibleDurationResponse {
    let refused = |status| ChangeInvisibleDurationResponse {
        status: Some(status),
        receipt_handle: String::new(),
    };
    if let Err(problem) = existing_topic(&inner.state, request.topic.as_ref()) {
        return refused(problem);
    }
    let group = name_of(request.group.as_ref());
    if let Some(problem) = group_problem(group) {
        return refused(problem);
    }
    let invisible = request
        .invisible_duration
        .as_ref()
        .map_or(Duration::ZERO, duration_of);
    if invisible > INVISIBLE_MAX {
        return refused(status(
            Code::IllegalInvisibleTime,
            format!(
                "the invisibleTime is too large. max is {}",
                INVISIBLE_MAX.as_millis()
            ),
        ));
    }
    let receipt = match receipt_of(&request.receipt_handle) {
        Ok(receipt) => receipt,
        Err(problem) => return refused(problem),
    };
    let topic = name_of(request.topic.as_ref());
    let real = match ack_topic(&receipt, topic, group) {
        Ok(real) => real,
        Err(problem) => return refused(problem),
    };
    let header = ChangeInvisibleTimeRequestHeader {
        consumer_group: group.to_owned(),
        topic: real,
        queue_id: receipt.extra_info.queue_id,
        extra_info: receipt.text.clone(),
        offset: receipt.extra_info.queue_offset.unwrap_or(0),
        invisible_time: i64::try_from(invisible.as_millis()).unwrap_or(i64::MAX),
    };
    let change =
        RemotingCommand::request_with_header(RequestCode::CHANGE_MESSAGE_INVISIBLETIME, &header);
    let response = match inner.call(caller, change).await {
        Ok(response) => response,
        Err(problem) => return refused(problem),
    };
    if response.response_code() != ResponseCode::SUCCESS {
        return refused(broker_error(&response));
    }
    let Ok(answer) = response.decode_header::<ChangeInvisibleTimeResponseHeader>() else {
        return refused(status(
            Code::InternalServerError,
            "the broker's answer has no header",
        ));
    };
    let renewed = ExtraInfo {
        pop_time: answer.pop_time,
        invisible_time: answer.invisible_time,
        revive_qid: answer.revive_qid,
        ..receipt.extra_info
    };
    ChangeInvisibleDurationResponse {
        status: Some(ok()),
        receipt_handle: format!("{} {}", renewed.build(), receipt.commit_log_offset),
    }
}

/// ForwardMessageToDeadLetterQueue: the message sent back with delay level -1 (straight to
/// the group's `%DLQ%` topic), then acked.
pub(super) async fn forward_to_dlq(
    inner: &Inner,
    caller: &Caller,
    request: &ForwardMessageToDeadLetterQueueRequest,
) -> ForwardMessageToDeadLetterQueueResponse {
    let answer = |status| ForwardMessageToDeadLetterQueueResponse {
        status: Some(status),
    };
    if let Err(problem) = existing_topic(&inner.state, request.topic.as_ref()) {
        return answer(problem);
    }
    let group = name_of(request.group.as_ref());
    if let Some(problem) = group_problem(group) {
        return answer(problem);
    }
    let receipt = match receipt_of(&request.receipt_handle) {
        Ok(receipt) => receipt,
        Err(problem) => return answer(problem),
    };
    let topic = name_of(request.topic.as_ref());
    let header = ConsumerSendMsgBackRequestHeader {
        offset: receipt.commit_log_offset,
        group: group.to_owned(),
        delay_level: -1,
        origin_msg_id: Some(request.message_id.clone()),
        origin_topic: Some(topic.to_owned()),
        unit_mode: Some(false),
        max_reconsume_times: Some(request.max_delivery_attempts),
    };
    let back = RemotingCommand::request_with_header(RequestCode::CONSUMER_SEND_MSG_BACK, &header);
    match inner.call(caller, back).await {
        Ok(response) if response.response_code() == ResponseCode::SUCCESS => {}
        Ok(response) => return answer(broker_error(&response)),
        Err(problem) => return answer(problem),
    }
    answer(ack_one(inner, caller, group, topic, &request.receipt_handle).await)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receipt_of_a_handle_with_its_commit_log_offset_reads_every_field() {
        let receipt = receipt_of("10 1700000000000 30000 3 0 broker-a 2 12 4096").unwrap();
        assert_eq!(receipt.extra_info.queue_id, 2);
        assert_eq!(receipt.extra_info.queue_offset, Some(12));
        assert_eq!(receipt.commit_log_offset, 4096);
        assert!(receipt_of("10 1700000000000 30000 3 0 broker-a 2 12").is_err());
        assert!(receipt_of("garbage").is_err());
    }

    #[test]
    fn start_offsets_reads_each_entry() {
        let starts = start_offsets("0 1 10;1 0 4");
        assert_eq!(starts[&("0".to_owned(), 1)], 10);
        assert_eq!(starts[&("1".to_owned(), 0)], 4);
    }
}
