//! Foreign client programs for the tests, fetched and built once per run under the target
//! directory and run with a deadline: npm packages pinned by a lock file (`npm ci`), Go
//! programs (`go build` with the module proxy), the setup steps of the pinned Python
//! packages (`python`), and a run of a program that reports one JSON event per line
//! (`delivery` accounts for them).
//!
//! Parallel test processes, and tests of one process, take an exclusive lock on a file next
//! to what they make while they check or make it, so that none sees half of it.

use super::delivery::{self, tail};
use super::TempDir;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// `target/<name>`, made if missing.
pub fn target_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is target/tmp")
        .join(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Holds `path` locked (exclusively) until dropped; waits at most 10 minutes for another
/// test process that holds it.
pub fn lock(path: &Path) -> std::fs::File {
    let file = std::fs::File::create(path).unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        match file.try_lock() {
            Ok(()) => return file,
            Err(std::fs::TryLockError::WouldBlock) => {
                assert!(
                    Instant::now() < deadline,
                    "another test process held {} for 10 minutes",
                    path.display()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(std::fs::TryLockError::Error(e)) => panic!("lock {}: {e}", path.display()),
        }
    }
}

/// The `node_modules` of the npm project in `source` (its `package.json` and
/// `package-lock.json`, which pin every package), installed with `npm ci` into
/// `target/<name>/` when missing or made from another lock file, under a lock that parallel
/// test processes wait for.
pub fn npm_install(source: &Path, name: &str) -> PathBuf {
    let root = target_dir(name);
    let _lock = lock(&root.join("install.lock"));
    let wanted = std::fs::read(source.join("package-lock.json")).unwrap();
    let installed_from = root.join("node_modules/.ferromq-installed-from.json");
    let modules = root.join("node_modules");
    if std::fs::read(&installed_from).ok().as_deref() == Some(&wanted[..]) {
        return modules;
    }
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(source.join(file), root.join(file)).unwrap();
    }
    run_setup(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
            .current_dir(&root),
        &format!(
            "npm ci of {} into {} (needs node, npm and the npm registry)",
            source.display(),
            root.display()
        ),
        Duration::from_secs(300),
    );
    std::fs::write(&installed_from, &wanted).unwrap();
    modules
}

/// Builds the Go program in `source` into `target/<name>/<name>` with [`go`] (it
/// fetches the modules `go.sum` pins from the Go module proxy on first use and caches the
/// build), under a lock that parallel tests wait for; returns the binary.
pub fn go_build(source: &Path, name: &str) -> PathBuf {
    let dir = target_dir(name);
    // Tests of one process (threads) and of several wait for each other here.
    let _lock = lock(&dir.join("build.lock"));
    let binary = dir.join(name);
    let building = dir.join(format!("{name}.{}.tmp", std::process::id()));
    run_setup(
        Command::new(go())
            .args(["build", "-buildvcs=false", "-o"])
            .arg(&building)
            .arg(".")
            .current_dir(source),
        &format!(
            "go build of {} (needs the Go module proxy; Go 1.25 or newer for tests/go5)",
            source.display()
        ),
        Duration::from_secs(400),
    );
    std::fs::rename(&building, &binary).unwrap();
    binary
}

/// `go`: on `PATH`, else `/usr/local/go/bin/go`.
pub fn go() -> PathBuf {
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
        "Go is missing: the Go client tests build tests/go/ and tests/go5/ with Go; put `go` \
         on PATH or install it in /usr/local/go"
    );
    go
}

/// Runs a setup command with a deadline; panics with its output if it fails.
pub fn run_setup(command: &mut Command, what: &str, timeout: Duration) {
    let log = TempDir::new("program-setup");
    let out_path = log.path().join("output.txt");
    let out = std::fs::File::create(&out_path).unwrap();
    let spawned = command
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn();
    let mut child = spawned.unwrap_or_else(|e| panic!("{what}: spawn: {e}"));
    let status = super::wait_exit(&mut child, timeout);
    if status.is_none() {
        super::kill(&mut child);
    }
    let output = std::fs::read_to_string(&out_path).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "{what} failed ({status:?}):\n{}",
        tail(&output, 40)
    );
}

/// What a program printed and how it ended.
pub struct ProgramRun {
    pub exit: Option<ExitStatus>,
    pub events: Vec<Value>,
    pub stderr: String,
    pub elapsed: Duration,
}

/// Runs `command` (its arguments given) in a directory of its own, which is also its `HOME`
/// (the clients write their logs there), killing it after `timeout`.
pub fn run_program(mut command: Command, timeout: Duration) -> ProgramRun {
    let dir = TempDir::new("program-run");
    let out_path = dir.path().join("stdout.jsonl");
    let err_path = dir.path().join("stderr.txt");
    let started = Instant::now();
    let mut child = command
        .current_dir(dir.path())
        .env("HOME", dir.path())
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {command:?}: {e}"));
    let exit = super::wait_exit(&mut child, timeout);
    if exit.is_none() {
        super::kill(&mut child);
    }
    let elapsed = started.elapsed();
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    ProgramRun {
        exit,
        events: delivery::parse_events(&stdout),
        stderr: std::fs::read_to_string(&err_path).unwrap_or_default(),
        elapsed,
    }
}
