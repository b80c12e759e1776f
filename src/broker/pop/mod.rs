//! POP consumption below the processors and the revive service (Java 5.x's
//! `PopMessageProcessor.buildCkMsg`, `AckMessageProcessor.appendAck`, `KeyBuilder`,
//! `PopAckConstants`): the revive topic `rmq_sys_REVIVE_LOG_<cluster>`, the checkpoint and
//! ack messages written to it as timer messages, and the POP retry topics.
//!
//! A pop writes one checkpoint (`ck`) per queue it took messages from, delivered by the
//! timer at `popTime + invisibleTime - 1 s`; an ack writes an `ack` (or `bAck`) delivered at
//! `popTime + invisibleTime`, so that in a revive queue a checkpoint always comes before its
//! acks. The revive service (`services::revive`) pairs them once both are due.

pub mod format;

use super::delay::encode_properties;
use super::reply::FAQ;
use super::state::{now_ms, BrokerState, PERM_READ, PERM_WRITE};
use super::timer::{handle_schedule, PROPERTY_TIMER_DELIVER_MS};
use crate::remoting::ResponseCode;
use crate::store::commit_log::PutMessage;
use crate::store::config_files::TopicConfig;
use crate::store::message::{PROPERTY_TAGS, PROPERTY_UNIQ_KEY};
use crate::store::message_store::StoreHandle;
use format::{AckMsg, PopCheckPoint};
use std::net::SocketAddr;

/// `PopAckConstants.REVIVE_GROUP`: the group whose offsets say how far each revive queue
/// is consumed.
pub const REVIVE_GROUP: &str = "CID_RMQ_SYS_REVIVE_GROUP";
/// `PopAckConstants.CK_TAG`.
pub const CK_TAG: &str = "ck";
/// `PopAckConstants.ACK_TAG`.
pub const ACK_TAG: &str = "ack";
/// `PopAckConstants.BATCH_ACK_TAG`.
pub const BATCH_ACK_TAG: &str = "bAck";
/// `PopAckConstants.ackTimeInterval`: a checkpoint is due this long before its acks.
pub const ACK_TIME_INTERVAL_MS: i64 = 1000;
/// `KeyBuilder.POP_ORDER_REVIVE_QUEUE`: the revive queue id of an ordered pop's handle.
pub const POP_ORDER_REVIVE_QUEUE: i32 = 999;
/// `MessageConst.PROPERTY_POP_CK`: a popped retry message's handle.
pub const PROPERTY_POP_CK: &str = "POP_CK";
/// `MessageConst.PROPERTY_FIRST_POP_TIME`.
pub const PROPERTY_FIRST_POP_TIME: &str = "1ST_POP_TIME";
/// `PopAckConstants.retryQueueNum`: queues of a POP retry topic.
pub const RETRY_QUEUE_NUM: i32 = 1;
/// `ConsumeInitMode.MIN`: a group new to a queue starts at its first message.
pub const INIT_MODE_MIN: i32 = 1;
/// Most messages one pop may ask for (`maxMsgNums`).
pub const POP_MSG_NUMS_MAX: i32 = 32;

/// `PopAckConstants.buildClusterReviveTopic`.
#[must_use]
pub fn revive_topic(cluster: &str) -> String {
    format!("rmq_sys_REVIVE_LOG_{cluster}")
}

/// The revive topic of this broker, made with `reviveQueueNum` queues if missing.
pub async fn ensure_revive_topic(state: &BrokerState) -> String {
    let config = state.runtime();
    let topic = revive_topic(&config.broker_cluster_name);
    let queues = config.pop.revive_queue_num;
    state
        .ensure_topic(&topic, queues, PERM_READ | PERM_WRITE)
        .await;
    topic
}

/// The retry topic a group's pops of `topic` read and its revives write (V1 unless
/// `enableRetryTopicV2`).
#[must_use]
pub fn retry_topic(state: &BrokerState, topic: &str, group: &str) -> String {
    if state.runtime().pop.enable_retry_topic_v2 {
        format::retry_topic_v2(topic, group)
    } else {
        format::retry_topic_v1(topic, group)
    }
}

