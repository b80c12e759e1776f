//! The gRPC endpoint: RocketMQ 5.x's `apache.rocketmq.v2.MessagingService`, served inside
//! the broker so that 5.x gRPC clients (rocketmq-clients: Java, Go, Python, Node.js, …)
//! work unchanged (Java 5.x proxy, `proxy/.../grpc/v2/`, in its local mode).
//!
//! Shape:
//! - [`GrpcEndpoint`] runs tonic's generated server over hyper's HTTP/2 on a thread of its
//!   own with a tokio runtime (the shards run glommio), as the metrics endpoint does.
//! - Each RPC becomes remoting requests handed in-process to a net shard ([`bridge`]), which
//!   runs them through the broker's own processors: a gRPC send is a SEND_MESSAGE_V2, a
//!   heartbeat a HEART_BEAT, and so on. Only what the broker has no request for lives
//!   here: the clients' settings (Telemetry), the route answer, the transaction table.
//! - One file per RPC family: [`route`] (QueryRoute, QueryAssignment), [`session`]
//!   (Telemetry, Heartbeat, NotifyClientTermination), [`producer`] (SendMessage,
//!   EndTransaction, RecallMessage), [`consumer`] (ReceiveMessage, AckMessage,
//!   ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue).
//!
//! Errors travel in each response's `status` with the proto's `Code`, as the proxy sends
//! them; a gRPC status other than OK is only for what the proxy also ends that way
//! (a Telemetry stream whose settings have neither publishing nor subscription).

pub mod bridge;
pub mod config;
mod consumer;
mod producer;
pub mod proto;
mod route;
mod session;

use crate::broker::state::BrokerState;
use crate::remoting::server::ConnectionInfo;
use crate::remoting::{RemotingCommand, ResponseCode};
use bridge::LocalBroker;
use ferromq_shards::Shutdown;
use proto::messaging_service_server::{MessagingService, MessagingServiceServer};
use proto::Code;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Connections served at once; a connection past it is dropped at once.
pub const CONNECTIONS_MAX: usize = 4096;
/// Largest gRPC message decoded (Java's `grpcMaxInboundMessageSize`, 130 MiB, is for batch
/// sends of 4 MiB bodies; ours matches it).
pub const INBOUND_MESSAGE_SIZE_MAX: usize = 130 * 1024 * 1024;

/// Property names users may not set (Java `MessageConst.STRING_HASH_SET`).
pub(crate) const SYSTEM_PROPERTIES: [&str; 51] = [
    "TRACE_ON",
    "MSG_REGION",
    "KEYS",
    "TAGS",
    "WAIT",
    "DELAY",
    "RETRY_TOPIC",
    "REAL_TOPIC",
    "REAL_QID",
    "TRAN_MSG",
    "PGROUP",
    "MIN_OFFSET",
    "MAX_OFFSET",
    "BUYER_ID",
    "ORIGIN_MESSAGE_ID",
    "TRANSFER_FLAG",
    "CORRECTION_FLAG",
    "MQ2_FLAG",
    "RECONSUME_TIME",
    "UNIQ_KEY",
    "MAX_RECONSUME_TIMES",
    "CONSUME_START_TIME",
    "POP_CK",
    "POP_CK_OFFSET",
    "1ST_POP_TIME",
    "TRAN_PREPARED_QUEUE_OFFSET",
    "DUP_INFO",
    "EXTEND_UNIQ_INFO",
    "INSTANCE_ID",
    "CORRELATION_ID",
    "REPLY_TO_CLIENT",
    "TTL",
    "ARRIVE_TIME",
    "PUSH_REPLY_TIME",
    "CLUSTER",
    "MSG_TYPE",
    "INNER_MULTI_QUEUE_OFFSET",
    "TIMER_DELAY_MS",
    "TIMER_DELAY_SEC",
    "TIMER_DELIVER_MS",
    "TIMER_ENQUEUE_MS",
    "TIMER_DEQUEUE_MS",
    "TIMER_ROLL_TIMES",
    "TIMER_OUT_MS",
    "TIMER_DEL_UNIQKEY",
    "TIMER_DELAY_LEVEL",
    "__BORNHOST",
    "BORN_TIMESTAMP",
    "DLQ_ORIGIN_TOPIC",
    "DLQ_ORIGIN_MESSAGE_ID",
    "__CRC32#",
];

