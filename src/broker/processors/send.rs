//! SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE (`SendMessageProcessor`): Java's
//! checks, the record as Java stores it, and on a SYNC_MASTER the wait for a slave; and
//! the replies of request-reply, SEND_REPLY_MESSAGE(_V2) (`ReplyMessageProcessor`).

use super::Context;
use crate::broker::batch::{decode_batch, merge_properties, BatchDecodeError};
use crate::broker::delay::{property as stored_property, PROPERTY_REAL_TOPIC};
use crate::broker::reply::{
    add_region_fields, error, header_refusal, with_defaults, with_region_fields, Response, FAQ,
};
use crate::broker::retry::retry_or_dlq;
use crate::broker::state::now_ms;
use crate::broker::state::ReplicaStatus;
use crate::broker::state::{
    invalid_topic_remark, NOT_ALLOWED_SEND_TOPICS, PERM_READ, PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX,
};
use crate::broker::timer::{handle_schedule, RecallHandle, PROPERTY_TIMER_OUT_MS};
use crate::broker::transaction::{self, TRANSACTION_COMMIT_TYPE, TRANSACTION_TYPE_MASK};
use crate::config::broker::BrokerRole;
use crate::remoting::header::read_strict;
use crate::remoting::headers::{
    ReplyMessageRequestHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader,
};
use crate::remoting::server::ConnectionInfo;
use crate::remoting::{
    CommandHeader, ExtFields, HeaderError, RemotingCommand, RequestCode, ResponseCode,
};
use crate::store::commit_log::{Appended, PutMessage};
use crate::store::config_files::TopicConfig;
use crate::store::message::PROPERTY_UNIQ_KEY;
use crate::store::message::{java_string_hash, offset_msg_id, rewrite_properties};
use crate::store::segment_writer::StoreError;
use crate::store::timer::TIMER_TOPIC;
use ferromq_client::msg_id::UniqIdGenerator;
use std::net::{IpAddr, SocketAddr};
use std::sync::OnceLock;

/// `MessageConst.PROPERTY_CLUSTER`: the cluster of the broker that stored a message.
const PROPERTY_CLUSTER: &str = "CLUSTER";

/// `MessageConst.PROPERTY_WAIT_STORE_MSG_OK`: the client's flush wish, not stored.
const PROPERTY_WAIT_STORE_MSG_OK: &str = "WAIT";

/// `MessageConst.PROPERTY_MESSAGE_REPLY_TO_CLIENT`: the client id of a reply's requester.
const PROPERTY_REPLY_TO_CLIENT: &str = "REPLY_TO_CLIENT";

/// `MessageConst.PROPERTY_PUSH_REPLY_TIME`: when the broker pushed a reply.
const PROPERTY_PUSH_REPLY_TIME: &str = "PUSH_REPLY_TIME";

/// How long a requester may take to take its reply (`Broker2Client.callClient`).
const PUSH_REPLY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// SEND_MESSAGE, SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and the replies of request-reply.
pub(super) async fn process(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: RemotingCommand,
) -> Response {
    match request.request_code() {
        RequestCode::SEND_BATCH_MESSAGE => send_batch(ctx, connection, &request).await,
        RequestCode::SEND_REPLY_MESSAGE | RequestCode::SEND_REPLY_MESSAGE_V2 => {
            send_reply(ctx, connection, request).await
        }
        _ => send(ctx, connection, request).await,
    }
}

/// Whether a send's properties ask to wait for the store (`isWaitStoreMsgOK`: anything but
/// `WAIT=false`, absent included).
fn waits_for_store(properties: &str) -> bool {
    !crate::store::message::parse_properties(properties.as_bytes())
        .iter()
        .any(|(key, value)| key == PROPERTY_WAIT_STORE_MSG_OK && value == "false")
}

