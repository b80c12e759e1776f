//! Puts made on one shard, handed to the writer together.
//!
//! A put crossing to the writer's core costs about the same whatever its size: a message on
//! the channel (allocated on one core, freed on the other), a wake of the writer, and a wake
//! back for its answer, each a cache-line transfer and often a syscall. A shard serving many
//! connections makes many puts in one turn of its executor. [`PutCoalescer`] gathers the
//! single puts made while its pump waits for its turn, hands them over as one
//! [`PutRequest::Many`], and spreads the answers to their callers on this shard: the
//! crossing then costs once for all of them.
//!
//! Architecture Invariant: puts and batches reach the writer in the order they were made on
//! this shard (one pump sends them, one request at a time), and each is stored or refused on
//! its own, as if sent alone.

use super::commit_log::{Appended, PutMessage, StoreError};
use super::flush::{BatchPutResult, PutRequest, PutResult};
use super::message::body_crc32;
use futures::channel::mpsc;
use futures::{SinkExt, StreamExt};
// Callers and spreader are on one shard: a oneshot without atomics (`Rc`, not `Arc`). In the
// commitlog bench (64 producers x 16 puts in flight beside the writer, `perf record`), the
// thread-safe one's creation, send and drop took 14% of the core's samples, wakes included;
// this one takes 7%.
use local_sync::oneshot;
use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};

/// Most puts handed over in one request: bounds the writer's work between two looks at its
/// disk, and what one answer carries.
pub const COALESCED_PUTS_MAX: usize = 1024;

/// Most body bytes handed over in one request (a single bigger message still goes, alone).
pub const COALESCED_BODY_BYTES_MAX: usize = 4 << 20;

/// One shard's way to the writer. Not `Send`: each shard makes its own, on its own executor.
#[derive(Debug)]
pub struct PutCoalescer {
    gathered: Rc<Gathered>,
}

/// Puts made and not yet handed over, in the order they were made, as the requests they
/// go in; and the pump waiting for them.
#[derive(Default)]
struct Gathered {
    requests: RefCell<VecDeque<Handover>>,
    /// How many single puts the last request of them carried: the next starts that big, so
    /// that it does not grow by doubling, moving every message at each step.
    singles_hint: Cell<usize>,
    pump: Cell<Option<Waker>>,
}

/// Where the writer answers a batch, across shards.
type BatchReply = futures::channel::oneshot::Sender<BatchPutResult>;

/// One request's worth of what is gathered.
enum Handover {
    /// Single puts made one after another, within [`COALESCED_PUTS_MAX`] and
    /// [`COALESCED_BODY_BYTES_MAX`] (at least one): each message is moved once, into this
    /// list, which goes to the writer as it is.
    Many {
        messages: Vec<PutMessage>,
        /// Each message's body CRC, computed as it is gathered, while its body is still in
        /// this core's cache: work kept off the writer's core.
        body_crcs: Vec<i32>,
        replies: Vec<oneshot::Sender<PutResult>>,
        body_bytes: usize,
    },
    /// A batch, stored whole: goes as it is, in its place among the others, and the writer
    /// answers it on its own.
    Batch(Vec<PutMessage>, BatchReply),
}

impl std::fmt::Debug for Gathered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gathered")
            .field("requests", &self.requests.borrow().len())
            .finish_non_exhaustive()
    }
}

impl Gathered {
    /// Adds a single put to the last request of single puts, or starts one if that is full
    /// or a batch came last.
    fn push_one(&self, message: PutMessage, reply: oneshot::Sender<PutResult>) {
        let mut requests = self.requests.borrow_mut();
        let body = message.body.len();
        let room = matches!(
            requests.back(),
            Some(Handover::Many { messages, body_bytes, .. })
                if messages.len() < COALESCED_PUTS_MAX
                    && (*body_bytes == 0 || body_bytes + body <= COALESCED_BODY_BYTES_MAX)
        );
        if !room {
            let capacity = self.singles_hint.get().clamp(1, COALESCED_PUTS_MAX);
            requests.push_back(Handover::Many {
                messages: Vec::with_capacity(capacity),
                body_crcs: Vec::with_capacity(capacity),
                replies: Vec::with_capacity(capacity),
                body_bytes: 0,
            });
        }
        let Some(Handover::Many {
            messages,
            body_crcs,
            replies,
            body_bytes,
        }) = requests.back_mut()
        else {
            unreachable!("a request of single puts with room is last");
        };
        body_crcs.push(body_crc32(&message.body));
        messages.push(message);
        replies.push(reply);
        *body_bytes += body;
        drop(requests);
        self.wake_pump();
    }

