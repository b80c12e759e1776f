//! The transaction check (`TransactionalMessageCheckService`): every
//! `transactionCheckInterval`, the halves left open past `transactionTimeOut` are asked of
//! their producers, up to `transactionCheckMax` times (the halves and op messages it walks
//! are described in [`transaction`](crate::broker::transaction)).

use crate::broker::state::{now_ms, BrokerState, PERM_READ, PERM_WRITE};
use crate::broker::transaction::*;
use crate::remoting::headers::CheckTransactionStateRequestHeader;
use crate::remoting::{RemotingCommand, RequestCode};
use crate::store::message::{
    decode_record, encode_record, offset_msg_id, parse_properties, MessageRecord, MessageVersion,
    Record, PROPERTY_TAGS, PROPERTY_UNIQ_KEY,
};
use crate::store::message_store::StoreHandle;
use crate::store::reader::{PullFilter, StoreReader};
use ferromq_shards::Shutdown;
use ferromq_uring::IoError;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Halves one check round looks at, at most.
const HALVES_PER_ROUND_MAX: usize = 10_000;

/// Op messages one check round reads, at most.
const OPS_PER_ROUND_MAX: usize = 100_000;

/// Records one read of the half or op queue returns, at most.
const READ_BATCH: usize = 32;

/// The transaction check on the control shard, every `transactionCheckInterval` until
/// shutdown (`TransactionalMessageCheckService`).
pub async fn run_check(state: Arc<BrokerState>, store: StoreHandle, shutdown: Shutdown) {
    let interval = state.config.transaction_check_interval;
    let reader = store.reader();
    super::every(interval, &shutdown, || async {
        let mut check = Check::new(&state, &store, &reader);
        if let Err(error) = check.round().await {
            tracing::error!(%error, "transaction check failed");
        }
    })
    .await;
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
        let filter = PullFilter::ALL;
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
                    .find(|(k, _)| k == PROPERTY_TAGS)
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
        let filter = PullFilter::ALL;
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
        let uniq = half.property(PROPERTY_UNIQ_KEY).map(str::to_owned);
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
            uniq_key = half.property(PROPERTY_UNIQ_KEY).unwrap_or(""),
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
    use crate::broker::transaction::is_half;

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
