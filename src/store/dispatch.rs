//! Dispatch ("reput"): what a committed CommitLog record contributes to its ConsumeQueue
//! (`CommitLogDispatcherBuildConsumeQueue`, `reference/store-format.md` §3 and §6).
//!
//! [`dispatch_entry`] also lists the record's IndexFile keys. A deleted topic reaches dispatch
//! as a [`TopicDrop`], in CommitLog order with the entries.
//!
//! A record enters its queue unless it is a prepared or rolled-back transaction record. The
//! unit's tags code is Java's hash of the `TAGS` property, except in `SCHEDULE_TOPIC_XXXX`,
//! where it is the delivery time: store time plus the delay of the record's `DELAY` level.

use super::consume_queue::{tags_code, CqUnit};
use super::message::{
    enters_consume_queue, parse_properties, MessageRecord, TRANSACTION_TYPE_MASK,
};
use futures::channel::oneshot;

/// The topic delayed messages wait in.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";

/// `messageDelayLevel`: the delay of each level, level 1 first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelayLevels(Vec<i64>);

impl Default for DelayLevels {
    fn default() -> Self {
        DelayLevels::parse("1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h")
            .expect("the default levels parse")
    }
}

impl DelayLevels {
    /// Parses Java's form: space-separated durations with unit `s`, `m`, `h` or `d`.
    ///
    /// # Errors
    /// The first entry that does not parse, for the config error message.
    pub fn parse(text: &str) -> Result<DelayLevels, String> {
        let levels = text
            .split_whitespace()
            .map(|entry| {
                let (number, unit) = entry.split_at(entry.len().saturating_sub(1));
                let scale = match unit {
                    "s" => 1_000,
                    "m" => 60_000,
                    "h" => 3_600_000,
                    "d" => 86_400_000,
                    _ => return Err(entry.to_owned()),
                };
                number
                    .parse::<i64>()
                    .map(|n| n * scale)
                    .map_err(|_| entry.to_owned())
            })
            .collect::<Result<Vec<_>, _>>()?;
        if levels.is_empty() {
            return Err(text.to_owned());
        }
        Ok(DelayLevels(levels))
    }

    /// Delay of `level` in ms; levels above the highest are clamped to it, levels below 1 have
    /// no delay.
    #[must_use]
    pub fn delay_ms(&self, level: i32) -> i64 {
        let Ok(index) = usize::try_from(level - 1) else {
            return 0;
        };
        self.0[index.min(self.0.len() - 1)]
    }

