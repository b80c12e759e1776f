//! Python clients for the tests: a pinned package from PyPI in a virtualenv of its own under
//! the target directory, made on first use and reused by later runs.
//!
//! Parallel test processes take an exclusive lock on `<venv>.lock` while they check or make
//! the virtualenv, so that none sees half of one; a virtualenv whose package does not import
//! or has another version is made again (`--clear`).

use super::delivery::tail;
use super::TempDir;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A pinned package and the module that proves it is installed.
pub struct Package {
    /// Its PyPI name.
    pub name: &'static str,
    /// Its exact version.
    pub version: &'static str,
    /// The module imported to check it (loading any native library it needs).
    pub module: &'static str,
}

/// The Python of `target/<dir>/venv` with `package` installed at its version, made when
/// missing or not right, under a lock that parallel test processes wait for (at most 10
/// minutes).
pub fn venv_with(dir: &str, package: &Package) -> PathBuf {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is target/tmp")
        .join(dir);
    std::fs::create_dir_all(&root).unwrap();
    let lock_path = root.join("venv.lock");
    let lock = std::fs::File::create(&lock_path).unwrap();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        match lock.try_lock() {
            Ok(()) => break,
            Err(std::fs::TryLockError::WouldBlock) => {
                assert!(
                    Instant::now() < deadline,
                    "another test process held {} for 10 minutes",
                    lock_path.display()
                );
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(std::fs::TryLockError::Error(e)) => panic!("lock the venv: {e}"),
        }
    }
    let venv = root.join("venv");
    let python = venv.join("bin/python");
    if !has_package(&python, package) {
        run_setup(
            Command::new("python3")
                .args(["-m", "venv", "--clear"])
                .arg(&venv),
            "python3 -m venv (needs python3 with its venv module on PATH)",
            Duration::from_secs(120),
        );
        let pinned = format!("{}=={}", package.name, package.version);
        run_setup(
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--disable-pip-version-check",
                    "--no-input",
                ])
                .arg(&pinned),
            &format!("pip install {pinned} (needs PyPI)"),
            Duration::from_secs(600),
        );
        assert!(
            has_package(&python, package),
            "{pinned} installed into {} but does not import",
            venv.display()
        );
    }
    drop(lock); // releases the lock
    python
}

/// Whether `python` imports the package's module and has the package at its version.
fn has_package(python: &Path, package: &Package) -> bool {
    if !python.is_file() {
        return false;
    }
    let check = format!(
        "import importlib.metadata, {}; assert importlib.metadata.version('{}') == '{}'",
        package.module, package.name, package.version
    );
    let Ok(mut child) = Command::new(python)
        .args(["-B", "-c", &check])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
    else {
        return false;
    };
    let status = super::wait_exit(&mut child, Duration::from_secs(60));
    if status.is_none() {
        super::kill(&mut child);
    }
    status.is_some_and(|s| s.success())
}

/// Runs a setup command with a deadline; panics with its output if it fails.
fn run_setup(command: &mut Command, what: &str, timeout: Duration) {
    let log = TempDir::new("python-setup");
    let out_path = log.path().join("output.txt");
    let out = std::fs::File::create(&out_path).unwrap();
    let mut child = command
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("{what}: spawn: {e}"));
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
