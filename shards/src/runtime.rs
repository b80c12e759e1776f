//! The runtime: one thread with one glommio `LocalExecutor` per shard, started together.
//!
//! Start-up happens in two phases so that a failure leaves nothing half-running:
//!
//! 1. Every shard thread (named `<prefix>-NN`) builds its executor and reports success or the
//!    glommio error to the spawning thread.
//! 2. Only if all succeeded does the spawner let them run; each then creates its task queues,
//!    connects its mesh channels (which completes once every peer has connected too), and runs
//!    the caller's shard function on its foreground queue.
//!
//! A panic on any shard thread aborts the process: the state that shard owned would otherwise
//! have no owner, and other shards would wait for its replies forever.

use std::any::Any;
use std::fmt;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use glommio::LocalExecutorBuilder;

use crate::mesh::{build_mesh, Mesh, MeshEnds};
use crate::placement::{Placement, RoleSet, ShardSpec};
use crate::shard_id::ShardId;
use crate::shutdown::Shutdown;
use crate::task_queues::TaskQueues;
use crate::testing::IO_URING_REMEDY;

/// Everything one shard's function gets: who it is, what it does, and how to reach the others.
pub struct ShardContext<M: Send + 'static> {
    /// This shard's id.
    pub id: ShardId,
    /// This shard's roles.
    pub roles: RoleSet,
    /// The whole placement, shared by all shards.
    pub placement: Arc<Placement>,
    /// This shard's handle on the mesh.
    pub mesh: Mesh<M>,
    /// This shard's task queues.
    pub task_queues: TaskQueues,
    /// The process-wide stop signal; the shard function should return once it fires.
    pub shutdown: Shutdown,
}

/// How to start the shards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeConfig {
    /// Messages each mesh channel holds before senders wait; rounded up to a power of two.
    pub mesh_capacity: usize,
    /// Pin each shard's executor to its placement CPU (shards with `*` stay unpinned).
    pub pin_to_cpus: bool,
    /// Thread names are `<name_prefix>-NN`.
    pub name_prefix: String,
}

/// Why the shards could not run.
#[derive(Debug, thiserror::Error)]
pub enum ShardError {
    /// glommio could not create a shard's executor.
    #[error(
        "cannot start the executor for {shard}: {message}; {IO_URING_REMEDY}; \
         if CPU pinning is on: check that every CPU in the shard placement exists"
    )]
    ExecutorBuild {
        /// The shard whose executor failed.
        shard: ShardId,
        /// glommio's error message.
        message: String,
    },
    /// The operating system refused a shard thread.
    #[error("cannot start the thread for {shard}: {error}; run fewer shards or raise ulimit -u")]
    ThreadSpawn {
        /// The shard whose thread failed.
        shard: ShardId,
        /// The error from `std::thread::Builder::spawn`.
        error: std::io::Error,
    },
    /// A shard thread panicked outside the part of it that aborts on panic.
    #[error("{shard} panicked while starting or stopping its executor; see the message above")]
    Panicked {
        /// The shard that panicked.
        shard: ShardId,
    },
}

/// Shards started by [`spawn_shards`], running on their own threads.
///
/// Dropping the handle without [`ShardsHandle::join`] leaves the shards running, detached.
#[derive(Debug)]
#[must_use = "join the shards, or they run detached"]
pub struct ShardsHandle<T: Send + 'static> {
    /// The stop signal the shards watch; trigger it to ask them to return.
    pub shutdown: Shutdown,
    threads: Vec<(ShardId, JoinHandle<Option<T>>)>,
}

impl<M: Send + 'static> fmt::Debug for ShardContext<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShardContext")
            .field("id", &self.id)
            .field("roles", &self.roles)
            .field("placement", &self.placement.to_string())
            .field("mesh", &self.mesh)
            .finish_non_exhaustive()
    }
}

impl Default for RuntimeConfig {
    fn default() -> RuntimeConfig {
        RuntimeConfig {
            mesh_capacity: 1024,
            pin_to_cpus: false,
            name_prefix: "shard".to_owned(),
        }
    }
}

