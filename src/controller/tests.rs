//! Unit tests of the controller's state machine and election, with the facts of Java's
//! `ReplicasInfoManager`, `DefaultElectPolicy` and `ControllerRequestProcessor`: broker id
//! handout, first election, epochs, SyncStateSet changes and their fencing, re-election from
//! the SyncStateSet only (or any replica when unclean election is on), and replay.
//!
//! Liveness is a fixed table ([`Alive`]), so no test waits on a clock.

use super::heartbeat::{elect, BrokerLiveInfo, Liveness};
use super::processor::Controller;
use super::replicas_info::{
    AlterRequest, ApplyRequest, ElectRequest, Event, RegisterRequest, ReplicasInfoManager,
};
use crate::config::controller::ControllerConfig;
use crate::remoting::headers::{
    BrokerHeartbeatRequestHeader, ElectMasterResponseHeader, NotifyBrokerRoleChangedRequestHeader,
};
use crate::remoting::server::ConnectionId;
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use ferromq_shards::ShardId;
use std::collections::{BTreeMap, BTreeSet};

const GROUP: &str = "broker-a";
const CLUSTER: &str = "DefaultCluster";

/// Brokers alive, by id, with (epoch, max offset, priority).
#[derive(Default)]
struct Alive(BTreeMap<i64, (i32, i64, i32)>);

impl Alive {
    fn of(ids: &[i64]) -> Alive {
        Alive(ids.iter().map(|&id| (id, (0, 0, i32::MAX))).collect())
    }
}

impl Liveness for Alive {
    fn is_alive(&self, _: &str, _: &str, broker_id: i64) -> bool {
        self.0.contains_key(&broker_id)
    }

    fn live_info(&self, _: &str, _: &str, broker_id: i64) -> Option<BrokerLiveInfo> {
        let &(epoch, max_offset, election_priority) = self.0.get(&broker_id)?;
        Some(BrokerLiveInfo {
            broker_addr: address(broker_id),
            last_update_ms: 0,
            heartbeat_timeout_ms: 10_000,
            connection: None,
            epoch,
            max_offset,
            confirm_offset: max_offset,
            election_priority,
        })
    }
}

fn address(id: i64) -> String {
    format!("127.0.0.1:{}", 30_000 + id)
}

/// Applies `id` in the group as the broker at `address(id)` would, and returns the events.
fn join(state: &mut ReplicasInfoManager, id: i64) -> Vec<Event> {
    assert_eq!(
        state.next_broker_id(GROUP),
        id,
        "ids are handed out in order"
    );
    let decision = state.apply_broker_id(&ApplyRequest {
        cluster_name: CLUSTER.to_owned(),
        broker_name: GROUP.to_owned(),
        broker_id: id,
        register_check_code: format!("{};1700000000000", address(id)),
    });
    assert_eq!(
        decision.code,
        ResponseCode::SUCCESS,
        "{:?}",
        decision.remark
    );
    for event in &decision.events {
        state.apply(event);
    }
    decision.events
}

fn elect_by(state: &mut ReplicasInfoManager, id: Option<i64>, live: &Alive) -> ResponseCode {
    let request = ElectRequest {
        broker_name: GROUP.to_owned(),
        broker_id: id,
        designate_elect: false,
    };
    let decision = state.elect_master(&request, live);
    for event in &decision.events {
        state.apply(event);
    }
    decision.code
}

fn master_and_epochs(state: &ReplicasInfoManager) -> (Option<i64>, i32, Vec<i64>, i32) {
    let (_, sync) = state.group(GROUP).expect("the group is known");
    let set = sync.sync_state_set.iter().copied().collect();
    (
        sync.master_broker_id,
        sync.master_epoch,
        set,
        sync.sync_state_set_epoch,
    )
}

fn alter(
    state: &ReplicasInfoManager,
    master: i64,
    epochs: (i32, i32),
    set: &[i64],
) -> AlterRequest {
    let _ = state;
    AlterRequest {
        broker_name: GROUP.to_owned(),
        master_broker_id: Some(master),
        master_epoch: Some(epochs.0),
        new_sync_state_set: set.iter().copied().collect(),
        sync_state_set_epoch: epochs.1,
    }
}

