//! What the segment tests share: an executor to run on and fresh file paths on a real disk.

use std::path::PathBuf;

/// Runs `f` on a glommio executor of its own and returns its output. Fails with the
/// io_uring remedy text when io_uring is unavailable, never skips.
pub fn on_executor<F, Fut>(f: F) -> Fut::Output
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future + 'static,
    Fut::Output: Send + 'static,
{
    glommio::LocalExecutorBuilder::default()
        .spawn(f)
        .expect(
            "io_uring unavailable: needs Linux >= 5.8, RLIMIT_MEMLOCK >= 512 KiB (ulimit -l) \
             and a seccomp profile that allows io_uring_setup",
        )
        .join()
        .expect("executor thread")
}

/// A path for a new file `name` in directory `dir` of the target's temporary directory (a
/// real disk; tmpfs has no O_DIRECT), removed first if a run before left it.
pub fn segment_path(dir: &str, name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}
