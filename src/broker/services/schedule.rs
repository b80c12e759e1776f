//! Delayed messages (`ScheduleMessageService` in Java).
//!
//! A put whose `DELAY` property names a level above 0 (and that is not a transaction's
//! prepared or rolled-back record) is stored in `SCHEDULE_TOPIC_XXXX`, queue `level - 1`,
//! with its real topic and queue in `REAL_TOPIC`/`REAL_QID` ([`redirect_delayed`]); levels
//! above the highest are clamped to it. Dispatch gives such a record the tags code "store time
//! plus the level's delay", its delivery time.
//!
//! On the control shard, one task per level ([`run_schedule`]) reads its queue from the saved
//! offset and, for each record whose time has come, stores a copy in the real topic and queue
//! (every property kept, `DELAY` included as Java keeps it, so the copy is found by its
//! `UNIQ_KEY`)
//! through the same put path as a send. The offset moves past a record only once the copy's
//! put succeeded, so a delayed message is delivered at least once and never lost. The offsets
//! go to `config/delayOffset.json` every `flushDelayOffsetInterval` and at shutdown, and are
//! read back at start, clamped into each queue's range as Java does
//! (`correctDelayOffset`); deliveries after the last write are made again after a crash.

use crate::broker::delay::{property, PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC};
use crate::broker::state::{now_ms, BrokerState};
use crate::broker::transaction::HALF_TOPIC;
use crate::config::persist::{next_snapshot_version, read_with_backup, write_snapshot_off_shard};
use crate::store::commit_log::PutMessage;
use crate::store::config_files::DelayOffsetTable;
use crate::store::dispatch::{DelayLevels, SCHEDULE_TOPIC};
use crate::store::message::{decode_record, parse_properties, MessageRecord, Record};
use crate::store::message_store::StoreHandle;
use crate::store::reader::{GetMessageStatus, PullFilter, StoreReader};
use ferromq_shards::Shutdown;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// `TopicValidator.RMQ_SYS_TRANS_HALF_TOPIC`: never a delivery target.
const TRANS_HALF_TOPIC: &str = HALF_TOPIC;

/// Pause between two looks at a level's queue (`DELAY_FOR_A_WHILE`).
const DELAY_FOR_A_WHILE: Duration = Duration::from_millis(100);
/// Longest pause while the head of a level's queue is not due yet.
const NOT_DUE_LOOK_MAX: Duration = Duration::from_secs(1);
/// Pause after a read error (`DELAY_FOR_A_PERIOD`).
const DELAY_FOR_A_PERIOD: Duration = Duration::from_secs(10);
/// Pause before a level's first look (`FIRST_DELAY_TIME`).
const FIRST_DELAY_TIME: Duration = Duration::from_secs(1);
/// Records read from a level's queue per look.
const BATCH: usize = 32;

/// The copy of a due record for its real topic (`messageTimeup`): `None` when the record
/// names no usable real topic and queue.
fn time_up(record: &MessageRecord<'_>) -> Option<PutMessage> {
    let properties = parse_properties(record.properties);
    let topic = property(&properties, PROPERTY_REAL_TOPIC)?.to_owned();
    let queue_id = property(&properties, PROPERTY_REAL_QUEUE_ID)?
        .trim()
        .parse::<i32>()
        .ok()?;
    if topic == TRANS_HALF_TOPIC {
        return None;
    }
    // Every property kept, `DELAY`, `REAL_TOPIC` and `REAL_QID` included: Java's
    // `messageTimeup` writes the stored string before it clears the level, so a delivered
    // message still says how it was delayed.
    Some(PutMessage {
        properties: record.properties.to_vec(),
        ..PutMessage::from_record(record, topic, queue_id)
    })
}

/// The scheduler's state on the control shard.
#[doc(alias = "ScheduleMessageService")]
#[derive(Debug)]
struct Scheduler {
    store: StoreHandle,
    reader: StoreReader,
    levels: DelayLevels,
    /// Level → next offset of its queue, as `delayOffset.json` holds it.
    offsets: RefCell<BTreeMap<i32, i64>>,
    path: PathBuf,
}

