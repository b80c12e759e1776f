//! The controller's state machine (`ReplicasInfoManager` in Java's
//! `controller/impl/manager/`): per broker group, its replicas (`BrokerReplicaInfo`: id →
//! address and register check code, the next id to hand out) and its SyncStateSet
//! (`SyncStateInfo`: master, master epoch, in-sync ids, their epoch).
//!
//! Two halves, as in Java. A request is *decided* against the current state and the live
//! brokers ([`Decision`]: the response and the [`Event`]s it needs) without changing
//! anything; the events are then *applied* in order by [`ReplicasInfoManager::apply`], which
//! reads nothing but the event and the state, so replaying the same events on any replica
//! gives the same state. That is the seam for replication: the events are the log entries,
//! `apply` is the state machine. One replica appends them to a local file
//! (`super::event_log`) it replays at start; replicated controllers make them raft entries
//! (`super::raft`), and a raft snapshot is this state serialized whole.
//!
//! Maps are ordered (ids ascending) so that every answer and every election is the same on
//! every replica; Java iterates hash maps, which for small `Long` ids is the same order.

use super::body::{self, BrokerMemberGroup, ReplicaIdentity, ReplicasInfo};
use super::heartbeat::{elect, Liveness};
use crate::remoting::headers::{
    AlterSyncStateSetResponseHeader, ElectMasterResponseHeader, GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerResponseHeader,
};
use crate::remoting::ResponseCode;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// The first id the controller hands out in a group (`MixAll.FIRST_BROKER_CONTROLLER_ID`).
pub const FIRST_BROKER_CONTROLLER_ID: i64 = 1;

/// A change to the state; the unit of the replicated log (Java's `EventMessage`
/// subclasses of `controller/impl/event/`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// `AlterSyncStateSetEvent`: the group's SyncStateSet becomes `new_sync_state_set`.
    AlterSyncStateSet {
        /// The group.
        broker_name: String,
        /// The new set.
        new_sync_state_set: BTreeSet<i64>,
    },
    /// `ApplyBrokerIdEvent`: a broker takes `broker_id` (creating the group if new).
    ApplyBrokerId {
        /// Its cluster.
        cluster_name: String,
        /// The group.
        broker_name: String,
        /// Its address.
        broker_address: String,
        /// The id.
        broker_id: i64,
        /// `brokerAddress;timestamp`, proving a later apply comes from the same broker.
        register_check_code: String,
    },
    /// `ElectMasterEvent`: `Some(id)` became master (SyncStateSet {id}), or `None`: the
    /// master is gone and nobody was elected.
    ElectMaster {
        /// The group.
        broker_name: String,
        /// The new master.
        new_master: Option<i64>,
    },
    /// `CleanBrokerDataEvent`: forget the ids, or the whole group when `None`.
    CleanBrokerData {
        /// The group.
        broker_name: String,
        /// The ids, `None` for all.
        broker_ids: Option<BTreeSet<i64>>,
    },
    /// `UpdateBrokerAddressEvent`: a registered broker came back on another address.
    UpdateBrokerAddress {
        /// The group.
        broker_name: String,
        /// The broker.
        broker_id: i64,
        /// Its new address.
        broker_address: String,
    },
}

/// What a request decided (`ControllerResult` in Java): the response code, remark, header
/// and body, and the events to apply before the response leaves.
#[doc(alias = "ControllerResult")]
#[derive(Clone, Debug, PartialEq)]
pub struct Decision<H> {
    /// Events to apply, in order.
    pub events: Vec<Event>,
    /// The response code.
    pub code: ResponseCode,
    /// The remark.
    pub remark: Option<String>,
    /// The response header.
    pub header: H,
    /// The response body, if any.
    pub body: Option<Vec<u8>>,
}

impl<H> Decision<H> {
    fn success(header: H) -> Decision<H> {
        Decision {
            events: Vec::new(),
            code: ResponseCode::SUCCESS,
            remark: None,
            header,
            body: None,
        }
    }

