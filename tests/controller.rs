//! Java 5.5.0 brokers fail over under a ferromq controller.
//!
//! Story: a Java 5.5.0 name server, `ferromq controller`, and two Java 5.5.0 brokers of one
//! group (`broker-a`) in controller mode (`enableControllerMode=true`, `controllerAddr` the
//! ferromq controller, `allAckInSyncStateSet=true`). The first broker gets id 1 from the
//! controller and is elected master; the second gets id 2, follows it and joins the
//! SyncStateSet. The Java 5.x client sends and reads back messages through the name server.
//! Then the master is killed with SIGKILL: the controller sees its connection close (and,
//! at the latest, its heartbeat time out), elects broker 2 from the SyncStateSet, tells it so
//! (NOTIFY_BROKER_ROLE_CHANGED), and broker 2 registers with the name server as master
//! (brokerId 0), where the Java client sends and reads again. Upstream mqadmin's
//! getControllerMetaData and getSyncStateSet are pointed at the ferromq controller, and
//! getBrokerEpoch at the new master, and their output is checked.
//!
//! Method: real processes (the kit's `bin/namesrv`, `bin/broker`, `bin/mqadmin` and the
//! `ferromq` binary) on loopback; state is read over the remoting protocol
//! (CONTROLLER_GET_REPLICA_INFO from the controller, GET_BROKER_CLUSTER_INFO from the name
//! server) in bounded polling loops. Election time is measured from the kill to the
//! controller's new master, and to the name server's route. A third test sends one scripted
//! sequence of controller requests to the Java 5.5.0 controller (inside its name server) and
//! to ferromq's, and compares every answer.

mod common;

use common::controller::{
    broker_addrs, in_sync_ids, replica_info, wait_for, ControllerProcess, JavaController,
};
use common::java::{self, JavaServer, Serialize};
use common::TempDir;
use ferromq::remoting::client::{connect_tokio, ClientConfig};
use ferromq::remoting::headers::GetReplicaInfoRequestHeader;
use ferromq::remoting::{RemotingCommand, RequestCode};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// The brokers' `controllerHeartBeatTimeoutMills`: a silent broker counts as gone after it.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(6);
/// What an election may take beyond the heartbeat timeout: the controller's scan period
/// (`scanNotActiveBrokerInterval`, 5 s), plus the notice or the slave's next
/// GET_REPLICA_INFO (`syncBrokerMetadataPeriod`, 5 s) for the route.
const ELECTION_BOUND: Duration = Duration::from_secs(10);

/// A name server, the ferromq controller and a group of two Java 5.5.0 brokers in controller
/// mode: broker 1 elected master, broker 2 in its SyncStateSet, both in the route.
struct Group {
    kit: std::path::PathBuf,
    namesrv: JavaServer,
    controller: ControllerProcess,
    first: JavaServer,
    second: JavaServer,
    _dir: TempDir,
}

impl Group {
    fn start(name: &str) -> Group {
        let kit = java::kit5();
        let dir = TempDir::on_disk(name);
        let namesrv = JavaServer::namesrv_on(&kit, dir.path());
        let namesrv_addr: SocketAddr = ([127, 0, 0, 1], namesrv.port).into();
        let listen = ["--listen", "127.0.0.1:0"];
        let (child, addr, log, _) = common::spawn_server("controller", &listen);
        let controller = ControllerProcess { child, addr, log };
        let conf = format!(
            "enableControllerMode=true\ncontrollerAddr={addr}\nbrokerId=-1\nbrokerRole=SLAVE\n\
             fetchNamesrvAddrByAddressServer=false\nallAckInSyncStateSet=true\n\
             controllerHeartBeatTimeoutMills={}\n",
            HEARTBEAT_TIMEOUT.as_millis()
        );
        let start = |store: &str| {
            let store = dir.path().join(store);
            JavaServer::try_broker_on(&kit, dir.path(), namesrv.port, &store, &conf, "")
                .unwrap_or_else(|text| panic!("{text}"))
        };
        // The first broker is alone: it takes id 1 and becomes master.
        let first = start("store-1");
        let replica = wait_for(Duration::from_secs(60), "broker 1 elected", || {
            replica_info(addr).filter(|(header, _)| header.master_broker_id == Some(1))
        });
        assert_eq!(replica.0.master_address, Some(first.addr()));
        assert_eq!(replica.0.master_epoch, Some(1));
        let second = start("store-2");
        // Broker 2 catches up and the master reports it in sync.
        let (_, in_sync) = wait_for(Duration::from_secs(60), "SyncStateSet {1, 2}", || {
            replica_info(addr).filter(|(_, body)| in_sync_ids(body) == [1, 2])
        });
        assert_eq!(in_sync["syncStateSetEpoch"], 2, "{in_sync}");
        let routes = wait_for(Duration::from_secs(60), "both in the route", || {
            broker_addrs(namesrv_addr).filter(|addrs| addrs.len() == 2)
        });
        assert_eq!(routes.get(&0), Some(&first.addr()), "{routes:?}");
        assert!(routes.values().any(|a| *a == second.addr()), "{routes:?}");
        Group {
            kit,
            namesrv,
            controller,
            first,
            second,
            _dir: dir,
        }
    }

