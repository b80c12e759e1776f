//! The name server (`NamesrvController` in Java): brokers register, clients look up routes.
//!
//! Shard layout: every net shard accepts connections on the shared port (`SO_REUSEPORT`); the
//! control shard owns the [`NamesrvProcessor`] — route tables and KV store — and is the only
//! shard that mutates them. A net shard forwards each request over the mesh to the owner and
//! writes back the reply; a closed connection is reported the same way so the owner can drop
//! the brokers registered on it. The owner also runs the liveness scan
//! (`scanNotActiveBrokerInterval`) and persists the KV store after each change.
//!
//! Behaviour is described in `reference/namesrv.md`.

pub mod kv_config;
pub mod metrics;
pub mod processor;
pub mod route_info;
pub mod route_snapshot;

use crate::config::namesrv::NamesrvConfig;
use crate::metrics::rpc::{RpcKey, RpcStats, NO_RESPONSE};
use crate::remoting::server::{self, ConnectionId, ConnectionInfo, RequestHandler, ServerConfig};
use crate::remoting::{RemotingCommand, RequestCode};
use ferromq_shards::{
    spawn_shards, Mesh, Placement, Role, RoleSet, RuntimeConfig, ShardId, ShardsHandle, Shutdown,
};
use futures::channel::oneshot;
use futures::future::{select, Either};
pub use kv_config::KvConfigManager;
pub use processor::NamesrvProcessor;
use route_snapshot::{RouteSnapshot, SharedRouteSnapshot};
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Messages between the name server's shards.
#[derive(Debug)]
pub enum NamesrvMessage {
    /// A request for the owner to process; the reply goes back on `reply`.
    Request {
        /// Where it came from.
        connection: ConnectionInfo,
        /// The request.
        request: RemotingCommand,
        /// The response, or `None` for none.
        reply: oneshot::Sender<Option<RemotingCommand>>,
    },
    /// A connection closed.
    ConnectionClosed {
        /// Which one.
        connection: ConnectionId,
    },
}

/// Why the name server did not start.
#[derive(Debug, thiserror::Error)]
pub enum NamesrvError {
    /// The KV file is unreadable.
    #[error("{0}")]
    KvConfig(String),
    /// The shards did not start.
    #[error(transparent)]
    Shards(#[from] ferromq_shards::ShardError),
    /// Listening failed.
    #[error("{0}")]
    Listen(String),
    /// The TLS settings cannot be used.
    #[error("TLS: {0}")]
    Tls(String),
}

/// A running name server.
#[derive(Debug)]
pub struct NamesrvHandle {
    /// The address it listens on (the real port when 0 was asked for).
    pub addr: SocketAddr,
    shards: ShardsHandle<()>,
    metrics: Option<crate::metrics::exporter::Exporter>,
}

impl NamesrvHandle {
    /// The stop signal; trigger it to shut down.
    #[must_use]
    pub fn shutdown_signal(&self) -> Shutdown {
        self.shards.shutdown.clone()
    }

    /// The metrics endpoint's address, when `metricsExporterType=PROM`.
    #[must_use]
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|exporter| exporter.addr)
    }

    /// Stops the name server and waits for it.
    ///
    /// # Errors
    /// A shard that died.
    pub fn shutdown(self) -> Result<(), NamesrvError> {
        self.shards.shutdown.trigger();
        self.wait()
    }

    /// Waits until the name server has stopped (after its shutdown signal).
    ///
    /// # Errors
    /// A shard that died.
    pub fn wait(self) -> Result<(), NamesrvError> {
        let joined = self.shards.join();
        if let Some(metrics) = self.metrics {
            metrics.join();
        }
        joined?;
        Ok(())
    }
}

