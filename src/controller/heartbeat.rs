//! Broker liveness as the controller sees it (`DefaultBrokerHeartbeatManager` and
//! `BrokerLiveInfo` in Java's `controller/impl/heartbeat/`), and the election policy that reads
//! it (`DefaultElectPolicy` in `controller/elect/impl/`).
//!
//! A broker is alive while its last BROKER_HEARTBEAT (904) is younger than the timeout it
//! sent (`heartbeatTimeoutMills`, the broker's `controllerHeartBeatTimeoutMills`), and until
//! the connection it last heartbeated on closes. Pure over its table: the caller passes the
//! clock in, so tests need no waiting.

use crate::remoting::server::ConnectionId;
use std::collections::{BTreeMap, BTreeSet};

/// Java's `BrokerChannelExpiredTime`-style default when a heartbeat names no timeout
/// (`DEFAULT_BROKER_CHANNEL_EXPIRED_TIME`, 10 s).
pub const HEARTBEAT_TIMEOUT_DEFAULT_MS: u64 = 10_000;

/// Which broker: cluster, broker name (the group) and the controller-assigned id.
#[doc(alias = "BrokerIdentityInfo")]
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BrokerIdentity {
    /// `clusterName`.
    pub cluster_name: String,
    /// `brokerName`.
    pub broker_name: String,
    /// `brokerId`.
    pub broker_id: i64,
}

/// What the last heartbeats of one broker said (`BrokerLiveInfo` in Java).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerLiveInfo {
    /// `brokerAddr` of the last heartbeat.
    pub broker_addr: String,
    /// When the last heartbeat arrived.
    pub last_update_ms: u64,
    /// How long after it the broker counts as gone.
    pub heartbeat_timeout_ms: u64,
    /// The connection it came on.
    pub connection: Option<ConnectionId>,
    /// Epoch of the broker's last CommitLog entry (-1 unknown).
    pub epoch: i32,
    /// The broker's max physical offset (-1 unknown).
    pub max_offset: i64,
    /// The broker's confirm offset (-1 unknown).
    pub confirm_offset: i64,
    /// `brokerElectionPriority`: lower wins.
    pub election_priority: i32,
}

/// One heartbeat's content.
#[derive(Clone, Debug)]
pub struct Heartbeat {
    /// Who.
    pub identity: BrokerIdentity,
    /// `brokerAddr`.
    pub broker_addr: String,
    /// `heartbeatTimeoutMills`.
    pub timeout_ms: Option<u64>,
    /// `epoch`.
    pub epoch: Option<i32>,
    /// `maxOffset`.
    pub max_offset: Option<i64>,
    /// `confirmOffset`.
    pub confirm_offset: Option<i64>,
    /// `electionPriority`.
    pub election_priority: Option<i32>,
}

/// The live-broker table (`DefaultBrokerHeartbeatManager`).
#[doc(alias = "DefaultBrokerHeartbeatManager")]
#[derive(Debug, Default)]
pub struct BrokerHeartbeatManager {
    live: BTreeMap<BrokerIdentity, BrokerLiveInfo>,
}

impl BrokerHeartbeatManager {
    /// Records a heartbeat that arrived at `now_ms` on `connection`.
    pub fn on_heartbeat(&mut self, beat: Heartbeat, connection: ConnectionId, now_ms: u64) {
        let epoch = beat.epoch.unwrap_or(-1);
        let max_offset = beat.max_offset.unwrap_or(-1);
        let confirm_offset = beat.confirm_offset.unwrap_or(-1);
        let timeout_ms = beat.timeout_ms.unwrap_or(HEARTBEAT_TIMEOUT_DEFAULT_MS);
        let election_priority = beat.election_priority.unwrap_or(i32::MAX);
        match self.live.get_mut(&beat.identity) {
            Some(info) => {
                info.last_update_ms = now_ms;
                info.heartbeat_timeout_ms = timeout_ms;
                info.election_priority = election_priority;
                info.connection = Some(connection);
                info.broker_addr = beat.broker_addr;
                // Offsets only move forward within an epoch, as Java keeps them.
                if epoch > info.epoch || (epoch == info.epoch && max_offset > info.max_offset) {
                    info.epoch = epoch;
                    info.max_offset = max_offset;
                    info.confirm_offset = confirm_offset;
                }
            }
            None => {
                tracing::info!(
                    broker = %beat.identity.broker_name,
                    broker_id = beat.identity.broker_id,
                    addr = %beat.broker_addr,
                    "new broker heartbeat"
                );
                let info = BrokerLiveInfo {
                    broker_addr: beat.broker_addr,
                    last_update_ms: now_ms,
                    heartbeat_timeout_ms: timeout_ms,
                    connection: Some(connection),
                    epoch,
                    max_offset,
                    confirm_offset,
                    election_priority,
                };
                self.live.insert(beat.identity, info);
            }
        }
    }

