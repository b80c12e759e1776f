//! Housekeeping of consumers (Java's `ClientHousekeepingService` and the periodic
//! `ConsumerOffsetManager.persist` of `BrokerController`): every
//! `flushConsumerOffsetInterval`, the consumers silent past the channel timeout are dropped
//! from their groups, and the committed offsets are written to `consumerOffset.json` on the
//! shard's blocking threads. The last write is at shutdown ([`super::super::BrokerHandle`]).

use crate::broker::state::BrokerState;
use ferromq_shards::Shutdown;
use std::sync::Arc;

/// Runs until shutdown.
pub async fn run(state: Arc<BrokerState>, shutdown: Shutdown) {
    let interval = state.config.flush_consumer_offset_interval;
    super::every(interval, &shutdown, || async {
        for group in state.expire_clients() {
            tracing::info!(group, "consumer expired without heartbeat");
        }
        if let Err(error) = state.persist_offsets_off_shard().await {
            tracing::error!(%error, "cannot persist consumer offsets");
        }
    })
    .await;
}