    fn refuse(mut self, code: ResponseCode, remark: String) -> Decision<H> {
        tracing::debug!(code = code.0, %remark, "controller request refused");
        self.code = code;
        self.remark = Some(remark);
        self
    }
}

/// One group's replicas (`BrokerReplicaInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerReplicaInfo {
    /// Its cluster.
    pub cluster_name: String,
    /// The next id GET_NEXT_BROKER_ID offers; one more after each applied id.
    pub next_assign_broker_id: i64,
    /// Id → (address, register check code).
    pub brokers: BTreeMap<i64, (String, String)>,
}

impl BrokerReplicaInfo {
    fn address(&self, id: Option<i64>) -> Option<String> {
        id.and_then(|id| self.brokers.get(&id))
            .map(|(address, _)| address.clone())
    }

    fn ids(&self) -> BTreeSet<i64> {
        self.brokers.keys().copied().collect()
    }
}

/// One group's SyncStateSet and master (`SyncStateInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SyncStateInfo {
    /// The master's id, if there is one.
    pub master_broker_id: Option<i64>,
    /// One more at each election, elected or not; 0 before the first.
    pub master_epoch: i32,
    /// The in-sync replicas.
    pub sync_state_set: BTreeSet<i64>,
    /// One more at each change of the set.
    pub sync_state_set_epoch: i32,
}

/// The state machine (`ReplicasInfoManager`); serialized whole in raft snapshots.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicasInfoManager {
    /// `enableElectUncleanMaster`: elect outside the SyncStateSet when nobody in it lives.
    pub enable_elect_unclean_master: bool,
    replicas: BTreeMap<String, BrokerReplicaInfo>,
    sync_states: BTreeMap<String, SyncStateInfo>,
}

impl ReplicasInfoManager {
    /// An empty state.
    #[must_use]
    pub fn new(enable_elect_unclean_master: bool) -> ReplicasInfoManager {
        ReplicasInfoManager {
            enable_elect_unclean_master,
            ..ReplicasInfoManager::default()
        }
    }

    /// A group's replicas and SyncStateSet, when both are known (Java's `isContainsBroker`).
    #[must_use]
    pub fn group(&self, broker_name: &str) -> Option<(&BrokerReplicaInfo, &SyncStateInfo)> {
        Some((
            self.replicas.get(broker_name)?,
            self.sync_states.get(broker_name)?,
        ))
    }

