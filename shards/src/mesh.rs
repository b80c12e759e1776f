//! `Mesh`: bounded all-to-all channels between shards, one per ordered pair, plus a bounded
//! queue from each shard to itself.
//!
//! ```text
//!            shard-00          shard-01          shard-02
//! shard-00   self queue        spsc channel      spsc channel
//! shard-01   spsc channel      self queue        spsc channel
//! shard-02   spsc channel      spsc channel      self queue
//!            (row = sender, column = receiver; every cell holds at most `capacity` messages)
//! ```
//!
//! The channels are glommio `shared_channel`s (lock-free single-producer single-consumer rings).
//! The matrix is built by the runtime in shard order, so the channel from shard `a` to shard `b`
//! sits at index `b` of `a`'s senders and `a` of `b`'s receivers, and a message always arrives
//! tagged with the [`ShardId`] that sent it. glommio's `MeshBuilder` is not used: it numbers
//! peers by executor creation order rather than by shard, and its builder shares an `Rc` between
//! threads.
//!
//! Backpressure: [`Mesh::send_to`] waits while the receiver's inbound channel from us is full,
//! and [`Mesh::try_send_to`] reports [`MeshError::Full`]. A waiting sender is woken by the
//! receiving shard as soon as it takes a message from that channel, or when it drops its mesh
//! (the send then fails with [`MeshError::Closed`] instead of waiting forever).
//!
//! Invariant: messages from one shard to another arrive in the order they were sent; messages
//! from different shards interleave fairly (round robin among shards with messages waiting).

use std::cell::RefCell;
use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{fence, AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use futures::stream::{SelectAll, Stream, StreamExt};
use glommio::channels::shared_channel::{self, ConnectedReceiver, ConnectedSender};
use glommio::channels::shared_channel::{SharedReceiver, SharedSender};
use glommio::{GlommioError, ResourceType};

use crate::shard_id::ShardId;

/// One shard's handle on the mesh (per-shard and `!Send`).
///
/// Dropping it closes this shard's channels in both directions: peers' receives from us end and
/// their sends to us fail with [`MeshError::Closed`].
pub struct Mesh<M: Send + 'static> {
    me: ShardId,
    capacity: usize,
    /// Channel to each peer, indexed by shard; `None` at our own index.
    outbound: Vec<Option<Outbound<M>>>,
    /// Wake-up points of the channels into this shard, to release senders when we go away.
    inbound_rooms: Vec<Arc<Room>>,
    self_queue: Rc<SelfQueue<M>>,
    /// Every inbound channel and the self queue, merged; streams leave it once closed and empty.
    inbound: RefCell<SelectAll<Inbound<M>>>,
    /// Tasks waiting in [`Mesh::recv`]; `SelectAll` remembers only one waker, this keeps all.
    recv_waiters: Arc<RecvWaiters>,
    /// Waker handed to `inbound`; waking it wakes every task in `recv_waiters`.
    recv_waker: Waker,
}

/// Why a message could not be sent over the [`Mesh`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MeshError {
    /// The receiver's inbound channel is full (only from the `try_` variants); retry later or
    /// use [`Mesh::send_to`], which waits for room.
    #[error("the channel to the receiving shard is full: retry later, or await send_to")]
    Full,
    /// The receiving shard dropped its mesh, or this shard closed its sending side.
    #[error("the channel to {to} is closed: that shard stopped, or this one closed its mesh")]
    Closed {
        /// The intended receiver.
        to: ShardId,
    },
    /// There is no such shard in the placement.
    #[error("there is no {to} in this placement: send only to ids below Mesh::len()")]
    NoSuchShard {
        /// The intended receiver.
        to: ShardId,
    },
}

/// The ends of the mesh that belong to one shard, before that shard connects them.
///
/// Built on the spawning thread and moved to the shard's thread (it is `Send`).
pub(crate) struct MeshEnds<M: Send + 'static> {
    me: ShardId,
    capacity: usize,
    outbound: Vec<Option<(SharedSender<M>, Arc<Room>)>>,
    inbound: Vec<Option<(SharedReceiver<M>, Arc<Room>)>>,
}