/// Makes a POP retry topic if missing, one queue, and starts `group` at its offset 0
/// (`addRetryTopicIfNotExist` + `initPopRetryOffset`).
pub async fn ensure_retry_topic(state: &BrokerState, topic: &str, group: &str) {
    if state.topic(topic).is_some() {
        return;
    }
    state
        .ensure_topic(topic, RETRY_QUEUE_NUM, PERM_READ | PERM_WRITE)
        .await;
    if state.committed_offset(group, topic, 0).is_none() {
        state.commit_offset(group, topic, 0, 0);
    }
}

/// The checks POP_MESSAGE, NOTIFICATION and POLLING_INFO make in Java's order, from the
/// topic on: it exists and is readable, the queue id is below its read queues, the group
/// exists (or is made) and may consume. The topic's config, or the refusal.
///
/// # Errors
/// The response code and remark of the first check that fails.
pub async fn check_pop_target(
    state: &BrokerState,
    topic: &str,
    queue_id: i32,
    group: &str,
    peer: SocketAddr,
) -> Result<TopicConfig, (ResponseCode, String)> {
    let Some(config) = state.topic(topic) else {
        let remark = format!("topic[{topic}] not exist, apply first please! {FAQ}");
        return Err((ResponseCode::TOPIC_NOT_EXIST, remark));
    };
    if config.perm & PERM_READ == 0 {
        let remark = format!("the topic[{topic}] peeking message is forbidden");
        return Err((ResponseCode::NO_PERMISSION, remark));
    }
    if queue_id >= config.read_queue_nums {
        let remark = format!(
            "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{}] \
             consumer:[/{peer}]",
            config.read_queue_nums
        );
        return Err((ResponseCode::INVALID_PARAMETER, remark));
    }
    let Some(group_config) = state.group_or_create(group).await else {
        let remark = format!("subscription group [{group}] does not exist, {FAQ}");
        return Err((ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, remark));
    };
    if !group_config.consume_enable {
        let remark = format!("subscription group no permission, {group}");
        return Err((ResponseCode::NO_PERMISSION, remark));
    }
    Ok(config)
}

/// Where a group's pops of a queue start (`getPopOffset`): the committed offset, else the
/// first message for `initMode` MIN and retry topics, for MAX the last one, or the first
/// while it is still the queue's first (`initPopOffsetByCheckMsgInMem`). Whether it is the
/// committed one.
#[must_use]
pub fn pop_offset(
    state: &BrokerState,
    reader: &crate::store::reader::StoreReader,
    (topic, queue_id): (&str, i32),
    group: &str,
    init_mode: i32,
) -> (i64, bool) {
    if let Some(offset) = state.committed_offset(group, topic, queue_id) {
        if offset >= 0 {
            return (offset, true);
        }
    }
    let min = reader.min_offset_in_queue(topic, queue_id);
    let offset = if init_mode == INIT_MODE_MIN
        || topic.starts_with(super::state::RETRY_GROUP_TOPIC_PREFIX)
        || min <= 0
    {
        min
    } else {
        (reader.max_offset_in_queue(topic, queue_id) - 1).max(0)
    };
    (offset, false)
}

/// Each queue a pop of `topic` (`queue_id`, -1 for all) by `group` may read, with its max
/// offset now: the topic's and its retry topic's (queue 0 before the retry topic exists:
/// the first revive makes it while a pop may wait).
#[must_use]
pub fn pop_queue_ends(
    state: &BrokerState,
    reader: &crate::store::reader::StoreReader,
    topic: &str,
    queue_id: i32,
    group: &str,
) -> Vec<(String, i32, i64)> {
    let mut ends = Vec::new();
    let retry = retry_topic(state, topic, group);
    let mut add = |topic: &str, queues: std::ops::Range<i32>| {
        for queue in queues {
            let end = reader.max_offset_in_queue(topic, queue);
            ends.push((topic.to_owned(), queue, end));
        }
    };
    if let Some(config) = state.topic(topic) {
        if queue_id < 0 {
            add(topic, 0..config.read_queue_nums);
        } else {
            add(topic, queue_id..queue_id + 1);
        }
    }
    let retry_queues = state
        .topic(&retry)
        .map_or(RETRY_QUEUE_NUM, |config| config.read_queue_nums);
    add(&retry, 0..retry_queues);
    ends
}

