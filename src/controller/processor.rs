//! The controller's request processing (`ControllerRequestProcessor` and the election half
//! of `ControllerManager` in Java): one request in, one response and any role-change notices
//! out. Owns the state machine and the live-broker table; no I/O here, the caller sends the
//! notices.
//!
//! Every decided event is applied before the response is built ([`Controller::commit`]), so
//! a broker never hears of a state the controller does not hold. The caller makes the events
//! durable before the response leaves: the single replica's event log, or raft
//! (`super::replicated`), which also tells this processor whether it leads
//! ([`Controller::leads`]).

use super::body;
use super::heartbeat::{BrokerHeartbeatManager, BrokerIdentity, Heartbeat};
use super::replicas_info::{
    AlterRequest, ApplyRequest, CleanRequest, Decision, ElectRequest, Event, RegisterRequest,
    ReplicasInfoManager,
};
use crate::config::controller::ControllerConfig;
use crate::remoting::headers::{
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, ApplyBrokerIdResponseHeader,
    BrokerHeartbeatRequestHeader, CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader,
    ElectMasterResponseHeader, GetMetadataResponseHeader, GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader,
    NotifyBrokerRoleChangedRequestHeader, RegisterBrokerToControllerRequestHeader,
};
use crate::remoting::server::ConnectionId;
use crate::remoting::{CommandHeader, HeaderError, RemotingCommand, RequestCode, ResponseCode};

/// A NOTIFY_BROKER_ROLE_CHANGED (1008) to send, oneway, to a broker's address.
#[derive(Clone, Debug)]
pub struct Notice {
    /// The broker's remoting address (`host:port`).
    pub broker_addr: String,
    /// The request.
    pub request: RemotingCommand,
}

/// The controller's state and its request processing.
#[derive(Debug)]
pub struct Controller {
    /// The replicated state.
    pub replicas: ReplicasInfoManager,
    /// Who is alive.
    pub heartbeats: BrokerHeartbeatManager,
    /// Settings, as GET_CONTROLLER_CONFIG shows them.
    pub config: ControllerConfig,
    /// The address brokers reach this controller at (the leader's, in GET_METADATA_INFO).
    pub advertised_addr: String,
    /// Events applied so far (the single replica's event count).
    pub applied_count: u64,
    /// Whether this controller decides: always with one replica; with raft, only the leader
    /// elects for groups whose master is gone (Java's `isLeaderState` checks).
    pub leads: bool,
    /// The raft cluster, when replicated: who leads, for GET_METADATA_INFO.
    pub raft_view: Option<std::sync::Arc<super::raft::RaftView>>,
    /// Events applied since the last [`Controller::take_applied`], to be made durable before
    /// anything that follows from them leaves.
    applied: Vec<Event>,
}

type Answer = Result<RemotingCommand, (ResponseCode, String)>;

impl Controller {
    /// A controller with empty state.
    #[must_use]
    pub fn new(config: ControllerConfig, advertised_addr: String) -> Controller {
        Controller {
            replicas: ReplicasInfoManager::new(config.enable_elect_unclean_master),
            heartbeats: BrokerHeartbeatManager::default(),
            config,
            advertised_addr,
            applied_count: 0,
            leads: true,
            raft_view: None,
            applied: Vec::new(),
        }
    }

    /// Replaces the state with `state` (a raft snapshot or resynchronisation), keeping this
    /// controller's `enableElectUncleanMaster`.
    pub fn reset(&mut self, mut state: ReplicasInfoManager) {
        state.enable_elect_unclean_master = self.replicas.enable_elect_unclean_master;
        self.replicas = state;
        self.applied.clear();
    }

    /// Applies decided events in order: the one place the state changes.
    pub fn commit(&mut self, events: &[Event]) {
        self.restore(events);
        self.applied.extend_from_slice(events);
    }

    /// Applies events replayed from the log (already durable).
    pub fn restore(&mut self, events: &[Event]) {
        for event in events {
            tracing::debug!(index = self.applied_count, ?event, "apply");
            self.replicas.apply(event);
            self.applied_count += 1;
        }
    }

    /// The events applied since the last call, in order.
    pub fn take_applied(&mut self) -> Vec<Event> {
        std::mem::take(&mut self.applied)
    }

