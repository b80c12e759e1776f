//! `ferromq-bench produce|consume|e2e` against a real `ferromq standalone` process with a
//! fresh data directory: the counts in each report's JSON must equal what the broker stored,
//! as the test reads it back with GET_MAX_OFFSET on its own connection. Every report's
//! latency over time must cover its measured time in consecutive 100 ms windows whose counts
//! add up to its latency samples; a broker stopped (SIGSTOP) in the middle of a run must show
//! in them, in the text report and in the SVG (checked to be well-formed XML) at its time.
//!
//! The broker binary is the `ferromq` next to `ferromq-bench` in the same target directory
//! (`cargo nextest run --workspace` builds both); if it is missing, it is built first.

use ferromq::remoting::client::{connect_tokio, ClientConfig};
use ferromq::remoting::headers::{GetMaxOffsetRequestHeader, OffsetResponseHeader};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BENCH: &str = env!("CARGO_BIN_EXE_ferromq-bench");
const QUEUES: i32 = 4;

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let path = std::env::temp_dir().join(format!(
            "ferromq-bench-{name}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The `ferromq` binary of the same target directory, built if missing.
fn ferromq_binary() -> PathBuf {
    let bench = Path::new(BENCH);
    let dir = bench.parent().unwrap();
    let binary = dir.join("ferromq");
    if !binary.exists() {
        let mut build = Command::new(env!("CARGO"));
        build.args(["build", "-p", "ferromq", "--bin", "ferromq"]);
        if dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("run cargo build");
        assert!(status.success(), "cargo build -p ferromq failed");
    }
    assert!(binary.exists(), "no ferromq binary at {}", binary.display());
    binary
}

/// `ferromq standalone` on ephemeral loopback ports; killed on drop.
struct Standalone {
    child: Child,
    namesrv: SocketAddr,
    broker: SocketAddr,
}

impl Standalone {
    fn start(data: &Path) -> Standalone {
        Self::start_with(data, &[])
    }

    /// [`Standalone::start`] with more command-line arguments (`-c broker.conf`).
    fn start_with(data: &Path, extra: &[&str]) -> Standalone {
        let mut child = Command::new(ferromq_binary())
            .arg("standalone")
            .arg("--data")
            .arg(data)
            .args(extra)
            .args([
                "--namesrv-listen",
                "127.0.0.1:0",
                "--broker-listen",
                "127.0.0.1:0",
            ])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ferromq standalone");
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[standalone] {line}");
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("standalone not ready: {:?}", child.try_wait()));
            if line.contains("standalone ready") {
                let field = |key: &str| -> SocketAddr {
                    let rest = line.split(key).nth(1).unwrap();
                    rest.split_whitespace().next().unwrap().parse().unwrap()
                };
                let (namesrv, broker) = (field("namesrv="), field("broker="));
                return Standalone {
                    child,
                    namesrv,
                    broker,
                };
            }
        }
    }
}