/// SEND_MESSAGE and SEND_MESSAGE_V2; the request is taken so that its body moves into
/// the put without a copy.
async fn send(
    ctx: &Context,
    connection: &ConnectionInfo,
    mut request: RemotingCommand,
) -> Response {
    let request_body = std::mem::take(&mut request.body);
    let request = &request;
    let (header, queue_id) = match pre_send(ctx, connection, request).await {
        Ok(target) => target,
        Err(refusal) => return refusal,
    };
    let store_config = &ctx.state.config.store;
    // As Java stores a send (`SendMessageProcessor`): `CLUSTER` added, `WAIT` dropped but
    // from a delayed message and a transaction's half, whose properties Java writes
    // again with it (its CommitLog's delay, `parseHalfMessageInner`).
    let raw_properties = header.properties.as_deref().unwrap_or_default();
    let transaction_type = header.sys_flag & TRANSACTION_TYPE_MASK;
    let delayed = has_delay_level(raw_properties)
        && (transaction_type == 0 || transaction_type == TRANSACTION_COMMIT_TYPE);
    // A cheap look first: most sends ask for no timer, and the hook parses the properties.
    let timer = raw_properties.contains("TIMER_");
    let half = transaction::is_half(raw_properties.as_bytes());
    let cluster = &ctx.state.config.broker_cluster_name;
    let drop: &[&str] = if delayed || timer || half {
        &[]
    } else {
        &[PROPERTY_WAIT_STORE_MSG_OK]
    };
    // As 5.x: a message the client sent without a UNIQ_KEY gets one (its msgId for
    // lookups, and the `transactionId` of the answer).
    let made_key = match property(raw_properties, PROPERTY_UNIQ_KEY) {
        Some(key) if !key.is_empty() => None,
        _ => Some(broker_uniq_id(ctx.store_host)),
    };
    let set = [
        (PROPERTY_CLUSTER, cluster.as_str()),
        (PROPERTY_UNIQ_KEY, made_key.as_deref().unwrap_or_default()),
    ];
    let set = if made_key.is_some() {
        &set[..]
    } else {
        &set[..1]
    };
    let properties = rewrite_properties(raw_properties.as_bytes(), drop, set);
    if request_body.len() > store_config.max_message_size || properties.len() > 32_767 {
        return with_region_fields(message_illegal(ctx, request));
    }
    let (topic, target_queue) = match retry_or_dlq(
        &ctx.state,
        request,
        &header.topic,
        queue_id,
        header.reconsume_times,
        header.max_reconsume_times,
    )
    .await
    {
        Ok(target) => target,
        Err(refusal) => return with_region_fields(refusal),
    };
    let mut message = PutMessage {
        topic,
        queue_id: target_queue,
        body: request_body,
        properties,
        ..put_message(ctx, connection, &header, queue_id)
    };
    if delayed || timer {
        if let Err(refusal) = handle_schedule(&mut message, store_config, now_ms()) {
            let (code, remark) = refusal.answer(store_config);
            return with_region_fields(error(request, code, remark));
        }
    }
    let recall = recall_handle(ctx, request, &message);
    // After the delay: a half keeps its prepared flag until here, so no delay applies
    // to it (the client drops the level of a transactional message anyway).
    if transaction::is_half(&message.properties) {
        message = transaction::into_half(&ctx.state, message).await;
    }
    match put_counted(ctx, message).await {
        Ok(appended) => {
            let mut response = send_response(
                request,
                offset_msg_id(ctx.store_host, physical_i64(appended.physical_offset)),
                queue_id,
                appended.queue_offset,
            );
            // As 5.x: the message's UNIQ_KEY as `transactionId` (4.9.8 sent none).
            let key = made_key
                .as_deref()
                .or_else(|| property(raw_properties, PROPERTY_UNIQ_KEY));
            if let Some(id) = key {
                let fields = response.ext_fields.get_or_insert_with(ExtFields::new);
                fields.insert("transactionId", id);
            }
            if let Some(handle) = recall {
                let fields = response.ext_fields.get_or_insert_with(ExtFields::new);
                fields.insert("recallHandle", &handle);
            }
            let end = physical_i64(appended.physical_offset + appended.size as u64);
            replicate(ctx, raw_properties, end, &mut response).await;
            Some(response)
        }
        Err(failure) => put_failed(ctx, request, &failure),
    }
}

