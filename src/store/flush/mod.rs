//! Group commit: the writer's loop that turns a stream of puts into few writes and syncs
//! (`GroupCommitService` and `FlushRealTimeService` in Java).
//!
//! Puts queue on a bounded channel; a put is one message, or a batch appended whole and
//! answered once. A shard may also hand over many independent puts as one request
//! ([`PutRequest::Many`], see `put_coalescer`), so that crossing to the writer's core
//! and back costs once for all of them. The loop takes every put waiting (up to a batch
//! limit), appends them, and then:
//! - `SYNC_FLUSH`: writes and fdatasyncs once, then answers each put of the batch; puts that
//!   arrive meanwhile wait in the channel and form the next batch, so the batch grows with the
//!   load and no timer is involved;
//! - `ASYNC_FLUSH`: writes once (the data survives a crash of the process) and answers; every
//!   `flushIntervalCommitLog` a sync of what is written by then runs beside the writes (as
//!   Java's flush thread forces the mapped file while puts go on): no put waits for it, and
//!   the store time it reports synced is that of the newest record written before it
//!   began. The loop's end syncs everything.
//!
//! A put is never answered "stored" unless its write (and under `SYNC_FLUSH` its sync)
//! succeeded; after a failure every later put is refused (the CommitLog is poisoned).
//!
//! This file is the loop and its I/O; the ledger it keeps of the puts appended and not yet
//! answered (whom a finished job answers, when the next job is due) is `pending`.

pub use super::commit_log::PutMessage;
use super::commit_log::{Appended, CommitLog, JobExtent, SegmentOpener, StoreError};
pub use super::config::FlushDiskType;
use super::dispatch::{DispatchEntry, TopicDrop};
use super::message::body_crc32;
use super::segment_writer::WriteOutcome;
use ferromq_uring::IoError;
use futures::channel::{mpsc, oneshot};
use futures::stream::FuturesOrdered;
use futures::StreamExt;
use pending::{Pending, Reply};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

mod pending;

/// The answer to a put.
pub type PutResult = Result<Appended, StoreError>;

/// The answer to a batch put: where each record landed, in order.
pub type BatchPutResult = Result<Vec<Appended>, StoreError>;

/// Where the answers to [`PutRequest::Many`] go: each put's outcome, in order, in parts, each
/// part sent as soon as its puts are stored (a write may end among them); the sender is
/// dropped after the last.
pub type ManyPutAnswers = mpsc::UnboundedSender<Vec<PutResult>>;

/// A put waiting for the writer.
#[derive(Debug)]
pub enum PutRequest {
    /// One message.
    One {
        /// The message.
        message: PutMessage,
        /// Where the answer goes.
        reply: oneshot::Sender<PutResult>,
    },
    /// Messages stored back to back, whole or not at all (Java's `putMessages`): one
    /// segment, consecutive queue offsets, one store time, one answer.
    Batch {
        /// The messages, in order.
        messages: Vec<PutMessage>,
        /// Each message's body CRC, as for [`PutRequest::Many`]: one per message, or the
        /// writer computes them.
        body_crcs: Vec<i32>,
        /// Where the answer goes.
        reply: oneshot::Sender<BatchPutResult>,
    },
    /// Independent puts handed over together: each is stored or refused on its own, exactly
    /// as if sent one by one in this order; their outcomes go back in order, in a few parts.
    Many {
        /// The messages, in order.
        messages: Vec<PutMessage>,
        /// Each message's body CRC (Java's), computed on the shard that made the puts so that
        /// this work stays off the writer's core; one per message, or the writer computes
        /// them.
        body_crcs: Vec<i32>,
        /// Where the answers go.
        reply: ManyPutAnswers,
    },
    /// Bytes a master replicated, to append at `offset` (a slave's end; see
    /// [`CommitLog::append_replica`]), with the entries of the records they complete.
    /// Answered, with the span appended, once they are written as a put would be.
    Replica {
        /// Where they go.
        offset: u64,
        /// The CommitLog's bytes, as the master sent them.
        bytes: Vec<u8>,
        /// The dispatch entries of the records that end in them, in order.
        entries: Vec<DispatchEntry>,
        /// Where the answer goes.
        reply: oneshot::Sender<PutResult>,
    },
    /// A topic deleted (`DELETE_TOPIC_IN_BROKER`): its queues start again at offset 0, and
    /// dispatch drops its ConsumeQueues once it has dispatched every record appended before.
    /// Answered by dispatch, once it has.
    DropTopic {
        /// The topic.
        topic: String,
        /// Where the answer goes.
        reply: oneshot::Sender<()>,
    },
}