/// A running endpoint: its address and its thread, which ends at the shutdown signal.
#[derive(Debug)]
pub struct GrpcEndpoint {
    /// The address it listens on (the real port when 0 was asked for).
    pub addr: SocketAddr,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GrpcEndpoint {
    /// Binds `grpcServerPort` on the broker's listen host now (so that a port in use fails
    /// the start) and serves until `shutdown`; `None` when `grpcServerEnable` is false.
    ///
    /// # Errors
    /// The port cannot be bound, or the thread cannot start.
    pub fn start(
        state: &Arc<BrokerState>,
        broker: LocalBroker,
        shutdown: Shutdown,
    ) -> std::io::Result<Option<GrpcEndpoint>> {
        let config = &state.config.grpc;
        if !config.enable {
            return Ok(None);
        }
        let host = state.config.listen_addr().ip();
        let listener = std::net::TcpListener::bind(SocketAddr::new(host, config.server_port))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let service = Endpoint::new(Arc::clone(state), broker, addr.port());
        let thread = std::thread::Builder::new()
            .name("grpc".to_owned())
            .spawn(move || run(listener, service, shutdown))?;
        tracing::info!(endpoint = %addr, "gRPC endpoint listening (MessagingService)");
        Ok(Some(GrpcEndpoint {
            addr,
            thread: Some(thread),
        }))
    }

    /// Waits for the thread to end (it ends at the shutdown signal).
    pub fn join(mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn run(listener: std::net::TcpListener, service: Endpoint, shutdown: Shutdown) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("grpc-worker")
        .enable_io()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "gRPC endpoint: cannot start its runtime");
            return;
        }
    };
    runtime.block_on(serve(listener, service, shutdown));
    // Streams still open (a Telemetry stream lives as long as its client) end here.
    runtime.shutdown_timeout(Duration::from_secs(1));
}

async fn serve(listener: std::net::TcpListener, service: Endpoint, shutdown: Shutdown) {
    let server = MessagingServiceServer::new(service)
        .max_decoding_message_size(INBOUND_MESSAGE_SIZE_MAX)
        .max_encoding_message_size(INBOUND_MESSAGE_SIZE_MAX);
    let serve = |stream: tokio::net::TcpStream, peer: SocketAddr| {
        let _ = stream.set_nodelay(true);
        serve_connection(stream, peer, server.clone(), shutdown.clone())
    };
    crate::serve::accept_loop(listener, "gRPC endpoint", CONNECTIONS_MAX, &shutdown, serve).await;
}

/// One HTTP/2 connection; each request learns the peer's address (as tonic's own server
/// puts it in the request's extensions).
async fn serve_connection(
    stream: tokio::net::TcpStream,
    peer: SocketAddr,
    server: MessagingServiceServer<Endpoint>,
    shutdown: Shutdown,
) {
    let service = hyper::service::service_fn(move |mut request: hyper::Request<_>| {
        use tonic::codegen::Service as _;
        request.extensions_mut().insert(PeerAddr(peer));
        let mut server = server.clone();
        async move { server.call(request).await }
    });
    let mut builder =
        hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .keep_alive_interval(Some(Duration::from_secs(60)))
        .keep_alive_timeout(Duration::from_secs(20))
        .max_concurrent_streams(1024);
    let connection = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
    tokio::pin!(connection);
    let stop = shutdown.wait();
    tokio::pin!(stop);
    let served = tokio::select! {
        served = &mut connection => served,
        () = &mut stop => {
            connection.as_mut().graceful_shutdown();
            connection.await
        }
    };
    if let Err(error) = served {
        tracing::debug!(%peer, %error, "gRPC connection ended");
    }
}