/// SEND_REPLY_MESSAGE and SEND_REPLY_MESSAGE_V2 (`ReplyMessageProcessor`): a replier's
/// answer to a request. The send's checks as for any message, then the answer is pushed to
/// the requester its `REPLY_TO_CLIENT` names (PUSH_REPLY_MESSAGE_TO_CLIENT, on the
/// connection that producer heartbeats on) and, with `storeReplyMessageEnable`, stored in
/// the reply topic too. SYSTEM_ERROR when the push failed (the answer is stored anyway),
/// else SUCCESS with the stored message's id and offsets (`0` when not stored).
///
/// As Java, the properties are stored as the replier sent them (no `CLUSTER` added);
/// unlike Java, which leaves it 0, the stored `sysFlag` is the sender's, so that a
/// compressed reply body reads back uncompressed.
async fn send_reply(
    ctx: &Context,
    connection: &ConnectionInfo,
    mut request: RemotingCommand,
) -> Response {
    let body = std::mem::take(&mut request.body);
    let request = &request;
    let (header, queue_id) = match pre_send(ctx, connection, request).await {
        Ok(target) => target,
        Err(refusal) => return refusal,
    };
    let properties = header.properties.clone().unwrap_or_default();
    if body.len() > ctx.state.config.store.max_message_size || properties.len() > 32_767 {
        return with_region_fields(message_illegal(ctx, request));
    }
    let pushed = push_reply(ctx, connection, &header, &body).await;
    let mut response = match &pushed {
        Ok(()) => send_response(request, "0".to_owned(), queue_id, 0),
        Err(remark) => {
            let mut failed = send_response(request, String::new(), queue_id, 0);
            failed.code = ResponseCode::SYSTEM_ERROR.0;
            failed.remark = Some(remark.clone());
            failed
        }
    };
    if ctx.state.runtime().store_reply_message_enable {
        let message = PutMessage {
            body,
            properties: properties.into_bytes(),
            ..put_message(ctx, connection, &header, queue_id)
        };
        match put_counted(ctx, message).await {
            Ok(appended) => {
                let msg_id = offset_msg_id(ctx.store_host, physical_i64(appended.physical_offset));
                let code = response.code;
                let remark = response.remark.take();
                response = send_response(request, msg_id, queue_id, appended.queue_offset);
                response.code = code;
                response.remark = remark;
            }
            Err(failure) => tracing::warn!(%failure, "reply message not stored"),
        }
    }
    Some(response)
}

/// `ReplyMessageProcessor.pushReplyMessage`: the reply to its requester; the remark of the
/// failure when it was not taken.
async fn push_reply(
    ctx: &Context,
    connection: &ConnectionInfo,
    header: &SendMessageRequestHeader,
    body: &[u8],
) -> Result<(), String> {
    let raw = header.properties.as_deref().unwrap_or_default();
    let parsed = crate::store::message::parse_properties(raw.as_bytes());
    let Some((_, requester)) = parsed
        .iter()
        .find(|(key, _)| key == PROPERTY_REPLY_TO_CLIENT)
    else {
        return Err(format!(
            "reply message properties[{PROPERTY_REPLY_TO_CLIENT}] is null"
        ));
    };
    let Some(outbound) = ctx.state.producer_by_client_id(requester) else {
        return Err(format!(
            "push reply message fail, channel of <{requester}> not found."
        ));
    };
    let now = crate::broker::state::now_ms().to_string();
    let properties = rewrite_properties(raw.as_bytes(), &[], &[(PROPERTY_PUSH_REPLY_TIME, &now)]);
    let push = ReplyMessageRequestHeader {
        producer_group: header.producer_group.clone(),
        topic: header.topic.clone(),
        default_topic: header.default_topic.clone(),
        default_topic_queue_nums: header.default_topic_queue_nums,
        queue_id: header.queue_id,
        sys_flag: header.sys_flag,
        born_timestamp: header.born_timestamp,
        flag: header.flag,
        properties: Some(String::from_utf8_lossy(&properties).into_owned()),
        reconsume_times: header.reconsume_times,
        unit_mode: header.unit_mode,
        born_host: connection.peer.to_string(),
        store_host: ctx.store_host.to_string(),
        store_timestamp: crate::broker::state::now_ms(),
    };
    let mut call =
        RemotingCommand::request_with_header(RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT, &push);
    call.body = body.to_vec();
    let failed = format!("push reply message to {requester}fail.");
    match outbound.invoke(call, PUSH_REPLY_TIMEOUT).await {
        Ok(answer) if answer.code == ResponseCode::SUCCESS.0 => Ok(()),
        Ok(answer) => {
            let remark = answer.remark.unwrap_or_default();
            tracing::warn!(requester, remark, "push reply message refused");
            Err(failed)
        }
        Err(e) => {
            tracing::warn!(requester, error = %e, "push reply message failed");
            Err(failed)
        }
    }
}