impl Drop for Standalone {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs the bench with `args` plus `--json`, bounded in time; returns the JSON report.
fn bench(dir: &Path, name: &str, args: &[&str]) -> Value {
    let (child, json) = spawn_bench(dir, name, args, Stdio::inherit);
    finish_bench(child, name, &json)
}

/// Starts the bench with `args` plus `--json`, its stdout and stderr as `output` makes them;
/// returns it and the path of its JSON report.
fn spawn_bench(
    dir: &Path,
    name: &str,
    args: &[&str],
    output: impl Fn() -> Stdio,
) -> (Child, PathBuf) {
    let json = dir.join(format!("{name}.json"));
    let child = Command::new(BENCH)
        .args(args)
        .arg("--json")
        .arg(&json)
        .stdin(Stdio::null())
        .stdout(output())
        .stderr(output())
        .spawn()
        .expect("spawn ferromq-bench");
    (child, json)
}

/// Waits (bounded) for a bench run to succeed; returns its JSON report.
fn finish_bench(mut child: Child, name: &str, json: &Path) -> Value {
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("ferromq-bench {name} did not finish in 120 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "ferromq-bench {name} failed: {status}");
    serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap()
}

/// The sum of the topic's queue max offsets, read from the broker directly.
fn stored(broker: SocketAddr, topic: &str) -> i64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, _) = connect_tokio(broker, ClientConfig::default())
            .await
            .unwrap();
        let mut total = 0;
        for queue_id in 0..QUEUES {
            let header = GetMaxOffsetRequestHeader {
                topic: topic.to_owned(),
                queue_id,
                committed: None,
            };
            let request =
                RemotingCommand::request_with_header(RequestCode::GET_MAX_OFFSET, &header);
            let response = client
                .request_timeout(request, Duration::from_secs(5))
                .await
                .unwrap();
            assert_eq!(response.response_code(), ResponseCode::SUCCESS);
            total += response
                .decode_header::<OffsetResponseHeader>()
                .unwrap()
                .offset;
        }
        total
    })
}

fn count(report: &Value, side: &str, key: &str) -> i64 {
    report[side][key]
        .as_i64()
        .unwrap_or_else(|| panic!("{side}.{key} missing in {report:#}"))
}