struct Outbound<M: Send + 'static> {
    sender: ConnectedSender<M>,
    room: Arc<Room>,
}

/// The receiving side of one channel, as a stream of tagged messages.
enum Inbound<M: Send + 'static> {
    Peer {
        from: ShardId,
        receiver: ConnectedReceiver<M>,
        room: Arc<Room>,
    },
    Local {
        me: ShardId,
        queue: Rc<SelfQueue<M>>,
    },
}

/// Where senders blocked on a full channel wait for the receiver to take a message.
///
/// glommio's own blocking send is not used because it never wakes if the receiver goes away
/// while the channel is full.
#[derive(Default)]
struct Room {
    /// Set by a sender after it registered a waker; cleared by the receiver that wakes them.
    waiting: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

/// The tasks blocked in [`Mesh::recv`] on one shard.
#[derive(Default)]
struct RecvWaiters {
    wakers: Mutex<Vec<Waker>>,
}

/// Bounded FIFO from a shard to itself; glommio's mesh has no self channel.
struct SelfQueue<M> {
    me: ShardId,
    state: RefCell<SelfQueueState<M>>,
}

struct SelfQueueState<M> {
    items: VecDeque<M>,
    capacity: usize,
    closed: bool,
    receiver: Option<Waker>,
    senders: Vec<Waker>,
}

impl<M: Send + 'static> Mesh<M> {
    /// A mesh with one shard, `shard-00`, which can only send to itself.
    ///
    /// For tests and single-shard embedding; needs no executor. `capacity` is rounded up to a
    /// power of two like the runtime's.
    pub fn single_shard(capacity: usize) -> Mesh<M> {
        let capacity = effective_capacity(capacity);
        let me = ShardId(0);
        let self_queue = Rc::new(SelfQueue::new(me, capacity));
        let inbound = vec![Inbound::Local {
            me,
            queue: Rc::clone(&self_queue),
        }];
        Mesh::assemble(me, capacity, vec![None], Vec::new(), self_queue, inbound)
    }

    /// This shard's id.
    pub fn me(&self) -> ShardId {
        self.me
    }

    /// The number of shards in the mesh, this one included.
    pub fn len(&self) -> usize {
        self.outbound.len()
    }

    /// Always false: a mesh includes at least its own shard.
    pub fn is_empty(&self) -> bool {
        self.outbound.is_empty()
    }

    /// How many messages each channel (and the self queue) holds before senders wait.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Every shard id in the mesh, this one included.
    pub fn shards(&self) -> impl Iterator<Item = ShardId> {
        (0..self.len()).map(ShardId::new)
    }

    /// Sends `msg` to shard `to`, waiting while its inbound channel from us is full.
    ///
    /// Sending to [`Mesh::me`] goes through the bounded self queue. A task must not await a
    /// self-send while it is the only task receiving: once the queue is full, nobody would make
    /// room. Use [`Mesh::try_send_to`] there.
    ///
    /// # Errors
    ///
    /// [`MeshError::NoSuchShard`] for an id outside the mesh, [`MeshError::Closed`] if `to` has
    /// dropped its mesh or this shard closed its own.
    ///
    /// # Cancel safety
    ///
    /// Not cancel safe: if the future is dropped while waiting for room, `msg` is dropped unsent.
    pub async fn send_to(&self, to: ShardId, msg: M) -> Result<(), MeshError> {
        let mut pending = Some(msg);
        poll_fn(|cx| {
            let msg = pending
                .take()
                .expect("invariant: not polled after completion");
            let polled = if to == self.me {
                self.self_queue.poll_push(cx, msg)
            } else {
                match self.outbound(to) {
                    Ok(outbound) => outbound.poll_send(cx, to, msg),
                    Err(error) => SendPoll::Ready(Err((error, msg))),
                }
            };
            match polled {
                SendPoll::Ready(result) => Poll::Ready(result.map_err(|(error, _)| error)),
                SendPoll::Pending(msg) => {
                    pending = Some(msg);
                    Poll::Pending
                }
            }
        })
        .await
    }

