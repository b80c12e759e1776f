//! Dispatch ("reput", `ReputMessageService`): turns committed records into ConsumeQueue units
//! and IndexFile entries, publishes each queue's new max offset and wakes whoever waits for
//! it, and every `flushIntervalConsumeQueue` syncs the queues and the index and writes the
//! checkpoint. That flush runs beside dispatch, on handles of the files: the marks it writes
//! are taken when it starts, so it never claims what dispatch did after, and no message
//! waits for its syncs to become pullable.
//!
//! It runs on the dispatch shard and owns the ConsumeQueue writers, the IndexFiles and the
//! checkpoint file. The writer sends it each committed batch (the records' dispatch entries
//! and the committed end); index queries come to it too.

use super::checkpoint::{StoreCheckpoint, CHECKPOINT_FILE_SIZE};
use super::consume_queue::ConsumeQueueWriter;
use super::dispatch::DispatchEntry;
pub use super::dispatch::TopicDrop;
use super::index::IndexService;
use super::queue_retention::delete_queue_files_below;
use super::segment::QueueDirectory;
use super::segment_writer::StoreError;
use super::shared::{QueueKey, StoreShared};
use ferromq_uring::file::{remove_dir_all_off_executor, DmaSegment, SegmentFile};
use futures::channel::{mpsc, oneshot};
use futures::future::{select, Either};
use futures::{FutureExt, StreamExt};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// Most committed batches dispatched before their queues are written out and published.
const BATCHES_PER_PUBLISH_MAX: usize = 256;

/// What the writer hands over after each commit.
#[derive(Debug, Default)]
pub struct CommittedBatch {
    /// Entries of the records committed, in CommitLog order.
    pub entries: Vec<DispatchEntry>,
    /// The committed end after them.
    pub end: u64,
    /// Topics deleted, in CommitLog order: each drop comes before the entries at or past
    /// its offset.
    pub drops: Vec<TopicDrop>,
}

/// A lookup by key, answered by the index owner.
#[derive(Debug)]
pub struct IndexQuery {
    /// Topic.
    pub topic: String,
    /// Key (a `KEYS` token or a `UNIQ_KEY`).
    pub key: String,
    /// Most offsets to return.
    pub max: usize,
    /// Earliest store time, ms.
    pub begin_ms: i64,
    /// Latest store time, ms.
    pub end_ms: i64,
    /// Where the CommitLog offsets go (newest first).
    pub reply: oneshot::Sender<Vec<i64>>,
}

/// Work for the dispatch shard besides batches: retention reports the CommitLog's new
/// minimum here so that queue files below it can go.
#[derive(Debug)]
pub enum ReputControl {
    /// The CommitLog now starts at this offset.
    MinPhysicalOffset(u64),
}

/// What a flush from [`Reput::start_flush`] did.
#[derive(Debug)]
#[must_use = "hand it to Reput::finish_flush"]
pub struct FlushDone {
    /// Queues synced, with the byte end each is durable to.
    synced: Vec<(QueueKey, u64)>,
    /// The checkpoint written (or already in the file), or why none was.
    result: Result<StoreCheckpoint, StoreError>,
}

/// The dispatch side of a store.
#[derive(Debug)]
pub struct Reput {
    shared: Arc<StoreShared>,
    writers: HashMap<QueueKey, ConsumeQueueWriter<QueueDirectory>>,
    unpublished: HashSet<QueueKey>,
    unsynced: HashSet<QueueKey>,
    index: Option<IndexService>,
    checkpoint: Rc<DmaSegment>,
    dispatched_timestamp: i64,
    /// The marks in the checkpoint file.
    flushed: StoreCheckpoint,
    /// A queue write or a flush failed: the checkpoint no longer moves.
    failed: bool,
    /// Publishes that wrote queues out.
    publishes: u64,
    /// End of the committed batches dispatched; published with the queues' max offsets.
    dispatched_end: u64,
    /// Topics dropped since the running flush started: what it synced of their old queues
    /// says nothing of the new ones.
    dropped_while_flushing: HashSet<String>,
}

