//! TCP on glommio's io_uring reactor.
//!
//! Listeners are bound with `SO_REUSEPORT` (glommio sets it), so every net shard binds its own
//! listener on the same address and the kernel spreads new connections across shards; an
//! accepted connection stays on the shard that accepted it.

use crate::IoError;
use std::net::SocketAddr;
use std::time::Duration;

pub use glommio::net::{TcpListener, TcpStream};

/// Binds a listener on `addr` with `SO_REUSEPORT`.
///
/// # Errors
/// [`IoError::Bind`] naming the address.
pub fn bind_listener(addr: SocketAddr) -> Result<TcpListener, IoError> {
    TcpListener::bind(addr).map_err(|e| IoError::Bind {
        addr,
        source: e.into(),
    })
}

/// Prepares an accepted or connected stream: no Nagle delay (RocketMQ frames are small and
/// latency-bound) and a read timeout after which an idle connection is dropped.
///
/// # Errors
/// [`IoError::SocketOption`] when the kernel refuses an option.
pub fn prepare_stream(
    stream: &TcpStream,
    read_idle_timeout: Option<Duration>,
) -> Result<(), IoError> {
    stream
        .set_nodelay(true)
        .map_err(|e| IoError::SocketOption {
            option: "TCP_NODELAY",
            source: e.into(),
        })?;
    stream
        .set_read_timeout(read_idle_timeout)
        .map_err(|e| IoError::SocketOption {
            option: "read timeout",
            source: e.into(),
        })?;
    Ok(())
}

/// Connects to `addr` with a connect timeout.
///
/// # Errors
/// The OS error, or `TimedOut`.
pub async fn connect(addr: SocketAddr, timeout: Duration) -> std::io::Result<TcpStream> {
    TcpStream::connect_timeout(addr, timeout)
        .await
        .map_err(Into::into)
}
