//! SVG charts, drawn here as text (no script, no network): latency percentile curves, and
//! latency over time (p50, p99 and max per window, windows without a sample shaded), stacked
//! in one document.
//!
//! Each chart is a `<g>` of its own, moved down by the charts above it; inside, coordinates
//! start at its top left corner. Every value is escaped or a number, so the document is
//! well-formed XML whatever the labels say.

use super::timeline::{Series, WINDOW};
use hdrhistogram::Histogram;
use std::fmt::Write as _;

/// Width of every chart.
const WIDTH: f64 = 640.0;
/// Heights of the charts.
const PERCENTILES_HEIGHT: f64 = 400.0;
const TIMELINE_HEIGHT: f64 = 300.0;
/// Margins around a chart's plot area.
const LEFT: f64 = 70.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 40.0;
const BOTTOM: f64 = 50.0;
/// The percentile chart's x axis ends at 99.99 %: four nines.
const NINES: f64 = 4.0;
/// Points per percentile curve.
const CURVE_STEPS: usize = 200;
const COLORS: [&str; 3] = ["#1f77b4", "#d62728", "#2ca02c"];
/// p50, p99 and max over time.
const TIMELINE_LINES: [(&str, &str); 3] =
    [("p50", "#1f77b4"), ("p99", "#ff7f0e"), ("max", "#d62728")];
/// The shade of windows in which nothing completed, and its legend's colour.
const EMPTY_FILL: &str = "#fbdada";
const EMPTY_LEGEND: &str = "#c05050";

/// Charts stacked top to bottom.
#[derive(Debug, Default)]
pub struct Document {
    body: String,
    height: f64,
}

impl Document {
    /// No chart yet.
    pub fn new() -> Document {
        Document::default()
    }

    /// Latency percentile curves: x on a "nines" scale (0, 90, 99, 99.9, 99.99 %), y in ms.
    pub fn percentiles(&mut self, title: &str, curves: &[(&str, &Histogram<u64>)]) {
        let y_max_ms = curves
            .iter()
            .filter(|(_, h)| !h.is_empty())
            .map(|(_, h)| ms(h.value_at_quantile(quantile(NINES))))
            .fold(0.0, f64::max);
        let area = Area::new(PERCENTILES_HEIGHT, y_max_ms);
        let ticks: Vec<(f64, String)> = ["0", "90", "99", "99.9", "99.99"]
            .iter()
            .enumerate()
            .map(|(nines, label)| (nines as f64 / NINES, (*label).to_owned()))
            .collect();
        let s = self.open("percentiles", PERCENTILES_HEIGHT);
        area.frame(s, title, "percentile", &ticks);
        for (index, (label, h)) in curves.iter().enumerate() {
            let color = COLORS[index % COLORS.len()];
            if !h.is_empty() {
                let points: Vec<String> = (0..=CURVE_STEPS)
                    .map(|step| {
                        let nines = NINES * step as f64 / CURVE_STEPS as f64;
                        let y = area.y(ms(h.value_at_quantile(quantile(nines))));
                        format!("{:.1},{y:.1}", area.x(nines / NINES))
                    })
                    .collect();
                let _ = writeln!(
                    s,
                    r#"<polyline points="{}" stroke="{color}" stroke-width="2" fill="none"/>"#,
                    points.join(" ")
                );
            }
            area.legend(s, index, label, color);
        }
        self.close();
    }