    fn namesrv_addr(&self) -> SocketAddr {
        ([127, 0, 0, 1], self.namesrv.port).into()
    }

    /// Waits until the controller has elected broker 2 and the name server routes to it as
    /// master; returns the two times since `since`.
    fn wait_failover(&self, since: Instant) -> (Duration, Duration) {
        let bound = HEARTBEAT_TIMEOUT + ELECTION_BOUND;
        let (elected, _) = wait_for(bound, "broker 2 elected", || {
            replica_info(self.controller.addr)
                .filter(|(header, _)| header.master_broker_id == Some(2))
        });
        let election = since.elapsed();
        assert_eq!(elected.master_address, Some(self.second.addr()));
        assert_eq!(elected.master_epoch, Some(2));
        wait_for(bound, "broker 2 as master in the route", || {
            broker_addrs(self.namesrv_addr())
                .filter(|addrs| addrs.get(&0) == Some(&self.second.addr()))
        });
        let routed = since.elapsed();
        let notice = format!("broker={}", self.second.addr());
        let notified = common::wait_for_line(&self.controller.log, "role change notified", bound)
            .filter(|line| line.contains(&notice));
        assert!(
            notified.is_some(),
            "broker 2 was not sent NOTIFY_BROKER_ROLE_CHANGED"
        );
        (election, routed)
    }
}

#[test]
fn java5_brokers_fail_over_under_the_ferromq_controller() {
    let classes = java::classes5();
    let mut group = Group::start("controller-kill");
    round_trip(&group.kit, &classes, group.namesrv.port, "ControllerBefore");

    let killed = Instant::now();
    common::kill(&mut group.first.child);
    let (election, routed) = group.wait_failover(killed);
    eprintln!("kill -9: elected {election:?} after, routed as master {routed:?} after");
    // The killed broker's connection closes, which the controller acts on at once; the
    // heartbeat timeout is the bound when it does not (see the frozen-master test).
    assert!(
        election < HEARTBEAT_TIMEOUT + ELECTION_BOUND,
        "{election:?}"
    );
    round_trip(&group.kit, &classes, group.namesrv.port, "ControllerAfter");

    let kit = &group.kit;
    let ctl = group.controller.addr.to_string();
    let meta = mqadmin(kit, &["getControllerMetaData", "-a", &ctl]);
    assert!(
        meta.contains(&format!("#ControllerLeaderAddress\t{ctl}")),
        "{meta}"
    );
    let sync = mqadmin(kit, &["getSyncStateSet", "-a", &ctl, "-b", "broker-a"]);
    for line in [
        "#brokerName\tbroker-a".to_owned(),
        "#MasterBrokerId\t2".to_owned(),
        format!("#MasterAddr\t{}", group.second.addr()),
        "#MasterEpoch\t2".to_owned(),
        "#SyncStateSetNums\t1".to_owned(),
    ] {
        assert!(sync.contains(&line), "no {line:?} in:\n{sync}");
    }
    assert!(sync.contains("NotInSyncReplica"), "{sync}");
    let ns = format!("127.0.0.1:{}", group.namesrv.port);
    let epochs = mqadmin(kit, &["getBrokerEpoch", "-n", &ns, "-b", "broker-a"]);
    assert!(
        epochs.contains(&format!("#brokerAddr\t{}", group.second.addr())),
        "{epochs}"
    );
    assert!(epochs.contains("epoch=1"), "{epochs}");
    assert!(epochs.contains("epoch=2"), "{epochs}");
}

