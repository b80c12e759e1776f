//! What POP consumption shares between net shards: the queue locks of pops in progress
//! (Java's `QueueLockManager`) and the count of pops waiting for messages (Java's
//! `PopLongPollingService` limits). Both are maps sharded by key ([`DashMap`]), touched
//! once when a pop of a queue starts and once when it ends.
//!
//! Invariant: at most one pop reads a queue for a group at a time, on any shard, so no two
//! pops hand out the same offsets (the offset a pop reads is committed before it unlocks).

use dashmap::DashMap;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The shared POP state.
#[derive(Debug, Default)]
pub struct PopState {
    /// `topic@group@queueId` of the queues a pop is reading.
    locked: DashMap<String, ()>,
    /// Waiting pops per `topic@group@queueId` (queueId -1 for all queues).
    polling: DashMap<String, usize>,
    /// Waiting pops in all.
    polling_total: AtomicUsize,
}

/// A queue lock, released on drop.
#[derive(Debug)]
pub struct PopQueueLock<'a> {
    state: &'a PopState,
    key: String,
}

impl Drop for PopQueueLock<'_> {
    fn drop(&mut self) {
        self.state.locked.remove(&self.key);
    }
}

/// A waiting pop, counted until dropped.
#[derive(Debug)]
pub struct PopPolling<'a> {
    state: &'a PopState,
    key: String,
}

impl Drop for PopPolling<'_> {
    fn drop(&mut self) {
        self.state.polling_total.fetch_sub(1, Ordering::Relaxed);
        if let Some(mut count) = self.state.polling.get_mut(&self.key) {
            *count = count.saturating_sub(1);
        }
        self.state
            .polling
            .remove_if(&self.key, |_, count| *count == 0);
    }
}

/// `topic@group@queueId`, Java's lock key.
#[must_use]
pub fn pop_key(topic: &str, group: &str, queue_id: i32) -> String {
    format!("{topic}@{group}@{queue_id}")
}

impl PopState {
    /// Locks `key` (from [`pop_key`]) unless a pop holds it (`tryLock`).
    #[must_use]
    pub fn try_lock(&self, key: String) -> Option<PopQueueLock<'_>> {
        match self.locked.entry(key.clone()) {
            dashmap::Entry::Occupied(_) => None,
            dashmap::Entry::Vacant(slot) => {
                slot.insert(());
                Some(PopQueueLock { state: self, key })
            }
        }
    }

    /// Pops waiting on `key` now (POLLING_INFO).
    #[must_use]
    pub fn polling(&self, key: &str) -> usize {
        self.polling.get(key).map_or(0, |count| *count)
    }

    /// Counts one more pop waiting on `key`, unless `per_key` already wait there or `total`
    /// in the broker (Java's POLLING_FULL).
    #[must_use]
    pub fn start_polling(
        &self,
        key: String,
        per_key: usize,
        total: usize,
    ) -> Option<PopPolling<'_>> {
        if self.polling_total.load(Ordering::Relaxed) >= total {
            return None;
        }
        let mut count = self.polling.entry(key.clone()).or_insert(0);
        if *count >= per_key {
            return None;
        }
        *count += 1;
        drop(count);
        self.polling_total.fetch_add(1, Ordering::Relaxed);
        Some(PopPolling { state: self, key })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_is_locked_once_until_released() {
        let state = PopState::default();
        let first = state.try_lock(pop_key("T", "G", 0));
        assert!(first.is_some());
        assert!(state.try_lock(pop_key("T", "G", 0)).is_none());
        assert!(state.try_lock(pop_key("T", "G", 1)).is_some());
        drop(first);
        assert!(state.try_lock(pop_key("T", "G", 0)).is_some());
    }

    #[test]
    fn polling_is_full_at_its_limits() {
        let state = PopState::default();
        let a = state.start_polling("k".to_owned(), 1, 2);
        assert!(a.is_some());
        assert!(state.start_polling("k".to_owned(), 1, 2).is_none());
        let b = state.start_polling("j".to_owned(), 1, 2);
        assert!(b.is_some());
        assert!(state.start_polling("i".to_owned(), 1, 2).is_none());
        drop(a);
        assert!(state.start_polling("k".to_owned(), 1, 2).is_some());
    }
}
