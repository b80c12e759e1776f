//! Timer messages (5.x's `TimerMessageStore`, RIP-43): the enqueue, the dequeue and the
//! flush of the timer's files (`store::timer`), on the control shard of a master.
//!
//! - **Enqueue** (`TimerEnqueueGetService` + `TimerEnqueuePutService`): the timer topic's
//!   queue 0 is read from `currQueueOffset`; each message (parked by the put hook,
//!   `broker::timer`) becomes a 52-byte timerlog unit chained into the slot of its
//!   `TIMER_OUT_MS`. A time further than the roll window is parked at the window's end
//!   (`MAGIC_ROLL`). A time the wheel's write time has passed is delivered at once.
//! - **Dequeue** (`TimerDequeueGetService` + the get and put message services): once the
//!   write time (the wall clock, rounded down to `timerPrecisionMs`) is past the read time,
//!   the slot of the read time is walked backwards from its last unit; deletes
//!   (`TIMER_DEL_UNIQKEY`) are collected first, then each other message is read from the
//!   CommitLog and put again: to its real topic and queue with `TIMER_DEQUEUE_MS` (its
//!   `UNIQ_KEY` and properties kept, `REAL_TOPIC`/`REAL_QID` cleared), or, for a roll, into
//!   the timer topic again with `TIMER_ROLL_TIMES` counted. The read time moves one
//!   precision once the whole slot is delivered.
//! - **Flush** every `timerFlushIntervalMs` (`TimerFlushService`): timerlog, wheel and
//!   `config/timercheck`, and `config/timermetrics`.
//!
//! Recovery (`recover`) is Java's: the timerlog is walked from the file before the flushed
//! position, its torn tail cut, the slots of its units revised; the queue offset is taken
//! from the last unit's message (else the checkpoint's), never past
//! `masterTimerQueueOffset`; the read time from the checkpoint. A slot cut short by a crash
//! is delivered again, and units appended after the last checkpoint can be enqueued again:
//! at least once, never lost.
//!
//! Memory: one slot's units at a time (a slot's dequeue), never the pending set.

mod delivery;
mod progress;

use crate::store::message::PROPERTY_UNIQ_KEY;
use delivery::{convert, put_with_retries};

