//! The serving half: accept connections on a net shard and run each request through a
//! [`RequestHandler`].
//!
//! Mirrors `NettyRemotingServer` / `NettyRemotingAbstract.processRequestCommand` (rules in
//! `reference/remoting.md` §6): a oneway request never gets a response, even on error; a frame
//! that cannot be decoded closes only its own connection, with one log line; a connection idle
//! for `serverChannelMaxIdleTimeSeconds` is closed.
//!
//! Per connection, a reader task decodes frames and starts one task per request, so that a
//! request that waits (a long-polling pull) does not hold up the ones behind it, as Java's
//! thread pools do not; a writer task writes responses in the order they complete, joining
//! those that are ready into one write. At most [`REQUESTS_IN_FLIGHT_MAX`] requests of a
//! connection run at once; beyond that the reader stops reading. Connections stay on the
//! shard that accepted them.

use super::codec::{encode_frame_head, FrameDecoder};
use super::command::RemotingCommand;
use crate::limits;
use ferromq_shards::{ShardId, Shutdown};
use ferromq_uring::net::{prepare_stream, TcpListener, TcpStream};
use futures::future::{select, Either};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use std::cell::Cell;
use std::future::Future;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

/// Process-unique id of a connection: the accepting shard and a per-shard sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionId {
    /// Shard that owns the connection.
    pub shard: ShardId,
    /// Sequence number on that shard.
    pub seq: u64,
}

/// What a handler knows about the connection a request came on.
#[derive(Clone, Copy, Debug)]
pub struct ConnectionInfo {
    /// The connection's id.
    pub id: ConnectionId,
    /// The peer's address.
    pub peer: SocketAddr,
}

/// Processes requests for one server (`NettyRequestProcessor` in Java).
///
/// Lives on one shard (it need not be `Send`).
pub trait RequestHandler: 'static {
    /// Handles one request. The returned response is sent unless the request is oneway.
    fn handle(
        &self,
        connection: ConnectionInfo,
        request: RemotingCommand,
    ) -> impl Future<Output = Option<RemotingCommand>>;

    /// Called once when a connection ends, for whatever reason.
    fn connection_closed(&self, connection: ConnectionInfo) -> impl Future<Output = ()>;

    /// Called once when a connection opens, with the way to send the peer requests of our
    /// own (a broker's NOTIFY_CONSUMER_IDS_CHANGED). The default ignores it.
    fn connection_opened(&self, _connection: ConnectionInfo, _outbound: Outbound) {}
}

/// Sends requests of the server's own to one peer, from any thread; cheap to clone.
///
/// Frames join the connection's responses in its write queue; when the queue is full or the
/// connection gone, a request is dropped (notifications are hints the peer also polls for).
/// [`Outbound::invoke`] waits for the peer's answer (Java's `invokeSync` on a channel).
#[derive(Clone, Debug)]
pub struct Outbound {
    frames: futures::channel::mpsc::Sender<OutFrame>,
    serialize_type: super::SerializeType,
    calls: std::sync::Arc<Calls>,
}

/// Why [`Outbound::invoke`] got no answer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CallError {
    /// The connection is gone, or its write queue full.
    #[error("the connection is closed")]
    Closed,
    /// No answer within the time given.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// A connection's requests awaiting the peer's answer, by opaque.
#[derive(Debug, Default)]
struct Calls {
    next_opaque: std::sync::atomic::AtomicI32,
    waiting: std::sync::Mutex<
        std::collections::HashMap<i32, futures::channel::oneshot::Sender<RemotingCommand>>,
    >,
}

