//! The broker's periodic and background work, each a service in its own file: a `run`
//! (`spawn` for the registration thread) that starts it with what it needs, passed
//! explicitly, and runs until the broker's shutdown signal stops it. The delay-level
//! scheduler, the transaction check, name-server registration, the long-polling notifier,
//! consumer housekeeping, the statistics' sampler, and the HA link (master and slave side).
//! Retention is the store's (`store::retention`).
//!
//! Architecture Invariant: a service calls no request processor; what it shares with them
//! lives below both (`delay`, `transaction`, `state`).

pub mod ha;
pub mod ha_slave;
pub mod housekeeping;
pub mod long_poll;
pub mod register;
pub mod sampler;
pub mod schedule;
pub mod transaction_check;
