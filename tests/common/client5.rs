//! RocketMQ 5.x gRPC client programs (Node.js in `tests/node5/`, Go in `tests/go5/`) against
//! the gRPC endpoint of a real `ferromq broker` or of the Java 5.x proxy: the servers they
//! talk to, and the checks of the story both programs tell (sends of normal, FIFO and delay
//! messages; a simple consumer that receives, acks, and changes the invisible duration of one
//! message to get it back). `programs` fetches, builds and runs them.
//!
//! Each program only reports, one JSON object per line (`ev`: `sent`, `recv`, `changed`,
//! `acked`, `consumer_done`, `end`, and `error`, `send_error` or `receive_error` when
//! something failed); [`check_round_trip`] accounts for every message by key and message id.

use super::delivery::{self, events, number, tail, text};
use super::programs::{self, ProgramRun};
use super::{BrokerProcess, TempDir};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// The topic the programs use: its `message.type` is MIXED, so it takes normal, FIFO and
/// delay messages.
pub const TOPIC: &str = "Grpc5Mixed";
/// What each program sends (`NORMAL`, `FIFO` in the programs), and one delay message.
pub const NORMAL: usize = 8;
pub const FIFO: usize = 5;
/// The message whose invisible duration the consumer changes on its first delivery.
pub const CHANGED_KEY: &str = "normal-0";
/// The broker checks an open transaction 2 s after its half message, every second (Java's
/// defaults are 6 s and 60 s): a check of a transaction that is not open would show soon.
const TRANSACTION_CHECK: &str = "transactionTimeOut=2000\ntransactionCheckInterval=1000";
/// The transactional message rolled back: never delivered.
const ROLLED_BACK_KEY: &str = "tx-rollback";
/// How long a program may run: it bounds its own waits (90 s for the consumer).
const PROGRAM_TIMEOUT: Duration = Duration::from_secs(150);

/// A broker with the gRPC endpoint on a free port and [`TOPIC`] (4 queues) written before
/// it starts.
pub fn start_broker(dir: &Path) -> (BrokerProcess, u16) {
    let store = dir.join("store");
    let config_dir = store.join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    let topics = serde_json::json!({
        "topicConfigTable": {
            TOPIC: {
                "topicName": TOPIC, "readQueueNums": 4, "writeQueueNums": 4, "perm": 6,
                "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": false,
                "attributes": {"message.type": "MIXED"},
            },
        },
        "dataVersion": {"timestamp": 0, "counter": 1},
    });
    std::fs::write(config_dir.join("topics.json"), topics.to_string()).unwrap();
    let port = super::java::free_port();
    let config = format!("grpcServerEnable=true\ngrpcServerPort={port}\n{TRANSACTION_CHECK}");
    (BrokerProcess::start(&store, &config), port)
}

/// The Java 5.5.0 reference: its name server, broker and proxy (cluster mode), with
/// [`TOPIC`] made by `mqadmin updateTopic` (4 queues, `message.type` MIXED). Returns the
/// cluster, the proxy and its gRPC port.
pub fn start_java_proxy(dir: &Path) -> (super::java::JavaCluster, super::java::JavaServer, u16) {
    let kit = super::java::kit5();
    // Java 5.5.0 refuses a MIXED topic unless the broker is told it may have one.
    let conf = format!("enableMixedMessageType=true\n{TRANSACTION_CHECK}");
    let cluster = super::java::JavaCluster::start(&kit, dir, &conf, "");
    let namesrv = cluster.namesrv_addr();
    let args = [
        "updateTopic",
        "-n",
        &namesrv,
        "-c",
        "DefaultCluster",
        "-t",
        TOPIC,
        "-r",
        "4",
        "-w",
        "4",
        "-a",
        "+message.type=MIXED",
    ];
    let created = super::java::run_kit_on(&kit, "mqadmin", &args, Duration::from_secs(120));
    created.assert_passed("mqadmin updateTopic on the Java 5.x broker");
    assert!(
        created.text.contains("success"),
        "mqadmin updateTopic on the Java 5.x broker:\n{}",
        created.text
    );
    // The broker tells the name server of the new topic with its next registration.
    super::java::wait_topic_route(
        cluster.namesrv_socket(),
        TOPIC,
        None,
        Duration::from_secs(60),
    );
    let proxy = super::java::start_proxy(&kit, dir, &namesrv);
    let port = proxy.port;
    (cluster, proxy, port)
}

/// Runs the program `command(port)` makes against the gRPC endpoint of a fresh ferromq
/// broker (`dir_name`: its directory's name) on `port`, killing it after 150 s.
pub fn run_against_ferromq(dir_name: &str, command: impl FnOnce(u16) -> Command) -> ProgramRun {
    let dir = TempDir::on_disk(dir_name);
    let (_broker, port) = start_broker(dir.path());
    programs::run_program(command(port), PROGRAM_TIMEOUT)
}

/// As [`run_against_ferromq`], against the Java 5.5.0 proxy in front of the Java 5.5.0
/// broker ([`start_java_proxy`]).
pub fn run_against_java_proxy(dir_name: &str, command: impl FnOnce(u16) -> Command) -> ProgramRun {
    let dir = TempDir::on_disk(dir_name);
    let (cluster, mut proxy, port) = start_java_proxy(dir.path());
    let run = programs::run_program(command(port), PROGRAM_TIMEOUT);
    // Killed, not stopped: nothing of theirs is read after, and a clean stop takes 30 s.
    super::kill(&mut proxy.child);
    cluster.stop_now();
    run
}

