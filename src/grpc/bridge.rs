//! How a gRPC call reaches the broker: a [`RemotingCommand`] handed in-process to a net
//! shard, which runs it through the same [`RequestHandler`] as a remoting connection's
//! requests and hands back the response (the Java proxy's local mode, without its
//! loopback channel).
//!
//! The endpoint's tokio thread holds a [`LocalBroker`], one bounded channel per net shard;
//! each net shard runs [`serve_calls`] over its receiving end. A gRPC client (one
//! `x-mq-client-id`) is kept on one shard, as a remoting connection stays on the shard that
//! accepted it, under a [`ConnectionId`] of its own whose sequence number has the top bit
//! set, so it never meets a remoting connection's.
//!
//! Cost: one channel hop each way and one task per call on the shard; no encoding, no
//! socket. A full channel makes the caller wait (backpressure), never grows: the channels
//! are tokio's bounded ones, whose `send(&self)` takes one of the [`SHARD_CALLS_MAX`] slots
//! however many callers share the sender (a `futures` channel would give each clone of the
//! sender a slot of its own). Their receiving end is runtime-agnostic, so a glommio shard
//! awaits it.

use crate::remoting::server::{ConnectionId, ConnectionInfo, RequestHandler};
use crate::remoting::RemotingCommand;
use ferromq_shards::{ShardId, Shutdown};
use futures::channel::oneshot;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::sync::mpsc;

/// Calls waiting for one shard; more make the sender wait.
pub const SHARD_CALLS_MAX: usize = 1024;

/// The top bit of a gRPC client's connection sequence number.
const GRPC_CONNECTION_BIT: u64 = 1 << 63;

/// A net shard's end of the endpoint's channel.
pub type ShardInbox = mpsc::Receiver<ShardCall>;

/// One request for a shard, and where its answer goes.
#[derive(Debug)]
pub struct ShardCall {
    /// The client the request comes from, as the processors see a connection.
    pub connection: ConnectionInfo,
    /// The request.
    pub request: RemotingCommand,
    /// The response (`None`: the processor answered nothing, as for a oneway request).
    pub reply: oneshot::Sender<Option<RemotingCommand>>,
}

/// Why a call got no answer.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CallError {
    /// The broker is stopping: the shard's channel is closed.
    #[error("the broker is shutting down")]
    Closed,
    /// The processor answered nothing.
    #[error("the broker gave no answer")]
    NoAnswer,
}

/// The endpoint's way into the broker's net shards; cheap to clone, usable from any thread.
#[derive(Clone, Debug)]
pub struct LocalBroker {
    shards: Vec<(ShardId, mpsc::Sender<ShardCall>)>,
}

/// The receiving ends, taken one by each net shard as it starts.
#[derive(Debug, Default)]
pub struct ShardInboxes {
    inboxes: Mutex<Vec<(ShardId, ShardInbox)>>,
}

impl ShardInboxes {
    /// The inbox of shard `shard`, once (the net shard that serves it takes it).
    pub fn take(&self, shard: ShardId) -> Option<ShardInbox> {
        let mut inboxes = self.inboxes.lock().unwrap_or_else(PoisonError::into_inner);
        let at = inboxes.iter().position(|(id, _)| *id == shard)?;
        Some(inboxes.swap_remove(at).1)
    }
}

impl LocalBroker {
    /// Channels to the net shards `shards`: the sending side, and the inboxes the shards
    /// take.
    #[must_use]
    pub fn new(shards: impl IntoIterator<Item = ShardId>) -> (LocalBroker, Arc<ShardInboxes>) {
        let mut senders = Vec::new();
        let mut receivers = Vec::new();
        for shard in shards {
            let (sender, receiver) = mpsc::channel(SHARD_CALLS_MAX);
            senders.push((shard, sender));
            receivers.push((shard, receiver));
        }
        assert!(!senders.is_empty(), "a broker has at least one net shard");
        let inboxes = ShardInboxes {
            inboxes: Mutex::new(receivers),
        };
        (LocalBroker { shards: senders }, Arc::new(inboxes))
    }

    /// The connection a gRPC client's requests come on: client number `client` (unique in
    /// the endpoint) on the shard chosen for it.
    #[must_use]
    pub fn connection(&self, client: u64, peer: SocketAddr) -> ConnectionInfo {
        let (shard, _) = &self.shards[self.shard_index(client)];
        ConnectionInfo {
            id: ConnectionId {
                shard: *shard,
                seq: GRPC_CONNECTION_BIT | client,
            },
            peer,
        }
    }

    /// Runs `request` on the shard of `connection` and returns its response.
    ///
    /// # Errors
    /// [`CallError`] when the broker is stopping or answered nothing.
    pub async fn call(
        &self,
        connection: ConnectionInfo,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, CallError> {
        let index = self
            .shards
            .iter()
            .position(|(id, _)| *id == connection.id.shard)
            .unwrap_or(0);
        let (reply, answer) = oneshot::channel();
        let call = ShardCall {
            connection,
            request,
            reply,
        };
        self.shards[index]
            .1
            .send(call)
            .await
            .map_err(|_| CallError::Closed)?;
        answer
            .await
            .map_err(|_| CallError::Closed)?
            .ok_or(CallError::NoAnswer)
    }

    fn shard_index(&self, client: u64) -> usize {
        usize::try_from(client % self.shards.len() as u64).unwrap_or(0)
    }
}

/// Serves a shard's inbox: each call runs on its own task through `handler` (so a waiting
/// request does not hold up the others, as on a remoting connection) until shutdown.
pub async fn serve_calls<H: RequestHandler>(
    mut inbox: ShardInbox,
    handler: Rc<H>,
    shutdown: Shutdown,
) {
    use futures::future::{select, Either};
    loop {
        let next = select(Box::pin(inbox.recv()), Box::pin(shutdown.wait())).await;
        let call = match next {
            Either::Left((Some(call), _)) => call,
            Either::Left((None, _)) | Either::Right(_) => return,
        };
        let handler = Rc::clone(&handler);
        glommio::spawn_local(async move {
            let response = handler.handle(call.connection, call.request).await;
            // The caller may have gone (its RPC cancelled): the answer is dropped.
            let _ = call.reply.send(response);
        })
        .detach();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::RequestCode;
    use std::future::Future;
    use std::task::{Context, Poll};

    /// Many callers on one shard fill its channel to the bound and then wait: the bound
    /// does not grow with the number of callers.
    #[test]
    fn concurrent_callers_past_the_bound_wait() {
        let shard = ShardId::new(0);
        let (broker, inboxes) = LocalBroker::new([shard]);
        let inbox = inboxes.take(shard).expect("the inbox of the one shard");
        let peer = SocketAddr::from(([127, 0, 0, 1], 1));
        let mut calls: Vec<_> = (0..SHARD_CALLS_MAX as u64 + 10)
            .map(|client| {
                let request = RemotingCommand::request(RequestCode::HEART_BEAT);
                Box::pin(broker.call(broker.connection(client, peer), request))
            })
            .collect();
        let mut context = Context::from_waker(futures::task::noop_waker_ref());
        for call in &mut calls {
            assert!(matches!(call.as_mut().poll(&mut context), Poll::Pending));
        }
        assert_eq!(inbox.len(), SHARD_CALLS_MAX);
    }
}
