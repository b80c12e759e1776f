//! Three `ferromq controller` processes replicate their state with raft
//! (`controllerDLegerPeers`), and only the leader decides.
//!
//! Stories:
//! - Without brokers: the three elect a leader; every controller's GET_METADATA_INFO names
//!   the leader and its remoting address; a follower answers a decision with
//!   CONTROLLER_NOT_LEADER (2007); ids handed out by the leader survive its SIGKILL (the new
//!   leader continues from them); the killed controller, restarted on its redb store, catches
//!   up with what it missed (its log shows the entry it was not there for); with two of three
//!   down the survivor stops leading and refuses decisions, and when one comes back a leader
//!   is elected and decides again.
//! - With a Java 5.5.0 name server and two Java 5.5.0 brokers in controller mode, whose
//!   `controllerAddr` lists all three controllers: one is elected master and the other joins
//!   its SyncStateSet through the leader. The master broker is killed with SIGKILL and the
//!   leader elects the other (epoch 2), which the name server then routes to as master. The
//!   leader controller is killed, a new one is elected; the killed broker comes back as a
//!   slave and rejoins the SyncStateSet; the master broker is killed again and the new leader
//!   elects the first one (epoch 3). Then two of three controllers are down: no controller
//!   leads, and the master stays master in the route; one controller comes back and a leader
//!   is elected again, which knows the master and its epoch.
//! - Settings that cannot work (peers without `controllerStorePath`, a self id not among the
//!   peers, a peer entry not `id-host:port`) stop the start with the key to fix.
//!
//! Method: real processes on loopback; state is read over the remoting protocol
//! (GET_METADATA_INFO, GET_NEXT_BROKER_ID, GET_REPLICA_INFO, GET_BROKER_CLUSTER_INFO) in
//! bounded polling loops; election times are measured from the kill and printed.

mod common;

use common::controller::{broker_addrs, in_sync_ids, replica_info, request, wait_for};
use common::java::{self, JavaServer};
use common::TempDir;
use ferromq::remoting::headers::{
    ApplyBrokerIdRequestHeader, GetMetadataResponseHeader, GetNextBrokerIdRequestHeader,
    GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader,
};
use ferromq::remoting::{RemotingCommand, RequestCode};
use std::net::SocketAddr;
use std::process::Child;
use std::time::{Duration, Instant};

/// CONTROLLER_NOT_LEADER.
const NOT_LEADER: i32 = 2007;
/// What a raft election may take: 1–2 s of election timeout, a second of lease check,
/// retries after split votes.
const ELECTION_BOUND: Duration = Duration::from_secs(15);

/// `ferromq controller`; killed on drop.
struct ControllerProcess {
    child: Child,
    log: std::sync::mpsc::Receiver<String>,
    /// The lines it wrote before it listened.
    early_log: Vec<String>,
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        common::kill(&mut self.child);
    }
}

/// Three controllers on fixed loopback ports (remoting and raft), each with its store.
struct Cluster {
    dir: TempDir,
    remoting: Vec<u16>,
    peers: String,
    running: Vec<Option<ControllerProcess>>,
}

impl Cluster {
    fn start(name: &str) -> Cluster {
        let dir = TempDir::on_disk(name);
        let remoting: Vec<u16> = (0..3).map(|_| java::free_port()).collect();
        let raft: Vec<u16> = (0..3).map(|_| java::free_port()).collect();
        let peers = (0..3)
            .map(|i| format!("n{i}-127.0.0.1:{}", raft[i]))
            .collect::<Vec<_>>()
            .join(";");
        let mut cluster = Cluster {
            dir,
            remoting,
            peers,
            running: vec![None, None, None],
        };
        for i in 0..3 {
            cluster.start_one(i);
        }
        cluster
    }

    fn start_one(&mut self, i: usize) {
        assert!(self.running[i].is_none(), "controller n{i} runs already");
        let conf = self.dir.path().join(format!("controller-{i}.conf"));
        let store = self.dir.path().join(format!("store-{i}"));
        let text = format!(
            "controllerDLegerGroup=RaftGroup\ncontrollerDLegerPeers={}\n\
             controllerDLegerSelfId=n{i}\ncontrollerStorePath={}\n",
            self.peers,
            store.display()
        );
        std::fs::write(&conf, text).unwrap();
        let listen = format!("127.0.0.1:{}", self.remoting[i]);
        let args = ["-c", conf.to_str().unwrap(), "--listen", &listen];
        let (child, addr, log, early_log) = common::spawn_server("controller", &args);
        assert_eq!(addr, self.addr(i));
        self.running[i] = Some(ControllerProcess {
            child,
            log,
            early_log,
        });
    }

