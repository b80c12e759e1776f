//! The revive service (Java 5.x's `PopReviveService`), on the control shard of a master:
//! reads each queue of `rmq_sys_REVIVE_LOG_<cluster>` as the group
//! `CID_RMQ_SYS_REVIVE_GROUP`, pairs the acks with their checkpoints, and once a
//! checkpoint's revive time is well past, puts every message of it that no ack names into
//! the group's POP retry topic (`%RETRY%<group>_<topic>`, V2 `+` with
//! `enableRetryTopicV2`), `reconsumeTimes + 1`, `1ST_POP_TIME` set on the first revive; a
//! message already revived the group's `retryMaxTimes` times goes to `%DLQ%<group>`.
//!
//! A round reads a revive queue from its committed offset + 1 to its end (at most
//! `reviveScanTime`), then revives the due checkpoints in queue order and commits the
//! offset of the last one (or of the end, when no checkpoint is left waiting), as Java
//! does. "Due" is Java's rule: the newest delivery time seen is more than 2 s past the
//! checkpoint's revive time; at the queue's end the timer's read time counts as seen, so
//! an ack is never outrun by its checkpoint's revive unless the timer is behind.
//!
//! At least once: a put that fails stops the round before its offset is committed, and the
//! next round revives the checkpoint again (its other messages too).

use crate::broker::delay::{encode_properties, property, set_property};
use crate::broker::pop::format::{normal_topic, AckMsg, PopCheckPoint};
use crate::broker::pop::{
    ensure_retry_topic, ensure_revive_topic, retry_topic, store_host, ACK_TAG, BATCH_ACK_TAG,
    CK_TAG, PROPERTY_FIRST_POP_TIME, REVIVE_GROUP,
};
use crate::broker::retry::{ensure_dlq, PROPERTY_RETRY_TOPIC};
use crate::broker::state::{now_ms, BrokerState, RETRY_GROUP_TOPIC_PREFIX};
use crate::broker::timer::PROPERTY_TIMER_DELIVER_MS;
use crate::store::commit_log::PutMessage;
use crate::store::message::PROPERTY_TAGS;
use crate::store::message::{decode_record, parse_properties, Record};
use crate::store::message_store::StoreHandle;
use crate::store::reader::{PullFilter, StoreReader};
use ferromq_shards::Shutdown;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

/// Revive-queue messages one read takes (Java's 32).
const READ_BATCH: usize = 32;
/// `ackTimeInterval + SECOND`: how far past its revive time a checkpoint must be seen.
const DUE_AFTER_MS: i64 = 2000;
/// Margin under the timer's read time taken as "seen" at a revive queue's end: the timer
/// moves its read time past a slot once the slot's puts are stored, and dispatch may still
/// be putting them in the revive queue.
const TIMER_MARGIN_MS: i64 = 200;

/// Runs the revive rounds until shutdown.
pub async fn run_revive(state: Arc<BrokerState>, store: StoreHandle, shutdown: Shutdown) {
    let topic = ensure_revive_topic(&state).await;
    let reader = store.reader();
    let mut revive = Revive {
        state,
        store,
        reader,
        topic,
        offsets: HashMap::new(),
    };
    let rounds = async move {
        let mut slow = 1u32;
        loop {
            let pop = revive.state.runtime().pop.clone();
            glommio::timer::sleep(pop.revive_interval * slow).await;
            let mut checkpoints = 0;
            for queue_id in 0..pop.revive_queue_num {
                checkpoints += revive.round(queue_id).await;
            }
            // A broker with no checkpoint to wait for looks less often, up to
            // `reviveMaxSlow` intervals apart (Java's `slow`).
            slow = if checkpoints == 0 {
                (slow + 1).min(pop.revive_max_slow.max(1))
            } else {
                1
            };
        }
    };
    futures::pin_mut!(rounds);
    let stop = shutdown.wait();
    futures::pin_mut!(stop);
    futures::future::select(rounds, stop).await;
}

/// The service's state: how far each revive queue is done (`reviveOffset`).
struct Revive {
    state: Arc<BrokerState>,
    store: StoreHandle,
    reader: StoreReader,
    topic: String,
    offsets: HashMap<i32, i64>,
}

