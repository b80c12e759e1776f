//! The Java 4.9.8 client against `ferromq standalone`: the programs of `tests/java/` (see
//! `Support.java`) send, consume, filter, order, delay, retry, transact and query the way a
//! Java application does, each checking every message it gets back, under both header
//! serializations. Each test starts its own standalone on ephemeral loopback ports.

mod common;

use common::java::{run_java, Serialize, Standalone};
use std::time::Duration;

/// Runs `SendConsume` in `mode` with `count` messages under `serialize`.
fn send_consume(mode: &str, count: u32, serialize: Serialize) {
    let server = Standalone::start("");
    let topic = format!("JavaSend_{mode}");
    run_java(
        "SendConsume",
        &[&server.namesrv_addr(), &topic, mode, &count.to_string()],
        serialize,
        Duration::from_secs(240),
    )
    .assert_passed(&format!("SendConsume {mode} {serialize:?}"));
}

#[test]
fn java_sync_send_consume_json_every_message_as_sent() {
    send_consume("sync", 300, Serialize::Json);
}

#[test]
fn java_sync_send_consume_rocketmq_every_message_as_sent() {
    send_consume("sync", 300, Serialize::Rocketmq);
}

#[test]
fn java_async_send_consume_every_message_as_sent() {
    for serialize in Serialize::BOTH {
        send_consume("async", 300, serialize);
    }
}

#[test]
fn java_oneway_send_consume_every_message_as_sent() {
    for serialize in Serialize::BOTH {
        send_consume("oneway", 300, serialize);
    }
}

#[test]
fn java_batch_send_consume_every_message_as_sent() {
    for serialize in Serialize::BOTH {
        send_consume("batch", 300, serialize);
    }
}