/// Checks a latency over time (`timeline`): consecutive 100 ms windows whose counts add up to
/// `samples`; in each, p50 <= p99 <= max (and max about the run's `max_us` at most), or no
/// latency when nothing completed. Returns the windows.
fn assert_windows(timeline: &Value, samples: u64, max_us: u64, what: &str) -> Vec<Value> {
    assert_eq!(timeline["window_ms"], 100, "{what}: {timeline:#}");
    let windows = timeline["windows"].as_array().unwrap().clone();
    let start_ms = |w: &Value| w["start_ms"].as_u64().unwrap();
    for pair in windows.windows(2) {
        assert_eq!(
            start_ms(&pair[1]),
            start_ms(&pair[0]) + 100,
            "{what}: {pair:?}"
        );
    }
    let counted: u64 = windows.iter().map(|w| w["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, samples, "{what}");
    for w in &windows {
        let [p50, p99, max] = ["p50_us", "p99_us", "max_us"].map(|key| w[key].as_u64());
        if w["count"] == 0 {
            assert!(
                p50.is_none() && p99.is_none() && max.is_none(),
                "{what}: {w}"
            );
        } else {
            let (p50, p99, max) = (p50.unwrap(), p99.unwrap(), max.unwrap());
            assert!(0 < p50 && p50 <= p99 && p99 <= max, "{what}: {w}");
            // Windows keep 2 significant digits (buckets 1/128 wide), the run 3.
            assert!(
                max <= max_us + max_us / 50 + 1,
                "{what}: {w} against max {max_us}"
            );
        }
    }
    windows
}

/// Checks the tails and the latency over time of one side of a report: percentiles ordered
/// up to max; windows as [`assert_windows`] checks them, from the one where measuring starts
/// (the end of the warm-up) to the one of the last measured event, no more than the run can
/// have. Returns the windows.
fn assert_timeline(report: &Value, side: &str) -> Vec<Value> {
    let summary = &report[side];
    let latency = &summary["latency_us"];
    let tails: Vec<u64> = ["p50", "p90", "p99", "p999", "p9999", "max"]
        .iter()
        .map(|key| {
            latency[key]
                .as_u64()
                .unwrap_or_else(|| panic!("{side}.latency_us.{key}: {summary:#}"))
        })
        .collect();
    assert!(
        tails.windows(2).all(|pair| pair[0] <= pair[1]),
        "{side}: {tails:?}"
    );
    let samples = summary["latency_samples"].as_u64().unwrap();
    let windows = assert_windows(&summary["timeline"], samples, tails[5], side);
    let start_ms = |w: &Value| w["start_ms"].as_u64().unwrap();
    let options = &report["options"];
    let warmup_ms = options["warmup"].as_f64().unwrap() * 1000.0;
    assert_eq!(
        start_ms(&windows[0]) as f64,
        (warmup_ms / 100.0).floor() * 100.0,
        "{side}: the first window is the one where measuring starts"
    );
    let last_event_ms = warmup_ms + summary["elapsed_secs"].as_f64().unwrap() * 1000.0;
    let last_ms = start_ms(windows.last().unwrap()) as f64;
    assert!(
        last_ms <= last_event_ms + 1.0 && last_event_ms < last_ms + 101.0,
        "{side}: the last window ({last_ms} ms) holds the last event ({last_event_ms} ms)"
    );
    let run_ms = 1000.0
        * (options["duration"].as_f64().unwrap() + options["catch_up"].as_f64().unwrap())
        + options["timeout_ms"].as_f64().unwrap()
        + 1000.0;
    assert!(
        windows.len() as f64 <= run_ms / 100.0 + 2.0,
        "{side}: {}",
        windows.len()
    );
    windows
}

/// The elements of an XML document (name and attributes, in document order), checked to be
/// well-formed on the way: one root element; every tag closed, in order; attribute values
/// quoted and names unique per element; no `<` in text or values and `&` only as an entity.
fn xml_elements(text: &str) -> Vec<(String, Vec<(String, String)>)> {
    fn check_entities(text: &str) {
        for (at, _) in text.match_indices('&') {
            let entity = text[at + 1..].split(';').next().unwrap();
            let known = ["amp", "lt", "gt", "quot", "apos"].contains(&entity)
                || entity
                    .strip_prefix('#')
                    .is_some_and(|n| n.parse::<u32>().is_ok());
            assert!(
                known && text[at..].contains(';'),
                "bad entity at {:?}",
                &text[at..]
            );
        }
    }
    let is_name = |c: char| c.is_ascii_alphanumeric() || "_:.-".contains(c);
    let mut elements = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut rest = text;
    loop {
        let (chars, after) = rest.split_once('<').unwrap_or((rest, ""));
        check_entities(chars);
        if open.is_empty() {
            assert!(chars.trim().is_empty(), "text outside the root: {chars:?}");
        }
        if after.is_empty() {
            break;
        }
        if let Some(closing) = after.strip_prefix('/') {
            let (name, after) = closing.split_once('>').expect("unclosed end tag");
            assert_eq!(
                open.pop().as_deref(),
                Some(name.trim_end()),
                "end tag out of order"
            );
            rest = after;
            continue;
        }
        assert!(
            elements.is_empty() || !open.is_empty(),
            "a second root element"
        );
        let name: String = after.chars().take_while(|c| is_name(*c)).collect();
        assert!(
            !name.is_empty(),
            "a tag without a name at {:?}",
            &after[..after.len().min(40)]
        );
        let mut tag = &after[name.len()..];
        let mut attributes: Vec<(String, String)> = Vec::new();
        let self_closing = loop {
            tag = tag.trim_start();
            if let Some(after) = tag.strip_prefix("/>") {
                tag = after;
                break true;
            }
            if let Some(after) = tag.strip_prefix('>') {
                tag = after;
                break false;
            }
            let key: String = tag.chars().take_while(|c| is_name(*c)).collect();
            assert!(
                !key.is_empty(),
                "<{name}>: bad attribute at {:?}",
                &tag[..tag.len().min(40)]
            );
            let value = tag[key.len()..]
                .trim_start()
                .strip_prefix('=')
                .expect("attribute =");
            let value = value.trim_start();
            let quote = value.chars().next().filter(|q| *q == '"' || *q == '\'');
            let quote = quote.unwrap_or_else(|| panic!("<{name} {key}>: unquoted value"));
            let (value, after) = value[1..].split_once(quote).expect("unterminated value");
            assert!(!value.contains('<'), "<{name} {key}>: '<' in the value");
            check_entities(value);
            assert!(
                attributes.iter().all(|(k, _)| *k != key),
                "<{name}>: {key} twice"
            );
            attributes.push((key, value.to_owned()));
            tag = after;
        };
        if !self_closing {
            open.push(name.clone());
        }
        elements.push((name, attributes));
        rest = tag;
    }
    assert!(open.is_empty(), "unclosed elements: {open:?}");
    assert!(!elements.is_empty(), "no root element");
    elements
}

/// The value of attribute `key` of an element from [`xml_elements`].
fn attribute<'a>(element: &'a (String, Vec<(String, String)>), key: &str) -> Option<&'a str> {
    element
        .1
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// Sends `signal` (`-STOP`, `-CONT`) to the process `pid` with kill(1).
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .arg(signal)
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill {signal} {pid}: {status}");
}