impl Revive {
    /// One round of one revive queue (`consumeReviveMessage` + `mergeAndRevive`); how many
    /// checkpoints it found (revived or waiting).
    async fn round(&mut self, queue_id: i32) -> usize {
        let (state, topic) = (&self.state, self.topic.as_str());
        let broker = state.config.broker_name.clone();
        let committed = state
            .committed_offset(REVIVE_GROUP, topic, queue_id)
            .unwrap_or(-1);
        let old = committed.max(*self.offsets.get(&queue_id).unwrap_or(&-1));
        let mut offset = old + 1;
        let mut cks: HashMap<String, PopCheckPoint> = HashMap::new();
        let mut end_time = 0i64;
        let started = Instant::now();
        let scan_time = state.runtime().pop.revive_scan_time;
        let no_filter = PullFilter {
            tags_codes: None,
            records: None,
        };
        let mut at_end = false;
        while started.elapsed() < scan_time {
            let result = match self
                .reader
                .get_message(topic, queue_id, offset, READ_BATCH, &no_filter)
                .await
            {
                Ok(result) => result,
                Err(error) => {
                    tracing::warn!(%error, queue_id, "revive cannot read its queue");
                    return 0;
                }
            };
            if result.messages.is_empty() {
                if result.next_begin_offset > offset {
                    // A gap (expired units): go on past it.
                    offset = result.next_begin_offset;
                    continue;
                }
                at_end = true;
                break;
            }
            for found in &result.messages {
                let Ok(Record::Message { record, .. }) = decode_record(result.record(found), false)
                else {
                    continue;
                };
                let properties = parse_properties(record.properties);
                let deliver = property(&properties, PROPERTY_TIMER_DELIVER_MS)
                    .and_then(|t| t.parse::<i64>().ok())
                    .unwrap_or(0);
                end_time = end_time.max(deliver);
                match property(&properties, PROPERTY_TAGS) {
                    Some(CK_TAG) => {
                        let Ok(mut ck) = serde_json::from_slice::<PopCheckPoint>(record.body)
                        else {
                            continue;
                        };
                        if ck.topic.is_empty() || ck.cid.is_empty() {
                            continue;
                        }
                        ck.revive_offset = found.queue_offset;
                        cks.insert(ck.merge_key(&broker), ck);
                    }
                    Some(ACK_TAG | BATCH_ACK_TAG) => {
                        let Ok(ack) = serde_json::from_slice::<AckMsg>(record.body) else {
                            continue;
                        };
                        if let Some(ck) = cks.get_mut(&ack.merge_key(&broker)) {
                            for acked in ack.offsets() {
                                if let Some(index) = ck.index_of(acked) {
                                    ck.set_acked(index);
                                }
                            }
                        }
                    }
                    _ => {}
                }
            }
            offset = result.next_begin_offset;
        }
        if at_end {
            let now = now_ms();
            let timer = state
                .timer
                .report()
                .map_or(now, |r| r.read_time_ms.min(now));
            end_time = end_time.max(timer - TIMER_MARGIN_MS);
        }
        let mut sorted: Vec<PopCheckPoint> = cks.into_values().collect();
        sorted.sort_by_key(|ck| ck.revive_offset);
        let mut new_offset = old;
        let mut revived = 0;
        let mut waiting = false;
        for ck in &sorted {
            if end_time - ck.revive_time() <= DUE_AFTER_MS {
                waiting = true;
                break;
            }
            if let Err(failure) = self.revive(ck).await {
                tracing::warn!(
                    failure,
                    topic = ck.topic,
                    "revive failed; retried next round"
                );
                waiting = true;
                break;
            }
            revived += 1;
            new_offset = ck.revive_offset;
        }
        if !waiting && at_end {
            // Nothing left to wait for up to the end: the acks there are of revived cks.
            new_offset = offset - 1;
        }
        if new_offset > old {
            self.state
                .commit_offset(REVIVE_GROUP, &self.topic, queue_id, new_offset);
        }
        self.offsets.insert(queue_id, new_offset);
        if revived > 0 {
            tracing::debug!(queue_id, revived, new_offset, "checkpoints revived");
        }
        sorted.len()
    }

    /// Puts every unacked message of `ck` back (`reviveMsgFromCk`).
    async fn revive(&self, ck: &PopCheckPoint) -> Result<(), String> {
        let state = &self.state;
        let normal = normal_topic(&ck.topic, &ck.cid);
        if state.topic(normal).is_none() {
            return Ok(());
        }
        let Some(group) = state.group_or_create(&ck.cid).await else {
            return Ok(());
        };
        let no_filter = PullFilter {
            tags_codes: None,
            records: None,
        };
        let count = usize::try_from(ck.num).unwrap_or(0);
        for index in (0..count).filter(|index| !ck.is_acked(*index)) {
            let offset = ck.offset_at(index);
            let result = self
                .reader
                .get_message(&ck.topic, ck.queue_id, offset, 1, &no_filter)
                .await
                .map_err(|e| e.to_string())?;
            let Some(found) = result.messages.first().filter(|m| m.queue_offset == offset) else {
                tracing::warn!(
                    topic = ck.topic,
                    offset,
                    "a popped message is gone; not revived"
                );
                continue;
            };
            let Ok(Record::Message { record, .. }) = decode_record(result.record(found), false)
            else {
                continue;
            };
            let mut properties = parse_properties(record.properties);
            let first_revive = record.reconsume_times == 0
                || property(&properties, PROPERTY_FIRST_POP_TIME).is_none();
            if first_revive {
                set_property(
                    &mut properties,
                    PROPERTY_FIRST_POP_TIME,
                    ck.pop_time.to_string(),
                );
            }
            let (topic, queue_id) = if record.reconsume_times >= group.retry_max_times {
                if property(&properties, PROPERTY_RETRY_TOPIC).is_none() {
                    set_property(&mut properties, PROPERTY_RETRY_TOPIC, normal.to_owned());
                }
                (ensure_dlq(state, &ck.cid).await, 0)
            } else {
                let topic = if ck.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
                    ck.topic.clone()
                } else {
                    retry_topic(state, &ck.topic, &ck.cid)
                };
                ensure_retry_topic(state, &topic, &ck.cid).await;
                (topic, 0)
            };
            let host = store_host(state);
            let message = PutMessage {
                born_host: host,
                store_host: host,
                reconsume_times: record.reconsume_times.saturating_add(1),
                properties: encode_properties(&properties),
                ..PutMessage::from_record(&record, topic, queue_id)
            };
            self.store.put(message).await.map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}