impl Scheduler {
    fn load(state: &BrokerState, store: StoreHandle) -> Scheduler {
        let path = state.config.store.config_dir().join("delayOffset.json");
        let table = match read_with_backup(&path, |b| DelayOffsetTable::parse(b).is_ok()) {
            Ok(Some(bytes)) => DelayOffsetTable::parse(&bytes).unwrap_or_default(),
            Ok(None) => DelayOffsetTable::default(),
            Err(error) => {
                tracing::error!(%error, path = %path.display(), "cannot read delay offsets");
                DelayOffsetTable::default()
            }
        };
        let reader = store.reader();
        let mut offsets: BTreeMap<i32, i64> = table.offset_table.into_iter().collect();
        for (level, offset) in &mut offsets {
            let min = reader.min_offset_in_queue(SCHEDULE_TOPIC, level - 1);
            let max = reader.max_offset_in_queue(SCHEDULE_TOPIC, level - 1);
            let corrected = (*offset).max(min).min(max);
            if corrected != *offset {
                tracing::error!(
                    level,
                    from = *offset,
                    to = corrected,
                    "corrected delay offset"
                );
                *offset = corrected;
            }
        }
        Scheduler {
            store,
            reader,
            levels: state.config.store.message_delay_level.clone(),
            offsets: RefCell::new(offsets),
            path,
        }
    }

    fn offset(&self, level: i32) -> i64 {
        self.offsets.borrow().get(&level).copied().unwrap_or(0)
    }

    /// Writes `delayOffset.json` without blocking the control shard.
    async fn persist(&self) {
        // Taken with the offsets: a periodic write still running at shutdown must not land
        // after the last one.
        let version = next_snapshot_version();
        let table = DelayOffsetTable {
            offset_table: self
                .offsets
                .borrow()
                .iter()
                .map(|(l, o)| (*l, *o))
                .collect(),
        };
        let json = table.to_json().into_bytes();
        if let Err(error) = write_snapshot_off_shard(self.path.clone(), version, json).await {
            tracing::error!(%error, path = %self.path.display(), "cannot write delay offsets");
        }
    }

    /// One look at `level`'s queue (`executeOnTimeup`): delivers what is due, in order, and
    /// answers how long to wait before the next look.
    async fn deliver_due(&self, level: i32) -> Duration {
        let queue_id = level - 1;
        let offset = self.offset(level);
        let all = PullFilter::ALL;
        let result = match self
            .reader
            .get_message(SCHEDULE_TOPIC, queue_id, offset, BATCH, &all)
            .await
        {
            Ok(result) => result,
            Err(error) => {
                tracing::error!(%error, level, offset, "cannot read the delay queue");
                return DELAY_FOR_A_PERIOD;
            }
        };
        match result.status {
            GetMessageStatus::Found => {}
            GetMessageStatus::OffsetTooSmall | GetMessageStatus::OffsetOverflowBadly => {
                let corrected = offset.max(result.min_offset).min(result.max_offset);
                tracing::error!(level, offset, corrected, "delay offset out of its queue");
                self.offsets.borrow_mut().insert(level, corrected);
                return DELAY_FOR_A_WHILE;
            }
            _ => return DELAY_FOR_A_WHILE,
        }
        let delay = self.levels.delay_ms(level);
        for found in &result.messages {
            let bytes = result.record(found);
            let Ok(Record::Message { record, .. }) = decode_record(bytes, false) else {
                // `lookMessageByOffset` found nothing: Java skips the unit.
                tracing::error!(
                    level,
                    offset = found.queue_offset,
                    "delay unit without record"
                );
                self.offsets
                    .borrow_mut()
                    .insert(level, found.queue_offset + 1);
                continue;
            };
            let now = now_ms();
            let mut deliver_at = record.store_timestamp.saturating_add(delay);
            // `correctDeliverTimestamp`: a time further away than the level's delay (a clock
            // that went back) is taken as now.
            if deliver_at > now.saturating_add(delay) {
                deliver_at = now;
            }
            if deliver_at > now {
                // The queue is in delivery order (one delay, store times growing), so nothing
                // is due before its head; look again then, or after a second at most in case
                // the wall clock moves.
                let wait = u64::try_from(deliver_at - now).unwrap_or(0);
                return Duration::from_millis(wait).min(NOT_DUE_LOOK_MAX);
            }
            match time_up(&record) {
                Some(copy) => {
                    let topic = copy.topic.clone();
                    if let Err(error) = self.store.put(copy).await {
                        tracing::warn!(%error, level, topic, "delayed delivery failed; retrying");
                        return DELAY_FOR_A_WHILE;
                    }
                    tracing::debug!(
                        level,
                        topic,
                        late_ms = now - deliver_at,
                        put_ms = now_ms() - now,
                        "delayed message delivered"
                    );
                }
                None => {
                    tracing::error!(level, offset = found.queue_offset, "delayed record dropped");
                }
            }
            self.offsets
                .borrow_mut()
                .insert(level, found.queue_offset + 1);
        }
        // Every unit up to the next begin offset was delivered or was not a message.
        self.offsets
            .borrow_mut()
            .insert(level, result.next_begin_offset.max(offset));
        if result.messages.len() >= BATCH {
            Duration::ZERO
        } else {
            DELAY_FOR_A_WHILE
        }
    }