/// SYNC_MASTER (4.9's `submitReplicaRequest`): a put whose `WAIT` is not `false` is
/// answered once a slave acknowledged its end; SLAVE_NOT_AVAILABLE without a slave close
/// enough, FLUSH_SLAVE_TIMEOUT after `slaveTimeout`. The message is stored either way.
async fn replicate(ctx: &Context, properties: &str, end: i64, response: &mut RemotingCommand) {
    let config = &ctx.state.config;
    if ctx.state.role.get() != BrokerRole::SyncMaster || !waits_for_store(properties) {
        return;
    }
    let status = ctx
        .replicas
        .replicated(
            end,
            config.ha.slave_fall_behind_max,
            config.ha.slave_timeout,
        )
        .await;
    response.code = match status {
        ReplicaStatus::Acked => return,
        ReplicaStatus::NoSlave => ResponseCode::SLAVE_NOT_AVAILABLE.0,
        ReplicaStatus::TimedOut => ResponseCode::FLUSH_SLAVE_TIMEOUT.0,
    };
}

/// SEND_BATCH_MESSAGE (`asyncSendBatchMessage`): the header's checks as for one message,
/// then every message of the body stored in the queue, in order.
///
/// As in Java, the batch is one put: stored whole or not at all, in one CommitLog
/// segment, with consecutive queue offsets and one store time.
async fn send_batch(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    let (header, queue_id) = match pre_send(ctx, connection, request).await {
        Ok(target) => target,
        Err(refusal) => return refusal,
    };
    if request.body.len() > ctx.state.config.store.max_message_size {
        return with_region_fields(message_illegal(ctx, request));
    }
    if header.sys_flag & TRANSACTION_TYPE_MASK != 0 {
        return with_region_fields(message_illegal(ctx, request));
    }
    let entries = match decode_batch(&request.body) {
        Ok(entries) => entries,
        // Java hits a NullPointerException on an empty batch (SYSTEM_ERROR, which
        // producers retry); one that holds nothing can never be stored, so it is
        // MESSAGE_ILLEGAL, which they do not retry.
        Err(BatchDecodeError::Empty) => return message_illegal(ctx, request),
        // Java's remark is the exception its decoder hit, with no region fields.
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let header_properties = header.properties.as_deref().unwrap_or_default();
    if has_delay_level(header_properties) {
        return with_region_fields(message_illegal(ctx, request));
    }
    // The batch's own properties as Java keeps them (`WAIT` stays), `CLUSTER` added.
    let cluster = &ctx.state.config.broker_cluster_name;
    let batch_properties = rewrite_properties(
        header_properties.as_bytes(),
        &[],
        &[(PROPERTY_CLUSTER, cluster)],
    );
    let template = put_message(ctx, connection, &header, queue_id);
    let mut puts = Vec::with_capacity(entries.len());
    for entry in entries {
        let properties = merge_properties(&entry.properties, &batch_properties);
        if properties.len() > 32_767 {
            return with_region_fields(message_illegal(ctx, request));
        }
        puts.push(PutMessage {
            flag: entry.flag,
            body: entry.body,
            properties,
            ..template.clone()
        });
    }
    let started = std::time::Instant::now();
    let stored = ctx.puts.put_batch(puts).await;
    record_put(ctx, &template.topic, started, stored.as_deref());
    let stored = match stored {
        Ok(stored) => stored,
        Err(failure) => return put_failed(ctx, request, &failure),
    };
    let first_queue_offset = stored.first().map(|record| record.queue_offset);
    let ids: Vec<String> = stored
        .iter()
        .map(|record| offset_msg_id(ctx.store_host, physical_i64(record.physical_offset)))
        .collect();
    let mut response = send_response(
        request,
        ids.join(","),
        queue_id,
        first_queue_offset.unwrap_or(0),
    );
    if let Some(last) = stored.last() {
        let end = physical_i64(last.physical_offset + last.size as u64);
        replicate(ctx, header_properties, end, &mut response).await;
    }
    Some(response)
}

/// `AbstractSendMessageProcessor.msgCheck` and the queue choice, shared by the single and
/// the batch send: the V1 view of the header and the queue to store in, or the refusal.
async fn pre_send(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Result<(SendMessageRequestHeader, i32), Response> {
    let header = match decode_send_header(request) {
        Ok(header) => header,
        // Java checks the topic before it reads the fields it found null.
        Err(HeaderError::MissingField { .. }) if send_topic_missing(request) => {
            let remark = "The specified topic is blank.";
            let refusal = error(request, ResponseCode::SYSTEM_ERROR, remark);
            return Err(with_region_fields(refusal));
        }
        Err(e) => return Err(header_refusal(request, &e)),
    };
    check_send(ctx, connection, request, header)
        .await
        .map_err(with_region_fields)
}

/// The checks of [`pre_send`] once the header decoded.
async fn check_send(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
    header: SendMessageRequestHeader,
) -> Result<(SendMessageRequestHeader, i32), Response> {
    let config = ctx.state.runtime();
    if config.broker_permission & PERM_WRITE == 0 {
        let remark = format!(
            "the broker[{}] sending message is forbidden",
            config.broker_ip1
        );
        return Err(error(request, ResponseCode::NO_PERMISSION, remark));
    }
    // INVALID_PARAMETER for a topic that fails a check, as 5.x (4.9.8: SYSTEM_ERROR); a
    // missing topic stays SYSTEM_ERROR (both fail on the null).
    if let Some(problem) = invalid_topic_remark(&header.topic) {
        let code = if send_topic_missing(request) {
            ResponseCode::SYSTEM_ERROR
        } else {
            ResponseCode::INVALID_PARAMETER
        };
        return Err(error(request, code, problem));
    }
    if NOT_ALLOWED_SEND_TOPICS.contains(&header.topic.as_str()) {
        let remark = format!("Sending message to topic[{}] is forbidden.", header.topic);
        return Err(error(request, ResponseCode::NO_PERMISSION, remark));
    }
    let topic_config = ctx
        .state
        .topic_or_create(
            &header.topic,
            &header.default_topic,
            header.default_topic_queue_nums,
        )
        .await;
    let topic_config = match topic_config {
        Some(topic) => topic,
        None if header.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) => {
            ctx.state
                .ensure_topic(&header.topic, 1, PERM_READ | PERM_WRITE)
                .await
        }
        None => {
            let remark = format!(
                "topic[{}] not exist, apply first please!{FAQ}",
                header.topic
            );
            return Err(error(request, ResponseCode::TOPIC_NOT_EXIST, remark));
        }
    };
    let queue_id = if header.queue_id < 0 {
        queue_for(request.opaque, topic_config.write_queue_nums)
    } else {
        header.queue_id
    };
    let valid = topic_config
        .write_queue_nums
        .max(topic_config.read_queue_nums);
    if queue_id >= valid {
        let remark = format!(
            "request queueId[{queue_id}] is illegal, {} Producer: {}",
            describe_topic(&topic_config),
            connection.peer
        );
        return Err(error(request, ResponseCode::INVALID_PARAMETER, remark));
    }
    Ok((header, queue_id))
}

/// The fields of a put that come from the header and the connection; body and
/// properties empty.
fn put_message(
    ctx: &Context,
    connection: &ConnectionInfo,
    header: &SendMessageRequestHeader,
    queue_id: i32,
) -> PutMessage {
    PutMessage {
        topic: header.topic.clone(),
        queue_id,
        flag: header.flag,
        sys_flag: header.sys_flag,
        born_timestamp: header.born_timestamp,
        born_host: connection.peer,
        store_host: ctx.store_host,
        reconsume_times: header.reconsume_times.unwrap_or(0),
        prepared_transaction_offset: 0,
        body: Vec::new(),
        properties: Vec::new(),
    }
}

fn send_response(
    request: &RemotingCommand,
    msg_id: String,
    queue_id: i32,
    queue_offset: i64,
) -> RemotingCommand {
    let mut response = RemotingCommand::success_to(request);
    response.set_header(&SendMessageResponseHeader {
        msg_id,
        queue_id,
        queue_offset,
        transaction_id: None,
        batch_uniq_id: None,
        recall_handle: None,
    });
    add_region_fields(&mut response);
    response
}

/// Stores one message through this shard's coalescer and counts it ([`record_put`]).
async fn put_counted(ctx: &Context, message: PutMessage) -> Result<Appended, StoreError> {
    let topic = message.topic.clone();
    let started = std::time::Instant::now();
    let stored = ctx.puts.put(message).await;
    record_put(
        ctx,
        &topic,
        started,
        stored.as_ref().map(std::slice::from_ref),
    );
    stored
}

/// Counts a put to `topic` (as stored: a delayed message's is the schedule topic) in this
/// shard's statistics: its records and bytes and how long the store took, or its failure.
fn record_put<E>(
    ctx: &Context,
    topic: &str,
    started: std::time::Instant,
    stored: Result<&[Appended], E>,
) {
    let stats = &ctx.state.stats;
    match stored {
        Ok(records) => {
            let bytes = records.iter().map(|r| r.size as u64).sum();
            let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            stats.record_put(ctx.shard, records.len() as u64, bytes, elapsed);
            stats
                .items
                .record_put(ctx.shard, topic, records.len() as u64, bytes);
        }
        Err(_) => stats.record_put_failed(ctx.shard),
    }
}

/// The recall handle of a parked timer message (5.x's `attachRecallHandle`): none for a
/// batch, a send-back or a retry topic's message.
fn recall_handle(ctx: &Context, request: &RemotingCommand, message: &PutMessage) -> Option<String> {
    if message.topic != TIMER_TOPIC || request.request_code() == RequestCode::SEND_BATCH_MESSAGE {
        return None;
    }
    let properties = crate::store::message::parse_properties(&message.properties);
    let out_ms: i64 = stored_property(&properties, PROPERTY_TIMER_OUT_MS)?
        .parse()
        .ok()?;
    let real_topic = stored_property(&properties, PROPERTY_REAL_TOPIC)?;
    if real_topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
        return None;
    }
    let handle = RecallHandle {
        topic: real_topic.to_owned(),
        broker_name: ctx.state.config.broker_name.clone(),
        // One past the slot time, for the floor of its rounding (Java's comment).
        timestamp: (out_ms + 1).to_string(),
        message_id: stored_property(&properties, PROPERTY_UNIQ_KEY)?.to_owned(),
    };
    Some(handle.build())
}

