//! State the store's owners publish to every shard: per-queue offsets, the CommitLog's
//! committed end and minimum, and the disk-space gate (the "immutable snapshot or atomic"
//! half of the ownership rule in ARCHITECTURE.md).
//!
//! Owners: the writer sets `committed_end` (waking each [`CommitWatch`]), `flushed_end` and
//! the synced store time; dispatch ("reput")
//! adds queues and moves their max offsets and `dispatched_end`, and wakes [`QueueGrowth`]
//! subscribers;
//! retention moves the minimums and the disk gate. Readers on any shard only load.

use super::config::StoreConfig;
use arc_swap::ArcSwap;
use futures::task::AtomicWaker;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::Poll;

/// A queue: topic and queue id.
pub type QueueKey = (String, i32);

/// Offsets of one ConsumeQueue.
#[derive(Debug, Default)]
pub struct QueueState {
    max_offset: AtomicI64,
    min_offset: AtomicI64,
}

impl QueueState {
    /// The next logical offset dispatch will write (units readable below it).
    #[must_use]
    pub fn max_offset(&self) -> i64 {
        self.max_offset.load(Ordering::Acquire)
    }

    /// The first logical offset still readable.
    #[must_use]
    pub fn min_offset(&self) -> i64 {
        self.min_offset.load(Ordering::Acquire)
    }

    pub(crate) fn set_max_offset(&self, offset: i64) {
        self.max_offset.store(offset, Ordering::Release);
    }

    pub(crate) fn set_min_offset(&self, offset: i64) {
        self.min_offset.store(offset, Ordering::Release);
    }
}

type TopicQueues = HashMap<String, HashMap<i32, Arc<QueueState>>>;

/// Retention passes a manual delete request makes due (Java's
/// `MANUAL_DELETE_FILE_SEVERAL_TIMES`).
pub const MANUAL_DELETE_PASSES: u32 = 20;

/// What every shard may read about the store.
#[derive(Debug)]
pub struct StoreShared {
    /// The configuration the store runs with.
    pub config: StoreConfig,
    queues: ArcSwap<TopicQueues>,
    committed_end: AtomicU64,
    dispatched_end: AtomicU64,
    flushed_end: AtomicU64,
    min_physical_offset: AtomicU64,
    synced_store_timestamp: AtomicI64,
    disk_used_percent: AtomicU32,
    disk_full: AtomicBool,
    /// The growth subscribers (one per net shard, made at start): read lock-free by every
    /// dispatched batch, replaced whole by a subscription.
    growth: ArcSwap<Vec<Weak<GrowthInner>>>,
    /// Who waits for `committed_end` to move (each slave's HA sender): read lock-free by
    /// every commit, replaced whole when one comes.
    commit_watchers: ArcSwap<Vec<Weak<AtomicWaker>>>,
    mapped_bytes: AtomicU64,
    mapping_readers: AtomicU64,
    manual_delete_passes: AtomicU32,
    /// Whether puts are refused (a slave): `slave` of the config at start, changed by a role
    /// change in controller mode.
    slave: AtomicBool,
}

impl StoreShared {
    /// State of a store that holds nothing yet.
    #[must_use]
    pub fn new(config: StoreConfig) -> StoreShared {
        let slave = AtomicBool::new(config.slave);
        StoreShared {
            config,
            queues: ArcSwap::default(),
            committed_end: AtomicU64::new(0),
            dispatched_end: AtomicU64::new(0),
            flushed_end: AtomicU64::new(0),
            min_physical_offset: AtomicU64::new(0),
            synced_store_timestamp: AtomicI64::new(0),
            disk_used_percent: AtomicU32::new(0),
            disk_full: AtomicBool::new(false),
            growth: ArcSwap::default(),
            commit_watchers: ArcSwap::default(),
            mapped_bytes: AtomicU64::new(0),
            mapping_readers: AtomicU64::new(0),
            manual_delete_passes: AtomicU32::new(0),
            slave,
        }
    }

