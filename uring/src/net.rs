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

/// Binds a listener on `addr` that no other socket may share (no `SO_REUSEPORT`): for a
/// port that must be this process's alone, such as the HA port, where a connection that
/// reached another process's listener would be a stranger speaking another protocol.
///
/// # Errors
/// [`IoError::Bind`] naming the address, e.g. when something listens there already.
pub fn bind_exclusive_listener(addr: SocketAddr) -> Result<TcpListener, IoError> {
    use std::os::fd::{FromRawFd, IntoRawFd};
    let listener =
        std::net::TcpListener::bind(addr).map_err(|source| IoError::Bind { addr, source })?;
    // SAFETY: the descriptor is a bound, listening TCP socket whose ownership moves into
    // the glommio listener (`into_raw_fd` gave it up).
    Ok(unsafe { TcpListener::from_raw_fd(listener.into_raw_fd()) })
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

/// Shuts down both directions of the connected socket `fd` (`shutdown(SHUT_RDWR)`): a read
/// another task has pending on it ends, and so does the peer's. The descriptor stays open.
///
/// `fd` must be an open socket for the call.
///
/// # Errors
/// The socket's error (`ENOTCONN` once the peer is gone, which callers may ignore).
pub fn shutdown_both(fd: std::os::fd::RawFd) -> std::io::Result<()> {
    // SAFETY: the caller keeps the socket open for the call; the borrow ends with it.
    let socket = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    rustix::net::shutdown(socket, rustix::net::Shutdown::Both).map_err(Into::into)
}

/// Most buffers one `sendmsg` takes (`IOV_MAX` on Linux).
const IOV_MAX: usize = 1024;

/// Writes every byte of `parts`, in order, to the connected socket `fd` with gathering
/// sends (`sendmsg` of up to [`IOV_MAX`] buffers, never blocking), so that a response made of
/// a header and slices of mapped segments leaves without being copied into one buffer first.
/// When the socket's send buffer is full, the rest goes through `writer` (the same socket's
/// write half), which waits on the reactor until the socket takes bytes again.
///
/// `fd` must be the descriptor under `writer`, open for as long as the call runs.
///
/// # Errors
/// The socket's error; the connection is then of no further use.
pub async fn write_all_gathered<W: futures_lite::AsyncWrite + Unpin>(
    fd: std::os::fd::RawFd,
    writer: &mut W,
    parts: &[&[u8]],
) -> std::io::Result<()> {
    use futures_lite::AsyncWriteExt;
    use rustix::net::{SendAncillaryBuffer, SendFlags};
    use std::io::IoSlice;
    // SAFETY: the caller keeps the socket open for the call (its write half is `writer`);
    // the borrow does not outlive the call.
    let socket = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let mut index = 0;
    let mut skip = 0;
    while index < parts.len() {
        if parts[index].len() == skip {
            index += 1;
            skip = 0;
            continue;
        }
        let slices: Vec<IoSlice<'_>> = std::iter::once(&parts[index][skip..])
            .chain(parts[index + 1..].iter().copied())
            .take(IOV_MAX)
            .map(IoSlice::new)
            .collect();
        let flags = SendFlags::DONTWAIT | SendFlags::NOSIGNAL;
        let mut sent =
            match rustix::net::sendmsg(socket, &slices, &mut SendAncillaryBuffer::default(), flags)
            {
                Ok(sent) => sent,
                Err(rustix::io::Errno::AGAIN) => match writer.write(&parts[index][skip..]).await? {
                    0 => return Err(std::io::ErrorKind::WriteZero.into()),
                    written => written,
                },
                Err(rustix::io::Errno::INTR) => 0,
                Err(errno) => return Err(errno.into()),
            };
        // Step over what went out.
        while sent > 0 && index < parts.len() {
            let left = parts[index].len() - skip;
            if sent < left {
                skip += sent;
                sent = 0;
            } else {
                sent -= left;
                index += 1;
                skip = 0;
            }
        }
    }
    Ok(())
}

/// Raises this process's soft limit of open files to its hard limit (a server holds one
/// descriptor per connection, and the soft limit is often 1024); returns the limit now in
/// force, `None` when it cannot be read.
pub fn raise_open_files_limit() -> Option<u64> {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut limit = getrlimit(Resource::Nofile);
    if let (Some(current), Some(maximum)) = (limit.current, limit.maximum) {
        if current < maximum {
            limit.current = Some(maximum);
            if setrlimit(Resource::Nofile, limit).is_err() {
                return getrlimit(Resource::Nofile).current;
            }
        }
    }
    limit.current
}
