//! Controller mode, the broker's side (Java 5.x `ReplicasManager`): with
//! `enableControllerMode=true` the broker takes its id and its role from the controllers of
//! `controllerAddr` instead of `brokerId` and `brokerRole`.
//!
//! At start, in Java's order:
//! 1. the controllers' leader is found with CONTROLLER_GET_METADATA_INFO (1005);
//! 2. the broker's id: the `brokerIdentity` file under `storePathRootDir` if it is there
//!    (`cluster#name#id`, Java's `BrokerMetadata`), else CONTROLLER_GET_NEXT_BROKER_ID (1012),
//!    the id written to `brokerIdentity-temp` with a check code, CONTROLLER_APPLY_BROKER_ID
//!    (1013), then `brokerIdentity` written and the temp file removed (a crash between the
//!    steps resumes where it stopped, as Java's `RegisterState`);
//! 3. CONTROLLER_REGISTER_BROKER (1003) tells the broker's address and answers the group's
//!    master; without one, the broker asks to be elected (CONTROLLER_ELECT_MASTER 1002).
//!
//! Then, until shutdown: BROKER_HEARTBEAT (904, one-way) to every controller each
//! `brokerHeartbeatInterval`, with the master epoch and the CommitLog's end;
//! CONTROLLER_GET_REPLICA_INFO (1004) each `syncBrokerMetadataPeriod` and at once after a
//! NOTIFY_BROKER_ROLE_CHANGED; the leader looked up again each
//! `syncControllerMetadataPeriod` and after a failed request.
//!
//! A master epoch above the one applied changes the role: named master, the broker takes
//! puts (SYNC_MASTER when `allAckInSyncStateSet`, else ASYNC_MASTER) once its link to the
//! old master is down, records the epoch and its CommitLog end in `epochFileCheckpoint`, and
//! registers with the name servers as id 0; named slave, it refuses puts, follows the new
//! master's HA port (`listenPort + 1` of the master's address) and registers under its
//! controller id. Until the first answer the broker is a slave without a master (Java's
//! fenced broker).

use super::register::Connections;
use crate::broker::state::{now_ms, BrokerState, LinkState};
use crate::config::broker::BrokerRole;
use crate::remoting::headers::{
    ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader, ElectMasterRequestHeader,
    GetMetadataResponseHeader, GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader, RegisterBrokerToControllerResponseHeader,
};
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use crate::store::shared::StoreShared;
use ferromq_shards::Shutdown;
use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Pause before the start-up steps are tried again (Java's `RETRY_INTERVAL_SECOND`, 5 s,
/// shortened: a broker without a role serves nothing).
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// How long a promotion waits for the link to the old master to stop.
const LINK_STOP_WAIT: Duration = Duration::from_secs(1);

/// Starts the controller-mode thread when `enableControllerMode` is on.
#[must_use]
pub fn spawn(
    state: Arc<BrokerState>,
    shared: Arc<StoreShared>,
    addr: SocketAddr,
    shutdown: Shutdown,
) -> Option<std::thread::JoinHandle<()>> {
    if !state.config.controller_mode.enable {
        return None;
    }
    let spawned = crate::serve::spawn_on_runtime("replicas", move || async move {
        let address = SocketAddr::new(state.config.broker_ip1, addr.port()).to_string();
        let mut manager = Manager::new(&state, &shared, address);
        manager.run(&shutdown).await;
    });
    match spawned {
        Ok(handle) => Some(handle),
        Err(error) => {
            tracing::error!(%error, "cannot start the controller-mode thread");
            None
        }
    }
}

/// What the broker knows of its group, as Java's `ReplicasManager` fields.
struct Manager<'a> {
    state: &'a BrokerState,
    shared: &'a StoreShared,
    /// `brokerIP1:listenPort`, as the controller and name servers know the broker.
    address: String,
    connections: Connections,
    leader: Option<String>,
    /// The id the controller gave (`brokerControllerId`).
    controller_id: Option<i64>,
    registered: bool,
    master_epoch: i32,
    master_id: Option<i64>,
    sync_state_set: BTreeSet<i64>,
    sync_state_set_epoch: i32,
}

