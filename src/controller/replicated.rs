//! The shard's side of a replicated controller: decisions one at a time on the raft leader,
//! committed through raft before anything that follows from them leaves, and the pump that
//! applies every committed entry to the shard's copy of the state.
//!
//! A decision (Java's `EventScheduler` runs one event at a time too):
//! 1. take the decision turn (an async mutex: one decision in flight);
//! 2. once per leadership (the view's generation), confirm it and learn the read index
//!    (openraft's `ensure_linearizable`), then wait until the pump has applied up to it, so
//!    the state holds every entry committed before; after that every entry is this
//!    leader's own, applied here as it is decided (a deposed leader learns it from a failed
//!    append, or from the view within a lease check);
//! 3. decide and apply the events here at once (ahead of the log, as the single replica
//!    does), remembering the proposal's number;
//! 4. append them to raft; once committed, wait until the pump has seen the entry (it skips
//!    applying it again: it is the pending proposal);
//! 5. answer. If the append failed, the state here is ahead of the log: ask the state
//!    machine for its whole state and wait until the pump has installed it.
//!
//! Invariant: outside a decision, the shard's `ReplicasInfoManager` equals the state
//! machine's at the pump's applied index.

use super::processor::{Controller, Notice};
use super::raft::{Applied, Proposal, RaftBridge, RaftCallError};
use futures::channel::oneshot;
use futures::future::{select, Either};
use futures::StreamExt;
use std::cell::{Cell, RefCell};
use std::time::Duration;

/// How long a decision waits for the pump to catch up before giving up.
const CATCH_UP_TIMEOUT: Duration = Duration::from_secs(10);

/// The replicated controller's shard-side state.
#[derive(Debug)]
pub struct Replicated {
    /// The handle on raft.
    pub bridge: RaftBridge,
    /// This process's proposal origin (random at start).
    origin: u64,
    next_seq: Cell<u64>,
    /// The proposal applied here ahead of the log, until the pump sees it.
    pending: Cell<Option<u64>>,
    /// The last log index the pump has applied.
    applied_index: Cell<u64>,
    /// How many whole states the pump has installed.
    resets: Cell<u64>,
    /// Woken whenever the pump makes progress.
    waiters: RefCell<Vec<oneshot::Sender<()>>>,
    /// One decision at a time.
    turn: futures::lock::Mutex<()>,
    /// The leadership generation the state was last confirmed caught up in.
    caught_up: Cell<Option<u64>>,
}

impl Replicated {
    /// The shard's side for `bridge`.
    #[must_use]
    pub fn new(bridge: RaftBridge) -> Replicated {
        let origin = u64::try_from(crate::calendar::now_ms()).unwrap_or(0)
            ^ u64::from(std::process::id()) << 44;
        Replicated {
            bridge,
            origin,
            next_seq: Cell::new(0),
            pending: Cell::new(None),
            applied_index: Cell::new(0),
            resets: Cell::new(0),
            waiters: RefCell::new(Vec::new()),
            turn: futures::lock::Mutex::new(()),
            caught_up: Cell::new(None),
        }
    }

    /// Whether this controller leads now.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.bridge.view.is_leader()
    }

    /// Runs `decide` as the leader's decision (steps in the module doc) and returns its
    /// answer and notices once its events are committed.
    ///
    /// # Errors
    /// [`RaftCallError::NotLeader`] when this controller does not lead (nothing decided), or
    /// the append failed (the decision is void).
    pub async fn decide<R>(
        &self,
        controller: &RefCell<Controller>,
        decide: impl FnOnce(&mut Controller) -> (R, Vec<Notice>),
    ) -> Result<(R, Vec<Notice>), RaftCallError> {
        let _turn = self.turn.lock().await;
        if !self.is_leader() {
            return Err(RaftCallError::NotLeader);
        }
        let generation = self.bridge.view.generation();
        if self.caught_up.get() != Some(generation) {
            let read = self.bridge.linearize().await?;
            self.wait_until(|| self.applied_index.get() >= read).await?;
            self.caught_up.set(Some(generation));
        }
        let (answer, notices, events) = {
            let mut controller = controller.borrow_mut();
            controller.leads = true;
            let (answer, notices) = decide(&mut controller);
            (answer, notices, controller.take_applied())
        };
        if events.is_empty() {
            return Ok((answer, notices));
        }
        let seq = self.next_seq.get();
        self.next_seq.set(seq + 1);
        self.pending.set(Some(seq));
        let proposal = Proposal {
            origin: self.origin,
            seq,
            events,
        };
        match self.bridge.write(proposal).await {
            Ok(index) => {
                self.wait_until(|| self.applied_index.get() >= index)
                    .await?;
                Ok((answer, notices))
            }
            Err(error) => {
                tracing::warn!(%error, "controller decision not committed; state resynced");
                self.pending.set(None);
                self.caught_up.set(None);
                let resets = self.resets.get();
                self.bridge.resync().await;
                self.wait_until(|| self.resets.get() > resets).await?;
                Err(error)
            }
        }
    }

    /// Applies what raft applied, in order, until the channel closes or `stop` fires.
    pub async fn pump(
        &self,
        controller: &RefCell<Controller>,
        mut applied: futures::channel::mpsc::Receiver<Applied>,
        stop: impl std::future::Future<Output = ()>,
    ) {
        let mut stop = Box::pin(stop);
        loop {
            let next = match select(applied.next(), stop).await {
                Either::Left((Some(next), rest)) => {
                    stop = rest;
                    next
                }
                Either::Left((None, _)) | Either::Right(_) => return,
            };
            self.on_applied(controller, next);
            for waiter in self.waiters.borrow_mut().drain(..) {
                let _ = waiter.send(());
            }
        }
    }

    fn on_applied(&self, controller: &RefCell<Controller>, applied: Applied) {
        let mut controller = controller.borrow_mut();
        match applied {
            Applied::Entry { index, proposal } => {
                if let Some(proposal) = proposal {
                    let own =
                        proposal.origin == self.origin && self.pending.get() == Some(proposal.seq);
                    for event in &proposal.events {
                        tracing::info!(index, ?event, "controller event committed");
                    }
                    if own {
                        self.pending.set(None);
                    } else {
                        controller.restore(&proposal.events);
                    }
                }
                self.applied_index.set(index);
            }
            Applied::Reset { index, state } => {
                tracing::info!(index, "controller state installed from raft");
                controller.reset(state);
                self.pending.set(None);
                self.applied_index.set(index);
                self.resets.set(self.resets.get() + 1);
            }
        }
    }

    async fn wait_until(&self, reached: impl Fn() -> bool) -> Result<(), RaftCallError> {
        let deadline = std::time::Instant::now() + CATCH_UP_TIMEOUT;
        while !reached() {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                let remark = "the controller's state did not catch up with raft".to_owned();
                return Err(RaftCallError::Failed(remark));
            }
            let (waker, woken) = oneshot::channel();
            self.waiters.borrow_mut().push(waker);
            let timer = glommio::timer::sleep(left);
            let _ = select(woken, Box::pin(timer)).await;
        }
        Ok(())
    }
}
