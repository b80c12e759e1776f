//! Transactional messages on the broker (`TransactionalMessageBridge`,
//! `TransactionalMessageServiceImpl`, `EndTransactionProcessor` and
//! `TransactionalMessageCheckService` in Java).
//!
//! A send whose `TRAN_MSG` property is `true` is stored as a *half* message: topic
//! `RMQ_SYS_TRANS_HALF_TOPIC`, queue 0, the real topic and queue in `REAL_TOPIC` /
//! `REAL_QID`, its transaction bits cleared so that it enters the half queue (which no
//! consumer subscribes to). END_TRANSACTION finds the half by its CommitLog offset; a commit
//! stores it again under its real topic (commit type, `preparedTransactionOffset` = the
//! half's offset), and commit and rollback both write an *op* message to
//! `RMQ_SYS_TRANS_OP_HALF_TOPIC` queue 0, tag `d`, body = the half's queue offset in decimal.
//!
//! The check runs on the control shard every `transactionCheckInterval`: it walks the half
//! queue from the progress offset of group `CID_RMQ_SYS_TRANS`, skips halves an op message
//! ended, and for each half older than `transactionTimeOut` stores a copy with
//! `TRANSACTION_CHECK_TIMES` incremented and sends CHECK_TRANSACTION_STATE (oneway, the copy
//! as body) to a live producer of its `PGROUP`; a half already checked `transactionCheckMax`
//! times goes to `TRANS_CHECK_MAX_TIME_TOPIC` instead (4.9.8's `resolveDiscardMsg`). Both
//! progress offsets are consumer offsets, persisted with the others, so a restart resumes the
//! walk; a stale offset after a crash only makes the walk read some halves and ops again.

use super::admin::{error, Response};
use super::state::{now_ms, BrokerState, PERM_READ, PERM_WRITE};
use crate::remoting::headers::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader};
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use crate::store::commit_log::PutMessage;
use crate::store::message::{
    decode_record, encode_record, offset_msg_id, parse_properties, properties_to_string,
    rewrite_properties, MessageRecord, MessageVersion, Record, TRANSACTION_TYPE_MASK,
};
use crate::store::message_store::StoreHandle;
use crate::store::reader::{PullFilter, StoreReader};
use ferromq_shards::Shutdown;
use ferromq_uring::IoError;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Where half messages wait (`TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC`).
pub const HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Where op messages mark halves done (`TopicValidator.RMQ_SYS_TRANS_OP_HALF_TOPIC`).
pub const OP_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Where halves checked too often go (`TopicValidator.TRANS_CHECK_MAX_TIME_TOPIC`).
pub const CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// The group whose offsets record the check's progress (`MixAll.CID_SYS_RMQ_TRANS`).
pub const TRANS_GROUP: &str = "CID_RMQ_SYS_TRANS";
/// Tag of an op message that ends a half (`TransactionalMessageUtil.REMOVETAG`).
pub const REMOVE_TAG: &str = "d";
/// `MessageSysFlag.TRANSACTION_NOT_TYPE`.
pub const TRANSACTION_NOT_TYPE: i32 = 0;
/// `MessageSysFlag.TRANSACTION_PREPARED_TYPE`.
pub const TRANSACTION_PREPARED_TYPE: i32 = 0x1 << 2;
/// `MessageSysFlag.TRANSACTION_COMMIT_TYPE`.
pub const TRANSACTION_COMMIT_TYPE: i32 = 0x2 << 2;
/// `MessageSysFlag.TRANSACTION_ROLLBACK_TYPE`.
pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0x3 << 2;

