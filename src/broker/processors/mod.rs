//! The broker's request processors, one module per request family (Java's
//! `SendMessageProcessor`, `PullMessageProcessor`, `ClientManageProcessor`,
//! `ConsumerManageProcessor`, `QueryMessageProcessor`, `EndTransactionProcessor`,
//! `RecallMessageProcessor`, `PopMessageProcessor`, `AckMessageProcessor`,
//! `ChangeInvisibleTimeProcessor`, `NotificationProcessor`, `PollingInfoProcessor`,
//! `AdminBrokerProcessor`): one [`BrokerHandler`] per net shard checks the ACL, finds the
//! request's processor in the table of [`codes`](super::codes) and hands it the request
//! with the shard's [`Context`].
//!
//! Architecture Invariant: a processor serves the codes the table gives it and calls no
//! other processor; what two of them share lives below them (`reply`, `retry`, `delay`,
//! `transaction`, `filter`, `pop`, `state`).

mod ack;
mod acl_admin;
mod assignment;
mod broker_admin;
mod calls;
mod client;
mod end_transaction;
mod groups;
mod notification;
mod offsets;
mod peek;
mod pop;
mod pull;
mod query;
mod queues;
mod recall;
mod send;
mod send_back;
mod stats_admin;
mod store_admin;
mod topics;

use super::codes::{route_of, Processor};
use super::reply::{error, Response};
use super::services::long_poll::LongPoll;
use super::state::{BrokerState, LocalReplicaWaits};
use crate::metrics::rpc::{RpcKey, RpcStats, NO_RESPONSE, PROCESSORS};
use crate::remoting::heartbeat::MessageQueue;
use crate::remoting::server::{ConnectionInfo, Outbound, RequestHandler};
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use crate::store::message_store::StoreHandle;
use crate::store::put_coalescer::PutCoalescer;
use crate::store::reader::StoreReader;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// Longest wait of a request that reports max offsets for dispatch to publish what was
/// committed when it came (read-your-writes); past it, what is published is answered.
const DISPATCH_WAIT_MAX: Duration = Duration::from_secs(3);