    /// Processes one request that came on `connection` at `now_ms`.
    pub fn process(
        &mut self,
        connection: ConnectionId,
        request: &RemotingCommand,
        now_ms: u64,
    ) -> (RemotingCommand, Vec<Notice>) {
        let mut notices = Vec::new();
        let answer = match request.request_code() {
            RequestCode::BROKER_HEARTBEAT => self.heartbeat(request, connection, now_ms),
            RequestCode::CONTROLLER_GET_METADATA_INFO => Ok(self.metadata(request)),
            RequestCode::CONTROLLER_GET_NEXT_BROKER_ID => self.next_broker_id(request),
            RequestCode::CONTROLLER_APPLY_BROKER_ID => self.apply_broker_id(request),
            RequestCode::CONTROLLER_REGISTER_BROKER => self.register(request, now_ms),
            RequestCode::CONTROLLER_GET_REPLICA_INFO => {
                decode(request).map(|header: GetReplicaInfoRequestHeader| {
                    respond(request, self.replicas.replica_info(&header.broker_name))
                })
            }
            RequestCode::CONTROLLER_ELECT_MASTER => {
                decode(request).map(|header: ElectMasterRequestHeader| {
                    let elect = ElectRequest {
                        broker_name: header.broker_name,
                        broker_id: header.broker_id,
                        designate_elect: header.designate_elect.unwrap_or(false),
                    };
                    let (response, notice) = self.elect(request, &elect, now_ms);
                    notices.extend(notice);
                    response
                })
            }
            RequestCode::CONTROLLER_ALTER_SYNC_STATE_SET => self.alter(request, now_ms),
            RequestCode::CONTROLLER_GET_SYNC_STATE_DATA => self.sync_state_data(request, now_ms),
            RequestCode::CLEAN_BROKER_DATA => self.clean(request, now_ms),
            RequestCode::GET_CONTROLLER_CONFIG => {
                let mut response = RemotingCommand::success_to(request);
                response.body = self.config.to_properties().into_bytes();
                Ok(response)
            }
            RequestCode::UPDATE_CONTROLLER_CONFIG => self.update_config(request),
            code => Err((
                ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {} not supported", code.0),
            )),
        };
        let response = answer.unwrap_or_else(|(code, remark)| {
            tracing::debug!(code = code.0, %remark, "controller request refused");
            RemotingCommand::response_to(request, code, Some(remark))
        });
        (response, notices)
    }

    /// Elects for the group and commits; on success, the notices to its live brokers.
    fn elect(
        &mut self,
        request: &RemotingCommand,
        elect: &ElectRequest,
        now_ms: u64,
    ) -> (RemotingCommand, Vec<Notice>) {
        let decision = self
            .replicas
            .elect_master(elect, &self.heartbeats.at(now_ms));
        self.commit(&decision.events);
        let notices = if decision.code == ResponseCode::SUCCESS {
            self.role_change_notices(&elect.broker_name, &decision.header, now_ms)
        } else {
            Vec::new()
        };
        (respond(request, decision), notices)
    }

    /// The controller's own election for a group whose master is gone
    /// (`triggerElectMaster`); the notices to send when one was elected.
    pub fn trigger_elect(&mut self, broker_name: &str, now_ms: u64) -> Vec<Notice> {
        let request = RemotingCommand::request(RequestCode::CONTROLLER_ELECT_MASTER);
        let elect = ElectRequest {
            broker_name: broker_name.to_owned(),
            broker_id: None,
            designate_elect: false,
        };
        let (response, notices) = self.elect(&request, &elect, now_ms);
        tracing::info!(
            broker = %broker_name,
            code = response.code,
            remark = response.remark.as_deref().unwrap_or(""),
            "controller-triggered election"
        );
        notices
    }

    /// A broker went away (silent past its timeout, or its connection closed): if it was its
    /// group's master, elect another (`onBrokerInactive`).
    pub fn on_broker_inactive(&mut self, gone: &BrokerIdentity, now_ms: u64) -> Vec<Notice> {
        let master = self
            .replicas
            .group(&gone.broker_name)
            .and_then(|(_, state)| state.master_broker_id);
        tracing::info!(
            broker = %gone.broker_name,
            broker_id = gone.broker_id,
            was_master = master == Some(gone.broker_id),
            "broker inactive"
        );
        if master == Some(gone.broker_id) && self.leads {
            self.trigger_elect(&gone.broker_name, now_ms)
        } else {
            Vec::new()
        }
    }

    /// Drops silent brokers and re-elects where a master is gone; the notices to send.
    pub fn scan(&mut self, now_ms: u64) -> Vec<Notice> {
        let mut notices = Vec::new();
        for gone in self.heartbeats.scan_not_active(now_ms) {
            notices.extend(self.on_broker_inactive(&gone, now_ms));
        }
        if !self.leads {
            return notices;
        }
        let live = self.heartbeats.at(now_ms);
        for name in self.replicas.scan_need_reelect_broker_sets(&live) {
            notices.extend(self.trigger_elect(&name, now_ms));
        }
        notices
    }