    /// Whether the store refuses puts (a slave's).
    #[must_use]
    pub fn is_slave(&self) -> bool {
        self.slave.load(Ordering::Acquire)
    }

    /// Starts or stops refusing puts (a role change in controller mode).
    pub fn set_slave(&self, slave: bool) {
        self.slave.store(slave, Ordering::Release);
    }

    /// The queue's state, if it has ever had a unit.
    #[must_use]
    pub fn queue(&self, topic: &str, queue_id: i32) -> Option<Arc<QueueState>> {
        self.queues.load().get(topic)?.get(&queue_id).cloned()
    }

    /// Every queue with its state.
    #[must_use]
    pub fn queues(&self) -> Vec<(QueueKey, Arc<QueueState>)> {
        let table = self.queues.load();
        let mut all: Vec<_> = table
            .iter()
            .flat_map(|(topic, queues)| {
                queues
                    .iter()
                    .map(|(id, state)| ((topic.clone(), *id), Arc::clone(state)))
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    }

    /// The queue's state, adding it (copy-on-write; queues are added rarely) if new.
    pub(crate) fn queue_or_insert(&self, topic: &str, queue_id: i32) -> Arc<QueueState> {
        if let Some(state) = self.queue(topic, queue_id) {
            return state;
        }
        let state = Arc::new(QueueState::default());
        self.queues.rcu(|table| {
            let mut table = TopicQueues::clone(table);
            table
                .entry(topic.to_owned())
                .or_default()
                .entry(queue_id)
                .or_insert_with(|| Arc::clone(&state));
            table
        });
        self.queue(topic, queue_id).unwrap_or(state)
    }

    /// Forgets every queue of `topic` (it was deleted): their offsets read as 0 until its
    /// next records make new queues.
    pub(crate) fn remove_topic(&self, topic: &str) {
        self.queues.rcu(|table| {
            let mut table = TopicQueues::clone(table);
            table.remove(topic);
            table
        });
    }

    /// End of the CommitLog data that is committed (readable and acknowledged).
    #[must_use]
    pub fn committed_end(&self) -> u64 {
        self.committed_end.load(Ordering::Acquire)
    }

    pub(crate) fn set_committed_end(&self, end: u64) {
        self.committed_end.store(end, Ordering::Release);
        for watcher in self.commit_watchers.load().iter().filter_map(Weak::upgrade) {
            watcher.wake();
        }
    }

    /// A watch on [`StoreShared::committed_end`], woken by every commit (not only once
    /// dispatch has published it, as queue growth is): what a slave is sent follows the
    /// writer, not dispatch.
    pub fn watch_commits(self: &Arc<Self>) -> CommitWatch {
        let waker = Arc::new(AtomicWaker::new());
        add_subscriber(&self.commit_watchers, &waker);
        CommitWatch {
            shared: Arc::clone(self),
            waker,
        }
    }

    /// End of the CommitLog data whose ConsumeQueue units are published: every queue's max
    /// offset counts the records below it. It trails [`StoreShared::committed_end`] by the
    /// dispatch of the last commits.
    #[must_use]
    pub fn dispatched_end(&self) -> u64 {
        self.dispatched_end.load(Ordering::Acquire)
    }

    pub(crate) fn set_dispatched_end(&self, end: u64) {
        self.dispatched_end.fetch_max(end, Ordering::AcqRel);
    }

    /// End of the CommitLog data on the device (fdatasync'd): a power loss keeps what is
    /// below it. Under `ASYNC_FLUSH` it trails [`StoreShared::committed_end`] until the next
    /// periodic sync; it may pass it by part of a record a write ended inside.
    #[must_use]
    pub fn flushed_end(&self) -> u64 {
        self.flushed_end.load(Ordering::Acquire)
    }

    pub(crate) fn set_flushed_end(&self, end: u64) {
        self.flushed_end.store(end, Ordering::Release);
    }

    /// Committed CommitLog bytes that dispatch has not built ConsumeQueue units for yet
    /// (Java's `dispatchBehindBytes`: the CommitLog's max offset minus the reput offset).
    #[must_use]
    pub fn dispatch_behind_bytes(&self) -> u64 {
        // Dispatched first: read the other way, a commit and its dispatch between the two
        // loads would show dispatch ahead.
        let dispatched = self.dispatched_end();
        self.committed_end().saturating_sub(dispatched)
    }

    /// Committed CommitLog bytes not yet on the device (Java's `remainHowManyDataToFlush`:
    /// written minus flushed).
    #[must_use]
    pub fn remain_to_flush_bytes(&self) -> u64 {
        let flushed = self.flushed_end();
        self.committed_end().saturating_sub(flushed)
    }

    /// Bytes of CommitLog windows mapped for pulls right now, on every shard, answers in
    /// flight included; never above `pullMappedMemoryMax`.
    #[must_use]
    pub fn mapped_bytes(&self) -> u64 {
        self.mapped_bytes.load(Ordering::Acquire)
    }

    /// Takes `len` bytes of the mapping budget; whether they were free.
    pub(crate) fn reserve_mapped(&self, len: u64) -> bool {
        let max = self.config.pull_mapped_memory_max;
        self.mapped_bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(len).filter(|&total| total <= max)
            })
            .is_ok()
    }

