//! `ferromq-shards`: the thread-per-core runtime under ferromq, on glommio.
//!
//! This crate knows nothing about `RocketMQ`. It starts shards, gives them roles, connects them
//! with bounded channels, and carries the stop signal. It is generic over the message type, so
//! it never sees a topic.
//!
//! # The shard model
//!
//! A **shard** is one thread running one glommio `LocalExecutor`, optionally pinned to one CPU.
//! Shards are numbered `shard-00`, `shard-01`, ... and the threads carry those names.
//!
//! **Roles** say what a shard does ([`Role`]); a shard may have several, and the
//! [`Placement`] decides which shard has which:
//!
//! - `writer` (exactly one): owns the `CommitLog`, the per-queue offset counters and flushing.
//! - `dispatch` (one or more): turns committed records into `ConsumeQueue` and index entries.
//! - `net` (one or more; every shard by default): accepts connections and runs processors.
//! - `control` (exactly one): timers, name-server registration, config persistence.
//!
//! [`Placement::auto`] works on one core (one shard with every role) and on two (writer and
//! dispatch apart), and spreads out from three; `--shards` text overrides it
//! ([`Placement::parse`]).
//!
//! **Ownership rule.** Every piece of mutable state has exactly one owner shard. Other shards
//! reach it by sending a message over the [`Mesh`] to the owner, or by reading an immutable
//! snapshot the owner publishes. There are no locks on the data path, and no shard ever touches
//! another shard's state directly. Types that must stay on their shard are `!Send`
//! ([`Mesh`], [`TaskQueues`]); types that cross shards are `Send` ([`Shutdown`]).
//!
//! **Backpressure.** Every channel of the mesh is bounded ([`RuntimeConfig::mesh_capacity`]).
//! [`Mesh::send_to`] waits while the receiver is behind; [`Mesh::try_send_to`] says
//! [`MeshError::Full`] instead, for callers that would rather shed or retry. A slow owner
//! therefore slows its senders down instead of growing a queue without limit.
//!
//! **Task queues.** Each shard has a foreground queue (requests) and a background queue (flush,
//! reput, cleaning) with a fifth of the foreground's shares ([`TaskQueues`]). Shard functions
//! run on the foreground queue.
//!
//! **Shutdown.** [`Shutdown`] is one process-wide signal, triggered by SIGINT/SIGTERM
//! ([`Shutdown::install_signal_handlers`]) or by code. The runtime cancels nothing: each shard
//! function selects on `ctx.shutdown.wait()` and then, in this order,
//!
//! 1. stops accepting new work (closes listeners, rejects new requests),
//! 2. drains what is in flight (answers or fails every accepted request; [`Mesh::close`] once it
//!    sends no more),
//! 3. persists what it owns (flush, checkpoint, config files),
//! 4. returns.
//!
//! [`run_shards`] returns once every shard returned. A second signal during shutdown exits at
//! once with code 130.
//!
//! **Panics.** A panic on any shard aborts the process after logging it, because the state that
//! shard owned would have no owner and its peers would wait for it forever.
//!
//! # Example
//!
//! ```no_run
//! use ferromq_shards::{run_shards, Placement, RuntimeConfig, Shutdown};
//!
//! let shutdown = Shutdown::new();
//! shutdown.install_signal_handlers()?;
//! let served = run_shards::<u64, _, _, _>(
//!     Placement::detect(),
//!     RuntimeConfig::default(),
//!     shutdown,
//!     |ctx| async move {
//!         ctx.shutdown.wait().await;
//!         ctx.id
//!     },
//! )?;
//! println!("{} shards stopped", served.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Modules
//!
//! | module | holds |
//! | --- | --- |
//! | `shard_id` | [`ShardId`], [`SHARD_COUNT_MAX`] |
//! | `placement` | [`Role`], [`RoleSet`], [`ShardSpec`], [`Placement`] and its `--shards` syntax |
//! | `mesh` | [`Mesh`], the bounded all-to-all channels |
//! | `task_queues` | [`TaskQueues`], foreground and background |
//! | `shutdown` | [`Shutdown`], the stop signal and signal handling |
//! | `runtime` | [`run_shards`], [`spawn_shards`], [`ShardContext`], [`RuntimeConfig`] |
//! | `testing` | [`testing::run_local`] for unit tests on one executor |

#![forbid(unsafe_code)]
#![warn(missing_docs, missing_debug_implementations)]

pub mod mesh;
pub mod placement;
pub mod runtime;
pub mod shard_id;
pub mod shutdown;
pub mod task_queues;
pub mod testing;

pub use mesh::{Mesh, MeshError};
pub use placement::{Placement, PlacementError, Role, RoleSet, ShardSpec};
pub use runtime::{
    run_shards, spawn_shards, RuntimeConfig, ShardContext, ShardError, ShardsHandle,
};
pub use shard_id::{ShardId, SHARD_COUNT_MAX};
pub use shutdown::{Shutdown, ShutdownWait, EXIT_CODE_SECOND_SIGNAL};
pub use task_queues::TaskQueues;