    /// Java's form again (`1s 5s … 2h`), each delay in its largest whole unit.
    #[must_use]
    pub fn java_text(&self) -> String {
        let units = [
            (86_400_000, 'd'),
            (3_600_000, 'h'),
            (60_000, 'm'),
            (1_000, 's'),
        ];
        self.0
            .iter()
            .map(|&ms| {
                let (scale, unit) = units
                    .iter()
                    .find(|(scale, _)| ms % scale == 0)
                    .copied()
                    .unwrap_or((1_000, 's'));
                format!("{}{unit}", ms / scale)
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Number of levels.
    #[must_use]
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Never true: there is at least one level.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// A ConsumeQueue entry to write: which queue, at which logical offset, what unit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DispatchRequest {
    /// Topic.
    pub topic: String,
    /// Queue.
    pub queue_id: i32,
    /// Logical offset of the unit.
    pub queue_offset: i64,
    /// The unit.
    pub unit: CqUnit,
}

/// The fields of a stored record that dispatch reads.
#[derive(Clone, Copy, Debug)]
pub struct RecordMeta<'a> {
    /// Topic.
    pub topic: &'a str,
    /// Queue.
    pub queue_id: i32,
    /// Queue offset the writer assigned.
    pub queue_offset: i64,
    /// CommitLog offset.
    pub physical_offset: i64,
    /// Record size.
    pub size: usize,
    /// System flags.
    pub sys_flag: i32,
    /// Store time, ms.
    pub store_timestamp: i64,
    /// Properties as stored.
    pub properties: &'a [u8],
}

impl<'a> RecordMeta<'a> {
    /// The fields of a decoded record.
    #[must_use]
    pub fn of(record: &MessageRecord<'a>, size: usize) -> RecordMeta<'a> {
        RecordMeta {
            topic: record.topic,
            queue_id: record.queue_id,
            queue_offset: record.queue_offset,
            physical_offset: record.physical_offset,
            size,
            sys_flag: record.sys_flag,
            store_timestamp: record.store_timestamp,
            properties: record.properties,
        }
    }
}

/// What one committed record contributes to its ConsumeQueue and to the IndexFile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DispatchEntry {
    /// The ConsumeQueue unit, unless the record enters no queue.
    pub queue: Option<DispatchRequest>,
    /// Topic.
    pub topic: String,
    /// CommitLog offset.
    pub physical_offset: i64,
    /// Record size.
    pub size: usize,
    /// Store time, ms.
    pub store_timestamp: i64,
    /// Index keys: `UNIQ_KEY`, then each `KEYS` token (none for rolled-back records).
    pub index_keys: Vec<String>,
}

impl DispatchEntry {
    /// CommitLog offset of the record's end.
    #[must_use]
    pub fn end(&self) -> i64 {
        self.physical_offset
            .saturating_add(i64::try_from(self.size).unwrap_or(i64::MAX))
    }
}

/// A deleted topic whose ConsumeQueues dispatch drops (`cleanUnusedTopic`).
#[derive(Debug)]
pub struct TopicDrop {
    /// The CommitLog end when the writer took the deletion: records below it were appended
    /// before, and belong to the queues dropped.
    pub at: u64,
    /// The topic.
    pub topic: String,
    /// Answered once dispatch has dropped the queues.
    pub done: oneshot::Sender<()>,
}

/// The entry of a record (`CommitLogDispatcherBuildConsumeQueue` and
/// `CommitLogDispatcherBuildIndex`).
#[must_use]
pub fn dispatch_entry(meta: &RecordMeta<'_>, delay_levels: &DelayLevels) -> DispatchEntry {
    let transaction_type = meta.sys_flag & TRANSACTION_TYPE_MASK;
    let properties = parse_properties(meta.properties);
    let property = |name: &str| {
        properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let queue = enters_consume_queue(meta.sys_flag).then(|| {
        let delay_level = property("DELAY").and_then(|level| level.parse::<i32>().ok());
        let tags_code = match delay_level {
            Some(level) if meta.topic == SCHEDULE_TOPIC && level > 0 => {
                meta.store_timestamp + delay_levels.delay_ms(level)
            }
            _ => tags_code(property("TAGS")),
        };
        DispatchRequest {
            topic: meta.topic.to_owned(),
            queue_id: meta.queue_id,
            queue_offset: meta.queue_offset,
            unit: CqUnit {
                physical_offset: meta.physical_offset,
                size: i32::try_from(meta.size).expect("record below 2 GiB"),
                tags_code,
            },
        }
    });
    let mut index_keys = Vec::new();
    if transaction_type != 0xC {
        index_keys.extend(property("UNIQ_KEY").map(str::to_owned));
        if let Some(keys) = property("KEYS") {
            index_keys.extend(keys.split(' ').filter(|k| !k.is_empty()).map(str::to_owned));
        }
    }
    DispatchEntry {
        queue,
        topic: meta.topic.to_owned(),
        physical_offset: meta.physical_offset,
        size: meta.size,
        store_timestamp: meta.store_timestamp,
        index_keys,
    }
}

/// The ConsumeQueue entry of `record`, or `None` for records that enter no queue.
#[must_use]
pub fn dispatch(
    record: &MessageRecord<'_>,
    size: usize,
    delay_levels: &DelayLevels,
) -> Option<DispatchRequest> {
    dispatch_entry(&RecordMeta::of(record, size), delay_levels).queue
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delay_levels_parse_and_clamp() {
        let levels = DelayLevels::default();
        assert_eq!(levels.len(), 18);
        assert_eq!(levels.delay_ms(1), 1_000);
        assert_eq!(levels.delay_ms(3), 10_000);
        assert_eq!(levels.delay_ms(18), 7_200_000);
        assert_eq!(levels.delay_ms(99), 7_200_000);
        assert_eq!(levels.delay_ms(0), 0);
        assert_eq!(DelayLevels::parse("1s 2x"), Err("2x".to_owned()));
        assert_eq!(
            DelayLevels::parse("500m 1d").unwrap().delay_ms(2),
            86_400_000
        );
    }

    #[test]
    fn delay_levels_print_in_java_form() {
        let java = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";
        assert_eq!(DelayLevels::default().java_text(), java);
        assert_eq!(DelayLevels::parse("90s 2d").unwrap().java_text(), "90s 2d");
    }
}
