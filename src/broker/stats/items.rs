//! Per-topic and per-group statistics: the `StatsItemSet`s of Java's `BrokerStatsManager`
//! that VIEW_BROKER_STATS_DATA (`mqadmin statsAll`) shows and GET_CONSUME_STATS takes its
//! `consumeTps` from: `TOPIC_PUT_NUMS` and `TOPIC_PUT_SIZE` keyed by topic, `GROUP_GET_NUMS`
//! and `GROUP_GET_SIZE` keyed by `topic@group`.
//!
//! Each net shard counts in a table of its own, behind a lock only the sampler also takes
//! (every 10 s), so a send or a pull never waits on another shard. The sampler adds the
//! shards' tables up and keeps, per item, Java's three windows (`StatsItem`): a snapshot
//! every 10 s (7 kept: the last minute), every 10 min (7: the last hour) and every hour
//! (25: the last day), the first of each preceded by a zero snapshot one period earlier.
//! A window's figures are Java's `computeStatsData`: `sum` is the value's growth from its
//! first snapshot to its last, `tps` that per second, `avgpt` the value per call.
//!
//! Invariant: an item exists once something counted it; Java drops an idle item after
//! `maxStatsIdleTimeInMinutes`, ferromq keeps it (at most [`ITEMS_MAX`] per shard table).

use std::collections::{HashMap, VecDeque};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Most keys each shard counts per table (topics put to, topic and group pairs pulled);
/// past it a new key is not counted, so that memory stays bounded whatever clients name:
/// each key sampled holds up to 39 snapshots of 24 bytes per statistic, about 4 KiB.
pub const ITEMS_MAX: usize = 10_000;

/// Java's statistic names this broker keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StatsName {
    /// Messages put, per topic (`TOPIC_PUT_NUMS`).
    TopicPutNums,
    /// Bytes put (records as stored), per topic (`TOPIC_PUT_SIZE`).
    TopicPutSize,
    /// Messages pulled, per `topic@group` (`GROUP_GET_NUMS`).
    GroupGetNums,
    /// Bytes pulled, per `topic@group` (`GROUP_GET_SIZE`).
    GroupGetSize,
}

impl StatsName {
    /// The name by Java's spelling.
    #[must_use]
    pub fn parse(name: &str) -> Option<StatsName> {
        Some(match name {
            "TOPIC_PUT_NUMS" => StatsName::TopicPutNums,
            "TOPIC_PUT_SIZE" => StatsName::TopicPutSize,
            "GROUP_GET_NUMS" => StatsName::GroupGetNums,
            "GROUP_GET_SIZE" => StatsName::GroupGetSize,
            _ => return None,
        })
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// One window's figures (`StatsSnapshot`, as `BrokerStatsItem` carries them).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WindowFigures {
    /// Growth of the value over the window.
    pub sum: u64,
    /// That growth per second.
    pub tps: f64,
    /// Value per call (`avgpt`): messages per put or pull, bytes per put or pull.
    pub avgpt: f64,
}

/// An item's three windows (`BrokerStatsData`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ItemFigures {
    /// The last minute (`statsMinute`).
    pub minute: WindowFigures,
    /// The last hour (`statsHour`).
    pub hour: WindowFigures,
    /// The last day (`statsDay`).
    pub day: WindowFigures,
}

/// An item's cumulative value and calls (`StatsItem.value`, `times`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counter {
    value: u64,
    times: u64,
}

impl Counter {
    fn add(&mut self, value: u64) {
        self.value = self.value.saturating_add(value);
        self.times = self.times.saturating_add(1);
    }

    fn merge(&mut self, other: Counter) {
        self.value = self.value.saturating_add(other.value);
        self.times = self.times.saturating_add(other.times);
    }
}

/// Upper bounds (bytes) of `rocketmq_message_size`'s buckets, Java's view: 1 KiB, 4 KiB,
/// 512 KiB, 1 MiB, 2 MiB and 4 MiB, then `+Inf`.
pub const MESSAGE_SIZE_BUCKETS: [u64; 6] = [1 << 10, 4 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20];

/// One key's counters: messages and bytes, and for puts the sizes of Java's
/// `rocketmq_message_size` (a put's bytes per message, once per put).
#[derive(Clone, Copy, Debug, Default)]
struct KeyCounters {
    nums: Counter,
    size: Counter,
    sizes: [u64; MESSAGE_SIZE_BUCKETS.len() + 1],
}

/// A topic's puts so far, all shards added up (for the metrics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PutTotals {
    /// Messages put.
    pub messages: u64,
    /// Bytes put, records as stored.
    pub bytes: u64,
    /// Puts.
    pub puts: u64,
    /// Puts per bucket of [`MESSAGE_SIZE_BUCKETS`] and the `+Inf` one, by bytes per message.
    pub sizes: [u64; MESSAGE_SIZE_BUCKETS.len() + 1],
}