const TRAN_MSG: &str = "TRAN_MSG";
const PGROUP: &str = "PGROUP";
const REAL_TOPIC: &str = "REAL_TOPIC";
const REAL_QID: &str = "REAL_QID";
const UNIQ_KEY: &str = "UNIQ_KEY";
const TAGS: &str = "TAGS";
const CHECK_TIMES: &str = "TRANSACTION_CHECK_TIMES";
const CHECK_IMMUNITY: &str = "CHECK_IMMUNITY_TIME_IN_SECONDS";
const PREPARED_QUEUE_OFFSET: &str = "TRAN_PREPARED_QUEUE_OFFSET";
/// Longest properties string a record holds.
const PROPERTIES_MAX: usize = 32_767;
/// Halves one check round looks at, at most.
const HALVES_PER_ROUND_MAX: usize = 10_000;
/// Op messages one check round reads, at most.
const OPS_PER_ROUND_MAX: usize = 100_000;
/// Records one read of the half or op queue returns, at most.
const READ_BATCH: usize = 32;

/// Java's remark when END_TRANSACTION names no half message.
const NOT_FOUND: &str = "Find prepared transaction message failed";

/// Whether stored properties mark a transaction half (`TRAN_MSG` = `true`, as Java's
/// `Boolean.parseBoolean`).
#[must_use]
pub fn is_half(properties: &[u8]) -> bool {
    parse_properties(properties)
        .iter()
        .any(|(name, value)| name == TRAN_MSG && value.eq_ignore_ascii_case("true"))
}

/// Turns a send into its half message (`parseHalfMessageInner`): real topic and queue into
/// properties, the half topic's queue 0, transaction bits cleared.
pub async fn into_half(state: &BrokerState, mut message: PutMessage) -> PutMessage {
    state
        .ensure_topic(HALF_TOPIC, 1, PERM_READ | PERM_WRITE)
        .await;
    // Replacing, as Java's `putProperty`: a REAL_TOPIC the client sent along must not
    // decide where the commit goes.
    let queue = message.queue_id.to_string();
    message.properties = rewrite_properties(
        &message.properties,
        &[],
        &[(REAL_TOPIC, &message.topic), (REAL_QID, &queue)],
    );
    message.topic = HALF_TOPIC.to_owned();
    message.queue_id = 0;
    message.sys_flag &= !TRANSACTION_TYPE_MASK;
    message
}

/// A stored record, owned.
struct Stored {
    bytes: Vec<u8>,
    properties: Vec<(String, String)>,
}

impl Stored {
    fn decode(bytes: Vec<u8>) -> Option<Stored> {
        let properties = match decode_record(&bytes, false) {
            Ok(Record::Message { record, .. }) => parse_properties(record.properties),
            _ => return None,
        };
        Some(Stored { bytes, properties })
    }

    fn record(&self) -> Option<MessageRecord<'_>> {
        match decode_record(&self.bytes, false) {
            Ok(Record::Message { record, .. }) => Some(record),
            _ => None,
        }
    }

    fn property(&self, name: &str) -> Option<&str> {
        self.properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The queue a half message was sent to (`REAL_QID`).
    fn real_queue(&self) -> i32 {
        self.property(REAL_QID)
            .and_then(|q| q.parse().ok())
            .unwrap_or(0)
    }

    /// The properties without `drop`, with `set` replacing or adding entries.
    fn properties_with(&self, drop: &[&str], set: &[(&str, &str)]) -> Vec<u8> {
        let kept = self
            .properties
            .iter()
            .filter(|(k, _)| !drop.contains(&k.as_str()) && !set.iter().any(|(n, _)| n == k))
            .map(|(k, v)| (k.as_str(), v.as_str()));
        properties_to_string(kept.chain(set.iter().copied())).into_bytes()
    }

    /// A put of the same message, fields as stored.
    fn put(&self, record: &MessageRecord<'_>, topic: &str, queue_id: i32) -> PutMessage {
        PutMessage::from_record(record, topic.to_owned(), queue_id)
    }
}

