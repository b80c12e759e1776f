//! The broker (`BrokerController` in Java): the store, the request processors on every net
//! shard, name server registration, and the periodic work of a broker.
//!
//! Shard layout (`--shards` / `shards=`; defaults for 1, 2 and many cores from
//! [`Placement::detect`]):
//! - **dispatch** recovers the store ([`recover_store`]), then runs dispatch ("reput");
//! - **writer** runs the CommitLog writer once recovery hands it the valid end;
//! - **net** (every net shard) serves the remoting protocol on the shared port
//!   (`SO_REUSEPORT`) and on the VIP port (`listenPort - 2`), and holds its long-polling
//!   pulls; connections stay where accepted;
//! - **control** registers with the name servers every `registerNameServerPeriod`, persists
//!   consumer offsets, runs retention, expires silent clients and delivers delayed messages
//!   ([`schedule`]).
//!
//! Shared state ([`state::BrokerState`], the store's [`StoreShared`]) is read lock-free on
//! the send and pull paths; the store's parts talk over channels created before the shards
//! start. Shutdown: net shards stop accepting, the writer finishes its puts and stops,
//! dispatch syncs and writes the checkpoint, and the `abort` file goes.

pub mod acl;
pub use ferromq_protocol::batch;
pub mod codes;
pub mod delay;
pub mod filter;
pub mod metrics;
pub mod pop;
pub mod processors;
pub mod reply;
pub mod retry;
pub mod services;
pub mod state;
pub mod stats;
pub mod timer;
pub mod transaction;

pub use services::{ha, ha_slave, long_poll, register, schedule};

use crate::config::broker::{BrokerConfig, BrokerRole};
use crate::metrics::config::ExporterType;
use crate::remoting::server::{self, ServerConfig};
use crate::store::message_store::{
    create_abort_file, recover_store, run_writer, StoreChannels, StoreHandle, StoreLock,
    WriterStart,
};
use crate::store::reput::run_reput;
use crate::store::retention::{run_retention, StatvfsProbe};
use crate::store::shared::StoreShared;
use ferromq_shards::{spawn_shards, Placement, Role, RuntimeConfig, ShardsHandle, Shutdown};
use futures::channel::oneshot;
use state::{run_replica_waits, LocalReplicaWaits};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

pub use state::BrokerState;

/// Why the broker did not start.
#[derive(Debug, thiserror::Error)]
pub enum BrokerError {
    /// The store or a config file cannot be used.
    #[error("{0}")]
    Store(String),
    /// The shards did not start.
    #[error(transparent)]
    Shards(#[from] ferromq_shards::ShardError),
    /// Listening failed.
    #[error("{0}")]
    Listen(String),
}

/// A running broker.
#[derive(Debug)]
pub struct BrokerHandle {
    /// The address it listens on (the real port when 0 was asked for).
    pub addr: SocketAddr,
    shards: ShardsHandle<()>,
    state: Arc<BrokerState>,
    registration: Option<std::thread::JoinHandle<()>>,
    /// The route lookup thread (`None` without name servers).
    routes: Option<std::thread::JoinHandle<()>>,
    /// The controller-mode thread (`None` outside controller mode).
    replicas: Option<std::thread::JoinHandle<()>>,
    metrics: Option<crate::metrics::exporter::Exporter>,
    grpc: Option<crate::grpc::GrpcEndpoint>,
    _lock: StoreLock,
}

impl BrokerHandle {
    /// The stop signal.
    #[must_use]
    pub fn shutdown_signal(&self) -> Shutdown {
        self.shards.shutdown.clone()
    }

    /// The metrics endpoint's address, when `metricsExporterType=PROM`.
    #[must_use]
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics.as_ref().and_then(|exporter| exporter.addr)
    }

    /// The gRPC endpoint's address, when `grpcServerEnable=true`.
    #[must_use]
    pub fn grpc_addr(&self) -> Option<SocketAddr> {
        self.grpc.as_ref().map(|endpoint| endpoint.addr)
    }

    /// The broker's state (topics, groups, offsets, clients).
    #[must_use]
    pub fn state(&self) -> &Arc<BrokerState> {
        &self.state
    }

    /// Stops the broker and waits for it.
    ///
    /// # Errors
    /// A shard that died.
    pub fn shutdown(self) -> Result<(), BrokerError> {
        self.shards.shutdown.trigger();
        self.wait()
    }

