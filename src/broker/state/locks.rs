//! The queue locks of orderly consumers (Java's `RebalanceLockManager`): which client of a
//! group consumes each queue, so that two members never consume one queue at once.
//!
//! Invariant: a queue is held by at most one client of a group at a time; a lock not renewed
//! for `max_live_time` is free for another client. The table is a [`DashMap`] sharded by
//! group: LOCK_BATCH_MQ and UNLOCK_BATCH_MQ lock only their group's shard.

use crate::remoting::heartbeat::MessageQueue;
use dashmap::DashMap;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long a queue lock lasts without renewal by default (`rebalanceLockMaxLiveTime`, 60 s;
/// [`BrokerConfig::rebalance_lock_max_live_time`] sets it).
///
/// [`BrokerConfig::rebalance_lock_max_live_time`]:
///     crate::config::broker::BrokerConfig::rebalance_lock_max_live_time
pub const REBALANCE_LOCK_MAX_LIVE_TIME: Duration = Duration::from_secs(60);

/// The queue locks of orderly consumers (`RebalanceLockManager`).
#[doc(alias = "RebalanceLockManager")]
#[derive(Debug)]
pub struct LockTable {
    groups: DashMap<String, HashMap<MessageQueue, LockEntry>>,
    max_live_time: Duration,
}

/// Who holds a queue of a group, and since when (`LockEntry`).
#[derive(Clone, Debug)]
struct LockEntry {
    client_id: String,
    renewed: Instant,
}

impl Default for LockTable {
    fn default() -> Self {
        LockTable::new(REBALANCE_LOCK_MAX_LIVE_TIME)
    }
}

impl LockTable {
    /// A table whose locks expire `max_live_time` after their last renewal.
    #[must_use]
    pub fn new(max_live_time: Duration) -> LockTable {
        LockTable {
            groups: DashMap::new(),
            max_live_time,
        }
    }

    /// Locks (or renews) each queue free, expired or already held by `client_id`; returns
    /// the queues `client_id` now holds (`tryLockBatch`).
    pub fn lock(&self, group: &str, client_id: &str, queues: &[MessageQueue]) -> Vec<MessageQueue> {
        let mut table = self.groups.entry(group.to_owned()).or_default();
        let now = Instant::now();
        let mut locked = Vec::new();
        for queue in queues {
            let free = table.get(queue).is_none_or(|entry| {
                entry.client_id == client_id
                    || now.duration_since(entry.renewed) > self.max_live_time
            });
            if free {
                table.insert(
                    queue.clone(),
                    LockEntry {
                        client_id: client_id.to_owned(),
                        renewed: now,
                    },
                );
                locked.push(queue.clone());
            }
        }
        locked
    }

    /// Releases the queues `client_id` holds (`unlockBatch`).
    pub fn unlock(&self, group: &str, client_id: &str, queues: &[MessageQueue]) {
        if let Some(mut table) = self.groups.get_mut(group) {
            for queue in queues {
                if table.get(queue).is_some_and(|e| e.client_id == client_id) {
                    table.remove(queue);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queue(id: i32) -> MessageQueue {
        MessageQueue {
            topic: "t".to_owned(),
            broker_name: "b".to_owned(),
            queue_id: id,
        }
    }

    #[test]
    fn lock_held_by_another_client_is_refused_until_unlocked() {
        let table = LockTable::default();
        let queues = [queue(0), queue(1)];
        assert_eq!(table.lock("g", "c1", &queues[..1]), vec![queue(0)]);
        assert_eq!(table.lock("g", "c2", &queues), vec![queue(1)]);
        assert_eq!(table.lock("other", "c2", &queues), queues.to_vec());
        table.unlock("g", "c2", &queues[..1]); // Not c2's: stays c1's.
        assert_eq!(
            table.lock("g", "c2", &queues[..1]),
            Vec::<MessageQueue>::new()
        );
        table.unlock("g", "c1", &queues[..1]);
        assert_eq!(table.lock("g", "c2", &queues), queues.to_vec());
    }
}