impl Calls {
    fn waiting(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        std::collections::HashMap<i32, futures::channel::oneshot::Sender<RemotingCommand>>,
    > {
        // A panic while the lock was held cannot leave the map half-changed: take it.
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Hands `response` to the call that waits for its opaque; whether one did.
    fn answer(&self, response: RemotingCommand) -> bool {
        match self.waiting().remove(&response.opaque) {
            Some(waiter) => waiter.send(response).is_ok(),
            None => false,
        }
    }

    /// The connection closed: every waiting call ends with [`CallError::Closed`].
    fn close(&self) {
        self.waiting().clear();
    }
}

impl Outbound {
    /// Sends `request` oneway in the connection's header serialization; whether it was
    /// queued.
    pub fn send_oneway(&self, mut request: RemotingCommand) -> bool {
        request.mark_oneway();
        request.serialize_type = self.serialize_type;
        self.frames.clone().try_send(OutFrame::of(request)).is_ok()
    }

    /// Whether the connection is gone.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.frames.is_closed()
    }

    /// Sends `request` and waits up to `timeout` for the peer's answer (the response with
    /// the opaque this gives the request). Runs on a shard (its timer is glommio's).
    pub async fn invoke(
        &self,
        mut request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, CallError> {
        let opaque = self
            .calls
            .next_opaque
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        request.opaque = opaque;
        request.serialize_type = self.serialize_type;
        let (answer, answered) = futures::channel::oneshot::channel();
        self.calls.waiting().insert(opaque, answer);
        if self.frames.clone().try_send(OutFrame::of(request)).is_err() {
            self.calls.waiting().remove(&opaque);
            return Err(CallError::Closed);
        }
        let waited = glommio::timer::timeout(timeout, async {
            Ok(answered.await.map_err(|_| CallError::Closed))
        })
        .await;
        match waited {
            Ok(answer) => answer,
            Err(_) => {
                self.calls.waiting().remove(&opaque);
                Err(CallError::Timeout(timeout))
            }
        }
    }
}

/// One frame on its way out: the encoded head (and inline body), then body parts sent as
/// they are.
#[derive(Debug)]
struct OutFrame {
    head: Vec<u8>,
    parts: Vec<bytes::Bytes>,
}

impl OutFrame {
    fn of(command: RemotingCommand) -> OutFrame {
        let mut head = Vec::new();
        let parts = if encode_frame_head(&command, &mut head) {
            command.body_parts
        } else {
            Vec::new()
        };
        OutFrame { head, parts }
    }
}

/// Limits of a server.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Largest frame accepted (`frameMaxLength`).
    pub frame_size_max: usize,
    /// Idle connections are closed after this long (`serverChannelMaxIdleTimeSeconds`).
    pub idle_timeout: Duration,
    /// Connections beyond this many are closed at accept (`serverMaxConnections`), per shard.
    pub connections_max: usize,
    /// TLS, in `permissive` or `enforcing` mode; `None` is `disabled` (plain TCP only).
    pub tls: Option<super::tls::ServerTls>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            frame_size_max: limits::FRAME_SIZE_MAX,
            idle_timeout: limits::CHANNEL_IDLE_TIMEOUT,
            connections_max: limits::CONNECTIONS_MAX,
            tls: None,
        }
    }
}

/// Accepts connections on `listener` until `shutdown` triggers, serving each on its own task.
///
/// Returns after shutdown once every connection task of this listener has finished its
/// current request and closed.
pub async fn serve<H: RequestHandler>(
    shard: ShardId,
    listener: TcpListener,
    handler: Rc<H>,
    config: ServerConfig,
    shutdown: Shutdown,
) {
    let next_seq = Cell::new(0u64);
    let open = Rc::new(Cell::new(0usize));
    let gate = glommio::sync::Gate::new();
    while let Some(stream) = accept(&listener, &shutdown).await {
        if open.get() >= config.connections_max {
            tracing::warn!(%shard, max = config.connections_max, "connection limit reached");
            drop(stream);
            continue;
        }
        let Ok(peer) = stream.peer_addr() else {
            continue;
        };
        let id = ConnectionId {
            shard,
            seq: next_seq.get(),
        };
        next_seq.set(next_seq.get() + 1);
        let info = ConnectionInfo { id, peer };
        let handler = handler.clone();
        let config = config.clone();
        let shutdown = shutdown.clone();
        let open = open.clone();
        open.set(open.get() + 1);
        let spawned = gate.spawn(async move {
            run_connection(info, stream, handler.clone(), &config, &shutdown).await;
            handler.connection_closed(info).await;
            open.set(open.get() - 1);
        });
        match spawned {
            Ok(task) => {
                task.detach();
            }
            Err(error) => tracing::error!(%shard, %error, "cannot spawn a connection task"),
        }
    }
    if let Err(error) = gate.close().await {
        tracing::warn!(%shard, %error, "closing connections");
    }
}

/// The next connection `listener` accepts (a failed accept is logged and skipped), or
/// `None` once `shutdown` triggers.
pub async fn accept(listener: &TcpListener, shutdown: &Shutdown) -> Option<TcpStream> {
    loop {
        let accepted = match select(Box::pin(listener.accept()), Box::pin(shutdown.wait())).await {
            Either::Left((accepted, _)) => accepted,
            Either::Right(_) => return None,
        };
        match accepted {
            Ok(stream) => return Some(stream),
            Err(error) => tracing::warn!(%error, "accept failed"),
        }
    }
}