#[test]
fn apply_broker_id_hands_out_ids_from_one_and_checks_the_code() {
    let mut state = ReplicasInfoManager::new(false);
    assert_eq!(state.next_broker_id(GROUP), 1);
    // An unknown group takes only the first id.
    let early = state.apply_broker_id(&ApplyRequest {
        cluster_name: CLUSTER.to_owned(),
        broker_name: GROUP.to_owned(),
        broker_id: 2,
        register_check_code: "127.0.0.1:1;1".to_owned(),
    });
    assert_eq!(early.code, ResponseCode::CONTROLLER_BROKER_ID_INVALID);
    assert!(early.events.is_empty());
    join(&mut state, 1);
    join(&mut state, 2);
    assert_eq!(state.next_broker_id(GROUP), 3);
    // Id 1 again with its own check code is granted (a restart), with another is not.
    let again = |code: &str| ApplyRequest {
        cluster_name: CLUSTER.to_owned(),
        broker_name: GROUP.to_owned(),
        broker_id: 1,
        register_check_code: code.to_owned(),
    };
    let own = format!("{};1700000000000", address(1));
    assert_eq!(
        state.apply_broker_id(&again(&own)).code,
        ResponseCode::SUCCESS
    );
    let other = state.apply_broker_id(&again("127.0.0.1:9;5"));
    assert_eq!(other.code, ResponseCode::CONTROLLER_BROKER_ID_INVALID);
    assert_eq!(
        other.remark.as_deref(),
        Some("Fail to apply brokerId: 1 in broker-set: broker-a")
    );
    let (replica, sync) = state.group(GROUP).unwrap();
    assert_eq!(replica.brokers[&2].0, address(2));
    assert_eq!(sync.master_epoch, 0);
}

#[test]
fn first_election_takes_the_asking_broker_and_bumps_both_epochs() {
    let mut state = ReplicasInfoManager::new(false);
    join(&mut state, 1);
    join(&mut state, 2);
    // The first election takes the asker even when the policy would pick another.
    assert_eq!(
        elect_by(&mut state, Some(2), &Alive::of(&[1, 2])),
        ResponseCode::SUCCESS
    );
    assert_eq!(master_and_epochs(&state), (Some(2), 1, vec![2], 1));
    // Then broker 1 asks: the old master lives, so it stays.
    let code = elect_by(&mut state, Some(1), &Alive::of(&[1, 2]));
    assert_eq!(code, ResponseCode::CONTROLLER_MASTER_STILL_EXIST);
    assert_eq!(master_and_epochs(&state), (Some(2), 1, vec![2], 1));
}

#[test]
fn elect_master_answers_the_new_epochs_and_member_group() {
    let mut state = ReplicasInfoManager::new(false);
    join(&mut state, 1);
    join(&mut state, 2);
    let request = ElectRequest {
        broker_name: GROUP.to_owned(),
        broker_id: Some(1),
        designate_elect: false,
    };
    let decision = state.elect_master(&request, &Alive::of(&[1, 2]));
    assert_eq!(
        decision.header,
        ElectMasterResponseHeader {
            master_broker_id: Some(1),
            master_address: Some(address(1)),
            master_epoch: Some(1),
            sync_state_set_epoch: Some(1),
        }
    );
    let body: serde_json::Value = serde_json::from_slice(&decision.body.unwrap()).unwrap();
    assert_eq!(body["syncStateSet"], serde_json::json!([1]));
    assert_eq!(body["brokerMemberGroup"]["brokerAddrs"]["2"], address(2));
    assert_eq!(body["brokerMemberGroup"]["cluster"], CLUSTER);
    assert_eq!(
        decision.events,
        vec![Event::ElectMaster {
            broker_name: GROUP.to_owned(),
            new_master: Some(1)
        }]
    );
}