#[test]
fn reports_count_what_the_broker_stored() {
    let dir = TempDir::new("harness");
    let server = Standalone::start(&dir.0.join("data"));
    let ns = server.namesrv.to_string();
    let queues = QUEUES.to_string();
    let common = |workload: &'static str| -> Vec<String> {
        [
            workload,
            "-n",
            &ns,
            "--topic",
            "BenchHarness",
            "--queues",
            &queues,
            // Every time (idempotent): ferromq's broker tells the name server about a new
            // topic only at its next periodic registration.
            "--create-topic",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect()
    };
    let run = |name: &str, workload: &'static str, extra: &[&str]| -> Value {
        let mut args = common(workload);
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        bench(&dir.0, name, &args)
    };

    // Sync produce: every acknowledged message is stored, and nothing else.
    let plot = dir.0.join("produce.svg");
    let produce = run(
        "produce",
        "produce",
        &[
            "--messages",
            "2000",
            "--mode",
            "sync",
            "--threads",
            "4",
            "--duration",
            "20",
            "--plot",
            plot.to_str().unwrap(),
        ],
    );
    let acknowledged = count(&produce, "produce", "acknowledged");
    assert_eq!(acknowledged, 2000, "{produce:#}");
    assert_eq!(count(&produce, "produce", "error_count"), 0);
    assert_eq!(stored(server.broker, "BenchHarness"), acknowledged);
    assert_eq!(produce["verification"]["broker_stored"], 2000);
    assert_eq!(produce["verification"]["match"], true);
    for key in [
        "git_commit",
        "cpu_model",
        "cores",
        "kernel",
        "hostname",
        "start_time",
    ] {
        assert!(!produce["metadata"][key].is_null(), "metadata.{key}");
    }
    assert_eq!(produce["options"]["threads"], 4);
    assert_eq!(produce["target"], format!("name server {ns}"));
    assert!(produce["broker_version"].is_i64());
    for key in ["p50", "p90", "p99", "p999", "p9999", "max"] {
        assert!(produce["produce"]["latency_us"][key].as_u64().unwrap() > 0);
    }
    assert_timeline(&produce, "produce");
    // Every message carries a `UNIQ_KEY`, as a RocketMQ client's do: the broker indexed them.
    let index = dir.0.join("data").join("store").join("index");
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_dir(&index).map_or(0, Iterator::count) == 0 {
        assert!(
            Instant::now() < deadline,
            "no IndexFile in {}",
            index.display()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let svg = std::fs::read_to_string(&plot).unwrap();
    let elements = xml_elements(&svg);
    assert_eq!(elements[0].0, "svg", "{svg}");
    let groups: Vec<_> = elements
        .iter()
        .filter_map(|e| attribute(e, "class"))
        .collect();
    assert!(
        groups.starts_with(&["percentiles", "timeline", "p50", "p99", "max"]),
        "the percentile curves, then the produce side over time: {groups:?}"
    );
    assert!(elements.iter().any(|e| e.0 == "polyline"), "{svg}");

    // A batch produce adds exactly its messages.
    let batch = run(
        "batch",
        "produce",
        &["--batch", "10", "--messages", "300", "--size", "200"],
    );
    assert_eq!(count(&batch, "produce", "acknowledged"), 300);
    assert_eq!(stored(server.broker, "BenchHarness"), 2300);

    // Consuming the backlog from the first offsets reads exactly what is stored.
    let consume = run("consume", "consume", &["--drain", "--duration", "30"]);
    assert_eq!(count(&consume, "consume", "messages_total"), 2300);
    assert_eq!(count(&consume, "consume", "bytes"), 2000 * 1024 + 300 * 200);
    assert_timeline(&consume, "consume");

    // e2e: the consumer receives every message the producer got acknowledged.
    let e2e = run(
        "e2e",
        "e2e",
        &["--messages", "1000", "--mode", "async", "--threads", "2"],
    );
    let produced = count(&e2e, "produce", "acknowledged");
    assert_eq!(produced, 1000);
    assert_eq!(count(&e2e, "consume", "messages_total"), produced);
    assert!(count(&e2e, "consume", "latency_samples") > 0);
    assert_timeline(&e2e, "produce");
    assert_timeline(&e2e, "consume");
    assert_eq!(stored(server.broker, "BenchHarness"), 3300);

    // Oneway: no answers, but the verified count is what the broker stored.
    let oneway = run(
        "oneway",
        "produce",
        &["--messages", "1500", "--mode", "oneway", "--threads", "2"],
    );
    assert_eq!(count(&oneway, "produce", "sent"), 1500);
    assert!(oneway["produce"]["acknowledged"].is_null());
    assert!(
        oneway["produce"]["timeline"].is_null(),
        "no latencies, no timeline"
    );
    assert_eq!(oneway["verification"]["broker_stored"], 1500);
    assert_eq!(stored(server.broker, "BenchHarness"), 4800);

    // Direct to the broker, open loop: the warm-up is left out of the rates but its messages
    // still count as acknowledged, and they are all stored.
    let broker = server.broker.to_string();
    let direct = bench(
        &dir.0,
        "direct",
        &[
            "produce",
            "--broker",
            &broker,
            "--topic",
            "BenchHarness",
            "--queues",
            &queues,
            "--rate",
            "400",
            "--duration",
            "2",
            "--warmup",
            "0.5",
            "--mode",
            "async",
        ],
    );
    let acknowledged = count(&direct, "produce", "acknowledged");
    // The schedule holds 400/s x 2 s = 800 sends; the last may miss the deadline.
    assert!((400..=800).contains(&acknowledged), "{direct:#}");
    assert!(count(&direct, "produce", "messages") < acknowledged);
    assert_eq!(stored(server.broker, "BenchHarness"), 4800 + acknowledged);
    assert_eq!(direct["options"]["rate"], 400.0);
    let windows = assert_timeline(&direct, "produce");
    assert_eq!(windows[0]["start_ms"], 500, "from the end of the warm-up");
}

/// A broker stopped (SIGSTOP) for about a second in the middle of a closed-loop run shows
/// where it happened: windows in which nothing was answered from when it stopped to when it
/// went on, then the window of the first answers after, with the run's largest latency, at
/// least the gap's length; the text report names that window, and the SVG shades each empty
/// window. The stop lasts from one of the bench's progress lines (each second, with its time
/// since the run's start) to the next.
#[test]
fn a_stalled_broker_shows_at_its_time_in_the_json_the_text_and_the_svg() {
    let dir = TempDir::new("harness-stall");
    let server = Standalone::start(&dir.0.join("data"));
    let ns = server.namesrv.to_string();
    let queues = QUEUES.to_string();
    let plot = dir.0.join("stall.svg");
    let args = [
        "produce",
        "-n",
        &ns,
        "--topic",
        "BenchStall",
        "--queues",
        &queues,
        "--create-topic",
        "--mode",
        "sync",
        "--threads",
        "4",
        "--duration",
        "4",
        "--plot",
        plot.to_str().unwrap(),
    ];
    let (mut child, json) = spawn_bench(&dir.0, "stall", &args, Stdio::piped);
    let stdout = child.stdout.take().unwrap();
    let text = std::thread::spawn(move || std::io::read_to_string(stdout).unwrap());
    let stderr = child.stderr.take().unwrap();
    let (progress_tx, progress) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            eprintln!("[bench] {line}");
            // `[  1.0s] produce ...`: seconds since the run's start.
            let secs = line
                .strip_prefix('[')
                .and_then(|rest| rest.split_once("s]"))
                .and_then(|(secs, _)| secs.trim().parse::<f64>().ok());
            if let Some(secs) = secs {
                let _ = progress_tx.send(secs);
            }
        }
    });
    let next_progress = || {
        progress
            .recv_timeout(Duration::from_secs(30))
            .expect("a progress line each second")
    };
    let stopped_secs = next_progress();
    signal(server.child.id(), "-STOP");
    let resumed_secs = next_progress();
    signal(server.child.id(), "-CONT");
    let report = finish_bench(child, "stall", &json);
    let text = text.join().unwrap();
    assert_eq!(count(&report, "produce", "error_count"), 0, "{report:#}");
    let acknowledged = count(&report, "produce", "acknowledged");
    assert_eq!(stored(server.broker, "BenchStall"), acknowledged);

    let windows = assert_timeline(&report, "produce");
    let counts: Vec<u64> = windows
        .iter()
        .map(|w| w["count"].as_u64().unwrap())
        .collect();
    // The longest run of windows without an answer: the stall.
    let (mut gap_start, mut gap_len, mut run) = (0, 0, 0);
    for (index, count) in counts.iter().enumerate() {
        run = if *count == 0 { run + 1 } else { 0 };
        if run > gap_len {
            (gap_start, gap_len) = (index + 1 - run, run);
        }
    }
    // The signals follow the progress lines by a few ms, more on a loaded machine; the
    // windows at either end of the stop hold the answers just before and just after it. A
    // pause of the broker's own just before the stop (a flush on a loaded machine) joins the
    // run of empty windows: it may begin up to 500 ms early (seen: 200 ms, in CI).
    let stall_ms = (resumed_secs - stopped_secs) * 1000.0;
    assert!(
        gap_len as f64 * 100.0 >= stall_ms / 2.0,
        "a {stall_ms} ms stop, {gap_len} empty windows: {counts:?}"
    );
    let start_ms = |index: usize| windows[index]["start_ms"].as_u64().unwrap() as f64;
    assert!(
        start_ms(gap_start) >= stopped_secs * 1000.0 - 500.0
            && start_ms(gap_start + gap_len) <= resumed_secs * 1000.0 + 500.0,
        "stopped at {stopped_secs} s, went on at {resumed_secs} s: {counts:?}"
    );
    // The first answers after it waited through it, and nothing else waited as long.
    let spike = &windows[gap_start + gap_len];
    let max_us = |w: &Value| w["max_us"].as_u64().unwrap_or(0);
    assert!(
        max_us(spike) as f64 >= gap_len as f64 * 100_000.0,
        "{spike}"
    );
    assert!(
        windows.iter().all(|w| max_us(w) <= max_us(spike)),
        "{windows:?}"
    );

    let worst = format!("worst at {:.1} s", start_ms(gap_start + gap_len) / 1000.0);
    assert!(
        text.contains("p99.9 ") && text.contains("p99.99 "),
        "{text}"
    );
    assert!(text.contains(&worst), "{worst} in {text}");
    let elements = xml_elements(&std::fs::read_to_string(&plot).unwrap());
    let empty = elements
        .iter()
        .filter(|e| e.0 == "rect" && attribute(e, "class") == Some("empty"))
        .count();
    assert_eq!(empty, counts.iter().filter(|c| **c == 0).count());
}