impl<'a> Manager<'a> {
    fn new(state: &'a BrokerState, shared: &'a StoreShared, address: String) -> Manager<'a> {
        let timeout = state.config.controller_mode.send_heartbeat_timeout;
        Manager {
            state,
            shared,
            address,
            connections: Connections::new(state, timeout.max(Duration::from_secs(3))),
            leader: None,
            controller_id: None,
            registered: false,
            master_epoch: 0,
            master_id: None,
            sync_state_set: BTreeSet::new(),
            sync_state_set_epoch: 0,
        }
    }

    async fn run(&mut self, shutdown: &Shutdown) {
        let config = &self.state.config.controller_mode;
        if config.controller_addr.is_empty() {
            tracing::error!("enableControllerMode without controllerAddr: no role is given");
            return;
        }
        let start = Instant::now();
        let mut next_heartbeat = start;
        let mut next_sync = start;
        let mut next_leader_lookup = start + config.sync_controller_metadata_period;
        while !shutdown.is_triggered() {
            let now = Instant::now();
            if !self.registered {
                if let Err(problem) = self.start_up().await {
                    tracing::warn!(problem, "controller mode: start-up step failed, retrying");
                    self.leader = None;
                    pause(RETRY_PAUSE, shutdown).await;
                    continue;
                }
                next_sync = now + config.sync_broker_metadata_period;
            }
            if now >= next_heartbeat {
                self.heartbeat().await;
                next_heartbeat = now + config.broker_heartbeat_interval;
            }
            if now >= next_leader_lookup {
                if let Err(problem) = self.find_leader().await {
                    tracing::warn!(problem, "controller mode: no controller leader");
                }
                next_leader_lookup = now + config.sync_controller_metadata_period;
            }
            if now >= next_sync {
                if let Err(problem) = self.sync_replica_info().await {
                    tracing::warn!(problem, "controller mode: cannot read the group's replicas");
                    self.leader = None;
                }
                next_sync = now + config.sync_broker_metadata_period;
            }
            let wake = next_heartbeat.min(next_sync).min(next_leader_lookup);
            let poked = tokio::select! {
                () = tokio::time::sleep_until(wake.into()) => false,
                () = self.state.controller_poke.notified() => true,
                () = shutdown.wait() => false,
            };
            if poked {
                next_sync = Instant::now();
            }
        }
    }

    /// Steps 1 to 3 of the start (see the module's doc).
    async fn start_up(&mut self) -> Result<(), String> {
        let leader = self.leader().await?;
        let id = match self.controller_id {
            Some(id) => id,
            None => {
                let id = self.broker_identity(&leader).await?;
                self.controller_id = Some(id);
                id
            }
        };
        let header = RegisterBrokerToControllerRequestHeader {
            cluster_name: self.state.config.broker_cluster_name.clone(),
            broker_name: self.state.config.broker_name.clone(),
            broker_id: Some(id),
            broker_address: self.address.clone(),
            invoke_time: Some(now_ms()),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::CONTROLLER_REGISTER_BROKER, &header);
        let response = self.ask(&leader, request).await?;
        let answer: RegisterBrokerToControllerResponseHeader =
            response.decode_header().map_err(|e| e.to_string())?;
        let set = sync_state_set(&response.body);
        self.registered = true;
        tracing::info!(
            id,
            leader,
            "controller mode: registered with the controller"
        );
        self.heartbeat().await;
        let (master, address) = (answer.master_broker_id, answer.master_address);
        if !self
            .take_master(master, address, answer.master_epoch, set)
            .await
        {
            self.elect(&leader, id).await?;
        }
        Ok(())
    }

    /// The broker's id from `brokerIdentity`, or a new one from the controller.
    async fn broker_identity(&mut self, leader: &str) -> Result<i64, String> {
        let config = &self.state.config;
        let root = &config.store.store_path_root_dir;
        let (file, temp) = (identity_file(root), temp_identity_file(root));
        let ours = |identity: &Identity| {
            identity.cluster == config.broker_cluster_name && identity.name == config.broker_name
        };
        if let Some(identity) = Identity::read(&file)? {
            if !ours(&identity) {
                return Err(format!(
                    "{} names {}#{}, not this broker",
                    file.display(),
                    identity.cluster,
                    identity.name
                ));
            }
            return Ok(identity.id);
        }
        let pending = Identity::read(&temp)?.filter(|identity| ours(identity));
        let identity = match pending {
            Some(identity) => identity,
            None => {
                let header = GetNextBrokerIdRequestHeader {
                    cluster_name: config.broker_cluster_name.clone(),
                    broker_name: config.broker_name.clone(),
                };
                let request = RemotingCommand::request_with_header(
                    RequestCode::CONTROLLER_GET_NEXT_BROKER_ID,
                    &header,
                );
                let response = self.ask(leader, request).await?;
                let answer: GetNextBrokerIdResponseHeader =
                    response.decode_header().map_err(|e| e.to_string())?;
                let id = answer
                    .next_broker_id
                    .ok_or("CONTROLLER_GET_NEXT_BROKER_ID answered no id")?;
                let identity = Identity {
                    cluster: config.broker_cluster_name.clone(),
                    name: config.broker_name.clone(),
                    id,
                    check_code: Some(format!("{};{}", self.address, now_ms())),
                };
                identity.write(&temp)?;
                identity
            }
        };
        let header = ApplyBrokerIdRequestHeader {
            cluster_name: identity.cluster.clone(),
            broker_name: identity.name.clone(),
            applied_broker_id: identity.id,
            register_check_code: identity.check_code.clone().unwrap_or_default(),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::CONTROLLER_APPLY_BROKER_ID, &header);
        if let Err(refused) = self.ask(leader, request).await {
            // Taken by another broker meanwhile: start over with a new id.
            let _ = std::fs::remove_file(&temp);
            return Err(format!("id {} not applied: {refused}", identity.id));
        }
        let identity = Identity {
            check_code: None,
            ..identity
        };
        identity.write(&file)?;
        let _ = std::fs::remove_file(&temp);
        tracing::info!(id = identity.id, "controller mode: broker id applied");
        Ok(identity.id)
    }

    /// Asks the controller to elect a master for the group (this broker if it may be).
    async fn elect(&mut self, leader: &str, id: i64) -> Result<(), String> {
        let request = self.elect_request(id);
        match self.ask(leader, request).await {
            Ok(_) => self.sync_replica_info().await,
            // No master can be elected now (no live broker in the SyncStateSet): the
            // periodic GET_REPLICA_INFO finds the one elected later.
            Err(refused) => {
                tracing::info!(refused, "controller mode: no master elected yet");
                Ok(())
            }
        }
    }

    /// CONTROLLER_GET_REPLICA_INFO: the group's master and SyncStateSet, applied.
    async fn sync_replica_info(&mut self) -> Result<(), String> {
        let leader = self.leader().await?;
        let header = GetReplicaInfoRequestHeader {
            broker_name: self.state.config.broker_name.clone(),
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::CONTROLLER_GET_REPLICA_INFO, &header);
        let response = self.ask(&leader, request).await?;
        let answer: GetReplicaInfoResponseHeader =
            response.decode_header().map_err(|e| e.to_string())?;
        let set = sync_state_set(&response.body);
        let epoch = answer.master_epoch;
        let (master, address) = (answer.master_broker_id, answer.master_address);
        let named = self.take_master(master, address, epoch, set).await;
        if !named && epoch.unwrap_or(0) >= self.master_epoch {
            // The group has no master now: ask for one (Java's `brokerElect`).
            if let Some(id) = self.controller_id {
                let request = self.elect_request(id);
                if let Err(refused) = self.ask(&leader, request).await {
                    tracing::debug!(refused, "controller mode: no master elected yet");
                }
            }
        }
        Ok(())
    }

    /// CONTROLLER_ELECT_MASTER for the group, this broker (`id`) as candidate.
    fn elect_request(&self, id: i64) -> RemotingCommand {
        let header = ElectMasterRequestHeader {
            cluster_name: Some(self.state.config.broker_cluster_name.clone()),
            broker_name: self.state.config.broker_name.clone(),
            broker_id: Some(id),
            designate_elect: Some(false),
            invoke_time: Some(now_ms()),
        };
        RemotingCommand::request_with_header(RequestCode::CONTROLLER_ELECT_MASTER, &header)
    }

    /// Applies the master an answer named, if it named one: false when the group has none.
    async fn take_master(
        &mut self,
        master: Option<i64>,
        address: Option<String>,
        epoch: Option<i32>,
        set: Option<(BTreeSet<i64>, i32)>,
    ) -> bool {
        match (master, address) {
            (Some(master), Some(address)) if !address.is_empty() => {
                self.apply(master, &address, epoch.unwrap_or(0), set).await;
                true
            }
            _ => false,
        }
    }

    /// Takes the controller's word on the group: a higher master epoch changes the role;
    /// the same epoch may bring a new SyncStateSet.
    async fn apply(
        &mut self,
        master: i64,
        address: &str,
        epoch: i32,
        set: Option<(BTreeSet<i64>, i32)>,
    ) {
        if let Some((members, set_epoch)) = set {
            if set_epoch > self.sync_state_set_epoch {
                self.sync_state_set = members;
                self.sync_state_set_epoch = set_epoch;
            }
        }
        if epoch <= self.master_epoch {
            return;
        }
        let Some(id) = self.controller_id else {
            return;
        };
        self.master_epoch = epoch;
        self.master_id = Some(master);
        let mode = &self.state.config.controller_mode;
        if master == id {
            let role = match mode.all_ack_in_sync_state_set || mode.min_in_sync_replicas > 1 {
                true => BrokerRole::SyncMaster,
                false => BrokerRole::AsyncMaster,
            };
            // The epoch first: it ends the link to the old master (`follow_elected_master`,
            // which has no master to follow again); puts are taken once it is down, the new
            // epoch starts where the log ends then (Java's changeToMaster takes the max offset
            // once its HA client stopped), and only then is the broker master and announced.
            self.state.master.learned(None, None);
            self.state.role.set_epoch(epoch);
            let deadline = Instant::now() + LINK_STOP_WAIT;
            while matches!(self.state.master.link(), LinkState::Up(_)) && Instant::now() < deadline
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let end = i64::try_from(self.shared.committed_end()).unwrap_or(i64::MAX);
            let root = &self.state.config.store.store_path_root_dir;
            crate::store::epoch_file::record_master_epoch(root, epoch, end);
            self.shared.set_slave(false);
            self.state
                .role
                .set(role, 0, epoch, Some(self.address.clone()));
            tracing::info!(
                epoch,
                sync_state_set = ?self.sync_state_set,
                "controller mode: this broker is the master"
            );
        } else {
            self.shared.set_slave(true);
            let ha = ha_address(address);
            self.state.master.learned(Some(address.to_owned()), ha);
            self.state
                .role
                .set(BrokerRole::Slave, id, epoch, Some(address.to_owned()));
            tracing::info!(
                epoch,
                master,
                address,
                "controller mode: this broker is a slave"
            );
        }
        self.state.role.announce();
        self.state.registration_wanted.notify_one();
    }

    /// BROKER_HEARTBEAT to every controller, one-way.
    async fn heartbeat(&mut self) {
        let Some(id) = self.controller_id else {
            return;
        };
        let config = &self.state.config;
        let end = i64::try_from(self.shared.committed_end()).unwrap_or(i64::MAX);
        let header = BrokerHeartbeatRequestHeader {
            cluster_name: config.broker_cluster_name.clone(),
            broker_addr: self.address.clone(),
            broker_name: config.broker_name.clone(),
            broker_id: Some(id),
            epoch: Some(self.master_epoch),
            max_offset: Some(end),
            confirm_offset: Some(end),
            heartbeat_timeout_mills: i64::try_from(
                config
                    .controller_mode
                    .controller_heartbeat_timeout
                    .as_millis(),
            )
            .ok(),
            election_priority: Some(config.controller_mode.broker_election_priority),
        };
        for controller in &config.controller_mode.controller_addr {
            let request =
                RemotingCommand::request_with_header(RequestCode::BROKER_HEARTBEAT, &header);
            if let Err(error) = self.connections.oneway(controller, request).await {
                tracing::debug!(controller, %error, "controller mode: heartbeat not sent");
            }
        }
    }

    /// The leader's address, looked up when not known.
    async fn leader(&mut self) -> Result<String, String> {
        match &self.leader {
            Some(leader) => Ok(leader.clone()),
            None => self.find_leader().await,
        }
    }

    /// CONTROLLER_GET_METADATA_INFO to each controller until one names the leader.
    async fn find_leader(&mut self) -> Result<String, String> {
        let mut problems = Vec::new();
        for controller in self.state.config.controller_mode.controller_addr.clone() {
            let request = RemotingCommand::request(RequestCode::CONTROLLER_GET_METADATA_INFO);
            let answer = self
                .connections
                .request(&controller, request)
                .await
                .and_then(|response| match response.code == ResponseCode::SUCCESS.0 {
                    true => response
                        .decode_header::<GetMetadataResponseHeader>()
                        .map_err(|e| e.to_string()),
                    false => Err(format!("code {}", response.code)),
                });
            match answer {
                Ok(metadata) if metadata.is_leader => {
                    self.leader = Some(controller.clone());
                    return Ok(controller);
                }
                Ok(metadata) => {
                    if let Some(leader) =
                        metadata.controller_leader_address.filter(|a| !a.is_empty())
                    {
                        self.leader = Some(leader.clone());
                        return Ok(leader);
                    }
                    problems.push(format!("{controller}: no leader known"));
                }
                Err(problem) => problems.push(format!("{controller}: {problem}")),
            }
        }
        Err(problems.join("; "))
    }

    /// A request to a controller; anything but SUCCESS is an error with its code and remark.
    async fn ask(
        &mut self,
        controller: &str,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, String> {
        let response = self.connections.request(controller, request).await;
        match response {
            Ok(response) if response.code == ResponseCode::SUCCESS.0 => Ok(response),
            Ok(response) => {
                if response.code == ResponseCode::CONTROLLER_NOT_LEADER.0 {
                    // The leader moved: look it up again before the next request.
                    self.leader = None;
                }
                Err(format!(
                    "code {} {}",
                    response.code,
                    response.remark.unwrap_or_default()
                ))
            }
            Err(error) => {
                self.leader = None;
                Err(error)
            }
        }
    }
}