    /// Sends `msg` to shard `to` if its inbound channel from us has room, without waiting.
    ///
    /// # Errors
    ///
    /// [`MeshError::Full`] when the channel is full, otherwise as [`Mesh::send_to`]. The message
    /// is dropped; [`Mesh::try_send_to_returning`] gives it back instead.
    pub fn try_send_to(&self, to: ShardId, msg: M) -> Result<(), MeshError> {
        self.try_send_to_returning(to, msg)
            .map_err(|(error, _)| error)
    }

    /// [`Mesh::try_send_to`] that hands the message back on failure, so the caller can retry
    /// or reroute it without cloning.
    ///
    /// # Errors
    ///
    /// As [`Mesh::try_send_to`], paired with the unsent message.
    pub fn try_send_to_returning(&self, to: ShardId, msg: M) -> Result<(), (MeshError, M)> {
        if to == self.me {
            return self.self_queue.try_push(msg);
        }
        match self.outbound(to) {
            Ok(outbound) => outbound
                .sender
                .try_send(msg)
                .map_err(|error| split_error(to, error)),
            Err(error) => Err((error, msg)),
        }
    }

    /// Receives the next message from any shard (this one included) with its sender's id.
    ///
    /// Shards with messages waiting are served in turn, so a busy peer cannot starve the others.
    /// Returns `None` once every peer has closed or dropped its mesh and this shard has closed
    /// its own ([`Mesh::close`]), and every message sent before that was received.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: a message is taken from its channel only when this future completes with it.
    pub async fn recv(&self) -> Option<(ShardId, M)> {
        poll_fn(|cx| {
            let mut inbound_cx = Context::from_waker(&self.recv_waker);
            let polled = self.inbound.borrow_mut().poll_next_unpin(&mut inbound_cx);
            if polled.is_ready() {
                return polled;
            }
            // Register, then poll again: the first poll may already have woken `recv_waker`
            // (`SelectAll` wakes itself when it yields) while this task was not listed yet.
            self.recv_waiters.register(cx.waker());
            self.inbound.borrow_mut().poll_next_unpin(&mut inbound_cx)
        })
        .await
    }

    /// Stops this shard from sending: peers' receives from us end once they drained what we
    /// sent, our own later sends fail with [`MeshError::Closed`], and our receive side keeps
    /// working until every peer closed too. Idempotent.
    pub fn close(&self) {
        for outbound in self.outbound.iter().flatten() {
            outbound.sender.close();
            // Tasks of this shard blocked on a full channel must see the close now.
            outbound.room.wake_all();
        }
        self.self_queue.close();
    }

    fn assemble(
        me: ShardId,
        capacity: usize,
        outbound: Vec<Option<Outbound<M>>>,
        inbound_rooms: Vec<Arc<Room>>,
        self_queue: Rc<SelfQueue<M>>,
        inbound: Vec<Inbound<M>>,
    ) -> Mesh<M> {
        let recv_waiters = Arc::new(RecvWaiters::default());
        Mesh {
            me,
            capacity,
            outbound,
            inbound_rooms,
            self_queue,
            inbound: RefCell::new(futures::stream::select_all(inbound)),
            recv_waker: Waker::from(Arc::clone(&recv_waiters)),
            recv_waiters,
        }
    }

    fn outbound(&self, to: ShardId) -> Result<&Outbound<M>, MeshError> {
        match self.outbound.get(to.index()) {
            Some(Some(outbound)) => Ok(outbound),
            Some(None) => unreachable!("the self entry is handled before looking up peers"),
            None => Err(MeshError::NoSuchShard { to }),
        }
    }
}

impl<M: Send + 'static> fmt::Debug for Mesh<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mesh")
            .field("me", &self.me)
            .field("len", &self.len())
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl<M: Send + 'static> Drop for Mesh<M> {
    fn drop(&mut self) {
        // Disconnect the receivers first, so that senders woken below find the channel closed
        // instead of waiting again.
        drop(std::mem::take(self.inbound.get_mut()));
        for room in &self.inbound_rooms {
            room.wake_all();
        }
        self.close();
    }
}