/// Puts by topic and pulls by (topic, group), each ascending.
pub type MetricTotals = (Vec<(String, PutTotals)>, Vec<((String, String), GetTotals)>);

/// A group's pulls from a topic so far, all shards added up (for the metrics).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GetTotals {
    /// Messages pulled.
    pub messages: u64,
    /// Bytes pulled, records as stored.
    pub bytes: u64,
}

/// One shard's tables.
#[derive(Debug, Default)]
struct ShardTables {
    /// By topic.
    put: HashMap<String, KeyCounters>,
    /// By topic, then group: looked up without building `topic@group` on each pull.
    get: HashMap<String, HashMap<String, KeyCounters>>,
    /// Keys in `get`.
    get_keys: usize,
    /// Messages sent back to the `%DLQ%` topic, by group, then original topic (Java's
    /// `rocketmq_send_to_dlq_messages_total`): a rare path, counted here beside the others.
    dlq: HashMap<String, HashMap<String, u64>>,
}

#[derive(Debug)]
#[repr(align(128))]
struct ShardSlot(Mutex<ShardTables>);

/// A window's snapshots: (time ms, calls, value).
type Snapshots = VecDeque<(i64, u64, u64)>;

/// Period (ms) and length (snapshots kept) of the minute, hour and day windows.
const WINDOWS: [(i64, usize); 3] = [(10_000, 7), (600_000, 7), (3_600_000, 25)];

#[derive(Debug, Default)]
struct Sampled {
    /// Per statistic, per key, the three windows.
    items: [HashMap<String, [Snapshots; 3]>; 4],
    /// When each window takes its next snapshot (none before the first sample).
    next_ms: Option<[i64; 3]>,
}

/// The per-topic and per-group statistics.
#[derive(Debug)]
#[doc(alias = "StatsItemSet")]
pub struct StatsItems {
    slots: Box<[ShardSlot]>,
    sampled: Mutex<Sampled>,
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section leaves the tables consistent.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl StatsItems {
    /// Tables for `shards` shards.
    #[must_use]
    pub fn new(shards: usize) -> StatsItems {
        StatsItems {
            slots: (0..shards.max(1))
                .map(|_| ShardSlot(Mutex::default()))
                .collect(),
            sampled: Mutex::default(),
        }
    }

    fn slot(&self, shard: usize) -> MutexGuard<'_, ShardTables> {
        locked(&self.slots[shard.min(self.slots.len() - 1)].0)
    }

    /// Counts a put of `messages` messages, `bytes` stored, to `topic` by `shard`
    /// (`incTopicPutNums(topic, messages, 1)`, `incTopicPutSize`).
    pub fn record_put(&self, shard: usize, topic: &str, messages: u64, bytes: u64) {
        let mut tables = self.slot(shard);
        if !tables.put.contains_key(topic) {
            if tables.put.len() >= ITEMS_MAX {
                return;
            }
            tables.put.insert(topic.to_owned(), KeyCounters::default());
        }
        let Some(counters) = tables.put.get_mut(topic) else {
            return;
        };
        counters.nums.add(messages);
        counters.size.add(bytes);
        let per_message = bytes / messages.max(1);
        let bucket = MESSAGE_SIZE_BUCKETS
            .iter()
            .position(|bound| per_message <= *bound)
            .unwrap_or(MESSAGE_SIZE_BUCKETS.len());
        counters.sizes[bucket] = counters.sizes[bucket].saturating_add(1);
    }

    /// Counts a pull by `group` from `topic` that found `messages` messages of `bytes`
    /// (`incGroupGetNums`, `incGroupGetSize`).
    pub fn record_get(&self, shard: usize, topic: &str, group: &str, messages: u64, bytes: u64) {
        let mut tables = self.slot(shard);
        let full = tables.get_keys >= ITEMS_MAX;
        let known = tables
            .get
            .get(topic)
            .is_some_and(|groups| groups.contains_key(group));
        if !known {
            if full {
                return;
            }
            tables.get_keys += 1;
        }
        let counters = tables
            .get
            .entry(topic.to_owned())
            .or_default()
            .entry(group.to_owned())
            .or_default();
        counters.nums.add(messages);
        counters.size.add(bytes);
    }

    /// Counts a message of `topic` that `group` sent back and that went to its `%DLQ%`
    /// topic (at most [`ITEMS_MAX`] groups per shard).
    pub fn record_dlq(&self, shard: usize, group: &str, topic: &str) {
        let mut tables = self.slot(shard);
        if !tables.dlq.contains_key(group) && tables.dlq.len() >= ITEMS_MAX {
            return;
        }
        let count = tables
            .dlq
            .entry(group.to_owned())
            .or_default()
            .entry(topic.to_owned())
            .or_default();
        *count = count.saturating_add(1);
    }