/// The broker's address as stored messages name it.
#[must_use]
pub fn store_host(state: &BrokerState) -> SocketAddr {
    SocketAddr::new(state.config.broker_ip1, state.listen_port())
}

/// A message of the revive topic: `body` tagged `tag` in revive queue `queue_id`, delivered
/// at `deliver_ms`, with `uniq_key` as its `UNIQ_KEY` (Java's unique ids of cks and acks).
fn revive_message(
    state: &BrokerState,
    tag: &str,
    body: String,
    queue_id: i32,
    deliver_ms: i64,
    uniq_key: String,
) -> PutMessage {
    let host = store_host(state);
    let properties = [
        (PROPERTY_TAGS.to_owned(), tag.to_owned()),
        (PROPERTY_UNIQ_KEY.to_owned(), uniq_key),
        (PROPERTY_TIMER_DELIVER_MS.to_owned(), deliver_ms.to_string()),
    ];
    PutMessage {
        topic: revive_topic(&state.config.broker_cluster_name),
        queue_id,
        flag: 0,
        sys_flag: 0,
        born_timestamp: now_ms(),
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: body.into_bytes(),
        properties: encode_properties(&properties),
    }
}

/// The checkpoint message of `ck` (`buildCkMsg`): due one `ackTimeInterval` before its
/// revive time.
#[must_use]
pub fn ck_message(state: &BrokerState, ck: &PopCheckPoint, revive_qid: i32) -> PutMessage {
    let uniq = format!(
        "{}@{}@{}@{}@{}@{}@{CK_TAG}",
        ck.topic,
        ck.queue_id,
        ck.start_offset,
        ck.cid,
        ck.pop_time,
        ck.broker_name.as_deref().unwrap_or("")
    );
    let deliver_ms = ck.revive_time().wrapping_sub(ACK_TIME_INTERVAL_MS);
    revive_message(state, CK_TAG, ck.to_json(), revive_qid, deliver_ms, uniq)
}

/// The ack message of `ack` (`appendAck`): due at `pop_time + invisible_time`; a batch
/// (with `aol`) is tagged `bAck`.
#[must_use]
pub fn ack_message(
    state: &BrokerState,
    ack: &AckMsg,
    revive_qid: i32,
    invisible_time: i64,
) -> PutMessage {
    let broker = ack.broker_name.as_deref().unwrap_or("");
    let (tag, offsets) = match &ack.ack_offset_list {
        Some(list) => {
            let list: Vec<String> = list.iter().map(i64::to_string).collect();
            (BATCH_ACK_TAG, format!("[{}]", list.join(", ")))
        }
        None => (ACK_TAG, ack.ack_offset.to_string()),
    };
    let uniq = match &ack.ack_offset_list {
        Some(_) => format!(
            "{}@{}@{offsets}@{}@{}@{tag}",
            ack.topic, ack.queue_id, ack.consumer_group, ack.pop_time
        ),
        None => format!(
            "{}@{}@{offsets}@{}@{}@{broker}@{tag}",
            ack.topic, ack.queue_id, ack.consumer_group, ack.pop_time
        ),
    };
    let deliver_ms = ack.pop_time.wrapping_add(invisible_time);
    revive_message(state, tag, ack.to_json(), revive_qid, deliver_ms, uniq)
}

/// Puts a checkpoint or ack message through the timer's put hook; why not, if it is not
/// stored.
///
/// # Errors
/// The timer's refusal or the store's.
pub async fn put_revive(
    state: &BrokerState,
    store: &StoreHandle,
    mut message: PutMessage,
) -> Result<(), String> {
    handle_schedule(&mut message, &state.config.store, now_ms())
        .map_err(|refusal| format!("timer refused: {refusal:?}"))?;
    store
        .put(message)
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Java's `random.nextInt(100)` for the retry topic's share of pops: a cheap per-thread
/// generator (xorshift), seeded from the clock.
#[must_use]
pub fn random_percent() -> i32 {
    thread_local! {
        static SEED: std::cell::Cell<u64> = std::cell::Cell::new(
            u64::try_from(now_ms()).unwrap_or(1) | 1
        );
    }
    SEED.with(|seed| {
        let mut x = seed.get();
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        seed.set(x);
        i32::try_from(x % 100).unwrap_or(0)
    })
}