    fn kill(&mut self, i: usize) {
        let mut process = self.running[i].take().expect("a running controller");
        common::kill(&mut process.child);
    }

    fn addr(&self, i: usize) -> SocketAddr {
        ([127, 0, 0, 1], self.remoting[i]).into()
    }

    fn controller_addr(&self) -> String {
        (0..3)
            .map(|i| self.addr(i).to_string())
            .collect::<Vec<_>>()
            .join(";")
    }

    fn alive(&self) -> Vec<usize> {
        (0..3).filter(|i| self.running[*i].is_some()).collect()
    }

    /// The controller that says it leads, when every running one names it (id and remoting
    /// address) in GET_METADATA_INFO.
    fn leader(&self) -> Option<usize> {
        let answers: Vec<(usize, GetMetadataResponseHeader)> = self
            .alive()
            .into_iter()
            .map(|i| Some((i, metadata(self.addr(i))?)))
            .collect::<Option<_>>()?;
        let leaders: Vec<usize> = answers
            .iter()
            .filter(|(_, header)| header.is_leader)
            .map(|(i, _)| *i)
            .collect();
        let [leader] = leaders[..] else {
            return None;
        };
        let name = format!("n{leader}");
        let address = self.addr(leader).to_string();
        let agreed = answers.iter().all(|(_, header)| {
            header.controller_leader_id.as_deref() == Some(name.as_str())
                && header.controller_leader_address.as_deref() == Some(address.as_str())
                && header.group.as_deref() == Some("RaftGroup")
        });
        agreed.then_some(leader)
    }

    fn wait_leader(&self, what: &str) -> usize {
        wait_for(ELECTION_BOUND, what, || self.leader())
    }
}

#[test]
fn three_controllers_replicate_and_only_the_leader_decides() {
    let mut cluster = Cluster::start("controller-raft");
    let started = Instant::now();
    let leader = cluster.wait_leader("a first leader");
    eprintln!("first leader n{leader} after {:?}", started.elapsed());
    let meta = metadata(cluster.addr(leader)).unwrap();
    let peers = meta.peers.unwrap_or_default();
    assert_eq!(peers.matches(";").count(), 3, "{peers}");
    assert!(peers.starts_with("n0:127.0.0.1:"), "{peers}");

    let follower = (leader + 1) % 3;
    let refused = request(cluster.addr(follower), next_id_request()).unwrap();
    assert_eq!(refused.code, NOT_LEADER, "{refused:?}");
    assert_eq!(
        refused.remark.as_deref(),
        Some("The controller is not in leader state")
    );
    assert_eq!(apply_id(cluster.addr(leader), 1), 0);
    assert_eq!(next_id(cluster.addr(leader)), Some(2));

    let killed = Instant::now();
    cluster.kill(leader);
    let second = cluster.wait_leader("a leader after the kill");
    eprintln!(
        "kill -9 of leader n{leader}: n{second} leads after {:?}",
        killed.elapsed()
    );
    assert_ne!(second, leader);
    assert_eq!(next_id(cluster.addr(second)), Some(2));
    assert_eq!(apply_id(cluster.addr(second), 2), 0);

    // The old leader comes back on its store and catches up with id 2, which it missed.
    cluster.start_one(leader);
    let restarted = cluster.running[leader].as_ref().unwrap();
    let caught_up = restarted
        .early_log
        .iter()
        .any(|line| line.contains("broker_id: 2"))
        || common::wait_for_line(&restarted.log, "broker_id: 2", ELECTION_BOUND).is_some();
    assert!(caught_up, "n{leader} did not catch up with id 2");
    let third = cluster.wait_leader("a leader with all three up");

    // Two of three down: the survivor does not lead and refuses decisions.
    let survivor = (third + 1) % 3;
    for i in cluster.alive() {
        if i != survivor {
            cluster.kill(i);
        }
    }
    let down = Instant::now();
    wait_for(ELECTION_BOUND, "the survivor not leading", || {
        metadata(cluster.addr(survivor)).filter(|meta| !meta.is_leader)
    });
    let refused = request(cluster.addr(survivor), next_id_request()).unwrap();
    assert_eq!(refused.code, NOT_LEADER, "{refused:?}");
    eprintln!("two of three down: no leader {:?} after", down.elapsed());
    let watch = Instant::now();
    while watch.elapsed() < Duration::from_secs(3) {
        let meta = metadata(cluster.addr(survivor)).unwrap();
        assert!(!meta.is_leader, "a lone controller leads");
        std::thread::sleep(Duration::from_millis(100));
    }

    // One comes back: a leader again, with the state of before.
    let back = (survivor + 1) % 3;
    let returned = Instant::now();
    cluster.start_one(back);
    let fourth = cluster.wait_leader("a leader after one came back");
    eprintln!("one back: n{fourth} leads after {:?}", returned.elapsed());
    assert_eq!(next_id(cluster.addr(fourth)), Some(3));
    assert_eq!(apply_id(cluster.addr(fourth), 3), 0);
}

