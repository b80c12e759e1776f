//! The hosts harness (`tests/common/netns.rs`) proven with real processes: a name server and
//! a broker each on its own network namespace, the test process as the client in the root
//! namespace, reaching them over a bridge.
//!
//! Method: every fault is a kernel fact, not a simulation.
//!
//! - A cut is the host's veth set down.
//! - A lost process is kill -9 of everything in its namespace: the kernel still sends its
//!   FIN, so the name server drops the broker when the connection closes.
//! - The loss of a host is the same kill -9 while its link is cut: no FIN reaches anyone, as
//!   when a machine dies, so only the name server's expiry scan can drop the broker.
//! - A partition between two hosts is a `prohibit` route in each.
//! - A slow link is `tc netem`, or a `tbf` rate limit where the kernel has no netem.
//!
//! Every timing-dependent step waits on a deadline, never on a fixed sleep. Each test ends
//! by checking that the machine has no namespace or link of its network left, including
//! after a test that panics.

mod common;

use common::netns::{leftovers, with_network, Host, Network, BROKER_PORT, NAMESRV_PORT};
use common::{runtime, wait_for_line, TempDir};
use ferromq::client::{ClientConfig, ClientError, ClientInstance, Message, Producer, SendStatus};
use ferromq::remoting::SerializeType;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Bound of every wait for an event (registration, recovery, expiry).
const DEADLINE: Duration = Duration::from_secs(20);
/// A producer's time limit per send; a send to a cut host fails within it.
const SEND_TIMEOUT: Duration = Duration::from_secs(3);
/// The name server's `brokerExpiredTimeoutMillis` in these tests.
const BROKER_EXPIRED_TIMEOUT: Duration = Duration::from_secs(4);
/// The broker's `registerNameServerPeriod` in these tests.
const REGISTER_PERIOD: Duration = Duration::from_millis(500);

#[test]
fn broker_host_cut_fails_sends_heal_recovers_kill_and_loss_drop_route() {
    with_network("cut_heal_loss", |network| {
        let ns = network.host("ns");
        let b1 = network.host("b1");
        let namesrv = ns.start_namesrv(&format!(
            "scanNotActiveBrokerInterval=200\nbrokerExpiredTimeoutMillis={}",
            BROKER_EXPIRED_TIMEOUT.as_millis()
        ));
        assert_eq!(namesrv.addr, SocketAddr::new(ns.addr(), NAMESRV_PORT));
        let dir = TempDir::on_disk("netns-b1");
        let store = dir.path().join("store");
        let broker_config = format!(
            "brokerName=netns-b1\nnamesrvAddr={}\nregisterNameServerPeriod={}",
            namesrv.addr,
            REGISTER_PERIOD.as_millis()
        );
        let broker = b1.start_broker(&store, &broker_config);
        let b1_addr = SocketAddr::new(b1.addr(), BROKER_PORT);
        assert_eq!(broker.addr, b1_addr);

        runtime().block_on(async {
            let mut config = ClientConfig::new(&namesrv.addr.to_string());
            config.request_timeout = SEND_TIMEOUT;
            let options = ferromq::client::ProducerOptions {
                send_msg_timeout: SEND_TIMEOUT,
                retry_times_when_send_failed: 0,
                ..ferromq::client::ProducerOptions::default()
            };
            let producer = Producer::with_config("netns-producer", config, options);
            wait_registration(producer.instance(), b1_addr, true).await;
            producer.start().await.expect("producer starts");
            // The first send also creates the topic on a broker just started: on a busy
            // machine it may miss its time limit, so it gets a few tries.
            let took = send_until_ok(&producer, "before").await;
            eprintln!("sent through the bridge to {b1_addr} within {took:?}");

            b1.cut();
            let started = Instant::now();
            let failed = producer.send(Message::new("NetnsT", "cut")).await;
            let elapsed = started.elapsed();
            assert!(failed.is_err(), "a send to a cut host fails: {failed:?}");
            assert!(
                elapsed < SEND_TIMEOUT * 3,
                "failed after {elapsed:?}: no hang"
            );
            eprintln!("send to cut b1 failed after {elapsed:?}: {failed:?}");

            b1.heal();
            let took = send_until_ok(&producer, "healed").await;
            eprintln!("sends recovered {took:?} after heal");

            // The loss of the process on a live host: its FIN reaches the name server, which
            // drops the broker at once.
            while namesrv.log.try_recv().is_ok() {}
            b1.kill_all();
            let line = wait_for_line(&namesrv.log, "broker connection closed", DEADLINE);
            let line = line.expect("the name server drops a broker whose connection closed");
            assert!(line.contains(&b1_addr.to_string()), "{line}");
            wait_registration(producer.instance(), b1_addr, false).await;
            drop(broker);
            let _restarted = b1.start_broker(&store, &broker_config);
            wait_registration(producer.instance(), b1_addr, true).await;

            // The loss of the host: its link goes first, so no FIN tells the name server;
            // only the expiry scan can drop the broker.
            b1.cut();
            while namesrv.log.try_recv().is_ok() {}
            let lost = Instant::now();
            b1.kill_all();
            let line = wait_for_line(&namesrv.log, "broker expired", DEADLINE);
            let expired_after = lost.elapsed();
            let line = line.expect("the name server expires the lost broker");
            assert!(line.contains(&b1_addr.to_string()), "{line}");
            assert!(
                expired_after + REGISTER_PERIOD >= BROKER_EXPIRED_TIMEOUT,
                "dropped after {expired_after:?}, before its expiry: not the expiry path"
            );
            wait_registration(producer.instance(), b1_addr, false).await;
            eprintln!("ns dropped the lost b1 {expired_after:?} after the loss");
            producer.shutdown().await;
        });
    });
}