    /// Applies one event. Deterministic: reads only the event and the state.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::AlterSyncStateSet {
                broker_name,
                new_sync_state_set,
            } => {
                if self.group(broker_name).is_some() {
                    if let Some(state) = self.sync_states.get_mut(broker_name) {
                        state.sync_state_set.clone_from(new_sync_state_set);
                        state.sync_state_set_epoch += 1;
                    }
                }
            }
            Event::ApplyBrokerId {
                cluster_name,
                broker_name,
                broker_address,
                broker_id,
                register_check_code,
            } => self.apply_new_broker_id(
                cluster_name,
                broker_name,
                *broker_id,
                (broker_address, register_check_code),
            ),
            Event::ElectMaster {
                broker_name,
                new_master,
            } => {
                if self.group(broker_name).is_none() {
                    tracing::error!(%broker_name, "elect-master event for an unknown group");
                    return;
                }
                if let Some(state) = self.sync_states.get_mut(broker_name) {
                    state.master_broker_id = *new_master;
                    state.master_epoch += 1;
                    // No one elected: the old set stays, as Java keeps it.
                    if let Some(master) = new_master {
                        state.sync_state_set = BTreeSet::from([*master]);
                        state.sync_state_set_epoch += 1;
                    }
                }
            }
            Event::CleanBrokerData {
                broker_name,
                broker_ids,
            } => self.apply_clean_broker_data(broker_name, broker_ids.as_ref()),
            Event::UpdateBrokerAddress {
                broker_name,
                broker_id,
                broker_address,
            } => {
                let replica = self.replicas.get_mut(broker_name);
                if let Some((address, _)) = replica.and_then(|r| r.brokers.get_mut(broker_id)) {
                    address.clone_from(broker_address);
                }
            }
        }
    }

    fn apply_new_broker_id(
        &mut self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: i64,
        (address, check_code): (&str, &str),
    ) {
        let entry = (address.to_owned(), check_code.to_owned());
        if self.group(broker_name).is_some() {
            if let Some(replica) = self.replicas.get_mut(broker_name) {
                if let std::collections::btree_map::Entry::Vacant(slot) =
                    replica.brokers.entry(broker_id)
                {
                    slot.insert(entry);
                    replica.next_assign_broker_id += 1;
                }
            }
            return;
        }
        let replica = BrokerReplicaInfo {
            cluster_name: cluster_name.to_owned(),
            next_assign_broker_id: FIRST_BROKER_CONTROLLER_ID + 1,
            brokers: BTreeMap::from([(broker_id, entry)]),
        };
        self.replicas.insert(broker_name.to_owned(), replica);
        self.sync_states
            .insert(broker_name.to_owned(), SyncStateInfo::default());
    }

    fn apply_clean_broker_data(&mut self, broker_name: &str, ids: Option<&BTreeSet<i64>>) {
        let Some(ids) = ids.filter(|ids| !ids.is_empty()) else {
            self.replicas.remove(broker_name);
            self.sync_states.remove(broker_name);
            return;
        };
        if self.group(broker_name).is_none() {
            return;
        }
        if let Some(replica) = self.replicas.get_mut(broker_name) {
            replica.brokers.retain(|id, _| !ids.contains(id));
            if replica.brokers.is_empty() {
                self.replicas.remove(broker_name);
            }
        }
        if let Some(state) = self.sync_states.get_mut(broker_name) {
            state.sync_state_set.retain(|id| !ids.contains(id));
            if state.sync_state_set.is_empty() {
                self.sync_states.remove(broker_name);
            }
        }
    }

    /// CONTROLLER_ALTER_SYNC_STATE_SET: the master reports a new SyncStateSet.
    pub fn alter_sync_state_set(
        &self,
        request: &AlterRequest,
        live: &impl Liveness,
    ) -> Decision<AlterSyncStateSetResponseHeader> {
        let decision = Decision::success(AlterSyncStateSetResponseHeader::default());
        let failed = ResponseCode::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED;
        let Some((replica, state)) = self.group(&request.broker_name) else {
            return decision.refuse(failed, "Broker metadata is not existed".to_owned());
        };
        if state.sync_state_set == request.new_sync_state_set {
            let remark = "The newSyncStateSet is equal with oldSyncStateSet, no needed to update \
                          syncStateSet";
            return decision.refuse(failed, remark.to_owned());
        }
        if state.master_broker_id.is_none() || state.master_broker_id != request.master_broker_id {
            let remark = format!(
                "Rejecting alter syncStateSet request because the current leader is:{{{}}}, not \
                 {{{}}}",
                java_long(state.master_broker_id),
                java_long(request.master_broker_id)
            );
            return decision.refuse(ResponseCode::CONTROLLER_INVALID_MASTER, remark);
        }
        if request.master_epoch != Some(state.master_epoch) {
            let remark =
                format!(
                "Rejecting alter syncStateSet request because the current master epoch is:{{{}}}, \
                 not {{{}}}",
                state.master_epoch,
                request.master_epoch.map_or("null".to_owned(), |e| e.to_string())
            );
            return decision.refuse(ResponseCode::CONTROLLER_FENCED_MASTER_EPOCH, remark);
        }
        if request.sync_state_set_epoch != state.sync_state_set_epoch {
            let remark = format!(
                "Rejecting alter syncStateSet request because the current syncStateSet epoch is:\
                 {{{}}}, not {{{}}}",
                state.sync_state_set_epoch, request.sync_state_set_epoch
            );
            return decision.refuse(ResponseCode::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH, remark);
        }
        for &id in &request.new_sync_state_set {
            if !replica.brokers.contains_key(&id) {
                let remark = format!(
                    "Rejecting alter syncStateSet request because the replicas {{{id}}} don't exist"
                );
                return decision.refuse(ResponseCode::CONTROLLER_INVALID_REPLICAS, remark);
            }
            if !live.is_alive(&replica.cluster_name, &request.broker_name, id) {
                let remark = format!(
                    "Rejecting alter syncStateSet request because the replicas {{{id}}} don't alive"
                );
                return decision.refuse(ResponseCode::CONTROLLER_BROKER_NOT_ALIVE, remark);
            }
        }
        if !state
            .master_broker_id
            .is_some_and(|master| request.new_sync_state_set.contains(&master))
        {
            let remark = format!(
                "Rejecting alter syncStateSet request because the newSyncStateSet don't contains \
                 origin leader {{{}}}",
                java_long(state.master_broker_id)
            );
            return decision.refuse(failed, remark);
        }
        let epoch = state.sync_state_set_epoch + 1;
        let mut decision = decision;
        decision.header.new_sync_state_set_epoch = epoch;
        decision.body = Some(body::sync_state_set(&request.new_sync_state_set, epoch));
        decision.events.push(Event::AlterSyncStateSet {
            broker_name: request.broker_name.clone(),
            new_sync_state_set: request.new_sync_state_set.clone(),
        });
        decision
    }

    /// CONTROLLER_ELECT_MASTER: from a broker (`broker_id` its own; taken as is at a group's
    /// first election), an operator (`designate_elect`), or the controller (`broker_id` None).
    pub fn elect_master(
        &self,
        request: &ElectRequest,
        live: &impl Liveness,
    ) -> Decision<ElectMasterResponseHeader> {
        let decision = Decision::success(ElectMasterResponseHeader::default());
        let Some((replica, state)) = self.group(&request.broker_name) else {
            let code = ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED;
            return decision.refuse(code, "Broker hasn't been registered".to_owned());
        };
        let broker_id = request.broker_id.filter(|&id| id != -1);
        let all = self.enable_elect_unclean_master.then(|| replica.ids());
        let old_master = state.master_broker_id;
        let first = if state.master_epoch == 0 {
            broker_id
        } else {
            None
        };
        let new_master = first.or_else(|| {
            let prefer = if request.designate_elect {
                broker_id
            } else {
                None
            };
            let group = (replica.cluster_name.as_str(), request.broker_name.as_str());
            elect(
                live,
                group,
                &state.sync_state_set,
                all.as_ref(),
                old_master,
                prefer,
            )
        });
        let mut decision = decision;
        match new_master {
            Some(master) if Some(master) == old_master => {
                let remark = format!(
                    "The old master {master} is still alive, not need to elect new master for \
                     broker {}",
                    request.broker_name
                );
                decision.header = ElectMasterResponseHeader {
                    master_broker_id: Some(master),
                    master_address: replica.address(Some(master)),
                    master_epoch: Some(state.master_epoch),
                    sync_state_set_epoch: Some(state.sync_state_set_epoch),
                };
                decision.body = Some(body::elect_master(None, &state.sync_state_set));
                decision.refuse(ResponseCode::CONTROLLER_MASTER_STILL_EXIST, remark)
            }
            Some(master) => {
                decision.header = ElectMasterResponseHeader {
                    master_broker_id: Some(master),
                    master_address: replica.address(Some(master)),
                    master_epoch: Some(state.master_epoch + 1),
                    sync_state_set_epoch: Some(state.sync_state_set_epoch + 1),
                };
                let group = member_group(&request.broker_name, replica);
                decision.body = Some(body::elect_master(Some(&group), &BTreeSet::from([master])));
                decision.events.push(Event::ElectMaster {
                    broker_name: request.broker_name.clone(),
                    new_master: Some(master),
                });
                tracing::info!(broker = %request.broker_name, master, "elected a new master");
                decision
            }
            None if broker_id.is_none() => {
                decision.events.push(Event::ElectMaster {
                    broker_name: request.broker_name.clone(),
                    new_master: None,
                });
                let remark = "Old master has down and failed to elect a new broker master";
                tracing::warn!(broker = %request.broker_name, "no master could be elected");
                decision.refuse(
                    ResponseCode::CONTROLLER_MASTER_NOT_AVAILABLE,
                    remark.to_owned(),
                )
            }
            None => {
                let remark = "Failed to elect a new master".to_owned();
                decision.refuse(ResponseCode::CONTROLLER_ELECT_MASTER_FAILED, remark)
            }
        }
    }

    /// CONTROLLER_GET_NEXT_BROKER_ID: the id a new broker of the group should apply for.
    #[must_use]
    pub fn next_broker_id(&self, broker_name: &str) -> i64 {
        self.replicas
            .get(broker_name)
            .map_or(FIRST_BROKER_CONTROLLER_ID, |r| r.next_assign_broker_id)
    }

    /// CONTROLLER_APPLY_BROKER_ID: a broker claims an id; granted when free, or already its
    /// own (same check code), or the first id of an unknown group.
    pub fn apply_broker_id(&self, request: &ApplyRequest) -> Decision<()> {
        let decision = Decision::success(());
        let address = request
            .register_check_code
            .split(';')
            .next()
            .unwrap_or_default()
            .to_owned();
        let event = Event::ApplyBrokerId {
            cluster_name: request.cluster_name.clone(),
            broker_name: request.broker_name.clone(),
            broker_address: address,
            broker_id: request.broker_id,
            register_check_code: request.register_check_code.clone(),
        };
        let granted = match self.replicas.get(&request.broker_name) {
            None => request.broker_id == FIRST_BROKER_CONTROLLER_ID,
            Some(replica) => replica
                .brokers
                .get(&request.broker_id)
                .is_none_or(|(_, code)| *code == request.register_check_code),
        };
        if granted {
            let mut decision = decision;
            decision.events.push(event);
            return decision;
        }
        let remark = if self.replicas.contains_key(&request.broker_name) {
            format!(
                "Fail to apply brokerId: {} in broker-set: {}",
                request.broker_id, request.broker_name
            )
        } else {
            format!(
                "Broker-set: {} hasn't been registered in controller, but broker try to apply \
                 brokerId: {}",
                request.broker_name, request.broker_id
            )
        };
        decision.refuse(ResponseCode::CONTROLLER_BROKER_ID_INVALID, remark)
    }

    /// CONTROLLER_REGISTER_BROKER: a broker with an applied id comes online; it learns the
    /// master (if alive) and the SyncStateSet.
    pub fn register_broker(
        &self,
        request: &RegisterRequest,
        live: &impl Liveness,
    ) -> Decision<RegisterBrokerToControllerResponseHeader> {
        let decision = Decision::success(RegisterBrokerToControllerResponseHeader {
            cluster_name: Some(request.cluster_name.clone()),
            broker_name: Some(request.broker_name.clone()),
            ..RegisterBrokerToControllerResponseHeader::default()
        });
        let code = ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED;
        let Some((replica, state)) = self.group(&request.broker_name) else {
            let remark = format!(
                "Broker-set: {} hasn't been registered in controller",
                request.broker_name
            );
            return decision.refuse(code, remark);
        };
        let Some(id) = request
            .broker_id
            .filter(|id| replica.brokers.contains_key(id))
        else {
            let remark = format!(
                "BrokerId: {} hasn't been registered in broker-set: {}",
                java_long(request.broker_id),
                request.broker_name
            );
            return decision.refuse(code, remark);
        };
        let mut decision = decision;
        if let Some(master) = state.master_broker_id {
            if live.is_alive(&request.cluster_name, &request.broker_name, master) {
                decision.header.master_broker_id = Some(master);
                decision.header.master_address = replica.address(Some(master));
                decision.header.master_epoch = Some(state.master_epoch);
                decision.header.sync_state_set_epoch = Some(state.sync_state_set_epoch);
            }
        }
        decision.body = Some(body::sync_state_set(
            &state.sync_state_set,
            state.sync_state_set_epoch,
        ));
        if replica.address(Some(id)).as_deref() != Some(request.broker_address.as_str()) {
            decision.events.push(Event::UpdateBrokerAddress {
                broker_name: request.broker_name.clone(),
                broker_id: id,
                broker_address: request.broker_address.clone(),
            });
        }
        decision
    }

    /// CONTROLLER_GET_REPLICA_INFO: the group's master and SyncStateSet.
    pub fn replica_info(&self, broker_name: &str) -> Decision<GetReplicaInfoResponseHeader> {
        let decision = Decision::success(GetReplicaInfoResponseHeader::default());
        let Some((replica, state)) = self.group(broker_name) else {
            let code = ResponseCode::CONTROLLER_BROKER_METADATA_NOT_EXIST;
            return decision.refuse(code, "Broker metadata is not existed".to_owned());
        };
        let mut decision = decision;
        decision.header = GetReplicaInfoResponseHeader {
            master_broker_id: state.master_broker_id,
            master_address: replica.address(state.master_broker_id),
            master_epoch: Some(state.master_epoch),
        };
        decision.body = Some(body::sync_state_set(
            &state.sync_state_set,
            state.sync_state_set_epoch,
        ));
        decision
    }

    /// CONTROLLER_GET_SYNC_STATE_DATA: `BrokerReplicasInfo` of the named, known groups.
    #[must_use]
    pub fn sync_state_data(&self, broker_names: &[String], live: &impl Liveness) -> Vec<u8> {
        let mut table = BTreeMap::new();
        for name in broker_names {
            let Some((replica, state)) = self.group(name) else {
                continue;
            };
            let (mut in_sync, mut not_in_sync) = (Vec::new(), Vec::new());
            for (&id, (address, _)) in &replica.brokers {
                let identity = ReplicaIdentity {
                    broker_name: name.clone(),
                    broker_id: id,
                    broker_address: address.clone(),
                    alive: live.is_alive(&replica.cluster_name, name, id),
                };
                if state.sync_state_set.contains(&id) {
                    in_sync.push(identity);
                } else {
                    not_in_sync.push(identity);
                }
            }
            let info = ReplicasInfo {
                master_broker_id: state.master_broker_id,
                master_address: replica.address(state.master_broker_id),
                master_epoch: state.master_epoch,
                sync_state_set_epoch: state.sync_state_set_epoch,
                in_sync_replicas: in_sync,
                not_in_sync_replicas: not_in_sync,
            };
            table.insert(name.clone(), info);
        }
        body::broker_replicas_info(&table)
    }

    /// CLEAN_BROKER_DATA: an operator forgets a dead group or some of its ids.
    pub fn clean_broker_data(&self, request: &CleanRequest, live: &impl Liveness) -> Decision<()> {
        let decision = Decision::success(());
        let code = ResponseCode::CONTROLLER_INVALID_CLEAN_BROKER_METADATA;
        let name = &request.broker_name;
        let ids_text = request.ids_to_clean.as_deref().unwrap_or("").trim();
        let mut ids = None;
        if !request.clean_living_broker {
            let master = self.sync_states.get(name).and_then(|s| s.master_broker_id);
            if ids_text.is_empty() && master.is_some() {
                let remark = format!("Broker {name} is still alive, clean up failure");
                return decision.refuse(code, remark);
            }
        }
        if !request.clean_living_broker && !ids_text.is_empty() {
            let parsed: Result<BTreeSet<i64>, _> = ids_text
                .split(';')
                .map(|id| id.trim().parse::<i64>())
                .collect();
            let Ok(parsed) = parsed else {
                let remark = format!(
                    "Please set the option <brokerControllerIdsToClean> according to the \
                     format, exception: java.lang.NumberFormatException: For input string: \
                     \"{ids_text}\""
                );
                return decision.refuse(code, remark);
            };
            let cluster = request.cluster_name.as_deref().unwrap_or("");
            if let Some(id) = parsed.iter().find(|&&id| live.is_alive(cluster, name, id)) {
                let remark = format!("Broker [{name},  {id}] is still alive, clean up failure");
                return decision.refuse(code, remark);
            }
            ids = Some(parsed);
        }
        if self.group(name).is_none() {
            let remark = format!("Broker {name} is not existed,clean broker data failure.");
            return decision.refuse(code, remark);
        }
        let mut decision = decision;
        decision.events.push(Event::CleanBrokerData {
            broker_name: name.clone(),
            broker_ids: ids,
        });
        decision
    }

    /// Groups whose master is dead while another of their brokers lives
    /// (`scanNeedReelectBrokerSets`): the controller elects for them.
    #[must_use]
    pub fn scan_need_reelect_broker_sets(&self, live: &impl Liveness) -> Vec<String> {
        self.sync_states
            .iter()
            .filter_map(|(name, state)| {
                let master = state.master_broker_id?;
                let replica = self.replicas.get(name)?;
                let cluster = replica.cluster_name.as_str();
                let any_alive = replica
                    .brokers
                    .keys()
                    .any(|&id| live.is_alive(cluster, name, id));
                (!live.is_alive(cluster, name, master) && any_alive).then(|| name.clone())
            })
            .collect()
    }

    /// The group's members as `BrokerMemberGroup`, for role-change notices.
    #[must_use]
    pub fn member_group(&self, broker_name: &str) -> Option<BrokerMemberGroup> {
        self.replicas
            .get(broker_name)
            .map(|replica| member_group(broker_name, replica))
    }
}

