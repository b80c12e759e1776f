//! ferromq brokers in controller mode fail over under the ferromq controller and under the
//! Java 5.5.0 controller (inside its name server).
//!
//! Story: a ferromq name server, `ferromq controller`, and three ferromq brokers of one group
//! (`broker-a`) with `enableControllerMode=true`. The first to start gets id 1 from the
//! controller (its `brokerIdentity` file says so) and is elected master: it takes puts and
//! registers with the name server as id 0; the others get ids 2 and 3, refuse puts, follow
//! it and register under their ids. The Java 5.5.0 client sends and reads back through the
//! name server, and both slaves get every message. Then the master is killed with SIGKILL:
//! the controller elects a slave, tells it (NOTIFY_BROKER_ROLE_CHANGED), and it takes puts
//! and registers as id 0 without a restart; the other slave follows it; the client sends and
//! reads again. The killed broker restarts over its store, keeps id 1 and rejoins as a
//! slave of the new master, and takes what was sent while it was down.
//!
//! Each controller runs with `enableElectUncleanMaster=true`: ferromq masters do not report
//! their slaves to the controller's SyncStateSet yet, so the new master is chosen among the
//! live brokers by epoch and CommitLog end; the test waits until both slaves hold every
//! message before the kill.
//!
//! Method: real processes on loopback; state is read over the remoting protocol
//! (CONTROLLER_GET_REPLICA_INFO, GET_BROKER_CLUSTER_INFO, GET_MAX_OFFSET) in bounded polls.

mod common;

use common::controller::{broker_addrs, replica_info, request, wait_for, JavaController};
use common::java::{self, Serialize};
use common::{BrokerProcess, NamesrvProcess, TempDir};
use ferromq::remoting::headers::{GetMaxOffsetRequestHeader, OffsetResponseHeader};
use ferromq::remoting::{RemotingCommand, RequestCode};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// The brokers' `controllerHeartBeatTimeoutMills`.
const HEARTBEAT_TIMEOUT: Duration = Duration::from_secs(4);
/// What an election may take beyond the heartbeat timeout: the controller's scan
/// (`scanNotActiveBrokerInterval`, 1 s here) and the slave's next GET_REPLICA_INFO
/// (`syncBrokerMetadataPeriod`, 1 s here) when the notice is lost.
const ELECTION_BOUND: Duration = Duration::from_secs(5);
/// Messages each round trip sends.
const COUNT: i64 = 10;

/// `ferromq controller`; killed on drop.
struct ControllerProcess {
    child: Child,
    addr: SocketAddr,
    _log: std::sync::mpsc::Receiver<String>,
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        common::kill(&mut self.child);
    }
}

fn start_controller(dir: &Path) -> ControllerProcess {
    let conf = dir.join("controller.conf");
    std::fs::write(
        &conf,
        "enableElectUncleanMaster=true\nscanNotActiveBrokerInterval=1000\n\
         scanInactiveMasterInterval=1000\n",
    )
    .expect("write controller.conf");
    let conf = conf.to_str().expect("utf-8 path").to_owned();
    let args = ["-c", &conf, "--listen", "127.0.0.1:0"];
    let (child, addr, log, _) = common::spawn_server("controller", &args);
    ControllerProcess {
        child,
        addr,
        _log: log,
    }
}

fn broker_conf(namesrv: SocketAddr, controller: SocketAddr) -> String {
    format!(
        "brokerClusterName=FailoverCluster\nbrokerName=broker-a\nnamesrvAddr={namesrv}\n\
         enableControllerMode=true\ncontrollerAddr={controller}\n\
         controllerHeartBeatTimeoutMills={}\nsyncBrokerMetadataPeriod=1000\n\
         registerNameServerPeriod=1000\n",
        HEARTBEAT_TIMEOUT.as_millis()
    )
}

#[test]
fn ferromq_brokers_fail_over_under_the_ferromq_controller() {
    let dir = TempDir::on_disk("controller-mode");
    let controller = start_controller(dir.path());
    fail_over(&dir, controller.addr);
}

#[test]
fn ferromq_brokers_fail_over_under_the_java_controller() {
    let dir = TempDir::on_disk("controller-mode-java");
    let extra = "enableElectUncleanMaster=true
scanNotActiveBrokerInterval=1000
                 scanInactiveMasterInterval=1000
";
    let controller = JavaController::start(&java::kit5(), dir.path(), extra);
    fail_over(&dir, controller.addr);
}

