//! The broker's statistics (`StoreStatsService` and `BrokerStats` in Java): messages stored
//! and pulled, put latencies, and the TPS GET_BROKER_RUNTIME_INFO shows (`mqadmin
//! clusterList`, `brokerStatus`).
//!
//! Each net shard counts in a slot of its own (no cache line shared between shards on the
//! send and pull paths); a read adds the slots up. A sampler on the control shard takes a
//! snapshot every second, keeping ten minutes of them, from which the TPS over 10 s, 1 min
//! and 10 min come; every minute it also keeps the minute's put latencies (Java's
//! `putMessageDistributeTime` and the buckets of `putLatency99`), and at each UTC midnight
//! the day's totals (`msgPutTotalTodayMorning`). The figures read as Java's: a TPS with too
//! few samples yet is an empty string, the latency distribution is `null` in the first
//! minute.
//!
//! The per-topic and per-group items (`BrokerStatsManager`'s `StatsItemSet`s) are
//! [`items`].
//!
//! Tested by the unit tests below (windows, buckets, day change) and through `mqadmin
//! clusterList` / `brokerStatus` in `tests/java_mqadmin.rs`.

pub mod items;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Samples kept: ten minutes at one a second, plus the one the oldest window starts at
/// (`MAX_RECORDS_OF_SAMPLING`).
const SAMPLES_MAX: usize = 601;
/// The TPS windows, in samples (seconds).
const TPS_WINDOWS: [usize; 3] = [10, 60, 600];
/// How often the put latencies of the last minute are taken (`printTPSInterval`).
const MINUTE_MS: i64 = 60_000;
/// Milliseconds in a day.
const DAY_MS: i64 = 86_400_000;

/// Names of the put latency ranges (`PUT_MESSAGE_ENTIRE_TIME_MAX_DESC`), with their upper
/// bounds in milliseconds (exclusive; the first is `<= 0`).
const DISTRIBUTION: [(&str, u64); 13] = [
    ("[<=0ms]", 1),
    ("[0~10ms]", 10),
    ("[10~50ms]", 50),
    ("[50~100ms]", 100),
    ("[100~200ms]", 200),
    ("[200~500ms]", 500),
    ("[500ms~1s]", 1_000),
    ("[1~2s]", 2_000),
    ("[2~3s]", 3_000),
    ("[3~4s]", 4_000),
    ("[4~5s]", 5_000),
    ("[5~10s]", 10_000),
    ("[10s~]", u64::MAX),
];

/// Steps of the latency buckets behind `putLatency99` (`PUT_MESSAGE_ENTIRE_TIME_BUCKETS`):
/// (step in ms, how many), then one bucket for everything slower.
const BUCKET_STEPS: [(u64, usize); 7] = [
    (1, 20),
    (2, 15),
    (5, 10),
    (10, 10),
    (50, 6),
    (100, 5),
    (1_000, 9),
];
/// Number of latency buckets: the steps' counts plus the open-ended last one.
const BUCKETS: usize = 20 + 15 + 10 + 10 + 6 + 5 + 9 + 1;

/// Upper bounds (inclusive, ms) of the latency buckets; the last is `u64::MAX`.
fn bucket_bounds() -> [u64; BUCKETS] {
    let mut bounds = [u64::MAX; BUCKETS];
    let mut index = 0;
    let mut bound = 0;
    for (step, count) in BUCKET_STEPS {
        for _ in 0..count {
            bound += step;
            bounds[index] = bound;
            index += 1;
        }
    }
    bounds
}

/// One shard's counters: written by that shard only, read by any.
#[derive(Debug)]
#[repr(align(128))]
struct ShardSlot {
    put_times: AtomicU64,
    put_size: AtomicU64,
    put_failed: AtomicU64,
    put_time_max_ms: AtomicU64,
    get_found: AtomicU64,
    get_miss: AtomicU64,
    get_transferred: AtomicU64,
    get_time_max_ms: AtomicU64,
    distribution: [AtomicU64; DISTRIBUTION.len()],
    buckets: [AtomicU64; BUCKETS],
}