    /// Waits until the broker has stopped (after its shutdown signal).
    ///
    /// # Errors
    /// A shard that died.
    pub fn wait(mut self) -> Result<(), BrokerError> {
        let joined = self.shards.join();
        if let Some(registration) = self.registration.take() {
            let _ = registration.join();
        }
        if let Some(routes) = self.routes.take() {
            let _ = routes.join();
        }
        if let Some(replicas) = self.replicas.take() {
            let _ = replicas.join();
        }
        if let Some(metrics) = self.metrics.take() {
            metrics.join();
        }
        if let Some(grpc) = self.grpc.take() {
            grpc.join();
        }
        if let Err(error) = self.state.persist_offsets() {
            tracing::error!(%error, "cannot persist consumer offsets at shutdown");
        }
        joined?;
        Ok(())
    }
}

/// The store's parts, taken by the shards that run them.
struct StoreParts {
    writer: Mutex<Option<WriterParts>>,
    dispatch: Mutex<Option<DispatchParts>>,
}

type WriterParts = (
    futures::channel::mpsc::Receiver<crate::store::flush::PutRequest>,
    futures::channel::mpsc::Sender<crate::store::reput::CommittedBatch>,
    oneshot::Receiver<WriterStart>,
);

type DispatchParts = (
    futures::channel::mpsc::Receiver<crate::store::reput::CommittedBatch>,
    futures::channel::mpsc::Receiver<crate::store::reput::IndexQuery>,
    futures::channel::mpsc::Receiver<crate::store::reput::ReputControl>,
    oneshot::Sender<WriterStart>,
);

fn take<T>(slot: &Mutex<Option<T>>) -> Option<T> {
    slot.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take()
}

