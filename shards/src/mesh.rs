//! `Mesh`: bounded all-to-all channels between shards, one per ordered pair of shards, the
//! pair of a shard with itself included.
//!
//! ```text
//!            shard-00          shard-01          shard-02
//! shard-00   self queue        channel           channel
//! shard-01   channel           self queue        channel
//! shard-02   channel           channel           self queue
//!            (row = sender, column = receiver; every cell holds at most `capacity` messages)
//! ```
//!
//! Each channel is a bounded FIFO behind a mutex that only its two shards touch, plus two
//! waiter lists: the receiving shard's tasks blocked in [`Mesh::recv`] (one list shared by all
//! channels into that shard) and the sending shard's tasks blocked on a full channel. A task on
//! another shard is woken through its `Waker`, which glommio routes to the owning executor
//! (and its eventfd, if that executor sleeps).
//!
//! Why not glommio's `shared_channel`: while hunting lost cross-shard wake-ups (every shard
//! asleep with messages queued) the channels were replaced by these plain queues, whose
//! register-then-recheck protocol is short enough to verify by reading: a waiter registers its
//! waker, then looks at the queue again under the queue's lock, and a peer that changes the
//! queue wakes the registered wakers after releasing that lock. The wake-ups turned out to be
//! lost inside glommio's executor sleep path when a queue has a short latency budget (see
//! `task_queues.rs`); the plain queues stay because they have one fewer moving part.
//!
//! Backpressure: [`Mesh::send_to`] waits while the receiver's channel from us is full, and
//! [`Mesh::try_send_to`] reports [`MeshError::Full`]. A waiting sender is woken as soon as the
//! receiver takes a message from a full channel, or when the receiver drops its mesh (the send
//! then fails with [`MeshError::Closed`] instead of waiting forever).
//!
//! Invariant: messages from one shard to another arrive in the order they were sent; messages
//! from different shards interleave fairly (round robin among shards with messages waiting).

use std::cell::Cell;
use std::collections::VecDeque;
use std::fmt;
use std::future::poll_fn;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Poll, Waker};

use crate::shard_id::ShardId;

/// One shard's handle on the mesh (per-shard: it belongs to the shard that connected it).
///
/// Dropping it closes this shard's channels in both directions: peers' receives from us end and
/// their sends to us fail with [`MeshError::Closed`].
pub struct Mesh<M: Send + 'static> {
    me: ShardId,
    capacity: usize,
    /// Channel to each shard, indexed by receiver; our own index is the self queue.
    outbound: Vec<Arc<Channel<M>>>,
    /// Channel from each shard, indexed by sender; our own index is the self queue.
    inbound: Vec<Arc<Channel<M>>>,
    /// Tasks of this shard blocked in [`Mesh::recv`]; every inbound channel wakes them.
    receivers: Arc<Waiters>,
    /// Where the next round-robin scan of `inbound` starts.
    next_inbound: Cell<usize>,
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
    outbound: Vec<Arc<Channel<M>>>,
    inbound: Vec<Arc<Channel<M>>>,
    receivers: Arc<Waiters>,
}

/// One bounded FIFO from one shard to another (or to itself).
struct Channel<M> {
    state: Mutex<ChannelState<M>>,
    capacity: usize,
    /// The receiving shard's blocked receivers (shared by all its inbound channels).
    receivers: Arc<Waiters>,
    /// The sending shard's tasks waiting for room in this channel.
    senders: Waiters,
}

struct ChannelState<M> {
    items: VecDeque<M>,
    /// The sender closed its side: once empty, the channel ends.
    sender_closed: bool,
    /// The receiver dropped its mesh: sends fail.
    receiver_closed: bool,
}

/// Wakers of blocked tasks; every entry is woken (and removed) by [`Waiters::wake_all`].
#[derive(Default)]
struct Waiters {
    wakers: Mutex<Vec<Waker>>,
}