    /// Readers that map windows, now (each may hold its share of the budget).
    pub(crate) fn mapping_readers(&self) -> &AtomicU64 {
        &self.mapping_readers
    }

    /// Gives back what [`StoreShared::reserve_mapped`] took.
    pub(crate) fn release_mapped(&self, len: u64) {
        self.mapped_bytes.fetch_sub(len, Ordering::AcqRel);
    }

    /// First CommitLog offset still on disk.
    #[must_use]
    pub fn min_physical_offset(&self) -> u64 {
        self.min_physical_offset.load(Ordering::Acquire)
    }

    pub(crate) fn set_min_physical_offset(&self, offset: u64) {
        self.min_physical_offset.store(offset, Ordering::Release);
    }

    /// Makes the next [`MANUAL_DELETE_PASSES`] retention passes delete expired CommitLog
    /// segments whatever the hour (`executeDeleteFilesManually`, DELETE_EXPIRED_COMMITLOG).
    pub fn delete_files_manually(&self) {
        self.manual_delete_passes
            .store(MANUAL_DELETE_PASSES, Ordering::Release);
    }

    /// Whether this retention pass is one of the manual ones; counts it.
    pub(crate) fn take_manual_delete_pass(&self) -> bool {
        self.manual_delete_passes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .is_ok()
    }

    /// Store time of the newest synced record (the checkpoint's `physicMsgTimestamp`).
    #[must_use]
    pub fn synced_store_timestamp(&self) -> i64 {
        self.synced_store_timestamp.load(Ordering::Acquire)
    }

    pub(crate) fn set_synced_store_timestamp(&self, timestamp: i64) {
        self.synced_store_timestamp
            .fetch_max(timestamp, Ordering::AcqRel);
    }

    /// Whether puts are refused for lack of disk space, and the last disk use seen.
    #[must_use]
    pub fn disk_full(&self) -> Option<u32> {
        self.disk_full
            .load(Ordering::Acquire)
            .then(|| self.disk_used_percent.load(Ordering::Acquire))
    }

    /// Percent of the disk in use at the last probe.
    #[must_use]
    pub fn disk_used_percent(&self) -> u32 {
        self.disk_used_percent.load(Ordering::Acquire)
    }

    pub(crate) fn set_disk_state(&self, used_percent: u32, full: bool) {
        self.disk_used_percent
            .store(used_percent, Ordering::Release);
        self.disk_full.store(full, Ordering::Release);
    }

    /// A subscription to queue growth: which queues got new units, and their new max.
    pub fn subscribe(&self) -> QueueGrowth {
        let inner = Arc::new(GrowthInner::default());
        add_subscriber(&self.growth, &inner);
        QueueGrowth { inner }
    }