impl<M: Send + 'static> MeshEnds<M> {
    /// Connects every channel of this shard; completes once each peer connected its side too.
    ///
    /// # Panics
    ///
    /// Panics if called outside a glommio executor.
    pub(crate) async fn connect(self) -> Mesh<M> {
        let me = self.me;
        let outbound = futures::future::join_all(self.outbound.into_iter().map(|end| async {
            match end {
                Some((sender, room)) => Some(Outbound {
                    sender: sender.connect().await,
                    room,
                }),
                None => None,
            }
        }));
        let inbound = futures::future::join_all(self.inbound.into_iter().enumerate().map(
            |(index, end)| async move {
                match end {
                    Some((receiver, room)) => {
                        Some((ShardId::new(index), receiver.connect().await, room))
                    }
                    None => None,
                }
            },
        ));
        let (outbound, inbound) = futures::future::join(outbound, inbound).await;
        assert!(
            outbound[me.index()].is_none(),
            "no channel from a shard to itself"
        );

        let self_queue = Rc::new(SelfQueue::new(me, self.capacity));
        let mut inbound_rooms = Vec::with_capacity(inbound.len());
        let mut streams = vec![Inbound::Local {
            me,
            queue: Rc::clone(&self_queue),
        }];
        for (from, receiver, room) in inbound.into_iter().flatten() {
            inbound_rooms.push(Arc::clone(&room));
            streams.push(Inbound::Peer {
                from,
                receiver,
                room,
            });
        }
        Mesh::assemble(
            me,
            self.capacity,
            outbound,
            inbound_rooms,
            self_queue,
            streams,
        )
    }
}

/// Builds the unconnected channel matrix for `count` shards; element `i` belongs to shard `i`.
///
/// `capacity` is rounded up to a power of two, as glommio's rings are.
pub(crate) fn build_mesh<M: Send + 'static>(count: usize, capacity: usize) -> Vec<MeshEnds<M>> {
    let capacity = effective_capacity(capacity);
    let mut ends: Vec<MeshEnds<M>> = (0..count)
        .map(|index| MeshEnds {
            me: ShardId::new(index),
            capacity,
            outbound: (0..count).map(|_| None).collect(),
            inbound: (0..count).map(|_| None).collect(),
        })
        .collect();
    for from in 0..count {
        for to in (0..count).filter(|to| *to != from) {
            let (sender, receiver) = shared_channel::new_bounded(capacity);
            let room = Arc::new(Room::default());
            ends[from].outbound[to] = Some((sender, Arc::clone(&room)));
            ends[to].inbound[from] = Some((receiver, room));
        }
    }
    ends
}

/// The capacity channels really have: glommio rounds ring sizes up to a power of two.
pub(crate) fn effective_capacity(requested: usize) -> usize {
    requested.max(1).next_power_of_two()
}

/// Like `Poll`, but a pending send gives its message back for the next attempt.
enum SendPoll<M> {
    Ready(Result<(), (MeshError, M)>),
    Pending(M),
}

impl<M: Send + 'static> Outbound<M> {
    fn poll_send(&self, cx: &Context<'_>, to: ShardId, msg: M) -> SendPoll<M> {
        let msg = match self.sender.try_send(msg) {
            Ok(()) => return SendPoll::Ready(Ok(())),
            Err(GlommioError::WouldBlock(ResourceType::Channel(msg))) => msg,
            Err(error) => return SendPoll::Ready(Err(split_error(to, error))),
        };
        self.room.register(cx.waker());
        // Retry after registering: the receiver may have made room before it saw our waker.
        // The fences pair with the one in `Room::notify` (a Dekker handshake on `waiting`).
        fence(Ordering::SeqCst);
        match self.sender.try_send(msg) {
            Ok(()) => SendPoll::Ready(Ok(())),
            Err(GlommioError::WouldBlock(ResourceType::Channel(msg))) => SendPoll::Pending(msg),
            Err(error) => SendPoll::Ready(Err(split_error(to, error))),
        }
    }
}