impl Reput {
    /// The dispatch side over recovered state.
    ///
    /// # Errors
    /// [`StoreError::Io`] opening the checkpoint file.
    pub async fn new(
        shared: Arc<StoreShared>,
        index: Option<IndexService>,
        checkpoint: StoreCheckpoint,
    ) -> Result<Reput, StoreError> {
        let path = shared.config.root_file("checkpoint");
        let file = DmaSegment::open(&path, CHECKPOINT_FILE_SIZE as u64).await?;
        Ok(Reput {
            shared,
            writers: HashMap::new(),
            unpublished: HashSet::new(),
            unsynced: HashSet::new(),
            index,
            checkpoint: Rc::new(file),
            dispatched_timestamp: checkpoint.logics_msg_timestamp,
            flushed: checkpoint,
            failed: false,
            publishes: 0,
            dispatched_end: 0,
            dropped_while_flushing: HashSet::new(),
        })
    }

    /// The shared state.
    #[must_use]
    pub fn shared(&self) -> &Arc<StoreShared> {
        &self.shared
    }

    /// The index, if `messageIndexEnable`.
    #[must_use]
    pub fn index(&self) -> Option<&IndexService> {
        self.index.as_ref()
    }

    /// Dispatches one entry (not yet visible: see [`Reput::publish`]).
    ///
    /// # Errors
    /// [`StoreError`] from a ConsumeQueue or IndexFile.
    pub async fn apply(&mut self, entry: &DispatchEntry) -> Result<(), StoreError> {
        if let Some(request) = &entry.queue {
            let key = (request.topic.clone(), request.queue_id);
            let writer = match self.writers.get_mut(&key) {
                Some(writer) => writer,
                None => {
                    let writer = self
                        .open_writer(&request.topic, request.queue_id, request.queue_offset)
                        .await?;
                    self.writers.entry(key.clone()).or_insert(writer)
                }
            };
            if writer.put(request.queue_offset, request.unit).await? {
                self.unpublished.insert(key.clone());
                self.unsynced.insert(key);
            }
        }
        if let Some(index) = &mut self.index {
            index.put(
                &entry.topic,
                &entry.index_keys,
                entry.physical_offset,
                entry.store_timestamp,
                wall_clock_ms(),
            )?;
        }
        self.dispatched_timestamp = self.dispatched_timestamp.max(entry.store_timestamp);
        Ok(())
    }

    /// Writes out every queue that got units and publishes their new max offsets.
    pub async fn publish(&mut self) {
        if !self.unpublished.is_empty() {
            self.publishes += 1;
        }
        let unpublished = std::mem::take(&mut self.unpublished);
        let outcomes = side_by_side(
            &mut self.writers,
            unpublished,
            ConsumeQueueWriter::write_out,
        )
        .await;
        let mut grown = Vec::with_capacity(outcomes.len());
        for (key, outcome) in outcomes {
            match outcome {
                Ok(max) => {
                    self.shared
                        .queue_or_insert(&key.0, key.1)
                        .set_max_offset(max);
                    grown.push((key, max));
                }
                Err(error) => {
                    tracing::error!(
                        topic = key.0,
                        queue = key.1,
                        %error,
                        "ConsumeQueue write failed; the queue stalls until restart"
                    );
                    self.failed = true;
                }
            }
        }
        self.shared.set_dispatched_end(self.dispatched_end);
        self.shared.announce_growth(&grown);
    }

    /// Drops a deleted topic's queues (`cleanUnusedTopic`): their writers, their published
    /// offsets and their files; the topic's next records start new queues at 0. Answers the
    /// drop once done.
    pub async fn drop_topic(&mut self, drop: TopicDrop) {
        let topic = drop.topic.as_str();
        self.writers.retain(|(name, _), _| name != topic);
        self.unpublished.retain(|(name, _)| name != topic);
        self.unsynced.retain(|(name, _)| name != topic);
        self.dropped_while_flushing.insert(drop.topic.clone());
        self.shared.remove_topic(topic);
        let dir = self.shared.config.consume_queue_dir().join(topic);
        match remove_dir_all_off_executor(&dir).await {
            Ok(()) => tracing::info!(topic, "dropped the ConsumeQueues of a deleted topic"),
            // A topic that never had a message has no files.
            Err(error) if error.is_not_found() => {}
            Err(error) => tracing::error!(topic, %error, "cannot delete a topic's ConsumeQueues"),
        }
        let _ = drop.done.send(());
    }

    /// Records that everything below `end` has been dispatched (published by the next
    /// [`Reput::publish`]).
    pub fn dispatched_to(&mut self, end: u64) {
        self.dispatched_end = self.dispatched_end.max(end);
    }

