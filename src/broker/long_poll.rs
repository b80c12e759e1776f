//! Long polling (`PullRequestHoldService` + `NotifyMessageArrivingListener`): a pull that
//! finds nothing waits until dispatch reports new units in its queue or its suspend time
//! runs out.
//!
//! One table per net shard; a waiting pull costs a map entry and a oneshot. The shard's
//! notifier task takes the store's queue-growth announcements and wakes the pulls of those
//! queues whose offset is now below the max. Waiters register first and re-check the max
//! after, so an announcement between a pull's read and its registration is not missed.

use crate::store::shared::{QueueGrowth, QueueKey, StoreShared};
use futures::channel::oneshot;
use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

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

    /// Wakes the pulls of `key` whose offset is below `max`.
    pub fn notify(&self, key: &QueueKey, max: i64) {
        let mut waiting = self.waiting.borrow_mut();
        let Some(list) = waiting.get_mut(key) else {
            return;
        };
        let mut kept = Vec::with_capacity(list.len());
        for waiter in list.drain(..) {
            if waiter.offset < max {
                let _ = waiter.wake.send(());
            } else if !waiter.wake.is_canceled() {
                kept.push(waiter);
            }
        }
        if kept.is_empty() {
            waiting.remove(key);
        } else {
            *list = kept;
        }
    }

    /// Pulls waiting now.
    #[must_use]
    pub fn waiting(&self) -> usize {
        self.waiting.borrow().values().map(Vec::len).sum()
    }
}

/// Feeds `growth` into `long_poll` until the store stops announcing.
pub async fn run_notifier(long_poll: Rc<LongPoll>, growth: QueueGrowth) {
    loop {
        let grown = growth.next().await;
        for (key, max) in grown {
            long_poll.notify(&key, max);
        }
    }
}