/// The SyncStateSet of a response body, if it has one.
fn sync_state_set(body: &[u8]) -> Option<(BTreeSet<i64>, i32)> {
    if body.is_empty() {
        return None;
    }
    crate::controller::body::read_sync_state_set(body).ok()
}

/// The HA address of a master at `address` (`host:port`): its `listenPort + 1`, where Java's
/// brokers and ferromq serve slaves by default.
fn ha_address(address: &str) -> Option<String> {
    let (host, port) = address.rsplit_once(':')?;
    let port: u16 = port.parse().ok()?;
    Some(format!("{host}:{}", port.checked_add(1)?))
}

/// `brokerIdentity` under the store root (Java's `storePathBrokerIdentity`).
fn identity_file(root: &Path) -> PathBuf {
    root.join("brokerIdentity")
}

/// Java's `TempBrokerMetadata`: the id asked for, before the controller confirmed it.
fn temp_identity_file(root: &Path) -> PathBuf {
    root.join("brokerIdentity-temp")
}

/// The contents of `brokerIdentity` (`cluster#name#id`) or its temp file (`#checkCode`).
#[derive(Debug, PartialEq, Eq)]
struct Identity {
    cluster: String,
    name: String,
    id: i64,
    check_code: Option<String>,
}

impl Identity {
    fn read(path: &Path) -> Result<Option<Identity>, String> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(error) => return Err(format!("{}: {error}", path.display())),
        };
        Identity::parse(text.trim())
            .map(Some)
            .ok_or_else(|| format!("{}: not cluster#name#id: {text:?}", path.display()))
    }

    fn parse(text: &str) -> Option<Identity> {
        let mut parts = text.split('#');
        let cluster = parts.next()?.to_owned();
        let name = parts.next()?.to_owned();
        let id = parts.next()?.parse().ok()?;
        let check_code = parts.next().map(str::to_owned);
        (!cluster.is_empty() && !name.is_empty()).then_some(Identity {
            cluster,
            name,
            id,
            check_code,
        })
    }

    fn write(&self, path: &Path) -> Result<(), String> {
        let mut text = format!("{}#{}#{}", self.cluster, self.name, self.id);
        if let Some(code) = &self.check_code {
            text.push('#');
            text.push_str(code);
        }
        let version = crate::config::persist::next_snapshot_version();
        crate::config::persist::write_snapshot(path, version, text.as_bytes())
            .map(|_| ())
            .map_err(|error| format!("{}: {error}", path.display()))
    }
}

async fn pause(time: Duration, shutdown: &Shutdown) {
    tokio::select! {
        () = tokio::time::sleep(time) => {}
        () = shutdown.wait() => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_files_read_as_java_writes_them() {
        let identity = Identity::parse("DefaultCluster#broker-a#2").expect("parses");
        assert_eq!(identity.id, 2);
        assert_eq!(identity.check_code, None);
        let temp = Identity::parse("c#b#3#127.0.0.1:10911;1733450000000").expect("parses");
        assert_eq!(
            temp.check_code.as_deref(),
            Some("127.0.0.1:10911;1733450000000")
        );
        assert_eq!(Identity::parse("c#b"), None);
        assert_eq!(Identity::parse("c#b#x"), None);
        assert_eq!(
            ha_address("10.0.0.2:10911").as_deref(),
            Some("10.0.0.2:10912")
        );
        assert_eq!(ha_address("no-port"), None);
    }
}