    /// Tells every subscriber that these queues grew to these max offsets.
    pub(crate) fn announce_growth(&self, grown: &[(QueueKey, i64)]) {
        if grown.is_empty() {
            return;
        }
        // Each subscriber's mailbox is a lock shared by two shards only, this dispatch shard
        // and the subscriber's: held to merge a few entries, so announcements coalesce per
        // queue and an idle subscriber holds at most one entry a queue.
        for subscriber in self.growth.load().iter().filter_map(Weak::upgrade) {
            {
                let mut pending = subscriber.pending.lock().unwrap_or_else(|p| p.into_inner());
                for (key, max) in grown {
                    pending.insert(key.clone(), *max);
                }
            }
            subscriber.waker.wake();
        }
    }
}

/// Waits for the CommitLog's committed end to move (see [`StoreShared::watch_commits`]).
#[derive(Debug)]
pub struct CommitWatch {
    shared: Arc<StoreShared>,
    waker: Arc<AtomicWaker>,
}

impl CommitWatch {
    /// Waits until the committed end is not `end`; the committed end then.
    pub async fn moved_from(&self, end: u64) -> u64 {
        std::future::poll_fn(|cx| {
            // Registered before the read: a commit after it wakes this task again.
            self.waker.register(cx.waker());
            match self.shared.committed_end() {
                now if now != end => Poll::Ready(now),
                _ => Poll::Pending,
            }
        })
        .await
    }
}

/// Adds `subscriber` to `list`, leaving out those dropped: one dropped stays in the list,
/// skipped by every wake, until the next is added.
fn add_subscriber<T>(list: &ArcSwap<Vec<Weak<T>>>, subscriber: &Arc<T>) {
    list.rcu(|subscribers| {
        let mut subscribers: Vec<_> = subscribers
            .iter()
            .filter(|s| s.strong_count() > 0)
            .cloned()
            .collect();
        subscribers.push(Arc::downgrade(subscriber));
        subscribers
    });
}

#[derive(Debug, Default)]
struct GrowthInner {
    pending: Mutex<HashMap<QueueKey, i64>>,
    waker: AtomicWaker,
}

/// Queue growth announcements for one subscriber (a net shard's long-polling service).
/// Announcements coalesce per queue, so an idle subscriber holds at most one entry a queue.
#[derive(Debug)]
pub struct QueueGrowth {
    inner: Arc<GrowthInner>,
}

impl QueueGrowth {
    /// The announcements not taken yet, without waiting (empty if none).
    #[must_use]
    pub fn take_pending(&self) -> HashMap<QueueKey, i64> {
        let mut pending = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *pending)
    }

    /// Waits until some queue grew; returns each grown queue with its newest max offset.
    pub async fn next(&self) -> HashMap<QueueKey, i64> {
        std::future::poll_fn(|cx| {
            self.inner.waker.register(cx.waker());
            let mut pending = self.inner.pending.lock().unwrap_or_else(|p| p.into_inner());
            if pending.is_empty() {
                Poll::Pending
            } else {
                Poll::Ready(std::mem::take(&mut *pending))
            }
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A watch sees a commit made on another thread after it began to wait, and one made
    /// before it looked; a dropped watch is skipped by commits and left out by the next.
    #[test]
    fn a_commit_watch_is_woken_by_each_commit() {
        let shared = Arc::new(StoreShared::new(StoreConfig::new("/nonexistent")));
        let watch = shared.watch_commits();
        let committer = {
            let shared = Arc::clone(&shared);
            std::thread::spawn(move || {
                for end in 1..=1000 {
                    shared.set_committed_end(end);
                }
            })
        };
        let mut seen = 0;
        while seen < 1000 {
            seen = futures::executor::block_on(watch.moved_from(seen));
        }
        committer.join().expect("the committer");
        assert_eq!(futures::executor::block_on(watch.moved_from(0)), 1000);
        drop(shared.watch_commits());
        shared.set_committed_end(1001);
        let _again = shared.watch_commits();
        assert_eq!(shared.commit_watchers.load().len(), 2);
        drop(watch);
    }
}