impl PutRequest {
    /// A batch put, with its bodies' CRCs computed here, on the calling shard: work kept off
    /// the writer's core.
    #[must_use]
    pub fn batch(messages: Vec<PutMessage>, reply: oneshot::Sender<BatchPutResult>) -> Self {
        let body_crcs = messages.iter().map(|m| body_crc32(&m.body)).collect();
        PutRequest::Batch {
            messages,
            body_crcs,
            reply,
        }
    }
}

/// Statistics of a finished loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupCommitStats {
    /// Puts answered.
    pub puts: u64,
    /// Batches (writes) done.
    pub batches: u64,
    /// fdatasyncs done.
    pub syncs: u64,
}

/// Most puts appended before a write.
pub const BATCH_PUTS_MAX: usize = 4096;

/// Most record bytes appended before a write: bounds the tail kept in memory (4096 puts of
/// Java's 4 MiB `maxMessageSize` would be 16 GiB). Puts beyond wait in the channel.
pub const BATCH_BYTES_MAX: usize = 32 << 20;

/// Write jobs in flight at once, at most. Beyond one they write whole blocks only, so no
/// two write the same block. On the development disk, `O_DSYNC` writes of 512 KiB into new
/// extents go 0.83 GB/s one at a time and 1.33 two at a time (`pwrite` from threads; on the
/// later 2-core VM 1.6 and 2.1, `ferromq-bench commitlog --raw-sync-depth 1|2`); the
/// CommitLog bench put 1.25x more through with two jobs than with one, and less with three
/// or four (more io-wq workers on the writer's core). On the 2-core VM one job at a time
/// (of everything waiting) puts 0.45–0.6x as much through: producers then wait for the
/// disk and the disk for the encoder in turn.
pub const JOBS_IN_FLIGHT_MAX: usize = 2;

/// While a job is in flight, the loop yields to the executor after this many appends.
const YIELD_EVERY_PUTS: usize = 32;

/// A job starts once this many record bytes are appended, if the disk may take one more
/// (with none in flight it starts anyway); what arrives meanwhile is encoded while it runs.
/// The size follows the load: three eighths of the bytes recently awaiting answers
/// ([`Pending::job_start_bytes`]), within these bounds.
///
/// The least is about where a write + fdatasync stops getting much cheaper per byte on the
/// development disk (64 KiB: 0.46 GB/s, 256 KiB: 1.15, 1 MiB: 1.65); with 1 MiB or less
/// awaiting answers, bigger jobs wait for bytes that do not come. With 4 MiB awaiting, jobs
/// of 1 MiB put 1.2–1.4x more through than jobs of 256 KiB (CommitLog bench, 64 producers
/// of 16-message batches).
const JOB_START_BYTES_MIN: usize = 256 << 10;
/// The most record bytes a job waits for before it starts: see [`JOB_START_BYTES_MIN`].
const JOB_START_BYTES_MAX: usize = 1 << 20;

/// The most record bytes a job of whole blocks takes ([`Pending::job_bytes_most`]): bounds
/// the wait of the puts at its end, and the bytes the writer copies to keep what it leaves.
pub const JOB_BYTES_MAX: usize = 4 << 20;

/// What the store wires into the writer loop: admission of each put (the disk-space gate),
/// the dispatch entries of appended records, and where committed batches go.
pub trait CommitObserver {
    /// Checked before each put is appended; an error refuses that put.
    ///
    /// # Errors
    /// Why the put is refused.
    fn admit(&mut self, _message: &PutMessage) -> Result<(), StoreError> {
        Ok(())
    }

    /// `message` was appended at `appended`, stored at `store_timestamp`.
    fn appended(&mut self, _message: &PutMessage, _appended: &Appended, _store_timestamp: i64) {}

    /// A topic's queues start again at 0 from the drop's offset (the end of what was
    /// appended when it was deleted): what dispatch must drop, in order with the records. An
    /// observer without dispatch answers it at once.
    fn topic_dropped(&mut self, drop: TopicDrop) -> impl std::future::Future<Output = ()> {
        let _ = drop.done.send(());
        std::future::ready(())
    }