/// Starts the broker on its shard threads and returns once it listens.
///
/// # Errors
/// [`BrokerError`] when the store is locked or unreadable, a config file is invalid, the
/// shards cannot start or the port cannot be bound.
pub fn start(config: BrokerConfig, shutdown: Shutdown) -> Result<BrokerHandle, BrokerError> {
    let lock = StoreLock::acquire(&config.store.store_path_root_dir)
        .map_err(|e| BrokerError::Store(e.to_string()))?;
    let placement = config.shards.clone().unwrap_or_else(Placement::detect);
    let state =
        Arc::new(BrokerState::load(config.clone(), placement.len()).map_err(BrokerError::Store)?);
    if let Some(acl) = &state.acl {
        acl::AclRules::watch(acl);
    }
    config.metrics.check().map_err(BrokerError::Listen)?;
    let shared = Arc::new(StoreShared::new(config.store.clone()));
    // In controller mode no put is taken until the controller names this broker master.
    if config.controller_mode.enable {
        shared.set_slave(true);
    }
    let replicas_shared = Arc::clone(&shared);
    let metrics_shared = Arc::clone(&shared);
    let channels = StoreChannels::new(Arc::clone(&shared));
    let handle = channels.handle.clone();
    let (start_tx, start_rx) = oneshot::channel();
    let parts = Arc::new(StoreParts {
        writer: Mutex::new(Some((channels.puts, channels.batches_tx, start_rx))),
        dispatch: Mutex::new(Some((
            channels.batches_rx,
            channels.queries,
            channels.control,
            start_tx,
        ))),
    });
    let first_net = placement.owner_of(Role::Net);
    // Slaves are served off the writer's core when there is a net shard elsewhere.
    let ha_net = placement
        .shards_with(Role::Net)
        .find(|id| {
            placement
                .shard(*id)
                .is_some_and(|spec| !spec.roles.contains(Role::Writer))
        })
        .unwrap_or(first_net);
    // The gRPC endpoint's way into the net shards (each takes its inbox).
    let (local_broker, grpc_inboxes) =
        crate::grpc::bridge::LocalBroker::new(placement.shards_with(Role::Net));
    let ready: Arc<OnceLock<Result<(), String>>> = Arc::new(OnceLock::new());
    let bound: Arc<server::BoundAddr> = Arc::new(OnceLock::new());
    let shard_state = Arc::clone(&state);
    let shard_ready = Arc::clone(&ready);
    let shard_bound = Arc::clone(&bound);
    let shards = spawn_shards(
        placement,
        RuntimeConfig::default(),
        shutdown,
        move |ctx: ferromq_shards::ShardContext<()>| {
            let state = Arc::clone(&shard_state);
            let shared = Arc::clone(&shared);
            let parts = Arc::clone(&parts);
            let ready = Arc::clone(&shard_ready);
            let bound = Arc::clone(&shard_bound);
            let handle = handle.clone();
            let grpc_inbox = grpc_inboxes.take(ctx.id);
            async move {
                let mut tasks = Vec::new();
                if matches!(
                    state.config.metrics.exporter_type,
                    ExporterType::Prom | ExporterType::Log
                ) {
                    tasks.push(ctx.task_queues.spawn_background(metrics::sample_shard(
                        Arc::clone(&state),
                        ctx.id.index(),
                        ctx.shutdown.clone(),
                    )));
                }
                if ctx.roles.contains(Role::Dispatch) {
                    if let Some(dispatch) = take(&parts.dispatch) {
                        let shutdown = ctx.shutdown.clone();
                        tasks.push(ctx.task_queues.spawn_foreground(run_dispatch_role(
                            Arc::clone(&shared),
                            dispatch,
                            Arc::clone(&ready),
                            shutdown,
                        )));
                    }
                }
                if ctx.roles.contains(Role::Writer) {
                    if let Some(writer) = take(&parts.writer) {
                        tasks.push(ctx.task_queues.spawn_foreground(run_writer_role(
                            Arc::clone(&shared),
                            writer,
                            handle.clone(),
                            ctx.shutdown.clone(),
                        )));
                    }
                    // A slave's link to its master runs beside its writer: the bytes it reads
                    // go to the writer, and the writer's answers come back to be reported,
                    // without crossing cores (4.9's HAClient appends on its own thread).
                    // In controller mode any broker may become a slave.
                    let mode = &state.config.controller_mode;
                    if mode.enable || state.config.broker_role == BrokerRole::Slave {
                        let bound = Arc::clone(&bound);
                        tasks.push(ctx.task_queues.spawn_foreground(follow_master(
                            ctx.shutdown.clone(),
                            Arc::clone(&state),
                            handle.clone(),
                            async move { wait_for(&bound).await },
                        )));
                    }
                }
                if ctx.roles.contains(Role::Control) {
                    tasks.push(ctx.task_queues.spawn_background(run_control_role(
                        Arc::clone(&state),
                        handle.clone(),
                        Arc::clone(&ready),
                        ctx.shutdown.clone(),
                    )));
                }
                if ctx.roles.contains(Role::Net) {
                    let store_ready = wait_for(&ready).await;
                    if store_ready.is_ok() {
                        // Its own task: a task that polls a pending accept again and again
                        // piles up wakers in glommio's accept (one per poll), so no accept
                        // loop shares a task with one that wakes often.
                        let ha = (ctx.id == ha_net).then(|| {
                            let bound = Arc::clone(&bound);
                            glommio::spawn_local(serve_ha(
                                ctx.shutdown.clone(),
                                Arc::clone(&state),
                                handle.clone(),
                                async move { wait_for(&bound).await },
                            ))
                        });
                        let first = ctx.id == first_net;
                        serve_net(&ctx, first, &state, &handle, &bound, grpc_inbox).await;
                        if let Some(ha) = ha {
                            ha.await;
                        }
                    } else {
                        let _ = bound.set(Err("the store did not open".to_owned()));
                    }
                }
                for task in tasks {
                    task.await;
                }
            }
        },
    )?;
    let addr = loop {
        if let Some(outcome) = bound.get() {
            break outcome.clone();
        }
        if let Some(Err(error)) = ready.get() {
            break Err(error.clone());
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    let addr = match addr {
        Ok(addr) => addr,
        Err(error) => {
            shards.shutdown.trigger();
            let _ = shards.join();
            return Err(BrokerError::Listen(error));
        }
    };
    // The endpoint first: once the listening line is out, it answers too.
    let metrics = match metrics::start(
        &config,
        addr,
        &state,
        &metrics_shared,
        shards.shutdown.clone(),
    ) {
        Ok(metrics) => metrics,
        Err(error) => {
            shards.shutdown.trigger();
            let _ = shards.join();
            return Err(BrokerError::Listen(error));
        }
    };
    let grpc = match crate::grpc::GrpcEndpoint::start(&state, local_broker, shards.shutdown.clone())
    {
        Ok(grpc) => grpc,
        Err(error) => {
            shards.shutdown.trigger();
            let _ = shards.join();
            let port = config.grpc.server_port;
            return Err(BrokerError::Listen(format!(
                "gRPC endpoint on port {port}: {error}"
            )));
        }
    };
    tracing::info!(%addr, broker = %config.broker_name, "broker listening");
    let registration = register::spawn(Arc::clone(&state), addr, shards.shutdown.clone());
    let routes = services::routes::spawn(&state, shards.shutdown.clone());
    let replicas = services::replicas::spawn(
        Arc::clone(&state),
        replicas_shared,
        addr,
        shards.shutdown.clone(),
    );
    Ok(BrokerHandle {
        addr,
        shards,
        state,
        registration: Some(registration),
        routes,
        replicas,
        metrics,
        grpc,
        _lock: lock,
    })
}

/// Waits for a start-up outcome another shard sets.
async fn wait_for<T: Clone>(cell: &OnceLock<T>) -> T {
    loop {
        if let Some(outcome) = cell.get() {
            return outcome.clone();
        }
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
}

/// Recovers the store, hands the writer its start, runs dispatch, and after the writer
/// stopped removes the `abort` file.
async fn run_dispatch_role(
    shared: Arc<StoreShared>,
    (batches, queries, control, start): DispatchParts,
    ready: Arc<OnceLock<Result<(), String>>>,
    shutdown: Shutdown,
) {
    let recovered = recover_store(Arc::clone(&shared)).await;
    let (reput, writer_start) = match recovered {
        Ok((reput, writer_start, _report)) => (reput, writer_start),
        Err(error) => {
            tracing::error!(%error, "cannot open the store");
            let _ = ready.set(Err(format!("cannot open the store: {error}")));
            shutdown.trigger();
            return;
        }
    };
    if let Err(error) = create_abort_file(&shared.config) {
        let _ = ready.set(Err(error.to_string()));
        shutdown.trigger();
        return;
    }
    let _ = start.send(writer_start);
    let _ = ready.set(Ok(()));
    let _reput = run_reput(reput, batches, queries, control).await;
    let abort = shared.config.root_file("abort");
    if let Err(error) = std::fs::remove_file(&abort) {
        tracing::error!(%error, "cannot remove the abort file");
    }
}

/// Runs the CommitLog writer from the recovered end until shutdown closes the put channel.
async fn run_writer_role(
    shared: Arc<StoreShared>,
    (puts, batches, start): WriterParts,
    handle: StoreHandle,
    shutdown: Shutdown,
) {
    let closer = glommio::spawn_local(async move {
        shutdown.wait().await;
        handle.close();
    })
    .detach();
    let Ok(start) = start.await else {
        return; // Recovery failed; the dispatch shard reported it.
    };
    match run_writer(shared, start, puts, batches).await {
        Ok(stats) => tracing::info!(?stats, "CommitLog writer stopped"),
        Err(error) => tracing::error!(%error, "CommitLog writer failed"),
    }
    drop(closer);
}

/// The control shard's services: housekeeping (consumer offsets, client expiry), statistics,
/// retention, and (once the store is open) delayed delivery and the transaction check.
async fn run_control_role(
    state: Arc<BrokerState>,
    handle: StoreHandle,
    ready: Arc<OnceLock<Result<(), String>>>,
    shutdown: Shutdown,
) {
    let schedule_state = Arc::clone(&state);
    let schedule_handle = handle.clone();
    let schedule_shutdown = shutdown.clone();
    let schedule_ready = Arc::clone(&ready);
    let schedule = glommio::spawn_local(async move {
        // A slave delivers no delayed message and checks no transaction: its master does
        // (4.9 starts both on masters only).
        let master = schedule_state.config.broker_role != BrokerRole::Slave;
        if master && wait_for(&schedule_ready).await.is_ok() {
            schedule::run_schedule(schedule_state, schedule_handle, schedule_shutdown).await;
        }
    })
    .detach();
    let timer_state = Arc::clone(&state);
    let timer_handle = handle.clone();
    let timer_shutdown = shutdown.clone();
    let timer_ready = Arc::clone(&ready);
    let timer = glommio::spawn_local(async move {
        // As Java, the timer delivers on masters only (a slave's tracks its master's
        // progress, not yet done here).
        // Without `timerWheelEnable` there is no timer at all, as Java makes none.
        let master = timer_state.config.broker_role != BrokerRole::Slave
            && timer_state.config.store.timer_wheel_enable;
        if master && wait_for(&timer_ready).await.is_ok() {
            services::timer::run_timer(timer_state, timer_handle, timer_shutdown).await;
        }
    })
    .detach();
    let revive_state = Arc::clone(&state);
    let revive_handle = handle.clone();
    let revive_shutdown = shutdown.clone();
    let revive_ready = Arc::clone(&ready);
    let revive = glommio::spawn_local(async move {
        // POP's checkpoints are timer messages: the revive runs where the timer does.
        let master = revive_state.config.broker_role != BrokerRole::Slave
            && revive_state.config.store.timer_wheel_enable;
        if master && wait_for(&revive_ready).await.is_ok() {
            services::revive::run_revive(revive_state, revive_handle, revive_shutdown).await;
        }
    })
    .detach();
    let transaction_state = Arc::clone(&state);
    let transaction_handle = handle.clone();
    let transaction_shutdown = shutdown.clone();
    let transactions = glommio::spawn_local(async move {
        let master = transaction_state.config.broker_role != BrokerRole::Slave;
        if master && wait_for(&ready).await.is_ok() {
            let check = services::transaction_check::run_check(
                transaction_state,
                transaction_handle,
                transaction_shutdown,
            );
            check.await;
        }
    })
    .detach();
    let retention = glommio::spawn_local(run_retention(
        handle,
        Box::new(StatvfsProbe),
        shutdown.wait(),
    ))
    .detach();
    let sampler =
        glommio::spawn_local(services::sampler::run(Arc::clone(&state), shutdown.clone())).detach();
    services::housekeeping::run(state, shutdown).await;
    let _ = sampler.await;
    let _ = retention.await;
    let _ = schedule.await;
    let _ = timer.await;
    let _ = revive.await;
    let _ = transactions.await;
}

/// On a slave, follows its master once the broker's port is known (and so its
/// registration, which tells the master's HA address, under way), until shutdown: the one
/// the name server names, or in controller mode the one the controller elected.
async fn follow_master(
    shutdown: Shutdown,
    state: Arc<BrokerState>,
    handle: StoreHandle,
    bound: impl std::future::Future<Output = Result<SocketAddr, String>>,
) {
    if bound.await.is_err() {
        return;
    }
    if state.config.controller_mode.enable {
        follow_elected_master(shutdown, state, handle).await;
        return;
    }
    ha_slave::follow(
        handle,
        state.config.ha,
        state.config.ha_master_address.clone(),
        Arc::clone(&state.master),
        shutdown,
    )
    .await;
}

/// In controller mode: follows the master the controller elected while this broker is a
/// slave of it; a new master epoch or a promotion ends the link (the writer then takes
/// puts, or follows the new master).
async fn follow_elected_master(shutdown: Shutdown, state: Arc<BrokerState>, handle: StoreHandle) {
    let tick = Duration::from_millis(20);
    while !shutdown.is_triggered() {
        let epoch = state.role.master_epoch();
        if !state.role.is_slave() || state.master.ha_target(None).is_none() {
            glommio::timer::sleep(tick).await;
            continue;
        }
        let link = Shutdown::new();
        let watch = {
            let (link, state, shutdown) = (link.clone(), Arc::clone(&state), shutdown.clone());
            glommio::spawn_local(async move {
                while !link.is_triggered() {
                    let moved = !state.role.is_slave() || state.role.master_epoch() != epoch;
                    if moved || shutdown.is_triggered() {
                        link.trigger();
                        break;
                    }
                    glommio::timer::sleep(tick).await;
                }
            })
        };
        ha_slave::follow(
            handle.clone(),
            state.config.ha,
            None,
            Arc::clone(&state.master),
            link.clone(),
        )
        .await;
        state.master.set_link(state::LinkState::Down(None));
        if !link.is_triggered() {
            // Replication stopped on its own (the logs diverged): wait for the next epoch.
            while !shutdown.is_triggered() && state.role.master_epoch() == epoch {
                glommio::timer::sleep(tick).await;
            }
            link.trigger();
        }
        watch.await;
    }
}

/// Serves slaves on `listenPort + 1` (4.9's HA port) once the broker's port is known,
/// until shutdown. A port that cannot be bound leaves the broker without slaves of its
/// own, with an error line; a slave still follows its master (`follow_master`).
async fn serve_ha(
    shutdown: Shutdown,
    state: Arc<BrokerState>,
    handle: StoreHandle,
    bound: impl std::future::Future<Output = Result<SocketAddr, String>>,
) {
    let Ok(addr) = bound.await else {
        return;
    };
    let ha_addr = addr
        .port()
        .checked_add(1)
        .map(|port| SocketAddr::new(addr.ip(), port));
    // Not shared (no SO_REUSEPORT): a port another process listens on is an error here.
    match ha_addr.map(|ha| (ha, ferromq_uring::net::bind_exclusive_listener(ha))) {
        Some((ha, Ok(listener))) => {
            // Not "listening addr=": that line names the broker's own port to whoever reads
            // the log.
            tracing::info!(%ha, "slaves are served here");
            ha::serve(
                listener,
                Rc::new(handle.reader()),
                Arc::clone(handle.shared()),
                state.config.ha,
                Arc::clone(&state.slaves),
                shutdown.clone(),
            )
            .await;
        }
        Some((ha, Err(error))) => {
            tracing::error!(%ha, %error, "no HA port: slaves cannot connect");
        }
        None => tracing::error!(%addr, "no HA port after the broker's port"),
    }
}

/// Binds (the first net shard picks the port; the others join it) and serves.
async fn serve_net(
    ctx: &ferromq_shards::ShardContext<()>,
    first: bool,
    state: &Arc<BrokerState>,
    handle: &StoreHandle,
    bound: &server::BoundAddr,
    grpc_inbox: Option<crate::grpc::bridge::ShardInbox>,
) {
    let config = &state.config;
    let listener = server::bind_shared(ctx.id, first, config.listen_addr(), bound).await;
    let Some(listener) = listener else {
        ctx.shutdown.trigger();
        return;
    };
    // The VIP channel (`listenPort - 2`): Java 4.x producers send there by default
    // (`sendMessageWithVIPChannel`). Same requests, same handler.
    let vip = listener.local_addr().ok().and_then(|addr| {
        let port = addr.port().checked_sub(2).filter(|p| *p > 0)?;
        let vip = SocketAddr::new(addr.ip(), port);
        server::bind(vip)
            .map_err(|error| tracing::warn!(shard = %ctx.id, %vip, %error, "no VIP channel"))
            .ok()
    });
    let long_poll = Rc::new(long_poll::LongPoll::default());
    // Java re-checks held pulls every 5 s with long polling, every `shortPollingTimeMills`
    // without it.
    let check_held = if config.long_polling_enable {
        long_poll::CHECK_HELD_INTERVAL
    } else {
        config.short_polling_time
    };
    let notifier = glommio::spawn_local(long_poll::run_notifier(
        Rc::clone(&long_poll),
        handle.shared().subscribe(),
        Arc::clone(handle.shared()),
        check_held,
    ))
    .detach();
    let listen_port = listener
        .local_addr()
        .map_or(config.listen_port, |addr| addr.port());
    state.set_listen_port(listen_port);
    // This shard's SYNC_MASTER puts wait here, answered by its own task as slaves report.
    let replicas = Rc::new(LocalReplicaWaits::new(Arc::clone(&state.slaves)));
    let replica_waits = glommio::spawn_local(run_replica_waits(Rc::clone(&replicas)));
    let handler = Rc::new(processors::BrokerHandler::new(
        Arc::clone(state),
        handle.clone(),
        long_poll,
        replicas,
        listen_port,
        ctx.id.index(),
    ));
    // gRPC calls run through this shard's handler as its connections' requests do.
    let grpc_calls = grpc_inbox.map(|inbox| {
        let calls =
            crate::grpc::bridge::serve_calls(inbox, Rc::clone(&handler), ctx.shutdown.clone());
        glommio::spawn_local(calls)
    });
    let server_config = ServerConfig {
        frame_size_max: config.frame_size_max,
        idle_timeout: config.channel_idle_timeout,
        connections_max: config.connections_max,
        tls: state.server_tls.clone(),
    };
    let main = server::serve(
        ctx.id,
        listener,
        Rc::clone(&handler),
        server_config.clone(),
        ctx.shutdown.clone(),
    );
    // Each accept loop on its own task (see `serve_ha`): joined, every connection accepted
    // on one port would leave a waker behind in the other's pending accept.
    let vip = vip.map(|vip| {
        let serve = server::serve(ctx.id, vip, handler, server_config, ctx.shutdown.clone());
        glommio::spawn_local(serve)
    });
    main.await;
    if let Some(vip) = vip {
        vip.await;
    }
    if let Some(grpc_calls) = grpc_calls {
        grpc_calls.await;
    }
    drop(notifier);
    drop(replica_waits);
}
