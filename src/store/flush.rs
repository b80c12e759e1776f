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

    /// Everything appended since the last call is committed (written, and under
    /// `SYNC_FLUSH` synced) up to `end`.
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
    let mut batch: Vec<(oneshot::Sender<PutResult>, PutResult)> = Vec::new();
    // Store time of the newest record written but not yet synced (ASYNC_FLUSH).
    let mut unsynced: Option<i64> = None;
    // ASYNC_FLUSH syncs on a fixed schedule, whatever the load: the deadline does not move
    // when puts arrive.
    let mut next_sync = Instant::now() + sync_interval(mode);
    loop {
        let first = match mode {
            FlushDiskType::SyncFlush => requests.next().await,
            FlushDiskType::AsyncFlush { interval } => {
                let timer =
                    glommio::timer::sleep(next_sync.saturating_duration_since(Instant::now()));
                match select(requests.next(), Box::pin(timer)).await {
                    Either::Left((request, _)) => request,
                    Either::Right(((), _)) => {
                        if let Some(stored) = unsynced {
                            if sync(&mut log, &mut stats).await {
                                observer.synced(stored);
                                unsynced = None;
                            }
                        }
                        next_sync = Instant::now() + interval;
                        continue;
                    }
                }
            }
        };
        let Some(first) = first else { break };
        let mut pending = vec![first];
        while pending.len() < BATCH_PUTS_MAX {
            match requests.try_recv() {
                Ok(request) => pending.push(request),
                Err(_) => break,
            }
        }
        let now = clock_ms();
        for request in pending {
            let appended = match observer.admit(&request.message) {
                Ok(()) => log.append(&request.message, now).await,
                Err(refused) => Err(refused),
            };
            if let Ok(appended) = &appended {
                observer.appended(&request.message, appended, now);
            }
            batch.push((request.reply, appended));
        }
        stats.batches += 1;
        let written = match mode {
            FlushDiskType::SyncFlush => {
                let flushed = log.flush().await;
                stats.syncs += u64::from(flushed.is_ok());
                if flushed.is_ok() {
                    observer.synced(now);
                }
                flushed
            }
            FlushDiskType::AsyncFlush { .. } => {
                unsynced = Some(now);
                log.write_out().await
            }
        };
        if let FlushDiskType::AsyncFlush { interval } = mode {
            if Instant::now() >= next_sync {
                if written.is_ok() && sync(&mut log, &mut stats).await {
                    observer.synced(now);
                    unsynced = None;
                }
                next_sync = Instant::now() + interval;
            }
        }
        for (reply, appended) in batch.drain(..) {
            let answer = match (&written, appended) {
                (Ok(_), appended) => appended,
                (Err(_), Ok(_)) => Err(StoreError::NotWritable),
                (Err(_), Err(error)) => Err(error),
            };
            stats.puts += 1;
            // A put whose caller went away needs no answer.
            let _ = reply.send(answer);
        }
        match written {
            Ok(end) => observer.committed(end).await,
            Err(_) => observer.abandoned(),
        }
    }
    if let Some(stored) = unsynced {
        if sync(&mut log, &mut stats).await {
            observer.synced(stored);
        }
    }
    (log, stats)
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
