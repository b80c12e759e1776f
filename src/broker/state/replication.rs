//! What replication shares between the HA link's tasks and the rest of the broker.
//!
//! On a master, [`SlaveProgress`]: the connected slaves, what each last acknowledged and how
//! many frames and reports crossed its link (written by each slave's HA task), and the
//! highest offset any slave acknowledged (`push2SlaveMaxOffset`). SYNC_MASTER puts wait on
//! their own net shard, in its [`LocalReplicaWaits`] (4.9's `GroupTransferService`, one per
//! net shard), ordered by the offset a slave must acknowledge.
//!
//! An acknowledgement costs atomics and at most one wake per net shard that has a put it
//! covers, however many puts it releases: that shard's own task then answers every covered
//! put there. Neither a put nor an acknowledgement takes a lock; the per-slave table's lock
//! is taken when a slave connects or leaves and by admin reads, never by a send to an
//! ASYNC_MASTER, a pull or a heartbeat.
//!
//! Invariant: a put waiting on a shard is never missed by the acknowledgement that covers
//! it. The put publishes its end as its shard's lowest waiting offset, then reads the
//! acknowledged offset; an acknowledgement raises the acknowledged offset, then reads each
//! shard's lowest (all sequentially consistent): one of the two sees the other.
//!
//! On a slave, [`MasterAddrs`]: the master's addresses as the name server told them, where
//! following it stands, and how many frames it took and reports it sent.

use super::lock;
use arc_swap::ArcSwap;
use futures::channel::oneshot;
use futures::task::AtomicWaker;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

/// What the master knows of its slaves, for every shard: which are connected and what each
/// last reported, the highest offset one acknowledged (`push2SlaveMaxOffset`), and each net
/// shard's lowest waiting SYNC_MASTER put.
#[doc(alias = "HAService")]
#[derive(Debug, Default)]
pub struct SlaveProgress {
    acked: AtomicI64,
    /// Each connected slave's link.
    links: Mutex<BTreeMap<SocketAddr, Arc<SlaveLink>>>,
    /// How many entries `links` has, for the check of every SYNC_MASTER put.
    connected: AtomicUsize,
    /// The net shards where puts may wait: read lock-free by every acknowledgement, replaced
    /// whole when a shard starts or stops.
    shards: ArcSwap<Vec<Arc<ShardWaits>>>,
}

/// One slave's connection as its HA task counts it (the counters of 4.9's `HAConnection`).
#[derive(Debug)]
pub struct SlaveLink {
    /// The last report (-1 before the first).
    acked: AtomicI64,
    frames_sent: AtomicU64,
    reports: AtomicU64,
}

impl SlaveLink {
    /// Counts `frames` sent to the slave (heartbeats too).
    pub(crate) fn sent_frames(&self, frames: u64) {
        self.frames_sent.fetch_add(frames, Ordering::Relaxed);
    }
}

/// A connected slave as the admin requests show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlaveLinkStatus {
    /// Its address.
    pub addr: SocketAddr,
    /// Its last report (-1 before the first).
    pub acked: i64,
    /// Frames sent to it (heartbeats too).
    pub frames_sent: u64,
    /// 8-byte reports read from it.
    pub reports: u64,
}

/// What an acknowledging slave's task sees of one net shard's waiting puts.
#[derive(Debug)]
struct ShardWaits {
    /// The lowest end offset a put waits for there (`i64::MAX` when none waits).
    lowest: AtomicI64,
    /// The shard's task that answers its puts.
    waker: AtomicWaker,
}

/// Why a SYNC_MASTER put was not replicated in time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReplicaStatus {
    /// A slave acknowledged the put's end.
    Acked,
    /// No slave, or every slave too far behind (`SLAVE_NOT_AVAILABLE`).
    NoSlave,
    /// No acknowledgement within the wait (`FLUSH_SLAVE_TIMEOUT`).
    TimedOut,
}

impl SlaveProgress {
    /// Takes a report of `link` read from the socket: `reports` 8-byte groups, the last of
    /// which says `offset`. Wakes the net shards with a put it covers, once each.
    pub(crate) fn ack(&self, link: &SlaveLink, offset: i64, reports: u64) {
        link.acked.store(offset, Ordering::Release);
        link.reports.fetch_add(reports, Ordering::Relaxed);
        let before = self.acked.fetch_max(offset, Ordering::SeqCst);
        if offset <= before {
            return;
        }
        for shard in self.shards.load().iter() {
            if shard.lowest.load(Ordering::SeqCst) <= offset {
                shard.waker.wake();
            }
        }
    }

