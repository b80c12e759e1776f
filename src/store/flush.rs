//! Group commit: the writer's loop that turns a stream of puts into few writes and syncs
//! (`GroupCommitService` and `FlushRealTimeService` in Java).
//!
//! Puts queue on a bounded channel. The loop takes every put waiting (up to a batch limit),
//! appends them, and then:
//! - `SYNC_FLUSH`: writes and fdatasyncs once, then answers each put of the batch; puts that
//!   arrive meanwhile wait in the channel and form the next batch, so the batch grows with the
//!   load and no timer is involved;
//! - `ASYNC_FLUSH`: writes once (the data survives a crash of the process) and answers; the
//!   sync happens every `flushIntervalCommitLog`, or when the loop ends.
//!
//! A put is never answered "stored" unless its write (and under `SYNC_FLUSH` its sync)
//! succeeded; after a failure every later put is refused (the CommitLog is poisoned).

pub use super::commit_log::PutMessage;
use super::commit_log::{Appended, CommitLog, SegmentOpener, StoreError};
use super::segment_writer::WriteOutcome;
use futures::channel::{mpsc, oneshot};
use futures::future::{select, Either};
use futures::StreamExt;
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

/// A put waiting for the writer.
#[derive(Debug)]
pub struct PutRequest {
    /// The message.
    pub message: PutMessage,
    /// Where the answer goes.
    pub reply: oneshot::Sender<PutResult>,
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

/// While a job is in flight, the loop yields to the executor after this many appends.
const YIELD_EVERY_PUTS: usize = 32;

/// With the disk idle, a job starts once this many record bytes are appended; what arrives
/// meanwhile is encoded while it runs. About where a write + fdatasync stops getting cheaper
/// per byte on the development disk (256 KiB: 1.15 GB/s, 1 MiB: 1.65 GB/s, 64 KiB: 0.46).
const JOB_START_BYTES: usize = 256 << 10;

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
/// At most one write job is in flight; while it runs, the loop keeps taking puts and
/// encoding them, and the moment it ends their job starts. Under load the disk is never idle
/// waiting for the encoder, nor the encoder for the disk.
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
    // Puts appended (or refused) since the last job started, in order.
    let mut waiting = Batch::default();
    let mut in_flight: Option<InFlight> = None;
    // Store time of the newest record written but not yet synced (ASYNC_FLUSH).
    let mut unsynced: Option<i64> = None;
    // ASYNC_FLUSH syncs on a fixed schedule, whatever the load: the deadline does not move
    // when puts arrive.
    let mut next_sync = Instant::now() + sync_interval(mode);
    let mut closed = false;
    loop {
        if in_flight.is_none() {
            let sync_due = match mode {
                FlushDiskType::SyncFlush => true,
                FlushDiskType::AsyncFlush { .. } => Instant::now() >= next_sync,
            };
            if !waiting.answers.is_empty() || (sync_due && unsynced.is_some()) {
                match log.start_write(sync_due) {
                    Ok(Some(job)) => {
                        let stored = waiting.newest.max(unsynced);
                        in_flight = Some(InFlight {
                            job: glommio::spawn_local(job.run()),
                            batch: std::mem::take(&mut waiting),
                            stored,
                        });
                    }
                    Ok(None) => {
                        // Nothing reached the log (every put was refused), and nothing is
                        // left to sync: answer now.
                        stats.puts += waiting.answer(&Ok(log.write_offset()));
                        unsynced = None;
                    }
                    Err(error) => {
                        // Poisoned: nothing can be written or synced any more.
                        stats.puts += waiting.answer(&Err(error));
                        unsynced = None;
                        observer.abandoned();
                    }
                }
            } else if closed {
                break;
            }
        }
        let event = match (in_flight.as_mut(), closed) {
            (None, true) => continue,
            (Some(flight), true) => Event::Written((&mut flight.job).await),
            (Some(flight), false) if waiting.is_full() => Event::Written((&mut flight.job).await),
            (Some(flight), false) => match select(requests.next(), &mut flight.job).await {
                Either::Left((request, _)) => Event::Request(request),
                Either::Right((outcome, _)) => Event::Written(outcome),
            },
            (None, false) => match mode {
                FlushDiskType::SyncFlush => Event::Request(requests.next().await),
                FlushDiskType::AsyncFlush { .. } => {
                    let timer =
                        glommio::timer::sleep(next_sync.saturating_duration_since(Instant::now()));
                    match select(requests.next(), Box::pin(timer)).await {
                        Either::Left((request, _)) => Event::Request(request),
                        Either::Right(((), _)) => Event::SyncDue,
                    }
                }
            },
        };
        match event {
            Event::Request(None) => closed = true,
            Event::Request(Some(first)) => {
                let now = clock_ms();
                let mut request = Some(first);
                while let Some(put) = request {
                    let appended = match observer.admit(&put.message) {
                        Ok(()) => log.append(&put.message, now).await,
                        Err(refused) => Err(refused),
                    };
                    if let Ok(appended) = &appended {
                        observer.appended(&put.message, appended, now);
                        waiting.newest = Some(now);
                        waiting.bytes += appended.size;
                    }
                    waiting.answers.push((put.reply, appended));
                    // With the disk idle, start it as soon as there is a job's worth; the
                    // rest is encoded while it writes.
                    let disk_idle = in_flight.is_none();
                    let job_ready = disk_idle && waiting.bytes >= JOB_START_BYTES;
                    request = if waiting.is_full() || job_ready {
                        None
                    } else {
                        requests.try_recv().ok()
                    };
                    if !disk_idle && waiting.answers.len() % YIELD_EVERY_PUTS == 0 {
                        // Let the job task go from its write to its sync.
                        futures_lite::future::yield_now().await;
                    }
                }
            }
            Event::SyncDue => {
                if unsynced.is_none() {
                    next_sync = Instant::now() + sync_interval(mode);
                }
            }
            Event::Written(outcome) => {
                let Some(mut flight) = in_flight.take() else {
                    unreachable!("a write ended while none was in flight")
                };
                let synced = outcome.syncs();
                let written = log.finish_write(outcome);
                stats.batches += 1;
                match &written {
                    Ok(_) if synced => {
                        stats.syncs += 1;
                        if let Some(stored) = flight.stored {
                            observer.synced(stored);
                        }
                        unsynced = None;
                        next_sync = Instant::now() + sync_interval(mode);
                    }
                    Ok(_) => unsynced = flight.stored,
                    Err(error) if synced => {
                        tracing::error!(%error, "CommitLog sync failed");
                    }
                    Err(_) => {}
                }
                stats.puts += flight.batch.answer(&written);
                match written {
                    Ok(end) => observer.committed(end).await,
                    Err(_) => {
                        // Puts appended after this job cannot be written either.
                        stats.puts += waiting.answer(&Err(StoreError::NotWritable));
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

/// Puts appended since the last job started.
#[derive(Default)]
struct Batch {
    answers: Vec<(oneshot::Sender<PutResult>, PutResult)>,
    /// Store time of the newest record appended.
    newest: Option<i64>,
    /// Record bytes appended.
    bytes: usize,
}

impl Batch {
    /// Whether no more puts may join before the job in flight ends.
    fn is_full(&self) -> bool {
        self.answers.len() >= BATCH_PUTS_MAX || self.bytes >= BATCH_BYTES_MAX
    }

    /// Answers every put: its append's result if `written` is fine, else "not writable".
    /// Returns how many were answered.
    fn answer(&mut self, written: &Result<u64, StoreError>) -> u64 {
        let count = self.answers.len() as u64;
        for (reply, appended) in self.answers.drain(..) {
            let answer = match (written, appended) {
                (Ok(_), appended) => appended,
                (Err(_), Ok(_)) => Err(StoreError::NotWritable),
                (Err(_), Err(error)) => Err(error),
            };
            // A put whose caller went away needs no answer.
            let _ = reply.send(answer);
        }
        self.newest = None;
        self.bytes = 0;
        count
    }
}

/// The write job in flight and the puts it answers.
struct InFlight {
    /// A task of its own, so that the executor moves it from write to sync as soon as the
    /// write completes and this loop yields, not when the loop next awaits it.
    job: glommio::Task<WriteOutcome>,
    batch: Batch,
    /// Store time of the newest record the job writes (or syncs).
    stored: Option<i64>,
}

/// What woke the loop.
enum Event {
    Request(Option<PutRequest>),
    Written(WriteOutcome),
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
