//! The controller of RocketMQ 5.x controller mode (`ControllerManager` and `ControllerStartup`
//! in Java's `controller/`): brokers of a group report to it, it hands out broker ids, keeps
//! each group's master, master epoch and SyncStateSet, and elects a new master from the
//! SyncStateSet when the master stops heartbeating or its connection closes.
//!
//! Served codes (Java's numbers, headers, JSON bodies and CONTROLLER_* response codes):
//! CONTROLLER_ALTER_SYNC_STATE_SET 1001, CONTROLLER_ELECT_MASTER 1002,
//! CONTROLLER_REGISTER_BROKER 1003, CONTROLLER_GET_REPLICA_INFO 1004,
//! CONTROLLER_GET_METADATA_INFO 1005, CONTROLLER_GET_SYNC_STATE_DATA 1006,
//! UPDATE_CONTROLLER_CONFIG 1009, GET_CONTROLLER_CONFIG 1010, CLEAN_BROKER_DATA 1011,
//! CONTROLLER_GET_NEXT_BROKER_ID 1012, CONTROLLER_APPLY_BROKER_ID 1013 and BROKER_HEARTBEAT
//! 904. After an election it sends NOTIFY_BROKER_ROLE_CHANGED 1008 to the group's live
//! brokers (`notifyBrokerRoleChanged`); brokers also poll GET_REPLICA_INFO.
//!
//! One replica (no `controllerDLegerPeers`): the state machine ([`replicas_info`]) is fed
//! events in order on one shard. With `controllerStorePath` set, applied events are appended
//! to [`event_log`] and synced before any answer or notice that follows them leaves, and
//! replayed at start; without it the state is in memory only and a restarted controller
//! starts empty. GET_METADATA_INFO always says this controller leads.
//!
//! Replicated (`controllerDLegerPeers`, `controllerDLegerSelfId`, `controllerStorePath`, as
//! Java's DLedger controller): the events are raft log entries ([`raft`]: openraft, its log,
//! vote and snapshots in redb under `controllerStorePath`), and [`replicated`] decides on
//! the raft leader only, one decision at a time, answering once the entry is committed. A
//! follower answers decisions and their reads (register, apply or next broker id, replica
//! info, SyncStateSet data, elect, alter, clean) with CONTROLLER_NOT_LEADER (2007), as Java's
//! controller does; GET_METADATA_INFO names the leader (`n1`) and its remoting address, which
//! followers learn from the leader's raft requests. Broker liveness is not replicated: brokers
//! heartbeat every controller of `controllerAddr` (Java's `sendHeartbeatToController`), and
//! each keeps its own table (`DefaultBrokerHeartbeatManager`); only the leader elects when a
//! master is gone. A leader that cannot reach a quorum stops counting as leader, so with most
//! controllers down nobody decides and brokers keep their roles.
//!
//! Shards: one, with the net and control roles: the load is a heartbeat per broker a second.
//! Notices go out from a thread with a small tokio runtime (the remoting client is tokio's),
//! over a bounded channel; a full channel drops the notice, which brokers' polling covers.

pub mod body;
pub mod event_log;
pub mod heartbeat;
pub mod processor;
pub mod raft;
pub mod replicas_info;
pub mod replicated;
#[cfg(test)]
mod tests;

