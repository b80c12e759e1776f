//! TCP on glommio's io_uring reactor.
//!
//! Listeners are bound with `SO_REUSEPORT` (glommio sets it), so every net shard binds its own
//! listener on the same address and the kernel spreads new connections across shards; an
//! accepted connection stays on the shard that accepted it.

use crate::IoError;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, RawFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
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

/// Splits a connected stream into a read half and a write half that share it, so that one
/// task reads while another writes. Each half lends the socket's descriptor ([`AsFd`]) for
/// as long as the half is borrowed, for [`write_all_gathered`] and [`shutdown_both`]; the
/// socket closes when both halves are dropped.
#[must_use]
pub fn split(stream: TcpStream) -> (ReadHalf, WriteHalf) {
    let shared = Rc::new(SharedStream {
        fd: stream.as_raw_fd(),
        stream: RefCell::new(stream),
    });
    let reader = ReadHalf {
        shared: Rc::clone(&shared),
    };
    (reader, WriteHalf { shared })
}

/// The read half of a [`split`] stream.
#[derive(Debug)]
pub struct ReadHalf {
    shared: Rc<SharedStream>,
}

/// The write half of a [`split`] stream. Closing it shuts down the socket's sending
/// direction (the peer reads the end of the stream); the socket stays open for the read
/// half.
#[derive(Debug)]
pub struct WriteHalf {
    shared: Rc<SharedStream>,
}

/// Shuts down both directions of a connected socket (`shutdown(SHUT_RDWR)`): a read another
/// task has pending on it ends, and so does the peer's. The descriptor stays open.
///
/// # Errors
/// The socket's error (`ENOTCONN` once the peer is gone, which callers may ignore).
pub fn shutdown_both(socket: BorrowedFd<'_>) -> std::io::Result<()> {
    rustix::net::shutdown(socket, rustix::net::Shutdown::Both).map_err(Into::into)
}

/// Most buffers one `sendmsg` takes (`IOV_MAX` on Linux).
const IOV_MAX: usize = 1024;

/// Writes every byte of `parts`, in order, to the socket under `writer` with gathering
/// sends (`sendmsg` of up to [`IOV_MAX`] buffers, never blocking), so that a response made of
/// a header and slices of mapped segments leaves without being copied into one buffer first.
/// When the socket's send buffer is full, the rest goes through `writer`, which waits on the
/// reactor until the socket takes bytes again.
///
/// The sends go to the descriptor `writer` lends ([`AsFd`]), so `writer` must put its bytes
/// on that socket unchanged: a plain stream's [`WriteHalf`], never an encrypting stream.
///
/// # Errors
/// The socket's error; the connection is then of no further use.
pub async fn write_all_gathered<W>(writer: &mut W, parts: &[&[u8]]) -> std::io::Result<()>
where
    W: futures_lite::AsyncWrite + AsFd + Unpin,
{
    use futures_lite::AsyncWriteExt;
    use rustix::net::{SendAncillaryBuffer, SendFlags};
    use std::io::IoSlice;
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
        let mut ancillary = SendAncillaryBuffer::default();
        let mut sent = match rustix::net::sendmsg(writer.as_fd(), &slices, &mut ancillary, flags) {
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

/// The stream both halves of a [`split`] hold.
#[derive(Debug)]
struct SharedStream {
    /// The descriptor `stream` owns, taken once, so that lending it needs no borrow of
    /// `stream` (which a poll of the other half may hold).
    fd: RawFd,
    /// Borrowed mutably only for one poll of one half. Polls never nest (the halves are
    /// `!Send`, and glommio's polls call no code of ours), so two borrows never meet.
    stream: RefCell<TcpStream>,
}

impl SharedStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        // SAFETY: `stream` owns the socket `fd` names and closes it only when dropped; it is
        // never moved out of `self` nor replaced, so `fd` stays open while `self` is borrowed.
        unsafe { BorrowedFd::borrow_raw(self.fd) }
    }

    /// Runs `poll` on the stream.
    fn poll<T>(&self, poll: impl FnOnce(Pin<&mut TcpStream>) -> T) -> T {
        let mut stream = self
            .stream
            .try_borrow_mut()
            .expect("polls of a split stream's halves never nest");
        poll(Pin::new(&mut *stream))
    }
}

impl AsFd for ReadHalf {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.as_fd()
    }
}

impl AsFd for WriteHalf {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.shared.as_fd()
    }
}

impl futures_lite::AsyncRead for ReadHalf {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut [u8],
    ) -> Poll<std::io::Result<usize>> {
        self.shared.poll(|stream| stream.poll_read(cx, buf))
    }
}

impl futures_lite::AsyncWrite for WriteHalf {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.shared.poll(|stream| stream.poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.shared.poll(|stream| stream.poll_flush(cx))
    }

    fn poll_close(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        self.shared.poll(|stream| stream.poll_close(cx))
    }
}
