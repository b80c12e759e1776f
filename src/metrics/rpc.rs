//! Request latencies and requests in flight, per net shard, for the metrics
//! (`rocketmq_rpc_latency`, `rocketmq_processor_watermark`, Java's
//! `RemotingMetricsManager` and `BrokerMetricsManager.processorWatermark`).
//!
//! Each shard writes only its own table, and a table is a fixed array of atomics: a
//! request's latency lands in the slot of its (request code, response code, long polling)
//! triple, claimed on first use by the one shard that writes the table, so the request path
//! takes no lock and allocates nothing. A scrape reads every shard's table and adds them up.
//! Distinct triples past [`RPC_SLOTS`] on a shard are counted in `dropped` only.

use super::{histogram, HistogramValue};
use crate::remoting::{RequestCode, ResponseCode};
use prometheus_client::encoding::DescriptorEncoder;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Upper bounds (ms) of the latency buckets, Java's `RemotingMetricsManager` view: 1, 3,
/// 5, 7, 10, 100, 1000, 2000 and 3000 ms, then `+Inf`.
pub const RPC_BUCKETS_MS: [u64; 9] = [1, 3, 5, 7, 10, 100, 1_000, 2_000, 3_000];
/// Distinct (request code, response code, long polling) triples a shard keeps apart.
pub const RPC_SLOTS: usize = 256;

/// The response code a oneway request is counted under (it has none): the largest the
/// table's key holds, no code Java defines.
pub const NO_RESPONSE: i32 = 0x3f_ffff;

/// Java's processor pools, as `rocketmq_processor_watermark` labels them.
pub const PROCESSORS: [&str; 12] = [
    "send",
    "async_put",
    "pull",
    "ack",
    "query_message",
    "client_manager",
    "heartbeat",
    "lite_pull",
    "transaction",
    "consumer_manager",
    "admin",
    "reply",
];

/// One (request, response, long polling) triple's latencies.
#[derive(Debug)]
struct RpcSlot {
    /// 0 while free; else [`key`] of its triple, written once by the owning shard.
    key: AtomicU64,
    sum_ms: AtomicU64,
    buckets: [AtomicU64; RPC_BUCKETS_MS.len() + 1],
}

impl Default for RpcSlot {
    fn default() -> Self {
        RpcSlot {
            key: AtomicU64::new(0),
            sum_ms: AtomicU64::new(0),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// One shard's table.
#[derive(Debug)]
#[repr(align(128))]
struct ShardRpc {
    slots: Box<[RpcSlot]>,
    dropped: AtomicU64,
    in_flight: [AtomicI64; PROCESSORS.len()],
}

impl Default for ShardRpc {
    fn default() -> Self {
        ShardRpc {
            slots: (0..RPC_SLOTS).map(|_| RpcSlot::default()).collect(),
            dropped: AtomicU64::new(0),
            in_flight: std::array::from_fn(|_| AtomicI64::new(0)),
        }
    }
}

/// A request code, a response code and whether the request was a long-polling pull.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RpcKey {
    /// The request code.
    pub request: i32,
    /// The response code.
    pub response: i32,
    /// A pull that asked to be held while nothing is there.
    pub long_polling: bool,
}

fn key(rpc: RpcKey) -> u64 {
    // Bit 63 marks a used slot; request codes in bits 24..56, response codes in 1..24
    // (Java's are small), long polling in bit 0.
    (1 << 63)
        | (u64::from(rpc.request.cast_unsigned()) << 24)
        | ((u64::from(rpc.response.cast_unsigned()) & 0x7f_ffff) << 1)
        | u64::from(rpc.long_polling)
}

fn unkey(key: u64) -> RpcKey {
    #[allow(clippy::cast_possible_truncation)] // the bits `key` put there
    let request = ((key >> 24) as u32).cast_signed();
    #[allow(clippy::cast_possible_truncation)]
    let raw = ((key >> 1) & 0x7f_ffff) as u32;
    // Negative response codes (RPC_*) come back sign-extended from 23 bits.
    let response = if raw & 0x40_0000 == 0 {
        raw.cast_signed()
    } else {
        (raw | 0xff80_0000).cast_signed()
    };
    RpcKey {
        request,
        response,
        long_polling: key & 1 == 1,
    }
}

/// Every shard's request latencies and requests in flight.
#[derive(Debug)]
pub struct RpcStats {
    shards: Box<[ShardRpc]>,
}

/// A merged latency series: bucket counts (not cumulative, the last `+Inf`) and the sum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RpcLatency {
    /// Sum of the latencies, ms.
    pub sum_ms: u64,
    /// Per bucket of [`RPC_BUCKETS_MS`] and the `+Inf` one.
    pub buckets: [u64; RPC_BUCKETS_MS.len() + 1],
}

impl RpcStats {
    /// Tables for `shards` shards.
    #[must_use]
    pub fn new(shards: usize) -> RpcStats {
        RpcStats {
            shards: (0..shards.max(1)).map(|_| ShardRpc::default()).collect(),
        }
    }