    /// Latency over time: per window, p50, p99 and max as steps, x in seconds from the run's
    /// start, y in ms; windows without a sample shaded.
    pub fn timeline(&mut self, title: &str, series: &Series) {
        let (Some(first), Some(last)) = (series.windows.first(), series.windows.last()) else {
            return;
        };
        let from_secs = first.start.as_secs_f64();
        let span_secs = (last.start + WINDOW).as_secs_f64() - from_secs;
        let fraction = |secs: f64| (secs - from_secs) / span_secs;
        let y_max_ms = series
            .windows
            .iter()
            .map(|w| ms(w.max_us))
            .fold(0.0, f64::max);
        let area = Area::new(TIMELINE_HEIGHT, y_max_ms);
        let step_secs = nice_ceiling(span_secs / 8.0);
        let ticks: Vec<(f64, String)> = (0..)
            .map(|i| (from_secs / step_secs).ceil() * step_secs + f64::from(i) * step_secs)
            .take_while(|secs| fraction(*secs) <= 1.0 + 1e-9)
            .map(|secs| (fraction(secs), format_number(secs)))
            .collect();
        let window_secs = WINDOW.as_secs_f64();
        let s = self.open("timeline", TIMELINE_HEIGHT);
        for w in series.windows.iter().filter(|w| w.count == 0) {
            let start = w.start.as_secs_f64();
            let (x0, x1) = (
                area.x(fraction(start)),
                area.x(fraction(start + window_secs)),
            );
            let (y0, y1) = (area.y(area.y_max_ms), area.y(0.0));
            let (width, height) = (x1 - x0, y1 - y0);
            let _ = write!(s, r#"<rect class="empty" x="{x0:.1}" y="{y0:.1}" "#);
            let _ = write!(s, r#"width="{width:.1}" height="{height:.1}" "#);
            // Crisp edges: no seams between empty windows side by side.
            let _ = writeln!(s, r#"fill="{EMPTY_FILL}" shape-rendering="crispEdges"/>"#);
        }
        area.frame(s, title, "time since start (s)", &ticks);
        for (index, (name, color)) in TIMELINE_LINES.iter().enumerate() {
            // Steps across each window; a window without a sample breaks the line.
            let mut d = String::new();
            let mut drawing = false;
            for w in &series.windows {
                if w.count == 0 {
                    drawing = false;
                    continue;
                }
                let us = match *name {
                    "p50" => w.p50_us,
                    "p99" => w.p99_us,
                    _ => w.max_us,
                };
                let start = w.start.as_secs_f64();
                let y = area.y(ms(us));
                let (x0, x1) = (
                    area.x(fraction(start)),
                    area.x(fraction(start + window_secs)),
                );
                let _ = write!(
                    d,
                    "{}{x0:.1},{y:.1} L{x1:.1},{y:.1} ",
                    if drawing { "L" } else { "M" }
                );
                drawing = true;
            }
            let _ = writeln!(
                s,
                r#"<path class="{name}" d="{}" stroke="{color}" stroke-width="1.5" fill="none"/>"#,
                d.trim_end()
            );
            area.legend(s, index, name, color);
        }
        if series.empty_count() > 0 {
            let label = "shaded: no answer in the window";
            area.legend(s, TIMELINE_LINES.len(), label, EMPTY_LEGEND);
        }
        self.close();
    }

    /// The SVG document.
    pub fn finish(self) -> String {
        let (width, height) = (WIDTH, self.height.max(1.0));
        let mut s = String::new();
        let _ = write!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" "#
        );
        let _ = writeln!(
            s,
            r#"viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(
            s,
            r#"<rect width="{width}" height="{height}" fill="white"/>"#
        );
        s.push_str(&self.body);
        s.push_str("</svg>\n");
        s
    }

    /// Opens a chart's group below the charts so far.
    fn open(&mut self, class: &str, height: f64) -> &mut String {
        let _ = writeln!(
            self.body,
            r#"<g class="{class}" transform="translate(0 {})">"#,
            self.height
        );
        self.height += height;
        &mut self.body
    }

    fn close(&mut self) {
        self.body.push_str("</g>\n");
    }
}

/// The plot area of one chart and its y scale: 0 to a round number of ms.
struct Area {
    height: f64,
    y_max_ms: f64,
}

impl Area {
    fn new(height: f64, y_max_ms: f64) -> Area {
        Area {
            height,
            y_max_ms: nice_ceiling(y_max_ms.max(0.001)),
        }
    }

    /// The x of a fraction of the width of the plot area.
    fn x(&self, fraction: f64) -> f64 {
        LEFT + fraction * (WIDTH - LEFT - RIGHT)
    }

    fn y(&self, ms: f64) -> f64 {
        self.height - BOTTOM - (ms / self.y_max_ms).min(1.0) * (self.height - TOP - BOTTOM)
    }

    /// Title, axes, grid and tick labels: `x_ticks` as fractions of the width and their
    /// labels, the y axis in five steps from 0.
    fn frame(&self, s: &mut String, title: &str, x_label: &str, x_ticks: &[(f64, String)]) {
        let _ = writeln!(
            s,
            r#"<text x="{}" y="20" text-anchor="middle" font-size="14">{}</text>"#,
            WIDTH / 2.0,
            xml_escape(title)
        );
        let (x0, x1, y0, y1) = (self.x(0.0), self.x(1.0), self.y(0.0), self.y(self.y_max_ms));
        let _ = writeln!(
            s,
            r#"<path d="M{x0},{y1} L{x0},{y0} L{x1},{y0}" stroke="black" fill="none"/>"#
        );
        for (fraction, label) in x_ticks {
            let x = self.x(*fraction);
            let _ = write!(
                s,
                r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#ddd"/>"##
            );
            let ty = y0 + 18.0;
            let _ = writeln!(
                s,
                r##"<text x="{x:.1}" y="{ty}" text-anchor="middle">{}</text>"##,
                xml_escape(label)
            );
        }
        for i in 0..=4 {
            let ms = self.y_max_ms * f64::from(i) / 4.0;
            let y = self.y(ms);
            let _ = write!(
                s,
                r##"<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#ddd"/>"##
            );
            let (tx, ty, label) = (x0 - 6.0, y + 4.0, format_number(ms));
            let _ = writeln!(
                s,
                r##"<text x="{tx}" y="{ty}" text-anchor="end">{label}</text>"##
            );
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            (x0 + x1) / 2.0,
            self.height - 10.0,
            xml_escape(x_label)
        );
        let mid = (y0 + y1) / 2.0;
        let _ = write!(s, r#"<text x="16" y="{mid}" text-anchor="middle" "#);
        let _ = writeln!(s, r#"transform="rotate(-90 16 {mid})">latency (ms)</text>"#);
    }

    /// Entry `index` of the legend, top left of the plot area.
    fn legend(&self, s: &mut String, index: usize, label: &str, color: &str) {
        let (x, y) = (self.x(0.0) + 10.0, TOP + 16.0 * index as f64 + 4.0);
        let _ = writeln!(
            s,
            r#"<text x="{x}" y="{y}" fill="{color}">{}</text>"#,
            xml_escape(label)
        );
    }
}

/// µs to ms.
fn ms(us: u64) -> f64 {
    us as f64 / 1000.0
}

/// The quantile `nines` nines from 0: 0 → 0, 1 → 0.9, 2 → 0.99, ...
fn quantile(nines: f64) -> f64 {
    1.0 - 10f64.powf(-nines)
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

/// A tick label: as few digits as its size needs, without trailing zeros.
fn format_number(value: f64) -> String {
    let text = if value >= 10.0 {
        format!("{value:.0}")
    } else if value >= 0.1 {
        format!("{value:.2}")
    } else {
        format!("{value:.3}")
    };
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    }
}

fn xml_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workloads::timeline::{WindowClock, Windows};
    use std::time::{Duration, Instant};

    #[test]
    fn percentiles_draw_a_curve_per_histogram_and_nines_labels() {
        let mut h = Histogram::new_with_bounds(1, 3_600_000_000, 3).unwrap();
        for v in 1..=10_000 {
            h.saturating_record(v);
        }
        let mut document = Document::new();
        document.percentiles("test <&>", &[("send", &h)]);
        let text = document.finish();
        assert!(text.starts_with("<svg"));
        assert!(text.contains("<polyline"));
        assert!(text.contains(">99.99<"));
        assert!(text.contains("test &lt;&amp;&gt;"));
        assert_eq!(nice_ceiling(7.3), 10.0);
        assert_eq!(nice_ceiling(0.15), 0.2);
        let labels = [0.0, 0.25, 0.5, 2.0, 12.7, 250.0].map(format_number);
        assert_eq!(labels, ["0", "0.25", "0.5", "2", "13", "250"]);
    }

    #[test]
    fn a_timeline_has_a_step_line_per_statistic_and_shades_empty_windows() {
        let origin = Instant::now();
        let mut windows = Windows::new(WindowClock::new(origin, Duration::from_secs(1)));
        for ms in [50, 150, 450, 550] {
            windows.record(origin + Duration::from_millis(ms), ms * 10);
        }
        let series = windows.series(origin, origin + Duration::from_millis(550));
        let mut document = Document::new();
        document.percentiles("curves", &[]);
        document.timeline("over time", &series);
        let text = document.finish();
        assert!(text.contains(r#"height="700""#), "both charts stacked");
        assert!(text.contains(r#"<g class="timeline" transform="translate(0 400)">"#));
        // The windows at 200 and 300 ms hold nothing: two shaded windows.
        assert_eq!(text.matches(r#"<rect class="empty""#).count(), 2);
        for name in ["p50", "p99", "max"] {
            let start = text.find(&format!(r#"<path class="{name}" d=""#)).unwrap();
            let d = text[start..].split('"').nth(3).unwrap();
            // Two runs of windows: two moves, each window a step of two points.
            assert_eq!(d.matches('M').count(), 2, "{d}");
            assert_eq!(d.matches(',').count(), 8, "{d}");
        }
        assert!(text.contains("no answer in the window"));
    }
}