    /// Replicated bytes were appended (`moved_to`: the log was empty and now starts there):
    /// `entries` are the records they complete, to dispatch once committed.
    fn replicated(&mut self, _moved_to: Option<u64>, _entries: Vec<DispatchEntry>) {}

    /// Everything appended below `end` is committed, told before its puts are answered, so
    /// that a reader asked after an answer finds the committed end past the answered record.
    fn committing(&mut self, _end: u64) {}

    /// Everything appended below `end` is committed (written, and under `SYNC_FLUSH`
    /// synced); what was appended beyond it waits for a later call.
    fn committed(&mut self, _end: u64) -> impl std::future::Future<Output = ()> {
        std::future::ready(())
    }

    /// What was appended since the last commit will not be committed (the write failed).
    fn abandoned(&mut self) {}

    /// Everything stored up to `store_timestamp` is synced.
    fn synced(&mut self, _store_timestamp: i64) {}

    /// The CommitLog is on the device up to `end` (told after each write job and the last
    /// sync, whether or not they moved it).
    fn flushed_to(&mut self, _end: u64) {}
}

/// The observer that watches nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoObserver;

impl CommitObserver for NoObserver {}

/// Runs the writer loop until `requests` closes; returns the log and what it did.
pub async fn run_group_commit<O, C>(
    log: CommitLog<O>,
    requests: mpsc::Receiver<PutRequest>,
    mode: FlushDiskType,
    clock_ms: C,
) -> (CommitLog<O>, GroupCommitStats)
where
    O: SegmentOpener,
    C: Fn() -> i64,
{
    run_group_commit_with(log, requests, mode, clock_ms, &mut NoObserver).await
}