    /// Drops the brokers whose last heartbeat came on `connection`; returns them.
    pub fn on_connection_closed(&mut self, connection: ConnectionId) -> Vec<BrokerIdentity> {
        let gone: Vec<BrokerIdentity> = self
            .live
            .iter()
            .filter(|(_, info)| info.connection == Some(connection))
            .map(|(identity, _)| identity.clone())
            .collect();
        for identity in &gone {
            self.live.remove(identity);
        }
        gone
    }

    /// Drops the brokers silent past their timeout at `now_ms`; returns them.
    pub fn scan_not_active(&mut self, now_ms: u64) -> Vec<BrokerIdentity> {
        let gone: Vec<BrokerIdentity> = self
            .live
            .iter()
            .filter(|(_, info)| !fresh(info, now_ms))
            .map(|(identity, _)| identity.clone())
            .collect();
        for identity in &gone {
            self.live.remove(identity);
        }
        gone
    }

    /// The view of liveness at `now_ms` that the state machine's checks read.
    #[must_use]
    pub fn at(&self, now_ms: u64) -> LiveView<'_> {
        LiveView {
            manager: self,
            now_ms,
        }
    }
}

fn fresh(info: &BrokerLiveInfo, now_ms: u64) -> bool {
    info.last_update_ms
        .saturating_add(info.heartbeat_timeout_ms)
        >= now_ms
}

/// Who is alive, and what they last reported (Java's `BrokerValidPredicate` and
/// `BrokerLiveInfoGetter`).
pub trait Liveness {
    /// Whether the broker is alive.
    fn is_alive(&self, cluster_name: &str, broker_name: &str, broker_id: i64) -> bool;
    /// Its last report, if any.
    fn live_info(
        &self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: i64,
    ) -> Option<BrokerLiveInfo>;
}

/// [`BrokerHeartbeatManager`] read at one instant.
#[derive(Clone, Copy, Debug)]
pub struct LiveView<'a> {
    manager: &'a BrokerHeartbeatManager,
    now_ms: u64,
}

impl LiveView<'_> {
    fn get(
        &self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: i64,
    ) -> Option<&BrokerLiveInfo> {
        let identity = BrokerIdentity {
            cluster_name: cluster_name.to_owned(),
            broker_name: broker_name.to_owned(),
            broker_id,
        };
        self.manager.live.get(&identity)
    }
}

impl Liveness for LiveView<'_> {
    fn is_alive(&self, cluster_name: &str, broker_name: &str, broker_id: i64) -> bool {
        self.get(cluster_name, broker_name, broker_id)
            .is_some_and(|info| fresh(info, self.now_ms))
    }

    fn live_info(
        &self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: i64,
    ) -> Option<BrokerLiveInfo> {
        self.get(cluster_name, broker_name, broker_id).cloned()
    }
}

/// The election (`DefaultElectPolicy.elect`): first among the SyncStateSet, then, when
/// unclean election is on (`all_replicas` given), among every replica.
///
/// Within one set: only live brokers count; the old master stays if alive and nobody else
/// is preferred; a preferred broker (`prefer`, an operator's `designateElect`) is taken if
/// alive, else nobody; otherwise the best by (epoch descending, max offset descending,
/// election priority ascending), ties to the lowest id (Java keeps the first of equals in a
/// `TreeSet` fed in `HashSet` order, which for small ids is ascending).
#[doc(alias = "DefaultElectPolicy")]
pub fn elect(
    live: &impl Liveness,
    group: (&str, &str),
    sync_state_set: &BTreeSet<i64>,
    all_replicas: Option<&BTreeSet<i64>>,
    old_master: Option<i64>,
    prefer: Option<i64>,
) -> Option<i64> {
    try_elect(live, group, sync_state_set, old_master, prefer)
        .or_else(|| all_replicas.and_then(|all| try_elect(live, group, all, old_master, prefer)))
}

fn try_elect(
    live: &impl Liveness,
    (cluster_name, broker_name): (&str, &str),
    brokers: &BTreeSet<i64>,
    old_master: Option<i64>,
    prefer: Option<i64>,
) -> Option<i64> {
    let alive: Vec<i64> = brokers
        .iter()
        .copied()
        .filter(|&id| live.is_alive(cluster_name, broker_name, id))
        .collect();
    if alive.is_empty() {
        return None;
    }
    if let Some(old) = old_master {
        if alive.contains(&old) && prefer.is_none_or(|p| p == old) {
            return Some(old);
        }
    }
    if let Some(preferred) = prefer {
        return alive.contains(&preferred).then_some(preferred);
    }
    alive.iter().copied().min_by_key(|&id| {
        let info = live.live_info(cluster_name, broker_name, id);
        let (epoch, offset, priority) = info.map_or((i32::MIN, i64::MIN, i32::MAX), |i| {
            (i.epoch, i.max_offset, i.election_priority)
        });
        (
            std::cmp::Reverse(epoch),
            std::cmp::Reverse(offset),
            priority,
            id,
        )
    })
}