#[test]
fn slow_link_shows_in_round_trip_and_unslow_removes_it() {
    with_network("slow", |network| {
        let b1 = network.host("b1");
        let dir = TempDir::on_disk("netns-slow");
        let broker = b1.start_broker(&dir.path().join("store"), "brokerName=netns-slow");
        runtime().block_on(async {
            let client = common::connect(broker.addr, SerializeType::Json).await;
            wait_fast(&client).await;

            match b1.slow("delay 200ms") {
                Ok(()) => {
                    let slow = round_trip(&client).await;
                    eprintln!("round trip with netem delay 200ms: {slow:?}");
                    assert!(slow >= Duration::from_millis(200), "{slow:?}");
                }
                Err(unavailable) => {
                    // TODO(netns): this kernel has no netem; the harness says so loudly, and
                    // the slow link below is a bandwidth limit instead of a delay.
                    eprintln!("NETEM UNAVAILABLE: {unavailable}");
                    assert!(unavailable.to_string().contains("CONFIG_NET_SCH_NETEM"));
                }
            }
            b1.unslow();
            wait_fast(&client).await;

            // 4 KiB at 64 kbit/s past a 1600-byte bucket: about 0.3 s one way.
            b1.throttle("64kbit");
            let throttled = round_trip(&client).await;
            eprintln!("round trip throttled to 64 kbit/s: {throttled:?}");
            assert!(throttled >= Duration::from_millis(200), "{throttled:?}");
            b1.unslow();
            wait_fast(&client).await;
        });
    });
}

#[test]
fn partition_from_blocks_tcp_between_two_hosts_only() {
    with_network("partition", |network| {
        let a = network.host("a");
        let b = network.host("b");
        let namesrv = b.start_namesrv("");
        assert!(tcp_connects_from(&a, namesrv.addr), "a reaches b");

        a.partition_from(&b);
        assert!(
            !tcp_connects_from(&a, namesrv.addr),
            "a no longer reaches b"
        );
        TcpStream::connect_timeout(&namesrv.addr, Duration::from_secs(5))
            .expect("the test process still reaches b");
        let listener = std::net::TcpListener::bind((network.gateway(), 0)).expect("bind");
        let root = listener.local_addr().expect("listener address");
        assert!(
            tcp_connects_from(&a, root),
            "a still reaches the test process"
        );

        a.reconnect(&b);
        assert!(tcp_connects_from(&a, namesrv.addr), "a reaches b again");
    });
}

#[test]
fn teardown_kills_stray_processes_and_leaves_nothing() {
    let network = Network::new("teardown");
    let a = network.host("a");
    let b = network.host("b");
    let mut stray = a
        .command("sleep")
        .arg("600")
        .spawn()
        .expect("spawn sleep on a");
    a.cut();
    a.partition_from(&b);
    b.throttle("1mbit");
    let names = network.names();
    assert_eq!(
        names.len(),
        5,
        "a bridge, two namespaces, two veths: {names:?}"
    );
    assert_eq!(leftovers(&names), names, "all made");
    drop(network);
    assert_eq!(leftovers(&names), Vec::<String>::new());
    let status = common::wait_exit(&mut stray, Duration::from_secs(5));
    assert!(status.is_some(), "the stray process on a was killed");
}

