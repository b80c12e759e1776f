//! The `ferromq` command line: help text, and start-up errors that name what to fix.
//!
//! Method: run the built binary as a child process and check its exit status and output.

mod common;

use std::process::Command;
use std::time::Duration;

fn ferromq() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ferromq"))
}

#[test]
fn namesrv_help_explains_every_flag() {
    let output = ferromq().args(["namesrv", "--help"]).output().unwrap();
    assert!(output.status.success());
    let help = String::from_utf8(output.stdout).unwrap();
    for flag in ["--config", "--listen", "--shards", "--log"] {
        assert!(help.contains(flag), "help lacks {flag}:\n{help}");
    }
    assert!(help.contains("Java properties"), "{help}");
}

#[test]
fn bad_config_value_stops_start_up_naming_file_line_and_key() {
    let dir = common::TempDir::new("cli");
    let config = dir.path().join("namesrv.conf");
    std::fs::write(&config, "# comment\nlistenPort=ninety\n").unwrap();
    let config = config.display().to_string();
    assert_start_fails(&["-c", &config], "line 2: listenPort = 'ninety' is invalid");
}

/// Runs `ferromq namesrv ARGS`, expecting a failed start whose stderr contains `expected`.
fn assert_start_fails(args: &[&str], expected: &str) {
    let output = ferromq().arg("namesrv").args(args).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains(expected), "{stderr}");
}

#[test]
fn missing_config_file_is_a_clear_error() {
    assert_start_fails(
        &["-c", "/nonexistent/namesrv.conf"],
        "cannot read config file /nonexistent/namesrv.conf",
    );
}

#[test]
fn port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let dir = common::TempDir::new("cli-port");
    let config = dir.path().join("namesrv.conf");
    std::fs::write(
        &config,
        format!("kvConfigPath={}/kv.json\n", dir.path().display()),
    )
    .unwrap();
    let config = config.display().to_string();
    assert_start_fails(
        &["--listen", &addr, "-c", &config],
        &format!("cannot listen on {addr}"),
    );
}

#[test]
fn unknown_config_key_is_logged_and_ignored() {
    let mut namesrv = common::NamesrvProcess::start("noSuchKey=1");
    assert!(namesrv
        .wait_for_log(
            "unknown name server config key",
            std::time::Duration::from_secs(5)
        )
        .is_some());
    assert_eq!(namesrv.terminate().code(), Some(0));
}

#[test]
fn ctrl_c_stops_the_name_server_cleanly() {
    let mut namesrv = common::NamesrvProcess::start("");
    let pid = namesrv.child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let status = common::wait_exit(&mut namesrv.child, std::time::Duration::from_secs(10));
    assert_eq!(status.and_then(|s| s.code()), Some(0));
    assert!(namesrv
        .wait_for_log("name server stopped", std::time::Duration::from_secs(5))
        .is_some());
}

#[test]
fn standalone_without_broker_listen_takes_the_files_listen_port() {
    let dir = common::TempDir::new("cli-standalone");
    // A port free a moment ago: the file asks for it, and no flag names another.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = dir.path().join("broker.conf");
    std::fs::write(
        &config,
        format!("bindAddress=127.0.0.1\nlistenPort={port}\n"),
    )
    .unwrap();
    let data = dir.path().join("data");
    let args = [
        "--data",
        data.to_str().unwrap(),
        "-c",
        config.to_str().unwrap(),
        "--namesrv-listen",
        "127.0.0.1:0",
    ];
    let (mut child, _first, log, early) = common::spawn_server("standalone", &args);
    let line = early
        .into_iter()
        .find(|line| line.contains("broker listening"))
        .or_else(|| common::wait_for_line(&log, "broker listening", Duration::from_secs(20)))
        .expect("the broker starts");
    assert!(line.contains(&format!("127.0.0.1:{port}")), "{line}");
    assert_eq!(
        common::terminate(&mut child, Duration::from_secs(20)).code(),
        Some(0)
    );
}
