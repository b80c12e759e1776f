//! The RocketMQ 5.x Node.js client (npm `rocketmq-client-nodejs` 1.0.8, unchanged) against
//! the gRPC endpoint of a real `ferromq broker`: `tests/node5/round_trip.js` sends normal
//! messages, a FIFO message group and a delay message (delivery timestamp 3 s ahead), and a
//! simple consumer receives and acks them, changing the invisible duration of one message so
//! that it comes back with delivery attempt 2. `common::client5` accounts for every message
//! by key and message id. The same program passes the same checks against the Java 5.5.0
//! proxy (cluster mode, in front of the Java 5.5.0 broker), the reference.
//!
//! The client is installed once per run with `npm ci` from `tests/node5/package-lock.json`
//! into `target/node5-client/`; without node and npm the test fails and says so. The
//! program bounds its own waits (90 s for the consumer); the test kills it at 150 s.

mod common;

use common::{client5, programs};
use std::path::{Path, PathBuf};
use std::process::Command;

#[test]
fn node5_producer_and_simple_consumer_round_trip_through_the_endpoint() {
    let round_trip = round_trip();
    let run = client5::run_against_ferromq("grpc-node5", round_trip);
    client5::check_round_trip("Node.js", &run);
}

/// The same program and checks against the Java 5.5.0 proxy (cluster mode) in front of the
/// Java 5.5.0 broker: the reference ferromq's endpoint is held to.
#[test]
fn node5_round_trip_passes_against_the_java5_proxy_too() {
    let round_trip = round_trip();
    let run = client5::run_against_java_proxy("grpc-node5-java", round_trip);
    client5::check_round_trip("Node.js (Java 5.x proxy)", &run);
}

/// Installs the client (once per run), then: the command that runs `round_trip.js` against
/// the endpoint on a port.
fn round_trip() -> impl FnOnce(u16) -> Command {
    let source: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/node5");
    let modules = programs::npm_install(&source, "node5-client");
    move |port| {
        let mut node = Command::new("node");
        node.arg(source.join("round_trip.js"))
            .args([
                &format!("127.0.0.1:{port}"),
                client5::TOPIC,
                "GrpcNodeGroup",
            ])
            .env("NODE_PATH", &modules);
        node
    }
}