/// Turns a failed `try_send` into our error, keeping the message.
fn split_error<M>(to: ShardId, error: GlommioError<M>) -> (MeshError, M) {
    match error {
        GlommioError::WouldBlock(ResourceType::Channel(msg)) => (MeshError::Full, msg),
        GlommioError::Closed(ResourceType::Channel(msg)) => (MeshError::Closed { to }, msg),
        _ => unreachable!("shared_channel try_send fails only with WouldBlock or Closed"),
    }
}

impl<M: Send + 'static> Stream for Inbound<M> {
    type Item = (ShardId, M);

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<(ShardId, M)>> {
        match self.get_mut() {
            Inbound::Peer {
                from,
                receiver,
                room,
            } => {
                let polled = receiver.poll_next_unpin(cx);
                if let Poll::Ready(Some(_)) = polled {
                    room.notify();
                }
                polled.map(|msg| msg.map(|msg| (*from, msg)))
            }
            Inbound::Local { me, queue } => queue.poll_pop(cx).map(|msg| msg.map(|msg| (*me, msg))),
        }
    }
}

impl Room {
    fn register(&self, waker: &Waker) {
        let mut wakers = self.lock_wakers();
        // One entry per task: a task that polls again replaces nothing and adds nothing.
        if !wakers.iter().any(|known| known.will_wake(waker)) {
            wakers.push(waker.clone());
        }
        self.waiting.store(true, Ordering::SeqCst);
    }

