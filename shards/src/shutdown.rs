//! `Shutdown`: the process-wide stop signal that every shard watches.
//!
//! Shutdown is cooperative. Triggering it only wakes the futures returned by
//! [`Shutdown::wait`]; each shard then stops accepting work, drains, persists and returns on its
//! own schedule (see the crate docs for the order). Nothing is cancelled from outside.
//!
//! Invariant: once triggered, a `Shutdown` stays triggered, and every waiter registered before or
//! after the trigger completes.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use signal_hook::consts::signal::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Exit code for a second SIGINT or SIGTERM during shutdown: 128 + SIGINT, as shells report
/// an interrupted command.
pub const EXIT_CODE_SECOND_SIGNAL: i32 = 130;

/// Process-wide stop signal: a cheap `Clone + Send + Sync` handle shared by all shards.
#[derive(Clone, Debug, Default)]
pub struct Shutdown {
    inner: Arc<Inner>,
}

/// Future returned by [`Shutdown::wait`]; completes once the shutdown is triggered.
///
/// It is `Send + 'static`, so it can be stored or awaited on any executor. Dropping it
/// unregisters its waker, so creating one per loop iteration does not accumulate wakers.
#[derive(Debug)]
#[must_use = "futures do nothing unless awaited"]
pub struct ShutdownWait {
    inner: Arc<Inner>,
    /// Key of this future's waker in `Inner::waiters`, once registered.
    key: Option<u64>,
}

#[derive(Debug, Default)]
struct Inner {
    triggered: AtomicBool,
    signals_installed: AtomicBool,
    waiters: Mutex<Waiters>,
}

#[derive(Debug, Default)]
struct Waiters {
    key_next: u64,
    wakers: HashMap<u64, Waker>,
}

impl Shutdown {
    /// A new, untriggered stop signal.
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Makes SIGINT and SIGTERM trigger this shutdown.
    ///
    /// The signals are read by a dedicated thread named `signals` (through
    /// `signal_hook::iterator`), so no Rust code runs inside the signal handler. A second signal
    /// while shutdown is already under way exits the process at once with
    /// [`EXIT_CODE_SECOND_SIGNAL`], for the operator who presses Ctrl-C twice. Calling this again
    /// on the same `Shutdown` (or a clone) does nothing.
    ///
    /// # Errors
    ///
    /// Returns the I/O error from registering the handlers or starting the thread.
    pub fn install_signal_handlers(&self) -> std::io::Result<()> {
        if self.inner.signals_installed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let result = Signals::new([SIGINT, SIGTERM]).and_then(|signals| {
            let shutdown = self.clone();
            std::thread::Builder::new()
                .name("signals".to_owned())
                .spawn(move || run_signals(signals, &shutdown))
                .map(drop)
        });
        if result.is_err() {
            self.inner.signals_installed.store(false, Ordering::Release);
        }
        result
    }

    /// Triggers the shutdown and wakes every waiter. Idempotent; callable from any thread.
    pub fn trigger(&self) {
        self.inner.triggered.store(true, Ordering::SeqCst);
        // Taking the lock after setting the flag pairs with `ShutdownWait::poll`, which checks
        // the flag under the lock: every waker is either seen here or never needed.
        let wakers = std::mem::take(&mut self.inner.lock_waiters().wakers);
        for waker in wakers.into_values() {
            waker.wake();
        }
    }

    /// Whether [`Shutdown::trigger`] has been called on this handle or a clone.
    pub fn is_triggered(&self) -> bool {
        self.inner.triggered.load(Ordering::SeqCst)
    }

    /// A future that completes once the shutdown is triggered (at once if it already was).
    ///
    /// The waker is woken directly by [`Shutdown::trigger`], also across threads, so there is no
    /// polling.
    ///
    /// # Cancel safety
    ///
    /// Cancel safe: dropping the future loses nothing, and a new one sees the trigger.
    pub fn wait(&self) -> ShutdownWait {
        ShutdownWait {
            inner: Arc::clone(&self.inner),
            key: None,
        }
    }
}