    /// A slave at `peer` connected; its link, to count on.
    pub(crate) fn link_opened(&self, peer: SocketAddr) -> Arc<SlaveLink> {
        let link = Arc::new(SlaveLink {
            acked: AtomicI64::new(-1),
            frames_sent: AtomicU64::new(0),
            reports: AtomicU64::new(0),
        });
        let mut links = self.lock_links();
        links.insert(peer, Arc::clone(&link));
        self.connected.store(links.len(), Ordering::Release);
        link
    }

    pub(crate) fn link_closed(&self, peer: SocketAddr) {
        let mut links = self.lock_links();
        links.remove(&peer);
        self.connected.store(links.len(), Ordering::Release);
    }

    fn lock_links(&self) -> std::sync::MutexGuard<'_, BTreeMap<SocketAddr, Arc<SlaveLink>>> {
        lock(&self.links)
    }

    /// Each connected slave: its address, last report and counts.
    #[must_use]
    pub fn links(&self) -> Vec<SlaveLinkStatus> {
        self.lock_links()
            .iter()
            .map(|(addr, link)| SlaveLinkStatus {
                addr: *addr,
                acked: link.acked.load(Ordering::Acquire),
                frames_sent: link.frames_sent.load(Ordering::Relaxed),
                reports: link.reports.load(Ordering::Relaxed),
            })
            .collect()
    }

    /// Slaves connected now.
    #[must_use]
    pub fn connected(&self) -> usize {
        self.connected.load(Ordering::Acquire)
    }

    /// The highest CommitLog offset a slave has acknowledged (0 before any).
    #[must_use]
    pub fn acked(&self) -> i64 {
        self.acked.load(Ordering::SeqCst)
    }
}

/// The SYNC_MASTER puts waiting on one net shard, by the CommitLog offset a slave must
/// acknowledge (4.9's `GroupTransferService`; one per net shard, not one thread for all):
/// [`run_replica_waits`] answers them as acknowledgements pass them.
#[doc(alias = "GroupTransferService")]
#[derive(Debug)]
pub struct LocalReplicaWaits {
    progress: Arc<SlaveProgress>,
    shard: Arc<ShardWaits>,
    /// Each waiting put's wake, by its end offset.
    waiting: RefCell<BTreeMap<i64, Vec<oneshot::Sender<()>>>>,
}

impl LocalReplicaWaits {
    /// This shard's table, made known to the slaves' tasks until it is dropped.
    #[must_use]
    pub fn new(progress: Arc<SlaveProgress>) -> LocalReplicaWaits {
        let shard = Arc::new(ShardWaits {
            lowest: AtomicI64::new(i64::MAX),
            waker: AtomicWaker::new(),
        });
        progress.shards.rcu(|shards| {
            let mut shards = Vec::clone(shards);
            shards.push(Arc::clone(&shard));
            shards
        });
        LocalReplicaWaits {
            progress,
            shard,
            waiting: RefCell::default(),
        }
    }

    /// Waits until a slave acknowledged `end` (a put's end offset), at most `timeout`; first
    /// refuses when no slave is connected or the best one is `fall_behind_max` or more behind
    /// `end` (4.9's `isSlaveOK`).
    pub async fn replicated(
        &self,
        end: i64,
        fall_behind_max: i64,
        timeout: Duration,
    ) -> ReplicaStatus {
        let acked = self.progress.acked();
        if self.progress.connected() == 0 || end - acked >= fall_behind_max {
            return ReplicaStatus::NoSlave;
        }
        if acked >= end {
            return ReplicaStatus::Acked;
        }
        let (wake, woken) = oneshot::channel();
        self.waiting.borrow_mut().entry(end).or_default().push(wake);
        self.shard.lowest.fetch_min(end, Ordering::SeqCst);
        // An acknowledgement between the check and the registration is not missed: it read
        // a lowest offset above this put's end, so this reads its offset.
        let acked = self.progress.acked();
        if acked >= end {
            self.release(acked);
        }
        match glommio::timer::timeout(timeout, async {
            let _ = woken.await;
            Ok(())
        })
        .await
        {
            Ok(()) => ReplicaStatus::Acked,
            Err(_) => {
                // A slave that never acknowledges must not make the waiting list grow.
                let mut waiting = self.waiting.borrow_mut();
                if let Some(list) = waiting.get_mut(&end) {
                    list.retain(|wake| !wake.is_canceled());
                    if list.is_empty() {
                        waiting.remove(&end);
                    }
                }
                let lowest = waiting.keys().next().copied().unwrap_or(i64::MAX);
                self.shard.lowest.store(lowest, Ordering::SeqCst);
                ReplicaStatus::TimedOut
            }
        }
    }