#[test]
fn alter_sync_state_set_is_fenced_by_master_and_both_epochs() {
    let mut state = ReplicasInfoManager::new(false);
    join(&mut state, 1);
    join(&mut state, 2);
    elect_by(&mut state, Some(1), &Alive::of(&[1, 2]));
    let live = Alive::of(&[1, 2]);
    let wrong_master = state.alter_sync_state_set(&alter(&state, 2, (1, 1), &[1, 2]), &live);
    assert_eq!(wrong_master.code, ResponseCode::CONTROLLER_INVALID_MASTER);
    let old_epoch = state.alter_sync_state_set(&alter(&state, 1, (0, 1), &[1, 2]), &live);
    assert_eq!(old_epoch.code, ResponseCode::CONTROLLER_FENCED_MASTER_EPOCH);
    let old_set = state.alter_sync_state_set(&alter(&state, 1, (1, 0), &[1, 2]), &live);
    assert_eq!(
        old_set.code,
        ResponseCode::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH
    );
    let unknown = state.alter_sync_state_set(&alter(&state, 1, (1, 1), &[1, 3]), &live);
    assert_eq!(unknown.code, ResponseCode::CONTROLLER_INVALID_REPLICAS);
    let dead = state.alter_sync_state_set(&alter(&state, 1, (1, 1), &[1, 2]), &Alive::of(&[1]));
    assert_eq!(dead.code, ResponseCode::CONTROLLER_BROKER_NOT_ALIVE);
    let no_master = state.alter_sync_state_set(&alter(&state, 1, (1, 1), &[2]), &live);
    assert_eq!(
        no_master.code,
        ResponseCode::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    );
    let same = state.alter_sync_state_set(&alter(&state, 1, (1, 1), &[1]), &live);
    assert_eq!(
        same.code,
        ResponseCode::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED
    );
    assert!([
        wrong_master,
        old_epoch,
        old_set,
        unknown,
        dead,
        no_master,
        same
    ]
    .iter()
    .all(|d| d.events.is_empty()));
    let grown = state.alter_sync_state_set(&alter(&state, 1, (1, 1), &[1, 2]), &live);
    assert_eq!(grown.code, ResponseCode::SUCCESS);
    assert_eq!(grown.header.new_sync_state_set_epoch, 2);
    let body: serde_json::Value = serde_json::from_slice(grown.body.as_ref().unwrap()).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"syncStateSet": [1, 2], "syncStateSetEpoch": 2})
    );
    for event in &grown.events {
        state.apply(event);
    }
    assert_eq!(master_and_epochs(&state), (Some(1), 1, vec![1, 2], 2));
}

#[test]
fn dead_master_is_replaced_from_the_sync_state_set_only() {
    let mut state = ReplicasInfoManager::new(false);
    for id in 1..=3 {
        join(&mut state, id);
    }
    elect_by(&mut state, Some(1), &Alive::of(&[1, 2, 3]));
    let grown = state.alter_sync_state_set(&alter(&state, 1, (1, 1), &[1, 2]), &Alive::of(&[1, 2]));
    for event in &grown.events {
        state.apply(event);
    }
    // Master 1 dies: the controller needs a re-election, and 2 (in sync) wins over 3.
    let live = Alive::of(&[2, 3]);
    assert_eq!(
        state.scan_need_reelect_broker_sets(&live),
        vec![GROUP.to_owned()]
    );
    assert_eq!(elect_by(&mut state, None, &live), ResponseCode::SUCCESS);
    assert_eq!(master_and_epochs(&state), (Some(2), 2, vec![2], 3));
    assert!(state.scan_need_reelect_broker_sets(&live).is_empty());
    // Master 2 dies too: 3 was never in sync, so nobody is elected, and the master is gone
    // with a new epoch while the SyncStateSet stays.
    let code = elect_by(&mut state, None, &Alive::of(&[3]));
    assert_eq!(code, ResponseCode::CONTROLLER_MASTER_NOT_AVAILABLE);
    assert_eq!(master_and_epochs(&state), (None, 3, vec![2], 3));
    // A broker asking (not the controller) gets ELECT_MASTER_FAILED and changes nothing.
    let code = elect_by(&mut state, Some(3), &Alive::of(&[3]));
    assert_eq!(code, ResponseCode::CONTROLLER_ELECT_MASTER_FAILED);
    assert_eq!(master_and_epochs(&state), (None, 3, vec![2], 3));
}

#[test]
fn unclean_election_takes_any_live_replica() {
    let mut state = ReplicasInfoManager::new(true);
    join(&mut state, 1);
    join(&mut state, 2);
    elect_by(&mut state, Some(1), &Alive::of(&[1, 2]));
    assert_eq!(
        elect_by(&mut state, None, &Alive::of(&[2])),
        ResponseCode::SUCCESS
    );
    assert_eq!(master_and_epochs(&state), (Some(2), 2, vec![2], 2));
}

