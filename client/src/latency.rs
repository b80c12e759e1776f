//! Latency fault avoidance for producers (Java `MQFaultStrategy` and
//! `LatencyFaultToleranceImpl`): a broker whose last send was slow or failed is not chosen
//! again for a while, and queue selection is round robin over the rest.
//!
//! The tables are Java 4.9's: a send that took at least `LATENCY_MAX_MS[i]` makes the broker
//! unavailable for `NOT_AVAILABLE_DURATION_MS[i]`; a failed send counts as a 30 s latency.
//! Time is passed in, so the logic is tested without sleeping.

use super::message::MessageQueue;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Latency thresholds, ms (`latencyMax`).
pub const LATENCY_MAX_MS: [u64; 7] = [50, 100, 550, 1_000, 2_000, 3_000, 15_000];
/// How long a broker is avoided after a send slower than the matching threshold, ms
/// (`notAvailableDuration`).
pub const NOT_AVAILABLE_DURATION_MS: [u64; 7] = [0, 0, 30_000, 60_000, 120_000, 180_000, 600_000];
/// The latency a failed send counts as (`isolation ? 30000 : currentLatency`), ms.
pub const ISOLATION_LATENCY_MS: u64 = 30_000;

/// How long to avoid a broker after a send of `latency_ms` (`computeNotAvailableDuration`).
#[must_use]
pub fn not_available_duration(latency_ms: u64) -> Duration {
    LATENCY_MAX_MS
        .iter()
        .zip(NOT_AVAILABLE_DURATION_MS)
        .rev()
        .find(|(max, _)| latency_ms >= **max)
        .map_or(Duration::ZERO, |(_, duration)| {
            Duration::from_millis(duration)
        })
}

#[derive(Clone, Copy, Debug)]
struct FaultItem {
    latency_ms: u64,
    available_at: Instant,
}

/// Which brokers are being avoided, and until when (Java `LatencyFaultToleranceImpl`).
#[doc(alias = "LatencyFaultToleranceImpl")]
#[derive(Debug, Default)]
pub struct LatencyFaultTolerance {
    items: Mutex<HashMap<String, FaultItem>>,
    worst: AtomicUsize,
}

impl LatencyFaultTolerance {
    fn items(&self) -> std::sync::MutexGuard<'_, HashMap<String, FaultItem>> {
        self.items
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Records a send to `broker` that took `latency_ms` at `now`: the broker is avoided for
    /// `not_available` from now (never shortening an earlier, longer ban).
    pub fn update(&self, broker: &str, latency_ms: u64, not_available: Duration, now: Instant) {
        let mut items = self.items();
        let item = items.entry(broker.to_owned()).or_insert(FaultItem {
            latency_ms,
            available_at: now,
        });
        item.latency_ms = latency_ms;
        let until = now + not_available;
        if !not_available.is_zero() && until > item.available_at {
            item.available_at = until;
        }
    }

    /// Records a send with Java's table: `isolation` (a failure) counts as 30 s.
    pub fn record_send(&self, broker: &str, latency_ms: u64, isolation: bool, now: Instant) {
        let judged = if isolation {
            ISOLATION_LATENCY_MS
        } else {
            latency_ms
        };
        self.update(broker, latency_ms, not_available_duration(judged), now);
    }

    /// Whether `broker` may be used at `now`.
    #[must_use]
    pub fn is_available(&self, broker: &str, now: Instant) -> bool {
        self.items()
            .get(broker)
            .is_none_or(|item| now >= item.available_at)
    }

    /// Forgets `broker`.
    pub fn remove(&self, broker: &str) {
        self.items().remove(broker);
    }

    /// The least bad broker among those recorded (Java `pickOneAtLeast`): sorted by
    /// availability, latency and ban end, one of the better half in turn.
    #[must_use]
    pub fn pick_one_at_least(&self, now: Instant) -> Option<String> {
        let mut items: Vec<(String, FaultItem)> =
            self.items().iter().map(|(k, v)| (k.clone(), *v)).collect();
        if items.is_empty() {
            return None;
        }
        items.sort_by(|(name_a, a), (name_b, b)| {
            let avail_a = now >= a.available_at;
            let avail_b = now >= b.available_at;
            avail_b
                .cmp(&avail_a)
                .then(a.latency_ms.cmp(&b.latency_ms))
                .then(a.available_at.cmp(&b.available_at))
                .then(name_a.cmp(name_b))
        });
        let half = items.len() / 2;
        let pick = if half == 0 {
            0
        } else {
            self.worst.fetch_add(1, Ordering::Relaxed) % half
        };
        Some(items.swap_remove(pick).0)
    }
}

