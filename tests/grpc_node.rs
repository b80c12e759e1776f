//! The RocketMQ 5.x Node.js client (npm `rocketmq-client-nodejs` 1.0.8, unchanged) against
//! the gRPC endpoint of a real `ferromq broker`: `tests/node5/round_trip.js` sends normal
//! messages, a FIFO message group and a delay message (delivery timestamp 3 s ahead), and a
//! simple consumer receives and acks them, changing the invisible duration of one message so
//! that it comes back with delivery attempt 2. `common::client5` accounts for every message
//! by key and message id.
//!
//! The client is installed once per run with `npm ci` from `tests/node5/package-lock.json`
//! into `target/node5-client/`; without node and npm the test fails and says so. The
//! program bounds its own waits (90 s for the consumer); the test kills it at 150 s.

mod common;

use common::client5;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn node5_producer_and_simple_consumer_round_trip_through_the_endpoint() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node5");
    let modules = client5::npm_install(&source, "node5-client");
    let dir = common::TempDir::on_disk("grpc-node5");
    let (_broker, port) = client5::start_broker(dir.path());
    let mut node = Command::new("node");
    node.arg(source.join("round_trip.js"))
        .args([
            &format!("127.0.0.1:{port}"),
            client5::TOPIC,
            "GrpcNodeGroup",
        ])
        .env("NODE_PATH", &modules);
    let run = client5::run_program(node, Duration::from_secs(150));
    client5::check_round_trip("Node.js", &run);
}

/// The same program and checks against the Java 5.5.0 proxy (cluster mode) in front of the
/// Java 5.5.0 broker: the reference ferromq's endpoint is held to.
#[test]
fn node5_round_trip_passes_against_the_java5_proxy_too() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node5");
    let modules = client5::npm_install(&source, "node5-client");
    let dir = common::TempDir::on_disk("grpc-node5-java");
    let (cluster, mut proxy, port) = client5::start_java_proxy(dir.path());
    let mut node = Command::new("node");
    node.arg(source.join("round_trip.js"))
        .args([
            &format!("127.0.0.1:{port}"),
            client5::TOPIC,
            "GrpcNodeGroup",
        ])
        .env("NODE_PATH", &modules);
    let run = client5::run_program(node, Duration::from_secs(150));
    // Killed, not stopped: nothing of theirs is read after, and a clean stop takes 30 s.
    common::kill(&mut proxy.child);
    cluster.stop_now();
    client5::check_round_trip("Node.js (Java 5.x proxy)", &run);
}
