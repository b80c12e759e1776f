//! The accept loop of the endpoints that run off the shards on a tokio runtime of their own
//! (the gRPC endpoint, the metrics and status page endpoint): accept until the shutdown
//! signal, serve each connection on a task of its own, at most `connections_max` at once.
//!
//! A connection past the cap is accepted and dropped at once (logged), so a flood of
//! clients costs a file descriptor for an instant, never a task. A failed accept (out of
//! file descriptors, say) is logged and retried after [`ACCEPT_RETRY_DELAY`], so that the
//! loop does not spin.
//!
//! Also the thread with a current-thread tokio runtime of its own that the broker's slow
//! network work runs on ([`spawn_on_runtime`]: name-server registration, controller mode).

use ferromq_shards::Shutdown;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The pause after a failed accept.
pub const ACCEPT_RETRY_DELAY: Duration = Duration::from_millis(100);

/// Accepts on `listener` (non-blocking) until `shutdown`, running `serve` for each
/// connection on a task of its own while fewer than `connections_max` run; `endpoint`
/// names the endpoint in logs. Runs inside a tokio runtime.
pub async fn accept_loop<F, Fut>(
    listener: std::net::TcpListener,
    endpoint: &'static str,
    connections_max: usize,
    shutdown: &Shutdown,
    serve: F,
) where
    F: Fn(tokio::net::TcpStream, SocketAddr) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(%error, "{endpoint}: cannot use its socket");
            return;
        }
    };
    let permits = Arc::new(tokio::sync::Semaphore::new(connections_max));
    let stop = shutdown.wait();
    tokio::pin!(stop);
    loop {
        let accepted = tokio::select! {
            () = &mut stop => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "{endpoint}: accept failed");
                tokio::time::sleep(ACCEPT_RETRY_DELAY).await;
                continue;
            }
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            tracing::warn!(%peer, max = connections_max, "{endpoint}: too many connections");
            continue;
        };
        let served = serve(stream, peer);
        tokio::spawn(async move {
            served.await;
            drop(permit);
        });
    }
}

/// Runs `task()` to its end on a new thread named `name`, on a current-thread tokio runtime
/// of its own (the remoting client is tokio's; this work has no place on a shard). A
/// runtime that cannot start is logged and the thread ends.
///
/// # Errors
/// The thread cannot be started.
pub fn spawn_on_runtime<F, Fut>(name: &str, task: F) -> std::io::Result<std::thread::JoinHandle<()>>
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = ()>,
{
    let thread = name.to_owned();
    std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime.block_on(task()),
                Err(error) => tracing::error!(%error, thread, "cannot start a tokio runtime"),
            }
        })
}