/// CONTROLLER_ALTER_SYNC_STATE_SET's header and body.
#[derive(Clone, Debug)]
pub struct AlterRequest {
    /// `brokerName`.
    pub broker_name: String,
    /// `masterBrokerId`.
    pub master_broker_id: Option<i64>,
    /// `masterEpoch`.
    pub master_epoch: Option<i32>,
    /// The body's `syncStateSet`.
    pub new_sync_state_set: BTreeSet<i64>,
    /// The body's `syncStateSetEpoch`.
    pub sync_state_set_epoch: i32,
}

/// CONTROLLER_ELECT_MASTER's header.
#[derive(Clone, Debug)]
pub struct ElectRequest {
    /// `brokerName`.
    pub broker_name: String,
    /// `brokerId`; `None` or -1: the controller's own election.
    pub broker_id: Option<i64>,
    /// `designateElect`.
    pub designate_elect: bool,
}

/// CONTROLLER_APPLY_BROKER_ID's header.
#[derive(Clone, Debug)]
pub struct ApplyRequest {
    /// `clusterName`.
    pub cluster_name: String,
    /// `brokerName`.
    pub broker_name: String,
    /// `appliedBrokerId`.
    pub broker_id: i64,
    /// `registerCheckCode`.
    pub register_check_code: String,
}

