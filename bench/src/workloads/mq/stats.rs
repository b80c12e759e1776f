//! Counters and latency histograms of one side of a run (produce or consume), the live
//! progress line, and the final summary of a side as text and JSON: rates, percentiles up to
//! p99.99 and max, and the latency over time (`timeline`).
//!
//! Latencies are recorded in microseconds. Samples taken before the warm-up ends count
//! towards the `*_total` counters (so that counts can be checked against the broker) but not
//! towards the measured rates, percentiles and windows over time.
//!
//! Tasks record through a [`Recorder`] of their own: counters and the run's histogram go to
//! the side under its lock; the windows over time stay in the task until it moves on to a
//! later window, so they add one lock per task per 100 ms, not one per sample.

use crate::workloads::timeline::{LocalWindow, Series, WindowClock, Windows, LATENCY_MAX_US};
use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The `latency_of` of oneway sends, which have no answers to time.
pub const ONEWAY: &str = "none: oneway";

fn histogram() -> Histogram<u64> {
    // Bounds are constants that hdrhistogram accepts.
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("valid histogram bounds")
}

/// The counters of one side, behind a lock shared by its tasks.
#[derive(Debug)]
pub struct Side {
    /// `produce` or `consume`.
    pub name: &'static str,
    /// What the latency histogram measures, for the report.
    pub latency_of: &'static str,
    /// The windows over time, readable without the lock.
    clock: WindowClock,
    inner: Mutex<Counters>,
}

/// The counters proper.
#[derive(Debug)]
pub struct Counters {
    /// When measuring starts (the end of the warm-up).
    pub measure_from: Instant,
    /// When the last measured event happened.
    pub last_event: Option<Instant>,
    /// Messages acknowledged (produce) or received (consume) after the warm-up.
    pub messages: u64,
    /// Body bytes of those.
    pub bytes: u64,
    /// Messages acknowledged or received, warm-up included.
    pub messages_total: u64,
    /// Messages handed to the connection, warm-up included (produce only).
    pub sent_total: u64,
    /// Requests that failed, by kind.
    pub errors: BTreeMap<String, u64>,
    /// Measured latencies (µs).
    pub latency: Histogram<u64>,
    /// The same latencies per window of time, as tasks hand them over.
    windows: Windows,
    interval_messages: u64,
    interval_bytes: u64,
    interval_errors: u64,
    interval_latency: Histogram<u64>,
}

impl Side {
    /// A side whose measurement starts at `measure_from`, with windows over time on `clock`.
    pub fn new(
        name: &'static str,
        latency_of: &'static str,
        measure_from: Instant,
        clock: WindowClock,
    ) -> Arc<Side> {
        Arc::new(Side {
            name,
            latency_of,
            clock,
            inner: Mutex::new(Counters {
                measure_from,
                last_event: None,
                messages: 0,
                bytes: 0,
                messages_total: 0,
                sent_total: 0,
                errors: BTreeMap::new(),
                latency: histogram(),
                windows: Windows::new(clock),
                interval_messages: 0,
                interval_bytes: 0,
                interval_errors: 0,
                interval_latency: histogram(),
            }),
        })
    }

    /// The counters, locked.
    pub fn lock(&self) -> MutexGuard<'_, Counters> {
        // Counters stay consistent under a panic (plain additions), so poison is ignored.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A recorder for one task.
    pub fn recorder(self: &Arc<Side>) -> Recorder {
        Recorder {
            side: self.clone(),
            window: LocalWindow::new(),
        }
    }

    /// Records `messages` messages of `bytes` body bytes done at `now`, with one latency
    /// sample (none for oneway sends). Returns the latency in µs if it was measured (after
    /// the warm-up).
    fn record(
        &self,
        now: Instant,
        messages: u64,
        bytes: u64,
        latency: Option<Duration>,
    ) -> Option<u64> {
        let mut c = self.lock();
        c.messages_total += messages;
        if now < c.measure_from {
            return None;
        }
        c.messages += messages;
        c.bytes += bytes;
        c.interval_messages += messages;
        c.interval_bytes += bytes;
        c.last_event = Some(now);
        let us = u64::try_from(latency?.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, LATENCY_MAX_US);
        c.latency.saturating_record(us);
        c.interval_latency.saturating_record(us);
        Some(us)
    }

    /// Records messages handed to the connection (produce).
    pub fn sent(&self, messages: u64) {
        self.lock().sent_total += messages;
    }

    /// Records a failed request of the given kind.
    pub fn error(&self, kind: String) {
        let mut c = self.lock();
        *c.errors.entry(kind).or_insert(0) += 1;
        c.interval_errors += 1;
    }

