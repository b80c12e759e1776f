//! Dispatch ("reput"): what a committed CommitLog record contributes to its ConsumeQueue
//! (`CommitLogDispatcherBuildConsumeQueue`, `reference/store-format.md` §3 and §6).
//!
//! A record enters its queue unless it is a prepared or rolled-back transaction record. The
//! unit's tags code is Java's hash of the `TAGS` property, except in `SCHEDULE_TOPIC_XXXX`,
//! where it is the delivery time: store time plus the delay of the record's `DELAY` level.

use super::consume_queue::{tags_code, CqUnit};
use super::message::{parse_properties, MessageRecord, TRANSACTION_TYPE_MASK};

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

/// The ConsumeQueue entry of `record`, or `None` for records that enter no queue.
#[must_use]
pub fn dispatch(
    record: &MessageRecord<'_>,
    size: usize,
    delay_levels: &DelayLevels,
) -> Option<DispatchRequest> {
    let transaction_type = record.sys_flag & TRANSACTION_TYPE_MASK;
    if transaction_type == 0x4 || transaction_type == 0xC {
        return None;
    }
    let properties = parse_properties(record.properties);
    let property = |name: &str| {
        properties
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let delay_level = property("DELAY").and_then(|level| level.parse::<i32>().ok());
    let tags_code = match delay_level {
        Some(level) if record.topic == SCHEDULE_TOPIC && level > 0 => {
            record.store_timestamp + delay_levels.delay_ms(level)
        }
        _ => tags_code(property("TAGS")),
    };
    Some(DispatchRequest {
        topic: record.topic.to_owned(),
        queue_id: record.queue_id,
        queue_offset: record.queue_offset,
        unit: CqUnit {
            physical_offset: record.physical_offset,
            size: i32::try_from(size).expect("record below 2 GiB"),
            tags_code,
        },
    })
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
}