/// MESSAGE_ILLEGAL with Java's remark (`handlePutMessageResult`).
fn message_illegal(ctx: &Context, request: &RemotingCommand) -> Response {
    let remark = format!(
        "the message is illegal, maybe msg body or properties length not matched. msg body \
         length limit {}B, msg properties length limit 32KB.",
        ctx.state.config.store.max_message_size
    );
    error(request, ResponseCode::MESSAGE_ILLEGAL, remark)
}

fn put_failed(ctx: &Context, request: &RemotingCommand, failure: &StoreError) -> Response {
    with_region_fields(put_refusal(ctx, request, failure))
}

fn put_refusal(ctx: &Context, request: &RemotingCommand, failure: &StoreError) -> Response {
    match failure {
        StoreError::TooLarge { .. } | StoreError::Illegal(_) => message_illegal(ctx, request),
        StoreError::DiskFull { .. }
        | StoreError::NotWritable
        | StoreError::ShuttingDown
        | StoreError::Diverged(_)
        | StoreError::Slave
        | StoreError::Io(_) => {
            let used = f64::from(ctx.store.shared().disk_used_percent()) / 100.0;
            let remark = format!(
                "service not available now. It may be caused by one of the following \
                 reasons: the broker's disk is full [CL: {used:5.2} CQ: {used:5.2} INDEX: \
                 {used:5.2}], messages are put to the slave, message store has been shut \
                 down, etc."
            );
            error(request, ResponseCode::SERVICE_NOT_AVAILABLE, remark)
        }
        StoreError::Layout(text) => error(request, ResponseCode::SYSTEM_ERROR, text.clone()),
    }
}

