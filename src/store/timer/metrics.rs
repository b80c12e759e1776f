//! `TimerMetrics` (Java `store/.../timer/TimerMetrics.java`): `config/timermetrics`, the
//! count of pending timer messages per real topic, as fastjson writes Java's
//! `TimerMetricsSerializeWrapper` (fields in name order):
//!
//! ```json
//! {"dataVersion":{"counter":1,"stateVersion":0,"timestamp":1700000000000},
//!  "timingCount":{"TopicTest":{"count":3,"timeStamp":1700000000000}}}
//! ```
//!
//! One entry per topic, never per message. Java moves the file to `.bak` before writing
//! it; ferromq writes a snapshot beside it and renames (the same file at every instant a
//! reader looks).

use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// One topic's pending count (`TimerMetrics.Metric`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Metric {
    /// Pending messages.
    pub count: i64,
    /// When the entry was made, ms.
    pub time_stamp: i64,
}

/// The metrics table.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TimerMetrics {
    /// Real topic → pending count.
    pub timing_count: BTreeMap<String, Metric>,
    /// `dataVersion`: counter, stateVersion, timestamp.
    pub data_version: (i64, i64, i64),
}

impl TimerMetrics {
    /// Adds `value` to `topic`'s count (`addAndGet`).
    pub fn add(&mut self, topic: &str, value: i64, now_ms: i64) {
        let entry = self.timing_count.entry(topic.to_owned()).or_insert(Metric {
            count: 0,
            time_stamp: now_ms,
        });
        entry.count += value;
    }

    /// The file's text.
    #[must_use]
    pub fn to_json(&self) -> String {
        let mut counts = Map::new();
        for (topic, metric) in &self.timing_count {
            counts.insert(
                topic.clone(),
                json!({"count": metric.count, "timeStamp": metric.time_stamp}),
            );
        }
        let (counter, state_version, timestamp) = self.data_version;
        json!({
            "dataVersion": {
                "counter": counter,
                "stateVersion": state_version,
                "timestamp": timestamp,
            },
            "timingCount": Value::Object(counts),
        })
        .to_string()
    }

    /// Reads the file's text; `None` when it is not Java's shape.
    #[must_use]
    pub fn parse(text: &[u8]) -> Option<TimerMetrics> {
        let value: Value = serde_json::from_slice(text).ok()?;
        let mut metrics = TimerMetrics::default();
        if let Some(version) = value.get("dataVersion") {
            let field = |name: &str| version.get(name).and_then(Value::as_i64).unwrap_or(0);
            metrics.data_version = (field("counter"), field("stateVersion"), field("timestamp"));
        }
        if let Some(counts) = value.get("timingCount").and_then(Value::as_object) {
            for (topic, metric) in counts {
                let count = metric.get("count").and_then(Value::as_i64)?;
                let time_stamp = metric.get("timeStamp").and_then(Value::as_i64).unwrap_or(0);
                metrics
                    .timing_count
                    .insert(topic.clone(), Metric { count, time_stamp });
            }
        }
        Some(metrics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_write_javas_shape_and_read_back() {
        let mut metrics = TimerMetrics {
            data_version: (1, 0, 1_700_000_000_000),
            ..TimerMetrics::default()
        };
        metrics.add("TopicTest", 3, 1_700_000_000_000);
        metrics.add("TopicTest", -1, 5);
        let text = metrics.to_json();
        assert_eq!(
            text,
            concat!(
                r#"{"dataVersion":{"counter":1,"stateVersion":0,"timestamp":1700000000000},"#,
                r#""timingCount":{"TopicTest":{"count":2,"timeStamp":1700000000000}}}"#
            )
        );
        assert_eq!(TimerMetrics::parse(text.as_bytes()), Some(metrics));
        // What Java 5.x writes for an empty table.
        let java = concat!(
            r#"{"dataVersion":{"counter":0,"stateVersion":0,"timestamp":1733400000000},"#,
            r#""timingCount":{}}"#
        )
        .as_bytes();
        assert_eq!(TimerMetrics::parse(java).unwrap().timing_count.len(), 0);
        assert_eq!(TimerMetrics::parse(b"not json"), None);
    }
}