impl<T: Send + 'static> ShardsHandle<T> {
    /// How many shards run.
    pub fn len(&self) -> usize {
        self.threads.len()
    }

    /// Always false: there is at least one shard.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// Waits for every shard function to return and gives their outputs in shard order.
    ///
    /// # Errors
    ///
    /// [`ShardError::Panicked`] if a shard thread died without an output; panics inside a
    /// shard's executor abort the process instead.
    pub fn join(self) -> Result<Vec<T>, ShardError> {
        let mut outputs = Vec::with_capacity(self.threads.len());
        let mut first_error = None;
        for (shard, thread) in self.threads {
            match thread.join() {
                Ok(Some(output)) => outputs.push(output),
                Ok(None) | Err(_) => {
                    first_error.get_or_insert(ShardError::Panicked { shard });
                }
            }
        }
        match first_error {
            Some(error) => Err(error),
            None => Ok(outputs),
        }
    }
}

/// Runs `f` once per shard of `placement`, each on its own executor thread, and returns the
/// outputs in shard order once every shard returned.
///
/// Threads are named `<config.name_prefix>-NN` and pinned to their placement CPU when
/// `config.pin_to_cpus` is set. Each shard runs `f(ctx)` on its foreground task queue; `f`
/// should return soon after `ctx.shutdown.wait()` completes, since nothing cancels it.
///
/// # Errors
///
/// [`ShardError::ExecutorBuild`] or [`ShardError::ThreadSpawn`] if any shard cannot start (then
/// none runs), [`ShardError::Panicked`] as in [`ShardsHandle::join`].
///
/// # Panics
///
/// A panic inside any shard is logged with `tracing::error!` and aborts the process.
pub fn run_shards<M, T, F, Fut>(
    placement: Placement,
    config: RuntimeConfig,
    shutdown: Shutdown,
    f: F,
) -> Result<Vec<T>, ShardError>
where
    M: Send + 'static,
    T: Send + 'static,
    F: Fn(ShardContext<M>) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = T> + 'static,
{
    spawn_shards(placement, config, shutdown, f)?.join()
}

/// Starts the shards like [`run_shards`] but returns once every executor is built, leaving
/// them running; join them with [`ShardsHandle::join`].
///
/// # Errors
///
/// [`ShardError::ExecutorBuild`] or [`ShardError::ThreadSpawn`] if any shard cannot start; the
/// shards that could are stopped before their function runs.
pub fn spawn_shards<M, T, F, Fut>(
    placement: Placement,
    config: RuntimeConfig,
    shutdown: Shutdown,
    f: F,
) -> Result<ShardsHandle<T>, ShardError>
where
    M: Send + 'static,
    T: Send + 'static,
    F: Fn(ShardContext<M>) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = T> + 'static,
{
    let placement = Arc::new(placement);
    let mesh_ends = build_mesh::<M>(placement.len(), config.mesh_capacity);
    let (report_tx, report_rx) = mpsc::channel();
    let mut starts = Vec::with_capacity(placement.len());
    let mut threads = Vec::with_capacity(placement.len());
    for (spec, mesh_ends) in placement.shards().iter().zip(mesh_ends) {
        let (start_tx, start_rx) = mpsc::sync_channel(1);
        let name = format!("{}-{:02}", config.name_prefix, spec.id.0);
        let shard = ShardThread {
            spec: spec.clone(),
            executor_placement: executor_placement(spec, &config),
            name: name.clone(),
            placement: Arc::clone(&placement),
            mesh_ends,
            shutdown: shutdown.clone(),
            f: f.clone(),
            report: report_tx.clone(),
            start: start_rx,
        };
        match std::thread::Builder::new()
            .name(name)
            .spawn(move || shard.run())
        {
            Ok(thread) => {
                threads.push((spec.id, thread));
                starts.push(start_tx);
            }
            Err(error) => {
                // Dropping the start senders tells the shards already spawned to exit.
                drop(starts);
                join_unstarted(threads);
                return Err(ShardError::ThreadSpawn {
                    shard: spec.id,
                    error,
                });
            }
        }
    }
    drop(report_tx);

    let mut failure = None;
    for _ in 0..threads.len() {
        match report_rx.recv() {
            Ok(ShardReport {
                shard,
                result: Err(message),
            }) => {
                failure.get_or_insert(ShardError::ExecutorBuild { shard, message });
            }
            Ok(ShardReport { result: Ok(()), .. }) => {}
            // Every shard thread reports before it can exit, and panics abort.
            Err(mpsc::RecvError) => unreachable!("a shard thread exited without reporting"),
        }
    }
    if let Some(error) = failure {
        drop(starts);
        join_unstarted(threads);
        return Err(error);
    }
    for start in starts {
        start
            .send(true)
            .expect("invariant: every built shard waits for its start signal");
    }
    Ok(ShardsHandle { shutdown, threads })
}