async fn last_store_time(reader: &StoreReader, topic: &str, queue_id: i32, offset: i64) -> i64 {
    if offset <= 0 {
        return 0;
    }
    reader
        .store_time_at(topic, queue_id, offset - 1)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// A fastjson map keyed by `MessageQueue` objects, as Java writes `offsetTable`s: the key is
/// the queue's JSON, unquoted (the Java and fastjson-compatible clients read it so).
fn queue_keyed_map(entries: &[(MessageQueue, serde_json::Value)]) -> String {
    let fields: Vec<String> = entries
        .iter()
        .map(|(queue, value)| {
            let key = serde_json::json!({
                "brokerName": queue.broker_name,
                "queueId": queue.queue_id,
                "topic": queue.topic,
            });
            format!("{key}:{value}")
        })
        .collect();
    format!("{{{}}}", fields.join(","))
}

/// What a processor works with on its net shard.
#[derive(Debug)]
pub(crate) struct Context {
    state: Arc<BrokerState>,
    store: StoreHandle,
    /// This shard's sends, handed to the writer together.
    puts: PutCoalescer,
    reader: StoreReader,
    long_poll: Rc<LongPoll>,
    /// This shard's SYNC_MASTER puts waiting for a slave.
    replicas: Rc<LocalReplicaWaits>,
    store_host: SocketAddr,
    /// This shard's index: its slot in the broker's statistics.
    shard: usize,
}

/// Serves one net shard's connections.
#[derive(Debug)]
pub struct BrokerHandler {
    ctx: Context,
}

impl BrokerHandler {
    /// A handler of shard `shard` over the shared state, the store, and this shard's
    /// long-poll and replica-wait tables; `listen_port` is the port actually bound (it
    /// differs from the config's when that asks for port 0), the one stored messages and
    /// their ids name.
    #[must_use]
    pub fn new(
        state: Arc<BrokerState>,
        store: StoreHandle,
        long_poll: Rc<LongPoll>,
        replicas: Rc<LocalReplicaWaits>,
        listen_port: u16,
        shard: usize,
    ) -> Self {
        let store_host = SocketAddr::new(state.config.broker_ip1, listen_port);
        let ctx = Context {
            reader: store.reader(),
            puts: store.coalescer(),
            state,
            store,
            long_poll,
            replicas,
            store_host,
            shard,
        };
        BrokerHandler { ctx }
    }

    async fn process(&self, connection: ConnectionInfo, request: RemotingCommand) -> Response {
        let ctx = &self.ctx;
        if let Some(acl) = &ctx.state.acl {
            if let Err(super::acl::Denied(remark)) = acl.check(&request, connection.peer.ip()) {
                let (peer, code) = (connection.peer, request.code);
                tracing::debug!(%peer, code, remark, "ACL refused");
                // Java's answer to any exception in a request hook: SYSTEM_ERROR, no fields.
                let mut refusal = RemotingCommand::response_to(
                    &request,
                    ResponseCode::SYSTEM_ERROR,
                    Some(remark),
                );
                refusal.ext_fields = None;
                return Some(refusal);
            }
        }
        let code = request.request_code();
        let connection = &connection;
        let answer = match route_of(code).map(|route| route.processor) {
            Some(Processor::Send) => send::process(ctx, connection, request).await,
            Some(Processor::SendBack) => send_back::process(ctx, &request).await,
            Some(Processor::Pull) => pull::process(ctx, connection, &request).await,
            Some(Processor::Pop) => pop::process(ctx, connection, &request).await,
            Some(Processor::Ack) => ack::process(ctx, connection, &request).await,
            Some(Processor::Notification) => notification::process(ctx, connection, &request).await,
            Some(Processor::Peek) => peek::process(ctx, connection, &request).await,
            Some(Processor::Assignment) => assignment::process(ctx, &request).await,
            Some(Processor::Client) => client::process(ctx, connection, &request).await,
            Some(Processor::Offsets) => offsets::process(ctx, &request).await,
            Some(Processor::Query) => query::process(ctx, &request).await,
            Some(Processor::EndTransaction) => end_transaction::process(ctx, &request).await,
            Some(Processor::Recall) => recall::process(ctx, connection, &request).await,
            Some(Processor::Topics) => topics::process(ctx, &request).await,
            Some(Processor::Groups) => groups::process(ctx, &request).await,
            Some(Processor::BrokerAdmin) => broker_admin::process(ctx, &request).await,
            Some(Processor::AclAdmin) => acl_admin::acl_admin(&ctx.state, &request),
            Some(Processor::Calls) => calls::process(ctx, &request).await,
            Some(Processor::Queues) => queues::process(ctx, &request).await,
            Some(Processor::StatsAdmin) => stats_admin::process(ctx, &request).await,
            Some(Processor::StoreAdmin) => store_admin::process(ctx, &request).await,
            None => error(
                &request,
                ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {} not supported", code.0),
            ),
        };
        // Refusals at debug level: what a client asked for and what it was told, for
        // finding out what a third-party client needs (`RUST_LOG=ferromq=debug`).
        if let Some(response) = &answer {
            let refused = response.code != ResponseCode::SUCCESS.0
                && response.code != ResponseCode::PULL_NOT_FOUND.0;
            if refused {
                tracing::debug!(
                    request = code.0,
                    response = response.code,
                    remark = response.remark.as_deref().unwrap_or(""),
                    peer = %connection.peer,
                    "request refused"
                );
            }
        }
        answer
    }
}

/// `PullSysFlag.FLAG_SUSPEND`: the pull may be held while its queue has nothing.
const PULL_FLAG_SUSPEND: i32 = 0x2;

/// The processor pool of Java's `rocketmq_processor_watermark` a request would wait in, as
/// an index of [`PROCESSORS`].
fn watermark_pool(code: RequestCode) -> usize {
    let pool = match route_of(code).map(|route| route.processor) {
        _ if code == RequestCode::SEND_REPLY_MESSAGE
            || code == RequestCode::SEND_REPLY_MESSAGE_V2 =>
        {
            "reply"
        }
        _ if code == RequestCode::LITE_PULL_MESSAGE => "lite_pull",
        _ if code == RequestCode::HEART_BEAT => "heartbeat",
        Some(Processor::Send | Processor::SendBack) => "send",
        Some(Processor::Pull) => "pull",
        Some(Processor::Pop | Processor::Peek | Processor::Notification) => "pull",
        Some(Processor::Ack) => "ack",
        Some(Processor::Client) => "client_manager",
        Some(Processor::Offsets) => "consumer_manager",
        Some(Processor::Query) => "query_message",
        Some(Processor::EndTransaction) => "transaction",
        _ => "admin",
    };
    PROCESSORS
        .iter()
        .position(|name| *name == pool)
        .unwrap_or(0)
}

/// A request counted in flight until it is answered or dropped (its connection closed).
struct InFlight<'a> {
    stats: &'a RpcStats,
    shard: usize,
    pool: usize,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.stats.ended(self.shard, self.pool);
    }
}

impl RequestHandler for BrokerHandler {
    async fn handle(&self, connection: ConnectionInfo, request: RemotingCommand) -> Response {
        let ctx = &self.ctx;
        let rpc = &ctx.state.stats.rpc;
        let code = request.request_code();
        // A pull that asks to be held while its queue has nothing (`FLAG_SUSPEND`).
        let long_polling = code == RequestCode::PULL_MESSAGE
            && request
                .ext_fields
                .as_ref()
                .and_then(|fields| fields.get("sysFlag"))
                .and_then(|flag| flag.parse::<i32>().ok())
                .is_some_and(|flag| flag & PULL_FLAG_SUSPEND != 0);
        let pool = watermark_pool(code);
        rpc.started(ctx.shard, pool);
        let in_flight = InFlight {
            stats: rpc,
            shard: ctx.shard,
            pool,
        };
        let started = std::time::Instant::now();
        let answer = self.process(connection, request).await;
        drop(in_flight);
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let response = answer
            .as_ref()
            .map_or(NO_RESPONSE, |response| response.code);
        let key = RpcKey {
            request: code.0,
            response,
            long_polling,
        };
        rpc.record(ctx.shard, key, elapsed_ms);
        answer
    }

    fn connection_opened(&self, connection: ConnectionInfo, outbound: Outbound) {
        self.ctx.state.connection_opened(connection.id, outbound);
    }

    async fn connection_closed(&self, connection: ConnectionInfo) {
        for group in self.ctx.state.unregister(connection.id, None) {
            tracing::info!(group, peer = %connection.peer, "consumer left with its connection");
        }
    }
}