/// [`run_group_commit`] reporting to `observer`.
///
/// While jobs are in flight the loop keeps taking puts and encoding them, and the moment the
/// disk may take more, their job starts. Under load the disk is never idle waiting for the
/// encoder, nor the encoder for the disk; with a job's worth of puts waiting, up to
/// [`JOBS_IN_FLIGHT_MAX`] jobs of whole blocks are in flight at once.
pub async fn run_group_commit_with<O, C, W>(
    mut log: CommitLog<O>,
    mut requests: mpsc::Receiver<PutRequest>,
    mode: FlushDiskType,
    clock_ms: C,
    observer: &mut W,
) -> (CommitLog<O>, GroupCommitStats)
where
    O: SegmentOpener,
    C: Fn() -> i64,
    W: CommitObserver,
{
    let mut stats = GroupCommitStats::default();
    let mut puts = Pending::default();
    // Finished in the order they started.
    let mut jobs: FuturesOrdered<glommio::Task<WriteOutcome>> = FuturesOrdered::new();
    // Store time of the newest record written but not yet synced (ASYNC_FLUSH).
    let mut unsynced: Option<i64> = None;
    // ASYNC_FLUSH's periodic sync, in flight beside the writes, with the store time of the
    // newest record written before it started: what it makes durable.
    let mut syncing: Option<PeriodicSync> = None;
    // ASYNC_FLUSH syncs on a fixed schedule, whatever the load: the deadline does not move
    // when puts arrive.
    let mut next_sync = Instant::now() + sync_interval(mode);
    // When the periodic sync in flight began, and when each job in flight began (in order).
    let mut sync_started = Instant::now();
    let mut job_starts: VecDeque<Instant> = VecDeque::new();
    let mut closed = false;
    loop {
        if mode != FlushDiskType::SyncFlush && syncing.is_none() && Instant::now() >= next_sync {
            // The sync covers what is written now; writes and answers go on while it runs.
            match log.take_syncs() {
                Ok(Some(syncs)) => {
                    syncing = Some((glommio::spawn_local(syncs.run()), unsynced.take()));
                    sync_started = Instant::now();
                }
                Ok(None) => {
                    // Everything written is on the device already.
                    if let Some(stored) = unsynced.take() {
                        observer.synced(stored);
                    }
                    next_sync = Instant::now() + sync_interval(mode);
                }
                // Poisoned: the next job start refuses what waits; nothing is synced again.
                Err(_) => {
                    unsynced = None;
                    next_sync = Instant::now() + sync_interval(mode);
                }
            }
        }
        // Start every job the disk may take now: under SYNC_FLUSH each syncs what it wrote.
        while jobs.len() < JOBS_IN_FLIGHT_MAX {
            let extent = if puts.job_ready() {
                JobExtent::WholeBlocks {
                    most: puts.job_bytes_most(),
                }
            } else if jobs.is_empty() && log.has_unwritten() {
                JobExtent::Everything
            } else {
                break;
            };
            match log.start_write(mode == FlushDiskType::SyncFlush, extent) {
                Ok(Some(job)) => {
                    jobs.push_back(glommio::spawn_local(job.run()));
                    job_starts.push_back(Instant::now());
                    let left = usize::try_from(log.unissued_bytes()).unwrap_or(usize::MAX);
                    puts.job_started(left);
                }
                Ok(None) => break,
                Err(_) => {
                    // Poisoned: nothing can be written or synced any more.
                    stats.puts += puts.refuse_all();
                    unsynced = None;
                    observer.abandoned();
                    break;
                }
            }
        }
        if closed && jobs.is_empty() && syncing.is_none() {
            break;
        }
        // Idle under ASYNC_FLUSH: wake for the next periodic sync.
        let idle = mode != FlushDiskType::SyncFlush && jobs.is_empty() && syncing.is_none();
        // With the puts' bound reached, a job's end must make room first.
        let take_requests = !closed && (!puts.is_full() || jobs.is_empty());
        let sync_at = idle.then_some(next_sync);
        let event = next_event(
            &mut requests,
            &mut jobs,
            &mut syncing,
            sync_at,
            take_requests,
        )
        .await;
        match event {
            Event::Request(None) => closed = true,
            Event::Request(Some(first)) => {
                let now = clock_ms();
                let mut request = Some(first);
                while let Some(put) = request {
                    match append_request(&mut log, observer, put, now).await {
                        Ok((reply, span)) => puts.appended(reply, span, now),
                        // Refused before it reached the log: nothing to wait for.
                        Err(answered) => stats.puts += answered,
                    }
                    // With a job's worth appended and room on the disk, start it; the rest is
                    // encoded while it writes.
                    let job_ready = puts.job_ready() && jobs.len() < JOBS_IN_FLIGHT_MAX;
                    request = if puts.is_full() || job_ready {
                        None
                    } else {
                        requests.try_recv().ok()
                    };
                    if !jobs.is_empty() && puts.job_puts % YIELD_EVERY_PUTS == 0 {
                        // Let the job tasks go on from their writes.
                        futures_lite::future::yield_now().await;
                    }
                }
            }
            Event::SyncDue => {}
            Event::Synced(result, covers) => {
                match result {
                    Ok(end) => {
                        log_if_slow("periodic sync", sync_started);
                        log.synced(end);
                        stats.syncs += 1;
                        if let Some(stored) = covers {
                            observer.synced(stored);
                        }
                        observer.flushed_to(log.flushed_offset());
                    }
                    Err(error) => {
                        // What was written may not be on the device: refuse everything from
                        // now on, as after a failed write.
                        tracing::error!(%error, "periodic CommitLog sync failed");
                        log.sync_failed();
                        stats.puts += puts.refuse_all();
                        unsynced = None;
                        observer.abandoned();
                    }
                }
                next_sync = Instant::now() + sync_interval(mode);
            }
            Event::Written(None) => unreachable!("a job ended while none was in flight"),
            Event::Written(Some(outcome)) => {
                let synced = outcome.syncs();
                if let Some(started) = job_starts.pop_front() {
                    log_if_slow(if synced { "write and sync" } else { "write" }, started);
                }
                let written = log.finish_write(outcome);
                stats.batches += 1;
                match written {
                    Ok(end) => {
                        // Before the answers: a SYNC_FLUSH put answered is never shown
                        // waiting for a flush.
                        observer.flushed_to(log.flushed_offset());
                        let boundary = puts.boundary_once_answered(end);
                        observer.committing(boundary);
                        let (answered, newest) = puts.answer_below(end);
                        stats.puts += answered;
                        unsynced = unsynced.max(newest);
                        if synced {
                            stats.syncs += 1;
                            if let Some(stored) = unsynced.take() {
                                observer.synced(stored);
                            }
                        }
                        // A job of whole blocks may end inside a record: commit up to the
                        // record's start, so that what is committed is whole records.
                        debug_assert_eq!(puts.record_boundary(end), boundary);
                        observer.committed(boundary).await;
                    }
                    Err(StoreError::NotWritable) => {
                        // An earlier job (or sync) failed; its puts are refused already.
                        stats.puts += puts.refuse_all();
                    }
                    Err(error) => {
                        if synced {
                            tracing::error!(%error, "CommitLog sync failed");
                        }
                        // Nothing appended since the last good job can be written.
                        stats.puts += puts.refuse_all();
                        unsynced = None;
                        observer.abandoned();
                    }
                }
            }
        }
    }
    if let Some(stored) = unsynced {
        if sync(&mut log, &mut stats).await {
            observer.synced(stored);
        }
    }
    observer.flushed_to(log.flushed_offset());
    (log, stats)
}

