//! Group commit: the writer's loop that turns a stream of puts into few writes and syncs
//! (`GroupCommitService` and `FlushRealTimeService` in Java).
//!
//! Puts queue on a bounded channel; a put is one message, or a batch appended whole and
//! answered once. A shard may also hand over many independent puts as one request
//! ([`PutRequest::Many`], see [`super::put_coalescer`]), so that crossing to the writer's core
//! and back costs once for all of them. The loop takes every put waiting (up to a batch
//! limit), appends them, and then:
//! - `SYNC_FLUSH`: writes and fdatasyncs once, then answers each put of the batch; puts that
//!   arrive meanwhile wait in the channel and form the next batch, so the batch grows with the
//!   load and no timer is involved;
//! - `ASYNC_FLUSH`: writes once (the data survives a crash of the process) and answers; the
//!   sync happens every `flushIntervalCommitLog`, or when the loop ends.
//!
//! A put is never answered "stored" unless its write (and under `SYNC_FLUSH` its sync)
//! succeeded; after a failure every later put is refused (the CommitLog is poisoned).

pub use super::commit_log::PutMessage;
use super::commit_log::{Appended, CommitLog, JobExtent, SegmentOpener, StoreError};
use super::dispatch::DispatchEntry;
use super::message::body_crc32;
use super::reput::TopicDrop;
use super::segment_writer::WriteOutcome;
use futures::channel::{mpsc, oneshot};
use futures::future::{select, Either};
use futures::stream::FuturesOrdered;
use futures::StreamExt;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// `flushDiskType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushDiskType {
    /// Answer after the fdatasync that covers the put.
    SyncFlush,
    /// Answer after the write; fdatasync every interval.
    AsyncFlush {
        /// `flushIntervalCommitLog` (500 ms in Java).
        interval: Duration,
    },
}

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
    // ASYNC_FLUSH syncs on a fixed schedule, whatever the load: the deadline does not move
    // when puts arrive.
    let mut next_sync = Instant::now() + sync_interval(mode);
    let mut closed = false;
    loop {
        // Start every job the disk may take now.
        while jobs.len() < JOBS_IN_FLIGHT_MAX {
            let sync_due = match mode {
                FlushDiskType::SyncFlush => true,
                FlushDiskType::AsyncFlush { .. } => Instant::now() >= next_sync,
            };
            // A periodic sync covers only the writes finished before it: it runs alone.
            let may_overlap = mode == FlushDiskType::SyncFlush || !sync_due;
            let extent = if puts.job_ready() && may_overlap {
                JobExtent::WholeBlocks {
                    most: puts.job_bytes_most(),
                }
            } else if jobs.is_empty() && (log.has_unwritten() || (sync_due && unsynced.is_some())) {
                JobExtent::Everything
            } else {
                break;
            };
            match log.start_write(sync_due, extent) {
                Ok(Some(job)) => {
                    jobs.push_back(glommio::spawn_local(job.run()));
                    let left = usize::try_from(log.unissued_bytes()).unwrap_or(usize::MAX);
                    puts.job_started(left);
                }
                Ok(None) => {
                    if extent == JobExtent::Everything {
                        // Nothing left to write or sync.
                        unsynced = None;
                    }
                    break;
                }
                Err(_) => {
                    // Poisoned: nothing can be written or synced any more.
                    stats.puts += puts.refuse_all();
                    unsynced = None;
                    observer.abandoned();
                    break;
                }
            }
        }
        if closed && jobs.is_empty() {
            break;
        }
        let event = if jobs.is_empty() {
            match mode {
                FlushDiskType::SyncFlush => Event::Request(requests.next().await),
                FlushDiskType::AsyncFlush { .. } => {
                    let timer =
                        glommio::timer::sleep(next_sync.saturating_duration_since(Instant::now()));
                    match select(requests.next(), Box::pin(timer)).await {
                        Either::Left((request, _)) => Event::Request(request),
                        Either::Right(((), _)) => Event::SyncDue,
                    }
                }
            }
        } else if closed || puts.is_full() {
            Event::Written(jobs.next().await)
        } else {
            match select(requests.next(), jobs.next()).await {
                Either::Left((request, _)) => Event::Request(request),
                Either::Right((outcome, _)) => Event::Written(outcome),
            }
        };
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
            Event::SyncDue => {
                if unsynced.is_none() {
                    next_sync = Instant::now() + sync_interval(mode);
                }
            }
            Event::Written(None) => unreachable!("a job ended while none was in flight"),
            Event::Written(Some(outcome)) => {
                let synced = outcome.syncs();
                let written = log.finish_write(outcome);
                stats.batches += 1;
                match written {
                    Ok(end) => {
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
                            next_sync = Instant::now() + sync_interval(mode);
                        }
                        // A job of whole blocks may end inside a record: commit up to the
                        // record's start, so that what is committed is whole records.
                        debug_assert_eq!(puts.record_boundary(end), boundary);
                        observer.committed(boundary).await;
                    }
                    Err(StoreError::NotWritable) => {
                        // An earlier job failed; its puts are refused already.
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
    (log, stats)
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

/// Where the answer to a put goes.
enum Reply {
    One(oneshot::Sender<PutResult>),
    /// With where each record landed.
    Batch(oneshot::Sender<BatchPutResult>, Vec<Appended>),
    /// With the outcomes not sent yet, in order: where each landed, or why it was refused.
    Many(ManyPutAnswers, VecDeque<PutResult>),
}

impl Reply {
    /// Puts this answers: a batch is one, many puts are each one.
    fn puts(&self) -> u64 {
        match self {
            Reply::One(_) | Reply::Batch(..) => 1,
            Reply::Many(_, outcomes) => outcomes.len() as u64,
        }
    }

    /// Answers "stored at" the put's place (for a batch, at its records; for many puts, at
    /// each one's, and the refusals as they were).
    fn stored(self, appended: Appended) {
        // A put whose caller went away needs no answer.
        match self {
            Reply::One(reply) => {
                let _ = reply.send(Ok(appended));
            }
            Reply::Batch(reply, records) => {
                let _ = reply.send(Ok(records));
            }
            Reply::Many(reply, outcomes) => {
                let _ = reply.unbounded_send(outcomes.into());
            }
        }
    }

    /// Answers that the put will never be written: an I/O failure poisoned the CommitLog.
    fn unwritable(self) {
        match self {
            Reply::One(reply) => {
                let _ = reply.send(Err(StoreError::NotWritable));
            }
            Reply::Batch(reply, _) => {
                let _ = reply.send(Err(StoreError::NotWritable));
            }
            Reply::Many(reply, outcomes) => {
                let refused = outcomes
                    .into_iter()
                    .map(|outcome| outcome.and(Err(StoreError::NotWritable)))
                    .collect();
                let _ = reply.unbounded_send(refused);
            }
        }
    }
}

/// Puts appended and not yet answered, in CommitLog order, what was appended since the last
/// job started, and how big the next job should be.
#[derive(Default)]
struct Pending {
    waiting: VecDeque<Waiting>,
    /// Record bytes of the puts in `waiting`.
    waiting_bytes: usize,
    /// The most bytes awaiting answers when a job started, lately: raised to the current
    /// figure at each job start, and otherwise decaying by an eighth per job.
    load_bytes: usize,
    /// Puts appended since the last job started.
    job_puts: usize,
    /// Record bytes appended that no job has taken yet.
    job_bytes: usize,
}

/// A put appended and not answered yet.
struct Waiting {
    /// Where its records landed, all of them (one, or a whole batch).
    appended: Appended,
    /// Its store time.
    stored: i64,
    reply: Reply,
}

impl Waiting {
    /// End offset of its record.
    fn end(&self) -> u64 {
        self.appended.physical_offset + self.appended.size as u64
    }

    /// For many puts handed over together and ending beyond `end`: answers those whose
    /// records end at or below it (with the refusals among them), and moves the start of what
    /// waits to the first record left. Returns how many puts that answered and how many bytes
    /// it took off the span; `None` if none or this is not many puts.
    fn answer_part_below(&mut self, end: u64) -> Option<(u64, usize)> {
        let Reply::Many(reply, outcomes) = &mut self.reply else {
            return None;
        };
        let below = outcomes
            .iter()
            .take_while(|outcome| match outcome {
                Ok(record) => record.physical_offset + record.size as u64 <= end,
                Err(_) => true,
            })
            .count();
        if below == 0 {
            return None;
        }
        // The span ends beyond `end`, so a record is left.
        let next_start = outcomes
            .iter()
            .skip(below)
            .find_map(|outcome| outcome.as_ref().ok().map(|record| record.physical_offset))?;
        let part: Vec<PutResult> = outcomes.drain(..below).collect();
        let answered = part.len() as u64;
        let _ = reply.unbounded_send(part);
        let done_bytes = usize::try_from(next_start - self.appended.physical_offset)
            .expect("within the span of the puts");
        self.appended.size -= done_bytes;
        self.appended.physical_offset = next_start;
        Some((answered, done_bytes))
    }
}

impl Pending {
    fn appended(&mut self, reply: Reply, appended: Appended, stored: i64) {
        self.waiting.push_back(Waiting {
            appended,
            stored,
            reply,
        });
        self.job_puts += 1;
        self.job_bytes += appended.size;
        self.waiting_bytes += appended.size;
    }

    /// A job started; it left `left` bytes appended for later jobs.
    fn job_started(&mut self, left: usize) {
        self.load_bytes = (self.load_bytes - self.load_bytes / 8).max(self.waiting_bytes);
        self.job_puts = 0;
        self.job_bytes = left;
    }

    /// Record bytes at which the next job starts: three eighths of the recent load, so that
    /// with two jobs in flight and producers waiting on them, the bytes arriving while one
    /// job writes make the next, and a job waits for most of them.
    ///
    /// Why not a quarter, as before: each `O_DSYNC` write into new extents pays a
    /// synchronous metadata write before the cache flush, so the disk takes 2.1 GB/s in
    /// writes of 512 KiB two at a time, 2.8 in writes of 1 MiB (`ferromq-bench commitlog
    /// --raw-sync-kib`). With 2 MiB awaiting
    /// answers (64 producers of 1 KiB, 32 in flight each), jobs that start at a quarter
    /// carry 0.75 MB, at three eighths 1.1 MB, and the CommitLog bench put about 5% more
    /// through (1.77M/s -> 1.86M/s, the quiet runs of five rotated sittings; a half did no
    /// better than a quarter: the disk's second slot then idles). With 1 MiB awaiting (16
    /// in flight) jobs carry half of it either way, and three eighths did about 2% worse,
    /// within the noise of that host.
    fn job_start_bytes(&self) -> usize {
        (self.load_bytes * 3 / 8).clamp(JOB_START_BYTES_MIN, JOB_START_BYTES_MAX)
    }

    /// Whether enough is appended for a job (if the disk may take one).
    fn job_ready(&self) -> bool {
        self.job_bytes >= self.job_start_bytes()
    }

    /// The most bytes a job of whole blocks takes: half the load (the recent one, or the
    /// bytes awaiting answers now if more). The bytes that producers wait on then go out as
    /// two jobs at once, and what arrives while one writes makes the next, instead of one
    /// job taking everything while the disk's second slot stays empty. What a job leaves is
    /// at most about its own size.
    fn job_bytes_most(&self) -> usize {
        (self.load_bytes.max(self.waiting_bytes) / 2).clamp(JOB_START_BYTES_MIN, JOB_BYTES_MAX)
    }

    /// Whether no more puts may be appended before a job in flight ends.
    fn is_full(&self) -> bool {
        self.job_puts >= BATCH_PUTS_MAX || self.job_bytes >= BATCH_BYTES_MAX
    }

    /// Answers "stored" every put whose record ends at or below `end`; returns how many,
    /// and the store time of the newest.
    fn answer_below(&mut self, end: u64) -> (u64, Option<i64>) {
        let covered = self.waiting.partition_point(|put| put.end() <= end);
        let mut answered = 0;
        let mut newest = None;
        for put in self.waiting.drain(..covered) {
            newest = Some(put.stored);
            self.waiting_bytes -= put.appended.size;
            answered += put.reply.puts();
            put.reply.stored(put.appended);
        }
        // Many puts handed over together may end beyond `end`: those below are answered now,
        // not after the next write.
        if let Some(put) = self.waiting.front_mut() {
            if let Some((part, done_bytes)) = put.answer_part_below(end) {
                answered += part;
                newest = Some(put.stored);
                self.waiting_bytes -= done_bytes;
            }
        }
        (answered, newest)
    }

    /// What [`Pending::record_boundary`] answers once [`Pending::answer_below`]`(end)` has
    /// run, computed before it.
    fn boundary_once_answered(&self, end: u64) -> u64 {
        let covered = self.waiting.partition_point(|put| put.end() <= end);
        let Some(first) = self.waiting.get(covered) else {
            return end;
        };
        let start = match &first.reply {
            // A part answered below `end` leaves the first record that ends beyond it.
            Reply::Many(_, outcomes) => outcomes
                .iter()
                .filter_map(|outcome| outcome.as_ref().ok())
                .find(|record| record.physical_offset + record.size as u64 > end)
                .map_or(first.appended.physical_offset, |record| {
                    record.physical_offset
                }),
            _ => first.appended.physical_offset,
        };
        start.min(end)
    }

    /// `end` if it is the end of a record, else the start of the record it falls in (always a
    /// put not answered yet: only records of puts are appended outside a roll).
    fn record_boundary(&self, end: u64) -> u64 {
        match self.waiting.front() {
            Some(first) => first.appended.physical_offset.min(end),
            None => end,
        }
    }

    /// Refuses every put not answered yet: after an I/O failure they will never be written.
    fn refuse_all(&mut self) -> u64 {
        let mut count = 0;
        for put in self.waiting.drain(..) {
            count += put.reply.puts();
            put.reply.unwritable();
        }
        self.waiting_bytes = 0;
        self.job_started(0);
        count
    }
}

/// What woke the loop.
enum Event {
    Request(Option<PutRequest>),
    Written(Option<WriteOutcome>),
    SyncDue,
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

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::mpsc::TryRecvError;

    const KIB: usize = 1 << 10;
    const MIB: usize = 1 << 20;

    /// Appends `count` puts of 1 KiB from `offset` on; returns the offset after them and their
    /// answers.
    fn append_puts(
        pending: &mut Pending,
        mut offset: u64,
        count: usize,
    ) -> (u64, Vec<oneshot::Receiver<PutResult>>) {
        let mut answers = Vec::with_capacity(count);
        for _ in 0..count {
            let (reply, answer) = oneshot::channel();
            let appended = Appended {
                physical_offset: offset,
                size: KIB,
                queue_offset: 0,
            };
            pending.appended(Reply::One(reply), appended, 0);
            offset += KIB as u64;
            answers.push(answer);
        }
        (offset, answers)
    }

    #[test]
    fn puts_handed_over_together_are_answered_in_parts_as_writes_cover_them() {
        let mut pending = Pending::default();
        let (before, mut first_answer) = append_puts(&mut pending, 0, 1);
        // Three records of 1 KiB after it, the second refused (it took no room).
        let record = |index: u64| Appended {
            physical_offset: before + index * KIB as u64,
            size: KIB,
            queue_offset: 0,
        };
        let outcomes = VecDeque::from([
            Ok(record(0)),
            Err(StoreError::ShuttingDown),
            Ok(record(1)),
            Ok(record(2)),
        ]);
        let (reply, mut parts) = mpsc::unbounded();
        let span = Appended {
            size: 3 * KIB,
            ..record(0)
        };
        pending.appended(Reply::Many(reply, outcomes), span, 7);
        assert_eq!(pending.waiting_bytes, 4 * KIB);

        // A write ends inside the last record: the put before and the first three answers
        // of the many go now, the refusal with them (it is final).
        let (answered, newest) = pending.answer_below(before + 2 * KIB as u64 + 100);
        assert_eq!((answered, newest), (4, Some(7)));
        assert!(matches!(first_answer[0].try_recv(), Ok(Some(Ok(_)))));
        let part = parts.try_recv().unwrap();
        assert_eq!(part.len(), 3);
        assert_eq!(part[0].as_ref().unwrap().physical_offset, before);
        assert!(matches!(part[1], Err(StoreError::ShuttingDown)));
        assert_eq!(
            part[2].as_ref().unwrap().physical_offset,
            before + KIB as u64
        );
        assert_eq!(pending.waiting_bytes, KIB, "the last record waits");
        assert_eq!(
            pending.record_boundary(before + 2 * KIB as u64 + 100),
            before + 2 * KIB as u64,
            "committed up to the start of the record the write ended in"
        );

        // The next write covers the rest: the last part, then the end of the answers.
        let (answered, _) = pending.answer_below(before + 3 * KIB as u64);
        assert_eq!(answered, 1);
        let part = parts.try_recv().unwrap();
        assert_eq!(part.len(), 1);
        assert_eq!(
            part[0].as_ref().unwrap().physical_offset,
            before + 2 * KIB as u64
        );
        assert!(
            matches!(parts.try_recv(), Err(TryRecvError::Closed)),
            "no more parts"
        );
        assert_eq!(pending.waiting_bytes, 0);
    }

    #[test]
    fn after_a_failure_puts_handed_over_together_keep_their_refusals_and_the_rest_fail() {
        let mut pending = Pending::default();
        let record = Appended {
            physical_offset: 0,
            size: KIB,
            queue_offset: 0,
        };
        let (reply, mut parts) = mpsc::unbounded();
        let outcomes = VecDeque::from([Ok(record), Err(StoreError::ShuttingDown)]);
        pending.appended(Reply::Many(reply, outcomes), record, 0);
        assert_eq!(pending.refuse_all(), 2);
        let part = parts.try_recv().unwrap();
        assert!(matches!(part[0], Err(StoreError::NotWritable)));
        assert!(matches!(part[1], Err(StoreError::ShuttingDown)));
    }

    #[test]
    fn jobs_start_at_three_eighths_of_the_recent_load_within_the_bounds() {
        let mut pending = Pending::default();
        assert_eq!(
            pending.job_start_bytes(),
            JOB_START_BYTES_MIN,
            "no load yet"
        );

        // 4 MiB awaiting answers when a job starts: the next starts at 1 MiB, not before.
        assert_eq!(pending.job_bytes_most(), JOB_START_BYTES_MIN, "no load yet");
        let (end, _answers) = append_puts(&mut pending, 0, 4 * MIB / KIB);
        assert_eq!(
            pending.job_bytes_most(),
            2 * MIB,
            "half of what awaits answers"
        );
        pending.job_started(0);
        assert_eq!(pending.job_start_bytes(), MIB);
        assert_eq!(
            pending.job_bytes_most(),
            2 * MIB,
            "half the load: two jobs carry it"
        );
        let (end, _more) = append_puts(&mut pending, end, MIB / KIB - 1);
        assert!(!pending.job_ready(), "1 MiB less one put is not a job yet");
        let (end, _last) = append_puts(&mut pending, end, 1);
        assert!(pending.job_ready());

        // Everything is answered; from now on 512 KiB await answers at each job start. The
        // load decays by an eighth per job, and jobs come back down to the least size.
        assert_eq!(pending.answer_below(end).0, (5 * MIB / KIB) as u64);
        assert_eq!(pending.waiting_bytes, 0);
        let mut answered = end;
        let (mut end, _answers) = append_puts(&mut pending, end, 512);
        let mut sizes = Vec::new();
        for _ in 0..16 {
            pending.job_started(0);
            sizes.push(pending.job_start_bytes());
            answered += 256 * KIB as u64;
            assert_eq!(pending.answer_below(answered).0, 256);
            (end, _) = append_puts(&mut pending, end, 256);
        }
        assert_eq!(pending.waiting_bytes, 512 * KIB);
        // The load after `jobs` job starts: an eighth off at each.
        let load_after = |jobs: usize| (0..jobs).fold(4 * MIB, |load, _| load - load / 8);
        assert_eq!(
            sizes[0], JOB_START_BYTES_MAX,
            "three eighths of 3.5 MiB is over the most"
        );
        assert_eq!(sizes[3], load_after(4) * 3 / 8, "{sizes:?}");
        assert!(sizes.windows(2).all(|pair| pair[1] <= pair[0]), "{sizes:?}");
        assert_eq!(sizes[15], JOB_START_BYTES_MIN, "{sizes:?}");
    }

    #[test]
    fn bytes_a_job_leaves_count_toward_the_next() {
        let mut pending = Pending::default();
        let (_, _answers) = append_puts(&mut pending, 0, 4 * MIB / KIB);
        // A job of at most 2 MiB took half; the other half is a job's worth at once.
        pending.job_started(2 * MIB);
        assert!(pending.job_ready());
        pending.job_started(0);
        assert!(!pending.job_ready());
    }

    #[test]
    fn refused_puts_leave_no_load_behind() {
        let mut pending = Pending::default();
        let (_, answers) = append_puts(&mut pending, 0, 8);
        assert_eq!(pending.waiting_bytes, 8 * KIB);
        assert_eq!(pending.refuse_all(), 8);
        assert_eq!(pending.waiting_bytes, 0);
        assert_eq!(pending.job_bytes, 0);
        for mut answer in answers {
            assert!(matches!(
                answer.try_recv(),
                Ok(Some(Err(StoreError::NotWritable)))
            ));
        }
    }
}