/// `ferromq-bench commitlog` on the build's own disk (tmpfs has no O_DIRECT): every append it
/// reports is in the CommitLog once, with single puts handed over either way and with
/// batches, under both flush modes: the log holds exactly the appends' records. Each case's
/// latency over time counts every put answered, and `--plot` draws it per case.
#[test]
fn commitlog_reports_every_append_and_the_log_holds_each_once() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("bench-commitlog-harness");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let appends_max = 4096;
    let mut record_sizes = Vec::new();
    let shapes = [
        ("coalesced", "1", "same"),
        ("each", "1", "same"),
        ("coalesced", "8", "same"),
        // Half the producers on each core, as the broker's net shards on two cores.
        ("coalesced", "1", "both"),
    ];
    let plot = dir.join("commitlog.svg");
    for (handoff, batch, producers_on) in shapes {
        let mut plot_args = Vec::new();
        if producers_on == "both" {
            plot_args.extend(["--plot", plot.to_str().unwrap()]);
        }
        let report = bench(
            &dir,
            &format!("commitlog-{handoff}-{batch}-{producers_on}"),
            &[
                "commitlog",
                "--dir",
                dir.to_str().unwrap(),
                "--sizes",
                "1024",
                "--producers",
                "8",
                "--in-flight",
                "4",
                "--batch",
                batch,
                "--handoff",
                handoff,
                "--producers-on",
                producers_on,
                "--flush",
                "sync,async",
                "--duration-secs",
                "30",
                "--appends-max",
                &appends_max.to_string(),
                "--raw-file-mib",
                "8",
            ]
            .iter()
            .chain(&plot_args)
            .copied()
            .collect::<Vec<_>>(),
        );
        // Both baselines ran: sequential, then durable (O_DSYNC, the writer's jobs in flight).
        let raw = report["raw"].as_array().unwrap();
        assert_eq!(raw.len(), 2, "{raw:?}");
        assert_eq!(raw[0]["pattern"], "sequential");
        assert_eq!(raw[1]["pattern"], "durable_dsync");
        assert_eq!(raw[1]["depth"], 2);
        assert!(
            raw.iter().all(|r| r["mb_per_sec"].as_f64().unwrap() > 0.0),
            "{raw:?}"
        );
        let results = report["results"].as_array().unwrap();
        assert_eq!(results.len(), 2, "one case per flush mode");
        for case in results {
            let appends = case["appends"].as_u64().unwrap();
            let log_bytes = case["log_bytes"].as_u64().unwrap();
            let shape = format!("{handoff}, batch {batch}, producers on {producers_on}");
            assert_eq!(appends, appends_max, "{shape}: {case}");
            let puts = case["latency_samples"].as_u64().unwrap();
            assert_eq!(puts, appends / batch.parse::<u64>().unwrap(), "{shape}");
            let max_us = case["latency_us"]["max"].as_u64().unwrap();
            let windows = assert_windows(&case["timeline"], puts, max_us, &shape);
            assert!(
                windows.len() <= 30 * 10 + 100 + 1,
                "{shape}: within the case's span"
            );
            assert_eq!(log_bytes % appends, 0, "{shape}: {case}");
            record_sizes.push(log_bytes / appends);
            // What the disk's durable writes would allow: its durable MB/s in body bytes.
            let durable_share =
                raw[1]["mb_per_sec"].as_f64().unwrap() / raw[0]["mb_per_sec"].as_f64().unwrap();
            let body_share = 1024.0 / (log_bytes / appends) as f64;
            let bound = case["durable_bound_ratio_to_raw"].as_f64().unwrap();
            assert!(
                (bound - durable_share * body_share).abs() < 1e-6 * bound,
                "{shape}: {bound} vs {durable_share} x {body_share}"
            );
        }
    }
    assert!(
        record_sizes.windows(2).all(|pair| pair[0] == pair[1]),
        "the same record for every append: {record_sizes:?}"
    );
    let elements = xml_elements(&std::fs::read_to_string(&plot).unwrap());
    let charts = elements
        .iter()
        .filter(|e| attribute(e, "class") == Some("timeline"))
        .count();
    assert_eq!(charts, 2, "one chart per case");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// With `aclEnable=true`, a bench run given an account's keys signs every request (topic