    /// The progress fragment of the last interval, and resets the interval counters.
    pub fn interval_line(&self, interval: Duration) -> String {
        let mut c = self.lock();
        let secs = interval.as_secs_f64().max(1e-9);
        let line = format!(
            "{} {:>9.0} msg/s {:>8.2} MB/s p99 {:>8.3} ms max {:>8.3} ms err {}",
            self.name,
            c.interval_messages as f64 / secs,
            c.interval_bytes as f64 / secs / 1e6,
            c.interval_latency.value_at_quantile(0.99) as f64 / 1000.0,
            c.interval_latency.max() as f64 / 1000.0,
            c.interval_errors
        );
        c.interval_messages = 0;
        c.interval_bytes = 0;
        c.interval_errors = 0;
        c.interval_latency.reset();
        line
    }

    /// The final summary of this side.
    pub fn summary(&self, end: Instant) -> Summary {
        let c = self.lock();
        // Rates count up to the last measured event: an e2e producer's time does not
        // include the consumer catching up, nor a drained consumer's its idle end.
        let last = c.last_event.unwrap_or(end);
        let elapsed = last.saturating_duration_since(c.measure_from);
        Summary {
            name: self.name,
            latency_of: self.latency_of,
            elapsed,
            messages: c.messages,
            bytes: c.bytes,
            messages_total: c.messages_total,
            sent_total: c.sent_total,
            errors: c.errors.clone(),
            latency: c.latency.clone(),
            timeline: (!c.latency.is_empty()).then(|| c.windows.series(c.measure_from, last)),
        }
    }
}

/// One task's way to record into a side: counters and the run's latencies straight to the
/// side, the latencies of the current window kept until the task moves on to the next one
/// (and handed over when the recorder is dropped, at the latest).
#[derive(Debug)]
pub struct Recorder {
    side: Arc<Side>,
    window: LocalWindow,
}

impl Recorder {
    /// Records `messages` messages of `bytes` body bytes done at `now`, with one latency
    /// sample (none for oneway sends).
    pub fn record(&mut self, now: Instant, messages: u64, bytes: u64, latency: Option<Duration>) {
        let Some(us) = self.side.record(now, messages, bytes, latency) else {
            return;
        };
        let side = &self.side;
        self.window
            .record(side.clock.index(now), us, |index, samples| {
                side.lock().windows.add(index, samples);
            });
    }

    /// The side recorded into, for its other counters.
    pub fn side(&self) -> &Side {
        &self.side
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let side = &self.side;
        self.window.finish(|index, samples| {
            side.lock().windows.add(index, samples);
        });
    }
}

/// The final numbers of one side.
#[derive(Debug, Clone)]
pub struct Summary {
    /// `produce` or `consume`.
    pub name: &'static str,
    /// What the latency histogram measures.
    pub latency_of: &'static str,
    /// Measured time: from the end of the warm-up to the last measured event.
    pub elapsed: Duration,
    /// Measured messages.
    pub messages: u64,
    /// Measured body bytes.
    pub bytes: u64,
    /// Messages acknowledged (produce) or received (consume), warm-up included.
    pub messages_total: u64,
    /// Messages handed to the connection, warm-up included (produce).
    pub sent_total: u64,
    /// Failures by kind.
    pub errors: BTreeMap<String, u64>,
    /// Latencies in µs.
    pub latency: Histogram<u64>,
    /// The same per 100 ms from the end of the warm-up to the last measured event; `None`
    /// without latencies (oneway sends).
    pub timeline: Option<Series>,
}

impl Summary {
    fn rate(&self) -> (f64, f64) {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        (self.messages as f64 / secs, self.bytes as f64 / secs / 1e6)
    }

    /// Total failures.
    pub fn error_count(&self) -> u64 {
        self.errors.values().sum()
    }

