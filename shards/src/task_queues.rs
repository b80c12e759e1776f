//! `TaskQueues`: the two glommio task queues every shard has, and what goes in each.
//!
//! | queue | shares | latency | for |
//! | --- | --- | --- | --- |
//! | foreground | 1000 | see below | requests, the mesh pump, anything a client waits on |
//! | background | 250 | not important | flush, reput catch-up, retention cleaning, compaction |
//!
//! glommio divides CPU time between runnable queues in proportion to their shares, so under load
//! background work gets a fifth of the shard and never starves; when the foreground queue is
//! idle, background work takes the whole core. Long background loops must call
//! `glommio::yield_if_needed` so the scheduler can switch queues.
//!
//! Why the foreground queue has no latency budget: with glommio 0.9.0 on Linux 6.x, a
//! `Latency::Matters` queue of a few milliseconds (or an executor preempt timer that short) makes
//! cross-executor wake-ups get lost: two executors waking each other through wakers or shared
//! channels stall for good, every thread asleep in `io_uring_enter`, typically within 10^5 round
//! trips. The default 100 ms preempt timer does not show it. So both queues are
//! `Latency::NotImportant` and the split rests on shares alone; `tests/wakeups.rs` guards it.
//! TODO(shards): restore `Latency::Matters(1 ms)` for the foreground once glommio's sleep path is
//! fixed, and keep `tests/wakeups.rs` passing when doing so.
//!
//! Invariant: a `TaskQueues` is only used on the executor that created it, which the type
//! enforces by being `!Send`.

use std::future::Future;
use std::marker::PhantomData;
use std::rc::Rc;

use glommio::{Latency, Shares, Task, TaskQueueHandle};

/// Shares of the foreground queue.
pub const FOREGROUND_SHARES: usize = 1000;
/// Shares of the background queue: a fifth of the foreground's.
pub const BACKGROUND_SHARES: usize = 250;
/// Latency class of the foreground queue; not `Matters` because of the glommio issue in the
/// module docs.
pub const FOREGROUND_LATENCY: Latency = Latency::NotImportant;

/// The foreground and background task queues of one shard (per-shard and `!Send`).
#[derive(Debug)]
pub struct TaskQueues {
    /// Latency-sensitive work: requests, replies, the mesh pump.
    pub foreground: TaskQueueHandle,
    /// Throughput work that may lag: flush, reput, cleaning.
    pub background: TaskQueueHandle,
    /// Task queue handles name queues of the executor that made them.
    _local: PhantomData<Rc<()>>,
}

impl TaskQueues {
    /// Creates both queues on the current shard's executor.
    ///
    /// # Panics
    ///
    /// Panics if called outside a glommio executor.
    pub fn create() -> TaskQueues {
        let executor = glommio::executor();
        let foreground = executor.create_task_queue(
            Shares::Static(FOREGROUND_SHARES),
            FOREGROUND_LATENCY,
            "foreground",
        );
        let background = executor.create_task_queue(
            Shares::Static(BACKGROUND_SHARES),
            Latency::NotImportant,
            "background",
        );
        TaskQueues {
            foreground,
            background,
            _local: PhantomData,
        }
    }

    /// Spawns `future` on the foreground queue. Await or `detach()` the returned task; dropping
    /// it cancels the future.
    pub fn spawn_foreground<F>(&self, future: F) -> Task<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        spawn_into(future, self.foreground)
    }

    /// Spawns `future` on the background queue. Await or `detach()` the returned task; dropping
    /// it cancels the future.
    pub fn spawn_background<F>(&self, future: F) -> Task<F::Output>
    where
        F: Future + 'static,
        F::Output: 'static,
    {
        spawn_into(future, self.background)
    }
}

fn spawn_into<F>(future: F, queue: TaskQueueHandle) -> Task<F::Output>
where
    F: Future + 'static,
    F::Output: 'static,
{
    glommio::spawn_local_into(future, queue)
        .expect("invariant: TaskQueues is !Send, so its queues belong to the current executor")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run_local;

    fn current_queue() -> TaskQueueHandle {
        glommio::executor().current_task_queue()
    }

    #[test]
    fn spawn_foreground_runs_on_foreground_queue() {
        let (expected, actual) = run_local(async {
            let queues = TaskQueues::create();
            let actual = queues.spawn_foreground(async { current_queue() }).await;
            (queues.foreground, actual)
        });
        assert_eq!(expected, actual);
    }

    #[test]
    fn spawn_background_runs_on_background_queue() {
        let (expected, actual) = run_local(async {
            let queues = TaskQueues::create();
            let actual = queues.spawn_background(async { current_queue() }).await;
            (queues.background, actual)
        });
        assert_eq!(expected, actual);
    }

    #[test]
    fn new_queues_are_distinct() {
        let (foreground, background) = run_local(async {
            let queues = TaskQueues::create();
            (queues.foreground, queues.background)
        });
        assert_ne!(foreground, background);
        assert_ne!(foreground, TaskQueueHandle::default());
    }

    #[test]
    fn shares_are_applied() {
        let (foreground_shares, background_shares) = run_local(async {
            let queues = TaskQueues::create();
            let executor = glommio::executor();
            let shares = |queue| {
                executor
                    .task_queue_stats(queue)
                    .expect("queue exists")
                    .current_shares()
            };
            (shares(queues.foreground), shares(queues.background))
        });
        assert_eq!(foreground_shares, FOREGROUND_SHARES);
        assert_eq!(background_shares, BACKGROUND_SHARES);
    }
}