/// Starts the name server on its own shard threads and returns once it listens.
///
/// # Errors
/// [`NamesrvError`] when the KV file is unreadable, the shards cannot start or the address
/// cannot be bound.
pub fn start(config: NamesrvConfig, shutdown: Shutdown) -> Result<NamesrvHandle, NamesrvError> {
    let kv = KvConfigManager::load(&config.kv_config_path).map_err(NamesrvError::KvConfig)?;
    config.metrics.check().map_err(NamesrvError::Listen)?;
    let mut tls = config.tls.clone();
    tls.apply_config_file().map_err(NamesrvError::Tls)?;
    let tls = tls.server().map_err(|e| NamesrvError::Tls(e.to_string()))?;
    let mut roles = RoleSet::default();
    roles.insert(Role::Net);
    roles.insert(Role::Control);
    let placement = config
        .shards
        .clone()
        .unwrap_or_else(Placement::detect)
        .only_roles(roles);
    let first_net = placement.owner_of(Role::Net);
    let rpc = Arc::new(RpcStats::new(placement.len()));
    let kv = Arc::new(Mutex::new(Some(kv)));
    let bound: Arc<server::BoundAddr> = Arc::new(OnceLock::new());
    let config = Arc::new(config);
    let shard_bound = bound.clone();
    let snapshot = RouteSnapshot::shared();
    let metrics_snapshot = snapshot.clone();
    let metrics_config = config.metrics.clone();
    let shard_rpc = Arc::clone(&rpc);
    let shards = spawn_shards(
        placement,
        RuntimeConfig::default(),
        shutdown.clone(),
        move |ctx: ferromq_shards::ShardContext<NamesrvMessage>| {
            let config = config.clone();
            let kv = kv.clone();
            let bound = shard_bound.clone();
            let snapshot = snapshot.clone();
            let tls = tls.clone();
            let rpc = Arc::clone(&shard_rpc);
            async move {
                let owner = ctx.placement.owner_of(Role::Control);
                let mesh = Rc::new(ctx.mesh);
                let mut tasks = Vec::new();
                if ctx.roles.contains(Role::Control) {
                    let kv = kv
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .take()
                        .expect("exactly one control shard takes the KV store");
                    let processor = Rc::new(RefCell::new(NamesrvProcessor::new(
                        &config,
                        kv,
                        snapshot.clone(),
                    )));
                    tasks.push(ctx.task_queues.spawn_background(run_housekeeping(
                        processor.clone(),
                        config.scan_not_active_broker_interval,
                        ctx.shutdown.clone(),
                    )));
                    tasks.push(ctx.task_queues.spawn_foreground(run_pump(
                        processor,
                        mesh.clone(),
                        ctx.shutdown.clone(),
                    )));
                }
                if ctx.roles.contains(Role::Net) {
                    let first = ctx.id == first_net;
                    let listener =
                        server::bind_shared(ctx.id, first, config.listen_addr(), &bound).await;
                    if let Some(listener) = listener {
                        let handler = Rc::new(NetHandler {
                            mesh: mesh.clone(),
                            owner,
                            snapshot: snapshot.clone(),
                            rpc,
                            shard: ctx.id.index(),
                        });
                        let server_config = ServerConfig {
                            frame_size_max: config.frame_size_max,
                            idle_timeout: config.channel_idle_timeout,
                            connections_max: config.connections_max,
                            tls,
                        };
                        server::serve(
                            ctx.id,
                            listener,
                            handler,
                            server_config,
                            ctx.shutdown.clone(),
                        )
                        .await;
                    } else {
                        ctx.shutdown.trigger();
                    }
                }
                for task in tasks {
                    task.await;
                }
            }
        },
    )?;
    match server::wait_bound(&bound) {
        Ok(addr) => {
            // The endpoint first: once the listening line is out, it answers too.
            let metrics = metrics::start(&metrics_config, addr, rpc, metrics_snapshot, &shards);
            match metrics {
                Ok(metrics) => {
                    tracing::info!(%addr, "name server listening");
                    Ok(NamesrvHandle {
                        addr,
                        shards,
                        metrics,
                    })
                }
                Err(error) => {
                    shards.shutdown.trigger();
                    let _ = shards.join();
                    Err(NamesrvError::Listen(error))
                }
            }
        }
        Err(error) => {
            shards.shutdown.trigger();
            let _ = shards.join();
            Err(NamesrvError::Listen(error))
        }
    }
}