use crate::config::controller::ControllerConfig;
use crate::remoting::server::{self, ConnectionInfo, RequestHandler, ServerConfig};
use crate::remoting::RemotingCommand;
use ferromq_shards::{spawn_shards, Placement, RuntimeConfig, ShardsHandle, Shutdown};
use futures::future::{select, Either};
use processor::{Controller, Notice};
use std::cell::{Cell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Notices waiting for the sender thread at most.
const NOTICES_QUEUED_MAX: usize = 1024;
/// How long one notice may take to connect and send (Java's `invokeOneway` 3 s).
const NOTICE_TIMEOUT: Duration = Duration::from_secs(3);

/// Why the controller did not start.
#[derive(Debug, thiserror::Error)]
pub enum ControllerError {
    /// The shards did not start.
    #[error(transparent)]
    Shards(#[from] ferromq_shards::ShardError),
    /// Listening failed.
    #[error("{0}")]
    Listen(String),
    /// The notice thread did not start.
    #[error("cannot start the notice thread: {0}")]
    Thread(std::io::Error),
    /// The event log cannot be read or opened.
    #[error(transparent)]
    EventLog(#[from] event_log::EventLogError),
    /// Raft did not start (peers, store, listener).
    #[error("{0}")]
    Raft(String),
}

/// A running controller.
#[derive(Debug)]
pub struct ControllerHandle {
    /// The address it listens on (the real port when 0 was asked for).
    pub addr: SocketAddr,
    shards: ShardsHandle<()>,
}

impl ControllerHandle {
    /// Waits until the controller has stopped (after its shutdown signal).
    ///
    /// # Errors
    /// A shard that died.
    pub fn wait(self) -> Result<(), ControllerError> {
        // The notice thread is left to end with the process: a notice to a broker that
        // stopped answering must not hold up the shutdown.
        self.shards.join()?;
        Ok(())
    }
}

/// Starts the controller and returns once it listens.
///
/// # Errors
/// [`ControllerError`] when the shard or thread cannot start or the address cannot be bound.
pub fn start(
    config: ControllerConfig,
    shutdown: Shutdown,
) -> Result<ControllerHandle, ControllerError> {
    let placement: Placement = "1"
        .parse()
        .map_err(|e| ControllerError::Listen(format!("one shard: {e}")))?;
    let peers = raft::parse_peers(&config.peers).map_err(ControllerError::Raft)?;
    let own_remoting = Arc::new(OnceLock::new());
    let replication = if peers.is_empty() {
        None
    } else {
        Some(start_raft(&config, peers, own_remoting.clone())?)
    };
    let replication = Arc::new(std::sync::Mutex::new(replication));
    let (log, replayed) = if replication.lock().is_ok_and(|r| r.is_some()) {
        (None, Vec::new())
    } else if config.controller_store_path.is_empty() {
        tracing::warn!(
            "controllerStorePath is empty: the controller's state is kept in memory only"
        );
        (None, Vec::new())
    } else {
        let dir = std::path::PathBuf::from(&config.controller_store_path);
        let replayed = event_log::replay(&dir)?;
        tracing::info!(events = replayed.len(), dir = %dir.display(), "controller events replayed");
        (Some(event_log::EventLog::open(&dir)?), replayed)
    };
    let replayed = Arc::new(replayed);
    let (notices, receiver) = tokio::sync::mpsc::channel(NOTICES_QUEUED_MAX);
    std::thread::Builder::new()
        .name("controller-notify".to_owned())
        .spawn(move || run_notifier(receiver))
        .map_err(ControllerError::Thread)?;
    let bound: Arc<server::BoundAddr> = Arc::new(OnceLock::new());
    let shard_bound = bound.clone();
    let config = Arc::new(config);
    let shards = spawn_shards(
        placement,
        RuntimeConfig::default(),
        shutdown,
        move |ctx: ferromq_shards::ShardContext<()>| {
            let config = config.clone();
            let bound = shard_bound.clone();
            let notices = notices.clone();
            let log = log.clone();
            let replayed = replayed.clone();
            let replication = replication.lock().ok().and_then(|mut r| r.take());
            let own_remoting = own_remoting.clone();
            async move {
                let listener =
                    server::bind_shared(ctx.id, true, config.listen_addr(), &bound).await;
                let Some(listener) = listener else {
                    ctx.shutdown.trigger();
                    return;
                };
                let addr = match bound.get() {
                    Some(Ok(addr)) => *addr,
                    _ => config.listen_addr(),
                };
                let advertised = config.advertised_addr(addr);
                let mut config = (*config).clone();
                config.listen_port = addr.port();
                let _ = own_remoting.set(advertised.clone());
                let mut controller = Controller::new(config.clone(), advertised);
                controller.restore(&replayed);
                let (raft, applied) = replication
                    .map(|(bridge, applied)| {
                        controller.raft_view = Some(bridge.view.clone());
                        (Some(replicated::Replicated::new(bridge)), Some(applied))
                    })
                    .unwrap_or_default();
                let handler = Rc::new(Handler {
                    controller: RefCell::new(controller),
                    notices,
                    log,
                    poisoned: Cell::new(false),
                    raft,
                });
                let pump = applied.map(|applied| {
                    let handler = handler.clone();
                    let stop = ctx.shutdown.clone();
                    ctx.task_queues.spawn_background(async move {
                        if let Some(raft) = &handler.raft {
                            raft.pump(&handler.controller, applied, stop.wait()).await;
                        }
                    })
                });
                let scan = ctx.task_queues.spawn_background(run_housekeeping(
                    handler.clone(),
                    config
                        .scan_not_active_broker_interval
                        .min(config.scan_inactive_master_interval),
                    ctx.shutdown.clone(),
                ));
                server::serve(
                    ctx.id,
                    listener,
                    handler,
                    ServerConfig::default(),
                    ctx.shutdown.clone(),
                )
                .await;
                scan.await;
                if let Some(pump) = pump {
                    pump.await;
                }
            }
        },
    )?;
    match server::wait_bound(&bound) {
        Ok(addr) => {
            tracing::info!(%addr, "controller listening");
            Ok(ControllerHandle { addr, shards })
        }
        Err(error) => {
            shards.shutdown.trigger();
            let _ = shards.join();
            Err(ControllerError::Listen(error))
        }
    }
}

/// Serves requests on the controller's shard; owns the state (single-threaded, in a
/// `RefCell` never borrowed across an await).
struct Handler {
    controller: RefCell<Controller>,
    notices: tokio::sync::mpsc::Sender<Notice>,
    /// Where applied events are made durable; `None`: in memory only.
    log: Option<event_log::EventLog>,
    /// A log write failed: the state is ahead of the log, so nothing more is answered or
    /// sent (as a store that failed a write stops taking writes).
    poisoned: Cell<bool>,
    /// Raft, when the state is replicated (`controllerDLegerPeers` set).
    raft: Option<replicated::Replicated>,
}

impl Handler {
    /// Makes the events applied so far durable, this request's and any other's still being
    /// written (so nothing answered shows a state a crash could lose); false when that failed.
    async fn persist(&self) -> bool {
        let events = self.controller.borrow_mut().take_applied();
        let Some(log) = &self.log else {
            return !self.poisoned.get();
        };
        if let Err(error) = log.append(events).await {
            tracing::error!(%error, "controller stops answering: its event log failed");
            self.poisoned.set(true);
        }
        !self.poisoned.get()
    }

    /// Sends `notices` once what they follow from is durable.
    async fn send(&self, notices: Vec<Notice>) {
        if !self.persist().await {
            return;
        }
        for notice in notices {
            if self.notices.try_send(notice).is_err() {
                tracing::warn!("role-change notice dropped: the notice queue is full");
            }
        }
    }
}

impl Handler {
    /// A request to a replicated controller: decisions and their reads on the leader only
    /// (elsewhere CONTROLLER_NOT_LEADER, as Java's `EventScheduler` answers), heartbeats,
    /// metadata and configuration on every controller.
    async fn handle_replicated(
        &self,
        raft: &replicated::Replicated,
        connection: ConnectionInfo,
        request: &RemotingCommand,
    ) -> RemotingCommand {
        use crate::remoting::{RequestCode, ResponseCode};
        let local = matches!(
            request.request_code(),
            RequestCode::BROKER_HEARTBEAT
                | RequestCode::CONTROLLER_GET_METADATA_INFO
                | RequestCode::GET_CONTROLLER_CONFIG
                | RequestCode::UPDATE_CONTROLLER_CONFIG
        );
        if local {
            let mut controller = self.controller.borrow_mut();
            controller.leads = raft.is_leader();
            return controller.process(connection.id, request, now_ms()).0;
        }
        let decided = raft
            .decide(&self.controller, |controller| {
                controller.process(connection.id, request, now_ms())
            })
            .await;
        match decided {
            Ok((response, notices)) => {
                self.send(notices).await;
                response
            }
            Err(raft::RaftCallError::NotLeader) => RemotingCommand::response_to(
                request,
                ResponseCode::CONTROLLER_NOT_LEADER,
                Some(raft::RaftCallError::NotLeader.to_string()),
            ),
            Err(error) => RemotingCommand::response_to(
                request,
                ResponseCode::SYSTEM_ERROR,
                Some(error.to_string()),
            ),
        }
    }

    /// Runs `act` as a decision on the raft leader; on a follower (or the single replica)
    /// directly, where a follower only drops silent brokers and elects nobody.
    async fn decide_or_follow(
        &self,
        act: impl FnOnce(&mut Controller) -> ((), Vec<Notice>),
    ) -> Vec<Notice> {
        let Some(raft) = &self.raft else {
            return act(&mut self.controller.borrow_mut()).1;
        };
        if !raft.is_leader() {
            let mut controller = self.controller.borrow_mut();
            controller.leads = false;
            let notices = act(&mut controller).1;
            // A follower's state comes from the log only: deciding here would fork it.
            assert!(
                controller.take_applied().is_empty(),
                "a controller that does not lead decided events"
            );
            return notices;
        }
        match raft.decide(&self.controller, act).await {
            Ok(((), notices)) => notices,
            Err(error) => {
                tracing::info!(%error, "controller housekeeping decision dropped");
                Vec::new()
            }
        }
    }
}

/// Starts raft for `controllerDLegerPeers`, its store under `controllerStorePath`.
fn start_raft(
    config: &ControllerConfig,
    peers: Vec<raft::Peer>,
    own_remoting: Arc<OnceLock<String>>,
) -> Result<
    (
        raft::RaftBridge,
        futures::channel::mpsc::Receiver<raft::Applied>,
    ),
    ControllerError,
> {
    if config.controller_store_path.is_empty() {
        let remark = "controllerDLegerPeers needs controllerStorePath (the raft log's directory)";
        return Err(ControllerError::Raft(remark.to_owned()));
    }
    let self_id = (0_u64..)
        .zip(&peers)
        .find(|(_, peer)| peer.name == config.self_id)
        .map(|(id, _)| id)
        .ok_or_else(|| {
            let remark = format!(
                "controllerDLegerSelfId {} is not among controllerDLegerPeers",
                config.self_id
            );
            ControllerError::Raft(remark)
        })?;
    let settings = raft::RaftSettings {
        group: config.group.clone(),
        peers,
        self_id,
        remoting: own_remoting,
        enable_elect_unclean_master: config.enable_elect_unclean_master,
    };
    let dir = std::path::Path::new(&config.controller_store_path);
    raft::start(settings, dir).map_err(ControllerError::Raft)
}

impl RequestHandler for Handler {
    async fn handle(
        &self,
        connection: ConnectionInfo,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        if self.poisoned.get() {
            let remark = "the controller's event log failed; restart the controller".to_owned();
            let code = crate::remoting::ResponseCode::SYSTEM_ERROR;
            return Some(RemotingCommand::response_to(&request, code, Some(remark)));
        }
        if let Some(raft) = &self.raft {
            return Some(self.handle_replicated(raft, connection, &request).await);
        }
        let (response, notices) =
            self.controller
                .borrow_mut()
                .process(connection.id, &request, now_ms());
        self.send(notices).await;
        if self.poisoned.get() {
            let remark = "the controller's event log failed; restart the controller".to_owned();
            let code = crate::remoting::ResponseCode::SYSTEM_ERROR;
            return Some(RemotingCommand::response_to(&request, code, Some(remark)));
        }
        Some(response)
    }

    async fn connection_closed(&self, connection: ConnectionInfo) {
        let notices = self
            .decide_or_follow(|controller| {
                ((), controller.on_connection_closed(connection.id, now_ms()))
            })
            .await;
        self.send(notices).await;
    }
}

/// Drops silent brokers and re-elects for groups whose master is gone, every `interval`
/// (Java runs the two scans on `scanNotActiveBrokerInterval` and
/// `scanInactiveMasterInterval`, both 5 s by default; one loop does both here, at the
/// shorter of the two).
async fn run_housekeeping(handler: Rc<Handler>, interval: Duration, shutdown: Shutdown) {
    loop {
        let tick = glommio::timer::sleep(interval);
        if let Either::Right(_) = select(Box::pin(tick), shutdown.wait()).await {
            return;
        }
        let notices = handler
            .decide_or_follow(|controller| ((), controller.scan(now_ms())))
            .await;
        handler.send(notices).await;
    }
}

/// Sends notices, oneway, each on a connection kept per broker address.
fn run_notifier(mut receiver: tokio::sync::mpsc::Receiver<Notice>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "no runtime for role-change notices; none will be sent");
            return;
        }
    };
    runtime.block_on(async move {
        let mut clients = std::collections::HashMap::new();
        while let Some(notice) = receiver.recv().await {
            let sent = tokio::time::timeout(NOTICE_TIMEOUT, notify(&mut clients, &notice)).await;
            let broker = &notice.broker_addr;
            let error = match sent {
                Ok(Ok(())) => {
                    tracing::info!(%broker, "role change notified");
                    continue;
                }
                Ok(Err(error)) => error,
                Err(_) => "timed out".to_owned(),
            };
            clients.remove(broker);
            tracing::warn!(%broker, %error, "role-change notice failed");
        }
    });
}

async fn notify(
    clients: &mut std::collections::HashMap<String, crate::remoting::client::RemotingClient>,
    notice: &Notice,
) -> Result<(), String> {
    use crate::remoting::client::{connect_tokio, ClientConfig};
    if clients
        .get(&notice.broker_addr)
        .is_none_or(crate::remoting::client::RemotingClient::is_closed)
    {
        let addr: SocketAddr = notice
            .broker_addr
            .parse()
            .map_err(|e| format!("bad broker address: {e}"))?;
        let (client, _inbound) = connect_tokio(addr, ClientConfig::default())
            .await
            .map_err(|e| e.to_string())?;
        clients.insert(notice.broker_addr.clone(), client);
    }
    let client = clients
        .get(&notice.broker_addr)
        .ok_or("no connection to the broker")?;
    client
        .oneway(notice.request.clone())
        .await
        .map_err(|e| e.to_string())
}

/// Wall-clock milliseconds since the epoch (Java's `System.currentTimeMillis`).
fn now_ms() -> u64 {
    u64::try_from(crate::calendar::now_ms()).unwrap_or(0)
}