/// CONTROLLER_REGISTER_BROKER's header.
#[derive(Clone, Debug)]
pub struct RegisterRequest {
    /// `clusterName`.
    pub cluster_name: String,
    /// `brokerName`.
    pub broker_name: String,
    /// `brokerId`.
    pub broker_id: Option<i64>,
    /// `brokerAddress`.
    pub broker_address: String,
}

/// CLEAN_BROKER_DATA's header.
#[derive(Clone, Debug)]
pub struct CleanRequest {
    /// `clusterName`.
    pub cluster_name: Option<String>,
    /// `brokerName`.
    pub broker_name: String,
    /// `brokerControllerIdsToClean`.
    pub ids_to_clean: Option<String>,
    /// `isCleanLivingBroker`.
    pub clean_living_broker: bool,
}

fn member_group(broker_name: &str, replica: &BrokerReplicaInfo) -> BrokerMemberGroup {
    BrokerMemberGroup {
        cluster: replica.cluster_name.clone(),
        broker_name: broker_name.to_owned(),
        broker_addrs: replica
            .brokers
            .iter()
            .map(|(&id, (address, _))| (id, address.clone()))
            .collect(),
    }
}

/// A `Long` as Java's `String.format("%s")` prints it.
fn java_long(value: Option<i64>) -> String {
    value.map_or_else(|| "null".to_owned(), |v| v.to_string())
}
