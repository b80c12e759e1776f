//! The Java RocketMQ 5.x reference: the 5.x name server and broker of the kit that
//! `scripts/java-kit` builds from Maven Central ([`common::java::kit5`]) run on ephemeral
//! loopback ports, and the 5.x remoting client (`tests/java5/Java5RoundTrip.java`) sends
//! messages through them and reads them back, checking every key, tag and body.
//!
//! Method: real JVMs started through the kit's `bin/namesrv` and `bin/broker`, each waited
//! for (bounded) on its boot line; the Java program checks what it receives itself and the
//! test checks its figures. A second test reads the kernel's socket table while the 4.9.8
//! and 5.x servers run, to prove that they listen on 127.0.0.1 only (4.9.8 binds the wildcard
//! address; the kit's LD_PRELOAD shim turns that into loopback).

mod common;

use common::java::{self, JavaCluster, Serialize};
use common::TempDir;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

#[test]
fn java5_remoting_client_round_trips_through_the_java5_broker() {
    let kit = java::kit5();
    let dir = TempDir::on_disk("java5");
    let JavaCluster { broker, namesrv } = JavaCluster::start(&kit, dir.path(), "", "");
    let store = dir.path().join("store");
    let count = 30;
    let output = java::run_java_on(
        &kit,
        &java::classes5(),
        "Java5RoundTrip",
        &[
            &format!("127.0.0.1:{}", namesrv.port),
            "Java5RoundTripTopic",
            &count.to_string(),
        ],
        Serialize::Json,
        "",
        Duration::from_secs(180),
    );
    output.assert_passed("the 5.x remoting client against the 5.x broker");
    assert_eq!(output.figure("send_ok"), f64::from(count));
    assert_eq!(output.figure("received_all"), f64::from(count));
    assert_eq!(output.figure("received_tag1"), f64::from(count / 3));
    // The broker wrote under the store it was given: its first CommitLog segment, named by
    // offset 0 (the broker may have made the next one ahead of need).
    let first = store.join("commitlog").join(format!("{:020}", 0));
    assert!(first.is_file(), "no {}", first.display());
    broker.stop();
    namesrv.stop();
}

#[test]
fn java5_grpc_client_round_trips_through_the_java5_proxy() {
    let kit = java::kit5();
    let dir = TempDir::on_disk("java5-proxy");
    let java5 = JavaCluster::start(&kit, dir.path(), "", "");
    let namesrv_addr = java5.namesrv_addr();
    let JavaCluster { broker, namesrv } = java5;
    // The gRPC producer needs its topic to exist, typed NORMAL for the proxy's check.
    let topic = "Java5GrpcTopic";
    let created = java::run_kit_on(
        &kit,
        "mqadmin",
        &[
            "updateTopic",
            "-n",
            &namesrv_addr,
            "-c",
            "DefaultCluster",
            "-t",
            topic,
            "-a",
            "+message.type=NORMAL",
        ],
        Duration::from_secs(120),
    );
    created.assert_passed("mqadmin updateTopic on the 5.x broker");
    assert!(created.text.contains("create topic to"), "{}", created.text);
    let proxy = java::start_proxy(&kit, dir.path(), &namesrv_addr);
    let count = 30;
    let output = java::run_grpc_java(
        &java::classes5_grpc(),
        "Java5GrpcRoundTrip",
        &[
            &format!("127.0.0.1:{}", proxy.port),
            topic,
            "Java5GrpcGroup",
            &count.to_string(),
        ],
        Duration::from_secs(180),
    );
    output.assert_passed("the 5.x gRPC client through the 5.x proxy");
    assert_eq!(output.figure("send_ok"), f64::from(count));
    assert_eq!(output.figure("received"), f64::from(count));
    proxy.stop();
    broker.stop();
    namesrv.stop();
}

#[test]
fn java_kit_servers_listen_on_loopback_only() {
    for kit in [java::kit(), java::kit5()] {
        let dir = TempDir::on_disk("java-kit-bind");
        let JavaCluster { broker, namesrv } = JavaCluster::start(&kit, dir.path(), "", "");
        let listening = listeners();
        // The name server's port, and the broker's listenPort, VIP port (P-2) and HA port
        // (P+1): each has a listener, and every listener on them is on 127.0.0.1.
        let ports = [namesrv.port, broker.port, broker.port - 2, broker.port + 1];
        for port in ports {
            let on_port: BTreeSet<&String> = listening
                .iter()
                .filter(|(_, p)| *p == port)
                .map(|(address, _)| address)
                .collect();
            assert_eq!(
                on_port,
                BTreeSet::from([&"127.0.0.1".to_owned()]),
                "{}: listeners on port {port}",
                kit.display()
            );
        }
        broker.stop();
        namesrv.stop();
    }
}

/// Every listening TCP socket of this network namespace: (address, port), IPv4-mapped IPv6
/// addresses shown as IPv4, from `/proc/net/tcp` and `/proc/net/tcp6`.
fn listeners() -> Vec<(String, u16)> {
    const LISTEN: &str = "0A";
    let mut found = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = std::fs::read_to_string(Path::new(table)).unwrap_or_default();
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.len() < 4 || fields[3] != LISTEN {
                continue;
            }
            let (address, port) = fields[1].split_once(':').expect("ADDRESS:PORT");
            let port = u16::from_str_radix(port, 16).expect("a hex port");
            found.push((proc_address(address), port));
        }
    }
    found
}

/// A `/proc/net/tcp*` address (hex, host-order 32-bit words) as text: IPv4 and IPv4-mapped
/// IPv6 as dotted quads, other IPv6 as its hex.
fn proc_address(hex: &str) -> String {
    let word = |i: usize| -> [u8; 4] {
        u32::from_str_radix(&hex[i * 8..i * 8 + 8], 16)
            .expect("hex")
            .to_ne_bytes()
    };
    match hex.len() {
        8 => {
            let [a, b, c, d] = word(0);
            format!("{a}.{b}.{c}.{d}")
        }
        32 if word(0) == [0; 4] && word(1) == [0; 4] && word(2) == [0, 0, 0xff, 0xff] => {
            let [a, b, c, d] = word(3);
            format!("{a}.{b}.{c}.{d}")
        }
        _ => hex.to_owned(),
    }
}