/// Requests of one connection processed at once, at most (Java bounds its pools' queues).
pub const REQUESTS_IN_FLIGHT_MAX: usize = 1024;

/// How long a TLS handshake may take (netty's `SslHandler` default).
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Bytes read to tell a TLS connection from a plain one.
const FIRST_READ_SIZE: usize = 512;

/// Serves one connection until the peer closes it, it errs, idles out, or shutdown.
///
/// Without TLS the socket is served as it is. With TLS, the first bytes tell a handshake
/// (0x16) from a plain frame (whose first byte is the top of a length under 16 MiB, 0x00):
/// the first is served encrypted, the second as it is in `permissive` mode and closed in
/// `enforcing` mode, as Java's `HandshakeHandler`.
async fn run_connection<H: RequestHandler>(
    info: ConnectionInfo,
    stream: TcpStream,
    handler: Rc<H>,
    config: &ServerConfig,
    shutdown: &Shutdown,
) {
    use super::tls::{Prefixed, TlsMode, HANDSHAKE_RECORD};
    if let Err(error) = prepare_stream(&stream, Some(config.idle_timeout)) {
        tracing::warn!(peer = %info.peer, %error, "cannot configure connection");
        return;
    }
    tracing::debug!(peer = %info.peer, connection = ?info.id, "connection opened");
    let Some(tls) = &config.tls else {
        let (reader, writer) = ferromq_uring::net::split(stream);
        serve_stream(info, reader, writer, Vec::new(), handler, config, shutdown).await;
        return;
    };
    let mut stream = stream;
    let mut first = vec![0u8; FIRST_READ_SIZE];
    let read = match select(Box::pin(stream.read(&mut first)), Box::pin(shutdown.wait())).await {
        Either::Left((read, _)) => read,
        Either::Right(_) => return,
    };
    let n = match read {
        Ok(0) => return,
        Ok(n) => n,
        Err(error) => {
            log_read_end(info, &error);
            return;
        }
    };
    first.truncate(n);
    if first[0] != HANDSHAKE_RECORD {
        if tls.mode == TlsMode::Enforcing {
            tracing::warn!(peer = %info.peer,
                "closing connection: plain TCP to a server in TLS enforcing mode");
            return;
        }
        let (reader, writer) = ferromq_uring::net::split(stream);
        serve_stream(info, reader, writer, first, handler, config, shutdown).await;
        return;
    }
    // Boxed, as the encrypted serving below: a plain connection's task holds neither.
    let handshake = Box::pin(tls.acceptor.accept(Prefixed::new(first, stream)));
    let stream = match glommio::timer::timeout(TLS_HANDSHAKE_TIMEOUT, async { Ok(handshake.await) })
        .await
    {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            tracing::info!(peer = %info.peer, %error, "closing connection: TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::info!(peer = %info.peer, "closing connection: TLS handshake timed out");
            return;
        }
    };
    let (reader, writer) = futures_lite::io::split(stream);
    Box::pin(serve_stream(
        info,
        reader,
        writer,
        Vec::new(),
        handler,
        config,
        shutdown,
    ))
    .await;
}

/// Logs why a connection's read ended: idle for `serverChannelMaxIdleTimeSeconds`, or an
/// error.
fn log_read_end(info: ConnectionInfo, error: &std::io::Error) {
    if error.kind() == std::io::ErrorKind::TimedOut {
        tracing::info!(peer = %info.peer, "closing idle connection");
    } else {
        tracing::debug!(peer = %info.peer, %error, "read failed");
    }
}

