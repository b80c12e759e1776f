//! Latency over time: the latencies of a run in windows of [`WINDOW`] by the time each sample
//! completed, and per window its count, p50, p99 and max, so that a stall shows as a spike at
//! its time (or as windows without a sample) where the run's percentiles only show that it
//! happened somewhere.
//!
//! Recording stays off the locks of a run's hot path: a task that shares its [`Windows`] with
//! others records into a [`LocalWindow`] of its own and hands it over (one lock) only when its
//! samples move on to a later window, or when it ends; a single-threaded executor records into
//! its [`Windows`] directly.
//!
//! Memory is bounded by the run's length: [`WindowClock`] has at most one window per 100 ms
//! of the span it was made for (a later sample counts in its last window), and each window is
//! a histogram at 2 significant digits that grows with the largest latency it holds, to at
//! most 13 KiB at [`LATENCY_MAX_US`].

use hdrhistogram::Histogram;
use std::time::{Duration, Instant};

/// The length of a window.
pub const WINDOW: Duration = Duration::from_millis(100);

/// Largest latency recorded (one hour, in µs); larger samples count as this.
pub const LATENCY_MAX_US: u64 = 3_600_000_000;

/// Precision of a window's percentiles: 2 significant digits (1 %), which keeps a window a
/// few KiB; the run's own percentiles keep 3.
const WINDOW_SIGNIFICANT_DIGITS: u8 = 2;

/// Where a run's windows start and how many there may be.
#[derive(Debug, Clone, Copy)]
pub struct WindowClock {
    origin: Instant,
    windows_max: usize,
}

impl WindowClock {
    /// Windows from `origin` that cover `span` (one more for the part window at its end).
    pub fn new(origin: Instant, span: Duration) -> WindowClock {
        let windows = span.as_nanos().div_ceil(WINDOW.as_nanos()) + 1;
        WindowClock {
            origin,
            windows_max: usize::try_from(windows).unwrap_or(usize::MAX),
        }
    }

    /// The window of `at`: the first for times before the origin, the last for times after
    /// the span.
    pub fn index(self, at: Instant) -> usize {
        let offset = at.saturating_duration_since(self.origin);
        let index = offset.as_nanos() / WINDOW.as_nanos();
        usize::try_from(index).map_or(self.windows_max - 1, |i| i.min(self.windows_max - 1))
    }

    /// The start of window `index`, from the origin.
    fn start_of(index: usize) -> Duration {
        WINDOW * u32::try_from(index).unwrap_or(u32::MAX)
    }
}

/// The windows of one run (or one side of it).
#[derive(Debug)]
pub struct Windows {
    clock: WindowClock,
    /// Window `i` covers `[origin + i × WINDOW, origin + (i + 1) × WINDOW)`; grown on demand
    /// to at most `clock.windows_max`.
    histograms: Vec<Histogram<u32>>,
}

impl Windows {
    /// No samples yet.
    pub fn new(clock: WindowClock) -> Windows {
        Windows {
            clock,
            histograms: Vec::new(),
        }
    }

    /// Records one latency that completed at `at`.
    pub fn record(&mut self, at: Instant, latency_us: u64) {
        let index = self.clock.index(at);
        record_into(self.window(index), latency_us);
    }

    /// Adds the samples of window `index` that a task gathered.
    pub fn add(&mut self, index: usize, samples: &Histogram<u32>) {
        let index = index.min(self.clock.windows_max - 1);
        self.window(index)
            .add(samples)
            .expect("an auto-resizing histogram takes any latency up to LATENCY_MAX_US");
    }

    /// Adds the windows of `other`, recorded on the same clock (the other executor of a run).
    pub fn merge(&mut self, other: &Windows) {
        assert_eq!(
            self.clock.origin, other.clock.origin,
            "windows on one clock"
        );
        for (index, samples) in other.histograms.iter().enumerate() {
            if !samples.is_empty() {
                self.add(index, samples);
            }
        }
    }

