//! The C++ client, librocketmq as the PyPI package `rocketmq` 0.4.4 bundles it under its
//! Python bindings (apache/rocketmq-client-python), against `ferromq standalone`: the program
//! of `tests/cpp/` sends sync, async and oneway messages with tags, unique keys and a user
//! property, consumes them with a push consumer of the whole topic, a push consumer and the
//! pull consumer of two of the three tags, sends orders with `send_orderly` (and one with
//! `send_oneway_orderly`) through a queue selector to an orderly push consumer, and sends two
//! batches with `send_batch`. The Python program only reports, one JSON line per event; this
//! test accounts for every message by its unique key: none lost, none unexpected, each with
//! the tag, body, property and message id it was sent with, each order's steps in sequence on
//! the queue its selector chose, and queue offsets rising in consumption order on every queue
//! of the orderly consumer.
//!
//! What 0.4.4 does not offer: a transaction producer (neither the Python API nor the bundled
//! library's C API has one), a consume-from-where setting (its consumers start where the
//! broker says a new group starts) and sharding keys (its `send_orderly` takes an integer for
//! the selector).
//!
//! Batches: librocketmq sends `send_batch` as SEND_MESSAGE with the header field
//! `batch="1"`, which the Java 4.9.8 broker reads with `Boolean.parseBoolean` as false, so it
//! stores the batch's encoding as one message without keys or tags; ferromq does the same,
//! and the test asserts that (one keyless message per batch, none of the batch's keys).
//!
//! Duplicates: at-least-once delivery allows redelivery after a rebalance, a restart or a
//! failed ack, and none of those happens here (one member per group, nothing restarted), so
//! a clean run expects none and the test fails on any, saying how many of which.
//!
//! The package is installed once per run into a virtual environment under
//! `target/cpp-client/venv` (`python3 -m venv`, then `pip install rocketmq==0.4.4` from
//! PyPI; its manylinux wheel carries librocketmq and the zlib it links), under a file lock so
//! that parallel test processes do not race. The program bounds its own waits and exits
//! within 150 s; the test kills it at 180 s.

mod common;

use common::delivery::{self, events, number, received, sent_by_key, tail, text};
use common::java::Standalone;
use common::python::{self, Package};
use common::TempDir;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The package and version under test.
const PACKAGE: Package = Package {
    name: "rocketmq",
    version: "0.4.4",
    module: "rocketmq.client",
};

/// What the Python program sends (`PER_MODE`, `ORDERS`, `STEPS`, `BATCHES`, `BATCH_SIZE` in
/// `tests/cpp/client.py`); order `ORDERS` is the one sent by `send_oneway_orderly`.
const PER_MODE: usize = 40;
const ORDERS: usize = 8;
const STEPS: usize = 10;
const BATCHES: usize = 2;
const BATCH_SIZE: usize = 3;

#[test]
fn cpp_client_sends_and_consumes_every_message_once() {
    let python = python::venv_with("cpp-client", &PACKAGE);
    let server = Standalone::start("");
    let started = Instant::now();
    let run = run_cpp_client(&python, &server.namesrv_addr(), Duration::from_secs(180));
    let elapsed = started.elapsed();

    let mut failures = Vec::new();
    check_run(&run, &mut failures);
    let plain = check_plain(&run.events, &mut failures);
    let order = check_order(&run.events, &mut failures);
    let batch = check_batch(&run.events, &mut failures);
    let summary = format!(
        "C++ client (rocketmq {}) run: {:.1} s, {} events; {plain}; {order}; {batch}",
        PACKAGE.version,
        elapsed.as_secs_f64(),
        run.events.len()
    );
    println!("{summary}");
    assert!(
        failures.is_empty(),
        "{summary}\n{} failure(s):\n  {}\n--- Python stderr (tail) ---\n{}\n\
         --- librocketmq log (tail) ---\n{}",
        failures.len(),
        failures.join("\n  "),
        tail(&run.stderr, 40),
        tail(&run.client_log, 60)
    );
}

/// What the Python program printed and how it ended.
struct CppRun {
    exit: Option<std::process::ExitStatus>,
    events: Vec<Value>,
    stderr: String,
    /// librocketmq's own log files, concatenated.
    client_log: String,
}

/// Exit status, the closing event, no error events, and every consumer done with all it
/// waited for.
fn check_run(run: &CppRun, failures: &mut Vec<String>) {
    delivery::check_ended("Python", run.exit, &run.events, failures);
    let done: BTreeSet<(&str, &str)> = events(&run.events, "consumer_done", None)
        .into_iter()
        .map(|e| (text(&e["part"]), text(&e["consumer"])))
        .collect();
    let expected = BTreeSet::from([
        ("batch", "push"),
        ("order", "orderly"),
        ("plain", "pull"),
        ("plain", "push"),
        ("plain", "push_tagged"),
    ]);
    if done != expected {
        failures.push(format!(
            "consumers that finished: {done:?}, expected {expected:?}"
        ));
    }
    for event in events(&run.events, "consumer_done", None) {
        if event["complete"] != true {
            failures.push(format!(
                "a consumer stopped waiting before it had every message: {event}"
            ));
        }
    }
}

