//! Counters and latency histograms of one side of a run (produce or consume), the live
//! progress line, and the final report as text, JSON and an SVG percentile curve.
//!
//! Latencies are recorded in microseconds. Samples taken before the warm-up ends count
//! towards the `*_total` counters (so that counts can be checked against the broker) but not
//! towards the measured rates and percentiles.

use hdrhistogram::Histogram;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The `latency_of` of oneway sends, which have no answers to time.
pub const ONEWAY: &str = "none: oneway";

/// Largest latency the histograms hold (one hour, in µs); larger samples saturate.
const LATENCY_MAX_US: u64 = 3_600_000_000;

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
    interval_messages: u64,
    interval_bytes: u64,
    interval_errors: u64,
    interval_latency: Histogram<u64>,
}

impl Side {
    /// A side whose measurement starts at `measure_from`.
    pub fn new(name: &'static str, latency_of: &'static str, measure_from: Instant) -> Arc<Side> {
        Arc::new(Side {
            name,
            latency_of,
            inner: Mutex::new(Counters {
                measure_from,
                last_event: None,
                messages: 0,
                bytes: 0,
                messages_total: 0,
                sent_total: 0,
                errors: BTreeMap::new(),
                latency: histogram(),
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

    /// Records `messages` messages of `bytes` body bytes done at `now`, with one latency
    /// sample (none for oneway sends).
    pub fn record(&self, now: Instant, messages: u64, bytes: u64, latency: Option<Duration>) {
        let mut c = self.lock();
        c.messages_total += messages;
        if now < c.measure_from {
            return;
        }
        c.messages += messages;
        c.bytes += bytes;
        c.interval_messages += messages;
        c.interval_bytes += bytes;
        c.last_event = Some(now);
        if let Some(latency) = latency {
            let us = u64::try_from(latency.as_micros())
                .unwrap_or(u64::MAX)
                .max(1);
            c.latency.saturating_record(us);
            c.interval_latency.saturating_record(us);
        }
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
            "{} {:>9.0} msg/s {:>8.2} MB/s p99 {:>8.3} ms err {}",
            self.name,
            c.interval_messages as f64 / secs,
            c.interval_bytes as f64 / secs / 1e6,
            c.interval_latency.value_at_quantile(0.99) as f64 / 1000.0,
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
        let elapsed = c
            .last_event
            .unwrap_or(end)
            .saturating_duration_since(c.measure_from);
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
        }
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

/// The latency percentile curves as a small SVG: x on a "nines" scale (0, 90, 99, 99.9,
/// 99.99 %), y in milliseconds.
pub fn svg(curves: &[(&str, &Histogram<u64>)], title: &str) -> String {
    const W: f64 = 640.0;
    const H: f64 = 400.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 20.0;
    const TOP: f64 = 40.0;
    const BOTTOM: f64 = 50.0;
    const NINES: f64 = 4.0;
    const COLORS: [&str; 3] = ["#1f77b4", "#d62728", "#2ca02c"];
    let steps = 200;
    let point = |step: usize| -> f64 { NINES * step as f64 / steps as f64 };
    let quantile = |x: f64| -> f64 { 1.0 - 10f64.powf(-x) };
    let y_max_ms = curves
        .iter()
        .filter(|(_, h)| !h.is_empty())
        .map(|(_, h)| h.value_at_quantile(quantile(NINES)) as f64 / 1000.0)
        .fold(0.0, f64::max);
    let y_max_ms = nice_ceiling(y_max_ms.max(0.001));
    let px = |x: f64| LEFT + x / NINES * (W - LEFT - RIGHT);
    let py = |ms: f64| H - BOTTOM - (ms / y_max_ms).min(1.0) * (H - TOP - BOTTOM);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" "#
    );
    let _ = writeln!(
        s,
        r#"viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="20" text-anchor="middle" font-size="14">{}</text>"#,
        W / 2.0,
        xml_escape(title)
    );
    // Axes, grid and labels.
    let (x0, x1, y0, y1) = (px(0.0), px(NINES), py(0.0), py(y_max_ms));
    let _ = writeln!(
        s,
        r#"<path d="M{x0},{y1} L{x0},{y0} L{x1},{y0}" stroke="black" fill="none"/>"#
    );
    for (i, label) in ["0", "90", "99", "99.9", "99.99"].iter().enumerate() {
        let x = px(i as f64);
        let _ = write!(
            s,
            r##"<line x1="{x}" y1="{y0}" x2="{x}" y2="{y1}" stroke="#ddd"/>"##
        );
        let ty = y0 + 18.0;
        let _ = writeln!(
            s,
            r##"<text x="{x}" y="{ty}" text-anchor="middle">{label}</text>"##
        );
    }
    for i in 0..=4 {
        let ms = y_max_ms * f64::from(i) / 4.0;
        let y = py(ms);
        let _ = write!(
            s,
            r##"<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#ddd"/>"##
        );
        let (tx, ty, label) = (x0 - 6.0, y + 4.0, format_ms(ms));
        let _ = writeln!(
            s,
            r##"<text x="{tx}" y="{ty}" text-anchor="end">{label}</text>"##
        );
    }
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">percentile</text>"#,
        (x0 + x1) / 2.0,
        H - 10.0
    );
    let mid = (y0 + y1) / 2.0;
    let _ = write!(s, r#"<text x="16" y="{mid}" text-anchor="middle" "#);
    let _ = writeln!(s, r#"transform="rotate(-90 16 {mid})">latency (ms)</text>"#);
    for (index, (label, h)) in curves.iter().enumerate() {
        let color = COLORS[index % COLORS.len()];
        if !h.is_empty() {
            let points: Vec<String> = (0..=steps)
                .map(|step| {
                    let x = point(step);
                    let ms = h.value_at_quantile(quantile(x)) as f64 / 1000.0;
                    format!("{:.1},{:.1}", px(x), py(ms))
                })
                .collect();
            let _ = writeln!(
                s,
                r#"<polyline points="{}" stroke="{color}" stroke-width="2" fill="none"/>"#,
                points.join(" ")
            );
        }
        let y = TOP + 16.0 * index as f64;
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" fill="{color}">{}</text>"#,
            x0 + 10.0,
            y + 4.0,
            xml_escape(label)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The smallest of 1, 2, 5 times a power of ten that is at least `value`.
fn nice_ceiling(value: f64) -> f64 {
    let magnitude = 10f64.powf(value.log10().floor());
    for factor in [1.0, 2.0, 5.0, 10.0] {
        if factor * magnitude >= value {
            return factor * magnitude;
        }
    }
    10.0 * magnitude
}

fn format_ms(ms: f64) -> String {
    if ms == 0.0 {
        "0".to_owned()
    } else if ms >= 10.0 {
        format!("{ms:.0}")
    } else if ms >= 0.1 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.3}")
    }
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_after_warm_up_only_but_counts_all() {
        let start = Instant::now();
        let side = Side::new("produce", "send", start + Duration::from_secs(1));
        side.record(start, 2, 10, Some(Duration::from_micros(5)));
        side.record(
            start + Duration::from_secs(2),
            3,
            30,
            Some(Duration::from_millis(2)),
        );
        let summary = side.summary(start + Duration::from_secs(3));
        assert_eq!(summary.messages_total, 5);
        assert_eq!(summary.messages, 3);
        assert_eq!(summary.bytes, 30);
        assert_eq!(summary.latency.len(), 1);
        assert!(summary.latency.min() >= 1990);
    }

    #[test]
    fn svg_has_a_curve_per_histogram_and_nines_labels() {
        let mut h = histogram();
        for v in 1..=10_000 {
            h.saturating_record(v);
        }
        let text = svg(&[("send", &h)], "test");
        assert!(text.contains("<polyline"));
        assert!(text.contains(">99.99<"));
        assert!(text.starts_with("<svg"));
        assert_eq!(nice_ceiling(7.3), 10.0);
        assert_eq!(nice_ceiling(0.15), 0.2);
    }
}