#[test]
fn teardown_after_a_panicking_test_leaves_nothing() {
    let made = std::sync::Mutex::new(None);
    let outcome = std::panic::catch_unwind(|| {
        let network = Network::new("panicking");
        let a = network.host("a");
        let stray = a.command("sleep").arg("600").spawn();
        network.host("b").cut();
        *made.lock().unwrap() = Some((network.names(), stray.expect("spawn sleep on a")));
        panic!("on purpose, with the network up");
    });
    assert!(outcome.is_err(), "the closure panicked");
    let made = made
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let (names, mut stray) = made.expect("the network was made before the panic");
    assert_eq!(names.len(), 5, "{names:?}");
    assert_eq!(leftovers(&names), Vec::<String>::new());
    let status = common::wait_exit(&mut stray, Duration::from_secs(5));
    assert!(status.is_some(), "the stray process on a was killed");
}

#[test]
fn network_new_removes_leftovers_of_dead_runs() {
    // No process can have a pid of pid_max or more: these are provably dead.
    let pid_max = std::fs::read_to_string("/proc/sys/kernel/pid_max").expect("read pid_max");
    let dead_pid: u32 = pid_max.trim().parse().expect("pid_max is a number");
    let netns = format!("fmq{dead_pid}-0-old");
    let bridge = format!("fmq{dead_pid}b0");
    let ip = |args: &[&str]| {
        let status = std::process::Command::new("ip")
            .args(args)
            .status()
            .expect("run ip");
        assert!(status.success(), "ip {args:?}");
    };
    ip(&["netns", "add", &netns]);
    ip(&["link", "add", &bridge, "type", "bridge"]);
    let stale = vec![netns, bridge];
    let network = Network::new("leftovers");
    assert_eq!(leftovers(&stale), Vec::<String>::new());
    drop(network);
}

/// Whether the name servers' route of TBW102 lists a broker at `addr`.
async fn registered_at(instance: &ClientInstance, addr: SocketAddr) -> bool {
    let addr = addr.to_string();
    match instance.fetch_route("TBW102").await {
        Ok(route) => route
            .broker_datas
            .iter()
            .any(|broker| broker.broker_addrs.values().any(|a| *a == addr)),
        Err(ClientError::NoRoute { .. }) => false,
        Err(e) => panic!("the name server answers: {e}"),
    }
}

/// Sends `body` to NetnsT until a send succeeds (bounded); the time that took.
async fn send_until_ok(producer: &Producer, body: &str) -> Duration {
    let started = Instant::now();
    loop {
        match producer.send(Message::new("NetnsT", body)).await {
            Ok(sent) => {
                assert_eq!(sent.send_status, SendStatus::SendOk, "{sent:?}");
                return started.elapsed();
            }
            Err(e) => eprintln!("send {body:?} failed, tries again: {e}"),
        }
        assert!(
            started.elapsed() < DEADLINE,
            "no send of {body:?} succeeded"
        );
    }
}

/// Waits (bounded) until the name servers list a broker at `addr`, or no longer do. Routes
/// are answered from a snapshot the name server republishes after each change, so a route
/// may lag the log line of the change by a moment.
async fn wait_registration(instance: &ClientInstance, addr: SocketAddr, registered: bool) {
    let started = Instant::now();
    while registered_at(instance, addr).await != registered {
        assert!(
            started.elapsed() < DEADLINE,
            "{addr} still registered: {}",
            !registered
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The time of one SEND_MESSAGE_V2 of 4 KiB, sent and answered.
async fn round_trip(client: &ferromq::remoting::client::RemotingClient) -> Duration {
    let request = common::send_request("NetnsSlowT", 0, &[b'x'; 4096], "");
    let started = Instant::now();
    let response = client.request_timeout(request, DEADLINE).await;
    let elapsed = started.elapsed();
    assert_eq!(response.expect("the broker answers").code, 0);
    elapsed
}

/// Waits (bounded) for a round trip under 100 ms: the link is fast again.
async fn wait_fast(client: &ferromq::remoting::client::RemotingClient) {
    let started = Instant::now();
    loop {
        let took = round_trip(client).await;
        if took < Duration::from_millis(100) {
            eprintln!("round trip fast again: {took:?}");
            return;
        }
        assert!(started.elapsed() < DEADLINE, "still slow: {took:?}");
    }
}

/// Whether a TCP connection from inside `host` to `addr` succeeds within 5 s.
fn tcp_connects_from(host: &Host, addr: SocketAddr) -> bool {
    let script = format!("exec 3<>/dev/tcp/{}/{}", addr.ip(), addr.port());
    let output = host
        .command("timeout")
        .args(["5", "bash", "-c", &script])
        .output()
        .expect("run bash in the namespace");
    eprintln!(
        "connect {} -> {addr}: {} {}",
        host.name(),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
    output.status.success()
}