    /// Every window from the one of `from` to the one of `to`, widened to every window that
    /// holds a sample (so that the counts add up to every sample recorded).
    pub fn series(&self, from: Instant, to: Instant) -> Series {
        let recorded = || {
            self.histograms
                .iter()
                .enumerate()
                .filter(|(_, h)| !h.is_empty())
        };
        let first = recorded().map(|(i, _)| i).next();
        let last = recorded().map(|(i, _)| i).next_back();
        let first = first.map_or(self.clock.index(from), |i| i.min(self.clock.index(from)));
        let last = last.map_or(self.clock.index(to), |i| i.max(self.clock.index(to)));
        let windows = (first..=last.max(first))
            .map(|index| {
                let start = WindowClock::start_of(index);
                match self.histograms.get(index).filter(|h| !h.is_empty()) {
                    Some(h) => WindowSummary {
                        start,
                        count: h.len(),
                        p50_us: h.value_at_quantile(0.50),
                        p99_us: h.value_at_quantile(0.99),
                        max_us: h.max(),
                    },
                    None => WindowSummary {
                        start,
                        count: 0,
                        p50_us: 0,
                        p99_us: 0,
                        max_us: 0,
                    },
                }
            })
            .collect();
        Series { windows }
    }

    fn window(&mut self, index: usize) -> &mut Histogram<u32> {
        assert!(index < self.clock.windows_max);
        while self.histograms.len() <= index {
            self.histograms.push(window_histogram());
        }
        &mut self.histograms[index]
    }
}

/// The samples of a task's current window, not yet handed to the shared [`Windows`].
#[derive(Debug)]
pub struct LocalWindow {
    index: usize,
    samples: Histogram<u32>,
}

impl LocalWindow {
    /// Empty.
    pub fn new() -> LocalWindow {
        LocalWindow {
            index: 0,
            samples: window_histogram(),
        }
    }

    /// Records a latency of window `index`; first hands the samples of an earlier window to
    /// `hand_over` (as `Windows::add` takes them).
    pub fn record(
        &mut self,
        index: usize,
        latency_us: u64,
        hand_over: impl FnOnce(usize, &Histogram<u32>),
    ) {
        if index != self.index {
            self.finish(hand_over);
            self.index = index;
        }
        record_into(&mut self.samples, latency_us);
    }

    /// Hands the samples gathered to `hand_over`, if there are any.
    pub fn finish(&mut self, hand_over: impl FnOnce(usize, &Histogram<u32>)) {
        if !self.samples.is_empty() {
            hand_over(self.index, &self.samples);
            self.samples.reset();
        }
    }
}

/// The windows of a run, consecutive, each with its summary.
#[derive(Debug, Clone)]
pub struct Series {
    /// In time order, one per [`WINDOW`], with no gap.
    pub windows: Vec<WindowSummary>,
}

/// One window's latencies.
#[derive(Debug, Clone, Copy)]
pub struct WindowSummary {
    /// From the run's origin.
    pub start: Duration,
    /// Samples that completed in the window; 0 when nothing did (then the latencies are 0).
    pub count: u64,
    /// Median, µs.
    pub p50_us: u64,
    /// 99th percentile, µs.
    pub p99_us: u64,
    /// Largest, µs.
    pub max_us: u64,
}

impl Series {
    /// The window with the largest latency.
    pub fn worst(&self) -> Option<&WindowSummary> {
        self.windows
            .iter()
            .filter(|w| w.count > 0)
            .max_by_key(|w| w.max_us)
    }

    /// Windows in which nothing completed.
    pub fn empty_count(&self) -> usize {
        self.windows.iter().filter(|w| w.count == 0).count()
    }

    /// As JSON: the window length and one object per window, latencies `null` when the window
    /// has no sample.
    pub fn json(&self) -> serde_json::Value {
        let windows: Vec<_> = self
            .windows
            .iter()
            .map(|w| {
                let latency = |us: u64| (w.count > 0).then_some(us);
                serde_json::json!({
                    "start_ms": duration_ms(w.start),
                    "count": w.count,
                    "p50_us": latency(w.p50_us),
                    "p99_us": latency(w.p99_us),
                    "max_us": latency(w.max_us),
                })
            })
            .collect();
        serde_json::json!({
            "window_ms": duration_ms(WINDOW),
            "windows": windows,
        })
    }
}

fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