/// What one shard thread needs; moved onto that thread.
struct ShardThread<M: Send + 'static, F> {
    spec: ShardSpec,
    executor_placement: glommio::Placement,
    name: String,
    placement: Arc<Placement>,
    mesh_ends: MeshEnds<M>,
    shutdown: Shutdown,
    f: F,
    report: Sender<ShardReport>,
    start: Receiver<bool>,
}

/// A shard thread's answer to "is your executor built?".
struct ShardReport {
    shard: ShardId,
    result: Result<(), String>,
}

impl<M, T, F, Fut> ShardThread<M, F>
where
    M: Send + 'static,
    T: Send + 'static,
    F: Fn(ShardContext<M>) -> Fut + Send + Sync + Clone + 'static,
    Fut: Future<Output = T> + 'static,
{
    /// The thread body: `None` if the shard was told not to start.
    fn run(self) -> Option<T> {
        let shard = self.spec.id;
        match catch_unwind(AssertUnwindSafe(move || self.run_executor())) {
            Ok(output) => output,
            Err(payload) => abort_after_panic(shard, payload.as_ref()),
        }
    }

    fn run_executor(self) -> Option<T> {
        let shard = self.spec.id;
        let pinned_cpu = match self.executor_placement {
            glommio::Placement::Fixed(cpu) => Some(cpu),
            _ => None,
        };
        let built = shard_executor(self.executor_placement)
            .name(&self.name)
            .make();
        let (executor, result) = match built {
            Ok(executor) => (Some(executor), Ok(())),
            Err(error) => (None, Err(error.to_string())),
        };
        if self.report.send(ShardReport { shard, result }).is_err() {
            return None;
        }
        let executor = executor?;
        // A closed start channel means another shard failed, so this one must not run.
        if self.start.recv() != Ok(true) {
            return None;
        }
        let ShardThread {
            spec,
            placement,
            mesh_ends,
            shutdown,
            f,
            ..
        } = self;
        if let Some(cpu) = pinned_cpu {
            // Blocking I/O (a direct write into new extents, an O_DSYNC write) runs on io-wq
            // workers that would inherit the pin and take the shard's own core: they go to
            // the other cores. The CommitLog bench put 1.19x more through with them there.
            if let Err(error) = ferromq_uring::workers::keep_io_workers_off(cpu) {
                tracing::warn!(%shard, %error, "io-wq workers stay on the shard's CPU");
            }
        }
        Some(executor.run(async move {
            let task_queues = TaskQueues::create();
            let foreground = task_queues.foreground;
            let mesh = mesh_ends.connect().await;
            let ctx = ShardContext {
                id: spec.id,
                roles: spec.roles,
                placement,
                mesh,
                task_queues,
                shutdown,
            };
            glommio::spawn_local_into(f(ctx), foreground)
                .expect("invariant: the foreground queue was created on this executor")
                .await
        }))
    }
}

