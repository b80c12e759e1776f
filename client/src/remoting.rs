//! The requesting half: send requests on one connection and match responses by opaque.
//!
//! Mirrors `NettyRemotingClient` / `NettyRemotingAbstract.invokeSync/invokeOneway`. It works
//! on any runtime: [`RemotingClient::new`] takes any `futures` reader and writer and returns a
//! [`ClientDriver`] future that the caller spawns on its runtime (tokio for the client library
//! and tools, glommio on a broker shard). [`connect_tokio`] does that for tokio.
//!
//! Requests the peer sends us (for example CHECK_TRANSACTION_STATE from a broker) arrive on the
//! [`InboundRequests`] stream; answer them with [`RemotingClient::send_response`].
//!
//! Invariants: each request gets a fresh opaque from a per-client counter; a response whose
//! opaque is not pending (late after a timeout) is dropped with a debug log; when the
//! connection ends every pending request fails with [`ClientError::Closed`].

use ferromq_protocol::acl::Credentials;
use ferromq_protocol::limits;
use ferromq_protocol::remoting::codec::{encode_to_vec, FrameDecoder};
use ferromq_protocol::remoting::command::{RemotingCommand, SerializeType};
use futures::channel::{mpsc, oneshot};
use futures::future::{select, Either};
use futures::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, SinkExt, StreamExt};
use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Why a request did not get a response.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The connection is closed (by the peer, an I/O error or a bad frame).
    #[error("connection to the remote closed")]
    Closed,
    /// No response within the timeout; the request may still have been processed.
    #[error("no response within {0:?}")]
    Timeout(Duration),
    /// Connecting failed.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Options of a client connection.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Header serialization of the requests this client sends.
    pub serialize_type: SerializeType,
    /// Largest frame accepted from the peer.
    pub frame_size_max: usize,
    /// Signs every request with these keys (Java's `AclClientRPCHook`), for brokers with
    /// `aclEnable=true`.
    pub credentials: Option<Credentials>,
    /// Encrypts the connection (Java's `tls.enable`), for servers whose `tls.server.mode`
    /// is `permissive` or `enforcing`.
    pub tls: Option<crate::tls::TlsClient>,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            serialize_type: SerializeType::Json,
            frame_size_max: limits::FRAME_SIZE_MAX,
            credentials: None,
            tls: None,
        }
    }
}

/// Requests sent to us by the peer.
pub type InboundRequests = mpsc::Receiver<RemotingCommand>;

/// A handle to one connection; cheap to clone, `Send + Sync`.
#[derive(Clone, Debug)]
pub struct RemotingClient {
    shared: Arc<Shared>,
    outbound: mpsc::Sender<Vec<u8>>,
}

#[derive(Debug)]
struct Shared {
    next_opaque: AtomicI32,
    pending: Mutex<HashMap<i32, oneshot::Sender<RemotingCommand>>>,
    closed: AtomicBool,
    serialize_type: SerializeType,
    credentials: Option<Credentials>,
}

impl Shared {
    fn pending(&self) -> std::sync::MutexGuard<'_, HashMap<i32, oneshot::Sender<RemotingCommand>>> {
        // A panic while holding this lock cannot leave the map inconsistent (single inserts
        // and removes), so a poisoned lock is still usable.
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The I/O task of a client: spawn it on the runtime that owns the reader and writer.
pub type ClientDriver = std::pin::Pin<Box<dyn Future<Output = ()> + Send>>;

impl RemotingClient {
    /// Builds a client over a connected reader and writer.
    ///
    /// Returns the handle, the driver future to spawn, and the stream of peer requests.
    pub fn new<R, W>(
        reader: R,
        writer: W,
        config: ClientConfig,
    ) -> (RemotingClient, ClientDriver, InboundRequests)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let shared = Arc::new(Shared {
            next_opaque: AtomicI32::new(0),
            pending: Mutex::new(HashMap::new()),
            closed: AtomicBool::new(false),
            serialize_type: config.serialize_type,
            credentials: config.credentials,
        });
        let (outbound, outbound_rx) = mpsc::channel(1024);
        let (inbound_tx, inbound_rx) = mpsc::channel(1024);
        let driver_shared = shared.clone();
        let driver = Box::pin(async move {
            let read = read_loop(
                reader,
                driver_shared.clone(),
                inbound_tx,
                config.frame_size_max,
            );
            let write = write_loop(writer, outbound_rx);
            let _ = select(Box::pin(read), Box::pin(write)).await;
            driver_shared.closed.store(true, Ordering::Release);
            // Dropping the senders fails every pending request with Closed.
            driver_shared.pending().clear();
        });
        (RemotingClient { shared, outbound }, driver, inbound_rx)
    }

    /// Sends `request` and waits for its response, without a time limit.
    ///
    /// # Errors
    /// [`ClientError::Closed`] when the connection ends first.
    pub async fn request(&self, request: RemotingCommand) -> Result<RemotingCommand, ClientError> {
        let (opaque, receiver) = self.start(request).await?;
        let response = receiver.await.map_err(|_| ClientError::Closed);
        self.shared.pending().remove(&opaque);
        response
    }

    /// Sends `request` and waits for its response until `deadline` completes.
    ///
    /// `deadline` is a timer of the caller's runtime, e.g. `tokio::time::sleep(timeout)` or
    /// `glommio::timer::sleep(timeout)`; `timeout` is only reported in the error.
    ///
    /// # Errors
    /// [`ClientError::Timeout`] or [`ClientError::Closed`].
    pub async fn request_until<D: Future<Output = ()>>(
        &self,
        request: RemotingCommand,
        deadline: D,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        let (opaque, receiver) = self.start(request).await?;
        let outcome = match select(receiver, Box::pin(deadline)).await {
            Either::Left((response, _)) => response.map_err(|_| ClientError::Closed),
            Either::Right(((), _)) => Err(ClientError::Timeout(timeout)),
        };
        self.shared.pending().remove(&opaque);
        outcome
    }