/// The peer of the connection a request came on.
#[derive(Clone, Copy, Debug)]
struct PeerAddr(SocketAddr);

/// The service: what every RPC shares.
#[derive(Clone, Debug)]
pub(crate) struct Endpoint {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    state: Arc<BrokerState>,
    broker: LocalBroker,
    /// The port clients reach this endpoint on (the routes point back at it).
    port: u16,
    sessions: session::Sessions,
    transactions: producer::Transactions,
    /// Round robin over a topic's write queues for sends without a message group.
    next_queue: std::sync::atomic::AtomicUsize,
}

impl Endpoint {
    fn new(state: Arc<BrokerState>, broker: LocalBroker, port: u16) -> Endpoint {
        Endpoint {
            inner: Arc::new(Inner {
                state,
                broker,
                port,
                sessions: session::Sessions::default(),
                transactions: producer::Transactions::default(),
                next_queue: std::sync::atomic::AtomicUsize::new(0),
            }),
        }
    }
}

/// Who called: the client id and language of the metadata, and the connection its remoting
/// requests come on.
#[derive(Clone, Debug)]
struct Caller {
    client_id: String,
    language: String,
    connection: ConnectionInfo,
}

impl Inner {
    /// The caller of `request`: `x-mq-client-id` (the peer's address when absent: lenient,
    /// where the proxy refuses), `x-mq-language` as sent (any text).
    fn caller<T>(&self, request: &tonic::Request<T>) -> Caller {
        let peer = request
            .extensions()
            .get::<PeerAddr>()
            .map_or(SocketAddr::from(([0, 0, 0, 0], 0)), |peer| peer.0);
        let metadata = request.metadata();
        let text = |key: &str| {
            metadata
                .get(key)
                .and_then(|value| value.to_str().ok())
                .map(str::to_owned)
        };
        let client_id = text("x-mq-client-id").unwrap_or_else(|| peer.to_string());
        let language = text("x-mq-language").unwrap_or_else(|| "JAVA".to_owned());
        let number = self.sessions.number_of(&client_id);
        Caller {
            connection: self.broker.connection(number, peer),
            client_id,
            language,
        }
    }

    /// Runs `request` on the caller's shard.
    async fn call(
        &self,
        caller: &Caller,
        request: RemotingCommand,
    ) -> Result<RemotingCommand, proto::Status> {
        self.broker
            .call(caller.connection, request)
            .await
            .map_err(|error| status(Code::InternalServerError, error.to_string()))
    }
}

/// A response `Status`.
fn status(code: Code, message: impl Into<String>) -> proto::Status {
    proto::Status {
        code: code as i32,
        message: message.into(),
    }
}

/// `Status{OK, "OK"}`, as the proxy writes it.
fn ok() -> proto::Status {
    status(Code::Ok, "OK")
}

/// The status of a response of entries (`convertToSendMessageResponse`): the entries' one
/// code, MULTIPLE_RESULTS when they differ, `none` without entries.
fn overall<'a>(
    statuses: impl Iterator<Item = Option<&'a proto::Status>>,
    none: proto::Status,
) -> proto::Status {
    let mut codes: Vec<i32> = statuses
        .map(|s| s.map_or(0, |status| status.code))
        .collect();
    codes.sort_unstable();
    codes.dedup();
    match codes.as_slice() {
        [] => none,
        [code] => {
            let code = Code::try_from(*code).unwrap_or(Code::InternalServerError);
            status(code, code.as_str_name())
        }
        _ => status(Code::MultipleResults, "MULTIPLE_RESULTS"),
    }
}

/// A broker response that is not SUCCESS as the proxy reports it (`ResponseBuilder`'s
/// table; anything else is INTERNAL_SERVER_ERROR with the broker's remark).
fn broker_error(response: &RemotingCommand) -> proto::Status {
    let code = match response.response_code() {
        ResponseCode::SUCCESS => Code::Ok,
        ResponseCode::SYSTEM_BUSY => Code::TooManyRequests,
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED => Code::NotImplemented,
        ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST => Code::ConsumerGroupNotFound,
        ResponseCode::TOPIC_NOT_EXIST => Code::TopicNotFound,
        _ => Code::InternalServerError,
    };
    let remark = response.remark.clone().unwrap_or_default();
    let message = if remark.is_empty() {
        format!("CODE: {}  DESC: null", response.code)
    } else {
        format!("CODE: {}  DESC: {remark}", response.code)
    };
    status(code, message)
}

