//! The messages of one queue pulled but not yet consumed (`ProcessQueue`).
//!
//! Invariant: the offset a consumer may commit is the smallest offset still held here, or
//! one past the largest offset ever put when nothing is held (Java's `removeMessage`), so a
//! crash after a commit never skips a message that was pulled but not consumed.

use std::collections::BTreeMap;
use std::time::Instant;

/// What the process queue needs to know about a message.
pub trait Queued {
    /// The message's offset in its consume queue.
    fn queue_offset(&self) -> i64;
    /// Its body size, for the size flow-control limit.
    fn body_len(&self) -> usize;
}

/// Pulled messages of one queue, by queue offset (`ProcessQueue`).
#[derive(Debug)]
pub struct ProcessQueue<M> {
    messages: BTreeMap<i64, M>,
    /// Orderly only: taken by the listener, not yet committed (`consumingMsgOrderlyTreeMap`).
    consuming: BTreeMap<i64, M>,
    size_bytes: u64,
    queue_offset_max: i64,
    /// Set when the queue is no longer this consumer's: nothing more is consumed or committed.
    pub dropped: bool,
    /// Orderly clustering: whether the broker lock is held, and when it was last renewed.
    pub locked: bool,
    /// When the broker lock was last taken or renewed.
    pub last_lock: Option<Instant>,
}

impl<M> Default for ProcessQueue<M> {
    fn default() -> Self {
        ProcessQueue {
            messages: BTreeMap::new(),
            consuming: BTreeMap::new(),
            size_bytes: 0,
            queue_offset_max: -1,
            dropped: false,
            locked: false,
            last_lock: None,
        }
    }
}

impl<M: Queued> ProcessQueue<M> {
    /// Adds pulled messages; offsets already held are ignored. Returns how many were added.
    pub fn put(&mut self, messages: impl IntoIterator<Item = M>) -> usize {
        let mut added = 0;
        for message in messages {
            let offset = message.queue_offset();
            if self.messages.contains_key(&offset) || self.consuming.contains_key(&offset) {
                continue;
            }
            self.size_bytes += message.body_len() as u64;
            self.queue_offset_max = self.queue_offset_max.max(offset);
            self.messages.insert(offset, message);
            added += 1;
        }
        added
    }

    /// Removes consumed messages and returns the offset to commit, or -1 when the queue held
    /// nothing (`removeMessage`).
    pub fn remove(&mut self, offsets: impl IntoIterator<Item = i64>) -> i64 {
        if self.messages.is_empty() {
            return -1;
        }
        for offset in offsets {
            if let Some(message) = self.messages.remove(&offset) {
                self.size_bytes = self.size_bytes.saturating_sub(message.body_len() as u64);
            }
        }
        if self.messages.is_empty() && self.consuming.is_empty() {
            self.size_bytes = 0;
        }
        match self.messages.keys().next() {
            Some(&first) => first,
            None => self.queue_offset_max + 1,
        }
    }

    /// Messages held (consuming included).
    #[must_use]
    pub fn count(&self) -> usize {
        self.messages.len() + self.consuming.len()
    }

    /// Body bytes held (consuming included).
    #[must_use]
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Distance between the largest and smallest offset waiting (`getMaxSpan`).
    #[must_use]
    pub fn max_span(&self) -> i64 {
        match (
            self.messages.keys().next(),
            self.messages.keys().next_back(),
        ) {
            (Some(first), Some(last)) => last - first,
            _ => 0,
        }
    }

    /// Orderly: takes up to `batch` of the smallest offsets for the listener
    /// (`takeMessages`).
    pub fn take(&mut self, batch: usize) -> Vec<i64> {
        let offsets: Vec<i64> = self.messages.keys().take(batch).copied().collect();
        for offset in &offsets {
            if let Some(message) = self.messages.remove(offset) {
                self.consuming.insert(*offset, message);
            }
        }
        offsets
    }

    /// Orderly: the messages taken at `offsets`.
    pub fn taken(&self, offsets: &[i64]) -> Vec<&M> {
        offsets
            .iter()
            .filter_map(|o| self.consuming.get(o))
            .collect()
    }

    /// Orderly: the taken messages are consumed; returns the offset to commit or -1
    /// (`commit`).
    pub fn commit(&mut self) -> i64 {
        let next = match self.consuming.keys().next_back() {
            Some(&last) => last + 1,
            None => return -1,
        };
        for message in std::mem::take(&mut self.consuming).into_values() {
            self.size_bytes = self.size_bytes.saturating_sub(message.body_len() as u64);
        }
        next
    }

    /// Orderly: the taken messages go back to be consumed again
    /// (`makeMessageToConsumeAgain`).
    pub fn consume_again(&mut self) {
        let consuming = std::mem::take(&mut self.consuming);
        self.messages.extend(consuming);
    }

    /// Applies `change` to the held message at `offset` (e.g. counting a reconsume).
    pub fn update(&mut self, offset: i64, change: impl FnOnce(&mut M)) {
        if let Some(message) = self.messages.get_mut(&offset) {
            change(message);
        }
    }

    /// A copy of the held message at `offset`.
    #[must_use]
    pub fn get(&self, offset: i64) -> Option<&M> {
        self.messages.get(&offset)
    }

    /// Orderly clustering: the broker lock is held and was renewed within `max_live`, and
    /// the queue is still ours (`isLocked() && !isLockExpired()`).
    #[must_use]
    pub fn lock_held(&self, max_live: std::time::Duration) -> bool {
        !self.dropped && self.locked && self.last_lock.is_some_and(|t| t.elapsed() < max_live)
    }

    /// Forgets every message (after a seek).
    pub fn clear(&mut self) {
        self.messages.clear();
        self.consuming.clear();
        self.size_bytes = 0;
        self.queue_offset_max = -1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone)]
    struct M(i64, usize);
    impl Queued for M {
        fn queue_offset(&self) -> i64 {
            self.0
        }
        fn body_len(&self) -> usize {
            self.1
        }
    }

    #[test]
    fn commit_offset_is_the_smallest_unconsumed() {
        let mut pq = ProcessQueue::default();
        assert_eq!(pq.remove([1]), -1);
        assert_eq!(pq.put((10..15).map(|o| M(o, 100))), 5);
        assert_eq!(pq.put([M(12, 100)]), 0);
        assert_eq!(pq.size_bytes(), 500);
        assert_eq!(pq.max_span(), 4);
        assert_eq!(pq.remove([11, 12]), 10);
        assert_eq!(pq.remove([10]), 13);
        assert_eq!(pq.remove([13, 14]), 15);
        assert_eq!(pq.count(), 0);
        assert_eq!(pq.size_bytes(), 0);
    }

    #[test]
    fn orderly_take_commit_and_again() {
        let mut pq = ProcessQueue::default();
        pq.put((0..5).map(|o| M(o, 1)));
        assert_eq!(pq.take(2), vec![0, 1]);
        assert_eq!(pq.taken(&[0, 1]).len(), 2);
        pq.consume_again();
        assert_eq!(pq.take(3), vec![0, 1, 2]);
        assert_eq!(pq.commit(), 3);
        assert_eq!(pq.count(), 2);
        assert_eq!(pq.commit(), -1);
        assert_eq!(pq.take(10), vec![3, 4]);
        assert_eq!(pq.commit(), 5);
        assert_eq!(pq.size_bytes(), 0);
    }
}