    /// Sends `request` with a tokio timer; must run inside a tokio runtime.
    ///
    /// # Errors
    /// [`ClientError::Timeout`] or [`ClientError::Closed`].
    pub async fn request_timeout(
        &self,
        request: RemotingCommand,
        timeout: Duration,
    ) -> Result<RemotingCommand, ClientError> {
        self.request_until(request, tokio::time::sleep(timeout), timeout)
            .await
    }

    /// Sends `request` as oneway: flag bit 1 set, no response expected.
    ///
    /// # Errors
    /// [`ClientError::Closed`].
    pub async fn oneway(&self, mut request: RemotingCommand) -> Result<(), ClientError> {
        request.mark_oneway();
        request.opaque = self.shared.next_opaque.fetch_add(1, Ordering::Relaxed);
        request.serialize_type = self.shared.serialize_type;
        self.sign(&mut request);
        self.send_frame(encode_to_vec(&request)).await
    }

    /// Sends a response to a request the peer made (its opaque must be kept).
    ///
    /// # Errors
    /// [`ClientError::Closed`].
    pub async fn send_response(&self, response: RemotingCommand) -> Result<(), ClientError> {
        self.send_frame(encode_to_vec(&response)).await
    }

    /// Sends raw bytes as they are (tests use this to send malformed frames).
    ///
    /// # Errors
    /// [`ClientError::Closed`].
    pub async fn send_raw(&self, bytes: Vec<u8>) -> Result<(), ClientError> {
        self.send_frame(bytes).await
    }

    /// Whether the connection has ended.
    #[must_use]
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    fn sign(&self, request: &mut RemotingCommand) {
        if let Some(credentials) = &self.shared.credentials {
            credentials.sign(request);
        }
    }

    async fn start(
        &self,
        mut request: RemotingCommand,
    ) -> Result<(i32, oneshot::Receiver<RemotingCommand>), ClientError> {
        let opaque = self.shared.next_opaque.fetch_add(1, Ordering::Relaxed);
        request.opaque = opaque;
        request.flag &= !ferromq_protocol::remoting::FLAG_ONEWAY;
        request.serialize_type = self.shared.serialize_type;
        self.sign(&mut request);
        let (sender, receiver) = oneshot::channel();
        {
            let mut pending = self.shared.pending();
            if self.is_closed() {
                return Err(ClientError::Closed);
            }
            pending.insert(opaque, sender);
        }
        if let Err(error) = self.send_frame(encode_to_vec(&request)).await {
            self.shared.pending().remove(&opaque);
            return Err(error);
        }
        Ok((opaque, receiver))
    }

    async fn send_frame(&self, frame: Vec<u8>) -> Result<(), ClientError> {
        if self.is_closed() {
            return Err(ClientError::Closed);
        }
        self.outbound
            .clone()
            .send(frame)
            .await
            .map_err(|_| ClientError::Closed)
    }
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut reader: R,
    shared: Arc<Shared>,
    mut inbound: mpsc::Sender<RemotingCommand>,
    frame_size_max: usize,
) {
    let mut decoder = FrameDecoder::new(frame_size_max);
    let mut chunk = vec![0u8; limits::READ_CHUNK_SIZE];
    loop {
        match reader.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => decoder.extend(&chunk[..n]),
        }
        loop {
            match decoder.next_command() {
                Ok(Some(command)) if command.is_response() => {
                    let waiter = shared.pending().remove(&command.opaque);
                    match waiter {
                        Some(waiter) => {
                            let _ = waiter.send(command);
                        }
                        None => tracing::debug!(opaque = command.opaque, "late response dropped"),
                    }
                }
                Ok(Some(command)) => {
                    if inbound.try_send(command).is_err() {
                        tracing::warn!("inbound request dropped: nobody is reading them");
                    }
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::warn!(%error, "closing client connection: bad frame");
                    return;
                }
            }
        }
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(mut writer: W, mut outbound: mpsc::Receiver<Vec<u8>>) {
    // The first frame becomes the write buffer; frames queued meanwhile join it.
    while let Some(mut batch) = outbound.next().await {
        while let Ok(more) = outbound.try_recv() {
            batch.extend_from_slice(&more);
            if batch.len() >= limits::READ_CHUNK_SIZE {
                break;
            }
        }
        if writer.write_all(&batch).await.is_err() || writer.flush().await.is_err() {
            return;
        }
    }
    let _ = writer.close().await;
}

/// Connects with tokio and spawns the driver on the current tokio runtime.
///
/// # Errors
/// [`ClientError::Connect`].
pub async fn connect_tokio(
    addr: SocketAddr,
    config: ClientConfig,
) -> Result<(RemotingClient, InboundRequests), ClientError> {
    use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};
    let stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|source| ClientError::Connect { addr, source })?;
    stream
        .set_nodelay(true)
        .map_err(|source| ClientError::Connect { addr, source })?;
    if let Some(tls) = config.tls.clone() {
        let stream = tls
            .handshake(addr, stream.compat())
            .await
            .map_err(|source| ClientError::Connect { addr, source })?;
        let (reader, writer) = stream.split();
        let (client, driver, inbound) = RemotingClient::new(reader, writer, config);
        tokio::spawn(driver);
        return Ok((client, inbound));
    }
    let (reader, writer) = stream.into_split();
    let (client, driver, inbound) =
        RemotingClient::new(reader.compat(), writer.compat_write(), config);
    tokio::spawn(driver);
    Ok((client, inbound))
}