impl Future for ShutdownWait {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.inner.triggered.load(Ordering::SeqCst) {
            self.unregister();
            return Poll::Ready(());
        }
        let inner = Arc::clone(&self.inner);
        let mut waiters = inner.lock_waiters();
        if inner.triggered.load(Ordering::SeqCst) {
            drop(waiters);
            self.unregister();
            return Poll::Ready(());
        }
        let key = match self.key {
            Some(key) => key,
            None => {
                let key = waiters.key_next;
                waiters.key_next += 1;
                self.key = Some(key);
                key
            }
        };
        match waiters.wakers.get_mut(&key) {
            Some(waker) => waker.clone_from(cx.waker()),
            None => {
                waiters.wakers.insert(key, cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

impl Drop for ShutdownWait {
    fn drop(&mut self) {
        self.unregister();
    }
}

impl ShutdownWait {
    fn unregister(&mut self) {
        if let Some(key) = self.key.take() {
            self.inner.lock_waiters().wakers.remove(&key);
        }
    }
}

impl Inner {
    /// Locks the waiter table. A panic while holding it cannot leave the table inconsistent
    /// (each operation is a single insert, remove or take), so poisoning is ignored.
    fn lock_waiters(&self) -> MutexGuard<'_, Waiters> {
        self.waiters.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Body of the `signals` thread: the first signal triggers `shutdown`, a later one exits.
fn run_signals(mut signals: Signals, shutdown: &Shutdown) {
    for signal in signals.forever() {
        if shutdown.is_triggered() {
            tracing::warn!(
                signal,
                "second stop signal during shutdown; exiting immediately"
            );
            std::process::exit(EXIT_CODE_SECOND_SIGNAL);
        }
        tracing::info!(signal, "stop signal received; shutting down");
        shutdown.trigger();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::run_local;

    fn waiter_count(shutdown: &Shutdown) -> usize {
        shutdown.inner.lock_waiters().wakers.len()
    }

    #[test]
    fn wait_is_send_and_static() {
        fn assert_send_static<T: Send + 'static>(_: &T) {}
        let shutdown = Shutdown::new();
        assert_send_static(&shutdown.wait());
        assert_send_static(&shutdown);
    }

    #[test]
    fn wait_after_trigger_completes_at_once() {
        let shutdown = Shutdown::new();
        shutdown.trigger();
        shutdown.trigger();
        assert!(shutdown.is_triggered());
        run_local(shutdown.wait());
        assert_eq!(waiter_count(&shutdown), 0);
    }

    #[test]
    fn trigger_from_other_thread_wakes_waiter() {
        let shutdown = Shutdown::new();
        let remote = shutdown.clone();
        let waited = run_local(async move {
            let mut wait = shutdown.wait();
            // Register the waker first, so the wake must cross threads instead of the flag being
            // seen on the first poll.
            assert!(futures::poll!(&mut wait).is_pending());
            assert_eq!(waiter_count(&shutdown), 1);
            let trigger = std::thread::spawn(move || remote.trigger());
            wait.await;
            trigger.join().expect("trigger thread");
            shutdown.is_triggered()
        });
        assert!(waited);
    }

    #[test]
    fn dropped_wait_unregisters_waker() {
        let shutdown = Shutdown::new();
        let probe = shutdown.clone();
        run_local(async move {
            for _ in 0..100 {
                let wait = shutdown.wait();
                let polled = futures::future::select(wait, futures::future::ready(())).await;
                drop(polled);
            }
        });
        assert_eq!(waiter_count(&probe), 0);
    }

    #[test]
    fn clones_share_one_signal() {
        let shutdown = Shutdown::new();
        let clone = shutdown.clone();
        assert!(!clone.is_triggered());
        shutdown.trigger();
        assert!(clone.is_triggered());
    }
}