    /// Messages sent to `%DLQ%` topics by (group, original topic), all shards added up.
    #[must_use]
    pub fn dlq_totals(&self) -> Vec<((String, String), u64)> {
        let mut totals = std::collections::BTreeMap::<(String, String), u64>::new();
        for slot in &self.slots {
            let tables = locked(&slot.0);
            for (group, topics) in &tables.dlq {
                for (topic, count) in topics {
                    let total = totals.entry((group.clone(), topic.clone())).or_default();
                    *total = total.saturating_add(*count);
                }
            }
        }
        totals.into_iter().collect()
    }

    /// Every topic's puts and every (topic, group)'s pulls, all shards added up: what a
    /// metrics scrape reads (each shard's table locked in turn, as the sampler does).
    #[must_use]
    pub fn metric_totals(&self) -> MetricTotals {
        let mut puts = std::collections::BTreeMap::<String, PutTotals>::new();
        let mut gets = std::collections::BTreeMap::<(String, String), GetTotals>::new();
        for slot in &self.slots {
            let tables = locked(&slot.0);
            for (topic, counters) in &tables.put {
                let total = puts.entry(topic.clone()).or_default();
                total.messages = total.messages.saturating_add(counters.nums.value);
                total.bytes = total.bytes.saturating_add(counters.size.value);
                total.puts = total.puts.saturating_add(counters.nums.times);
                for (sum, count) in total.sizes.iter_mut().zip(counters.sizes) {
                    *sum = sum.saturating_add(count);
                }
            }
            for (topic, groups) in &tables.get {
                for (group, counters) in groups {
                    let total = gets.entry((topic.clone(), group.clone())).or_default();
                    total.messages = total.messages.saturating_add(counters.nums.value);
                    total.bytes = total.bytes.saturating_add(counters.size.value);
                }
            }
        }
        (puts.into_iter().collect(), gets.into_iter().collect())
    }

    /// Every shard's counters added up: (put by topic, get by `topic@group`).
    fn totals(&self) -> [HashMap<String, Counter>; 4] {
        let mut totals: [HashMap<String, Counter>; 4] = Default::default();
        for slot in &self.slots {
            let tables = locked(&slot.0);
            for (topic, counters) in &tables.put {
                let key = || topic.clone();
                add_to(&mut totals[0], key, counters.nums);
                add_to(&mut totals[1], key, counters.size);
            }
            for (topic, groups) in &tables.get {
                for (group, counters) in groups {
                    let key = || format!("{topic}@{group}");
                    add_to(&mut totals[2], key, counters.nums);
                    add_to(&mut totals[3], key, counters.size);
                }
            }
        }
        totals
    }

    /// Takes the snapshots due at `now_ms` (the sampler calls it every second; the first
    /// call takes one of each window, as Java's schedules start at once).
    pub fn sample(&self, now_ms: i64) {
        let sampled = locked(&self.sampled);
        let mut next = sampled.next_ms.unwrap_or([now_ms; 3]);
        let due: Vec<usize> = (0..WINDOWS.len()).filter(|w| now_ms >= next[*w]).collect();
        if due.is_empty() {
            return;
        }
        drop(sampled);
        let totals = self.totals();
        let mut sampled = locked(&self.sampled);
        for (name, counters) in totals.into_iter().enumerate() {
            for (key, counter) in counters {
                let windows = sampled.items[name].entry(key).or_default();
                for &window in &due {
                    let (period_ms, kept) = WINDOWS[window];
                    let snapshots = &mut windows[window];
                    if snapshots.is_empty() {
                        snapshots.push_back((now_ms - period_ms, 0, 0));
                    }
                    snapshots.push_back((now_ms, counter.times, counter.value));
                    while snapshots.len() > kept {
                        snapshots.pop_front();
                    }
                }
            }
        }
        for &window in &due {
            // At a fixed rate: a late sample does not move the later ones.
            let period_ms = WINDOWS[window].0;
            next[window] = next[window].max(now_ms - period_ms) + period_ms;
        }
        sampled.next_ms = Some(next);
    }

    /// An item's windows, `None` when nothing counted it (Java's "not exist").
    #[must_use]
    pub fn figures(&self, name: StatsName, key: &str) -> Option<ItemFigures> {
        let sampled = locked(&self.sampled);
        if let Some(windows) = sampled.items[name.index()].get(key) {
            let [minute, hour, day] = windows.each_ref().map(window_figures);
            return Some(ItemFigures { minute, hour, day });
        }
        drop(sampled);
        // Counted since the last sample: it exists, its windows are empty.
        self.totals()[name.index()]
            .contains_key(key)
            .then(ItemFigures::default)
    }