/// Java 5.5.0 brokers listing the three controllers in `controllerAddr` fail over through
/// whichever leads (see the module doc).
#[test]
fn java5_group_fails_over_under_three_raft_controllers() {
    let kit = java::kit5();
    let mut cluster = Cluster::start("controller-raft-java");
    let leader = cluster.wait_leader("a first leader");
    let dir = TempDir::on_disk("controller-raft-brokers");
    let namesrv = JavaServer::namesrv_on(&kit, dir.path());
    let namesrv_addr: SocketAddr = ([127, 0, 0, 1], namesrv.port).into();
    let conf = format!(
        "enableControllerMode=true\ncontrollerAddr={}\nbrokerId=-1\nbrokerRole=SLAVE\n\
         fetchNamesrvAddrByAddressServer=false\nallAckInSyncStateSet=true\n\
         controllerHeartBeatTimeoutMills=6000\n",
        cluster.controller_addr()
    );
    let start = |store: &str| {
        let store = dir.path().join(store);
        JavaServer::try_broker_on(&kit, dir.path(), namesrv.port, &store, &conf, "")
            .unwrap_or_else(|text| panic!("{text}"))
    };
    let mut brokers = [start("store-1"), start("store-2")];
    let first_master = wait_for(Duration::from_secs(90), "a master", || {
        replica_info(cluster.addr(leader))
            .and_then(|(header, _)| header.master_broker_id)
            .filter(|id| [1, 2].contains(id))
    });
    let index = |id: i64| usize::try_from(id - 1).unwrap();
    wait_for(Duration::from_secs(60), "SyncStateSet {1, 2}", || {
        replica_info(cluster.addr(leader)).filter(|(_, body)| in_sync_ids(body) == [1, 2])
    });
    wait_for(Duration::from_secs(60), "both in the route", || {
        broker_addrs(namesrv_addr).filter(|addrs| addrs.len() == 2)
    });

    // The master broker dies under the first leader.
    let second_master = 3 - first_master;
    common::kill(&mut brokers[index(first_master)].child);
    let epoch = fail_over(&cluster, leader, namesrv_addr, &brokers, second_master);
    assert_eq!(epoch, 2);

    // The leader controller dies; the killed broker comes back as a slave under the new one.
    let killed = Instant::now();
    cluster.kill(leader);
    let new_leader = cluster.wait_leader("a leader after the kill");
    eprintln!(
        "controller leader killed: n{new_leader} leads after {:?}",
        killed.elapsed()
    );
    brokers[index(first_master)] = start(&format!("store-{first_master}"));
    wait_for(Duration::from_secs(90), "SyncStateSet {1, 2} again", || {
        replica_info(cluster.addr(new_leader)).filter(|(_, body)| in_sync_ids(body) == [1, 2])
    });

    // The master broker dies under the new leader.
    common::kill(&mut brokers[index(second_master)].child);
    let epoch = fail_over(&cluster, new_leader, namesrv_addr, &brokers, first_master);
    assert_eq!(epoch, 3);

    // Two of three controllers down: nobody leads, the master keeps its role.
    let master_addr = brokers[index(first_master)].addr();
    let other = cluster
        .alive()
        .into_iter()
        .find(|i| *i != new_leader)
        .unwrap();
    cluster.kill(other);
    wait_for(ELECTION_BOUND, "no controller leading", || {
        metadata(cluster.addr(new_leader)).filter(|meta| !meta.is_leader)
    });
    let refused = request(cluster.addr(new_leader), replica_info_request()).unwrap();
    assert_eq!(refused.code, NOT_LEADER, "{refused:?}");
    let routes = broker_addrs(namesrv_addr).unwrap();
    assert_eq!(routes.get(&0), Some(&master_addr), "{routes:?}");

    // One comes back: a leader again, which knows the master and its epoch.
    cluster.start_one(other);
    let back = cluster.wait_leader("a leader after one came back");
    let (header, _) = wait_for(ELECTION_BOUND, "the replica info", || {
        replica_info(cluster.addr(back))
    });
    assert_eq!(header.master_broker_id, Some(first_master));
    assert_eq!(header.master_epoch, Some(3));
    let routes = broker_addrs(namesrv_addr).unwrap();
    assert_eq!(routes.get(&0), Some(&master_addr), "{routes:?}");
}