/// Waits for what wakes the loop: the periodic sync ending, a job ending, a request (if
/// `take_requests`), or the time of the next periodic sync (`sync_at`).
async fn next_event(
    requests: &mut mpsc::Receiver<PutRequest>,
    jobs: &mut FuturesOrdered<glommio::Task<WriteOutcome>>,
    syncing: &mut Option<PeriodicSync>,
    sync_at: Option<Instant>,
    take_requests: bool,
) -> Event {
    let mut timer = sync_at.map(|at| {
        Box::pin(glommio::timer::sleep(
            at.saturating_duration_since(Instant::now()),
        ))
    });
    std::future::poll_fn(|cx| {
        if let Some((task, covers)) = syncing {
            if let Poll::Ready(result) = Pin::new(task).poll(cx) {
                let covers = *covers;
                *syncing = None;
                return Poll::Ready(Event::Synced(result, covers));
            }
        }
        if !jobs.is_empty() {
            if let Poll::Ready(outcome) = jobs.poll_next_unpin(cx) {
                return Poll::Ready(Event::Written(outcome));
            }
        }
        if take_requests {
            if let Poll::Ready(request) = requests.poll_next_unpin(cx) {
                return Poll::Ready(Event::Request(request));
            }
        }
        match timer.as_mut().map(|timer| timer.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(Event::SyncDue),
            _ => Poll::Pending,
        }
    })
    .await
}

/// Appends what `request` carries, admitted by `observer` and reported to it; returns where
/// its answer goes and the span of its records, or, if it is answered already (refused before
/// it reached the log, or empty), how many puts that answered.
async fn append_request<O, W>(
    log: &mut CommitLog<O>,
    observer: &mut W,
    request: PutRequest,
    now: i64,
) -> Result<(Reply, Appended), u64>
where
    O: SegmentOpener,
    W: CommitObserver,
{
    match request {
        PutRequest::DropTopic { topic, reply } => {
            log.drop_topic(&topic);
            let at = log.write_offset();
            observer
                .topic_dropped(TopicDrop {
                    at,
                    topic,
                    done: reply,
                })
                .await;
            Err(0)
        }
        PutRequest::Replica {
            offset,
            bytes,
            entries,
            reply,
        } => {
            let moves = log.write_offset() == 0 && offset != 0;
            match log.append_replica(offset, &bytes).await {
                Ok(appended) => {
                    log.note_replicated(&entries);
                    observer.replicated(moves.then_some(offset), entries);
                    Ok((Reply::One(reply), appended))
                }
                Err(error) => {
                    let _ = reply.send(Err(error));
                    Err(1)
                }
            }
        }
        PutRequest::One { message, reply } => {
            match append_one(log, observer, &message, None, now).await {
                Ok(appended) => Ok((Reply::One(reply), appended)),
                Err(error) => {
                    let _ = reply.send(Err(error));
                    Err(1)
                }
            }
        }
        PutRequest::Batch {
            messages,
            body_crcs,
            reply,
        } => {
            let Some(first) = messages.first() else {
                let _ = reply.send(Ok(Vec::new()));
                return Err(1);
            };
            let mut records = Vec::with_capacity(messages.len());
            let appended = match observer.admit(first) {
                Ok(()) => {
                    let body_crcs = one_per_message(body_crcs, messages.len());
                    log.append_each(&messages, &body_crcs, now, |appended| {
                        records.push(appended);
                    })
                    .await
                }
                Err(refused) => Err(refused),
            };
            if let Err(error) = appended {
                let _ = reply.send(Err(error));
                return Err(1);
            }
            for (message, appended) in messages.iter().zip(&records) {
                observer.appended(message, appended, now);
            }
            let span = span_of(&records);
            Ok((Reply::Batch(reply, records), span))
        }
        PutRequest::Many {
            messages,
            body_crcs,
            reply,
        } => {
            let mut outcomes = VecDeque::with_capacity(messages.len());
            // From the first record appended to the end of the last (across a roll, with the
            // padding between).
            let mut span: Option<(Appended, u64)> = None;
            let body_crcs = one_per_message(body_crcs, messages.len());
            for (index, message) in messages.iter().enumerate() {
                let body_crc = body_crcs.get(index).copied();
                let appended = append_one(log, observer, message, body_crc, now).await;
                if let Ok(appended) = &appended {
                    let end = appended.physical_offset + appended.size as u64;
                    span = Some((span.map_or(*appended, |(first, _)| first), end));
                }
                outcomes.push_back(appended);
            }
            match span {
                Some((first, end)) => {
                    let size = usize::try_from(end - first.physical_offset)
                        .expect("a span of records appended in one go fits memory");
                    Ok((Reply::Many(reply, outcomes), Appended { size, ..first }))
                }
                None => {
                    // Every one refused (or none sent): nothing to wait for.
                    let answered = outcomes.len() as u64;
                    let _ = reply.unbounded_send(outcomes.into());
                    Err(answered)
                }
            }
        }
    }
}

