//! The controller's state replicated over its peers (`controllerDLegerPeers`) with openraft,
//! where Java's controller uses DLedger (`DLedgerController`): the decided [`Event`]s are the
//! log entries, and [`store::StateMachine`] applies committed ones to a
//! `ReplicasInfoManager`, with the log, vote and snapshots in one redb file
//! ([`store`]) and the peers talking over [`network`].
//!
//! Threads: raft runs on a tokio runtime of its own thread ([`start`]); the controller's
//! glommio shard never waits on it except by awaiting futures: it sends work to that runtime
//! with [`RaftBridge`] (each call a tokio task answering on a oneshot) and receives every
//! applied entry, in log order, on a bounded channel ([`Applied`]).
//!
//! Node ids are the peers' positions in `controllerDLegerPeers` (`n0-…;n1-…;n2-…` gives 0,
//! 1, 2), so every controller, configured with the same list, agrees on them; names (`n0`)
//! are what GET_METADATA_INFO shows. Every controller initializes the cluster with all the
//! peers at its first start; openraft lets the same membership be proposed by each.
//!
//! Timing: heartbeats every 250 ms and an election after 0.75–1.5 s without one (openraft
//! also refuses votes while the old leader's 1.5 s lease lasts), so a new leader is in place
//! about 2–4 s after the old one dies (DLedger: 2 s heartbeats, 3 missed).

pub mod network;
pub mod store;

use crate::controller::replicas_info::{Event, ReplicasInfoManager};
use arc_swap::ArcSwap;
use openraft::{BasicNode, Raft};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Cursor;
use std::path::Path;
use std::sync::{Arc, OnceLock};

openraft::declare_raft_types!(
    /// The controller's raft types: entries are [`Proposal`]s, nodes are peer addresses.
    pub TypeConfig:
        D = Proposal,
        R = (),
);

/// Applied entries waiting for the shard at most.
const APPLIED_QUEUED_MAX: usize = 1024;
/// Entries kept in the log after a snapshot (for followers slightly behind).
const LOGS_KEPT_AFTER_SNAPSHOT: u64 = 200;
/// A snapshot every this many entries.
const SNAPSHOT_EVERY_LOGS: u64 = 1000;
/// How long an append or a leadership check may wait for a quorum (Java's controller waits
/// for DLedger's append a few seconds too); after it the decision is void.
const QUORUM_WAIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
/// How often the leader confirms it still reaches a quorum.
const LEASE_CHECK_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// One log entry: the events one decision produced, tagged with who proposed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The proposing process (random at each start), so it can tell its own entries.
    pub origin: u64,
    /// The proposal's number in that process.
    pub seq: u64,
    /// The events, applied in order.
    pub events: Vec<Event>,
}

impl std::fmt::Display for Proposal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "proposal {}/{}: {} events",
            self.origin,
            self.seq,
            self.events.len()
        )
    }
}

/// What the state machine tells the shard, in log order.
#[derive(Debug)]
pub enum Applied {
    /// Entry `index` was applied; `proposal` is `None` for raft's own entries.
    Entry {
        /// The log index.
        index: u64,
        /// Its events.
        proposal: Option<Proposal>,
    },
    /// The whole state, as of `index` (a snapshot, or a resynchronisation).
    Reset {
        /// The log index the state is at.
        index: u64,
        /// The state.
        state: ReplicasInfoManager,
    },
}

/// One peer of `controllerDLegerPeers`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Its DLedger id (`n0`).
    pub name: String,
    /// Its raft address (`host:port`).
    pub addr: String,
}