/// Threads in each shard's blocking pool (glommio's `spawn_blocking`), on the shard's own
/// CPU when it is pinned; they mostly wait in the kernel. Two, so that one long call does not
/// hold up the next: on the dispatch shard the periodic IndexFile sync (5-10 ms at 90k
/// messages/s, tens of ms on a busy disk) held up the creation of a queue's next file, and
/// with it every queue's dispatch.
pub const BLOCKING_THREADS: usize = 2;

/// A builder of a shard's executor at `placement`, with [`BLOCKING_THREADS`] blocking threads.
#[must_use]
pub fn shard_executor(placement: glommio::Placement) -> LocalExecutorBuilder {
    let pool = match &placement {
        glommio::Placement::Fixed(cpu) => glommio::CpuSet::online().ok().map(|online| {
            glommio::PoolPlacement::Fenced(
                BLOCKING_THREADS,
                online.filter(|location| location.cpu == *cpu),
            )
        }),
        _ => Some(glommio::PoolPlacement::Unbound(BLOCKING_THREADS)),
    };
    let builder = LocalExecutorBuilder::new(placement);
    match pool {
        Some(pool) => builder.blocking_thread_pool_placement(pool),
        // Without the CPU list, glommio's own pool: one thread on the shard's CPU.
        None => builder,
    }
}

fn executor_placement(spec: &ShardSpec, config: &RuntimeConfig) -> glommio::Placement {
    match spec.cpu {
        Some(cpu) if config.pin_to_cpus => glommio::Placement::Fixed(cpu),
        _ => glommio::Placement::Unbound,
    }
}

/// Joins shard threads that were never told to start; they exit without running anything.
fn join_unstarted<T>(threads: Vec<(ShardId, JoinHandle<Option<T>>)>) {
    for (_, thread) in threads {
        // An unstarted shard only builds and drops an executor, and panics abort, so there is
        // no outcome worth reporting.
        drop(thread.join());
    }
}