    /// Called by the receiver after taking a message: wakes blocked senders, if any.
    fn notify(&self) {
        fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::SeqCst) {
            self.wake_all();
        }
    }

    fn wake_all(&self) {
        self.waiting.store(false, Ordering::SeqCst);
        let wakers = std::mem::take(&mut *self.lock_wakers());
        for waker in wakers {
            waker.wake();
        }
    }

    /// A panic while holding the lock cannot leave the list inconsistent (push or take only),
    /// so poisoning is ignored.
    fn lock_wakers(&self) -> MutexGuard<'_, Vec<Waker>> {
        self.wakers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl RecvWaiters {
    fn register(&self, waker: &Waker) {
        let mut wakers = self.lock_wakers();
        if !wakers.iter().any(|known| known.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }

    /// A panic while holding the lock cannot leave the list inconsistent (push or take only),
    /// so poisoning is ignored.
    fn lock_wakers(&self) -> MutexGuard<'_, Vec<Waker>> {
        self.wakers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Wake for RecvWaiters {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let wakers = std::mem::take(&mut *self.lock_wakers());
        for waker in wakers {
            waker.wake();
        }
    }
}

impl<M> SelfQueue<M> {
    fn new(me: ShardId, capacity: usize) -> SelfQueue<M> {
        SelfQueue {
            me,
            state: RefCell::new(SelfQueueState {
                items: VecDeque::with_capacity(capacity),
                capacity,
                closed: false,
                receiver: None,
                senders: Vec::new(),
            }),
        }
    }

    fn try_push(&self, msg: M) -> Result<(), (MeshError, M)> {
        let mut state = self.state.borrow_mut();
        if state.closed {
            return Err((MeshError::Closed { to: self.me }, msg));
        }
        if state.items.len() == state.capacity {
            return Err((MeshError::Full, msg));
        }
        state.items.push_back(msg);
        if let Some(waker) = state.receiver.take() {
            waker.wake();
        }
        Ok(())
    }

    fn poll_push(&self, cx: &Context<'_>, msg: M) -> SendPoll<M> {
        match self.try_push(msg) {
            Err((MeshError::Full, msg)) => {
                // Single-threaded: nothing can pop between the failed push and this
                // registration, so no retry is needed.
                let mut state = self.state.borrow_mut();
                if !state
                    .senders
                    .iter()
                    .any(|known| known.will_wake(cx.waker()))
                {
                    state.senders.push(cx.waker().clone());
                }
                SendPoll::Pending(msg)
            }
            other => SendPoll::Ready(other),
        }
    }

    fn poll_pop(&self, cx: &Context<'_>) -> Poll<Option<M>> {
        let mut state = self.state.borrow_mut();
        match state.items.pop_front() {
            Some(msg) => {
                for waker in std::mem::take(&mut state.senders) {
                    waker.wake();
                }
                Poll::Ready(Some(msg))
            }
            None if state.closed => Poll::Ready(None),
            None => {
                state.receiver = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }

    fn close(&self) {
        let mut state = self.state.borrow_mut();
        state.closed = true;
        let receiver = state.receiver.take();
        let senders = std::mem::take(&mut state.senders);
        drop(state);
        receiver.into_iter().chain(senders).for_each(Waker::wake);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Placement;
    use crate::runtime::{run_shards, RuntimeConfig, ShardContext};
    use crate::shutdown::Shutdown;
    use crate::testing::run_local;

    fn unpinned(count: usize) -> Placement {
        let text = match count {
            2 => "*:writer,net,control;*:dispatch,net",
            3 => "*:control,net;*:writer,net;*:dispatch,net",
            _ => unreachable!("tests use two or three shards"),
        };
        Placement::parse(text).expect("valid placement")
    }

    fn config(mesh_capacity: usize) -> RuntimeConfig {
        RuntimeConfig {
            mesh_capacity,
            ..RuntimeConfig::default()
        }
    }

    /// Runs `f` on `count` unpinned shards with the given channel capacity.
    fn run<M, T, F, Fut>(count: usize, mesh_capacity: usize, f: F) -> Vec<T>
    where
        M: Send + 'static,
        T: Send + 'static,
        F: Fn(ShardContext<M>) -> Fut + Send + Sync + Clone + 'static,
        Fut: std::future::Future<Output = T> + 'static,
    {
        run_shards(unpinned(count), config(mesh_capacity), Shutdown::new(), f).expect("shards ran")
    }

    #[test]
    fn me_matches_context_id_and_len_counts_all_shards() {
        let seen = run::<u8, _, _, _>(3, 8, |ctx| async move {
            (
                ctx.id,
                ctx.mesh.me(),
                ctx.mesh.len(),
                ctx.mesh.shards().count(),
            )
        });
        for (index, (id, me, len, shards)) in seen.into_iter().enumerate() {
            assert_eq!(id, ShardId::new(index));
            assert_eq!(me, id);
            assert_eq!((len, shards), (3, 3));
        }
    }

    #[test]
    fn ping_pong_two_shards_round_trips_in_order() {
        const ROUNDS: u64 = 1_000;
        let replies = run::<u64, _, _, _>(2, 4, |ctx| async move {
            let mesh = &ctx.mesh;
            let mut seen = Vec::new();
            if ctx.id == ShardId(0) {
                for round in 0..ROUNDS {
                    mesh.send_to(ShardId(1), round).await.expect("ping sent");
                    seen.push(mesh.recv().await.expect("pong received"));
                }
            } else {
                for _ in 0..ROUNDS {
                    let (from, round) = mesh.recv().await.expect("ping received");
                    seen.push((from, round));
                    mesh.send_to(from, round + 1).await.expect("pong sent");
                }
            }
            seen
        });
        let replies_to_zero: Vec<_> = (1..=ROUNDS).map(|round| (ShardId(1), round)).collect();
        let requests_to_one: Vec<_> = (0..ROUNDS).map(|round| (ShardId(0), round)).collect();
        assert_eq!(replies, [replies_to_zero, requests_to_one]);
    }

    #[test]
    fn all_to_all_three_shards_counts_every_message() {
        const PER_PEER: u32 = 10_000;
        // A small capacity makes senders wait for room thousands of times.
        let results = run::<u32, _, _, _>(3, 16, |ctx| async move {
            let mesh = Rc::new(ctx.mesh);
            let receiver = Rc::clone(&mesh);
            let receiving = ctx.task_queues.spawn_foreground(async move {
                let mut counts = [0_u32; 3];
                let mut in_order = true;
                for _ in 0..PER_PEER * 3 {
                    let (from, seq) = receiver.recv().await.expect("message received");
                    in_order &= seq == counts[from.index()];
                    counts[from.index()] += 1;
                }
                (counts, in_order)
            });
            for seq in 0..PER_PEER {
                for to in mesh.shards() {
                    mesh.send_to(to, seq).await.expect("message sent");
                }
            }
            receiving.await
        });
        for (counts, in_order) in results {
            assert_eq!(counts, [PER_PEER; 3]);
            assert!(in_order, "messages from one shard arrive in the order sent");
        }
    }

    #[test]
    fn try_send_to_full_when_receiver_not_reading() {
        let results = run::<u32, _, _, _>(2, 4, |ctx| async move {
            let mesh = &ctx.mesh;
            let mut sent = Vec::new();
            let mut received = Vec::new();
            if ctx.id == ShardId(1) {
                ctx.shutdown.wait().await;
                for _ in 0..5 {
                    received.push(mesh.recv().await.map(|(_, seq)| seq));
                }
                return (sent, received);
            }
            sent.extend((0..4).map(|seq| mesh.try_send_to(ShardId(1), seq)));
            sent.push(mesh.try_send_to(ShardId(1), 4));
            sent.push(
                mesh.try_send_to_returning(ShardId(1), 5)
                    .map_err(|(error, _)| error),
            );
            // Shard 1 starts reading only now, so this waiting send needs it to make room.
            ctx.shutdown.trigger();
            sent.push(mesh.send_to(ShardId(1), 6).await);
            (sent, received)
        });
        let (ok, full) = (Ok(()), Err(MeshError::Full));
        assert_eq!(results[0].0, [ok, ok, ok, ok, full, full, ok]);
        let received: Vec<_> = [0, 1, 2, 3, 6].into_iter().map(Some).collect();
        assert_eq!(results[1].1, received);
    }

    #[test]
    fn try_send_to_returning_full_gives_message_back() {
        run_local(async {
            let mesh = Mesh::<String>::single_shard(1);
            mesh.try_send_to(ShardId(0), "first".to_owned())
                .expect("room for one");
            let (error, msg) = mesh
                .try_send_to_returning(ShardId(0), "second".to_owned())
                .expect_err("queue is full");
            assert_eq!((error, msg.as_str()), (MeshError::Full, "second"));
        });
    }

    #[test]
    fn send_to_self_arrives_tagged_with_me() {
        let results = run::<&'static str, _, _, _>(2, 4, |ctx| async move {
            ctx.mesh
                .send_to(ctx.id, "hello me")
                .await
                .expect("self send");
            ctx.mesh.recv().await
        });
        assert_eq!(
            results,
            [
                Some((ShardId(0), "hello me")),
                Some((ShardId(1), "hello me"))
            ]
        );
    }

    #[test]
    fn self_queue_full_and_closed_are_reported() {
        run_local(async {
            let mesh = Mesh::<u8>::single_shard(3);
            assert_eq!(mesh.capacity(), 4);
            for seq in 0..4 {
                mesh.try_send_to(ShardId(0), seq).expect("room");
            }
            assert_eq!(mesh.try_send_to(ShardId(0), 4), Err(MeshError::Full));
            mesh.close();
            assert_eq!(
                mesh.try_send_to(ShardId(0), 5),
                Err(MeshError::Closed { to: ShardId(0) })
            );
            let mut drained = Vec::new();
            while let Some((from, seq)) = mesh.recv().await {
                assert_eq!(from, ShardId(0));
                drained.push(seq);
            }
            assert_eq!(drained, [0, 1, 2, 3]);
        });
    }

    #[test]
    fn send_to_self_waits_for_room_then_delivers() {
        let received = run_local(async {
            let mesh = Rc::new(Mesh::<u8>::single_shard(1));
            mesh.try_send_to(ShardId(0), 1).expect("room");
            let sender = Rc::clone(&mesh);
            let sending = glommio::spawn_local(async move { sender.send_to(ShardId(0), 2).await });
            let first = mesh.recv().await;
            sending
                .await
                .expect("second send completes after the first recv");
            (first, mesh.recv().await)
        });
        assert_eq!(received, (Some((ShardId(0), 1)), Some((ShardId(0), 2))));
    }

    #[test]
    fn recv_from_two_tasks_wakes_both() {
        let received = run_local(async {
            let mesh = Rc::new(Mesh::<u8>::single_shard(4));
            let receivers: Vec<_> = (0..2)
                .map(|_| {
                    let mesh = Rc::clone(&mesh);
                    glommio::spawn_local(async move { mesh.recv().await })
                })
                .collect();
            // Both receivers block before anything is sent.
            glommio::executor().yield_task_queue_now().await;
            mesh.send_to(ShardId(0), 1).await.expect("sent");
            mesh.send_to(ShardId(0), 2).await.expect("sent");
            let mut received = Vec::new();
            for receiver in receivers {
                received.push(receiver.await);
            }
            received.sort();
            received
        });
        assert_eq!(received, [Some((ShardId(0), 1)), Some((ShardId(0), 2))]);
    }

    #[test]
    fn send_to_unknown_shard_is_no_such_shard() {
        run_local(async {
            let mesh = Mesh::<u8>::single_shard(4);
            let to = ShardId(1);
            assert_eq!(mesh.try_send_to(to, 0), Err(MeshError::NoSuchShard { to }));
            assert_eq!(
                mesh.send_to(to, 0).await,
                Err(MeshError::NoSuchShard { to })
            );
        });
    }

    #[test]
    fn recv_after_every_shard_closes_returns_none() {
        let received = run::<u8, _, _, _>(3, 4, |ctx| async move {
            for to in ctx.mesh.shards() {
                ctx.mesh.send_to(to, 7).await.expect("sent before closing");
            }
            ctx.mesh.close();
            let mut received = Vec::new();
            while let Some(message) = ctx.mesh.recv().await {
                received.push(message);
            }
            received.sort();
            received
        });
        let everyone: Vec<_> = (0..3).map(|index| (ShardId::new(index), 7)).collect();
        assert_eq!(received, [everyone.clone(), everyone.clone(), everyone]);
    }

    #[test]
    fn send_to_after_own_close_is_closed() {
        let errors = run::<u8, _, _, _>(2, 4, |ctx| async move {
            ctx.mesh.close();
            let peer = ShardId::new(1 - ctx.id.index());
            (
                ctx.mesh.send_to(peer, 1).await,
                ctx.mesh.try_send_to(peer, 2),
            )
        });
        for (index, (waited, tried)) in errors.into_iter().enumerate() {
            let to = ShardId::new(1 - index);
            assert_eq!(waited, Err(MeshError::Closed { to }));
            assert_eq!(tried, Err(MeshError::Closed { to }));
        }
    }

    #[test]
    fn send_to_blocked_on_full_peer_is_closed_when_peer_drops_mesh() {
        let results = run::<u8, _, _, _>(2, 2, |ctx| async move {
            let ShardContext {
                id, mesh, shutdown, ..
            } = ctx;
            if id == ShardId(1) {
                // Never read; go away once shard 0 is blocked.
                shutdown.wait().await;
                drop(mesh);
                return None;
            }
            while mesh.try_send_to(ShardId(1), 0).is_ok() {}
            let mut blocked = std::pin::pin!(mesh.send_to(ShardId(1), 1));
            let first_poll = futures::poll!(blocked.as_mut());
            shutdown.trigger();
            Some((first_poll, blocked.await))
        });
        let closed = Err(MeshError::Closed { to: ShardId(1) });
        assert_eq!(results[0], Some((Poll::Pending, closed)));
    }

    #[test]
    fn recv_ends_for_peer_that_dropped_mesh() {
        let results = run::<u8, _, _, _>(2, 4, |ctx| async move {
            let ShardContext { id, mesh, .. } = ctx;
            if id == ShardId(1) {
                mesh.send_to(ShardId(0), 9).await.expect("sent");
                drop(mesh);
                return Vec::new();
            }
            mesh.close();
            let mut received = Vec::new();
            while let Some(message) = mesh.recv().await {
                received.push(message);
            }
            received
        });
        assert_eq!(results[0], [(ShardId(1), 9)]);
    }

    #[test]
    fn capacity_is_rounded_up_to_power_of_two() {
        assert_eq!(effective_capacity(0), 1);
        assert_eq!(effective_capacity(1), 1);
        assert_eq!(effective_capacity(1000), 1024);
        assert_eq!(effective_capacity(1024), 1024);
    }
}