#[test]
fn policy_prefers_epoch_then_offset_then_priority_then_lowest_id() {
    let set: BTreeSet<i64> = [1, 2, 3].into();
    let pick = |table: &[(i64, (i32, i64, i32))]| {
        let live = Alive(table.iter().copied().collect());
        elect(&live, (CLUSTER, GROUP), &set, None, None, None)
    };
    assert_eq!(
        pick(&[(1, (1, 900, 0)), (2, (2, 10, 5)), (3, (2, 5, 0))]),
        Some(2)
    );
    assert_eq!(
        pick(&[(1, (2, 10, 9)), (2, (2, 10, 5)), (3, (2, 10, 7))]),
        Some(2)
    );
    assert_eq!(pick(&[(2, (2, 10, 5)), (3, (2, 10, 5))]), Some(2));
    assert_eq!(pick(&[]), None);
    // A preferred (designated) broker wins when alive, else nobody; a live old master stays.
    let live = Alive::of(&[1, 2]);
    assert_eq!(
        elect(&live, (CLUSTER, GROUP), &set, None, Some(1), None),
        Some(1)
    );
    assert_eq!(
        elect(&live, (CLUSTER, GROUP), &set, None, Some(1), Some(2)),
        Some(2)
    );
    assert_eq!(
        elect(&live, (CLUSTER, GROUP), &set, None, None, Some(3)),
        None
    );
}

#[test]
fn register_tells_the_live_master_and_updates_a_moved_address() {
    let mut state = ReplicasInfoManager::new(false);
    join(&mut state, 1);
    join(&mut state, 2);
    let register = |id: Option<i64>, address: String| RegisterRequest {
        cluster_name: CLUSTER.to_owned(),
        broker_name: GROUP.to_owned(),
        broker_id: id,
        broker_address: address,
    };
    let before = state.register_broker(&register(Some(2), address(2)), &Alive::of(&[1, 2]));
    assert_eq!(before.code, ResponseCode::SUCCESS);
    assert_eq!(before.header.master_broker_id, None);
    elect_by(&mut state, Some(1), &Alive::of(&[1, 2]));
    let after = state.register_broker(&register(Some(2), address(2)), &Alive::of(&[1, 2]));
    assert_eq!(after.header.master_broker_id, Some(1));
    assert_eq!(after.header.master_address, Some(address(1)));
    assert_eq!(
        (after.header.master_epoch, after.header.sync_state_set_epoch),
        (Some(1), Some(1))
    );
    assert!(after.events.is_empty());
    let moved = state.register_broker(
        &register(Some(2), "10.0.0.2:1".to_owned()),
        &Alive::of(&[1]),
    );
    assert_eq!(moved.header.master_broker_id, Some(1));
    for event in &moved.events {
        state.apply(event);
    }
    assert_eq!(state.group(GROUP).unwrap().0.brokers[&2].0, "10.0.0.2:1");
    let stranger = state.register_broker(&register(Some(7), address(7)), &Alive::of(&[1]));
    assert_eq!(
        stranger.code,
        ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED
    );
}

#[test]
fn replaying_the_events_rebuilds_the_same_state() {
    let mut state = ReplicasInfoManager::new(false);
    let mut log = join(&mut state, 1);
    log.extend(join(&mut state, 2));
    let live = Alive::of(&[1, 2]);
    let elected = state.elect_master(
        &ElectRequest {
            broker_name: GROUP.to_owned(),
            broker_id: Some(1),
            designate_elect: false,
        },
        &live,
    );
    for event in &elected.events {
        state.apply(event);
    }
    log.extend(elected.events);
    let grown = state.alter_sync_state_set(&alter(&state, 1, (1, 1), &[1, 2]), &live);
    for event in &grown.events {
        state.apply(event);
    }
    log.extend(grown.events);
    let text = serde_json::to_string(&log).unwrap();
    let replayed_log: Vec<Event> = serde_json::from_str(&text).unwrap();
    let mut replica = ReplicasInfoManager::new(false);
    for event in &replayed_log {
        replica.apply(event);
    }
    assert_eq!(replica, state);
}

fn heartbeat(id: i64, timeout_ms: i64) -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::BROKER_HEARTBEAT,
        &BrokerHeartbeatRequestHeader {
            cluster_name: CLUSTER.to_owned(),
            broker_addr: address(id),
            broker_name: GROUP.to_owned(),
            broker_id: Some(id),
            heartbeat_timeout_mills: Some(timeout_ms),
            ..BrokerHeartbeatRequestHeader::default()
        },
    )
}