/// Picks the next queue round robin from `queues` (counter `index`), preferring queues whose
/// broker `is_available` and is not `last_broker` (the broker that just failed), then any
/// available one, then any not on `last_broker`, then simply the next.
#[must_use]
pub fn select_queue<'a>(
    queues: &'a [MessageQueue],
    index: &AtomicUsize,
    last_broker: Option<&str>,
    is_available: impl Fn(&str) -> bool,
) -> Option<&'a MessageQueue> {
    if queues.is_empty() {
        return None;
    }
    let start = index.fetch_add(1, Ordering::Relaxed);
    let at = |step: usize| &queues[start.wrapping_add(step) % queues.len()];
    let other_broker = |mq: &MessageQueue| last_broker != Some(mq.broker_name.as_str());
    let passes: [&dyn Fn(&MessageQueue) -> bool; 3] = [
        &|mq| is_available(&mq.broker_name) && other_broker(mq),
        &|mq| is_available(&mq.broker_name),
        &|mq| other_broker(mq),
    ];
    for pass in passes {
        if let Some(step) = (0..queues.len()).find(|step| pass(at(*step))) {
            if step > 0 {
                index.fetch_add(step, Ordering::Relaxed);
            }
            return Some(at(step));
        }
    }
    Some(at(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_follow_the_java_table() {
        let ms = |latency| not_available_duration(latency).as_millis();
        assert_eq!(ms(0), 0);
        assert_eq!(ms(49), 0);
        assert_eq!(ms(100), 0);
        assert_eq!(ms(549), 0);
        assert_eq!(ms(550), 30_000);
        assert_eq!(ms(1_000), 60_000);
        assert_eq!(ms(2_500), 120_000);
        assert_eq!(ms(3_000), 180_000);
        assert_eq!(ms(14_999), 180_000);
        assert_eq!(ms(15_000), 600_000);
        assert_eq!(ms(ISOLATION_LATENCY_MS), 600_000);
    }

    #[test]
    fn a_failed_broker_is_avoided_until_its_ban_ends() {
        let table = LatencyFaultTolerance::default();
        let t0 = Instant::now();
        table.record_send("fast", 10, false, t0);
        table.record_send("slow", 600, false, t0);
        table.record_send("dead", 20, true, t0);
        assert!(table.is_available("fast", t0));
        assert!(table.is_available("unknown", t0));
        assert!(!table.is_available("slow", t0 + Duration::from_secs(29)));
        assert!(table.is_available("slow", t0 + Duration::from_secs(30)));
        assert!(!table.is_available("dead", t0 + Duration::from_secs(599)));
        // A fast send later does not lift the ban early.
        table.record_send("dead", 1, false, t0 + Duration::from_secs(1));
        assert!(!table.is_available("dead", t0 + Duration::from_secs(300)));
        assert!(table.is_available("dead", t0 + Duration::from_secs(600)));
        assert_eq!(
            table.pick_one_at_least(t0 + Duration::from_secs(1)),
            Some("fast".to_owned())
        );
        table.remove("dead");
        assert!(table.is_available("dead", t0));
    }

    #[test]
    fn selection_is_round_robin_and_skips_unavailable_and_last_brokers() {
        let queues: Vec<MessageQueue> = ["a", "a", "b", "b"]
            .iter()
            .enumerate()
            .map(|(id, broker)| MessageQueue::new("T", *broker, i32::try_from(id).unwrap()))
            .collect();
        let index = AtomicUsize::new(0);
        let all = |_: &str| true;
        let picked: Vec<i32> = (0..5)
            .map(|_| select_queue(&queues, &index, None, all).unwrap().queue_id)
            .collect();
        assert_eq!(picked, vec![0, 1, 2, 3, 0]);
        let not_a = |broker: &str| broker != "a";
        for _ in 0..4 {
            assert_eq!(
                select_queue(&queues, &index, None, not_a)
                    .unwrap()
                    .broker_name,
                "b"
            );
        }
        for _ in 0..4 {
            let mq = select_queue(&queues, &index, Some("b"), all).unwrap();
            assert_eq!(mq.broker_name, "a");
        }
        // Nothing available and only the last broker left: still a queue.
        let none = |_: &str| false;
        assert!(select_queue(&queues[2..], &index, Some("b"), none).is_some());
        assert!(select_queue(&[], &index, None, all).is_none());
    }
}