/// The master freezes (SIGSTOP): its connection stays open, only its heartbeats stop, so the
/// controller learns of it from the heartbeat timeout and its liveness scan.
#[test]
fn frozen_java5_master_is_replaced_after_the_heartbeat_timeout() {
    let mut group = Group::start("controller-freeze");
    let pid = group.first.child.id().to_string();
    let frozen = Instant::now();
    signal("-STOP", &pid);
    let (election, routed) = group.wait_failover(frozen);
    eprintln!("SIGSTOP: elected {election:?} after, routed as master {routed:?} after");
    assert!(
        election >= HEARTBEAT_TIMEOUT,
        "elected before the timeout: {election:?}"
    );
    assert!(
        election < HEARTBEAT_TIMEOUT + ELECTION_BOUND,
        "{election:?}"
    );
    // A stopped JVM does not act on SIGTERM: kill it (the kernel delivers SIGKILL anyway).
    common::kill(&mut group.first.child);
}

fn signal(signal: &str, pid: &str) {
    let status = std::process::Command::new("kill")
        .args([signal, pid])
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {signal} {pid}");
}

/// The Java 5.x client sends and reads back messages of a new topic through the name server.
fn round_trip(kit: &std::path::Path, classes: &std::path::Path, namesrv_port: u16, topic: &str) {
    let count = 10;
    let output = java::run_java_on(
        kit,
        classes,
        "Java5RoundTrip",
        &[
            &format!("127.0.0.1:{namesrv_port}"),
            topic,
            &count.to_string(),
        ],
        Serialize::Json,
        "",
        Duration::from_secs(120),
    );
    output.assert_passed(topic);
    assert_eq!(output.figure("send_ok"), f64::from(count));
    assert_eq!(output.figure("received_all"), f64::from(count));
}

fn mqadmin(kit: &std::path::Path, args: &[&str]) -> String {
    let output = java::run_kit_on(kit, "mqadmin", args, Duration::from_secs(60));
    assert!(
        !output.timed_out,
        "mqadmin {args:?} timed out:\n{}",
        output.text
    );
    output.text
}

/// The Java 5.5.0 controller (inside its name server, `enableControllerInNamesrv=true`) and
/// the ferromq controller answer the same requests alike: the requests a group of two
/// brokers and an operator send, refusals included, compared by code, remark, header fields
/// and JSON body (fastjson's bare integer keys read as quoted ones).
#[test]
fn ferromq_controller_answers_as_the_java_controller() {
    let kit = java::kit5();
    let dir = TempDir::on_disk("controller-diff");
    let java = JavaController::start(&kit, dir.path(), "");
    let (child, addr, log, _) = common::spawn_server("controller", &["--listen", "127.0.0.1:0"]);
    let ours = ControllerProcess { child, addr, log };
    let java_addr = java.addr;
    let runtime = common::runtime();
    runtime.block_on(async {
        let (java_client, _) = connect_tokio(java_addr, ClientConfig::default())
            .await
            .unwrap();
        let (our_client, _) = connect_tokio(ours.addr, ClientConfig::default())
            .await
            .unwrap();
        for (step, request) in differential_requests().into_iter().enumerate() {
            let expected = java_client.request(request.clone()).await.unwrap();
            let actual = our_client.request(request.clone()).await.unwrap();
            let (expected, actual) = (comparable(&expected), comparable(&actual));
            eprintln!(
                "step {step} code {}: Java answered {expected:?}",
                request.code
            );
            assert_eq!(actual, expected, "step {step}, code {}", request.code);
        }
    });
    drop(java);
}