/// creation, routes, sends, offsets) and the broker stores every acknowledged message.
#[test]
fn a_bench_run_with_keys_signs_its_requests_on_an_acl_broker() {
    let dir = TempDir::new("harness-acl");
    let conf = dir.0.join("home/conf");
    std::fs::create_dir_all(&conf).unwrap();
    let accounts =
        "accounts:\n  - accessKey: benchAdmin\n    secretKey: 12345678\n    admin: true\n";
    std::fs::write(conf.join("plain_acl.yml"), accounts).unwrap();
    let broker_conf = dir.0.join("broker.conf");
    let home = dir.0.join("home");
    std::fs::write(
        &broker_conf,
        format!("aclEnable=true\nrocketmqHome={}\n", home.display()),
    )
    .unwrap();
    let server =
        Standalone::start_with(&dir.0.join("data"), &["-c", broker_conf.to_str().unwrap()]);
    let ns = server.namesrv.to_string();
    let queues = QUEUES.to_string();
    let mut args = vec![
        "produce",
        "-n",
        &ns,
        "--topic",
        "BenchAcl",
        "--queues",
        &queues,
        "--create-topic",
        "--messages",
        "300",
        "--mode",
        "sync",
        "--threads",
        "2",
        "--duration",
        "20",
    ];
    args.extend(["--access-key", "benchAdmin", "--secret-key", "12345678"]);
    let report = bench(&dir.0, "produce-acl", &args);
    assert_eq!(count(&report, "produce", "acknowledged"), 300, "{report:#}");
    assert_eq!(count(&report, "produce", "error_count"), 0, "{report:#}");
}