    /// `GROUP_GET_NUMS` of `topic@group` per second over the last minute
    /// (`tpsGroupGetNums`), 0 when none was pulled.
    #[must_use]
    pub fn group_get_tps(&self, topic: &str, group: &str) -> f64 {
        let sampled = locked(&self.sampled);
        let key = format!("{topic}@{group}");
        sampled.items[StatsName::GroupGetNums.index()]
            .get(&key)
            .map_or(0.0, |windows| window_figures(&windows[0]).tps)
    }
}

fn add_to(table: &mut HashMap<String, Counter>, key: impl FnOnce() -> String, counter: Counter) {
    table.entry(key()).or_default().merge(counter);
}

/// Java's `computeStatsData` over one window.
fn window_figures(snapshots: &Snapshots) -> WindowFigures {
    let (Some(first), Some(last)) = (snapshots.front(), snapshots.back()) else {
        return WindowFigures::default();
    };
    let sum = last.2.saturating_sub(first.2);
    let times = last.1.saturating_sub(first.1);
    let elapsed_ms = last.0 - first.0;
    #[allow(clippy::cast_precision_loss)] // rates need no more than f64's precision
    let tps = if elapsed_ms > 0 {
        sum as f64 * 1000.0 / elapsed_ms as f64
    } else {
        0.0
    };
    #[allow(clippy::cast_precision_loss)]
    let avgpt = if times > 0 {
        sum as f64 / times as f64
    } else {
        0.0
    };
    WindowFigures { sum, tps, avgpt }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_exists_once_counted_and_its_windows_fill_at_each_sample() {
        let items = StatsItems::new(2);
        items.sample(0);
        assert_eq!(items.figures(StatsName::TopicPutNums, "T"), None);
        items.record_put(0, "T", 4, 400);
        items.record_put(1, "T", 1, 100);
        // Counted, not sampled yet: it exists, all zero.
        assert_eq!(
            items.figures(StatsName::TopicPutNums, "T"),
            Some(ItemFigures::default())
        );
        items.sample(5_000);
        // Not due: the minute window samples every 10 s.
        assert_eq!(
            items.figures(StatsName::TopicPutNums, "T"),
            Some(ItemFigures::default())
        );
        items.sample(10_000);
        let figures = items.figures(StatsName::TopicPutNums, "T").unwrap();
        // A zero snapshot 10 s before the first: 5 messages in 10 s, in 2 puts.
        assert_eq!(figures.minute.sum, 5);
        assert!((figures.minute.tps - 0.5).abs() < 1e-9, "{figures:?}");
        assert!((figures.minute.avgpt - 2.5).abs() < 1e-9, "{figures:?}");
        let size = items.figures(StatsName::TopicPutSize, "T").unwrap();
        assert_eq!(size.minute.sum, 500);
        assert!((size.minute.avgpt - 250.0).abs() < 1e-9, "{size:?}");
        // The hour and day windows sampled at 0 only: the item was not there yet.
        assert_eq!(figures.hour, WindowFigures::default());
    }

    #[test]
    fn the_minute_window_keeps_its_last_seven_snapshots() {
        let items = StatsItems::new(1);
        for tick in 0..=20 {
            // 3 messages a tick, in one pull.
            items.record_get(0, "T", "G", 3, 30);
            items.sample(tick * 10_000);
        }
        let figures = items.figures(StatsName::GroupGetNums, "T@G").unwrap();
        // Snapshots at 140 s .. 200 s: 6 ticks of 3 messages.
        assert_eq!(figures.minute.sum, 18);
        assert!((figures.minute.tps - 0.3).abs() < 1e-9, "{figures:?}");
        assert!((items.group_get_tps("T", "G") - 0.3).abs() < 1e-9);
        assert!(items.group_get_tps("T", "other").abs() < f64::EPSILON);
        // The hour window: a zero snapshot 10 min before 0, then 0 (3 counted by then).
        assert_eq!(figures.hour.sum, 3);
        assert_eq!(
            items
                .figures(StatsName::GroupGetSize, "T@G")
                .unwrap()
                .day
                .sum,
            30
        );
    }

    #[test]
    fn keys_past_the_limit_are_not_counted() {
        let items = StatsItems::new(1);
        for i in 0..ITEMS_MAX {
            items.record_get(0, "T", &i.to_string(), 1, 1);
        }
        items.record_get(0, "T", "one-too-many", 1, 1);
        items.record_get(0, "T", "0", 1, 1);
        let totals = items.totals();
        assert_eq!(totals[2].len(), ITEMS_MAX);
        assert_eq!(totals[2]["T@0"].value, 2);
    }
}