/// What is compared of a response: code, remark, header fields (none and empty alike) and
/// the body as JSON (or text).
fn comparable(
    response: &RemotingCommand,
) -> (i32, Option<String>, BTreeMap<String, String>, String) {
    let fields = response
        .ext_fields
        .iter()
        .flat_map(|fields| fields.iter())
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
    let body = match ferromq::config::fastjson::parse_lenient(&response.body) {
        Ok(value) => value.to_string(),
        Err(_) => String::from_utf8_lossy(&response.body).into_owned(),
    };
    (response.code, response.remark.clone(), fields, body)
}

/// Two brokers join, heartbeat, elect, grow the SyncStateSet; stale and wrong requests are
/// refused; an operator reads the SyncStateSet, tries to clean a live group, and designates
/// a master (one not registered, then one in sync).
fn differential_requests() -> Vec<RemotingCommand> {
    use ferromq::remoting::headers::{
        AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader,
        CleanControllerBrokerDataRequestHeader, ElectMasterRequestHeader,
        GetNextBrokerIdRequestHeader, RegisterBrokerToControllerRequestHeader,
    };
    let with = |code, header: &dyn Fn(&mut RemotingCommand)| {
        let mut request = RemotingCommand::request(code);
        header(&mut request);
        request
    };
    let group = "broker-d";
    let address = |id: i64| format!("127.0.0.1:{}", 31_000 + id);
    let next_id = || {
        RemotingCommand::request_with_header(
            RequestCode::CONTROLLER_GET_NEXT_BROKER_ID,
            &GetNextBrokerIdRequestHeader {
                cluster_name: "DiffCluster".to_owned(),
                broker_name: group.to_owned(),
            },
        )
    };
    let apply = |id: i64| {
        RemotingCommand::request_with_header(
            RequestCode::CONTROLLER_APPLY_BROKER_ID,
            &ApplyBrokerIdRequestHeader {
                cluster_name: "DiffCluster".to_owned(),
                broker_name: group.to_owned(),
                applied_broker_id: id,
                register_check_code: format!("{};1700000000000", address(id)),
            },
        )
    };
    let register = |id: i64| {
        RemotingCommand::request_with_header(
            RequestCode::CONTROLLER_REGISTER_BROKER,
            &RegisterBrokerToControllerRequestHeader {
                cluster_name: "DiffCluster".to_owned(),
                broker_name: group.to_owned(),
                broker_id: Some(id),
                broker_address: address(id),
                invoke_time: Some(1),
            },
        )
    };
    let heartbeat = |id: Option<i64>| {
        RemotingCommand::request_with_header(
            RequestCode::BROKER_HEARTBEAT,
            &BrokerHeartbeatRequestHeader {
                cluster_name: "DiffCluster".to_owned(),
                broker_addr: address(id.unwrap_or(0)),
                broker_name: group.to_owned(),
                broker_id: id,
                epoch: Some(0),
                max_offset: Some(0),
                confirm_offset: Some(0),
                heartbeat_timeout_mills: Some(60_000),
                election_priority: None,
            },
        )
    };
    // `designate`: an operator's `mqadmin electMaster -b ID`.
    let elect_as = |id: i64, designate: bool| {
        RemotingCommand::request_with_header(
            RequestCode::CONTROLLER_ELECT_MASTER,
            &ElectMasterRequestHeader {
                cluster_name: Some("DiffCluster".to_owned()),
                broker_name: group.to_owned(),
                broker_id: Some(id),
                designate_elect: Some(designate),
                invoke_time: Some(1),
            },
        )
    };
    let elect = |id: i64| elect_as(id, false);
    let alter = |epochs: (i32, i32), set: &str| {
        let mut request = RemotingCommand::request_with_header(
            RequestCode::CONTROLLER_ALTER_SYNC_STATE_SET,
            &AlterSyncStateSetRequestHeader {
                broker_name: group.to_owned(),
                master_broker_id: Some(1),
                master_epoch: Some(epochs.0),
                invoke_time: Some(1),
            },
        );
        request.body = format!(
            "{{\"syncStateSet\":{set},\"syncStateSetEpoch\":{}}}",
            epochs.1
        )
        .into_bytes();
        request
    };
    let replica_info = || {
        RemotingCommand::request_with_header(
            RequestCode::CONTROLLER_GET_REPLICA_INFO,
            &GetReplicaInfoRequestHeader {
                broker_name: group.to_owned(),
            },
        )
    };
    let sync_state_data = with(RequestCode::CONTROLLER_GET_SYNC_STATE_DATA, &|request| {
        request.body = format!("[\"{group}\",\"no-such-group\"]").into_bytes();
    });
    let clean = RemotingCommand::request_with_header(
        RequestCode::CLEAN_BROKER_DATA,
        &CleanControllerBrokerDataRequestHeader {
            cluster_name: Some("DiffCluster".to_owned()),
            broker_name: group.to_owned(),
            broker_controller_ids_to_clean: None,
            is_clean_living_broker: Some(false),
            invoke_time: Some(1),
        },
    );
    vec![
        replica_info(),
        next_id(),
        apply(2),
        apply(1),
        next_id(),
        register(1),
        register(3),
        heartbeat(Some(1)),
        heartbeat(None),
        elect(1),
        replica_info(),
        apply(2),
        register(2),
        heartbeat(Some(2)),
        alter((1, 0), "[1,2]"),
        alter((0, 1), "[1,2]"),
        alter((1, 1), "[1,3]"),
        alter((1, 1), "[2]"),
        alter((1, 1), "[1,2]"),
        alter((1, 2), "[1,2]"),
        elect(2),
        register(2),
        replica_info(),
        sync_state_data,
        clean,
        with(RequestCode(1_999), &|_| {}),
        elect_as(3, true),
        elect_as(2, true),
        replica_info(),
    ]
}