    /// Answers every put `acked` covers; publishes the lowest end still waiting.
    fn release(&self, acked: i64) {
        let mut waiting = self.waiting.borrow_mut();
        while let Some(entry) = waiting.first_entry() {
            if *entry.key() > acked {
                break;
            }
            for wake in entry.remove() {
                let _ = wake.send(());
            }
        }
        let lowest = waiting.keys().next().copied().unwrap_or(i64::MAX);
        self.shard.lowest.store(lowest, Ordering::SeqCst);
    }
}

impl Drop for LocalReplicaWaits {
    fn drop(&mut self) {
        let shard = &self.shard;
        self.progress.shards.rcu(|shards| {
            shards
                .iter()
                .filter(|s| !Arc::ptr_eq(s, shard))
                .cloned()
                .collect::<Vec<_>>()
        });
    }
}

/// Answers the puts waiting in `waits` as acknowledgements pass them, on their shard;
/// endless. Woken by a slave's task once per acknowledgement that covers a put here.
pub async fn run_replica_waits(waits: std::rc::Rc<LocalReplicaWaits>) {
    std::future::poll_fn(|cx| {
        // Registered before the read: an acknowledgement after it wakes this task again.
        waits.shard.waker.register(cx.waker());
        waits.release(waits.progress.acked());
        Poll::<()>::Pending
    })
    .await;
}

/// The master's addresses as the name server last told them (REGISTER_BROKER's answer),
/// where following it stands, and how many frames it took and reports it sent, for the
/// admin requests.
#[derive(Debug, Default)]
pub struct MasterAddrs {
    learned: Mutex<(Option<String>, Option<String>)>,
    link: Mutex<LinkState>,
    frames_taken: AtomicU64,
    reports_sent: AtomicU64,
}

/// Where a slave's replication stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Not connected to the master: not yet, or again after the connection closed for
    /// this reason.
    Down(Option<String>),
    /// Taking the master's CommitLog over a connection to this HA address.
    Up(SocketAddr),
    /// The store refused replicated bytes: replication stopped until a restart.
    Stopped(String),
}

impl Default for LinkState {
    fn default() -> Self {
        LinkState::Down(None)
    }
}

impl MasterAddrs {
    /// Takes REGISTER_BROKER's answer: the master's remoting and HA addresses, if known.
    pub fn learned(&self, master: Option<String>, ha: Option<String>) {
        let nonempty = |a: Option<String>| a.filter(|a| !a.is_empty());
        *lock(&self.learned) = (nonempty(master), nonempty(ha));
    }

    /// The master's remoting address, if known.
    #[must_use]
    pub fn master(&self) -> Option<String> {
        lock(&self.learned).0.clone()
    }

    /// The HA address to follow: `configured` (`haMasterAddress`) if set, else the
    /// master's as learned, if known.
    #[must_use]
    pub fn ha_target(&self, configured: Option<&str>) -> Option<String> {
        configured
            .map(str::to_owned)
            .or_else(|| lock(&self.learned).1.clone())
    }

    /// Where replication stands now.
    #[must_use]
    pub fn link(&self) -> LinkState {
        lock(&self.link).clone()
    }

    pub(crate) fn set_link(&self, state: LinkState) {
        *lock(&self.link) = state;
    }

    /// Frames taken from the master (heartbeats too), on every connection so far.
    #[must_use]
    pub fn frames_taken(&self) -> u64 {
        self.frames_taken.load(Ordering::Relaxed)
    }

    pub(crate) fn took_frames(&self, frames: u64) {
        self.frames_taken.fetch_add(frames, Ordering::Relaxed);
    }

    /// Reports sent to the master, on every connection so far.
    #[must_use]
    pub fn reports_sent(&self) -> u64 {
        self.reports_sent.load(Ordering::Relaxed)
    }

    pub(crate) fn sent_report(&self) {
        self.reports_sent.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferromq_shards::testing::run_local;
    use std::rc::Rc;

    const PEER: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(
        std::net::Ipv4Addr::LOCALHOST,
        4321,
    ));
    const FALL_BEHIND_MAX: i64 = 1 << 30;

    /// Lets every task of this executor that is ready run (each waits at most once here).
    async fn settle() {
        for _ in 0..4 {
            futures_lite::future::yield_now().await;
        }
    }