    fn shard(&self, shard: usize) -> &ShardRpc {
        &self.shards[shard.min(self.shards.len() - 1)]
    }

    /// Counts one answered request of `shard` that took `elapsed_ms`. Only `shard`'s own
    /// thread calls it for `shard`.
    pub fn record(&self, shard: usize, rpc: RpcKey, elapsed_ms: u64) {
        let table = self.shard(shard);
        let wanted = key(rpc);
        #[allow(clippy::cast_possible_truncation)] // a hash folded into the table
        let start = (wanted.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize % RPC_SLOTS;
        for probe in 0..RPC_SLOTS {
            let slot = &table.slots[(start + probe) % RPC_SLOTS];
            let found = slot.key.load(Ordering::Acquire);
            if found == 0 {
                // Free: this shard is the table's one writer, so nobody else claims it.
                slot.key.store(wanted, Ordering::Release);
            } else if found != wanted {
                continue;
            }
            let bucket = RPC_BUCKETS_MS
                .iter()
                .position(|bound| elapsed_ms <= *bound)
                .unwrap_or(RPC_BUCKETS_MS.len());
            slot.sum_ms.fetch_add(elapsed_ms, Ordering::Relaxed);
            slot.buckets[bucket].fetch_add(1, Ordering::Relaxed);
            return;
        }
        table.dropped.fetch_add(1, Ordering::Relaxed);
    }

    /// A request for `processor` (an index of [`PROCESSORS`]) starts on `shard`.
    pub fn started(&self, shard: usize, processor: usize) {
        if let Some(count) = self.shard(shard).in_flight.get(processor) {
            count.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// A request [`RpcStats::started`] ended.
    pub fn ended(&self, shard: usize, processor: usize) {
        if let Some(count) = self.shard(shard).in_flight.get(processor) {
            count.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Every triple's latencies, all shards added up, by triple.
    #[must_use]
    pub fn latencies(&self) -> std::collections::BTreeMap<RpcKey, RpcLatency> {
        let mut merged = std::collections::BTreeMap::<RpcKey, RpcLatency>::new();
        for table in &self.shards {
            for slot in &table.slots {
                let found = slot.key.load(Ordering::Acquire);
                if found == 0 {
                    continue;
                }
                let series = merged.entry(unkey(found)).or_default();
                series.sum_ms = series
                    .sum_ms
                    .saturating_add(slot.sum_ms.load(Ordering::Relaxed));
                for (total, bucket) in series.buckets.iter_mut().zip(&slot.buckets) {
                    *total = total.saturating_add(bucket.load(Ordering::Relaxed));
                }
            }
        }
        merged
    }

    /// Requests in flight per processor of [`PROCESSORS`], all shards added up.
    #[must_use]
    pub fn in_flight(&self) -> [i64; PROCESSORS.len()] {
        std::array::from_fn(|i| {
            self.shards
                .iter()
                .map(|table| table.in_flight[i].load(Ordering::Relaxed))
                .sum::<i64>()
                .max(0)
        })
    }

    /// Triples not counted because a shard's table was full.
    #[must_use]
    pub fn dropped(&self) -> u64 {
        self.shards
            .iter()
            .map(|table| table.dropped.load(Ordering::Relaxed))
            .sum()
    }
}

/// A code's Java name in lower case, or its number (`RemotingHelper.getRequestCodeDesc`).
fn code_desc(name: Option<&'static str>, code: i32) -> String {
    name.map_or_else(|| code.to_string(), str::to_ascii_lowercase)
}

/// Writes `rocketmq_rpc_latency_milliseconds` of `stats` (Java's `RemotingMetricsManager`):
/// per request code, response code, long polling and result, `protocol_type="remoting"`.
///
/// # Errors
/// The encoder's.
pub fn encode_latency(encoder: &mut DescriptorEncoder, stats: &RpcStats) -> std::fmt::Result {
    let bounds: Vec<f64> = RPC_BUCKETS_MS
        .iter()
        .map(|bound| *bound as f64)
        .chain([f64::INFINITY])
        .collect();
    let series = stats
        .latencies()
        .into_iter()
        .map(|(key, RpcLatency { sum_ms, buckets })| {
            let (response, result) = if key.response == NO_RESPONSE {
                ("success".to_owned(), "oneway")
            } else {
                let code = ResponseCode(key.response);
                (code_desc(code.name(), key.response), "success")
            };
            let labels = vec![
                ("protocol_type", "remoting".to_owned()),
                (
                    "request_code",
                    code_desc(RequestCode(key.request).name(), key.request),
                ),
                ("response_code", response),
                ("is_long_polling", key.long_polling.to_string()),
                ("result", result.to_owned()),
            ];
            let value = HistogramValue {
                sum: sum_ms as f64,
                count: buckets.iter().sum(),
                buckets: bounds.iter().copied().zip(buckets).collect(),
            };
            (labels, value)
        });
    histogram(
        encoder,
        "rocketmq_rpc_latency_milliseconds",
        "Rpc latency",
        series.collect::<Vec<_>>(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_land_in_java_buckets_and_shards_add_up() {
        let stats = RpcStats::new(2);
        let send = RpcKey {
            request: 310,
            response: 0,
            long_polling: false,
        };
        let timeout = RpcKey {
            request: 11,
            response: -1006,
            long_polling: true,
        };
        stats.record(0, send, 0);
        stats.record(1, send, 2);
        stats.record(1, send, 5_000);
        stats.record(0, timeout, 100);
        let all = stats.latencies();
        assert_eq!(all.len(), 2);
        assert_eq!(all[&send].sum_ms, 5_002);
        assert_eq!(all[&send].buckets, [1, 1, 0, 0, 0, 0, 0, 0, 0, 1]);
        assert_eq!(all[&timeout].buckets[5], 1);
        assert_eq!(unkey(key(timeout)), timeout);
        assert_eq!(
            code_desc(RequestCode::PULL_MESSAGE.name(), 11),
            "pull_message"
        );
        assert_eq!(code_desc(None, 9999), "9999");
    }

    #[test]
    fn a_full_table_drops_new_triples_and_counts_them() {
        let stats = RpcStats::new(1);
        for request in 0..=i32::try_from(RPC_SLOTS).unwrap() {
            let rpc = RpcKey {
                request,
                response: 0,
                long_polling: false,
            };
            stats.record(0, rpc, 1);
        }
        assert_eq!(stats.latencies().len(), RPC_SLOTS);
        assert_eq!(stats.dropped(), 1);
        stats.started(0, 2);
        stats.started(0, 2);
        stats.ended(0, 2);
        assert_eq!(stats.in_flight()[2], 1);
    }
}