fn window_histogram() -> Histogram<u32> {
    // Auto-resizing from a small start: an idle window costs about a KiB.
    Histogram::new(WINDOW_SIGNIFICANT_DIGITS).expect("2 significant digits are valid")
}

fn record_into(histogram: &mut Histogram<u32>, latency_us: u64) {
    let latency_us = latency_us.clamp(1, LATENCY_MAX_US);
    // `record` grows the histogram; it fails only where a usize cannot index the counts.
    if histogram.record(latency_us).is_err() {
        histogram.saturating_record(latency_us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(origin: Instant, ms: u64) -> Instant {
        origin + Duration::from_millis(ms)
    }

    #[test]
    fn a_stall_shows_as_empty_windows_then_a_spike_at_its_time() {
        let origin = Instant::now();
        let mut windows = Windows::new(WindowClock::new(origin, Duration::from_secs(2)));
        for ms in (0..1_000).step_by(5) {
            // Nothing completes from 400 to 700 ms; what waited completes at 705 ms.
            if (400..700).contains(&ms) {
                continue;
            }
            let latency_us = if ms == 700 { 300_000 } else { 500 };
            windows.record(at(origin, ms + 5), latency_us);
        }
        let series = windows.series(origin, at(origin, 1_000));
        let starts: Vec<u64> = series
            .windows
            .iter()
            .map(|w| duration_ms(w.start))
            .collect();
        assert_eq!(starts, (0..=1_000).step_by(100).collect::<Vec<_>>());
        let counts: Vec<u64> = series.windows.iter().map(|w| w.count).collect();
        assert_eq!(counts, [19, 20, 20, 20, 1, 0, 0, 19, 20, 20, 1]);
        let worst = series.worst().unwrap();
        assert_eq!(duration_ms(worst.start), 700);
        assert!(
            worst.max_us >= 300_000 && worst.max_us < 303_000,
            "{worst:?}"
        );
        assert!(worst.p50_us < 510, "{worst:?}");
        assert_eq!(series.empty_count(), 2);
        let json = series.json();
        assert_eq!(json["window_ms"], 100);
        assert!(json["windows"][5]["p99_us"].is_null());
        assert_eq!(json["windows"][8]["count"], 20);
    }

    #[test]
    fn tasks_hand_over_each_window_once_and_nothing_is_lost() {
        let origin = Instant::now();
        let clock = WindowClock::new(origin, Duration::from_secs(1));
        let mut shared = Windows::new(clock);
        let mut handed_over = Vec::new();
        let mut tasks = [LocalWindow::new(), LocalWindow::new()];
        for ms in 0..1_000 {
            let task = &mut tasks[usize::try_from(ms % 2).unwrap()];
            task.record(clock.index(at(origin, ms)), ms + 1, |index, samples| {
                handed_over.push(index);
                shared.add(index, samples);
            });
        }
        for task in &mut tasks {
            task.finish(|index, samples| {
                handed_over.push(index);
                shared.add(index, samples);
            });
        }
        // Each task hands each of the 10 windows over once.
        assert_eq!(handed_over.len(), 20);
        let series = shared.series(origin, origin);
        assert_eq!(
            series.windows.len(),
            10,
            "widened to every window with samples"
        );
        assert!(series.windows.iter().all(|w| w.count == 100));
        assert!((400..=404).contains(&series.windows[3].max_us));
    }

    #[test]
    fn windows_are_bounded_by_the_span_and_merge_on_one_clock() {
        let origin = Instant::now();
        let clock = WindowClock::new(origin, Duration::from_millis(250));
        assert_eq!(clock.windows_max, 4);
        let mut a = Windows::new(clock);
        let mut b = Windows::new(clock);
        a.record(at(origin, 50), 10);
        // Later than the span: the last window.
        b.record(at(origin, 60_000), LATENCY_MAX_US * 2);
        a.merge(&b);
        assert_eq!(a.histograms.len(), 4);
        let series = a.series(origin, at(origin, 100));
        assert_eq!(series.windows.len(), 4);
        let last = series.windows[3];
        assert_eq!(last.count, 1);
        assert!(last.max_us >= LATENCY_MAX_US && last.max_us < LATENCY_MAX_US / 100 * 101);
        assert!(last.p50_us <= last.p99_us && last.p99_us <= last.max_us);
    }
}