/// Waits until `leader` has elected broker `id` and the name server routes to it as master;
/// returns the master epoch.
fn fail_over(
    cluster: &Cluster,
    leader: usize,
    namesrv: SocketAddr,
    brokers: &[JavaServer; 2],
    id: i64,
) -> i32 {
    let since = Instant::now();
    let bound = Duration::from_secs(30);
    let addr = brokers[usize::try_from(id - 1).unwrap()].addr();
    let (elected, _) = wait_for(bound, "the other broker elected", || {
        replica_info(cluster.addr(leader)).filter(|(h, _)| h.master_broker_id == Some(id))
    });
    assert_eq!(elected.master_address.as_ref(), Some(&addr));
    wait_for(bound, "the other broker as master in the route", || {
        broker_addrs(namesrv).filter(|addrs| addrs.get(&0) == Some(&addr))
    });
    eprintln!(
        "master broker killed: broker {id} master under n{leader} after {:?}",
        since.elapsed()
    );
    elected.master_epoch.unwrap_or_default()
}

fn metadata(addr: SocketAddr) -> Option<GetMetadataResponseHeader> {
    let command = RemotingCommand::request(RequestCode::CONTROLLER_GET_METADATA_INFO);
    request(addr, command)
        .filter(|r| r.code == 0)?
        .decode_header()
        .ok()
}

fn next_id_request() -> RemotingCommand {
    RemotingCommand::request_with_header(
        RequestCode::CONTROLLER_GET_NEXT_BROKER_ID,
        &GetNextBrokerIdRequestHeader {
            cluster_name: "RaftCluster".to_owned(),
            broker_name: "broker-r".to_owned(),
        },
    )
}

fn next_id(addr: SocketAddr) -> Option<i64> {
    let response = request(addr, next_id_request()).filter(|r| r.code == 0)?;
    let header: GetNextBrokerIdResponseHeader = response.decode_header().ok()?;
    header.next_broker_id
}

/// CONTROLLER_APPLY_BROKER_ID of `id` in `broker-r`; the response code.
fn apply_id(addr: SocketAddr, id: i64) -> i32 {
    let command = RemotingCommand::request_with_header(
        RequestCode::CONTROLLER_APPLY_BROKER_ID,
        &ApplyBrokerIdRequestHeader {
            cluster_name: "RaftCluster".to_owned(),
            broker_name: "broker-r".to_owned(),
            applied_broker_id: id,
            register_check_code: format!("127.0.0.1:{};1700000000000", 31_000 + id),
        },
    );
    request(addr, command).expect("an answer").code
}

fn replica_info_request() -> RemotingCommand {
    let header = GetReplicaInfoRequestHeader {
        broker_name: "broker-a".to_owned(),
    };
    RemotingCommand::request_with_header(RequestCode::CONTROLLER_GET_REPLICA_INFO, &header)
}

/// Peers without a store path, or a self id not among the peers, stop the start with the
/// key to fix.
#[test]
fn raft_settings_that_cannot_work_stop_the_start_with_the_key_to_fix() {
    let dir = TempDir::new("controller-raft-conf");
    let cases = [
        (
            "controllerDLegerPeers=n0-127.0.0.1:1\n",
            "needs controllerStorePath",
        ),
        (
            "controllerDLegerPeers=n0-127.0.0.1:1\ncontrollerDLegerSelfId=n7\n\
             controllerStorePath=store\n",
            "controllerDLegerSelfId n7 is not among controllerDLegerPeers",
        ),
        (
            "controllerDLegerPeers=n0:127.0.0.1:1\n",
            "is not id-host:port",
        ),
    ];
    for (text, error) in cases {
        let conf = dir.path().join("controller.conf");
        std::fs::write(&conf, text).unwrap();
        let mut child = common::ferromq_command()
            .current_dir(dir.path())
            .args([
                "controller",
                "-c",
                conf.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let status = common::wait_exit(&mut child, Duration::from_secs(30));
        if status.is_none() {
            common::kill(&mut child);
        }
        let mut stderr = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
        assert!(
            status.is_some_and(|s| !s.success()),
            "{text}: {status:?} {stderr}"
        );
        assert!(stderr.contains(error), "{text}: {stderr}");
    }
}