    /// How many times queues were written out and their new max offsets published.
    #[must_use]
    pub fn publishes(&self) -> u64 {
        self.publishes
    }

    /// Syncs the queues and the index and writes the checkpoint, dispatching nothing
    /// meanwhile (start-up and shutdown; while running, [`run_reput`] flushes beside
    /// dispatch).
    ///
    /// # Errors
    /// [`StoreError`] from a sync or the checkpoint write, or one an earlier flush or write
    /// of the queues met.
    pub async fn flush(&mut self) -> Result<(), StoreError> {
        let flush = self.start_flush();
        let done = flush.await;
        self.finish_flush(done)
    }

    /// Starts a flush that may run while dispatch goes on: it syncs every queue file written
    /// since the last flush and the newest IndexFile side by side, then writes the checkpoint
    /// with the marks taken now (what dispatch does meanwhile is not claimed). The future
    /// holds the files, not `self`; hand what it returns to [`Reput::finish_flush`]. One at a
    /// time: the checkpoint is written by one flush at a time.
    pub fn start_flush(&mut self) -> impl std::future::Future<Output = FlushDone> {
        self.dropped_while_flushing.clear();
        let logics = self.dispatched_timestamp;
        let physic = self.shared.synced_store_timestamp();
        let mut queue_syncs = Vec::new();
        let mut failed = self.failed;
        for key in std::mem::take(&mut self.unsynced) {
            let Some(writer) = self.writers.get_mut(&key) else {
                continue;
            };
            match writer.take_syncs() {
                Ok(Some(syncs)) => queue_syncs.push((key, syncs)),
                Ok(None) => {}
                Err(error) => {
                    tracing::error!(
                        topic = key.0,
                        queue = key.1,
                        %error,
                        "ConsumeQueue not synced"
                    );
                    failed = true;
                }
            }
        }
        let (index_timestamp, index_sync) = match &mut self.index {
            Some(index) => index.start_flush(),
            None => (logics, None),
        };
        let checkpoint = StoreCheckpoint {
            physic_msg_timestamp: physic,
            logics_msg_timestamp: logics,
            index_msg_timestamp: index_timestamp,
            ..self.flushed
        };
        let unchanged = checkpoint == self.flushed;
        let file = Rc::clone(&self.checkpoint);
        async move {
            let queues = futures::future::join_all(
                queue_syncs
                    .into_iter()
                    .map(|(key, syncs)| async move { (key, syncs.run().await) }),
            );
            let index = async {
                match index_sync {
                    Some(sync) => sync.await,
                    None => Ok(()),
                }
            };
            let (queues, index) = futures::future::join(queues, index).await;
            let mut synced = Vec::with_capacity(queues.len());
            let mut error = failed.then_some(StoreError::NotWritable);
            for (key, outcome) in queues {
                match outcome {
                    Ok(end) => synced.push((key, end)),
                    Err(e) => {
                        error.get_or_insert(e.into());
                    }
                }
            }
            if let Err(e) = index {
                error.get_or_insert(e.into());
            }
            let result = match error {
                Some(error) => Err(error),
                None if unchanged => Ok(checkpoint),
                None => write_checkpoint(&file, &checkpoint)
                    .await
                    .map(|()| checkpoint),
            };
            FlushDone { synced, result }
        }
    }

    /// Takes back what a flush from [`Reput::start_flush`] did. After a failed sync or
    /// write the checkpoint stays where it was until restart (recovery then dispatches again
    /// what the queues may lack).
    ///
    /// # Errors
    /// The flush's error.
    pub fn finish_flush(&mut self, done: FlushDone) -> Result<(), StoreError> {
        for (key, end) in done.synced {
            if self.dropped_while_flushing.contains(&key.0) {
                continue;
            }
            if let Some(writer) = self.writers.get_mut(&key) {
                writer.synced(end);
            }
        }
        match done.result {
            Ok(checkpoint) => {
                self.flushed = checkpoint;
                Ok(())
            }
            Err(error) => {
                self.failed = true;
                Err(error)
            }
        }
    }