impl Default for ShardSlot {
    fn default() -> Self {
        ShardSlot {
            put_times: AtomicU64::new(0),
            put_size: AtomicU64::new(0),
            put_failed: AtomicU64::new(0),
            put_time_max_ms: AtomicU64::new(0),
            get_found: AtomicU64::new(0),
            get_miss: AtomicU64::new(0),
            get_transferred: AtomicU64::new(0),
            get_time_max_ms: AtomicU64::new(0),
            distribution: std::array::from_fn(|_| AtomicU64::new(0)),
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

/// The totals of every slot at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Totals {
    /// Messages stored (`putMessageTimesTotal`).
    pub put_times: u64,
    /// Bytes of the stored messages' bodies (`putMessageSizeTotal`).
    pub put_size: u64,
    /// Puts refused by the store (`putMessageFailedTimes`).
    pub put_failed: u64,
    /// Pulls that found messages.
    pub get_found: u64,
    /// Pulls that found none.
    pub get_miss: u64,
    /// Messages pulled (`getMessageTransferedMsgCount`).
    pub get_transferred: u64,
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    time_ms: i64,
    totals: Totals,
}

/// What the sampler keeps.
#[derive(Debug, Default)]
struct Sampled {
    samples: VecDeque<Sample>,
    /// The last whole minute's latency counts, per range and per bucket, and the cumulative
    /// counts at its end.
    last_minute: Option<([u64; DISTRIBUTION.len()], [u64; BUCKETS])>,
    minute_start: Option<(i64, [u64; DISTRIBUTION.len()], [u64; BUCKETS])>,
    /// UTC day of the last sample, and the totals (puts, gets) at the start of today and
    /// of yesterday (`BrokerStats.record` at each midnight).
    day: Option<i64>,
    today_morning: (u64, u64),
    yesterday_morning: (u64, u64),
}

/// The broker's counters and samples.
#[derive(Debug)]
#[doc(alias = "StoreStatsService")]
pub struct BrokerStats {
    /// When the broker started (`bootTimestamp`), ms since the epoch.
    pub boot_ms: i64,
    slots: Box<[ShardSlot]>,
    sampled: Mutex<Sampled>,
    bounds: [u64; BUCKETS],
    /// Per topic and per `topic@group` (`TOPIC_PUT_NUMS`, `GROUP_GET_NUMS`, …).
    pub items: items::StatsItems,
    /// Request latencies and requests in flight, per shard (for the metrics).
    pub rpc: crate::metrics::rpc::RpcStats,
    /// Each shard's busy time and tasks run (for the metrics).
    pub busy: crate::metrics::shard::ShardBusy,
}

fn sum(values: impl Iterator<Item = u64>) -> u64 {
    values.fold(0, u64::saturating_add)
}

impl BrokerStats {
    /// Counters for `shards` shards (slot `i` is shard `i`'s), started at `boot_ms`.
    #[must_use]
    pub fn new(shards: usize, boot_ms: i64) -> BrokerStats {
        BrokerStats {
            boot_ms,
            slots: (0..shards.max(1)).map(|_| ShardSlot::default()).collect(),
            sampled: Mutex::new(Sampled::default()),
            bounds: bucket_bounds(),
            items: items::StatsItems::new(shards),
            rpc: crate::metrics::rpc::RpcStats::new(shards),
            busy: crate::metrics::shard::ShardBusy::new(shards),
        }
    }

    fn slot(&self, shard: usize) -> &ShardSlot {
        // A shard index past the slots (cannot happen: one slot per shard) shares the last.
        &self.slots[shard.min(self.slots.len() - 1)]
    }

    /// Counts `messages` stored messages of `size` body bytes by `shard`, that took
    /// `elapsed_ms` to store (`setPutMessageEntireTimeMax`).
    pub fn record_put(&self, shard: usize, messages: u64, size: u64, elapsed_ms: u64) {
        let slot = self.slot(shard);
        slot.put_times.fetch_add(messages, Ordering::Relaxed);
        slot.put_size.fetch_add(size, Ordering::Relaxed);
        slot.put_time_max_ms
            .fetch_max(elapsed_ms, Ordering::Relaxed);
        let range = if elapsed_ms == 0 {
            0
        } else {
            DISTRIBUTION
                .iter()
                .position(|(_, bound)| elapsed_ms < *bound)
                .unwrap_or(DISTRIBUTION.len() - 1)
        };
        slot.distribution[range].fetch_add(1, Ordering::Relaxed);
        let bucket = self
            .bounds
            .iter()
            .position(|bound| elapsed_ms <= *bound)
            .unwrap_or(BUCKETS - 1);
        slot.buckets[bucket].fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a put the store refused.
    pub fn record_put_failed(&self, shard: usize) {
        self.slot(shard).put_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts one pull by `shard` that returned `messages` messages (none: a miss) and took
    /// `elapsed_ms`.
    pub fn record_get(&self, shard: usize, messages: u64, elapsed_ms: u64) {
        let slot = self.slot(shard);
        if messages > 0 {
            slot.get_found.fetch_add(1, Ordering::Relaxed);
            slot.get_transferred.fetch_add(messages, Ordering::Relaxed);
        } else {
            slot.get_miss.fetch_add(1, Ordering::Relaxed);
        }
        slot.get_time_max_ms
            .fetch_max(elapsed_ms, Ordering::Relaxed);
    }

    /// The sums of every slot now.
    #[must_use]
    pub fn totals(&self) -> Totals {
        let all = |field: fn(&ShardSlot) -> &AtomicU64| {
            sum(self.slots.iter().map(|s| field(s).load(Ordering::Relaxed)))
        };
        Totals {
            put_times: all(|s| &s.put_times),
            put_size: all(|s| &s.put_size),
            put_failed: all(|s| &s.put_failed),
            get_found: all(|s| &s.get_found),
            get_miss: all(|s| &s.get_miss),
            get_transferred: all(|s| &s.get_transferred),
        }
    }

    /// Longest put and pull so far, in ms (`putMessageEntireTimeMax`,
    /// `getMessageEntireTimeMax`).
    #[must_use]
    pub fn time_max_ms(&self) -> (u64, u64) {
        let max = |field: fn(&ShardSlot) -> &AtomicU64| {
            self.slots
                .iter()
                .map(|s| field(s).load(Ordering::Relaxed))
                .max()
                .unwrap_or(0)
        };
        (max(|s| &s.put_time_max_ms), max(|s| &s.get_time_max_ms))
    }

    fn latency_counts(&self) -> ([u64; DISTRIBUTION.len()], [u64; BUCKETS]) {
        let distribution = std::array::from_fn(|i| {
            sum(self
                .slots
                .iter()
                .map(|s| s.distribution[i].load(Ordering::Relaxed)))
        });
        let buckets = std::array::from_fn(|i| {
            sum(self
                .slots
                .iter()
                .map(|s| s.buckets[i].load(Ordering::Relaxed)))
        });
        (distribution, buckets)
    }

    fn sampled(&self) -> std::sync::MutexGuard<'_, Sampled> {
        // Every critical section leaves the samples consistent.
        self.sampled
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes the snapshot of second `now_ms` (the sampler calls it once a second), and the
    /// items' snapshots due then.
    pub fn sample(&self, now_ms: i64) {
        self.items.sample(now_ms);
        let totals = self.totals();
        let (distribution, buckets) = self.latency_counts();
        let mut sampled = self.sampled();
        sampled.samples.push_back(Sample {
            time_ms: now_ms,
            totals,
        });
        while sampled.samples.len() > SAMPLES_MAX {
            sampled.samples.pop_front();
        }
        match sampled.minute_start {
            None => sampled.minute_start = Some((now_ms, distribution, buckets)),
            Some((start, start_distribution, start_buckets)) if now_ms - start >= MINUTE_MS => {
                let minute_distribution =
                    std::array::from_fn(|i| distribution[i].saturating_sub(start_distribution[i]));
                let minute_buckets =
                    std::array::from_fn(|i| buckets[i].saturating_sub(start_buckets[i]));
                sampled.last_minute = Some((minute_distribution, minute_buckets));
                sampled.minute_start = Some((now_ms, distribution, buckets));
            }
            Some(_) => {}
        }
        let day = now_ms.div_euclid(DAY_MS);
        if sampled.day.is_some_and(|previous| previous != day) {
            sampled.yesterday_morning = sampled.today_morning;
            sampled.today_morning = (totals.put_times, totals.get_transferred);
        }
        sampled.day = Some(day);
    }

    /// The TPS of one counter over the 10 s, 1 min and 10 min windows, as Java prints them
    /// (`getPutTps`): space-separated, a window with too few samples yet empty.
    #[must_use]
    pub fn tps(&self, counter: fn(&Totals) -> u64) -> String {
        let sampled = self.sampled();
        TPS_WINDOWS
            .iter()
            .map(|window| {
                window_tps(&sampled.samples, *window, counter).map_or_else(String::new, java_double)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Pulls per second (found and missed) over the three windows, 0.0 for a window with
    /// too few samples (`getGetTotalTps`).
    #[must_use]
    pub fn get_total_tps(&self) -> String {
        let sampled = self.sampled();
        TPS_WINDOWS
            .iter()
            .map(|window| {
                let found = window_tps(&sampled.samples, *window, |t| t.get_found).unwrap_or(0.0);
                let miss = window_tps(&sampled.samples, *window, |t| t.get_miss).unwrap_or(0.0);
                java_double(found + miss)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The last whole minute's put latencies by range (`putMessageDistributeTime`), `null`
    /// before the first minute ends.
    #[must_use]
    pub fn put_distribution(&self) -> String {
        let sampled = self.sampled();
        let Some((distribution, _)) = &sampled.last_minute else {
            return "null".to_owned();
        };
        DISTRIBUTION
            .iter()
            .zip(distribution)
            .map(|((name, _), count)| format!("{name}:{count} "))
            .collect()
    }

    /// The put latency (ms) below which the fraction `px` of the last whole minute's puts
    /// fell, interpolated within its bucket (`findPutMessageEntireTimePX`); 0 before the
    /// first minute ends.
    #[must_use]
    pub fn put_latency(&self, px: f64) -> f64 {
        let sampled = self.sampled();
        let Some((_, buckets)) = &sampled.last_minute else {
            return 0.0;
        };
        percentile(&self.bounds, buckets, px)
    }

    /// (puts, gets) at the start of yesterday and of today (UTC); zero until a midnight
    /// passed.
    #[must_use]
    pub fn mornings(&self) -> ((u64, u64), (u64, u64)) {
        let sampled = self.sampled();
        (sampled.yesterday_morning, sampled.today_morning)
    }
}

/// The TPS over the last `window` samples, `None` with too few samples.
fn window_tps(
    samples: &VecDeque<Sample>,
    window: usize,
    counter: fn(&Totals) -> u64,
) -> Option<f64> {
    if samples.len() <= window {
        return None;
    }
    let last = samples.back()?;
    let first = samples.get(samples.len() - 1 - window)?;
    let elapsed = last.time_ms - first.time_ms;
    if elapsed <= 0 {
        return Some(0.0);
    }
    let count = counter(&last.totals).saturating_sub(counter(&first.totals));
    #[allow(clippy::cast_precision_loss)] // a rate needs no more than f64's precision
    Some(count as f64 * 1000.0 / elapsed as f64)
}

/// `findPutMessageEntireTimePX` over bucket counts.
fn percentile(bounds: &[u64; BUCKETS], counts: &[u64; BUCKETS], px: f64) -> f64 {
    let total = sum(counts.iter().copied());
    #[allow(
        clippy::cast_precision_loss,
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss
    )]
    let target = (total as f64 * px) as u64;
    let mut passed = 0u64;
    for (i, count) in counts.iter().enumerate() {
        if target <= passed + count {
            let relative = target - passed;
            #[allow(clippy::cast_precision_loss)]
            let within = |span: u64| {
                if *count == 0 {
                    0.0
                } else {
                    span as f64 * relative as f64 / *count as f64
                }
            };
            #[allow(clippy::cast_precision_loss)]
            return if i == 0 {
                within(bounds[0])
            } else {
                let lower = bounds[i - 1];
                lower as f64 + within(bounds[i].saturating_sub(lower))
            };
        }
        passed += count;
    }
    0.0
}

/// A double as Java's `Double.toString` writes the values these statistics take: at least
/// one decimal (`0.0`, `12.5`).
#[must_use]
pub fn java_double(value: f64) -> String {
    if value.is_finite() && value.fract() == 0.0 && value.abs() < 1e7 {
        format!("{value:.1}")
    } else {
        format!("{value}")
    }
}

/// Bytes as Java's `MixAll.humanReadableByteCount(bytes, false)`: `512 B`, `17.3 GiB`.
#[must_use]
pub fn human_bytes(bytes: u64) -> String {
    const UNIT: u64 = 1024;
    if bytes < UNIT {
        return format!("{bytes} B");
    }
    let mut exponent = 0;
    let mut scaled = bytes;
    while scaled >= UNIT && exponent < 6 {
        scaled /= UNIT;
        exponent += 1;
    }
    let prefix = ["K", "M", "G", "T", "P", "E"][exponent - 1];
    #[allow(clippy::cast_precision_loss, clippy::cast_possible_wrap)]
    let value = bytes as f64 / (UNIT as f64).powi(exponent as i32);
    format!("{value:.1} {prefix}iB")
}

/// Java's `getFormatRuntime`: `[ 0 days, 1 hours, 2 minutes, 3 seconds ]`.
#[must_use]
pub fn format_runtime(elapsed_ms: i64) -> String {
    let elapsed = elapsed_ms.max(0);
    let (second, minute, hour, day) = (1_000, 60_000, 3_600_000, DAY_MS);
    format!(
        "[ {} days, {} hours, {} minutes, {} seconds ]",
        elapsed / day,
        elapsed % day / hour,
        elapsed % hour / minute,
        elapsed % minute / second
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tps_windows_fill_in_as_samples_accumulate() {
        let stats = BrokerStats::new(2, 0);
        assert_eq!(stats.tps(|t| t.put_times), "  ");
        for second in 0..=10 {
            stats.record_put(usize::from(second % 2 == 0), 10, 100, 1);
            stats.sample(i64::from(second) * 1000);
        }
        // 11 samples: the 10 s window is there (100 messages in the last 10 s), the others
        // not yet.
        assert_eq!(stats.tps(|t| t.put_times), "10.0  ");
        for second in 11..=60 {
            stats.sample(i64::from(second) * 1000);
        }
        assert_eq!(stats.tps(|t| t.put_times), "0.0 1.6666666666666667 ");
        assert_eq!(stats.get_total_tps(), "0.0 0.0 0.0");
        assert_eq!(stats.totals().put_times, 110);
        assert_eq!(stats.totals().put_size, 1100);
    }

    #[test]
    fn pulls_count_found_missed_and_transferred() {
        let stats = BrokerStats::new(1, 0);
        stats.record_get(0, 32, 3);
        stats.record_get(0, 0, 9);
        let totals = stats.totals();
        assert_eq!(
            (totals.get_found, totals.get_miss, totals.get_transferred),
            (1, 1, 32)
        );
        assert_eq!(stats.time_max_ms().1, 9);
    }

    #[test]
    fn latency_distribution_is_null_until_a_minute_ends_then_counts_that_minute() {
        let stats = BrokerStats::new(1, 0);
        stats.sample(0);
        for elapsed in [0, 5, 5, 70, 20_000] {
            stats.record_put(0, 1, 1, elapsed);
        }
        assert_eq!(stats.put_distribution(), "null");
        assert!(stats.put_latency(0.99).abs() < f64::EPSILON);
        stats.sample(MINUTE_MS);
        assert_eq!(
            stats.put_distribution(),
            "[<=0ms]:1 [0~10ms]:2 [10~50ms]:0 [50~100ms]:1 [100~200ms]:0 [200~500ms]:0 \
             [500ms~1s]:0 [1~2s]:0 [2~3s]:0 [3~4s]:0 [4~5s]:0 [5~10s]:0 [10s~]:1 "
        );
        // 5 puts, the median is the 2nd of the three up to 5 ms: halfway through the
        // (4, 5] bucket, which holds two.
        assert!(
            (stats.put_latency(0.5) - 4.5).abs() < 1e-9,
            "{}",
            stats.put_latency(0.5)
        );
        assert_eq!(stats.time_max_ms().0, 20_000);
    }

    #[test]
    fn totals_at_midnight_become_today_then_yesterday() {
        let stats = BrokerStats::new(1, 0);
        stats.sample(DAY_MS - 1000);
        stats.record_put(0, 3, 3, 1);
        stats.sample(DAY_MS + 1000);
        assert_eq!(stats.mornings(), ((0, 0), (3, 0)));
        stats.record_put(0, 4, 4, 1);
        stats.sample(2 * DAY_MS + 1000);
        assert_eq!(stats.mornings(), ((3, 0), (7, 0)));
    }

    #[test]
    fn numbers_print_as_java_prints_them() {
        assert_eq!(java_double(0.0), "0.0");
        assert_eq!(java_double(0.81), "0.81");
        assert_eq!(java_double(1.0), "1.0");
        assert_eq!(human_bytes(0), "0 B");
        assert_eq!(human_bytes(1023), "1023 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(270_553_174_016), "252.0 GiB");
        assert_eq!(human_bytes(18_600_747_008), "17.3 GiB");
        assert_eq!(
            format_runtime(35_000),
            "[ 0 days, 0 hours, 0 minutes, 35 seconds ]"
        );
        assert_eq!(
            format_runtime(DAY_MS + 3_723_000),
            "[ 1 days, 1 hours, 2 minutes, 3 seconds ]"
        );
    }
}