/// Parses `controllerDLegerPeers` (`n0-127.0.0.1:9878;n1-127.0.0.1:9868`).
///
/// # Errors
/// An entry without `id-host:port`, or an id twice.
pub fn parse_peers(peers: &str) -> Result<Vec<Peer>, String> {
    let mut parsed: Vec<Peer> = Vec::new();
    for entry in peers.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, addr)) = entry.split_once('-') else {
            return Err(format!(
                "controllerDLegerPeers entry {entry:?} is not id-host:port"
            ));
        };
        if !addr.contains(':') || name.is_empty() {
            return Err(format!(
                "controllerDLegerPeers entry {entry:?} is not id-host:port"
            ));
        }
        if parsed.iter().any(|p| p.name == name) {
            return Err(format!("controllerDLegerPeers names {name} twice"));
        }
        parsed.push(Peer {
            name: name.to_owned(),
            addr: addr.to_owned(),
        });
    }
    Ok(parsed)
}

/// What the shard reads about the cluster without asking raft: who leads and where brokers
/// reach it. Written by the raft thread.
#[derive(Debug)]
pub struct RaftView {
    /// The peers, by node id.
    pub peers: Vec<Peer>,
    /// This node's id.
    pub self_id: u64,
    /// This node's remoting address, set once the controller listens.
    pub own_remoting: Arc<OnceLock<String>>,
    state: ArcSwap<ViewState>,
}

#[derive(Clone, Debug, Default)]
struct ViewState {
    leader: Option<u64>,
    /// One more at each change of `leader` or of the raft term.
    generation: u64,
    remoting: BTreeMap<u64, String>,
}

impl RaftView {
    /// Whether this controller is the raft leader.
    #[must_use]
    pub fn is_leader(&self) -> bool {
        self.state.load().leader == Some(self.self_id)
    }

    /// The number of leader or term changes seen so far: equal numbers mean the same
    /// leadership.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.state.load().generation
    }

    /// The leader's name (`n1`) and remoting address, when known.
    #[must_use]
    pub fn leader(&self) -> Option<(String, Option<String>)> {
        let state = self.state.load();
        let leader = state.leader?;
        let name = self.peers.get(usize::try_from(leader).ok()?)?.name.clone();
        let remoting = if leader == self.self_id {
            self.own_remoting.get().cloned()
        } else {
            state.remoting.get(&leader).cloned()
        };
        Some((name, remoting))
    }

    /// Records a peer's remoting address, as its requests carry it.
    pub fn learn_remoting(&self, node: u64, remoting: &str) {
        if remoting.is_empty()
            || self.state.load().remoting.get(&node).map(String::as_str) == Some(remoting)
        {
            return;
        }
        self.state.rcu(|state| {
            let mut state = ViewState::clone(state);
            state.remoting.insert(node, remoting.to_owned());
            state
        });
    }

    fn set_leader(&self, leader: Option<u64>) {
        self.state.rcu(|state| ViewState {
            leader,
            generation: state.generation + 1,
            ..ViewState::clone(state)
        });
    }
}

/// Why a write or read barrier did not go through.
#[derive(Debug, thiserror::Error)]
pub enum RaftCallError {
    /// Another controller leads, or none does.
    #[error("The controller is not in leader state")]
    NotLeader,
    /// Raft failed (storage, shutdown).
    #[error("the controller's raft failed: {0}")]
    Failed(String),
}

/// The shard's handle on raft: every call runs as a task on raft's runtime.
#[derive(Clone)]
pub struct RaftBridge {
    runtime: tokio::runtime::Handle,
    raft: Raft<TypeConfig>,
    machine: store::StateMachine,
    /// The cluster as this controller sees it.
    pub view: Arc<RaftView>,
}

impl std::fmt::Debug for RaftBridge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaftBridge")
            .field("view", &self.view)
            .finish_non_exhaustive()
    }
}

impl RaftBridge {
    /// Appends `proposal` and returns its index once it is committed and applied here.
    ///
    /// # Errors
    /// [`RaftCallError::NotLeader`] when this controller no longer leads.
    pub async fn write(&self, proposal: Proposal) -> Result<u64, RaftCallError> {
        let raft = self.raft.clone();
        self.run(async move {
            let written = tokio::time::timeout(QUORUM_WAIT_TIMEOUT, raft.client_write(proposal));
            let Ok(written) = written.await else {
                return Err(RaftCallError::Failed("not committed in time".to_owned()));
            };
            match written {
                Ok(response) => Ok(response.log_id.index),
                Err(openraft::error::RaftError::APIError(_)) => Err(RaftCallError::NotLeader),
                Err(error) => Err(RaftCallError::Failed(error.to_string())),
            }
        })
        .await
    }

