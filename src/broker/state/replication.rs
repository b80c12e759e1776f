//! What replication shares between the HA link's tasks and the rest of the broker.
//!
//! On a master, [`SlaveProgress`]: the connected slaves and what each last acknowledged
//! (written by each slave's HA task), and the SYNC_MASTER puts waiting for an
//! acknowledgement (added by the send processor on any net shard, woken by the acknowledging
//! slave's task). The highest acknowledged offset and the number of links are atomics; the
//! waiting puts and the per-slave reports are behind locks taken only by SYNC_MASTER puts,
//! slave reports and admin reads: never by a send to an ASYNC_MASTER, a pull or a heartbeat.
//!
//! On a slave, [`MasterAddrs`]: the master's addresses as the name server told them, and
//! where following it stands.

use super::lock;
use futures::channel::oneshot;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// What the master knows of its slaves, for every shard: which are connected and what each
/// last reported, the highest offset one acknowledged (`push2SlaveMaxOffset`), and the
/// SYNC_MASTER puts waiting for an acknowledgement.
#[derive(Debug, Default)]
pub struct SlaveProgress {
    acked: AtomicI64,
    /// Each connected slave's last report (-1 before its first).
    links: Mutex<BTreeMap<SocketAddr, i64>>,
    /// How many entries `links` has, for the check of every SYNC_MASTER put.
    connected: AtomicUsize,
    /// Puts waiting, by the CommitLog offset a slave must acknowledge.
    waiting: Mutex<BTreeMap<i64, Vec<oneshot::Sender<()>>>>,
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
    /// Waits until a slave acknowledged `end` (a put's end offset), at most `timeout`; first
    /// refuses when no slave is connected or the best one is `fall_behind_max` or more behind
    /// `end` (4.9's `isSlaveOK`).
    pub async fn replicated(
        &self,
        end: i64,
        fall_behind_max: i64,
        timeout: Duration,
    ) -> ReplicaStatus {
        if self.connected() == 0 || end - self.acked() >= fall_behind_max {
            return ReplicaStatus::NoSlave;
        }
        let (wake, woken) = oneshot::channel();
        self.lock_waiting().entry(end).or_default().push(wake);
        // An acknowledgement between the check and the registration is not missed.
        self.wake_acked(self.acked());
        match glommio::timer::timeout(timeout, async {
            let _ = woken.await;
            Ok(())
        })
        .await
        {
            Ok(()) => ReplicaStatus::Acked,
            Err(_) => {
                // A slave that never acknowledges must not make the waiting list grow.
                let mut waiting = self.lock_waiting();
                if let Some(list) = waiting.get_mut(&end) {
                    list.retain(|wake| !wake.is_canceled());
                    if list.is_empty() {
                        waiting.remove(&end);
                    }
                }
                ReplicaStatus::TimedOut
            }
        }
    }

    fn lock_waiting(&self) -> std::sync::MutexGuard<'_, BTreeMap<i64, Vec<oneshot::Sender<()>>>> {
        lock(&self.waiting)
    }

    /// Takes `peer`'s acknowledgement of `offset`, waking the puts it covers.
    pub(crate) fn ack(&self, peer: SocketAddr, offset: i64) {
        if let Some(reported) = self.lock_links().get_mut(&peer) {
            *reported = offset;
        }
        self.acked.fetch_max(offset, Ordering::AcqRel);
        self.wake_acked(self.acked());
    }

    fn wake_acked(&self, acked: i64) {
        let mut waiting = self.lock_waiting();
        let later = waiting.split_off(&(acked + 1));
        let covered = std::mem::replace(&mut *waiting, later);
        drop(waiting);
        for wake in covered.into_values().flatten() {
            let _ = wake.send(());
        }
    }

    fn lock_links(&self) -> std::sync::MutexGuard<'_, BTreeMap<SocketAddr, i64>> {
        lock(&self.links)
    }

    pub(crate) fn link_opened(&self, peer: SocketAddr) {
        let mut links = self.lock_links();
        links.insert(peer, -1);
        self.connected.store(links.len(), Ordering::Release);
    }

    pub(crate) fn link_closed(&self, peer: SocketAddr) {
        let mut links = self.lock_links();
        links.remove(&peer);
        self.connected.store(links.len(), Ordering::Release);
    }

    /// Each connected slave's address and last reported offset (-1 before its first).
    #[must_use]
    pub fn links(&self) -> Vec<(SocketAddr, i64)> {
        self.lock_links().iter().map(|(a, o)| (*a, *o)).collect()
    }

    /// Slaves connected now.
    #[must_use]
    pub fn connected(&self) -> usize {
        self.connected.load(Ordering::Acquire)
    }

    /// The highest CommitLog offset a slave has acknowledged (0 before any).
    #[must_use]
    pub fn acked(&self) -> i64 {
        self.acked.load(Ordering::Acquire)
    }
}

/// The master's addresses as the name server last told them (REGISTER_BROKER's answer), and
/// where following it stands, for the admin requests.
#[derive(Debug, Default)]
pub struct MasterAddrs {
    learned: Mutex<(Option<String>, Option<String>)>,
    link: Mutex<LinkState>,
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
}