/// The time the client gave the call (its `grpc-timeout` header: digits and a unit of
/// `H`, `M`, `S`, `m`, `u` or `n`), when it gave one.
fn time_left<T>(request: &tonic::Request<T>) -> Option<Duration> {
    let text = request.metadata().get("grpc-timeout")?.to_str().ok()?;
    let split = text.len().checked_sub(1)?;
    let (digits, unit) = text.split_at(split);
    let value: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(value.saturating_mul(3600)),
        "M" => Duration::from_secs(value.saturating_mul(60)),
        "S" => Duration::from_secs(value),
        "m" => Duration::from_millis(value),
        "u" => Duration::from_micros(value),
        "n" => Duration::from_nanos(value),
        _ => return None,
    })
}

/// Why a topic name is refused (`GrpcValidator.validateTopic`): the client's name rules,
/// then no system topic.
fn topic_problem(state: &BrokerState, topic: &str) -> Option<proto::Status> {
    if let Some(problem) = crate::protocol::names::topic_name_problem(topic) {
        return Some(status(Code::IllegalTopic, problem));
    }
    if state.is_system_topic(topic) {
        return Some(status(Code::IllegalTopic, "cannot access system topic"));
    }
    None
}

/// The config of the topic a request names, or the proxy's refusal: a bad or system name
/// (ILLEGAL_TOPIC), or no such topic (TOPIC_NOT_FOUND, as the proxy turns the name
/// server's TOPIC_NOT_EXIST).
fn existing_topic(
    state: &BrokerState,
    topic: Option<&proto::Resource>,
) -> Result<crate::protocol::topic::TopicConfig, proto::Status> {
    let name = name_of(topic);
    if let Some(problem) = topic_problem(state, name) {
        return Err(problem);
    }
    topic_config(state, name)
}

/// The config of a topic whose name is already checked, or TOPIC_NOT_FOUND.
fn topic_config(
    state: &BrokerState,
    name: &str,
) -> Result<crate::protocol::topic::TopicConfig, proto::Status> {
    state.topic(name).ok_or_else(|| {
        status(
            Code::TopicNotFound,
            format!("No topic route info in name server for the topic: {name}"),
        )
    })
}

/// Why a consumer group name is refused (`GrpcValidator.validateConsumerGroup`): the
/// client's name rules, then no system group.
fn group_problem(group: &str) -> Option<proto::Status> {
    use crate::protocol::names::{group_name_problem, is_system_group};
    let problem = group_name_problem(group)
        .or_else(|| is_system_group(group).then(|| "cannot use system consumer group".to_owned()));
    problem.map(|problem| status(Code::IllegalConsumerGroup, problem))
}

/// The name of an optional resource (empty when absent).
fn name_of(resource: Option<&proto::Resource>) -> &str {
    resource.map_or("", |resource| resource.name.as_str())
}

#[tonic::async_trait]
impl MessagingService for Endpoint {
    async fn query_route(
        &self,
        request: tonic::Request<proto::QueryRouteRequest>,
    ) -> Result<tonic::Response<proto::QueryRouteResponse>, tonic::Status> {
        Ok(tonic::Response::new(route::query_route(
            &self.inner,
            request.get_ref(),
        )))
    }

    async fn heartbeat(
        &self,
        request: tonic::Request<proto::HeartbeatRequest>,
    ) -> Result<tonic::Response<proto::HeartbeatResponse>, tonic::Status> {
        let caller = self.inner.caller(&request);
        let answer = session::heartbeat(&self.inner, &caller, request.get_ref()).await;
        Ok(tonic::Response::new(answer))
    }