fn abort_after_panic(shard: ShardId, payload: &(dyn Any + Send)) -> ! {
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(non-string panic payload)");
    tracing::error!(
        %shard,
        panic = message,
        "shard panicked; aborting, because the state it owns has no other owner"
    );
    std::process::abort()
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::placement::Role;

    fn unpinned_three() -> Placement {
        Placement::parse("*:control,net;*:writer,net;*:dispatch,net").expect("valid placement")
    }

    #[test]
    fn run_shards_returns_outputs_in_shard_order() {
        let outputs = run_shards::<(), _, _, _>(
            unpinned_three(),
            RuntimeConfig::default(),
            Shutdown::new(),
            |ctx| async move { (ctx.id, ctx.roles, ctx.placement.len()) },
        )
        .expect("shards ran");
        let net = RoleSet::from(Role::Net);
        assert_eq!(
            outputs,
            [
                (ShardId(0), net.with(Role::Control), 3),
                (ShardId(1), net.with(Role::Writer), 3),
                (ShardId(2), net.with(Role::Dispatch), 3),
            ]
        );
    }

    #[test]
    fn run_shards_names_threads_with_prefix() {
        let config = RuntimeConfig {
            name_prefix: "broker".to_owned(),
            ..RuntimeConfig::default()
        };
        let names =
            run_shards::<(), _, _, _>(unpinned_three(), config, Shutdown::new(), |_| async {
                std::thread::current().name().map(str::to_owned)
            })
            .expect("shards ran");
        let expected: Vec<_> = ["broker-00", "broker-01", "broker-02"]
            .map(|name| Some(name.to_owned()))
            .into();
        assert_eq!(names, expected);
    }

    #[test]
    fn run_shards_default_names_are_shard_nn() {
        let names = run_shards::<(), _, _, _>(
            Placement::parse("*:writer,dispatch,net,control").expect("valid"),
            RuntimeConfig::default(),
            Shutdown::new(),
            |_| async { std::thread::current().name().map(str::to_owned) },
        )
        .expect("shards ran");
        assert_eq!(names, [Some("shard-00".to_owned())]);
    }

    #[test]
    fn run_shards_runs_function_on_foreground_queue() {
        let on_foreground =
            run_shards::<(), _, _, _>(
                unpinned_three(),
                RuntimeConfig::default(),
                Shutdown::new(),
                |ctx| async move {
                    glommio::executor().current_task_queue() == ctx.task_queues.foreground
                },
            )
            .expect("shards ran");
        assert_eq!(on_foreground, [true; 3]);
    }

    #[test]
    fn run_shards_pinned_runs_on_its_cpu() {
        let config = RuntimeConfig {
            pin_to_cpus: true,
            ..RuntimeConfig::default()
        };
        let placement = Placement::parse("0:writer,dispatch,net,control").expect("valid");
        let allowed = run_shards::<(), _, _, _>(placement, config, Shutdown::new(), |_| async {
            let status = std::fs::read_to_string("/proc/thread-self/status").expect("status");
            status
                .lines()
                .find_map(|line| line.strip_prefix("Cpus_allowed_list:"))
                .map(|cpus| cpus.trim().to_owned())
        })
        .expect("shards ran");
        assert_eq!(allowed, [Some("0".to_owned())]);
    }

    #[test]
    fn a_pinned_shard_s_blocking_io_runs_off_its_cpu() {
        if std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) < 2 {
            eprintln!("skipped: needs two CPUs");
            return;
        }
        let config = RuntimeConfig {
            pin_to_cpus: true,
            ..RuntimeConfig::default()
        };
        let placement = Placement::parse("0:writer,dispatch,net,control").expect("valid");
        let workers = run_shards::<(), _, _, _>(placement, config, Shutdown::new(), |_| async {
            ferromq_uring::workers::start_io_worker().expect("io-wq no-op");
            ferromq_uring::workers::io_worker_cpus().expect("/proc/self/task")
        })
        .expect("shards ran");
        assert!(!workers[0].is_empty(), "no io-wq worker started");
        assert!(workers[0].iter().all(|cpus| !cpus.is_set(0)), "{workers:?}");
    }

    #[test]
    fn run_shards_pinned_to_missing_cpu_is_executor_build_error() {
        let ran = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&ran);
        let config = RuntimeConfig {
            pin_to_cpus: true,
            ..RuntimeConfig::default()
        };
        let placement =
            Placement::parse("0:writer,net,control;4000:dispatch,net").expect("valid text");
        let error = run_shards::<(), _, _, _>(placement, config, Shutdown::new(), move |_| {
            let counter = Arc::clone(&counter);
            async move {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        })
        .expect_err("cpu 4000 does not exist");
        assert!(
            matches!(
                error,
                ShardError::ExecutorBuild {
                    shard: ShardId(1),
                    ..
                }
            ),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with("cannot start the executor for shard-01: "),
            "{message}"
        );
        assert!(message.contains("RLIMIT_MEMLOCK"), "{message}");
        assert!(
            message.contains("every CPU in the shard placement exists"),
            "{message}"
        );
        assert_eq!(
            ran.load(Ordering::SeqCst),
            0,
            "no shard function runs after a failed start"
        );
    }

    #[test]
    fn spawn_shards_handle_reports_shard_count() {
        let handle = spawn_shards::<(), _, _, _>(
            unpinned_three(),
            RuntimeConfig::default(),
            Shutdown::new(),
            |ctx| async move { ctx.id },
        )
        .expect("shards started");
        assert_eq!(handle.len(), 3);
        assert!(!handle.is_empty());
        assert_eq!(
            handle.join().expect("joined"),
            [ShardId(0), ShardId(1), ShardId(2)]
        );
    }

    #[test]
    fn runtime_config_default_matches_docs() {
        let config = RuntimeConfig::default();
        assert_eq!(config.mesh_capacity, 1024);
        assert!(!config.pin_to_cpus);
        assert_eq!(config.name_prefix, "shard");
    }
}
