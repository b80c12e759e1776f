//! The broker's periodic and background work, each a service in its own file: a `run`
//! (`spawn` for the registration thread) that starts it with what it needs, passed
//! explicitly, and runs until the broker's shutdown signal stops it. The delay-level
//! scheduler, the transaction check, name-server registration, the long-polling notifier,
//! consumer housekeeping, the statistics' sampler, the HA link (master and slave side), and
//! POP's revive service, and controller mode's link to the controllers (`replicas`).
//! Retention is the store's (`store::retention`).
//!
//! Architecture Invariant: a service calls no request processor; what it shares with them
//! lives below both (`delay`, `transaction`, `state`).

pub mod ha;
pub mod ha_slave;
pub mod housekeeping;
pub mod long_poll;
pub mod register;
pub mod replicas;
pub mod revive;
pub mod routes;
pub mod sampler;
pub mod schedule;
pub mod timer;
pub mod transaction_check;

use ferromq_shards::Shutdown;
use std::future::Future;
use std::time::Duration;

/// Runs `round` every `interval` (the first after one interval) until `shutdown`; a round in
/// progress at shutdown is dropped at its next await.
pub async fn every<F, R>(interval: Duration, shutdown: &Shutdown, mut round: F)
where
    F: FnMut() -> R,
    R: Future<Output = ()>,
{
    let periodic = async {
        loop {
            glommio::timer::sleep(interval).await;
            round().await;
        }
    };
    futures::pin_mut!(periodic);
    let stop = shutdown.wait();
    futures::pin_mut!(stop);
    futures::future::select(periodic, stop).await;
}
