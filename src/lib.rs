//! ferromq: a RocketMQ-compatible name server and broker, thread-per-core on io_uring.
//!
//! Module map:
//! - [`protocol`] (the `ferromq-protocol` crate): what brokers and clients agree on as bytes
//!   and types — frames, headers, codes, bodies, the message record, names, limits.
//! - [`remoting`]: the protocol's remoting part under its old path, plus the serving half on
//!   glommio shards.
//! - [`client`] (the `ferromq-client` crate): the client library on tokio — producers,
//!   consumers and the shared client instance.
//! - [`namesrv`]: the name server — route tables, KV store, liveness, request processing.
//! - [`controller`]: the controller of 5.x controller mode — broker ids, SyncStateSets,
//!   master election — as an event-fed state machine.
//! - [`admin`]: `ferromq admin`, mqadmin's operator commands over the remoting protocol.
//! - [`config`]: Java-compatible configuration files and keys.
//! - [`grpc`]: the broker's gRPC endpoint (RocketMQ 5.x's `MessagingService`), on a tokio
//!   thread, its calls run by the net shards' processors.
//! - [`limits`]: every maximum, with Java's defaults.
//!
//! The shard runtime is the `ferromq-shards` crate and the kernel I/O layer is
//! `ferromq-uring`. ARCHITECTURE.md at the repository root is the map of the whole system.

pub mod admin;
pub mod broker;
pub mod config;
pub mod controller;
pub mod grpc;
pub mod logging;
pub mod metrics;
pub mod namesrv;
pub mod remoting;
pub mod serve;
pub mod status;
pub mod store;

pub use ferromq_client as client;
pub use ferromq_protocol as protocol;
pub use ferromq_protocol::{bytes, calendar, limits};