    async fn run_level(self: Rc<Self>, level: i32) {
        glommio::timer::sleep(FIRST_DELAY_TIME).await;
        loop {
            let wait = self.deliver_due(level).await;
            if wait.is_zero() {
                glommio::yield_if_needed().await;
            } else {
                glommio::timer::sleep(wait).await;
            }
        }
    }
}

/// Runs delayed delivery on the control shard until shutdown, then writes the offsets. Call
/// once the store is recovered (the saved offsets are checked against its queues).
pub async fn run_schedule(state: Arc<BrokerState>, store: StoreHandle, shutdown: Shutdown) {
    let scheduler = Rc::new(Scheduler::load(&state, store));
    let levels = i32::try_from(scheduler.levels.len()).unwrap_or(0);
    let tasks: Vec<_> = (1..=levels)
        .map(|level| glommio::spawn_local(Rc::clone(&scheduler).run_level(level)).detach())
        .collect();
    let interval = state.config.flush_delay_offset_interval;
    let persist = async {
        loop {
            glommio::timer::sleep(interval).await;
            scheduler.persist().await;
        }
    };
    futures::pin_mut!(persist);
    let stop = shutdown.wait();
    futures::pin_mut!(stop);
    futures::future::select(persist, stop).await;
    for task in tasks {
        task.cancel();
    }
    scheduler.persist().await;
    tracing::info!("delay offsets written at shutdown");
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::broker::delay::redirect_delayed;
    use std::net::SocketAddr;

    pub(crate) fn put(properties: &str, sys_flag: i32) -> PutMessage {
        let host: SocketAddr = "127.0.0.1:1".parse().unwrap();
        PutMessage {
            topic: "T".into(),
            queue_id: 3,
            flag: 0,
            sys_flag,
            born_timestamp: 0,
            born_host: host,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: Vec::new(),
            properties: properties.as_bytes().to_vec(),
        }
    }

    #[test]
    fn a_delayed_put_goes_to_the_schedule_queue_of_its_clamped_level() {
        let levels = DelayLevels::parse("1s 2s 3s").unwrap();
        let mut message = put("DELAY\u{1}7\u{2}KEYS\u{1}k\u{2}", 0);
        redirect_delayed(&mut message, &levels);
        assert_eq!(message.topic, SCHEDULE_TOPIC);
        assert_eq!(message.queue_id, 2);
        let properties = parse_properties(&message.properties);
        assert_eq!(property(&properties, "DELAY"), Some("3"));
        assert_eq!(property(&properties, "REAL_TOPIC"), Some("T"));
        assert_eq!(property(&properties, "REAL_QID"), Some("3"));
        assert_eq!(property(&properties, "KEYS"), Some("k"));
    }

    #[test]
    fn no_level_and_prepared_transactions_stay_where_they_are() {
        let levels = DelayLevels::default();
        for (properties, sys_flag) in [
            ("KEYS\u{1}k\u{2}", 0),
            ("DELAY\u{1}0\u{2}", 0),
            ("DELAY\u{1}x\u{2}", 0),
            ("DELAY\u{1}2\u{2}", 0x4),
            ("DELAY\u{1}2\u{2}", 0xc),
        ] {
            let mut message = put(properties, sys_flag);
            redirect_delayed(&mut message, &levels);
            assert_eq!((message.topic.as_str(), message.queue_id), ("T", 3));
            assert_eq!(message.properties, properties.as_bytes());
        }
        let mut committed = put("DELAY\u{1}2\u{2}", 0x8);
        redirect_delayed(&mut committed, &levels);
        assert_eq!(committed.topic, SCHEDULE_TOPIC);
    }
}
