//! How busy each shard is: the time its executor spent running tasks and the tasks it ran,
//! from glommio's executor statistics, which a task on each shard adds here every second
//! (`ferromq_shard_busy_seconds_total`, `ferromq_shard_tasks_total`).

use std::sync::atomic::{AtomicU64, Ordering};

/// One shard's totals: written by that shard's sampler only.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot {
    busy_ns: AtomicU64,
    tasks: AtomicU64,
}

/// Every shard's busy time and tasks run.
#[derive(Debug)]
pub struct ShardBusy {
    slots: Box<[Slot]>,
}

impl ShardBusy {
    /// Totals for `shards` shards.
    #[must_use]
    pub fn new(shards: usize) -> ShardBusy {
        ShardBusy {
            slots: (0..shards.max(1)).map(|_| Slot::default()).collect(),
        }
    }

    /// Adds what `shard`'s executor did since the last call on that shard. glommio hands
    /// its statistics over once (the next call starts from zero), so only this sampler may
    /// read them.
    pub fn sample_here(&self, shard: usize) {
        let stats = glommio::executor().executor_stats();
        let slot = &self.slots[shard.min(self.slots.len() - 1)];
        let busy_ns = u64::try_from(stats.executor_runtime().as_nanos()).unwrap_or(u64::MAX);
        slot.busy_ns.fetch_add(busy_ns, Ordering::Relaxed);
        slot.tasks
            .fetch_add(stats.tasks_executed(), Ordering::Relaxed);
    }

    /// Per shard: seconds spent running tasks, tasks run.
    #[must_use]
    pub fn totals(&self) -> Vec<(f64, u64)> {
        self.slots
            .iter()
            .map(|slot| {
                #[allow(clippy::cast_precision_loss)] // seconds as a float, for Prometheus
                let seconds = slot.busy_ns.load(Ordering::Relaxed) as f64 / 1e9;
                (seconds, slot.tasks.load(Ordering::Relaxed))
            })
            .collect()
    }
}