/// Serves requests read from `reader`, starting with the bytes in `first` that were read
/// already, and writes the responses to `writer`, the other half of the same stream.
async fn serve_stream<H, R, W>(
    info: ConnectionInfo,
    mut reader: R,
    writer: W,
    first: Vec<u8>,
    handler: Rc<H>,
    config: &ServerConfig,
    shutdown: &Shutdown,
) where
    H: RequestHandler,
    R: futures_lite::AsyncRead + Unpin,
    W: ResponseWriter + 'static,
{
    let (responses, outbox) = futures::channel::mpsc::channel::<OutFrame>(REQUESTS_IN_FLIGHT_MAX);
    let writing = glommio::spawn_local(write_responses(writer, outbox, info));
    let permits = Rc::new(glommio::sync::Semaphore::new(REQUESTS_IN_FLIGHT_MAX as u64));
    let calls = std::sync::Arc::new(Calls::default());
    let mut decoder = FrameDecoder::new(config.frame_size_max);
    decoder.extend(&first);
    drop(first);
    let mut opened = false;
    'connection: loop {
        loop {
            match decoder.next_command() {
                Ok(Some(request)) => {
                    if request.is_response() {
                        let opaque = request.opaque;
                        if !calls.answer(request) {
                            tracing::debug!(peer = %info.peer, opaque,
                                "dropping a response no call waits for");
                        }
                        continue;
                    }
                    if !opened {
                        // Peers are told of server requests in the serialization they use.
                        opened = true;
                        let outbound = Outbound {
                            frames: responses.clone(),
                            serialize_type: request.serialize_type,
                            calls: calls.clone(),
                        };
                        handler.connection_opened(info, outbound);
                    }
                    let Ok(permit) = permits.acquire_static_permit(1).await else {
                        break 'connection;
                    };
                    let handler = handler.clone();
                    let mut responses = responses.clone();
                    glommio::spawn_local(async move {
                        let oneway = request.is_oneway();
                        let response = handler.handle(info, request).await;
                        if let (Some(response), false) = (response, oneway) {
                            let frame = OutFrame::of(response);
                            // The writer gone means the connection closed: nothing to do.
                            let _ = futures::SinkExt::send(&mut responses, frame).await;
                        }
                        drop(permit);
                    })
                    .detach();
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(peer = %info.peer, %error, "closing connection: bad frame");
                    break 'connection;
                }
            }
        }
        let read = ReadInto {
            reader: &mut reader,
            decoder: &mut decoder,
        };
        let read = match select(Box::pin(read), Box::pin(shutdown.wait())).await {
            Either::Left((read, _)) => read,
            Either::Right(_) => break,
        };
        match read {
            Ok(0) => break,
            Ok(_) => {}
            Err(error) => {
                log_read_end(info, &error);
                break;
            }
        }
    }
    // Responses already queued are written; requests still running, and holders of an
    // `Outbound`, find the queue closed and drop theirs.
    let mut responses = responses;
    responses.close_channel();
    calls.close();
    let _ = glommio::timer::timeout(Duration::from_secs(1), async {
        writing.await;
        Ok(())
    })
    .await;
    tracing::debug!(peer = %info.peer, connection = ?info.id, "connection closed");
}

std::thread_local! {
    /// The read buffer of every connection served on this thread (shard). A read borrows it
    /// only inside the `poll_read` that copies from the socket (glommio's reads are
    /// non-blocking `recv`s into the buffer given, and rustls' copy out of its own), and
    /// hands the bytes to the connection's decoder at once: a connection waiting for its
    /// next request holds no read buffer.
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> =
        std::cell::RefCell::new(vec![0; limits::READ_CHUNK_SIZE]);
}

/// Reads what the peer sent next into `decoder`, through this thread's [`READ_BUFFER`];
/// resolves to the byte count (0: the peer closed).
struct ReadInto<'a, R> {
    reader: &'a mut R,
    decoder: &'a mut FrameDecoder,
}

impl<R: futures_lite::AsyncRead + Unpin> Future for ReadInto<'_, R> {
    type Output = std::io::Result<usize>;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        READ_BUFFER.with(|shared| {
            let mut own = Vec::new();
            // A poll never runs inside another (the buffer is free); if one ever did, it
            // would read through a buffer of its own.
            let mut borrowed = shared.try_borrow_mut();
            let buffer = match &mut borrowed {
                Ok(buffer) => &mut buffer[..],
                Err(_) => {
                    own.resize(limits::READ_CHUNK_SIZE, 0);
                    &mut own[..]
                }
            };
            let polled = std::pin::Pin::new(&mut *this.reader).poll_read(cx, buffer);
            if let std::task::Poll::Ready(Ok(n)) = &polled {
                this.decoder.extend(&buffer[..*n]);
            }
            polled
        })
    }
}

/// Frames one gathering write takes at most, so that a long queue of answers does not
/// hold all their parts at once.
const FRAMES_PER_WRITE_MAX: usize = 256;

/// The write half of a connection, as the response writer uses it.
trait ResponseWriter {
    /// Writes every byte of `parts`, in order.
    async fn write_parts(&mut self, parts: &[&[u8]]) -> std::io::Result<()>;

