//! The Apache Go client, `github.com/apache/rocketmq-client-go/v2` v2.1.2 (the remoting
//! protocol of RocketMQ 4.x), against `ferromq standalone`: the program of `tests/go/` sends
//! sync, async and oneway messages with tags and unique keys, consumes them with a push
//! consumer and with the pull consumer of that version (two of three tags, by Poll/ACK and
//! by PullFrom on every queue), sends orders through a QueueSelector to an orderly push
//! consumer, and runs three transactions (committed, rolled back, and UNKNOW until the
//! broker's check asks CheckLocalTransaction, which commits). The Go program only reports,
//! one JSON line per event; this test accounts for every message by its unique key: none
//! lost, none unexpected, each with the tag, body and message id it was sent with, each
//! order's steps in sequence on its queue, and queue offsets rising in consumption order on
//! every queue of the orderly consumer.
//!
//! Duplicates: at-least-once delivery allows redelivery after a rebalance, a restart or a
//! failed ack, and none of those happens here (one member per group, nothing restarted), so
//! a clean run expects none and the test fails on any, saying how many of which.
//!
//! The Go program is built once per run into `target/go-client/` with the `go` on `PATH` (or
//! `/usr/local/go/bin/go`), which fetches the module and its dependencies as `go.sum` pins
//! them; without Go the test fails and says so. The program bounds its own waits and exits
//! within 150 s; the test kills it at 240 s.

mod common;

use common::delivery::{self, events, received, sent_by_key, tail, text};
use common::java::Standalone;
use common::programs::{self, ProgramRun};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

/// The broker checks an unfinished transaction 2 s after its half message, every second, so
/// the UNKNOW one is resolved within a few seconds (Java's defaults are 6 s and 60 s).
const BROKER_CONFIG: &str = "transactionTimeOut=2000\ntransactionCheckInterval=1000";

/// What the Go program sends (`perMode`, `orders`, `steps` in `tests/go/main.go`).
const PER_MODE: usize = 40;
const ORDERS: usize = 8;
const STEPS: usize = 10;

#[test]
fn go_client_sends_and_consumes_every_message_once() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go");
    let binary = programs::go_build(&source, "go-client");
    let server = Standalone::start(BROKER_CONFIG);
    let started = Instant::now();
    let mut go = Command::new(binary);
    go.arg(server.namesrv_addr());
    let run = programs::run_program(go, Duration::from_secs(240));
    let elapsed = started.elapsed();

    let mut failures = Vec::new();
    check_run(&run, &mut failures);
    let plain = check_plain(&run.events, &mut failures);
    let order = check_order(&run.events, &mut failures);
    let tx = check_tx(&run.events, &mut failures);
    let summary = format!(
        "Go client run: {:.1} s, {} events; {plain}; {order}; {tx}",
        elapsed.as_secs_f64(),
        run.events.len()
    );
    println!("{summary}");
    assert!(
        failures.is_empty(),
        "{summary}\n{} failure(s):\n  {}\n--- Go client stderr (tail) ---\n{}",
        failures.len(),
        failures.join("\n  "),
        tail(&run.stderr, 40)
    );
}

/// Exit status, the closing event, and no error events.
fn check_run(run: &ProgramRun, failures: &mut Vec<String>) {
    delivery::check_ended("Go", run.exit, &run.events, failures);
    for event in events(&run.events, "consumer_done", None) {
        if event["complete"] != true {
            failures.push(format!(
                "a consumer stopped waiting before it had every key: {event}"
            ));
        }
    }
}

/// Sync, async and oneway sends; the push consumer gets all of them, the pull consumer
/// (`TagSync || TagOneway`) exactly the sync and oneway ones, by Poll and again by PullFrom.
fn check_plain(all: &[Value], failures: &mut Vec<String>) -> String {
    let sent = sent_by_key(all, "plain", failures);
    delivery::check_plain_sends(&sent, PER_MODE, failures);
    let push = received(all, "plain", "push");
    let pull = received(all, "plain", "pull");
    let pulled = delivery::without_async_tag(&sent);
    let push_report = account("plain push", &sent, &push, failures);
    let pull_report = account("plain pull", &pulled, &pull, failures);
    let pull_from = received(all, "plain", "pull_from");
    let pull_from_report = account("plain pull_from", &pulled, &pull_from, failures);
    format!(
        "push {push_report}, pull (2 of 3 tags) Poll {pull_report}, PullFrom {pull_from_report}"
    )
}

/// Each order's steps on the queue the selector chose, consumed in step order; queue offsets
/// rising on every queue in consumption order.
fn check_order(all: &[Value], failures: &mut Vec<String>) -> String {
    let sent = sent_by_key(all, "order", failures);
    if sent.len() != ORDERS * STEPS {
        failures.push(format!(
            "order: {} sends, {} made",
            sent.len(),
            ORDERS * STEPS
        ));
    }
    let queue_of_order = delivery::queue_of_order(&sent, failures);
    let got = received(all, "order", "orderly");
    let report = account("order", &sent, &got, failures);
    for event in &got {
        if event["orderly_ctx"] != true {
            failures.push(format!(
                "order: consumed without an orderly context: {event}"
            ));
        }
    }
    delivery::check_order_sequence(&got, &queue_of_order, failures);
    let queues: BTreeSet<i64> = queue_of_order.values().copied().collect();
    format!(
        "orderly {report} ({ORDERS} orders on {} queues)",
        queues.len()
    )
}

/// The committed and the checked-then-committed message consumed once, the rolled-back one
/// never; only the UNKNOW one checked.
fn check_tx(all: &[Value], failures: &mut Vec<String>) -> String {
    let sent = sent_by_key(all, "tx", failures);
    let local: BTreeMap<&str, &str> = sent
        .iter()
        .map(|(k, e)| (*k, e["local_state"].as_str().unwrap_or("")))
        .collect();
    let expected_local = BTreeMap::from([
        ("tx-commit", "commit"),
        ("tx-rollback", "rollback"),
        ("tx-unknown", "unknown"),
    ]);
    if local != expected_local {
        failures.push(format!(
            "tx: local states {local:?}, expected {expected_local:?}"
        ));
    }
    let checks = events(all, "tx_check", Some("tx"));
    let checked: BTreeSet<&str> = checks.iter().map(|e| text(&e["key"])).collect();
    if checked != BTreeSet::from(["tx-unknown"]) {
        failures.push(format!(
            "tx: checked back {checked:?}, expected only tx-unknown"
        ));
    }
    let committed: BTreeMap<&str, &Value> = sent
        .iter()
        .filter(|(k, _)| **k != "tx-rollback")
        .map(|(k, e)| (*k, *e))
        .collect();
    let got = received(all, "tx", "push");
    let report = account("tx", &committed, &got, failures);
    format!("tx {report}, {} check(s) of tx-unknown", checks.len())
}

/// [`delivery::account`] with nothing more checked: tag, body and message id. Returns "N/M
/// keys, D duplicates".
fn account(
    what: &str,
    expected: &BTreeMap<&str, &Value>,
    got: &[&Value],
    failures: &mut Vec<String>,
) -> String {
    delivery::account(what, expected, got, failures, delivery::no_more_checks)
}