/// Sync, async and oneway sends; the push consumer of `*` gets all of them, the push consumer
/// and the pull consumer of `TagSync || TagOneway` exactly the sync and oneway ones.
fn check_plain(all: &[Value], failures: &mut Vec<String>) -> String {
    let sent = sent_by_key(all, "plain", failures);
    delivery::check_plain_sends(&sent, PER_MODE, failures);
    let tagged = delivery::without_async_tag(&sent);
    let push = account(
        "plain push",
        &sent,
        &received(all, "plain", "push"),
        failures,
    );
    let push_tagged = account(
        "plain push_tagged",
        &tagged,
        &received(all, "plain", "push_tagged"),
        failures,
    );
    let pull = account(
        "plain pull",
        &tagged,
        &received(all, "plain", "pull"),
        failures,
    );
    format!("push {push}, push of 2 tags {push_tagged}, pull of 2 tags {pull}")
}

/// Each order's steps on the queue the selector chose, consumed from it in step order; queue
/// offsets rising on every queue in consumption order.
fn check_order(all: &[Value], failures: &mut Vec<String>) -> String {
    let sent = sent_by_key(all, "order", failures);
    let made = (ORDERS + 1) * STEPS;
    if sent.len() != made {
        failures.push(format!("order: {} sends, {made} made", sent.len()));
    }
    for event in sent.values() {
        if number(&event["queue"]) < 0 || event["selections"] != 1 {
            failures.push(format!(
                "order: the selector chose no single queue: {event}"
            ));
        }
        if event["mode"] == "orderly" && event["status"] != 0 {
            failures.push(format!("order: a send not SEND_OK: {event}"));
        }
    }
    let queue_of_order = delivery::queue_of_order(&sent, failures);
    let got = received(all, "order", "orderly");
    let report = account("order", &sent, &got, failures);
    for event in &got {
        let (order, step) = delivery::order_step(event);
        if let Some(sent) = sent.get(text(&event["key"])) {
            if number(&sent["order"]) != order || number(&sent["step"]) != step {
                failures.push(format!(
                    "order: properties differ, sent {sent}, got {event}"
                ));
            }
        }
    }
    delivery::check_order_sequence(&got, &queue_of_order, failures);
    let queues: BTreeSet<i64> = queue_of_order.values().copied().collect();
    format!(
        "orderly {report} ({} orders, one of them oneway, on {} queues)",
        ORDERS + 1,
        queues.len()
    )
}

/// Each `send_batch` acknowledged, and stored as Java 4.9.8 stores it (the header's
/// `batch="1"` reads as false): one message per batch, without keys or tags.
fn check_batch(all: &[Value], failures: &mut Vec<String>) -> String {
    let sent = sent_by_key(all, "batch", failures);
    if sent.len() != BATCHES * BATCH_SIZE {
        failures.push(format!(
            "batch: {} sends reported, {} made",
            sent.len(),
            BATCHES * BATCH_SIZE
        ));
    }
    for event in sent.values() {
        if event["status"] != 0 {
            failures.push(format!("batch: a send_batch not SEND_OK: {event}"));
        }
    }
    let got = received(all, "batch", "push");
    if got.len() != BATCHES {
        failures.push(format!(
            "batch: {} messages consumed, expected one per batch ({BATCHES})",
            got.len()
        ));
    }
    for event in &got {
        if !text(&event["key"]).is_empty() || !text(&event["tag"]).is_empty() {
            failures.push(format!(
                "batch: a batch's message with keys or a tag (stored as a batch, unlike \
                 Java 4.9.8): {event}"
            ));
        }
        if number(&event["store_size"]) <= 0 || event["topic"] != "CppBatch" {
            failures.push(format!("batch: not a stored CppBatch message: {event}"));
        }
    }
    let queues: BTreeSet<i64> = got.iter().map(|e| number(&e["queue"])).collect();
    format!(
        "batch: {} send_batch calls of {BATCH_SIZE} acknowledged, {} keyless messages on {} \
         queue(s)",
        sent.len() / BATCH_SIZE,
        got.len(),
        queues.len()
    )
}

/// [`delivery::account`], with the property `sent_by` (the send mode) checked too, and no
/// redelivery: nothing here makes one. Returns "N/M keys, D duplicates".
fn account(
    what: &str,
    expected: &BTreeMap<&str, &Value>,
    got: &[&Value],
    failures: &mut Vec<String>,
) -> String {
    delivery::account(
        what,
        expected,
        got,
        failures,
        |what, sent, event, failures| {
            if event["prop"] != sent["mode"] {
                failures.push(format!(
                    "{what}: property sent_by differs, sent {sent}, got {event}"
                ));
            }
            if event["reconsume"] != 0 {
                failures.push(format!("{what}: a redelivery: {event}"));
            }
        },
    )
}

/// Runs `tests/cpp/client.py` against `namesrv`, killing it after `timeout`. Its `HOME` is a
/// temporary directory, where librocketmq writes its log (`logs/rocketmq-cpp/`).
fn run_cpp_client(python: &Path, namesrv: &str, timeout: Duration) -> CppRun {
    let program = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/cpp/client.py");
    let dir = TempDir::new("cpp-client");
    let out_path = dir.path().join("stdout.jsonl");
    let err_path = dir.path().join("stderr.txt");
    let mut child = Command::new(python)
        .arg("-B") // no __pycache__ in the source tree
        .arg(&program)
        .arg(namesrv)
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", python.display()));
    let exit = common::wait_exit(&mut child, timeout);
    if exit.is_none() {
        common::kill(&mut child);
    }
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let events = delivery::parse_events(&stdout);
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir.path().join("logs/rocketmq-cpp"))
        .map(|entries| entries.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    logs.sort();
    let client_log = logs
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap_or_default())
        .collect();
    CppRun {
        exit,
        events,
        stderr,
        client_log,
    }
}