/// END_TRANSACTION (`EndTransactionProcessor`): commit or roll back the half at
/// `commitLogOffset`. "Unknown" (type 0) is not answered, as in Java; a type that is none of
/// Java's is refused (Java leaves it unanswered).
/// Refusals are logged: the request is oneway, so the producer never sees the answer.
pub async fn end_transaction(
    state: &BrokerState,
    store: &StoreHandle,
    reader: &StoreReader,
    request: &RemotingCommand,
) -> Response {
    let answer = end(state, store, reader, request).await;
    if let Some(refused) = answer
        .as_ref()
        .filter(|a| a.code != ResponseCode::SUCCESS.0)
    {
        tracing::warn!(
            remark = refused.remark.as_deref().unwrap_or(""),
            "END_TRANSACTION refused"
        );
    }
    answer
}

async fn end(
    state: &BrokerState,
    store: &StoreHandle,
    reader: &StoreReader,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<EndTransactionRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let commit = match header.commit_or_rollback {
        TRANSACTION_COMMIT_TYPE => true,
        TRANSACTION_ROLLBACK_TYPE => false,
        TRANSACTION_NOT_TYPE => {
            let msg_id = &header.msg_id;
            tracing::debug!(msg_id, "transaction state unknown, left to the check");
            return None;
        }
        // Java leaves any other type unanswered too, which hangs a caller that sent the
        // request as a sync one until its timeout; ferromq says what is wrong instead.
        other => {
            let remark = format!("commitOrRollback {other} is not a transaction type");
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        }
    };
    tracing::debug!(
        msg_id = %header.msg_id,
        commit,
        from_check = header.from_transaction_check.unwrap_or(false),
        "end transaction"
    );
    let half = match reader.record_at(header.commit_log_offset).await {
        Ok(Some(bytes)) => Stored::decode(bytes),
        Ok(None) => None,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let Some(record) = half.as_ref().and_then(Stored::record) else {
        return error(request, ResponseCode::SYSTEM_ERROR, NOT_FOUND);
    };
    let Some(half) = half.as_ref() else {
        return error(request, ResponseCode::SYSTEM_ERROR, NOT_FOUND);
    };
    if let Some(remark) = prepared_problem(half, &record, &header) {
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let first = half
        .property(PREPARED_QUEUE_OFFSET)
        .and_then(|offset| offset.parse::<i64>().ok())
        .unwrap_or(record.queue_offset);
    if !state.ended_transactions.end(first) {
        // An answer to a second check of a transaction already ended: its half copy is
        // marked done, nothing is delivered again.
        tracing::info!(
            msg_id = %header.msg_id,
            first_half = first,
            "transaction already ended; the repeated answer is ignored"
        );
        put_op(state, store, record.queue_offset, record.store_host).await;
        return Some(RemotingCommand::success_to(request));
    }
    if commit {
        let real_topic = half.property(REAL_TOPIC).unwrap_or_default().to_owned();
        let mut put = half.put(&record, &real_topic, half.real_queue());
        put.sys_flag = (record.sys_flag & !TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE;
        put.prepared_transaction_offset = header.commit_log_offset;
        // The half's properties as they are, `TRAN_MSG`, `REAL_TOPIC` and `REAL_QID`
        // included: Java's `endMessageTransaction` writes the stored string before it clears
        // them, and its consumers see them.
        put.properties = record.properties.to_vec();
        // As Java's CommitLog: a committed message with a delay level waits for it.
        super::schedule::redirect_delayed(&mut put, &state.config.store.message_delay_level);
        if let Err(failure) = store.put(put).await {
            state.ended_transactions.forget(first);
            let remark = format!("cannot store the committed message: {failure}");
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        }
    }
    put_op(state, store, record.queue_offset, record.store_host).await;
    Some(RemotingCommand::success_to(request))
}

/// The transactions ended lately, each by the queue offset of its first half (a half
/// checked is stored again, a copy naming the first in `TRAN_PREPARED_QUEUE_OFFSET`), so
/// that a transaction is committed once even when its producer answers two checks: one
/// answer came later than `transactionTimeOut`, the half was checked again, and both answers
/// arrive. Java commits such a transaction twice. Only the last [`Self::REMEMBERED`] are kept,
/// and none across a restart: past them a repeat is still possible (at least once).
#[derive(Debug, Default)]
pub struct EndedTransactions {
    ended: std::sync::Mutex<(
        std::collections::HashSet<i64>,
        std::collections::VecDeque<i64>,
    )>,
}

impl EndedTransactions {
    /// How many ended transactions are remembered.
    pub const REMEMBERED: usize = 65_536;

    /// Marks the transaction of first half `first` ended; false if it already was.
    fn end(&self, first: i64) -> bool {
        let mut guard = self
            .ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (set, order) = &mut *guard;
        if !set.insert(first) {
            return false;
        }
        order.push_back(first);
        if order.len() > Self::REMEMBERED {
            if let Some(oldest) = order.pop_front() {
                set.remove(&oldest);
            }
        }
        true
    }

    /// Forgets that `first` ended (its commit could not be stored: a later check retries).
    fn forget(&self, first: i64) {
        let mut guard = self
            .ended
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (set, order) = &mut *guard;
        set.remove(&first);
        order.retain(|offset| *offset != first);
    }
}

/// `checkPrepareMessage`: the half must be the one the producer names.
fn prepared_problem(
    half: &Stored,
    record: &MessageRecord<'_>,
    header: &EndTransactionRequestHeader,
) -> Option<&'static str> {
    if record.topic != HALF_TOPIC || half.property(REAL_TOPIC).is_none() {
        return Some(NOT_FOUND);
    }
    if half.property(PGROUP) != Some(header.producer_group.as_str()) {
        return Some("The producer group wrong");
    }
    if record.queue_offset != header.tran_state_table_offset {
        return Some("The transaction state table offset wrong");
    }
    if record.physical_offset != header.commit_log_offset {
        return Some("The commit log offset wrong");
    }
    None
}

/// Marks the half at `half_offset` done (`deletePrepareMessage` / `putOpMessage`).
async fn put_op(
    state: &BrokerState,
    store: &StoreHandle,
    half_offset: i64,
    host: std::net::SocketAddr,
) {
    state
        .ensure_topic(OP_TOPIC, 1, PERM_READ | PERM_WRITE)
        .await;
    let op = PutMessage {
        topic: OP_TOPIC.to_owned(),
        queue_id: 0,
        flag: 0,
        sys_flag: 0,
        born_timestamp: now_ms(),
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: half_offset.to_string().into_bytes(),
        properties: properties_to_string([(TAGS, REMOVE_TAG)]).into_bytes(),
    };
    if let Err(error) = store.put(op).await {
        // The half stays open: the check asks its producer again, which at worst delivers
        // a committed message twice (at least once, as in Java).
        tracing::error!(%error, half_offset, "cannot store the transaction op message");
    }
}

/// The transaction check on the control shard, every `transactionCheckInterval` until
/// shutdown (`TransactionalMessageCheckService`).
pub async fn run_check(state: Arc<BrokerState>, store: StoreHandle, shutdown: Shutdown) {
    let interval = state.config.transaction_check_interval;
    let reader = store.reader();
    let periodic = async {
        loop {
            glommio::timer::sleep(interval).await;
            let mut check = Check::new(&state, &store, &reader);
            if let Err(error) = check.round().await {
                tracing::error!(%error, "transaction check failed");
            }
        }
    };
    futures::pin_mut!(periodic);
    let stop = shutdown.wait();
    futures::pin_mut!(stop);
    futures::future::select(periodic, stop).await;
}

/// One round of the check (`TransactionalMessageServiceImpl.check`).
struct Check<'a> {
    state: &'a BrokerState,
    store: &'a StoreHandle,
    reader: &'a StoreReader,
    /// Half offset → op offset, for ops naming halves not walked past yet.
    removed: HashMap<i64, i64>,
    /// Op offsets whose half is done.
    done_ops: Vec<i64>,
    /// Next op offset to read.
    op_next: i64,
    ops_read: usize,
    started_ms: i64,
}

fn progress(state: &BrokerState, reader: &StoreReader, topic: &str) -> i64 {
    state
        .committed_offset(TRANS_GROUP, topic, 0)
        .filter(|offset| *offset >= 0)
        .unwrap_or_else(|| reader.min_offset_in_queue(topic, 0))
}

impl<'a> Check<'a> {
    fn new(state: &'a BrokerState, store: &'a StoreHandle, reader: &'a StoreReader) -> Self {
        Check {
            state,
            store,
            reader,
            removed: HashMap::new(),
            done_ops: Vec::new(),
            op_next: 0,
            ops_read: 0,
            started_ms: now_ms(),
        }
    }

    async fn round(&mut self) -> Result<(), IoError> {
        // Java's check makes the half topic when it first looks for its queues
        // (`TransactionalMessageBridge.selectTopicConfig`), so it exists from the first
        // round on, halves or not.
        self.state
            .ensure_topic(HALF_TOPIC, 1, PERM_READ | PERM_WRITE)
            .await;
        if self.reader.max_offset_in_queue(HALF_TOPIC, 0) <= 0 {
            return Ok(());
        }
        let config = &self.state.config;
        let timeout_ms = i64::try_from(config.transaction_timeout.as_millis()).unwrap_or(i64::MAX);
        let half_start = progress(self.state, self.reader, HALF_TOPIC);
        let op_start = progress(self.state, self.reader, OP_TOPIC);
        self.op_next = op_start;
        self.read_ops(half_start).await?;
        let started = Instant::now();
        let mut next = half_start;
        for _ in 0..HALVES_PER_ROUND_MAX {
            if started.elapsed()
                > config
                    .transaction_check_interval
                    .max(std::time::Duration::from_secs(1))
            {
                break;
            }
            if let Some(op) = self.removed.remove(&next) {
                self.done_ops.push(op);
                next += 1;
                continue;
            }
            let half = match self.half_at(next).await? {
                Ok(half) => half,
                Err(skip_to) if skip_to > next => {
                    next = skip_to;
                    continue;
                }
                Err(_) => break,
            };
            let Some(record) = half.record() else {
                next += 1;
                continue;
            };
            if record.store_timestamp >= self.started_ms {
                break;
            }
            // The born time is the client's: any value.
            let age_ms = now_ms().saturating_sub(record.born_timestamp);
            let immunity_ms = half
                .property(CHECK_IMMUNITY)
                .and_then(|s| s.parse::<i64>().ok())
                .filter(|s| *s != -1)
                .map_or(timeout_ms, |s| s.saturating_mul(1000));
            if (0..immunity_ms).contains(&age_ms) {
                break;
            }
            // A half checked before was put back when it was checked: its producer gets
            // `transactionTimeOut` to answer that check before it is asked again. Java asks
            // again at the next round whatever the answer's delay, which with a short check
            // interval and a slow answer commits the message twice; halves are in store
            // order, so none after this one is due either.
            let since_check_ms = now_ms().saturating_sub(record.store_timestamp);
            if half.property(CHECK_TIMES).is_some() && (0..timeout_ms).contains(&since_check_ms) {
                break;
            }
            // An op may have arrived since the ops were read.
            self.read_ops(half_start).await?;
            if let Some(op) = self.removed.remove(&next) {
                self.done_ops.push(op);
                next += 1;
                continue;
            }
            self.resolve(&half, &record).await;
            next += 1;
        }
        if next != half_start {
            self.state.commit_offset(TRANS_GROUP, HALF_TOPIC, 0, next);
        }
        let op_progress = contiguous_end(op_start, &mut self.done_ops);
        if op_progress != op_start {
            self.state
                .commit_offset(TRANS_GROUP, OP_TOPIC, 0, op_progress);
        }
        Ok(())
    }

    /// Reads op messages from `op_next` to the queue's end (`fillOpRemoveMap`).
    async fn read_ops(&mut self, half_start: i64) -> Result<(), IoError> {
        let filter = PullFilter { tags_codes: None };
        while self.ops_read < OPS_PER_ROUND_MAX {
            let result = self
                .reader
                .get_message(OP_TOPIC, 0, self.op_next, READ_BATCH, &filter)
                .await?;
            if result.messages.is_empty() {
                if result.next_begin_offset > self.op_next {
                    self.op_next = result.next_begin_offset;
                    continue;
                }
                return Ok(());
            }
            for found in &result.messages {
                self.ops_read += 1;
                let bytes = result.record(found);
                let Ok(Record::Message { record, .. }) = decode_record(bytes, false) else {
                    continue;
                };
                let tag = parse_properties(record.properties)
                    .into_iter()
                    .find(|(k, _)| k == TAGS)
                    .map(|(_, v)| v);
                let half = std::str::from_utf8(record.body)
                    .ok()
                    .and_then(|b| b.trim().parse::<i64>().ok());
                match (tag.as_deref(), half) {
                    (Some(REMOVE_TAG), Some(half)) if half < half_start => {
                        self.done_ops.push(found.queue_offset);
                    }
                    (Some(REMOVE_TAG), Some(half)) => {
                        // A second op for the same half (ended twice) is done at once, so
                        // that it cannot hold the op progress back.
                        if let Some(earlier) = self.removed.insert(half, found.queue_offset) {
                            self.done_ops.push(earlier);
                        }
                    }
                    _ => self.done_ops.push(found.queue_offset),
                }
            }
            self.op_next = result.next_begin_offset;
        }
        Ok(())
    }

    /// The half at `offset`, or where to read next when there is none there (past the end:
    /// `offset` itself; below the queue's minimum or an unreadable record: further on).
    async fn half_at(&self, offset: i64) -> Result<Result<Stored, i64>, IoError> {
        let filter = PullFilter { tags_codes: None };
        let result = self
            .reader
            .get_message(HALF_TOPIC, 0, offset, 1, &filter)
            .await?;
        let Some(found) = result.messages.first() else {
            return Ok(Err(result.next_begin_offset.max(offset)));
        };
        let bytes = result.record(found).to_vec();
        Ok(Stored::decode(bytes).ok_or(offset + 1))
    }

    /// Checks or discards one open half (`needDiscard`, `putBackHalfMsgQueue`,
    /// `resolveHalfMsg` / `resolveDiscardMsg`).
    async fn resolve(&self, half: &Stored, record: &MessageRecord<'_>) {
        let config = &self.state.config;
        let checks = half
            .property(CHECK_TIMES)
            .and_then(|c| c.parse::<i32>().ok());
        let checks = match checks {
            Some(checks) if checks >= config.transaction_check_max => {
                self.discard(half, record).await;
                return;
            }
            Some(checks) => checks + 1,
            None => 1,
        };
        let reserved_ms = i64::try_from(config.store.file_reserved_time_hours)
            .unwrap_or(i64::MAX / 3_600_000)
            .saturating_mul(3_600_000);
        if now_ms().saturating_sub(record.born_timestamp) > reserved_ms {
            tracing::info!(
                offset = record.queue_offset,
                "half message older than the files, skipped"
            );
            return;
        }
        let checks = checks.to_string();
        let original = record.queue_offset.to_string();
        let prepared_offset = half.property(PREPARED_QUEUE_OFFSET).unwrap_or(&original);
        let properties = half.properties_with(
            &[],
            &[
                (CHECK_TIMES, &checks),
                (PREPARED_QUEUE_OFFSET, prepared_offset),
            ],
        );
        if properties.len() > PROPERTIES_MAX {
            self.discard(half, record).await;
            return;
        }
        let mut copy = half.put(record, HALF_TOPIC, 0);
        copy.properties.clone_from(&properties);
        let appended = match self.store.put(copy).await {
            Ok(appended) => appended,
            Err(error) => {
                tracing::error!(%error, "cannot store the checked half message again");
                return;
            }
        };
        let physical = i64::try_from(appended.physical_offset).unwrap_or(i64::MAX);
        let stored = MessageRecord {
            queue_offset: appended.queue_offset,
            physical_offset: physical,
            properties: &properties,
            ..record.clone()
        };
        self.send_check(half, &stored);
    }

    /// CHECK_TRANSACTION_STATE to a live producer of the half's group
    /// (`AbstractTransactionalMessageCheckListener.sendCheckMessage`,
    /// `Broker2Client.checkProducerTransactionState`).
    fn send_check(&self, half: &Stored, stored: &MessageRecord<'_>) {
        let group = half.property(PGROUP).unwrap_or_default();
        let Some(outbound) = self.state.producer_outbound(group) else {
            tracing::warn!(
                group,
                "no producer of the group to check a transaction with"
            );
            return;
        };
        let uniq = half.property(UNIQ_KEY).map(str::to_owned);
        let header = CheckTransactionStateRequestHeader {
            tran_state_table_offset: stored.queue_offset,
            commit_log_offset: stored.physical_offset,
            msg_id: uniq.clone(),
            transaction_id: uniq,
            offset_msg_id: Some(offset_msg_id(stored.store_host, stored.physical_offset)),
            topic: None,
            broker_name: None,
        };
        let real_topic = half.property(REAL_TOPIC).unwrap_or(HALF_TOPIC);
        let real_queue = half.real_queue();
        let body_record = MessageRecord {
            version: MessageVersion::for_topic(real_topic),
            topic: real_topic,
            queue_id: real_queue,
            ..stored.clone()
        };
        let mut body = Vec::new();
        encode_record(&body_record, &mut body);
        let request =
            RemotingCommand::request_with_header(RequestCode::CHECK_TRANSACTION_STATE, &header)
                .with_body(body);
        if !outbound.send_oneway(request) {
            tracing::warn!(
                group,
                "transaction check not sent: the producer's queue is full"
            );
        }
    }

    /// A half checked `transactionCheckMax` times: moved to `TRANS_CHECK_MAX_TIME_TOPIC`
    /// (4.9.8's `DefaultTransactionalMessageCheckListener.resolveDiscardMsg`).
    async fn discard(&self, half: &Stored, record: &MessageRecord<'_>) {
        tracing::warn!(
            offset = record.queue_offset,
            uniq_key = half.property(UNIQ_KEY).unwrap_or(""),
            "half message checked too many times, discarded to {CHECK_MAX_TIME_TOPIC}"
        );
        self.state
            .ensure_topic(CHECK_MAX_TIME_TOPIC, 1, PERM_READ | PERM_WRITE)
            .await;
        let mut put = half.put(record, CHECK_MAX_TIME_TOPIC, 0);
        put.properties = record.properties.to_vec();
        if let Err(error) = self.store.put(put).await {
            tracing::error!(%error, "cannot store the discarded half message");
        }
    }
}

/// The op offset to resume from: `start` moved over the done offsets that follow it without
/// a gap (`calculateOpOffset`).
fn contiguous_end(start: i64, done: &mut [i64]) -> i64 {
    done.sort_unstable();
    let mut next = start;
    for offset in done.iter() {
        if *offset == next {
            next += 1;
        } else if *offset > next {
            break;
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_progress_stops_at_the_first_gap() {
        assert_eq!(contiguous_end(3, &mut [5, 3, 4, 7]), 6);
        assert_eq!(contiguous_end(3, &mut [4]), 3);
        assert_eq!(contiguous_end(0, &mut []), 0);
        assert_eq!(contiguous_end(2, &mut [1, 2, 2, 3]), 4);
    }

    #[test]
    fn only_true_tran_msg_makes_a_half() {
        assert!(is_half(b"TRAN_MSG\x01true\x02PGROUP\x01g\x02"));
        assert!(is_half(b"TRAN_MSG\x01TRUE\x02"));
        assert!(!is_half(b"TRAN_MSG\x01false\x02"));
        assert!(!is_half(b"TAGS\x01a\x02"));
    }
}
