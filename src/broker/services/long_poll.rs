//! Long polling (`PullRequestHoldService` + `NotifyMessageArrivingListener`): a pull that
//! finds nothing waits until dispatch reports new units in its queue or its suspend time
//! runs out.
//!
//! One table per net shard; a waiting pull costs a map entry and a oneshot. The shard's
//! notifier task takes the store's queue-growth announcements and wakes the pulls of those
//! queues whose offset is now below the max. Waiters register first and re-check the max
//! after, so an announcement between a pull's read and its registration is not missed.
//! As a safety net, as Java's `checkHoldRequest` every 5 s (`shortPollingTimeMills` without
//! long polling), the notifier also compares every held pull with its queue's max at that
//! period, so no lost announcement can hold a pull for its whole suspend time.

use crate::store::shared::{QueueGrowth, QueueKey, StoreShared};
use futures::channel::oneshot;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A pull waiting for data.
#[derive(Debug)]
struct Waiter {
    offset: i64,
    wake: oneshot::Sender<()>,
}

/// The waiting pulls of one net shard.
#[derive(Debug, Default)]
pub struct LongPoll {
    waiting: RefCell<HashMap<QueueKey, Vec<Waiter>>>,
}

impl LongPoll {
    /// Registers a pull of `topic`/`queue_id` at `offset`; the receiver completes when the
    /// queue's max passes `offset` (at once if it already has).
    pub fn wait(
        &self,
        shared: &Arc<StoreShared>,
        topic: &str,
        queue_id: i32,
        offset: i64,
    ) -> oneshot::Receiver<()> {
        let (wake, woken) = oneshot::channel();
        {
            let mut waiting = self.waiting.borrow_mut();
            let list = waiting.entry((topic.to_owned(), queue_id)).or_default();
            // Pulls that timed out left their entries; drop them here so an idle queue's
            // list stays as long as its live waiters.
            list.retain(|w| !w.wake.is_canceled());
            list.push(Waiter { offset, wake });
        }
        let max = shared.queue(topic, queue_id).map_or(0, |q| q.max_offset());
        if max > offset {
            self.notify(&(topic.to_owned(), queue_id), max);
        }
        woken
    }

    /// Wakes the pulls of `key` whose offset is below `max`; how many of them still
    /// waited (a waiter whose request is gone, a pull that timed out or a POP woken by
    /// another queue, is dropped without counting).
    pub fn notify(&self, key: &QueueKey, max: i64) -> usize {
        let mut waiting = self.waiting.borrow_mut();
        let Some(list) = waiting.get_mut(key) else {
            return 0;
        };
        let mut woken = 0;
        let mut kept = Vec::with_capacity(list.len());
        for waiter in list.drain(..) {
            if waiter.offset < max {
                woken += usize::from(waiter.wake.send(()).is_ok());
            } else if !waiter.wake.is_canceled() {
                kept.push(waiter);
            }
        }
        if kept.is_empty() {
            waiting.remove(key);
        } else {
            *list = kept;
        }
        woken
    }

    /// Pulls waiting now.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.waiting.borrow().values().map(Vec::len).sum()
    }

    /// Wakes every held pull whose queue has grown past its offset (`checkHoldRequest`);
    /// how many it woke.
    pub fn check_held(&self, shared: &StoreShared) -> usize {
        let keys: Vec<QueueKey> = self.waiting.borrow().keys().cloned().collect();
        keys.iter()
            .map(|key| {
                let max = shared.queue(&key.0, key.1).map_or(0, |q| q.max_offset());
                self.notify(key, max)
            })
            .sum()
    }
}

/// How often every held pull is checked against its queue (`PullRequestHoldService` waits
/// 5 s between checks with long polling on).
pub const CHECK_HELD_INTERVAL: Duration = Duration::from_secs(5);

/// Longest the notifier sleeps without looking at the announcements: the store's wake-up
/// crosses threads, and a glommio executor has been seen asleep with such a wake-up pending
/// (ARCHITECTURE.md, "Decisions"); this bounds what a lost one costs a waiting consumer.
const ANNOUNCEMENT_LOOK_MAX: Duration = Duration::from_millis(10);

/// Feeds `growth` into `long_poll` until the store stops announcing, and checks every held
/// pull each `check_interval`.
pub async fn run_notifier(
    long_poll: Rc<LongPoll>,
    growth: QueueGrowth,
    shared: Arc<StoreShared>,
    check_interval: Duration,
) {
    let notify = |grown: std::collections::HashMap<QueueKey, i64>| {
        for (key, max) in grown {
            long_poll.notify(&key, max);
        }
    };
    let mut next_check = Instant::now() + check_interval;
    loop {
        let left = next_check.saturating_duration_since(Instant::now());
        let grown = futures::future::select(
            Box::pin(growth.next()),
            Box::pin(glommio::timer::sleep(left.min(ANNOUNCEMENT_LOOK_MAX))),
        )
        .await;
        match grown {
            futures::future::Either::Left((grown, _)) => notify(grown),
            futures::future::Either::Right(_) => notify(growth.take_pending()),
        }
        if Instant::now() >= next_check {
            // What was announced goes first, so that the check finds only what nothing
            // announced.
            notify(growth.take_pending());
            let woken = long_poll.check_held(&shared);
            if woken > 0 {
                // Only a lost announcement leaves a pull behind its queue this long.
                tracing::warn!(woken, "held pulls woken by the periodic check");
            }
            next_check = Instant::now() + check_interval;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::config::StoreConfig;

    fn shared() -> Arc<StoreShared> {
        Arc::new(StoreShared::new(StoreConfig::new(std::path::Path::new(
            "/nonexistent",
        ))))
    }

    #[test]
    fn check_held_wakes_pulls_whose_queue_grew_unannounced() {
        let shared = shared();
        let long_poll = LongPoll::default();
        let mut behind = long_poll.wait(&shared, "T", 0, 0);
        let mut level = long_poll.wait(&shared, "T", 1, 0);
        assert_eq!(long_poll.waiting(), 2);
        // Queue 0 grows with no announcement: only the periodic check can wake its pull.
        shared.queue_or_insert("T", 0).set_max_offset(1);
        assert_eq!(long_poll.check_held(&shared), 1);
        assert_eq!(behind.try_recv(), Ok(Some(())));
        assert_eq!(level.try_recv(), Ok(None));
        assert_eq!(long_poll.waiting(), 1);
        assert_eq!(long_poll.check_held(&shared), 0);
    }

    #[test]
    fn wait_on_a_queue_already_past_the_offset_wakes_at_once() {
        let shared = shared();
        shared.queue_or_insert("T", 0).set_max_offset(3);
        let long_poll = LongPoll::default();
        let mut woken = long_poll.wait(&shared, "T", 0, 2);
        assert_eq!(woken.try_recv(), Ok(Some(())));
        assert_eq!(long_poll.waiting(), 0);
    }
}