    /// Confirms this controller still leads and returns the index up to which the state must
    /// be applied for a read or decision to see every committed entry.
    ///
    /// # Errors
    /// [`RaftCallError::NotLeader`] when it does not lead.
    pub async fn linearize(&self) -> Result<u64, RaftCallError> {
        let raft = self.raft.clone();
        self.run(async move {
            let checked = tokio::time::timeout(QUORUM_WAIT_TIMEOUT, raft.ensure_linearizable());
            let Ok(checked) = checked.await else {
                return Err(RaftCallError::NotLeader);
            };
            match checked {
                Ok(read) => Ok(read.map_or(0, |id| id.index)),
                Err(openraft::error::RaftError::APIError(_)) => Err(RaftCallError::NotLeader),
                Err(error) => Err(RaftCallError::Failed(error.to_string())),
            }
        })
        .await
    }

    /// Asks the state machine to send its whole state (after a failed write, whose events
    /// the shard had applied ahead of the log).
    pub async fn resync(&self) {
        let mut machine = self.machine.clone();
        let done = self.run(async move {
            machine.resync().await;
            Ok(0)
        });
        let _ = done.await;
    }

    async fn run(
        &self,
        call: impl std::future::Future<Output = Result<u64, RaftCallError>> + Send + 'static,
    ) -> Result<u64, RaftCallError> {
        let (reply, answer) = futures::channel::oneshot::channel();
        self.runtime.spawn(async move {
            let _ = reply.send(call.await);
        });
        answer
            .await
            .map_err(|_| RaftCallError::Failed("raft's runtime stopped".to_owned()))?
    }
}

/// What [`start`] needs.
#[derive(Clone, Debug)]
pub struct RaftSettings {
    /// `controllerDLegerGroup`.
    pub group: String,
    /// `controllerDLegerPeers`, parsed.
    pub peers: Vec<Peer>,
    /// This controller's id among them.
    pub self_id: u64,
    /// This controller's remoting address (what brokers connect to), set once it listens.
    pub remoting: Arc<OnceLock<String>>,
    /// `enableElectUncleanMaster`.
    pub enable_elect_unclean_master: bool,
}

/// Starts raft on a thread of its own: opens the redb file in `dir`, listens on this peer's
/// raft address, and initializes the cluster if it is new. Returns the bridge and the
/// channel of applied entries.
///
/// # Errors
/// The store, the listener, or the runtime cannot be set up.
pub fn start(
    settings: RaftSettings,
    dir: &Path,
) -> Result<(RaftBridge, futures::channel::mpsc::Receiver<Applied>), String> {
    let db = store::open(dir)?;
    let (started, wait) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("controller-raft".to_owned())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(error) => {
                    let _ = started.send(Err(format!("no runtime for raft: {error}")));
                    return;
                }
            };
            let handle = runtime.handle().clone();
            runtime.block_on(async move {
                match run(settings, db, handle).await {
                    Ok((bridge, applied, served)) => {
                        let _ = started.send(Ok((bridge, applied)));
                        served.await;
                    }
                    Err(error) => {
                        let _ = started.send(Err(error));
                    }
                }
            });
        })
        .map_err(|e| format!("cannot start the raft thread: {e}"))?;
    wait.recv()
        .map_err(|_| "the raft thread ended before starting".to_owned())?
}

type Started = (
    RaftBridge,
    futures::channel::mpsc::Receiver<Applied>,
    std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
);