/// The story of the module's doc, under the controller at `controller`.
fn fail_over(dir: &TempDir, controller: SocketAddr) {
    let kit = java::kit5();
    let classes = java::classes5();
    let namesrv = NamesrvProcess::start("");
    let conf = broker_conf(namesrv.addr, controller);
    let store = |n: u32| dir.path().join(format!("store-{n}"));

    let mut first = BrokerProcess::start(&store(1), &conf);
    let (elected, _) = wait_for(Duration::from_secs(30), "broker 1 elected", || {
        replica_info(controller).filter(|(header, _)| header.master_broker_id == Some(1))
    });
    assert_eq!(elected.master_address, Some(first.addr.to_string()));
    let identity = std::fs::read_to_string(store(1).join("brokerIdentity")).expect("identity");
    assert_eq!(identity.trim(), "FailoverCluster#broker-a#1");
    let second = BrokerProcess::start(&store(2), &conf);
    let third = BrokerProcess::start(&store(3), &conf);
    let routes = wait_for(Duration::from_secs(30), "three brokers routed", || {
        broker_addrs(namesrv.addr)
            .filter(|addrs| addrs.len() == 3 && addrs.get(&0) == Some(&first.addr.to_string()))
    });
    assert_eq!(routes.get(&2), Some(&second.addr.to_string()), "{routes:?}");
    assert_eq!(routes.get(&3), Some(&third.addr.to_string()), "{routes:?}");
    // A slave refuses puts as a 4.x slave does.
    let refused = request(second.addr, common::send_request("Refused", 0, b"no", ""))
        .expect("the slave answers");
    assert_ne!(refused.code, 0, "a slave took a put");

    round_trip(&kit, &classes, namesrv.addr, "ModeBefore");
    for slave in [&second, &third] {
        wait_for(
            Duration::from_secs(30),
            "the slave has every message",
            || (messages(slave.addr, "ModeBefore") == COUNT).then_some(()),
        );
    }

    let killed = Instant::now();
    common::kill(&mut first.child);
    let (elected, _) = wait_for(
        HEARTBEAT_TIMEOUT + ELECTION_BOUND,
        "a slave elected",
        || {
            replica_info(controller)
                .filter(|(header, _)| matches!(header.master_broker_id, Some(2 | 3)))
        },
    );
    let election = killed.elapsed();
    assert_eq!(elected.master_epoch, Some(2));
    let (new_master, other) = match elected.master_broker_id {
        Some(2) => (&second, &third),
        _ => (&third, &second),
    };
    assert_eq!(elected.master_address, Some(new_master.addr.to_string()));
    wait_for(ELECTION_BOUND, "the new master routed as id 0", || {
        broker_addrs(namesrv.addr)
            .filter(|addrs| addrs.get(&0) == Some(&new_master.addr.to_string()))
    });
    let routed = killed.elapsed();
    eprintln!("kill -9: elected {election:?} after, routed as master {routed:?} after");
    round_trip(&kit, &classes, namesrv.addr, "ModeAfter");
    assert_eq!(messages(new_master.addr, "ModeBefore"), COUNT);
    wait_for(Duration::from_secs(30), "the other slave follows", || {
        (messages(other.addr, "ModeAfter") == COUNT).then_some(())
    });

    // The old master comes back over its store: id 1 still, a slave of the new master.
    let back = BrokerProcess::start(&store(1), &conf);
    wait_for(
        Duration::from_secs(30),
        "the old master rejoins as a slave",
        || broker_addrs(namesrv.addr).filter(|addrs| addrs.get(&1) == Some(&back.addr.to_string())),
    );
    wait_for(Duration::from_secs(30), "the old master catches up", || {
        (messages(back.addr, "ModeAfter") == COUNT).then_some(())
    });
    assert_eq!(messages(back.addr, "ModeBefore"), COUNT);
}

/// The Java 5.x client sends and reads back messages of a new topic through the name server.
fn round_trip(kit: &Path, classes: &Path, namesrv: SocketAddr, topic: &str) {
    let output = java::run_java_on(
        kit,
        classes,
        "Java5RoundTrip",
        &[&namesrv.to_string(), topic, &COUNT.to_string()],
        Serialize::Json,
        "",
        Duration::from_secs(120),
    );
    output.assert_passed(topic);
    assert_eq!(output.figure("send_ok"), COUNT as f64);
    assert_eq!(output.figure("received_all"), COUNT as f64);
}

/// Messages of `topic` a broker holds: the sum of its queues' max offsets (GET_MAX_OFFSET).
fn messages(broker: SocketAddr, topic: &str) -> i64 {
    (0..8)
        .filter_map(|queue_id| {
            let header = GetMaxOffsetRequestHeader {
                topic: topic.to_owned(),
                queue_id,
                committed: None,
            };
            let command =
                RemotingCommand::request_with_header(RequestCode::GET_MAX_OFFSET, &header);
            let response = request(broker, command).filter(|r| r.code == 0)?;
            let answer: OffsetResponseHeader = response.decode_header().ok()?;
            Some(answer.offset)
        })
        .sum()
}
