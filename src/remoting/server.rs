//! The serving half: accept connections on a net shard and run each request through a
//! [`RequestHandler`].
//!
//! Mirrors `NettyRemotingServer` / `NettyRemotingAbstract.processRequestCommand` (rules in
//! `reference/remoting.md` §6): a oneway request never gets a response, even on error; a frame
//! that cannot be decoded closes only its own connection, with one log line; a connection idle
//! for `serverChannelMaxIdleTimeSeconds` is closed.
//!
//! One task per connection reads frames, hands every whole request to the handler in arrival
//! order, and writes the responses of one read back in one write. Connections stay on the shard
//! that accepted them.

use super::codec::{encode_frame, FrameDecoder};
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
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            frame_size_max: limits::FRAME_SIZE_MAX,
            idle_timeout: limits::CHANNEL_IDLE_TIMEOUT,
            connections_max: limits::CONNECTIONS_MAX,
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
    loop {
        let accepted = match select(Box::pin(listener.accept()), Box::pin(shutdown.wait())).await {
            Either::Left((accepted, _)) => accepted,
            Either::Right(_) => break,
        };
        let stream = match accepted {
            Ok(stream) => stream,
            Err(error) => {
                tracing::warn!(%shard, %error, "accept failed");
                continue;
            }
        };
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
            run_connection(info, stream, &*handler, &config, &shutdown).await;
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

/// Serves one connection until the peer closes it, it errs, idles out, or shutdown.
async fn run_connection<H: RequestHandler>(
    info: ConnectionInfo,
    mut stream: TcpStream,
    handler: &H,
    config: &ServerConfig,
    shutdown: &Shutdown,
) {
    if let Err(error) = prepare_stream(&stream, Some(config.idle_timeout)) {
        tracing::warn!(peer = %info.peer, %error, "cannot configure connection");
        return;
    }
    tracing::debug!(peer = %info.peer, connection = ?info.id, "connection opened");
    let mut decoder = FrameDecoder::new(config.frame_size_max);
    let mut chunk = vec![0u8; limits::READ_CHUNK_SIZE];
    let mut responses = Vec::new();
    loop {
        let read = match select(Box::pin(stream.read(&mut chunk)), Box::pin(shutdown.wait())).await
        {
            Either::Left((read, _)) => read,
            Either::Right(_) => break,
        };
        match read {
            Ok(0) => break,
            Ok(n) => decoder.extend(&chunk[..n]),
            Err(error) if error.kind() == std::io::ErrorKind::TimedOut => {
                tracing::info!(peer = %info.peer, "closing idle connection");
                break;
            }
            Err(error) => {
                tracing::debug!(peer = %info.peer, %error, "read failed");
                break;
            }
        }
        loop {
            match decoder.next_command() {
                Ok(Some(request)) => {
                    if request.is_response() {
                        // This server sends no requests yet, so no response is awaited.
                        tracing::debug!(peer = %info.peer, opaque = request.opaque,
                            "dropping unexpected response");
                        continue;
                    }
                    let oneway = request.is_oneway();
                    let response = handler.handle(info, request).await;
                    if let (Some(response), false) = (response, oneway) {
                        encode_frame(&response, &mut responses);
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(peer = %info.peer, %error, "closing connection: bad frame");
                    flush(&mut stream, &mut responses, info).await;
                    return;
                }
            }
        }
        if !flush(&mut stream, &mut responses, info).await {
            break;
        }
    }
    tracing::debug!(peer = %info.peer, connection = ?info.id, "connection closed");
}

async fn flush(stream: &mut TcpStream, responses: &mut Vec<u8>, info: ConnectionInfo) -> bool {
    if responses.is_empty() {
        return true;
    }
    let written = stream.write_all(responses).await;
    responses.clear();
    match written {
        Ok(()) => true,
        Err(error) => {
            tracing::debug!(peer = %info.peer, %error, "write failed");
            false
        }
    }
}

/// Binds `addr` on this shard with `SO_REUSEPORT`.
///
/// # Errors
/// The bind error, naming the address.
pub fn bind(addr: SocketAddr) -> Result<TcpListener, ferromq_uring::IoError> {
    ferromq_uring::net::bind_listener(addr)
}