    /// Puts waiting at ends 10, 20, ... 1000 on one shard: an acknowledgement answers exactly
    /// the puts it covers, one for 500 answers 50 of them at once, and what is left is
    /// answered by the next.
    #[test]
    fn one_acknowledgement_answers_every_put_it_covers_and_no_other() {
        run_local(async {
            let progress = Arc::new(SlaveProgress::default());
            let link = progress.link_opened(PEER);
            let waits = Rc::new(LocalReplicaWaits::new(Arc::clone(&progress)));
            let _release = glommio::spawn_local(run_replica_waits(Rc::clone(&waits)));
            let answered = Rc::new(std::cell::Cell::new(0usize));
            let puts: Vec<_> = (1..=100i64)
                .map(|i| {
                    let (waits, answered) = (Rc::clone(&waits), Rc::clone(&answered));
                    glommio::spawn_local(async move {
                        let status = waits
                            .replicated(i * 10, FALL_BEHIND_MAX, Duration::from_secs(30))
                            .await;
                        answered.set(answered.get() + 1);
                        status
                    })
                })
                .collect();
            settle().await;
            assert_eq!(answered.get(), 0);
            assert_eq!(waits.shard.lowest.load(Ordering::SeqCst), 10);
            progress.ack(&link, 505, 1);
            settle().await;
            assert_eq!(answered.get(), 50);
            assert_eq!(waits.shard.lowest.load(Ordering::SeqCst), 510);
            progress.ack(&link, 1000, 1);
            for put in puts {
                assert_eq!(put.await, ReplicaStatus::Acked);
            }
            assert!(waits.waiting.borrow().is_empty());
            assert_eq!(waits.shard.lowest.load(Ordering::SeqCst), i64::MAX);
            // Already covered: answered without waiting.
            let covered = waits.replicated(900, FALL_BEHIND_MAX, Duration::ZERO).await;
            assert_eq!(covered, ReplicaStatus::Acked);
            assert_eq!(progress.links()[0].reports, 2);
        });
    }

    #[test]
    fn a_put_no_slave_covers_times_out_and_leaves_nothing_behind() {
        run_local(async {
            let progress = Arc::new(SlaveProgress::default());
            let waits = LocalReplicaWaits::new(Arc::clone(&progress));
            let none = waits
                .replicated(100, FALL_BEHIND_MAX, Duration::from_secs(1))
                .await;
            assert_eq!(none, ReplicaStatus::NoSlave);
            let link = progress.link_opened(PEER);
            progress.ack(&link, 50, 1);
            let far = waits.replicated(100 + FALL_BEHIND_MAX, FALL_BEHIND_MAX, Duration::ZERO);
            assert_eq!(far.await, ReplicaStatus::NoSlave);
            let late = waits.replicated(100, FALL_BEHIND_MAX, Duration::from_millis(20));
            assert_eq!(late.await, ReplicaStatus::TimedOut);
            assert!(waits.waiting.borrow().is_empty());
            assert_eq!(waits.shard.lowest.load(Ordering::SeqCst), i64::MAX);
        });
        // A dropped table is no longer seen by acknowledgements.
        let progress = Arc::new(SlaveProgress::default());
        drop(LocalReplicaWaits::new(Arc::clone(&progress)));
        assert!(progress.shards.load().is_empty());
    }

    /// Puts wait on two shards (threads) while a third acknowledges in small steps: every
    /// put is answered by the acknowledgement that covers it, none is missed however the
    /// registration and the acknowledgement interleave.
    #[test]
    fn puts_on_other_shards_are_answered_by_an_acknowledgement_from_another() {
        const PUTS: i64 = 2_000;
        let progress = Arc::new(SlaveProgress::default());
        let link = progress.link_opened(PEER);
        let shards: Vec<_> = (0..2i64)
            .map(|shard| {
                let progress = Arc::clone(&progress);
                std::thread::spawn(move || {
                    run_local(async move {
                        let waits = Rc::new(LocalReplicaWaits::new(progress));
                        let _release = glommio::spawn_local(run_replica_waits(Rc::clone(&waits)));
                        let puts: Vec<_> = (0..PUTS)
                            .map(|i| {
                                let waits = Rc::clone(&waits);
                                glommio::spawn_local(async move {
                                    let end = (i * 2 + shard + 1) * 8;
                                    waits
                                        .replicated(end, FALL_BEHIND_MAX, Duration::from_secs(20))
                                        .await
                                })
                            })
                            .collect();
                        let mut acked = 0;
                        for put in puts {
                            if put.await == ReplicaStatus::Acked {
                                acked += 1;
                            }
                        }
                        acked
                    })
                })
            })
            .collect();
        // In small steps, spread over some 50 ms: puts register while others are answered.
        for step in 1..=PUTS * 2 {
            progress.ack(&link, step * 8, 1);
            if step % 16 == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        for shard in shards {
            assert_eq!(shard.join().expect("a shard"), PUTS);
        }
    }
}
