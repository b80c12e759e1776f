//! Reading a controller group's state in tests: CONTROLLER_GET_REPLICA_INFO from a
//! controller, a broker group's addresses from a name server's cluster info, and a bounded
//! poll to wait on either.

use ferromq::remoting::client::{connect_tokio, ClientConfig};
use ferromq::remoting::headers::{GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader};
use ferromq::remoting::{RemotingCommand, RequestCode};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// `ferromq controller`; killed on drop.
pub struct ControllerProcess {
    pub child: std::process::Child,
    pub addr: SocketAddr,
    /// Its stderr lines, kept open while it runs (a closed pipe stops its logging).
    pub log: std::sync::mpsc::Receiver<String>,
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        super::kill(&mut self.child);
    }
}

/// Polls `probe` every 100 ms until it gives a value, for at most `timeout`.
pub fn wait_for<T>(timeout: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(Instant::now() < deadline, "no {what} after {timeout:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One request on a connection of its own; `None` when it cannot be made or answered in
/// 10 s.
pub fn request(addr: SocketAddr, request: RemotingCommand) -> Option<RemotingCommand> {
    request_within(addr, request, Duration::from_secs(10))
}

/// [`request`] with an answer allowed to take `timeout`.
pub fn request_within(
    addr: SocketAddr,
    request: RemotingCommand,
    timeout: Duration,
) -> Option<RemotingCommand> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    runtime.block_on(async {
        let connecting = connect_tokio(addr, ClientConfig::default());
        let (client, _) = tokio::time::timeout(Duration::from_secs(3), connecting)
            .await
            .ok()?
            .ok()?;
        let answer = client.request(request);
        tokio::time::timeout(timeout, answer).await.ok()?.ok()
    })
}

/// CONTROLLER_GET_REPLICA_INFO of `broker-a`: its header and SyncStateSet body.
pub fn replica_info(addr: SocketAddr) -> Option<(GetReplicaInfoResponseHeader, serde_json::Value)> {
    let header = GetReplicaInfoRequestHeader {
        broker_name: "broker-a".to_owned(),
    };
    let command =
        RemotingCommand::request_with_header(RequestCode::CONTROLLER_GET_REPLICA_INFO, &header);
    let response = request(addr, command).filter(|r| r.code == 0)?;
    let body = serde_json::from_slice(&response.body).ok()?;
    Some((response.decode_header().ok()?, body))
}

/// The broker ids of a SyncStateSet body.
pub fn in_sync_ids(body: &serde_json::Value) -> Vec<i64> {
    body["syncStateSet"]
        .as_array()
        .map(|ids| ids.iter().filter_map(serde_json::Value::as_i64).collect())
        .unwrap_or_default()
}

/// `broker-a`'s addresses by broker id, from the name server's cluster info.
pub fn broker_addrs(namesrv: SocketAddr) -> Option<BTreeMap<i64, String>> {
    let command = RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO);
    let response = request(namesrv, command).filter(|r| r.code == 0)?;
    let info = ferromq::config::fastjson::parse_lenient(&response.body).ok()?;
    let addrs = info["brokerAddrTable"]["broker-a"]["brokerAddrs"].as_object()?;
    addrs
        .iter()
        .map(|(id, addr)| Some((id.parse().ok()?, addr.as_str()?.to_owned())))
        .collect()
}

/// The Java 5.x controller: a name server of `kit` with the controller inside
/// (`enableControllerInNamesrv=true`), one DLedger peer answering controller requests on
/// `port`, `extra` lines appended to its config; killed on drop.
pub struct JavaController {
    child: std::process::Child,
    /// Where controller requests go.
    pub addr: SocketAddr,
}

impl JavaController {
    pub fn start(kit: &std::path::Path, dir: &std::path::Path, extra: &str) -> JavaController {
        use ferromq::remoting::headers::GetMetadataResponseHeader;
        let port = super::java::free_port();
        let home = dir.join("java-controller");
        std::fs::create_dir_all(&home).expect("controller home");
        let conf = home.join("namesrv.conf");
        std::fs::write(
            &conf,
            format!(
                "listenPort={}\nbindAddress=127.0.0.1\nenableControllerInNamesrv=true\n\
                 controllerDLegerGroup=group1\ncontrollerDLegerPeers=n0-127.0.0.1:{port}\n\
                 controllerDLegerSelfId=n0\ncontrollerStorePath={}\n{extra}\n",
                super::java::free_port(),
                home.join("store").display()
            ),
        )
        .expect("write namesrv.conf");
        let out = home.join("out.txt");
        let file = std::fs::File::create(&out).expect("create out.txt");
        let child = std::process::Command::new("bash")
            .arg(kit.join("bin/java-run"))
            .args(["", "org.apache.rocketmq.namesrv.NamesrvStartup", "-c"])
            .arg(&conf)
            .env("RMQ_LOGDIR", &home)
            .stdout(file.try_clone().expect("clone out.txt"))
            .stderr(file)
            .spawn()
            .expect("spawn the Java controller");
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let mut controller = JavaController { child, addr };
        wait_for(Duration::from_secs(120), "Java controller boot", || {
            let text = std::fs::read_to_string(&out).unwrap_or_default();
            let exited = controller.child.try_wait().ok().flatten();
            assert!(exited.is_none(), "the Java controller exited:\n{text}");
            text.contains("ControllerManager boot success")
                .then_some(())
        });
        // DLedger elects its leader after the boot line; until then every request is refused
        // with CONTROLLER_NOT_LEADER.
        wait_for(Duration::from_secs(60), "Java controller leader", || {
            let command = RemotingCommand::request(RequestCode::CONTROLLER_GET_METADATA_INFO);
            let response = request(addr, command).filter(|r| r.code == 0)?;
            let header: GetMetadataResponseHeader = response.decode_header().ok()?;
            header.is_leader.then_some(())
        });
        controller
    }
}

impl Drop for JavaController {
    fn drop(&mut self) {
        super::kill(&mut self.child);
    }
}

/// The bodies of every message of `topic`/`queue_id` a broker serves, in queue order
/// (PULL_MESSAGE from offset 0 until it answers anything but FOUND); `None` when the broker
/// cannot be reached.
pub fn pull_bodies(broker: SocketAddr, topic: &str, queue_id: i32) -> Option<Vec<Vec<u8>>> {
    use ferromq::remoting::headers::PullMessageResponseHeader;
    use ferromq::store::message::{decode_record, Record};
    let mut offset = 0;
    let mut bodies = Vec::new();
    loop {
        let command = RemotingCommand::request_with_header(
            RequestCode::PULL_MESSAGE,
            &super::pull_header("drill_reader", topic, queue_id, offset),
        );
        let response = request(broker, command)?;
        if response.code != 0 {
            return Some(bodies);
        }
        let header: PullMessageResponseHeader = response.decode_header().ok()?;
        let mut at = 0;
        while at < response.body.len() {
            let Ok(Record::Message { record, size }) = decode_record(&response.body[at..], false)
            else {
                panic!("{broker}: not a record at {at} of a pull at {offset}");
            };
            bodies.push(record.body.to_vec());
            at += size;
        }
        if header.next_begin_offset <= offset {
            return Some(bodies);
        }
        offset = header.next_begin_offset;
    }
}
