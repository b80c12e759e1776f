//! Runtime behaviour seen from outside the crate: shutdown, signals, and the panic policy.
//!
//! Method: in-process tests start real shards with `spawn_shards`. Anything that involves a
//! signal or an abort runs in a child process built from `examples/` (cargo test builds the
//! examples), because signalling or aborting the test process would take every other test with
//! it. The only waiting is bounded: a line from the child's stdout, or the child's exit status
//! polled until a deadline.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use ferromq_shards::{
    spawn_shards, Placement, RuntimeConfig, ShardId, Shutdown, EXIT_CODE_SECOND_SIGNAL,
};

/// How long a child gets for each step before the test fails instead of hanging.
const CHILD_STEP_TIMEOUT: Duration = Duration::from_secs(10);

fn two_unpinned_shards() -> Placement {
    Placement::parse("*:writer,net,control;*:dispatch,net").expect("valid placement")
}

#[test]
fn spawn_shards_shutdown_from_test_thread_joins_promptly() {
    let handle = spawn_shards::<(), _, _, _>(
        two_unpinned_shards(),
        RuntimeConfig::default(),
        Shutdown::new(),
        |ctx| async move {
            ctx.shutdown.wait().await;
            ctx.id
        },
    )
    .expect("shards started");
    let started = Instant::now();
    handle.shutdown.trigger();
    let stopped = handle.join().expect("shards joined");
    assert_eq!(stopped, [ShardId(0), ShardId(1)]);
    assert!(
        started.elapsed() < CHILD_STEP_TIMEOUT,
        "took {:?}",
        started.elapsed()
    );
}

#[test]
fn spawn_shards_mesh_ids_match_shard_ids() {
    let handle = spawn_shards::<ShardId, _, _, _>(
        Placement::parse("*:control,net;*:writer,net;*:dispatch,net").expect("valid"),
        RuntimeConfig {
            mesh_capacity: 2,
            ..RuntimeConfig::default()
        },
        Shutdown::new(),
        |ctx| async move {
            // Everyone tells everyone else who it thinks it is.
            for to in ctx.mesh.shards().filter(|to| *to != ctx.id) {
                ctx.mesh.send_to(to, ctx.mesh.me()).await.expect("sent");
            }
            let mut claims = Vec::new();
            for _ in 1..ctx.mesh.len() {
                claims.push(ctx.mesh.recv().await.expect("received"));
            }
            claims.sort();
            (ctx.id, ctx.mesh.me(), claims)
        },
    )
    .expect("shards started");
    for (id, me, claims) in handle.join().expect("joined") {
        assert_eq!(me, id);
        for (from, claimed) in claims {
            assert_eq!(from, claimed, "the tag on a message names its sender");
            assert_ne!(from, id);
        }
    }
}

#[test]
fn sigterm_child_waiting_shards_exits_zero() {
    let mut child = spawn_example("wait_for_signal", &[]);
    let lines = stdout_lines(&mut child);
    expect_line(&mut child, &lines, "ready");
    send_signal(&child, "TERM");
    expect_line(&mut child, &lines, "stopping");
    let status = wait_for_exit(&mut child);
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn sigint_child_waiting_shards_exits_zero() {
    let mut child = spawn_example("wait_for_signal", &[]);
    let lines = stdout_lines(&mut child);
    expect_line(&mut child, &lines, "ready");
    send_signal(&child, "INT");
    let status = wait_for_exit(&mut child);
    assert_eq!(status.code(), Some(0), "{status:?}");
}

#[test]
fn second_signal_during_shutdown_exits_130() {
    let mut child = spawn_example("wait_for_signal", &["--hold-after-shutdown"]);
    let lines = stdout_lines(&mut child);
    expect_line(&mut child, &lines, "ready");
    send_signal(&child, "TERM");
    expect_line(&mut child, &lines, "stopping");
    send_signal(&child, "INT");
    let status = wait_for_exit(&mut child);
    assert_eq!(status.code(), Some(EXIT_CODE_SECOND_SIGNAL), "{status:?}");
}

#[test]
fn shard_panic_aborts_process() {
    let mut child = spawn_example("shard_panic", &[]);
    let status = wait_for_exit(&mut child);
    assert_eq!(status.signal(), Some(6), "expected SIGABRT, got {status:?}");
}

/// Path of an example binary: `target/<profile>/examples/<name>`, next to this test's `deps/`.
fn example_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let path = profile_dir.join("examples").join(name);
    assert!(
        path.exists(),
        "{} is missing: run the whole suite (`cargo test -p ferromq-shards`), which builds \
         the examples",
        path.display()
    );
    path
}

fn spawn_example(name: &str, args: &[&str]) -> Child {
    Command::new(example_path(name))
        .args(args)
        // A core dump from the abort test must not land in the source tree.
        .current_dir(std::env::temp_dir())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("example starts")
}

/// Forwards the child's stdout lines to a channel, so reads can time out.
fn stdout_lines(child: &mut Child) -> mpsc::Receiver<String> {
    let stdout = child.stdout.take().expect("stdout is piped");
    let (lines_tx, lines_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines_tx.send(line).is_err() {
                break;
            }
        }
    });
    lines_rx
}

fn expect_line(child: &mut Child, lines: &mpsc::Receiver<String>, expected: &str) {
    match lines.recv_timeout(CHILD_STEP_TIMEOUT) {
        Ok(line) if line == expected => {}
        other => {
            kill(child);
            panic!("expected `{expected}` from the child, got {other:?}");
        }
    }
}

fn send_signal(child: &Child, signal: &str) {
    let status = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(child.id().to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} failed: {status:?}");
}

fn wait_for_exit(child: &mut Child) -> ExitStatus {
    let deadline = Instant::now() + CHILD_STEP_TIMEOUT;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().expect("child status") {
            return status;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    kill(child);
    panic!("the child did not exit within {CHILD_STEP_TIMEOUT:?}");
}

fn kill(child: &mut Child) {
    // The child may have exited already; either way it must not outlive the test.
    drop(child.kill());
    drop(child.wait());
}