    /// A connection closed: its brokers are inactive at once, as Java's housekeeping makes
    /// them (`onBrokerChannelClose`).
    pub fn on_connection_closed(&mut self, connection: ConnectionId, now_ms: u64) -> Vec<Notice> {
        let mut notices = Vec::new();
        for gone in self.heartbeats.on_connection_closed(connection) {
            notices.extend(self.on_broker_inactive(&gone, now_ms));
        }
        notices
    }

    fn role_change_notices(
        &self,
        broker_name: &str,
        elected: &ElectMasterResponseHeader,
        now_ms: u64,
    ) -> Vec<Notice> {
        if !self.config.notify_broker_role_changed || elected.master_broker_id.is_none() {
            return Vec::new();
        }
        let Some((replica, state)) = self.replicas.group(broker_name) else {
            return Vec::new();
        };
        let live = self.heartbeats.at(now_ms);
        let header = NotifyBrokerRoleChangedRequestHeader {
            master_address: elected.master_address.clone(),
            master_epoch: elected.master_epoch,
            sync_state_set_epoch: elected.sync_state_set_epoch,
            master_broker_id: elected.master_broker_id,
        };
        let epoch = elected.sync_state_set_epoch.unwrap_or_default();
        let body = body::sync_state_set(&state.sync_state_set, epoch);
        replica
            .brokers
            .iter()
            .filter(|(&id, _)| {
                use super::heartbeat::Liveness;
                live.is_alive(&replica.cluster_name, broker_name, id)
            })
            .map(|(_, (address, _))| {
                let mut request = RemotingCommand::request_with_header(
                    RequestCode::NOTIFY_BROKER_ROLE_CHANGED,
                    &header,
                );
                request.body.clone_from(&body);
                Notice {
                    broker_addr: address.clone(),
                    request,
                }
            })
            .collect()
    }

    fn heartbeat(
        &mut self,
        request: &RemotingCommand,
        connection: ConnectionId,
        now_ms: u64,
    ) -> Answer {
        let header: BrokerHeartbeatRequestHeader = decode(request)?;
        let Some(broker_id) = header.broker_id else {
            let code = ResponseCode::CONTROLLER_INVALID_REQUEST;
            return Err((code, "Heart beat with empty brokerId".to_owned()));
        };
        let beat = Heartbeat {
            identity: BrokerIdentity {
                cluster_name: header.cluster_name,
                broker_name: header.broker_name,
                broker_id,
            },
            broker_addr: header.broker_addr,
            timeout_ms: header
                .heartbeat_timeout_mills
                .and_then(|ms| u64::try_from(ms).ok()),
            epoch: header.epoch,
            max_offset: header.max_offset,
            confirm_offset: header.confirm_offset,
            election_priority: header.election_priority,
        };
        self.heartbeats.on_heartbeat(beat, connection, now_ms);
        let remark = Some("Heart beat success".to_owned());
        Ok(RemotingCommand::response_to(
            request,
            ResponseCode::SUCCESS,
            remark,
        ))
    }

    fn metadata(&self, request: &RemotingCommand) -> RemotingCommand {
        let mut response = RemotingCommand::success_to(request);
        let peers = if self.config.peers.is_empty() {
            format!("{}:{};", self.config.self_id, self.advertised_addr)
        } else {
            self.config
                .peers
                .split(';')
                .filter_map(|peer| peer.trim().split_once('-'))
                .map(|(id, addr)| format!("{id}:{addr};"))
                .collect()
        };
        let (leader_id, leader_address, is_leader) = match &self.raft_view {
            None => (
                Some(self.config.self_id.clone()),
                Some(self.advertised_addr.clone()),
                true,
            ),
            Some(view) => {
                let (id, address) = view.leader().unzip();
                (id, address.flatten(), view.is_leader())
            }
        };
        response.set_header(&GetMetadataResponseHeader {
            group: Some(self.config.group.clone()),
            controller_leader_id: leader_id,
            controller_leader_address: leader_address,
            is_leader,
            peers: Some(peers),
        });
        response
    }

    fn next_broker_id(&self, request: &RemotingCommand) -> Answer {
        let header: GetNextBrokerIdRequestHeader = decode(request)?;
        let mut response = RemotingCommand::success_to(request);
        response.set_header(&GetNextBrokerIdResponseHeader {
            next_broker_id: Some(self.replicas.next_broker_id(&header.broker_name)),
            cluster_name: Some(header.cluster_name),
            broker_name: Some(header.broker_name),
        });
        Ok(response)
    }