async fn run(
    settings: RaftSettings,
    db: Arc<redb::Database>,
    runtime: tokio::runtime::Handle,
) -> Result<Started, String> {
    let own = settings
        .peers
        .get(usize::try_from(settings.self_id).unwrap_or(usize::MAX))
        .ok_or("controllerDLegerSelfId is not among controllerDLegerPeers")?
        .clone();
    let listener = tokio::net::TcpListener::bind(own.addr.as_str())
        .await
        .map_err(|e| format!("cannot listen for raft peers on {}: {e}", own.addr))?;
    let config = openraft::Config {
        cluster_name: settings.group.clone(),
        heartbeat_interval: 250,
        election_timeout_min: 750,
        election_timeout_max: 1500,
        snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(SNAPSHOT_EVERY_LOGS),
        max_in_snapshot_log_to_keep: LOGS_KEPT_AFTER_SNAPSHOT,
        ..openraft::Config::default()
    };
    let config = Arc::new(config.validate().map_err(|e| format!("raft config: {e}"))?);
    let (sender, applied) = futures::channel::mpsc::channel(APPLIED_QUEUED_MAX);
    let machine =
        store::StateMachine::open(db.clone(), sender, settings.enable_elect_unclean_master).await?;
    let network = network::NetworkFactory {
        self_id: settings.self_id,
        remoting: settings.remoting.clone(),
    };
    let raft = Raft::new(
        settings.self_id,
        config,
        network,
        store::LogStore::new(db),
        machine.clone(),
    )
    .await
    .map_err(|e| format!("raft did not start: {e}"))?;
    let view = Arc::new(RaftView {
        peers: settings.peers.clone(),
        self_id: settings.self_id,
        own_remoting: settings.remoting.clone(),
        state: ArcSwap::from_pointee(ViewState::default()),
    });
    let members: BTreeMap<u64, BasicNode> = (0_u64..)
        .zip(&settings.peers)
        .map(|(id, peer)| (id, BasicNode::new(&peer.addr)))
        .collect();
    match raft.initialize(members).await {
        Ok(()) => tracing::info!(group = %settings.group, "controller raft cluster initialized"),
        Err(error) => tracing::debug!(%error, "controller raft already initialized"),
    }
    tokio::spawn(watch_leader(raft.clone(), view.clone(), own.name.clone()));
    let served = Box::pin(network::serve(listener, raft.clone(), view.clone()));
    let bridge = RaftBridge {
        runtime,
        raft,
        machine,
        view,
    };
    Ok((bridge, applied, served))
}

/// Keeps [`RaftView`]'s leader current and logs each change. A leader that cannot reach a
/// quorum for a lease check (every [`LEASE_CHECK_INTERVAL`]) counts as no leader, as a
/// DLedger leader that misses its heartbeats' quorum steps down: its decisions could not
/// commit anyway.
async fn watch_leader(raft: Raft<TypeConfig>, view: Arc<RaftView>, own: String) {
    let mut metrics = raft.metrics();
    let mut last = None;
    let mut elected = None;
    // Whether the last lease check reached a quorum; a new election counts as one.
    let mut lease = true;
    let mut tick = tokio::time::interval(LEASE_CHECK_INTERVAL);
    loop {
        // By term too: a leader deposed and elected again between two looks at the metrics
        // is a new leadership, whose state must be caught up again.
        let current = {
            let metrics = metrics.borrow();
            (metrics.current_leader, metrics.current_term)
        };
        if Some(current) != elected {
            elected = Some(current);
            lease = true;
        }
        let leader = current.0.filter(|id| *id != view.self_id || lease);
        if Some((leader, current.1)) != last {
            view.set_leader(leader);
            last = Some((leader, current.1));
            let name = leader
                .and_then(|id| view.peers.get(usize::try_from(id).ok()?))
                .map_or("none", |peer| peer.name.as_str());
            let term = current.1;
            tracing::info!(controller = %own, leader = %name, term, "controller leader changed");
        }
        tokio::select! {
            changed = metrics.changed() => {
                if changed.is_err() {
                    return;
                }
            }
            _ = tick.tick() => {
                if current.0 == Some(view.self_id) {
                    let check = raft.ensure_linearizable();
                    let check = tokio::time::timeout(LEASE_CHECK_INTERVAL, check).await;
                    lease = matches!(check, Ok(Ok(_)));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
