//! The Apache Go client, `github.com/apache/rocketmq-client-go/v2` v2.1.2 (the remoting
//! protocol of RocketMQ 4.x), against `ferromq standalone`: the program of `tests/go/` sends
//! sync, async and oneway messages with tags and unique keys, consumes them with a push
//! consumer and with the pull consumer of that version (two of three tags, by Poll/ACK and
//! by PullFrom on every queue), sends orders through a QueueSelector to an orderly push
//! consumer, and runs three transactions (committed, rolled back, and UNKNOW until the
//! broker's check asks CheckLocalTransaction, which commits). The Go program only reports, one JSON line per event; this test accounts
//! for every message by its unique key: none lost, none unexpected, each with the tag, body
//! and message id it was sent with, each order's steps in sequence on its queue, and queue
//! offsets rising in consumption order on every queue of the orderly consumer.
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
use common::TempDir;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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
    let binary = go_client_binary();
    let server = Standalone::start(BROKER_CONFIG);
    let started = Instant::now();
    let run = run_go_client(&binary, &server.namesrv_addr(), Duration::from_secs(240));
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

/// What the Go program printed and how it ended.
struct GoRun {
    exit: Option<std::process::ExitStatus>,
    events: Vec<Value>,
    stderr: String,
}

/// Exit status, the closing event, and no error events.
fn check_run(run: &GoRun, failures: &mut Vec<String>) {
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

/// Runs the Go program against `namesrv`, killing it after `timeout`.
fn run_go_client(binary: &Path, namesrv: &str, timeout: Duration) -> GoRun {
    let dir = TempDir::new("go-client");
    let out_path = dir.path().join("stdout.jsonl");
    let err_path = dir.path().join("stderr.txt");
    let mut child = Command::new(binary)
        .arg(namesrv)
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {}: {e}", binary.display()));
    let exit = common::wait_exit(&mut child, timeout);
    if exit.is_none() {
        common::kill(&mut child);
    }
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let events = delivery::parse_events(&stdout);
    GoRun {
        exit,
        events,
        stderr,
    }
}

/// `go`: on `PATH`, else `/usr/local/go/bin/go`.
fn go() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .map(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("go"))
                .find(|go| go.is_file())
        })
        .unwrap_or_default();
    let go = on_path.unwrap_or_else(|| PathBuf::from("/usr/local/go/bin/go"));
    assert!(
        go.is_file(),
        "Go is missing: the Go client test builds tests/go/ with Go 1.22 or newer; put `go` \
         on PATH or install it in /usr/local/go"
    );
    go
}

/// Builds `tests/go/` into `target/go-client/ferromq-go-client` (the go command fetches the
/// modules `go.sum` pins on first use and caches the build); returns the binary.
fn go_client_binary() -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/go");
    let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is target/tmp")
        .join("go-client");
    std::fs::create_dir_all(&target).unwrap();
    let binary = target.join("ferromq-go-client");
    let building = target.join(format!("ferromq-go-client.{}.tmp", std::process::id()));
    let out_path = target.join(format!("build.{}.log", std::process::id()));
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = Command::new(go())
        .args(["build", "-buildvcs=false", "-o"])
        .arg(&building)
        .arg(".")
        .current_dir(&source)
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("spawn go build");
    let status = common::wait_exit(&mut child, Duration::from_secs(400));
    if status.is_none() {
        common::kill(&mut child);
    }
    let log = std::fs::read_to_string(&out_path).unwrap_or_default();
    let _ = std::fs::remove_file(&out_path);
    assert!(
        status.is_some_and(|s| s.success()),
        "go build of tests/go/ failed ({status:?}; it fetches rocketmq-client-go and its \
         dependencies from the Go module proxy on first use):\n{log}"
    );
    std::fs::rename(&building, &binary).unwrap();
    binary
}