use crate::broker::delay::{property, set_property, PROPERTY_REAL_TOPIC};
use crate::broker::state::{now_ms, BrokerState};
use crate::broker::timer::{
    delete_key, PROPERTY_TIMER_DEL_UNIQKEY, PROPERTY_TIMER_ENQUEUE_MS, PROPERTY_TIMER_OUT_MS,
};
use crate::config::persist::write_atomically_off_shard;
use crate::store::commit_log::PutMessage;
use crate::store::config::StoreConfig;
use crate::store::message::{decode_record, parse_properties, MessageRecord, Record};
use crate::store::message_store::StoreHandle;
use crate::store::reader::{GetMessageStatus, PullFilter, StoreReader};
use crate::store::timer::checkpoint::{TimerCheckpoint, TimerCheckpointData};
use crate::store::timer::log::{java_string_hash, TimerLog, TimerUnit, UNIT_SIZE};
use crate::store::timer::metrics::TimerMetrics;
use crate::store::timer::wheel::{TimerWheel, IGNORE};
use crate::store::timer::{
    needs_delete, needs_roll, roll_window_slots, TimerError, MAGIC_DEFAULT, MAGIC_DELETE,
    MAGIC_ROLL, SLOTS_TOTAL, TIMER_BLANK_SLOTS, TIMER_TOPIC,
};
use ferromq_shards::Shutdown;
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Timer-topic records one read of its queue takes (a consumer's pull size).
const ENQUEUE_BATCH: usize = 32;
/// Timer-topic messages one enqueue round takes at most before the dequeue gets a turn.
const ENQUEUE_ROUND_MAX: usize = 4096;
/// Empty slots one dequeue round passes at most before yielding.
const EMPTY_SLOTS_ROUND_MAX: usize = 4096;
/// Steps back `reviseQueueOffset` takes at most to find the last unit's message.
const REVISE_STEPS_MAX: i64 = 20_000;
/// How often timerlog files below the CommitLog are deleted (Java's scheduler: 30 s).
const CLEAN_INTERVAL: Duration = Duration::from_secs(30);

/// How often the progress GET_BROKER_RUNTIME_INFO reports is published (Java's TPS figures
/// are per second).
const PUBLISH_INTERVAL: Duration = Duration::from_secs(1);
/// Puts of deliveries in flight at once (Java runs `timerPutMessageThreadNum`, 3, threads
/// of blocking puts; an awaited put costs a group commit, so more overlap here).
const PUTS_IN_FLIGHT: usize = 64;
/// Due units of a slot read and put together, at most (their records are in memory then).
const DELIVER_CHUNK: usize = 256;

/// Runs the timer on the control shard of a master until shutdown, then flushes its files.
/// Call once the store is recovered. A timer whose files cannot be opened logs why and
/// stays off: parked messages wait in the timer topic until it starts.
pub async fn run_timer(state: Arc<BrokerState>, store: StoreHandle, shutdown: Shutdown) {
    let config = state.config.store.clone();
    let mut timer = match Timer::open(config, store) {
        Ok(timer) => timer,
        Err(error) => {
            tracing::error!(%error, "the timer cannot open its files; timer messages wait");
            return;
        }
    };
    timer.recover().await;
    // What GET_BROKER_RUNTIME_INFO reports, published once a second.
    let mut last_publish = Instant::now();
    let mut counted = (timer.enqueued, timer.dequeued);
    timer.publish(&state.timer, (0.0, 0.0));
    let idle = Duration::from_millis(
        u64::try_from(100 * timer.precision_ms / 1000)
            .unwrap_or(100)
            .max(1),
    );
    let mut last_flush = Instant::now();
    let mut last_progress = Instant::now();
    let mut last_clean = Instant::now();
    while !shutdown.is_triggered() {
        let mut busy = false;
        match timer.enqueue(&shutdown).await {
            Ok(moved) => busy |= moved,
            Err(Stop) => break,
        }
        timer.maybe_move_write_time();
        match timer.dequeue(&shutdown).await {
            Ok(moved) => busy |= moved,
            Err(Stop) => break,
        }
        if last_flush.elapsed() >= timer.config.timer_flush_interval {
            last_flush = Instant::now();
            timer.flush().await;
        }
        if last_clean.elapsed() >= CLEAN_INTERVAL {
            last_clean = Instant::now();
            let min_py = timer.store.shared().min_physical_offset();
            let min_py = i64::try_from(min_py).unwrap_or(i64::MAX);
            if let Err(error) = timer.log.delete_expired(min_py) {
                tracing::error!(%error, "cannot delete an expired timerlog file");
            }
        }
        let since_publish = last_publish.elapsed();
        if since_publish >= PUBLISH_INTERVAL {
            last_publish = Instant::now();
            #[allow(clippy::cast_precision_loss)] // counts per second
            let per_second = |now: u64, before: u64| {
                ((now - before) as f64 / since_publish.as_secs_f64()) as f32
            };
            let tps = (
                per_second(timer.enqueued, counted.0),
                per_second(timer.dequeued, counted.1),
            );
            counted = (timer.enqueued, timer.dequeued);
            timer.publish(&state.timer, tps);
        }
        if last_progress.elapsed() >= timer.config.timer_progress_log_interval {
            last_progress = Instant::now();
            timer.log_progress();
        }
        if busy {
            glommio::yield_if_needed().await;
        } else {
            let sleep = glommio::timer::sleep(idle);
            futures::pin_mut!(sleep);
            let stop = shutdown.wait();
            futures::pin_mut!(stop);
            futures::future::select(sleep, stop).await;
        }
    }
    timer.flush().await;
    tracing::info!(
        read_time_ms = timer.commit_read_time_ms,
        queue_offset = timer.commit_queue_offset,
        "timer flushed at shutdown"
    );
}

/// Shutdown came while a put was waiting: stop where the last whole step ended.
#[derive(Debug)]
struct Stop;

/// The timer's state (`TimerMessageStore`).
#[doc(alias = "TimerMessageStore")]
#[derive(Debug)]
struct Timer {
    config: StoreConfig,
    store: StoreHandle,
    reader: StoreReader,
    log: TimerLog,
    wheel: TimerWheel,
    checkpoint_file: TimerCheckpoint,
    checkpoint: TimerCheckpointData,
    metrics: TimerMetrics,
    metrics_path: PathBuf,
    metrics_dirty: bool,
    precision_ms: i64,
    roll_window_slots: i64,
    curr_read_time_ms: i64,
    curr_write_time_ms: i64,
    curr_queue_offset: i64,
    commit_read_time_ms: i64,
    commit_queue_offset: i64,
    last_commit_read_time_ms: i64,
    last_commit_queue_offset: i64,
    /// Units enqueued and messages delivered since the start (for the TPS figures).
    enqueued: u64,
    dequeued: u64,
    /// Units in the slots from the read time on (Java's `getAllNum`, the congestion
    /// figure): counted at recovery, then kept as units are chained and slots read, so the
    /// once-a-second report does not walk the wheel's 1.2 million slots.
    pending_units: i64,
}

impl Timer {
    fn open(config: StoreConfig, store: StoreHandle) -> Result<Timer, TimerError> {
        let precision_ms = config.timer_precision_ms;
        let log = TimerLog::open(&config.timer_log_dir(), config.mapped_file_size_timer_log)?;
        let wheel = TimerWheel::open(&config.root_file("timerwheel"), precision_ms)?;
        let (checkpoint_file, checkpoint) =
            TimerCheckpoint::open(&config.config_dir().join("timercheck"))?;
        let metrics_path = config.config_dir().join("timermetrics");
        let metrics = match std::fs::read(&metrics_path) {
            Ok(bytes) => TimerMetrics::parse(&bytes).unwrap_or_else(|| {
                tracing::warn!(path = %metrics_path.display(), "timer metrics unreadable; reset");
                TimerMetrics::default()
            }),
            Err(_) => TimerMetrics::default(),
        };
        let reader = store.reader();
        Ok(Timer {
            roll_window_slots: roll_window_slots(config.timer_roll_window_slot),
            config,
            store,
            reader,
            log,
            wheel,
            checkpoint_file,
            checkpoint,
            metrics,
            metrics_path,
            metrics_dirty: false,
            precision_ms,
            curr_read_time_ms: 0,
            curr_write_time_ms: 0,
            curr_queue_offset: 0,
            commit_read_time_ms: 0,
            commit_queue_offset: 0,
            last_commit_read_time_ms: 0,
            last_commit_queue_offset: 0,
            enqueued: 0,
            dequeued: 0,
            pending_units: 0,
        })
    }

    fn format_time_ms(&self, time_ms: i64) -> i64 {
        time_ms / self.precision_ms * self.precision_ms
    }

    /// `recover`, as Java's (see the module doc).
    async fn recover(&mut self) {
        let mut last_flush_pos = self.checkpoint.last_timer_log_flush_pos;
        if self.log.file_starts().next().is_some() {
            last_flush_pos -= i64::try_from(self.log.file_size()).unwrap_or(i64::MAX);
        }
        let last_flush_pos = u64::try_from(last_flush_pos.max(0)).unwrap_or(0);
        let process_offset = self.recover_and_revise(last_flush_pos, true);
        if let Err(error) = self.log.truncate_dirty(process_offset) {
            tracing::error!(%error, "cannot cut the timerlog's torn tail");
        }
        let revised = self.revise_queue_offset(process_offset).await;
        let mut queue_offset =
            revised.map_or(self.checkpoint.last_timer_queue_offset, |offset| offset + 1);
        queue_offset = queue_offset.min(self.checkpoint.master_timer_queue_offset);
        let min = self.reader.min_offset_in_queue(TIMER_TOPIC, 0);
        let max = self.reader.max_offset_in_queue(TIMER_TOPIC, 0);
        if queue_offset < min {
            tracing::warn!(
                queue_offset,
                min,
                "timer queue offset below the queue's minimum"
            );
            queue_offset = min;
        } else if queue_offset > max {
            tracing::warn!(
                queue_offset,
                max,
                "timer queue offset past the queue's maximum"
            );
            queue_offset = max;
        }
        self.curr_queue_offset = queue_offset;
        self.curr_read_time_ms = self.checkpoint.last_read_time_ms;
        let oldest = self.format_time_ms(now_ms()) - SLOTS_TOTAL * self.precision_ms
            + TIMER_BLANK_SLOTS * self.precision_ms;
        self.curr_read_time_ms = self.curr_read_time_ms.max(oldest);
        if self.log.end() == 0 {
            // An empty timerlog: no slot can hold a unit, so reading the week of empty
            // slots Java reads (38 MB of wheel, on every start of a broker without
            // timers) is skipped; the read time starts now.
            self.curr_read_time_ms = self.curr_read_time_ms.max(self.format_time_ms(now_ms()));
        }
        let process = i64::try_from(process_offset).unwrap_or(i64::MAX);
        let min_first = if process_offset == 0 {
            i64::MAX
        } else {
            self.wheel.check_phy_pos(self.curr_read_time_ms, process)
        };
        if min_first < process {
            tracing::warn!(
                min_first,
                process,
                "timer wheel points past the timerlog; rechecked"
            );
            self.recover_and_revise(u64::try_from(min_first.max(0)).unwrap_or(0), false);
        }
        self.commit_read_time_ms = self.curr_read_time_ms;
        self.commit_queue_offset = self.curr_queue_offset;
        self.pending_units = if self.log.end() == 0 {
            0
        } else {
            self.wheel.all_num(self.curr_read_time_ms)
        };
        self.maybe_move_write_time();
        self.prepare_checkpoint();
        tracing::info!(
            read_time_ms = self.curr_read_time_ms,
            queue_offset = self.curr_queue_offset,
            checkpoint_queue_offset = self.checkpoint.last_timer_queue_offset,
            process_offset,
            "timer recovered"
        );
    }

    /// `recoverAndRevise`: walks the timerlog from `begin`'s file and points each unit's
    /// slot at it; answers where the walk stopped.
    fn recover_and_revise(&mut self, begin: u64, check: bool) -> u64 {
        let mut revisions = Vec::new();
        let end = self.log.walk(begin, check, |position, unit| {
            revisions.push((unit.delayed_time_ms(), position));
        });
        for (time_ms, position) in revisions {
            let position = i64::try_from(position).unwrap_or(i64::MAX);
            self.wheel.revise_slot(time_ms, IGNORE, position, true);
        }
        end
    }

    /// `reviseQueueOffset`: the timer-topic queue offset of the message of the timerlog's
    /// last unit, checked against the queue (up to 20,000 units back).
    async fn revise_queue_offset(&self, process_offset: u64) -> Option<i64> {
        let last = process_offset.checked_sub(UNIT_SIZE as u64)?;
        let (_, unit) = TimerUnit::decode(&self.log.read_unit(last)?);
        let bytes = self.reader.record_at(unit.offset_py).await.ok()??;
        let Ok(Record::Message { record, .. }) = decode_record(&bytes, false) else {
            return None;
        };
        let mut offset = record.queue_offset;
        for _ in 0..REVISE_STEPS_MAX {
            if offset < 0 {
                break;
            }
            match self.reader.unit_at(TIMER_TOPIC, 0, offset).await {
                Ok(Some(cq)) if cq.physical_offset == unit.offset_py && cq.size == unit.size_py => {
                    return Some(offset);
                }
                _ => offset -= 1,
            }
        }
        tracing::warn!(
            offset_py = unit.offset_py,
            "the timerlog's last message is not in its queue"
        );
        Some(record.queue_offset)
    }

    /// `maybeMoveWriteTime`.
    fn maybe_move_write_time(&mut self) {
        let now = self.format_time_ms(now_ms());
        if self.curr_write_time_ms < now {
            self.curr_write_time_ms = now;
        }
    }

    /// One enqueue round (`enqueue(0)` and the put service): answers whether it moved.
    /// The timer topic is read in pulls of [`ENQUEUE_BATCH`] records, as a consumer reads.
    async fn enqueue(&mut self, shutdown: &Shutdown) -> Result<bool, Stop> {
        if self.config.timer_stop_enqueue {
            return Ok(false);
        }
        let mut moved = false;
        let mut taken = 0;
        while taken < ENQUEUE_ROUND_MAX {
            let offset = self.curr_queue_offset;
            let result = match self
                .reader
                .get_message(TIMER_TOPIC, 0, offset, ENQUEUE_BATCH, &PullFilter::ALL)
                .await
            {
                Ok(result) => result,
                Err(error) => {
                    tracing::error!(%error, offset, "cannot read the timer queue");
                    break;
                }
            };
            match result.status {
                GetMessageStatus::Found => {}
                GetMessageStatus::OffsetTooSmall | GetMessageStatus::OffsetOverflowBadly => {
                    let corrected = offset.max(result.min_offset).min(result.max_offset);
                    tracing::warn!(offset, corrected, "timer queue offset outside its queue");
                    self.curr_queue_offset = corrected;
                    self.commit_queue_offset = corrected;
                    break;
                }
                _ => {
                    // Nothing (more) to read; a hole of blank units is stepped over.
                    if result.next_begin_offset > offset {
                        self.curr_queue_offset = result.next_begin_offset;
                        self.commit_queue_offset = self.curr_queue_offset;
                        moved = true;
                    }
                    break;
                }
            }
            // Units are appended in order; what is due already is put before the queue
            // offset moves past it.
            let mut due = Vec::new();
            for found in &result.messages {
                let record = result.record(found);
                let size_py = i32::try_from(found.size).unwrap_or(i32::MAX);
                due.extend(self.enqueue_one(
                    found.queue_offset,
                    found.physical_offset,
                    size_py,
                    record,
                ));
            }
            self.put_all(due, shutdown).await?;
            if let Some(last) = result.messages.last() {
                self.curr_queue_offset = last.queue_offset + 1;
                self.commit_queue_offset = self.curr_queue_offset;
            }
            if result.messages.is_empty() && result.next_begin_offset <= offset {
                break;
            }
            taken += result.messages.len();
            if result.next_begin_offset > self.curr_queue_offset {
                self.curr_queue_offset = result.next_begin_offset;
                self.commit_queue_offset = self.curr_queue_offset;
            }
            moved = true;
        }
        Ok(moved)
    }

    /// One timer-topic record: a unit appended, or, when its slot is already behind the
    /// write time, the message to deliver now.
    fn enqueue_one(
        &mut self,
        offset: i64,
        offset_py: i64,
        size_py: i32,
        bytes: &[u8],
    ) -> Option<PutMessage> {
        let Ok(Record::Message { record, .. }) = decode_record(bytes, false) else {
            tracing::warn!(
                offset,
                offset_py,
                "timer queue unit without a message; skipped"
            );
            return None;
        };
        let properties = parse_properties(record.properties);
        let Some(delayed_ms) =
            property(&properties, PROPERTY_TIMER_OUT_MS).and_then(|t| t.parse::<i64>().ok())
        else {
            tracing::error!(
                offset,
                offset_py,
                "timer message without TIMER_OUT_MS; skipped"
            );
            return None;
        };
        if delayed_ms < self.curr_write_time_ms {
            // Its slot is behind the wheel's write time: delivered now, never enqueued
            // (`TIMER_ENQUEUE_MS` says so with Long.MAX_VALUE).
            return self.prepare_delivery(&record, i64::MAX, MAGIC_DEFAULT);
        }
        let delete = property(&properties, PROPERTY_TIMER_DEL_UNIQKEY).is_some();
        let real_topic = property(&properties, PROPERTY_REAL_TOPIC).map(str::to_owned);
        self.do_enqueue(
            offset_py,
            size_py,
            delayed_ms,
            delete,
            real_topic.as_deref(),
        );
        None
    }

    /// `doEnqueue`: one unit appended and chained into its slot.
    fn do_enqueue(
        &mut self,
        offset_py: i64,
        size_py: i32,
        delayed_ms: i64,
        delete: bool,
        real_topic: Option<&str>,
    ) {
        let write_time = self.curr_write_time_ms;
        let window = self.roll_window_slots * self.precision_ms;
        let mut delayed_ms = delayed_ms;
        let mut magic = MAGIC_DEFAULT;
        if delayed_ms - write_time >= window {
            magic |= MAGIC_ROLL;
            delayed_ms = if delayed_ms - write_time - window
                < self.roll_window_slots / 3 * self.precision_ms
            {
                // Enough time left before the next roll.
                write_time + self.roll_window_slots / 2 * self.precision_ms
            } else {
                write_time + window
            };
        }
        if delete {
            magic |= MAGIC_DELETE;
        }
        let slot = self.wheel.slot(delayed_ms);
        let unit = TimerUnit {
            prev_pos: slot.last_pos,
            magic,
            enqueue_time_ms: write_time,
            delay_delta_ms: i32::try_from(delayed_ms - write_time).unwrap_or(i32::MAX),
            offset_py,
            size_py,
            topic_hash: real_topic.map_or(0, java_string_hash),
        };
        let position = match self.log.append(&unit.encode()) {
            Ok(position) => {
                self.enqueued += 1;
                i64::try_from(position).unwrap_or(i64::MAX)
            }
            Err(error) => {
                // Java's append answers -1 and the unit is retried; a file that cannot be
                // made will not be made by retrying at once either.
                tracing::error!(%error, offset_py, "cannot append to the timerlog");
                return;
            }
        };
        let first = if slot.first_pos == -1 {
            position
        } else {
            slot.first_pos
        };
        let num = if delete { slot.num - 1 } else { slot.num + 1 };
        self.wheel
            .put_slot(delayed_ms, first, position, num, slot.magic);
        self.pending_units += if delete { -1 } else { 1 };
        if let Some(topic) = real_topic {
            self.metrics
                .add(topic, if delete { -1 } else { 1 }, now_ms());
            self.metrics_dirty = true;
        }
    }

    /// Delivers slots whose time the write time has passed, one at a time; answers whether
    /// it moved.
    async fn dequeue(&mut self, shutdown: &Shutdown) -> Result<bool, Stop> {
        if self.config.timer_stop_dequeue {
            return Ok(false);
        }
        let mut moved = false;
        let mut empty = 0;
        while self.curr_read_time_ms < self.curr_write_time_ms && empty < EMPTY_SLOTS_ROUND_MAX {
            let slot = self.wheel.slot(self.curr_read_time_ms);
            if slot.time_ms == -1 {
                self.move_read_time();
                empty += 1;
                moved = true;
                continue;
            }
            self.dequeue_slot(slot.last_pos, shutdown).await?;
            self.pending_units -= i64::from(slot.num);
            self.move_read_time();
            moved = true;
            glommio::yield_if_needed().await;
        }
        Ok(moved)
    }

    fn move_read_time(&mut self) {
        self.curr_read_time_ms += self.precision_ms;
        self.commit_read_time_ms = self.curr_read_time_ms;
    }

    /// One slot (`dequeue`): its chain walked back from `last_pos`, deletes first, then the
    /// rest in the order they were enqueued.
    async fn dequeue_slot(&mut self, last_pos: i64, shutdown: &Shutdown) -> Result<(), Stop> {
        let mut normal = Vec::new();
        let mut deletes = Vec::new();
        let mut position = last_pos;
        // A chain never holds more units than the log; a corrupt one cannot loop forever.
        let mut left = self.log.end() / UNIT_SIZE as u64 + 1;
        while position != -1 && left > 0 {
            left -= 1;
            let Some(bytes) = u64::try_from(position)
                .ok()
                .and_then(|p| self.log.read_unit(p))
            else {
                tracing::error!(position, "timer slot points outside the timerlog");
                break;
            };
            let (_, unit) = TimerUnit::decode(&bytes);
            if needs_delete(unit.magic) && !needs_roll(unit.magic) {
                deletes.push(unit);
            } else {
                normal.push(unit);
            }
            position = unit.prev_pos;
        }
        normal.reverse();
        if normal.is_empty() && deletes.is_empty() {
            tracing::warn!(
                read_time_ms = self.curr_read_time_ms,
                "timer slot read nothing"
            );
        }
        let mut deleted = HashSet::new();
        for unit in &deletes {
            if let Some(bytes) = self.read_message(unit.offset_py).await {
                if let Ok(Record::Message { record, .. }) = decode_record(&bytes, false) {
                    let properties = parse_properties(record.properties);
                    if let Some(key) = property(&properties, PROPERTY_TIMER_DEL_UNIQKEY) {
                        deleted.insert(key.to_owned());
                    }
                }
            }
        }
        for chunk in normal.chunks(DELIVER_CHUNK) {
            let mut due = Vec::with_capacity(chunk.len());
            for unit in chunk {
                let Some(bytes) = self.read_message(unit.offset_py).await else {
                    tracing::warn!(
                        offset_py = unit.offset_py,
                        "timer message gone from the CommitLog"
                    );
                    continue;
                };
                let Ok(Record::Message { record, .. }) = decode_record(&bytes, false) else {
                    continue;
                };
                if !deleted.is_empty() {
                    let properties = parse_properties(record.properties);
                    let key = property(&properties, PROPERTY_UNIQ_KEY)
                        .zip(property(&properties, PROPERTY_REAL_TOPIC));
                    if let Some((uniq, topic)) = key {
                        if deleted.contains(&delete_key(topic, uniq)) {
                            tracing::debug!(uniq, topic, "timer message recalled");
                            self.metric_delivered(&properties);
                            continue;
                        }
                    }
                }
                due.extend(self.prepare_delivery(&record, unit.enqueue_time_ms, unit.magic));
            }
            self.put_all(due, shutdown).await?;
        }
        Ok(())
    }

    /// The record at `offset_py` (`getMessageByCommitOffset`, three tries).
    async fn read_message(&self, offset_py: i64) -> Option<Vec<u8>> {
        for _ in 0..3 {
            match self.reader.record_at(offset_py).await {
                Ok(Some(bytes)) => return Some(bytes),
                Ok(None) => return None,
                Err(error) => tracing::warn!(%error, offset_py, "cannot read a timer message"),
            }
        }
        None
    }

    fn metric_delivered(&mut self, properties: &[(String, String)]) {
        self.dequeued += 1;
        let never_enqueued = property(properties, PROPERTY_TIMER_ENQUEUE_MS)
            .is_some_and(|t| t == i64::MAX.to_string());
        if let (Some(topic), false) = (property(properties, PROPERTY_REAL_TOPIC), never_enqueued) {
            self.metrics.add(topic, -1, now_ms());
            self.metrics_dirty = true;
        }
    }

    /// The message to put for a due record (`convert`): to its real topic, or for a roll
    /// into the timer topic; `None` for a delete whose slot came (`PUT_NO_RETRY`) or a
    /// record without its real topic.
    fn prepare_delivery(
        &mut self,
        record: &MessageRecord<'_>,
        enqueue_time_ms: i64,
        magic: i32,
    ) -> Option<PutMessage> {
        let roll = needs_roll(magic);
        let mut properties = parse_properties(record.properties);
        if enqueue_time_ms == i64::MAX {
            set_property(
                &mut properties,
                PROPERTY_TIMER_ENQUEUE_MS,
                i64::MAX.to_string(),
            );
        }
        self.metric_delivered(&properties);
        if !roll && property(&properties, PROPERTY_TIMER_DEL_UNIQKEY).is_some() {
            return None;
        }
        let message = convert(record, properties, enqueue_time_ms, roll);
        if message.is_none() {
            tracing::error!(
                offset_py = record.physical_offset,
                "timer message without its real topic; dropped"
            );
        }
        message
    }

    /// Puts `messages` (`doPut`), [`PUTS_IN_FLIGHT`] at a time as Java's
    /// `timerPutMessageThreadNum` threads do: errors of a message itself drop it, as Java's;
    /// the rest are tried again, three times unless `timerEnableRetryUntilSuccess`.
    ///
    /// # Errors
    /// [`Stop`] when the broker shuts down before every put is answered.
    async fn put_all(&self, messages: Vec<PutMessage>, shutdown: &Shutdown) -> Result<(), Stop> {
        use futures::stream::StreamExt;
        let retry_until_success = self.config.timer_enable_retry_until_success;
        let pause =
            Duration::from_millis(u64::try_from(500 * self.precision_ms / 1000).unwrap_or(500));
        let results: Vec<Result<(), Stop>> = futures::stream::iter(messages)
            .map(|message| {
                put_with_retries(&self.store, message, retry_until_success, pause, shutdown)
            })
            .buffer_unordered(PUTS_IN_FLIGHT)
            .collect()
            .await;
        results.into_iter().collect()
    }

    /// `prepareTimerCheckPoint` (a master's: it keeps `masterTimerQueueOffset` itself).
    fn prepare_checkpoint(&mut self) {
        let checkpoint = &mut self.checkpoint;
        checkpoint.last_timer_log_flush_pos = i64::try_from(self.log.end()).unwrap_or(i64::MAX);
        checkpoint.last_read_time_ms = self.commit_read_time_ms;
        checkpoint.master_timer_queue_offset = self.commit_queue_offset;
        if self.commit_read_time_ms != self.last_commit_read_time_ms
            || self.commit_queue_offset != self.last_commit_queue_offset
        {
            checkpoint.next_version(0, now_ms());
            self.last_commit_read_time_ms = self.commit_read_time_ms;
            self.last_commit_queue_offset = self.commit_queue_offset;
        }
        checkpoint.last_timer_queue_offset = self
            .commit_queue_offset
            .min(checkpoint.master_timer_queue_offset);
    }

    /// `TimerFlushService`'s round: checkpoint values taken, then timerlog, wheel and
    /// checkpoint synced in that order, so the checkpoint never covers an unsynced unit.
    async fn flush(&mut self) {
        self.prepare_checkpoint();
        let synced = async {
            self.log.flush().await?;
            self.wheel.flush().await
        }
        .await;
        if let Err(error) = synced {
            tracing::error!(%error, "cannot sync the timer's files; checkpoint kept");
            return;
        }
        if let Err(error) = self.checkpoint_file.flush(&self.checkpoint).await {
            tracing::error!(%error, "cannot write config/timercheck");
        }
        if self.metrics_dirty {
            self.metrics_dirty = false;
            let json = self.metrics.to_json().into_bytes();
            if let Err(error) = write_atomically_off_shard(self.metrics_path.clone(), json).await {
                tracing::error!(%error, "cannot write config/timermetrics");
            }
        }
    }
}