    fn apply_broker_id(&mut self, request: &RemotingCommand) -> Answer {
        let header: ApplyBrokerIdRequestHeader = decode(request)?;
        let decision = self.replicas.apply_broker_id(&ApplyRequest {
            cluster_name: header.cluster_name.clone(),
            broker_name: header.broker_name.clone(),
            broker_id: header.applied_broker_id,
            register_check_code: header.register_check_code,
        });
        self.commit(&decision.events);
        let mut response = respond_plain(request, decision);
        response.set_header(&ApplyBrokerIdResponseHeader {
            cluster_name: Some(header.cluster_name),
            broker_name: Some(header.broker_name),
        });
        Ok(response)
    }

    fn register(&mut self, request: &RemotingCommand, now_ms: u64) -> Answer {
        let header: RegisterBrokerToControllerRequestHeader = decode(request)?;
        let register = RegisterRequest {
            cluster_name: header.cluster_name,
            broker_name: header.broker_name,
            broker_id: header.broker_id,
            broker_address: header.broker_address,
        };
        let decision = self
            .replicas
            .register_broker(&register, &self.heartbeats.at(now_ms));
        self.commit(&decision.events);
        Ok(respond(request, decision))
    }

    fn alter(&mut self, request: &RemotingCommand, now_ms: u64) -> Answer {
        let header: AlterSyncStateSetRequestHeader = decode(request)?;
        let (set, epoch) = body::read_sync_state_set(&request.body)
            .map_err(|remark| (ResponseCode::CONTROLLER_INVALID_REQUEST, remark))?;
        let alter = AlterRequest {
            broker_name: header.broker_name,
            master_broker_id: header.master_broker_id,
            master_epoch: header.master_epoch,
            new_sync_state_set: set,
            sync_state_set_epoch: epoch,
        };
        let decision = self
            .replicas
            .alter_sync_state_set(&alter, &self.heartbeats.at(now_ms));
        self.commit(&decision.events);
        Ok(respond(request, decision))
    }

    fn sync_state_data(&self, request: &RemotingCommand, now_ms: u64) -> Answer {
        // Java answers an empty or missing list with SUCCESS and no body.
        let names = if request.body.is_empty() {
            Vec::new()
        } else {
            body::read_broker_names(&request.body)
                .map_err(|remark| (ResponseCode::CONTROLLER_INVALID_REQUEST, remark))?
        };
        let mut response = RemotingCommand::success_to(request);
        if !names.is_empty() {
            let live = self.heartbeats.at(now_ms);
            response.body = self.replicas.sync_state_data(&names, &live);
        }
        Ok(response)
    }

    fn clean(&mut self, request: &RemotingCommand, now_ms: u64) -> Answer {
        let header: CleanControllerBrokerDataRequestHeader = decode(request)?;
        let clean = CleanRequest {
            cluster_name: header.cluster_name,
            broker_name: header.broker_name,
            ids_to_clean: header.broker_controller_ids_to_clean,
            clean_living_broker: header.is_clean_living_broker.unwrap_or(false),
        };
        let decision = self
            .replicas
            .clean_broker_data(&clean, &self.heartbeats.at(now_ms));
        self.commit(&decision.events);
        Ok(respond_plain(request, decision))
    }

    fn update_config(&mut self, request: &RemotingCommand) -> Answer {
        let text = String::from_utf8_lossy(&request.body);
        let properties = crate::config::properties::parse(&text);
        if properties
            .iter()
            .any(|p| self.config.is_black_listed(&p.key))
        {
            let remark = "Can not update config in black list.".to_owned();
            return Err((ResponseCode::NO_PERMISSION, remark));
        }
        let mut config = self.config.clone();
        config
            .apply("UPDATE_CONTROLLER_CONFIG", &properties)
            .map_err(|error| (ResponseCode::SYSTEM_ERROR, error.to_string()))?;
        self.replicas.enable_elect_unclean_master = config.enable_elect_unclean_master;
        self.config = config;
        Ok(RemotingCommand::success_to(request))
    }
}

/// The response for a decision: its code, remark, header and body.
fn respond<H: CommandHeader>(request: &RemotingCommand, decision: Decision<H>) -> RemotingCommand {
    let mut response = RemotingCommand::response_to(request, decision.code, decision.remark);
    response.set_header(&decision.header);
    if let Some(body) = decision.body {
        response.body = body;
    }
    response
}

/// The response for a decision without a header (Java's `ControllerResult<Void>`).
fn respond_plain(request: &RemotingCommand, decision: Decision<()>) -> RemotingCommand {
    let mut response = RemotingCommand::response_to(request, decision.code, decision.remark);
    response.body = decision.body.unwrap_or_default();
    response
}

fn decode<H: CommandHeader>(request: &RemotingCommand) -> Result<H, (ResponseCode, String)> {
    request
        .decode_header()
        .map_err(|error: HeaderError| (ResponseCode::SYSTEM_ERROR, error.to_string()))
}