/// The body CRCs a request carries if there is one per message; else none, and the writer
/// computes them all.
fn one_per_message(body_crcs: Vec<i32>, messages: usize) -> Vec<i32> {
    if body_crcs.len() == messages {
        body_crcs
    } else {
        Vec::new()
    }
}

/// Appends one message (with its body CRC, if the caller computed it), admitted by `observer`
/// and reported to it.
async fn append_one<O, W>(
    log: &mut CommitLog<O>,
    observer: &mut W,
    message: &PutMessage,
    body_crc: Option<i32>,
    now: i64,
) -> PutResult
where
    O: SegmentOpener,
    W: CommitObserver,
{
    observer.admit(message)?;
    let appended = match body_crc {
        Some(body_crc) => log.append_with_body_crc(message, body_crc, now).await?,
        None => log.append(message, now).await?,
    };
    observer.appended(message, &appended, now);
    Ok(appended)
}

/// One place covering the records of a batch: the first's offsets, every record's bytes.
fn span_of(records: &[Appended]) -> Appended {
    let first = records.first().expect("a batch appended has records");
    Appended {
        size: records.iter().map(|record| record.size).sum(),
        ..*first
    }
}

/// ASYNC_FLUSH's periodic sync in flight, with the store time of the newest record it covers.
type PeriodicSync = (glommio::Task<Result<u64, IoError>>, Option<i64>);

/// What woke the loop.
enum Event {
    Request(Option<PutRequest>),
    Written(Option<WriteOutcome>),
    /// The periodic sync ended, with the store time of the newest record it covers.
    Synced(Result<u64, IoError>, Option<i64>),
    SyncDue,
}

/// A CommitLog write or sync taking longer than this is logged (Java's flush service logs
/// "Flush data to disk costs" past the same 500 ms).
const SLOW_DISK_LOG: Duration = Duration::from_millis(500);

/// Logs a write or sync begun at `started` that took longer than [`SLOW_DISK_LOG`]: the
/// disk is the cause of any put latency that long.
fn log_if_slow(what: &str, started: Instant) {
    let took = started.elapsed();
    if took > SLOW_DISK_LOG {
        let ms = u64::try_from(took.as_millis()).unwrap_or(u64::MAX);
        tracing::warn!(what, ms, "slow CommitLog disk operation");
    }
}

fn sync_interval(mode: FlushDiskType) -> Duration {
    match mode {
        FlushDiskType::SyncFlush => Duration::ZERO,
        FlushDiskType::AsyncFlush { interval } => interval,
    }
}

async fn sync<O: SegmentOpener>(log: &mut CommitLog<O>, stats: &mut GroupCommitStats) -> bool {
    match log.flush().await {
        Ok(_) => {
            stats.syncs += 1;
            true
        }
        Err(error) => {
            tracing::error!(%error, "periodic CommitLog sync failed");
            false
        }
    }
}
