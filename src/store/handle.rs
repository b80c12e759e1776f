//! `StoreHandle`: what any shard holds to use the store (puts, topic deletion, lookups by key,
//! the CommitLog's new minimum for dispatch), and `StoreChannels`, the bounded channels
//! between the store's parts, made before the parts start on their shards.
//!
//! The handle only sends: the writer (`flush`) takes its puts, dispatch (`reput`) its index
//! queries and control messages. It is plain data and channels, so it is `Send` and cheap to
//! clone. Readers (`StoreHandle::reader`, with `StoreReader`) hold one for their key lookups.

use super::commit_log::{Appended, PutMessage};
use super::dispatch::DispatchEntry;
use super::flush::{PutRequest, PutResult};
use super::put_coalescer::PutCoalescer;
use super::reput::{CommittedBatch, IndexQuery, ReputControl};
use super::segment_writer::StoreError;
use super::shared::StoreShared;
use futures::channel::{mpsc, oneshot};
use futures::SinkExt;
use std::sync::Arc;

/// Puts waiting for the writer, at most.
pub const PUT_QUEUE_CAPACITY: usize = 16 * 1024;
/// Committed batches waiting for dispatch, at most (the writer waits beyond it).
pub const BATCH_QUEUE_CAPACITY: usize = 1024;

/// What any shard holds to use the store. Cheap to clone; `Send`.
#[derive(Clone, Debug)]
pub struct StoreHandle {
    shared: Arc<StoreShared>,
    puts: mpsc::Sender<PutRequest>,
    queries: mpsc::Sender<IndexQuery>,
    control: mpsc::Sender<ReputControl>,
}

impl StoreHandle {
    /// Stores one message; answers when the flush mode says it is stored.
    ///
    /// # Errors
    /// [`StoreError`]: refused (disk full, not writable, too large) or shutting down.
    pub async fn put(&self, message: PutMessage) -> Result<Appended, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send_put(PutRequest::One { message, reply }).await?;
        answer.await.map_err(|_| StoreError::ShuttingDown)?
    }

    /// Deletes `topic`'s queues (Java's `cleanUnusedTopic` for a deleted topic): its next
    /// put starts each queue at offset 0, and its ConsumeQueue files go once dispatch has
    /// passed every record appended before. Its records stay in the CommitLog until
    /// retention. Returns once dispatch has dropped them.
    ///
    /// # Errors
    /// [`StoreError::ShuttingDown`].
    pub async fn drop_topic(&self, topic: &str) -> Result<(), StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send_put(PutRequest::DropTopic {
            topic: topic.to_owned(),
            reply,
        })
        .await?;
        // Dispatch answers once it has dropped the queues.
        answer.await.map_err(|_| StoreError::ShuttingDown)
    }

    /// Stores `messages` back to back, whole or not at all, as Java stores a batch: in one
    /// CommitLog segment, with consecutive queue offsets; answers with each record's place.
    ///
    /// # Errors
    /// As [`StoreHandle::put`]; [`StoreError::TooLarge`] if the batch does not fit one
    /// segment.
    pub async fn put_batch(&self, messages: Vec<PutMessage>) -> Result<Vec<Appended>, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.send_put(PutRequest::batch(messages, reply)).await?;
        answer.await.map_err(|_| StoreError::ShuttingDown)?
    }

    /// Hands the writer bytes a master replicated at `offset` (this slave's end), with the
    /// dispatch entries of the records they complete. The answer, their span, comes once
    /// they are written, as a put's would; requests are taken in the order they are sent.
    ///
    /// # Errors
    /// [`StoreError::ShuttingDown`].
    pub async fn replicate(
        &self,
        offset: u64,
        bytes: Vec<u8>,
        entries: Vec<DispatchEntry>,
    ) -> Result<oneshot::Receiver<PutResult>, StoreError> {
        let (reply, answer) = oneshot::channel();
        let request = PutRequest::Replica {
            offset,
            bytes,
            entries,
            reply,
        };
        self.send_put(request).await?;
        Ok(answer)
    }

    /// A [`PutCoalescer`] for the calling shard, which must be on a glommio executor: its puts
    /// cross to the writer together, once per turn of that executor.
    #[must_use]
    pub fn coalescer(&self) -> PutCoalescer {
        PutCoalescer::new(self.puts.clone())
    }

    async fn send_put(&self, request: PutRequest) -> Result<(), StoreError> {
        let mut puts = self.puts.clone();
        puts.send(request)
            .await
            .map_err(|_| StoreError::ShuttingDown)
    }

    /// CommitLog offsets of records of `topic` stored under `key` in `[begin_ms, end_ms]`,
    /// newest first, at most `max` (candidates: check each record's keys).
    pub async fn query_offsets_by_key(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> Vec<i64> {
        let (reply, answer) = oneshot::channel();
        let query = IndexQuery {
            topic: topic.to_owned(),
            key: key.to_owned(),
            max,
            begin_ms,
            end_ms,
            reply,
        };
        if self.queries.clone().send(query).await.is_err() {
            return Vec::new();
        }
        answer.await.unwrap_or_default()
    }

    /// Tells dispatch that the CommitLog now starts at `min` (retention).
    pub async fn report_min_physical_offset(&self, min: u64) {
        let _ = self
            .control
            .clone()
            .send(ReputControl::MinPhysicalOffset(min))
            .await;
    }

    /// The state every shard may read.
    #[must_use]
    pub fn shared(&self) -> &Arc<StoreShared> {
        &self.shared
    }

    /// Refuses every later put; the writer finishes what it has and stops.
    pub fn close(&self) {
        self.puts.clone().close_channel();
    }
}

/// The channels between the store's parts, made before the parts start on their shards.
#[derive(Debug)]
pub struct StoreChannels {
    /// The handle for everyone.
    pub handle: StoreHandle,
    /// Puts, for the writer.
    pub puts: mpsc::Receiver<PutRequest>,
    /// Committed batches: the writer's end.
    pub batches_tx: mpsc::Sender<CommittedBatch>,
    /// Committed batches: dispatch's end.
    pub batches_rx: mpsc::Receiver<CommittedBatch>,
    /// Index queries, for dispatch.
    pub queries: mpsc::Receiver<IndexQuery>,
    /// Control messages, for dispatch.
    pub control: mpsc::Receiver<ReputControl>,
}

impl StoreChannels {
    /// New channels over `shared`.
    #[must_use]
    pub fn new(shared: Arc<StoreShared>) -> StoreChannels {
        let (puts_tx, puts) = mpsc::channel(PUT_QUEUE_CAPACITY);
        let (batches_tx, batches_rx) = mpsc::channel(BATCH_QUEUE_CAPACITY);
        let (queries_tx, queries) = mpsc::channel(256);
        let (control_tx, control) = mpsc::channel(16);
        StoreChannels {
            handle: StoreHandle {
                shared,
                puts: puts_tx,
                queries: queries_tx,
                control: control_tx,
            },
            puts,
            batches_tx,
            batches_rx,
            queries,
            control,
        }
    }
}