    /// Deletes ConsumeQueue files and IndexFiles wholly below the CommitLog's minimum, and
    /// raises each queue's min offset.
    ///
    /// # Errors
    /// [`StoreError`] from reading or deleting files.
    pub async fn delete_below(&mut self, min_physical_offset: u64) -> Result<(), StoreError> {
        delete_queue_files_below(&self.shared, min_physical_offset).await?;
        if let Some(index) = &mut self.index {
            index
                .delete_below(i64::try_from(min_physical_offset).unwrap_or(i64::MAX))
                .await?;
        }
        Ok(())
    }

    /// The writer of a queue whose next unit goes at `first`. A queue with no units whose
    /// first is not 0 (a slave that began at its master's last segment) starts at the file
    /// that holds `first`, its units before `first` blank, and its min offset is `first`
    /// (Java's `fillPreBlank` and `minLogicOffset`).
    async fn open_writer(
        &self,
        topic: &str,
        queue_id: i32,
        first: i64,
    ) -> Result<ConsumeQueueWriter<QueueDirectory>, StoreError> {
        let config = &self.shared.config;
        let dir = QueueDirectory::make(config.queue_dir(topic, queue_id))?;
        let units = config.consume_queue_units_per_file;
        let mut max = self
            .shared
            .queue(topic, queue_id)
            .map_or(0, |state| state.max_offset());
        if max == 0 && first > 0 {
            let per_file = i64::try_from(units).unwrap_or(i64::MAX);
            max = first - first % per_file;
            self.shared
                .queue_or_insert(topic, queue_id)
                .set_min_offset(first);
        }
        ConsumeQueueWriter::open(dir, units, max).await
    }
}

async fn write_checkpoint(
    file: &DmaSegment,
    checkpoint: &StoreCheckpoint,
) -> Result<(), StoreError> {
    file.write_at(0, &checkpoint.encode()).await?;
    file.sync().await?;
    Ok(())
}

/// Runs dispatch until the writer's channel closes; then publishes, syncs and writes the
/// checkpoint one last time.
pub async fn run_reput(
    mut reput: Reput,
    batches: mpsc::Receiver<CommittedBatch>,
    queries: mpsc::Receiver<IndexQuery>,
    control: mpsc::Receiver<ReputControl>,
) -> Reput {
    enum Event {
        Batch(CommittedBatch),
        Query(IndexQuery),
        Control(ReputControl),
        BatchesClosed,
    }
    let batches = batches
        .map(Event::Batch)
        .chain(futures::stream::iter([Event::BatchesClosed]));
    let mut events = futures::stream::select(
        batches,
        futures::stream::select(queries.map(Event::Query), control.map(Event::Control)),
    );
    let interval = reput.shared.config.flush_interval_consume_queue;
    let mut next_flush = Instant::now() + interval;
    // The periodic flush runs beside dispatch (its syncs took 5-10 ms at 90k messages/s,
    // and every message waited for them); the next starts once it is done.
    let mut flushing: Option<glommio::Task<FlushDone>> = None;
    // An event taken while gathering batches, handled next.
    let mut taken: Option<Event> = None;
    loop {
        // Checked here as well as by the timer: under a steady stream of batches the timer
        // would never win the race.
        if flushing.is_none() && Instant::now() >= next_flush {
            flushing = Some(glommio::spawn_local(reput.start_flush()));
            next_flush = Instant::now() + interval;
        }
        let event = match taken.take() {
            Some(event) => event,
            None => match next_wake(&mut events, &mut flushing, next_flush).await {
                Wake::Event(Some(event)) => event,
                Wake::Event(None) => break,
                Wake::FlushDue => continue,
                Wake::Flushed(done) => {
                    flushing = None;
                    finish_periodic_flush(&mut reput, done);
                    continue;
                }
            },
        };
        match event {
            Event::Batch(batch) => {
                dispatch_batch(&mut reput, batch).await;
                // The batches committed meanwhile join this one's publish: it writes each
                // grown queue out, a disk write each, and the writer commits far more often
                // than that under load (one publish per batch held consumers seconds behind
                // at 10k messages/s).
                for _ in 1..BATCHES_PER_PUBLISH_MAX {
                    match events.next().now_or_never() {
                        Some(Some(Event::Batch(batch))) => dispatch_batch(&mut reput, batch).await,
                        Some(Some(other)) => {
                            taken = Some(other);
                            break;
                        }
                        Some(None) | None => break,
                    }
                }
                reput.publish().await;
            }
            Event::Query(query) => {
                let found = reput.index.as_ref().map_or_else(Vec::new, |index| {
                    index.query(
                        &query.topic,
                        &query.key,
                        query.max,
                        query.begin_ms,
                        query.end_ms,
                    )
                });
                let _ = query.reply.send(found);
            }
            Event::Control(ReputControl::MinPhysicalOffset(min)) => {
                if let Err(error) = reput.delete_below(min).await {
                    tracing::error!(%error, "deleting expired ConsumeQueue/IndexFiles failed");
                }
            }
            Event::BatchesClosed => break,
        }
    }
    if let Some(flush) = flushing.take() {
        finish_periodic_flush(&mut reput, flush.await);
    }
    reput.publish().await;
    if let Err(error) = reput.flush().await {
        tracing::error!(%error, "final ConsumeQueue/IndexFile flush failed");
    }
    reput
}