    /// The report text of this side.
    pub fn text(&self, out: &mut String) {
        let (msgs, mb) = self.rate();
        let h = &self.latency;
        let _ = writeln!(out, "{}:", self.name);
        let _ = writeln!(
            out,
            "  messages {} ({} incl. warm-up), bytes {}, {:.2} s",
            self.messages,
            self.messages_total,
            self.bytes,
            self.elapsed.as_secs_f64()
        );
        if self.name == "produce" && self.latency_of == ONEWAY {
            let _ = writeln!(
                out,
                "  sent {} (oneway: nothing acknowledged)",
                self.sent_total
            );
        } else if self.name == "produce" {
            let _ = writeln!(
                out,
                "  sent {}, acknowledged {}",
                self.sent_total, self.messages_total
            );
        }
        let _ = writeln!(out, "  throughput {msgs:.0} msg/s, {mb:.2} MB/s");
        if h.is_empty() {
            let _ = writeln!(out, "  latency ({}): no samples", self.latency_of);
        } else {
            let _ = writeln!(out, "  latency ({}), µs:", self.latency_of);
            let _ = writeln!(
                out,
                "    p50 {}  p90 {}  p99 {}  p99.9 {}  p99.99 {}  max {}  (n={})",
                h.value_at_quantile(0.5),
                h.value_at_quantile(0.9),
                h.value_at_quantile(0.99),
                h.value_at_quantile(0.999),
                h.value_at_quantile(0.9999),
                h.max(),
                h.len()
            );
        }
        if let Some((timeline, worst)) = self.timeline.as_ref().and_then(|t| Some((t, t.worst()?)))
        {
            let _ = writeln!(
                out,
                "  over time: {} windows of 100 ms, {} without an answer; worst at {:.1} s: \
                 p50 {}  p99 {}  max {}  (n={})",
                timeline.windows.len(),
                timeline.empty_count(),
                worst.start.as_secs_f64(),
                worst.p50_us,
                worst.p99_us,
                worst.max_us,
                worst.count
            );
        }
        let _ = writeln!(out, "  errors {}", self.error_count());
        for (kind, count) in &self.errors {
            let _ = writeln!(out, "    {count:>8}  {kind}");
        }
    }

    /// The JSON object of this side.
    pub fn json(&self) -> serde_json::Value {
        let (msgs, mb) = self.rate();
        serde_json::json!({
            "messages": self.messages,
            "bytes": self.bytes,
            "messages_total": self.messages_total,
            "acknowledged": if self.name == "produce" && self.latency_of != ONEWAY {
                serde_json::json!(self.messages_total)
            } else {
                serde_json::Value::Null
            },
            "sent": self.sent_total,
            "elapsed_secs": self.elapsed.as_secs_f64(),
            "msgs_per_sec": msgs,
            "mb_per_sec": mb,
            "latency_of": self.latency_of,
            "latency_us": super::super::latency_json(&self.latency),
            "latency_samples": self.latency.len(),
            "timeline": self.timeline.as_ref().map(Series::json),
            "errors": self.errors,
            "error_count": self.error_count(),
        })
    }
}

/// One live progress line per second on stderr until `stop` is set.
pub async fn progress(sides: Vec<Arc<Side>>, start: Instant, stop: Arc<tokio::sync::Notify>) {
    let mut ticker = tokio::time::interval(Duration::from_secs(1));
    ticker.tick().await;
    let mut last = Instant::now();
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            () = stop.notified() => return,
        }
        let now = Instant::now();
        let parts: Vec<String> = sides
            .iter()
            .map(|side| side.interval_line(now - last))
            .collect();
        last = now;
        eprintln!(
            "[{:>5.1}s] {}",
            (now - start).as_secs_f64(),
            parts.join(" | ")
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_after_warm_up_only_but_counts_all() {
        let start = Instant::now();
        let clock = WindowClock::new(start, Duration::from_secs(3));
        let side = Side::new("produce", "send", start + Duration::from_secs(1), clock);
        let mut recorder = side.recorder();
        recorder.record(start, 2, 10, Some(Duration::from_micros(5)));
        recorder.record(
            start + Duration::from_secs(2),
            3,
            30,
            Some(Duration::from_millis(2)),
        );
        drop(recorder);
        let summary = side.summary(start + Duration::from_secs(3));
        assert_eq!(summary.messages_total, 5);
        assert_eq!(summary.messages, 3);
        assert_eq!(summary.bytes, 30);
        assert_eq!(summary.latency.len(), 1);
        assert!(summary.latency.min() >= 1990);
        // Windows from the end of the warm-up to the last event, the sample in the last.
        let timeline = summary.timeline.unwrap();
        assert_eq!(timeline.windows.len(), 11);
        assert_eq!(timeline.windows[0].start, Duration::from_secs(1));
        assert_eq!(timeline.windows[10].count, 1);
    }

    #[test]
    fn a_recorder_hands_its_last_window_over_when_dropped() {
        let start = Instant::now();
        let clock = WindowClock::new(start, Duration::from_secs(1));
        let side = Side::new("consume", "pull", start, clock);
        let mut recorder = side.recorder();
        for ms in [10, 20, 130] {
            let at = start + Duration::from_millis(ms);
            recorder.record(at, 1, 1, Some(Duration::from_millis(ms)));
        }
        let counts = |side: &Side| -> Vec<u64> {
            let summary = side.summary(start + Duration::from_millis(130));
            let windows = summary.timeline.unwrap().windows;
            windows.iter().map(|w| w.count).collect()
        };
        assert_eq!(
            counts(&side),
            [2, 0],
            "the window of 130 ms is still the task's"
        );
        drop(recorder);
        assert_eq!(counts(&side), [2, 1]);
    }
}