    /// Ends the sending direction once every response is written.
    async fn finish(&mut self) -> std::io::Result<()>;
}

/// A plain socket: gathering sends point at the parts where they are (body parts are slices
/// of mapped segments), with no copy into one buffer.
impl ResponseWriter for ferromq_uring::net::WriteHalf {
    async fn write_parts(&mut self, parts: &[&[u8]]) -> std::io::Result<()> {
        ferromq_uring::net::write_all_gathered(self, parts).await
    }

    async fn finish(&mut self) -> std::io::Result<()> {
        self.close().await
    }
}

/// Any other stream (TLS): the parts are copied into one buffer, which the stream encrypts.
impl<S: futures_lite::AsyncWrite + Unpin> ResponseWriter for futures_lite::io::WriteHalf<S> {
    async fn write_parts(&mut self, parts: &[&[u8]]) -> std::io::Result<()> {
        self.write_all(&parts.concat()).await?;
        self.flush().await
    }

    async fn finish(&mut self) -> std::io::Result<()> {
        self.close().await
    }
}

/// Writes response frames as they come, joining those already waiting into one write:
/// heads side by side in one buffer, body parts (slices of mapped segments) after their
/// heads, which a plain socket's `writer` sends without copying them.
async fn write_responses<W: ResponseWriter>(
    mut writer: W,
    mut outbox: futures::channel::mpsc::Receiver<OutFrame>,
    info: ConnectionInfo,
) {
    use futures::StreamExt;
    while let Some(first) = outbox.next().await {
        let mut frames = vec![first];
        while frames.len() < FRAMES_PER_WRITE_MAX {
            match outbox.try_recv() {
                Ok(more) => frames.push(more),
                Err(_) => break,
            }
        }
        // A head that follows a frame without parts joins the buffer that frame's head went
        // to, so small answers still leave as one buffer.
        let mut target = 0;
        for i in 1..frames.len() {
            if frames[i - 1].parts.is_empty() {
                let (before, after) = frames.split_at_mut(i);
                before[target].head.append(&mut after[0].head);
            } else {
                target = i;
            }
        }
        let slices: Vec<&[u8]> = frames
            .iter()
            .flat_map(|f| std::iter::once(&f.head[..]).chain(f.parts.iter().map(|p| &p[..])))
            .filter(|s| !s.is_empty())
            .collect();
        if let Err(error) = writer.write_parts(&slices).await {
            tracing::debug!(peer = %info.peer, %error, "write failed");
            return;
        }
    }
    let _ = writer.finish().await;
}

/// What the first net shard of a server bound (the real address when port 0 was asked for),
/// or why it could not; the other net shards wait for it at start-up.
pub type BoundAddr = std::sync::OnceLock<Result<SocketAddr, String>>;

/// Waits, on the thread that started a server, until its first net shard has published what
/// it bound in `bound`.
///
/// # Errors
/// Why the bind failed.
pub fn wait_bound(bound: &BoundAddr) -> Result<SocketAddr, String> {
    loop {
        if let Some(outcome) = bound.get() {
            return outcome.clone();
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Binds a server's listener on one of its net shards: the `first` binds `addr` and
/// publishes what it got in `bound`; the others wait for that and bind the same address
/// (`SO_REUSEPORT`), so every shard accepts on one port. `None` when binding failed.
pub async fn bind_shared(
    shard: ShardId,
    first: bool,
    addr: SocketAddr,
    bound: &BoundAddr,
) -> Option<TcpListener> {
    if first {
        let listener = bind(addr);
        let outcome = match &listener {
            Ok(l) => l.local_addr().map_err(|e| e.to_string()),
            Err(e) => Err(e.to_string()),
        };
        let _ = bound.set(outcome);
        return listener.ok();
    }
    // Start-up only: a few milliseconds of polling at most.
    let addr = loop {
        if let Some(outcome) = bound.get() {
            break outcome.as_ref().ok().copied()?;
        }
        glommio::timer::sleep(Duration::from_millis(1)).await;
    };
    bind(addr)
        .map_err(|error| tracing::error!(%shard, %error, "cannot listen"))
        .ok()
}

/// Binds `addr` on this shard with `SO_REUSEPORT`.
///
/// # Errors
/// The bind error, naming the address.
pub fn bind(addr: SocketAddr) -> Result<TcpListener, ferromq_uring::IoError> {
    ferromq_uring::net::bind_listener(addr)
}
