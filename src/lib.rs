//! ferromq: a RocketMQ-compatible name server and broker, thread-per-core on io_uring.
//!
//! Module map:
//! - [`remoting`]: the wire protocol — frames, JSON and binary headers, request and response
//!   codes, typed headers, JSON bodies, the serving half and the requesting half.
//! - [`client`]: the client library — producer, consumers and the shared client instance.
//! - [`namesrv`]: the name server — route tables, KV store, liveness, request processing.
//! - [`admin`]: `ferromq admin`, mqadmin's operator commands over the remoting protocol.
//! - [`config`]: Java-compatible configuration files and keys.
//! - [`limits`]: every maximum, with Java's defaults.
//!
//! The shard runtime is the `ferromq-shards` crate and the kernel I/O layer is
//! `ferromq-uring`. ARCHITECTURE.md at the repository root is the map of the whole system.

pub mod admin;
pub mod broker;
pub mod bytes;
pub mod calendar;
pub mod client;
pub mod config;
pub mod limits;
pub mod namesrv;
pub mod remoting;
pub mod store;
