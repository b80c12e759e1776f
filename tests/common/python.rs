//! Python clients for the tests: a pinned package from PyPI in a virtualenv of its own under
//! the target directory, made on first use and reused by later runs.
//!
//! Parallel test processes take an exclusive lock on `<venv>.lock` while they check or make
//! the virtualenv, so that none sees half of one; a virtualenv whose package does not import
//! or has another version is made again (`--clear`).

use super::programs::{lock, run_setup, target_dir};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

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
    let root = target_dir(dir);
    let lock = lock(&root.join("venv.lock"));
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