/// Whether a send names no topic.
fn send_topic_missing(request: &RemotingCommand) -> bool {
    let key = if has_v1_header(request) { "topic" } else { "b" };
    request.ext(key).is_none()
}

/// The V1 view of a send's header, decoded as Java decodes it: SEND_MESSAGE_V2 and
/// SEND_BATCH_MESSAGE strictly (`FastCodesHeader`: every number present must parse); a
/// missing producer group or default topic as empty (Java goes on with the null, which it
/// needs only to create a topic); a missing topic as blank, which the topic check refuses.
fn decode_send_header(request: &RemotingCommand) -> Result<SendMessageRequestHeader, HeaderError> {
    if has_v1_header(request) {
        let defaults = [("producerGroup", ""), ("topic", ""), ("defaultTopic", "")];
        SendMessageRequestHeader::read_from(&with_defaults(request, &defaults))
    } else {
        let defaults = [("a", ""), ("b", ""), ("c", "")];
        read_strict::<SendMessageRequestHeaderV2>(&with_defaults(request, &defaults)).map(v1_header)
    }
}

/// Whether a send carries the long-named header (SEND_MESSAGE, SEND_REPLY_MESSAGE) rather
/// than the one-letter one.
fn has_v1_header(request: &RemotingCommand) -> bool {
    matches!(
        request.request_code(),
        RequestCode::SEND_MESSAGE | RequestCode::SEND_REPLY_MESSAGE
    )
}