/// Crash story: a controller with `controllerStorePath` hands out ids, elects and grows a
/// SyncStateSet (the requests of the differential test), loses the brokers' connection (no
/// master left), is killed with SIGKILL, and starts again on the same directory: it answers
/// GET_REPLICA_INFO and GET_NEXT_BROKER_ID as before, from its replayed event log.
#[test]
fn controller_state_survives_kill_9_through_its_event_log() {
    let dir = TempDir::new("controller-log");
    let conf = dir.path().join("controller.conf");
    let store = dir.path().join("store");
    std::fs::write(&conf, format!("controllerStorePath={}\n", store.display())).unwrap();
    let start = || {
        let args = ["-c", conf.to_str().unwrap(), "--listen", "127.0.0.1:0"];
        let (child, addr, log, _) = common::spawn_server("controller", &args);
        ControllerProcess { child, addr, log }
    };
    let runtime = common::runtime();
    let ask = |addr: SocketAddr, requests: Vec<RemotingCommand>| {
        runtime.block_on(async {
            let (client, _) = connect_tokio(addr, ClientConfig::default()).await.unwrap();
            let mut answers = Vec::new();
            for request in requests {
                answers.push(comparable(&client.request(request).await.unwrap()));
            }
            answers
        })
    };
    let questions = || {
        let all = differential_requests();
        // GET_REPLICA_INFO (the last one of the script asks it) and GET_NEXT_BROKER_ID.
        vec![all[22].clone(), all[1].clone()]
    };
    let mut first = start();
    ask(first.addr, differential_requests());
    let before = wait_for(Duration::from_secs(10), "the master gone", || {
        Some(ask(first.addr, questions())).filter(|a| !a[0].2.contains_key("masterBrokerId"))
    });
    // The script's connection closed, and with it the heartbeats of both brokers: the
    // controller found the master (2, designated) gone and nobody to elect: master epoch 3.
    assert_eq!(before[0].2.get("masterBrokerId"), None, "{before:?}");
    let epoch = before[0].2.get("masterEpoch").map(String::as_str);
    assert_eq!(epoch, Some("3"), "{before:?}");
    assert!(
        before[0].3.contains("\"syncStateSetEpoch\":3"),
        "{before:?}"
    );
    let next = before[1].2.get("nextBrokerId").map(String::as_str);
    assert_eq!(next, Some("3"), "{before:?}");
    common::kill(&mut first.child);
    let second = start();
    let after = ask(second.addr, questions());
    assert_eq!(after, before);
}
