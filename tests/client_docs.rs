//! The client crate's documentation runs: its doc examples (`cargo test --doc -p
//! ferromq-client`) and every program in `client/examples/` against real `ferromq namesrv`
//! and `ferromq broker` processes, each one's checks deciding its exit status.
//!
//! Cargo is run from the test, on the build the test command already made, so the examples
//! are built exactly as a user of the client crate builds them: with the client crate and
//! its dependencies only.

mod common;

use common::{BrokerProcess, NamesrvProcess, TempDir};
use ferromq::client::{ClientConfig, Message, Producer};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A name server and a broker registered with it, with the topic the doc examples read
/// (`TopicTest`) holding one message.
struct Cluster {
    namesrv: NamesrvProcess,
    _broker: BrokerProcess,
    _dir: TempDir,
}

impl Cluster {
    fn start(name: &str) -> Cluster {
        let namesrv = NamesrvProcess::start("");
        let dir = TempDir::on_disk(name);
        let config = format!("brokerName=broker-docs\nnamesrvAddr={}", namesrv.addr);
        let broker = BrokerProcess::start(&dir.path().join("store"), &config);
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(async {
            let producer = Producer::new("docs_seed", ClientConfig::new(&namesrv.addr.to_string()));
            producer.start().await.unwrap();
            let deadline = Instant::now() + Duration::from_secs(20);
            while let Err(error) = producer.send(Message::new("TopicTest", "seed")).await {
                assert!(
                    Instant::now() < deadline,
                    "the broker never took a send: {error}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            producer.shutdown().await;
        });
        Cluster {
            namesrv,
            _broker: broker,
            _dir: dir,
        }
    }
}

/// What a bounded cargo run printed.
struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs `cargo args…` in the repository with `FERROMQ_NAMESRV` set, killed after `timeout`.
fn cargo(args: &[&str], namesrv: &str, timeout: Duration) -> Run {
    let out = TempDir::on_disk("client-docs-out");
    let (stdout_path, stderr_path) = (out.path().join("stdout"), out.path().join("stderr"));
    let mut child = Command::new(env!("CARGO"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("FERROMQ_NAMESRV", namesrv)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("run cargo");
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let read = |path: &Path| std::fs::read_to_string(path).unwrap_or_default();
    Run {
        success: status.is_some_and(|s| s.success()),
        stdout: read(&stdout_path),
        stderr: read(&stderr_path),
    }
}

/// The last `lines` lines of `text`, for a failure message.
fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[test]
fn every_client_doc_example_runs_against_a_broker() {
    let cluster = Cluster::start("client-docs");
    let namesrv = cluster.namesrv.addr.to_string();
    let run = cargo(
        &["test", "--locked", "--doc", "-p", "ferromq-client"],
        &namesrv,
        Duration::from_secs(900),
    );
    let report = format!("{}\n{}", tail(&run.stdout, 40), tail(&run.stderr, 40));
    assert!(run.success, "doc tests failed:\n{report}");
    // Every example ran: none is compile-only (`no_run`) or ignored.
    let results: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.starts_with("test ") && line.contains(" - "))
        .collect();
    assert!(results.len() >= 6, "too few doc examples:\n{report}");
    for line in &results {
        assert!(
            line.ends_with("... ok") && !line.contains(" - compile"),
            "{line}"
        );
    }
}

#[test]
fn every_client_example_program_checks_out_against_a_broker() {
    let cluster = Cluster::start("client-examples");
    let namesrv = cluster.namesrv.addr.to_string();
    let examples: [(&str, &[&str]); 4] = [
        ("produce", &["ExamplesProduce", "25"]),
        ("lite_pull", &["ExamplesLitePull", "200"]),
        ("transaction", &["ExamplesTransaction", "3"]),
        (
            "client_roundtrip",
            &[
                "--topic",
                "ExamplesRoundTrip",
                "--messages",
                "200",
                "--size",
                "64",
            ],
        ),
    ];
    for (example, args) in examples {
        let namesrv_args: &[&str] = if example == "client_roundtrip" {
            &["--namesrv", &namesrv]
        } else {
            &[&namesrv]
        };
        let mut command = vec!["run", "--locked", "-q", "-p", "ferromq-client", "--example"];
        command.push(example);
        command.push("--");
        command.extend_from_slice(namesrv_args);
        command.extend_from_slice(args);
        let run = cargo(&command, &namesrv, Duration::from_secs(600));
        assert!(
            run.success,
            "example {example} failed:\n{}\n{}",
            tail(&run.stdout, 30),
            tail(&run.stderr, 30)
        );
        eprintln!("{example}: {}", tail(&run.stdout, 3));
    }
}