/// A CommitLog offset as Java's `long` (offsets stay far below `i64::MAX`).
fn physical_i64(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}

/// Whether batch properties ask for a delay level (`DELAY` > 0), which a batch may not.
fn has_delay_level(properties: &str) -> bool {
    properties
        .split('\u{2}')
        .filter_map(|pair| pair.split_once('\u{1}'))
        .any(|(name, value)| name == "DELAY" && value.trim().parse::<i32>().is_ok_and(|l| l > 0))
}

/// A new UNIQ_KEY made by this broker (5.x's `MessageClientIDSetter.createUniqID` in the
/// broker's process): its store host's IPv4 address (loopback for an IPv6 one), the process
/// id and a fixed hash in place of Java's class loader's.
fn broker_uniq_id(store_host: SocketAddr) -> String {
    static GENERATOR: OnceLock<UniqIdGenerator> = OnceLock::new();
    GENERATOR
        .get_or_init(|| {
            let ip = match store_host.ip() {
                IpAddr::V4(ip) => ip.octets(),
                IpAddr::V6(_) => [127, 0, 0, 1],
            };
            let loader_hash = java_string_hash("ferromq.broker");
            UniqIdGenerator::new(ip, std::process::id(), loader_hash)
        })
        .create_at(crate::broker::state::now_ms())
}

/// The value of property `name` in a message's properties text.
fn property<'a>(properties: &'a str, name: &str) -> Option<&'a str> {
    properties
        .split('\u{2}')
        .filter_map(|pair| pair.split_once('\u{1}'))
        .find_map(|(key, value)| (key == name).then_some(value))
}

/// The V1 header of a V2 one (`SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1`).
fn v1_header(v2: SendMessageRequestHeaderV2) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: v2.a,
        topic: v2.b,
        default_topic: v2.c,
        default_topic_queue_nums: v2.d,
        queue_id: v2.e,
        sys_flag: v2.f,
        born_timestamp: v2.g,
        flag: v2.h,
        properties: v2.i,
        reconsume_times: v2.j,
        unit_mode: v2.k,
        max_reconsume_times: v2.l,
        batch: v2.m,
        broker_name: None,
    }
}

fn describe_topic(topic: &TopicConfig) -> String {
    format!(
        "TopicConfig [topicName={}, readQueueNums={}, writeQueueNums={}, perm={}, \
         topicFilterType={}, topicSysFlag={}, order={}, attributes={{{}}}]",
        topic.topic_name,
        topic.read_queue_nums,
        topic.write_queue_nums,
        permission_text(topic.perm),
        topic.topic_filter_type,
        topic.topic_sys_flag,
        topic.order,
        // As Java's map text (5.x's TopicConfig has the attributes; 4.9.8's had none).
        topic
            .attributes
            .iter()
            .map(|(key, value)| format!("{key}={value}"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn permission_text(perm: i32) -> String {
    let bit = |mask: i32, c: char| if perm & mask != 0 { c } else { '-' };
    format!(
        "{}{}{}",
        bit(PERM_READ, 'R'),
        bit(PERM_WRITE, 'W'),
        bit(1, 'X')
    )
}

/// A queue for a send that named none: spread by request id (Java picks at random).
fn queue_for(opaque: i32, queues: i32) -> i32 {
    opaque.rem_euclid(queues.max(1))
}