#[test]
fn silent_master_is_replaced_and_the_live_broker_notified() {
    let mut controller = Controller::new(ControllerConfig::default(), "127.0.0.1:9878".to_owned());
    let connection = |seq| ConnectionId {
        shard: ShardId::new(0),
        seq,
    };
    for id in [1, 2] {
        controller.commit(&join(&mut controller.replicas.clone(), id));
    }
    for id in [1, 2] {
        let (response, _) = controller.process(connection(id as u64), &heartbeat(id, 3_000), 1_000);
        assert_eq!(response.code, 0);
    }
    let live = controller.heartbeats.at(1_000);
    elect_by(&mut controller.replicas, Some(1), &Alive::of(&[1, 2]));
    let grown = controller
        .replicas
        .alter_sync_state_set(&alter(&controller.replicas, 1, (1, 1), &[1, 2]), &live);
    controller.commit(&grown.events);
    // Broker 2 keeps beating; broker 1 goes silent. Before its 3 s run out, nothing happens.
    controller.process(connection(2), &heartbeat(2, 3_000), 3_500);
    assert!(controller.scan(4_000).is_empty());
    let notices = controller.scan(4_001);
    assert_eq!(
        master_and_epochs(&controller.replicas),
        (Some(2), 2, vec![2], 3)
    );
    assert_eq!(notices.len(), 1, "only the live broker hears of it");
    assert_eq!(notices[0].broker_addr, address(2));
    let header: NotifyBrokerRoleChangedRequestHeader = notices[0].request.decode_header().unwrap();
    assert_eq!(header.master_broker_id, Some(2));
    assert_eq!(
        (header.master_epoch, header.sync_state_set_epoch),
        (Some(2), Some(3))
    );
    // The closed connection of the new master elects nobody: 1 is gone and never came back.
    let notices = controller.on_connection_closed(connection(2), 4_100);
    assert!(notices.is_empty());
    assert_eq!(
        master_and_epochs(&controller.replicas),
        (None, 3, vec![2], 3)
    );
}

#[test]
fn heartbeat_without_broker_id_is_an_invalid_request() {
    let mut controller = Controller::new(ControllerConfig::default(), "127.0.0.1:9878".to_owned());
    let mut request = heartbeat(1, 1_000);
    if let Some(fields) = request.ext_fields.as_mut() {
        fields.remove("brokerId");
    }
    let connection = ConnectionId {
        shard: ShardId::new(0),
        seq: 1,
    };
    let (response, _) = controller.process(connection, &request, 0);
    assert_eq!(response.code, ResponseCode::CONTROLLER_INVALID_REQUEST.0);
    assert_eq!(
        response.remark.as_deref(),
        Some("Heart beat with empty brokerId")
    );
    let unknown = RemotingCommand::request(RequestCode(99_999));
    let (response, _) = controller.process(connection, &unknown, 0);
    assert_eq!(response.code, ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0);
}

#[test]
fn follower_drops_a_silent_master_but_elects_nobody_until_it_leads() {
    let mut controller = Controller::new(ControllerConfig::default(), "127.0.0.1:9878".to_owned());
    let connection = |seq| ConnectionId {
        shard: ShardId::new(0),
        seq,
    };
    for id in [1, 2] {
        controller.commit(&join(&mut controller.replicas.clone(), id));
        controller.process(connection(id as u64), &heartbeat(id, 3_000), 1_000);
    }
    elect_by(&mut controller.replicas, Some(1), &Alive::of(&[1, 2]));
    let live = controller.heartbeats.at(1_000);
    let grown = controller
        .replicas
        .alter_sync_state_set(&alter(&controller.replicas, 1, (1, 1), &[1, 2]), &live);
    controller.commit(&grown.events);
    controller.take_applied();
    controller.process(connection(2), &heartbeat(2, 3_000), 3_500);
    // A raft follower: broker 1 is dropped from its liveness table, nobody is elected.
    controller.leads = false;
    assert!(controller.scan(4_001).is_empty());
    assert!(controller
        .on_connection_closed(connection(1), 4_001)
        .is_empty());
    assert!(controller.take_applied().is_empty());
    assert_eq!(
        master_and_epochs(&controller.replicas),
        (Some(1), 1, vec![1, 2], 2)
    );
    // Once it leads, its next scan finds the group's master gone and elects broker 2.
    controller.leads = true;
    let notices = controller.scan(4_002);
    assert_eq!(notices.len(), 1);
    assert_eq!(
        master_and_epochs(&controller.replicas),
        (Some(2), 2, vec![2], 3)
    );
    assert_eq!(controller.take_applied().len(), 1);
}
