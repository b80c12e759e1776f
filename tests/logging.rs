//! The servers' log as an operator reads it (issue 41 part 4): `--log-format json` writes one
//! JSON object per line, `--log-file` writes to a file rotated by size and gzipped
//! (`--log-file-size`, `--log-files-kept`), and a state change (here the disk-full gate,
//! provoked with `diskSpaceWarningLevelRatio=0.01`) is one line with its figures.
//!
//! Method: a real `ferromq broker` process with a tiny rotation size, so that its start-up
//! lines fill several files; the test waits (bounded) for the disk-full line, stops the
//! broker with SIGTERM, then reads every file back (gunzipping the rotated ones) and parses
//! every line as JSON.

mod common;

use common::TempDir;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The broker's lines: `broker.log.N.gz` oldest first, then `broker.log`. While the broker
/// runs a rotated file may be half written (`settled` false skips what does not decode).
fn read_log(dir: &Path, settled: bool) -> (Vec<String>, Vec<PathBuf>) {
    // Absent until the broker has made it.
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (Vec::new(), Vec::new());
    };
    let mut rotated: Vec<(u32, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let n = name.strip_prefix("broker.log.")?.strip_suffix(".gz")?;
            Some((n.parse().ok()?, entry.path()))
        })
        .collect();
    rotated.sort_by_key(|(n, _)| std::cmp::Reverse(*n));
    let mut text = String::new();
    for (_, path) in &rotated {
        let Ok(file) = std::fs::File::open(path) else {
            assert!(!settled, "{} vanished", path.display());
            continue;
        };
        let mut one = String::new();
        match flate2::read::GzDecoder::new(file).read_to_string(&mut one) {
            Ok(_) => text.push_str(&one),
            Err(e) => assert!(!settled, "{} is not gzip text: {e}", path.display()),
        }
    }
    if let Ok(current) = std::fs::read_to_string(dir.join("broker.log")) {
        text.push_str(&current);
    }
    let lines = text.lines().map(str::to_owned).collect();
    (lines, rotated.into_iter().map(|(_, path)| path).collect())
}

/// A broker process, killed on drop (a failed assertion leaves none behind).
struct Running(Child);

impl Running {
    /// All the process wrote to stderr (read to the end: call it after the process ended).
    fn stderr(&mut self) -> String {
        let mut text = String::new();
        let mut pipe = self.0.stderr.take().expect("stderr is piped, read once");
        pipe.read_to_string(&mut text)
            .expect("read the broker's stderr");
        text
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        common::kill(&mut self.0);
    }
}

fn spawn_broker(dir: &Path, config: &str, log_args: &[&str]) -> Running {
    let conf = dir.join("broker.conf");
    std::fs::write(&conf, format!("brokerIP1=127.0.0.1\n{config}\n")).unwrap();
    let store = dir.join("store");
    Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .arg("broker")
        .args(["-c", conf.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .args(["--store", store.to_str().unwrap()])
        .args(log_args)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map(Running)
        .expect("spawn ferromq broker")
}

fn wait_until(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn json_lines_go_to_a_file_rotated_by_size_and_gzipped() {
    let dir = TempDir::new("logging-json");
    let logs = dir.path().join("logs");
    let file = logs.join("broker.log");
    let mut broker = spawn_broker(
        dir.path(),
        "diskSpaceWarningLevelRatio=0.01\ncleanResourceInterval=200",
        &[
            "--log-format",
            "json",
            "--log-file",
            file.to_str().unwrap(),
            "--log-file-size",
            "300",
            "--log-files-kept",
            "3",
            "--log",
            "debug",
        ],
    );
    // Read while the broker runs: later lines may rotate it out of the files kept.
    let mut disk_full = None;
    wait_until("the disk-full line", Duration::from_secs(30), || {
        let (lines, _) = read_log(&logs, false);
        disk_full = lines.into_iter().find(|line| line.contains("disk full"));
        disk_full.is_some()
    });
    common::terminate(&mut broker.0, Duration::from_secs(20));
    let stderr = broker.stderr();
    assert_eq!(stderr, "", "with --log-file nothing goes to stderr");

    let (lines, rotated) = read_log(&logs, true);
    // Rotated past the files kept: the oldest were removed, three remain, all gzipped.
    assert_eq!(rotated.len(), 3, "rotated files: {rotated:?}");
    assert!(!logs.join("broker.log.4.gz").exists());
    assert!(
        !logs.join("broker.log.1").exists(),
        "a rotated file left plain"
    );
    for line in &lines {
        let object: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        for key in ["timestamp", "level", "target"] {
            assert!(object[key].is_string(), "no {key}: {line}");
        }
        let message = object["fields"]["message"].as_str().unwrap_or_default();
        assert!(!message.is_empty(), "no message: {line}");
    }
    let disk_full: serde_json::Value = serde_json::from_str(&disk_full.unwrap()).unwrap();
    assert_eq!(
        disk_full["fields"]["message"],
        "disk full: refusing puts until space returns"
    );
    assert_eq!(disk_full["level"], "ERROR");
    assert_eq!(disk_full["target"], "ferromq::store::retention");
    assert!(disk_full["fields"]["used_percent"].is_u64(), "{disk_full}");
    // The lines queued at the stop were written out before the process ended.
    let last = lines.last().expect("lines");
    assert!(last.contains("broker stopped"), "last line: {last}");
}

#[test]
fn text_lines_go_to_the_file_without_colour_codes() {
    let dir = TempDir::new("logging-text");
    let file = dir.path().join("broker.log");
    let mut broker = spawn_broker(dir.path(), "", &["--log-file", file.to_str().unwrap()]);
    wait_until("the listening line", Duration::from_secs(30), || {
        std::fs::read_to_string(&file).is_ok_and(|text| text.contains("broker listening"))
    });
    common::terminate(&mut broker.0, Duration::from_secs(20));
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains('\u{1b}'), "ANSI codes in the file: {text}");
    for line in text.lines() {
        let level = line.split_whitespace().nth(1).unwrap_or_default();
        assert!(
            ["ERROR", "WARN", "INFO"].contains(&level),
            "not a timestamped line at the default level: {line}"
        );
    }
    assert!(text.contains("broker stopped"), "{text}");
}

#[test]
fn a_log_file_that_cannot_be_made_is_a_clear_error() {
    let dir = TempDir::new("logging-bad");
    // A directory under a regular file cannot be made.
    let blocker = dir.path().join("not-a-dir");
    std::fs::write(&blocker, "x").unwrap();
    let file = blocker.join("logs").join("broker.log");
    let mut broker = spawn_broker(dir.path(), "", &["--log-file", file.to_str().unwrap()]);
    let status = common::wait_exit(&mut broker.0, Duration::from_secs(20)).expect("it exits");
    let stderr = broker.stderr();
    assert_eq!(status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("cannot make the log directory"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