/// Connection load: 10,000 idle connections held while 200 producers send over 200 more, as
/// the issue asks of a production broker. Every idle connection answers at the end, every
/// acknowledged message is stored, and the broker's heap grew by a bounded amount per idle
/// connection (6 KiB measured in release; the bound catches a per-connection buffer such as
/// the 64 KiB read buffer connections held before).
#[test]
fn ten_thousand_idle_connections_beside_200_producers_all_answer_and_acks_are_stored() {
    let dir = TempDir::new("harness-idle");
    let server = Standalone::start(&dir.0.join("data"));
    let ns = server.namesrv.to_string();
    let queues = QUEUES.to_string();
    let pid = server.child.id().to_string();
    let args = [
        "produce",
        "-n",
        &ns,
        "--topic",
        "BenchIdle",
        "--queues",
        &queues,
        "--create-topic",
        "--threads",
        "200",
        "--connections",
        "200",
        "--idle-connections",
        "10000",
        "--server-pid",
        &pid,
        "--duration",
        "5",
    ];
    let report = bench(&dir.0, "produce-idle", &args);
    let idle = &report["idle"];
    assert_eq!(idle["opened"], 10_000, "{report:#}");
    assert_eq!(idle["answering_at_end"], 10_000, "{report:#}");
    assert_eq!(count(&report, "produce", "error_count"), 0, "{report:#}");
    let acknowledged = count(&report, "produce", "acknowledged");
    assert!(acknowledged > 0, "{report:#}");
    assert_eq!(
        stored(server.broker, "BenchIdle"),
        acknowledged,
        "{report:#}"
    );
    let per_connection = idle["kib_per_connection"].as_f64().unwrap();
    eprintln!("broker heap per idle connection: {per_connection:.1} KiB");
    assert!(
        per_connection < 24.0,
        "{per_connection:.1} KiB per idle connection"
    );
}