/// Forwards requests from a net shard to the owner of the name server state.
struct NetHandler {
    mesh: Rc<Mesh<NamesrvMessage>>,
    owner: ShardId,
    /// Route lookups are answered here, from the owner's latest published snapshot.
    snapshot: SharedRouteSnapshot,
    /// Request latencies, this shard's slot written here only.
    rpc: Arc<RpcStats>,
    shard: usize,
}

impl NetHandler {
    async fn answer(
        &self,
        connection: ConnectionInfo,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        if request.request_code() == RequestCode::GET_ROUTEINFO_BY_TOPIC {
            return Some(self.snapshot.load().answer(&request));
        }
        let (reply, response) = oneshot::channel();
        let message = NamesrvMessage::Request {
            connection,
            request,
            reply,
        };
        if self.mesh.send_to(self.owner, message).await.is_err() {
            return None;
        }
        response.await.ok().flatten()
    }
}

impl RequestHandler for NetHandler {
    async fn handle(
        &self,
        connection: ConnectionInfo,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        let code = request.code;
        let started = std::time::Instant::now();
        let answer = self.answer(connection, request).await;
        let elapsed_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let key = RpcKey {
            request: code,
            response: answer
                .as_ref()
                .map_or(NO_RESPONSE, |response| response.code),
            long_polling: false,
        };
        self.rpc.record(self.shard, key, elapsed_ms);
        answer
    }

    async fn connection_closed(&self, connection: ConnectionInfo) {
        let message = NamesrvMessage::ConnectionClosed {
            connection: connection.id,
        };
        let _ = self.mesh.send_to(self.owner, message).await;
    }
}

/// The owner's pump: the only place the name server state is mutated.
async fn run_pump(
    processor: Rc<RefCell<NamesrvProcessor>>,
    mesh: Rc<Mesh<NamesrvMessage>>,
    shutdown: Shutdown,
) {
    loop {
        let received = match select(Box::pin(mesh.recv()), shutdown.wait()).await {
            Either::Left((received, _)) => received,
            Either::Right(_) => break,
        };
        let Some((_, message)) = received else { break };
        match message {
            NamesrvMessage::Request {
                connection,
                request,
                reply,
            } => {
                let outcome = processor
                    .borrow_mut()
                    .process(connection.id, &request, now_ms());
                let _ = reply.send(outcome.response);
                if outcome.kv_changed {
                    persist_kv(&processor).await;
                }
            }
            NamesrvMessage::ConnectionClosed { connection } => {
                processor.borrow_mut().on_channel_destroy(connection);
            }
        }
    }
    // Every KV change was persisted when it happened, so nothing is left to write here.
}

/// Drops brokers that stopped registering.
async fn run_housekeeping(
    processor: Rc<RefCell<NamesrvProcessor>>,
    interval: Duration,
    shutdown: Shutdown,
) {
    loop {
        let tick = glommio::timer::sleep(interval);
        if let Either::Right(_) = select(Box::pin(tick), shutdown.wait()).await {
            return;
        }
        // Expired brokers' connections are left to their own idle timeout.
        processor.borrow_mut().scan_not_active_broker(now_ms());
    }
}

async fn persist_kv(processor: &Rc<RefCell<NamesrvProcessor>>) {
    let Some((path, bytes)) = processor.borrow().kv.snapshot() else {
        return;
    };
    let written = crate::config::persist::write_atomically_off_shard(path.clone(), bytes).await;
    if let Err(error) = written {
        tracing::error!(path = %path.display(), %error, "cannot persist KV config");
    }
}

/// Wall-clock milliseconds since the epoch, as Java's `System.currentTimeMillis`.
#[must_use]
pub fn now_ms() -> u64 {
    let since_epoch = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX)
}