impl<M: Send + 'static> Mesh<M> {
    /// A mesh with one shard, `shard-00`, which can only send to itself.
    ///
    /// For tests and single-shard embedding; needs no executor. `capacity` is rounded up to a
    /// power of two like the runtime's.
    pub fn single_shard(capacity: usize) -> Mesh<M> {
        let mut ends = build_mesh(1, capacity);
        ends.pop().expect("one shard").into_mesh()
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
        let channel = self.outbound(to)?;
        let mut pending = Some(msg);
        poll_fn(|cx| {
            let msg = pending
                .take()
                .expect("invariant: not polled after completion");
            let msg = match channel.try_push(to, msg) {
                Ok(()) => return Poll::Ready(Ok(())),
                Err((MeshError::Full, msg)) => msg,
                Err((error, _)) => return Poll::Ready(Err(error)),
            };
            channel.senders.register(cx.waker());
            // Look again after registering: the receiver may have made room before it could
            // see our waker.
            match channel.try_push(to, msg) {
                Ok(()) => Poll::Ready(Ok(())),
                Err((MeshError::Full, msg)) => {
                    pending = Some(msg);
                    Poll::Pending
                }
                Err((error, _)) => Poll::Ready(Err(error)),
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
        match self.outbound(to) {
            Ok(channel) => channel.try_push(to, msg),
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
            if let Some(ready) = self.try_recv() {
                return Poll::Ready(ready);
            }
            self.receivers.register(cx.waker());
            // Look again after registering: a sender may have pushed before it could see our
            // waker.
            match self.try_recv() {
                Some(ready) => Poll::Ready(ready),
                None => Poll::Pending,
            }
        })
        .await
    }

    /// Stops this shard from sending: peers' receives from us end once they drained what we
    /// sent, our own later sends fail with [`MeshError::Closed`], and our receive side keeps
    /// working until every peer closed too. Idempotent.
    pub fn close(&self) {
        for channel in &self.outbound {
            channel.lock().sender_closed = true;
            channel.receivers.wake_all();
            // Tasks of this shard blocked on a full channel must see the close now.
            channel.senders.wake_all();
        }
    }

    /// One scan of the inbound channels: `Some(Some(..))` a message, `Some(None)` every
    /// channel ended, `None` nothing yet.
    fn try_recv(&self) -> Option<Option<(ShardId, M)>> {
        let count = self.inbound.len();
        let start = self.next_inbound.get();
        let mut ended = 0;
        for step in 0..count {
            let from = (start + step) % count;
            let channel = &self.inbound[from];
            let mut state = channel.lock();
            let was_full = state.items.len() >= channel.capacity;
            match state.items.pop_front() {
                Some(msg) => {
                    drop(state);
                    if was_full {
                        channel.senders.wake_all();
                    }
                    self.next_inbound.set((from + 1) % count);
                    return Some(Some((ShardId::new(from), msg)));
                }
                None if state.sender_closed => ended += 1,
                None => {}
            }
        }
        (ended == count).then_some(None)
    }

    fn outbound(&self, to: ShardId) -> Result<&Arc<Channel<M>>, MeshError> {
        self.outbound
            .get(to.index())
            .ok_or(MeshError::NoSuchShard { to })
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
        // Refuse further sends to us first, so that senders woken below find the channel
        // closed instead of waiting again; what was queued for us is dropped.
        for channel in &self.inbound {
            let dropped = {
                let mut state = channel.lock();
                state.receiver_closed = true;
                std::mem::take(&mut state.items)
            };
            drop(dropped);
            channel.senders.wake_all();
        }
        self.close();
    }
}

impl<M: Send + 'static> MeshEnds<M> {
    /// Connects this shard's ends. Kept async so that a transport needing a handshake with
    /// its peers can replace the queues without changing the runtime.
    pub(crate) async fn connect(self) -> Mesh<M> {
        self.into_mesh()
    }

    fn into_mesh(self) -> Mesh<M> {
        assert_eq!(
            self.outbound.len(),
            self.inbound.len(),
            "square channel matrix"
        );
        Mesh {
            me: self.me,
            capacity: self.capacity,
            outbound: self.outbound,
            inbound: self.inbound,
            receivers: self.receivers,
            next_inbound: Cell::new(0),
        }
    }
}

/// Builds the channel matrix for `count` shards; element `i` belongs to shard `i`.
///
/// `capacity` is rounded up to a power of two.
pub(crate) fn build_mesh<M: Send + 'static>(count: usize, capacity: usize) -> Vec<MeshEnds<M>> {
    let capacity = effective_capacity(capacity);
    let receivers: Vec<Arc<Waiters>> = (0..count).map(|_| Arc::new(Waiters::default())).collect();
    let matrix: Vec<Vec<Arc<Channel<M>>>> = (0..count)
        .map(|_from| {
            (0..count)
                .map(|to| {
                    Arc::new(Channel {
                        state: Mutex::new(ChannelState {
                            items: VecDeque::with_capacity(capacity),
                            sender_closed: false,
                            receiver_closed: false,
                        }),
                        capacity,
                        receivers: Arc::clone(&receivers[to]),
                        senders: Waiters::default(),
                    })
                })
                .collect()
        })
        .collect();
    (0..count)
        .map(|index| MeshEnds {
            me: ShardId::new(index),
            capacity,
            outbound: matrix[index].clone(),
            inbound: matrix.iter().map(|row| Arc::clone(&row[index])).collect(),
            receivers: Arc::clone(&receivers[index]),
        })
        .collect()
}

/// The capacity channels really have: requests are rounded up to a power of two.
pub(crate) fn effective_capacity(requested: usize) -> usize {
    requested.max(1).next_power_of_two()
}

impl<M> Channel<M> {
    fn lock(&self) -> MutexGuard<'_, ChannelState<M>> {
        // Pushes and pops cannot leave the queue inconsistent, so a poisoned lock is usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn try_push(&self, to: ShardId, msg: M) -> Result<(), (MeshError, M)> {
        {
            let mut state = self.lock();
            if state.receiver_closed || state.sender_closed {
                return Err((MeshError::Closed { to }, msg));
            }
            if state.items.len() >= self.capacity {
                return Err((MeshError::Full, msg));
            }
            state.items.push_back(msg);
        }
        self.receivers.wake_all();
        Ok(())
    }
}

impl Waiters {
    fn register(&self, waker: &Waker) {
        let mut wakers = self.lock();
        // One entry per task: a task that polls again adds nothing.
        if !wakers.iter().any(|known| known.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }

    fn wake_all(&self) {
        let wakers = std::mem::take(&mut *self.lock());
        for waker in wakers {
            waker.wake();
        }
    }

    /// Push and take cannot leave the list inconsistent, so a poisoned lock is usable.
    fn lock(&self) -> MutexGuard<'_, Vec<Waker>> {
        self.wakers.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::Placement;
    use crate::runtime::{run_shards, RuntimeConfig, ShardContext};
    use crate::shutdown::Shutdown;
    use crate::testing::run_local;
    use std::rc::Rc;

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
