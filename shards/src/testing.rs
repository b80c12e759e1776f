//! Helpers for unit tests that need a glommio executor (the idea of glommio's
//! `test_executor!`).
//!
//! Multi-shard tests use [`crate::run_shards`] with a small [`crate::Placement`] instead; this
//! module covers the common single-executor case.

use std::future::Future;

use glommio::Placement;

/// What to check when an executor cannot start; shared with the runtime's error messages.
pub const IO_URING_REMEDY: &str = "if io_uring is unavailable: it needs Linux >= 5.8, \
    RLIMIT_MEMLOCK >= 512 KiB (ulimit -l), and a seccomp profile that allows io_uring_setup";

/// Runs `future` to completion on a fresh, unpinned glommio executor on the calling thread and
/// returns its output. The executor is built as a shard's is (its blocking pool included).
///
/// # Panics
///
/// Panics with [`IO_URING_REMEDY`] if the executor cannot be created, and propagates any panic
/// of `future`.
pub fn run_local<F>(future: F) -> F::Output
where
    F: Future + 'static,
{
    let executor = crate::runtime::shard_executor(Placement::Unbound)
        .name("test")
        .make()
        .unwrap_or_else(|error| {
            panic!("cannot create a glommio executor: {error}; {IO_URING_REMEDY}")
        });
    executor.run(future)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_local_returns_future_output() {
        assert_eq!(run_local(async { 40 + 2 }), 42);
    }

    #[test]
    fn run_local_provides_glommio_executor() {
        let name = run_local(async {
            let task = glommio::spawn_local(async { 7 });
            task.await
        });
        assert_eq!(name, 7);
    }

    #[test]
    fn run_local_twice_on_one_thread_works() {
        assert_eq!(run_local(async { 1 }), 1);
        assert_eq!(run_local(async { 2 }), 2);
    }
}