    fn push_batch(&self, messages: Vec<PutMessage>, reply: BatchReply) {
        self.requests
            .borrow_mut()
            .push_back(Handover::Batch(messages, reply));
        self.wake_pump();
    }

    /// The oldest request gathered.
    fn next_request(&self) -> Option<Handover> {
        let request = self.requests.borrow_mut().pop_front()?;
        if let Handover::Many { messages, .. } = &request {
            self.singles_hint.set(messages.len());
        }
        Some(request)
    }

    fn wake_pump(&self) {
        if let Some(pump) = self.pump.take() {
            pump.wake();
        }
    }
}

impl PutCoalescer {
    /// Starts the pump that hands this shard's puts to the writer's channel `puts`, on the
    /// calling shard's executor. The pump ends, and lets go of `puts`, once the coalescer is
    /// dropped.
    #[must_use]
    pub fn new(puts: mpsc::Sender<PutRequest>) -> Self {
        let gathered = Rc::new(Gathered::default());
        glommio::spawn_local(pump(Rc::downgrade(&gathered), puts)).detach();
        Self { gathered }
    }

    /// Stores one message; answers when the flush mode says it is stored, as
    /// `StoreHandle::put` does.
    ///
    /// # Errors
    /// [`StoreError`]: refused (disk full, not writable, too large) or shutting down.
    pub fn put(&self, message: PutMessage) -> impl Future<Output = PutResult> + '_ {
        // Gathered at the call, not at the first poll: the future does not hold the message.
        let (reply, answer) = oneshot::channel();
        self.gathered.push_one(message, reply);
        async move { answer.await.map_err(|_| StoreError::ShuttingDown)? }
    }

    /// Stores `messages` whole, as `StoreHandle::put_batch` does,
    /// after the puts made before it on this shard.
    ///
    /// # Errors
    /// As `StoreHandle::put_batch`.
    pub async fn put_batch(&self, messages: Vec<PutMessage>) -> Result<Vec<Appended>, StoreError> {
        let (reply, answer) = futures::channel::oneshot::channel();
        self.gathered.push_batch(messages, reply);
        answer.await.map_err(|_| StoreError::ShuttingDown)?
    }
}

impl Drop for PutCoalescer {
    fn drop(&mut self) {
        // Let the pump see that no more puts come.
        self.gathered.wake_pump();
    }
}

/// Hands what is gathered to the writer, one request at a time, until the coalescer is gone.
async fn pump(gathered: Weak<Gathered>, mut writer: mpsc::Sender<PutRequest>) {
    loop {
        let waiting = poll_fn(|cx| {
            let Some(gathered) = gathered.upgrade() else {
                // The coalescer is gone, so no put of it is awaited any more (a put borrows
                // it): what is still gathered belongs to callers that went away.
                return Poll::Ready(false);
            };
            if gathered.requests.borrow().is_empty() {
                gathered.pump.set(Some(cx.waker().clone()));
                Poll::Pending
            } else {
                Poll::Ready(true)
            }
        })
        .await;
        if !waiting {
            return;
        }
        // The other tasks woken in this turn (connections with a request read, producers
        // answered) run before the pump does again: their puts go in the same request.
        futures_lite::future::yield_now().await;
        while let Some(handover) = gathered
            .upgrade()
            .and_then(|gathered| gathered.next_request())
        {
            // The writer gone, the request drops with its repliers: "shutting down".
            let _ = match handover {
                Handover::Many {
                    messages,
                    body_crcs,
                    replies,
                    ..
                } => {
                    let (reply, answers) = mpsc::unbounded();
                    let request = PutRequest::Many {
                        messages,
                        body_crcs,
                        reply,
                    };
                    let sent = writer.send(request).await;
                    // The pump goes on while the writer works; this spreads the answers.
                    glommio::spawn_local(spread_answers(answers, replies)).detach();
                    sent
                }
                Handover::Batch(messages, reply) => {
                    writer.send(PutRequest::batch(messages, reply)).await
                }
            };
        }
    }
}

/// Answers each put of a request from the writer's answers, which come in order, in parts.
async fn spread_answers(
    mut answers: mpsc::UnboundedReceiver<Vec<PutResult>>,
    replies: Vec<oneshot::Sender<PutResult>>,
) {
    let mut replies = replies.into_iter();
    while let Some(part) = answers.next().await {
        // (Not `replies.zip(part)`, which would take one reply past the part's end.)
        for outcome in part {
            if let Some(reply) = replies.next() {
                // A caller that went away needs no answer.
                let _ = reply.send(outcome);
            }
        }
    }
    // Puts left without an answer (the writer stopped) drop their repliers: their callers
    // hear "shutting down".
}
