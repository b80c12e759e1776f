//! The raft transport between controllers: one TCP connection per peer on the DLedger peer
//! address (`controllerDLegerPeers`), one request at a time, each a frame:
//!
//! | bytes | content                                                     |
//! | ----- | ----------------------------------------------------------- |
//! | 4     | length of the JSON that follows, big-endian, at most 64 MiB |
//! | n     | [`RaftRequest`] (to a peer) or [`RaftReply`] (back), JSON   |
//!
//! Every request carries the sender's node id and its remoting address (the listen address
//! brokers use): Java serves the controller's requests and DLedger on one port, so its peer
//! address is the leader's address GET_METADATA_INFO reports; here the two ports differ and
//! the followers learn the leader's remoting address from its requests.

use super::{RaftView, TypeConfig};
use openraft::error::{InstallSnapshotError, RPCError, RaftError, RemoteError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest frame read (a snapshot chunk is openraft's 3 MiB by default).
const FRAME_BYTES_MAX: u32 = 64 << 20;
/// How long connecting to a peer may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// A request from one controller to another.
#[derive(Debug, Serialize, Deserialize)]
pub struct RaftRequest {
    /// The sender's node id.
    pub from: u64,
    /// The sender's remoting address.
    pub remoting: String,
    /// The call.
    pub call: RaftCall,
}

/// The three raft calls.
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftCall {
    /// AppendEntries (also the leader's heartbeat).
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    /// RequestVote.
    Vote(VoteRequest<u64>),
    /// One chunk of a snapshot.
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
}

/// The answer to a [`RaftRequest`].
#[derive(Debug, Serialize, Deserialize)]
pub enum RaftReply {
    /// To AppendEntries.
    AppendEntries(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    /// To RequestVote.
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    /// To a snapshot chunk.
    InstallSnapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
}

async fn write_frame(stream: &mut TcpStream, value: &impl Serialize) -> std::io::Result<()> {
    let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
    let len = u32::try_from(bytes.len())
        .ok()
        .filter(|len| *len <= FRAME_BYTES_MAX)
        .ok_or_else(|| std::io::Error::other("raft frame too large"))?;
    let mut frame = Vec::with_capacity(bytes.len() + 4);
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&bytes);
    stream.write_all(&frame).await
}

async fn read_frame<T: for<'de> Deserialize<'de>>(stream: &mut TcpStream) -> std::io::Result<T> {
    let mut len = [0_u8; 4];
    stream.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len);
    if len > FRAME_BYTES_MAX {
        let message = format!("raft frame of {len} bytes, at most {FRAME_BYTES_MAX}");
        return Err(std::io::Error::other(message));
    }
    let mut bytes = vec![0_u8; len as usize];
    stream.read_exact(&mut bytes).await?;
    serde_json::from_slice(&bytes).map_err(std::io::Error::other)
}

/// Makes a [`Network`] per peer.
#[derive(Clone, Debug)]
pub struct NetworkFactory {
    /// This node's id.
    pub self_id: u64,
    /// This node's remoting address, set once the controller listens.
    pub remoting: Arc<OnceLock<String>>,
}

impl RaftNetworkFactory<TypeConfig> for NetworkFactory {
    type Network = Network;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> Network {
        Network {
            self_id: self.self_id,
            remoting: self.remoting.clone(),
            target,
            addr: node.addr.clone(),
            stream: None,
        }
    }
}

/// The connection to one peer, opened on first use and again after a failure.
#[derive(Debug)]
pub struct Network {
    self_id: u64,
    remoting: Arc<OnceLock<String>>,
    target: u64,
    addr: String,
    stream: Option<TcpStream>,
}

impl Network {
    /// One call; a failure is `Unreachable`, which makes openraft back off before the next
    /// try rather than retry at once against a peer that is down.
    async fn call(&mut self, call: RaftCall, ttl: Duration) -> Result<RaftReply, Unreachable> {
        let request = RaftRequest {
            from: self.self_id,
            remoting: self.remoting.get().cloned().unwrap_or_default(),
            call,
        };
        let result = tokio::time::timeout(ttl, self.exchange(&request)).await;
        let error = match result {
            Ok(Ok(reply)) => return Ok(reply),
            Ok(Err(error)) => error,
            Err(_) => std::io::Error::new(std::io::ErrorKind::TimedOut, "raft call timed out"),
        };
        // The stream may hold half a frame: the next call connects again.
        self.stream = None;
        Err(Unreachable::new(&error))
    }

    async fn exchange(&mut self, request: &RaftRequest) -> std::io::Result<RaftReply> {
        if self.stream.is_none() {
            let connect = TcpStream::connect(self.addr.as_str());
            let stream = tokio::time::timeout(CONNECT_TIMEOUT, connect)
                .await
                .map_err(|_| std::io::Error::other("connect timed out"))??;
            stream.set_nodelay(true)?;
            self.stream = Some(stream);
        }
        let stream = self
            .stream
            .as_mut()
            .ok_or_else(|| std::io::Error::other("no connection"))?;
        write_frame(stream, request).await?;
        read_frame(stream).await
    }

    fn unexpected<E: std::error::Error>(&self) -> RPCError<u64, BasicNode, E> {
        let error = std::io::Error::other(format!("peer {} answered another call", self.target));
        RPCError::Unreachable(Unreachable::new(&error))
    }
}

type RpcResult<T, E = openraft::error::Infallible> =
    Result<T, RPCError<u64, BasicNode, RaftError<u64, E>>>;

impl RaftNetwork<TypeConfig> for Network {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<u64>> {
        let reply = self
            .call(RaftCall::AppendEntries(rpc), option.hard_ttl())
            .await
            .map_err(RPCError::Unreachable)?;
        match reply {
            RaftReply::AppendEntries(Ok(response)) => Ok(response),
            RaftReply::AppendEntries(Err(error)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, error)))
            }
            _ => Err(self.unexpected()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<u64>, InstallSnapshotError> {
        let reply = self
            .call(RaftCall::InstallSnapshot(rpc), option.hard_ttl())
            .await
            .map_err(RPCError::Unreachable)?;
        match reply {
            RaftReply::InstallSnapshot(Ok(response)) => Ok(response),
            RaftReply::InstallSnapshot(Err(error)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, error)))
            }
            _ => Err(self.unexpected()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<u64>> {
        let reply = self
            .call(RaftCall::Vote(rpc), option.hard_ttl())
            .await
            .map_err(RPCError::Unreachable)?;
        match reply {
            RaftReply::Vote(Ok(response)) => Ok(response),
            RaftReply::Vote(Err(error)) => {
                Err(RPCError::RemoteError(RemoteError::new(self.target, error)))
            }
            _ => Err(self.unexpected()),
        }
    }
}

/// Serves peers' raft calls on `listener` until the process ends.
pub async fn serve(listener: tokio::net::TcpListener, raft: Raft<TypeConfig>, view: Arc<RaftView>) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "controller raft accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let raft = raft.clone();
        let view = view.clone();
        tokio::spawn(async move {
            if let Err(error) = serve_connection(stream, &raft, &view).await {
                tracing::debug!(%peer, %error, "controller raft connection closed");
            }
        });
    }
}

async fn serve_connection(
    mut stream: TcpStream,
    raft: &Raft<TypeConfig>,
    view: &RaftView,
) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    loop {
        let request: RaftRequest = read_frame(&mut stream).await?;
        view.learn_remoting(request.from, &request.remoting);
        let reply = match request.call {
            RaftCall::AppendEntries(rpc) => {
                RaftReply::AppendEntries(raft.append_entries(rpc).await)
            }
            RaftCall::Vote(rpc) => RaftReply::Vote(raft.vote(rpc).await),
            RaftCall::InstallSnapshot(rpc) => {
                RaftReply::InstallSnapshot(raft.install_snapshot(rpc).await)
            }
        };
        write_frame(&mut stream, &reply).await?;
    }
}
