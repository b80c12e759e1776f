//! The statistics' sampler (`StoreStatsService.sampling` in Java): once a second it takes a
//! snapshot of the broker's counters, from which the TPS figures of the admin requests are
//! computed over Java's windows.

use crate::broker::state::{now_ms, BrokerState};
use ferromq_shards::Shutdown;
use std::sync::Arc;
use std::time::Duration;

/// Time between two snapshots.
const SAMPLE_INTERVAL: Duration = Duration::from_secs(1);

/// Samples until shutdown.
pub async fn run(state: Arc<BrokerState>, shutdown: Shutdown) {
    while !shutdown.is_triggered() {
        state.stats.sample(now_ms());
        glommio::timer::sleep(SAMPLE_INTERVAL).await;
    }
}