/// What dispatch woke up for.
enum Wake<E> {
    Event(Option<E>),
    FlushDue,
    Flushed(FlushDone),
}

/// Waits for the flush in flight to end (first, so that a steady stream of events cannot
/// hold it back), an event, or, with no flush in flight, the next flush's time.
async fn next_wake<E>(
    events: &mut (impl futures::Stream<Item = E> + Unpin),
    flushing: &mut Option<glommio::Task<FlushDone>>,
    next_flush: Instant,
) -> Wake<E> {
    let in_flight = flushing.is_some();
    let flushed = async {
        match flushing {
            Some(flush) => flush.await,
            None => futures::future::pending().await,
        }
    };
    let due = async {
        if in_flight {
            futures::future::pending::<()>().await;
        }
        glommio::timer::sleep(next_flush.saturating_duration_since(Instant::now())).await;
    };
    let flushed = std::pin::pin!(flushed);
    let due = std::pin::pin!(due);
    match select(flushed, select(events.next(), due)).await {
        Either::Left((done, _)) => Wake::Flushed(done),
        Either::Right((Either::Left((event, _)), _)) => Wake::Event(event),
        Either::Right((Either::Right(((), _)), _)) => Wake::FlushDue,
    }
}

/// Takes back a periodic flush, logging the first failure (the checkpoint stays put after
/// it, and every later flush reports the same).
fn finish_periodic_flush(reput: &mut Reput, done: FlushDone) {
    let failed_before = reput.failed;
    if let Err(error) = reput.finish_flush(done) {
        if !failed_before {
            tracing::error!(
                %error,
                "ConsumeQueue/IndexFile flush failed; the checkpoint stays put"
            );
        }
    }
}

async fn dispatch_batch(reput: &mut Reput, batch: CommittedBatch) {
    reput.dispatched_to(batch.end);
    let mut drops = batch.drops.into_iter().peekable();
    for entry in &batch.entries {
        let offset = u64::try_from(entry.physical_offset).unwrap_or(0);
        while let Some(drop) = drops.next_if(|drop| drop.at <= offset) {
            reput.drop_topic(drop).await;
        }
        if let Err(error) = reput.apply(entry).await {
            tracing::error!(
                topic = entry.topic,
                offset = entry.physical_offset,
                %error,
                "dispatch failed; the record reaches its queue after restart"
            );
        }
    }
    for drop in drops {
        reput.drop_topic(drop).await;
    }
}

/// Runs `op` on the writers of `keys` side by side (io_uring takes all their I/O at once),
/// each out of `writers` while it runs; returns each key with its outcome.
async fn side_by_side<T>(
    writers: &mut HashMap<QueueKey, ConsumeQueueWriter<QueueDirectory>>,
    keys: HashSet<QueueKey>,
    op: impl AsyncFn(&mut ConsumeQueueWriter<QueueDirectory>) -> Result<T, StoreError>,
) -> Vec<(QueueKey, Result<T, StoreError>)> {
    let mut taken: Vec<_> = keys
        .into_iter()
        .filter_map(|key| writers.remove_entry(&key))
        .collect();
    let outcomes = futures::future::join_all(taken.iter_mut().map(|(_, writer)| op(writer))).await;
    taken
        .into_iter()
        .zip(outcomes)
        .map(|((key, writer), outcome)| {
            writers.insert(key.clone(), writer);
            (key, outcome)
        })
        .collect()
}

/// Milliseconds since the Unix epoch.
#[must_use]
pub fn wall_clock_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