/// Checks the story of a `program` ("Node.js", "Go") run and panics with every failure.
///
/// - It ended after `end`, with no error event, its consumer done with every key acked.
/// - Sends: [`NORMAL`] normal, [`FIFO`] FIFO (their message group on each delivery), one
///   delay message and two transactional ones (committed, rolled back), each with a
///   message id.
/// - Each sent message but the rolled-back one received with its tag, body and message id,
///   acked once; nothing unexpected; no other duplicate.
/// - No transaction checked (none was left open).
/// - [`CHANGED_KEY`] delivered twice, first with delivery attempt 1 and its invisible
///   duration changed, then with attempt 2 and acked; every other message with attempt 1.
/// - The FIFO messages received in the order sent; the delay message not before its time.
pub fn check_round_trip(program: &str, run: &ProgramRun) {
    let all = &run.events;
    let mut failures = Vec::new();
    delivery::check_ended(program, run.exit, all, &mut failures);
    for event in events(all, "receive_error", None) {
        failures.push(format!("{program} reported {event}"));
    }
    if !events(all, "consumer_done", None)
        .iter()
        .any(|e| e["complete"] == true)
    {
        failures.push("the consumer stopped before every key was acked".to_owned());
    }
    let mut sent: BTreeMap<&str, &Value> = BTreeMap::new();
    for (part, count) in [("normal", NORMAL), ("fifo", FIFO), ("delay", 1), ("tx", 2)] {
        let of_part = delivery::sent_by_key(all, part, &mut failures);
        if of_part.len() != count {
            failures.push(format!("{part}: {} sent, {count} wanted", of_part.len()));
        }
        sent.extend(of_part);
    }
    for event in sent.values() {
        if text(&event["msg_id"]).is_empty() {
            failures.push(format!("a send without a message id: {event}"));
        }
    }
    let got = events(all, "recv", None);
    let (first, again): (Vec<&Value>, Vec<&Value>) =
        got.iter().partition(|e| number(&e["attempt"]) == 1);
    let mut expected = sent.clone();
    expected.remove(ROLLED_BACK_KEY);
    let report = delivery::account(
        "simple consumer",
        &expected,
        &first,
        &mut failures,
        check_group,
    );
    let checked: BTreeSet<&str> = events(all, "checked", None)
        .iter()
        .map(|e| text(&e["key"]))
        .collect();
    if !checked.is_empty() {
        failures.push(format!("transactions checked: {checked:?}, none open"));
    }
    let changed = events(all, "changed", None);
    let changed_keys: Vec<&str> = changed.iter().map(|e| text(&e["key"])).collect();
    if changed_keys != [CHANGED_KEY] {
        failures.push(format!(
            "invisible duration changed for {changed_keys:?}, wanted [{CHANGED_KEY}]"
        ));
    }
    let again_keys: Vec<(&str, i64)> = again
        .iter()
        .map(|e| (text(&e["key"]), number(&e["attempt"])))
        .collect();
    if again_keys != [(CHANGED_KEY, 2)] {
        failures.push(format!(
            "redeliveries (key, attempt) {again_keys:?}, wanted [({CHANGED_KEY}, 2)]"
        ));
    }
    if let (Some(before), Some(after)) = (changed.first(), again.first()) {
        if before["msg_id"] != after["msg_id"] {
            failures.push(format!("redelivered {after} is not {before}"));
        }
    }
    let mut acked: BTreeMap<&str, usize> = BTreeMap::new();
    for event in events(all, "acked", None) {
        *acked.entry(text(&event["key"])).or_default() += 1;
    }
    for key in expected.keys() {
        if acked.get(key) != Some(&1) {
            failures.push(format!("{key} acked {:?} times", acked.get(key)));
        }
    }
    let fifo_order: Vec<i64> = first
        .iter()
        .filter(|e| e["part"] == "fifo")
        .map(|e| sent.get(text(&e["key"])).map_or(-1, |s| number(&s["seq"])))
        .collect();
    if !fifo_order.is_sorted() {
        failures.push(format!(
            "FIFO messages received in the order {fifo_order:?}"
        ));
    }
    let delay = first.iter().find(|e| e["part"] == "delay");
    let due_ms = sent
        .get("delay-0")
        .map_or(0, |e| number(&e["deliver_at_ms"]));
    let early_ms = delay.map_or(0, |e| due_ms - number(&e["at_ms"]));
    if due_ms <= 0 || early_ms > 0 {
        failures.push(format!(
            "the delay message (due at {due_ms} ms) came {early_ms} ms early: {delay:?}"
        ));
    }
    let summary = format!(
        "{program} client: {:.1} s, {} events; {report}; redelivered (key, attempt) \
         {again_keys:?}; delay message {} ms after its time",
        run.elapsed.as_secs_f64(),
        all.len(),
        -early_ms
    );
    println!("{summary}");
    assert!(
        failures.is_empty(),
        "{summary}\n{} failure(s):\n  {}\n--- {program} stderr (tail) ---\n{}",
        failures.len(),
        failures.join("\n  "),
        tail(&run.stderr, 40)
    );
}

/// For [`delivery::account`]: FIFO messages carry their message group, others none (an empty
/// one as the Node.js client reports it, or null).
fn check_group(what: &str, sent: &Value, got: &Value, failures: &mut Vec<String>) {
    let wanted = if sent["part"] == "fifo" {
        "fifo-group"
    } else {
        ""
    };
    if text(&got["group"]) != wanted {
        failures.push(format!(
            "{what}: message group {}, wanted {wanted:?}",
            got["group"]
        ));
    }
}
