//! The RocketMQ 5.x Go client (`github.com/apache/rocketmq-clients/golang/v5` v5.1.4,
//! unchanged) against the gRPC endpoint of a real `ferromq broker`: the program of
//! `tests/go5/` sends normal messages, a FIFO message group and a delay message (delivery
//! timestamp 3 s ahead), and a simple consumer receives and acks them, changing the invisible
//! duration of one message so that it comes back with delivery attempt 2.
//! `common::client5` accounts for every message by key and message id. The same program
//! passes the same checks against the Java 5.5.0 proxy (cluster mode, in front of the Java
//! 5.5.0 broker), the reference.
//!
//! The program is built once per run into `target/go5-client/` with the `go` on `PATH`,
//! which fetches the modules `tests/go5/go.sum` pins on first use; without Go the test fails
//! and says so. The program bounds its own waits (90 s for the consumer); the test kills it
//! at 150 s.

mod common;

use common::{client5, programs};
use std::path::Path;
use std::process::Command;

#[test]
fn go5_producer_and_simple_consumer_round_trip_through_the_endpoint() {
    let round_trip = round_trip();
    let run = client5::run_against_ferromq("grpc-go5", round_trip);
    client5::check_round_trip("Go", &run);
}

/// The same program and checks against the Java 5.5.0 proxy (cluster mode) in front of the
/// Java 5.5.0 broker: the reference ferromq's endpoint is held to.
#[test]
fn go5_round_trip_passes_against_the_java5_proxy_too() {
    let round_trip = round_trip();
    let run = client5::run_against_java_proxy("grpc-go5-java", round_trip);
    client5::check_round_trip("Go (Java 5.x proxy)", &run);
}

/// Builds the program (once per run), then: the command that runs it against the endpoint
/// on a port.
fn round_trip() -> impl FnOnce(u16) -> Command {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go5");
    let binary = programs::go_build(&source, "go5-client");
    move |port| {
        let mut go = Command::new(binary);
        go.args([&format!("127.0.0.1:{port}"), client5::TOPIC, "GrpcGoGroup"]);
        go
    }
}