    async fn send_message(
        &self,
        request: tonic::Request<proto::SendMessageRequest>,
    ) -> Result<tonic::Response<proto::SendMessageResponse>, tonic::Status> {
        let caller = self.inner.caller(&request);
        let answer = producer::send_message(&self.inner, &caller, request.into_inner()).await;
        Ok(tonic::Response::new(answer))
    }

    async fn query_assignment(
        &self,
        request: tonic::Request<proto::QueryAssignmentRequest>,
    ) -> Result<tonic::Response<proto::QueryAssignmentResponse>, tonic::Status> {
        Ok(tonic::Response::new(route::query_assignment(
            &self.inner,
            request.get_ref(),
        )))
    }

    type ReceiveMessageStream = consumer::ReceiveStream;

    async fn receive_message(
        &self,
        request: tonic::Request<proto::ReceiveMessageRequest>,
    ) -> Result<tonic::Response<Self::ReceiveMessageStream>, tonic::Status> {
        let caller = self.inner.caller(&request);
        let deadline = time_left(&request);
        let stream = consumer::receive_message(&self.inner, caller, request.into_inner(), deadline);
        Ok(tonic::Response::new(stream))
    }

    async fn ack_message(
        &self,
        request: tonic::Request<proto::AckMessageRequest>,
    ) -> Result<tonic::Response<proto::AckMessageResponse>, tonic::Status> {
        let caller = self.inner.caller(&request);
        let answer = consumer::ack_message(&self.inner, &caller, request.get_ref()).await;
        Ok(tonic::Response::new(answer))
    }

    async fn forward_message_to_dead_letter_queue(
        &self,
        request: tonic::Request<proto::ForwardMessageToDeadLetterQueueRequest>,
    ) -> Result<tonic::Response<proto::ForwardMessageToDeadLetterQueueResponse>, tonic::Status>
    {
        let caller = self.inner.caller(&request);
        let answer = consumer::forward_to_dlq(&self.inner, &caller, request.get_ref()).await;
        Ok(tonic::Response::new(answer))
    }

    async fn end_transaction(
        &self,
        request: tonic::Request<proto::EndTransactionRequest>,
    ) -> Result<tonic::Response<proto::EndTransactionResponse>, tonic::Status> {
        let caller = self.inner.caller(&request);
        let answer = producer::end_transaction(&self.inner, &caller, request.get_ref()).await;
        Ok(tonic::Response::new(answer))
    }

    type TelemetryStream = session::TelemetryStream;

    async fn telemetry(
        &self,
        request: tonic::Request<tonic::Streaming<proto::TelemetryCommand>>,
    ) -> Result<tonic::Response<Self::TelemetryStream>, tonic::Status> {
        let caller = self.inner.caller(&request);
        let stream = session::telemetry(&self.inner, caller, request.into_inner());
        Ok(tonic::Response::new(stream))
    }

    async fn notify_client_termination(
        &self,
        request: tonic::Request<proto::NotifyClientTerminationRequest>,
    ) -> Result<tonic::Response<proto::NotifyClientTerminationResponse>, tonic::Status> {
        let caller = self.inner.caller(&request);
        let answer = session::notify_termination(&self.inner, &caller, request.get_ref()).await;
        Ok(tonic::Response::new(answer))
    }

    async fn change_invisible_duration(
        &self,
        request: tonic::Request<proto::ChangeInvisibleDurationRequest>,
    ) -> Result<tonic::Response<proto::ChangeInvisibleDurationResponse>, tonic::Status> {
        let caller = self.inner.caller(&request);
        let answer = consumer::change_invisible(&self.inner, &caller, request.get_ref()).await;
        Ok(tonic::Response::new(answer))
    }

    async fn recall_message(
        &self,
        request: tonic::Request<proto::RecallMessageRequest>,
    ) -> Result<tonic::Response<proto::RecallMessageResponse>, tonic::Status> {
        let caller = self.inner.caller(&request);
        let answer = producer::recall_message(&self.inner, &caller, request.get_ref()).await;
        Ok(tonic::Response::new(answer))
    }
}
