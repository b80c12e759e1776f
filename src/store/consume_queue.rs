//! ConsumeQueue units: the 20-byte entries that index one queue of one topic into the
//! CommitLog (`ST/ConsumeQueue.java`, `reference/store-format.md` §3).
//!
//! ```text
//! offset  size  field
//! 0       8     CommitLog physical offset of the message
//! 8       4     record size (TOTALSIZE)
//! 12      8     tags code: Java hash of TAGS; delivery time for SCHEDULE_TOPIC_XXXX
//! ```
//!
//! Files are `consumequeue/<topic>/<queueId>/<20-digit byte offset>`, 300,000 units each by
//! default; the logical offset of a unit is its byte position in the queue divided by 20.

use super::message::java_string_hash;

/// Size of one unit in bytes.
pub const UNIT_SIZE: usize = 20;

/// Units per file by default (`mappedFileSizeConsumeQueue` = 6,000,000 bytes).
pub const UNITS_PER_FILE: usize = 300_000;

/// One ConsumeQueue entry (`CqUnit`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CqUnit {
    /// Where the message starts in the CommitLog.
    pub physical_offset: i64,
    /// Its record size.
    pub size: i32,
    /// Tag hash (or delivery time of a delayed message).
    pub tags_code: i64,
}

impl CqUnit {
    /// Decodes the unit at the start of `bytes`, `None` if fewer than 20 bytes remain.
    #[must_use]
    pub fn decode(bytes: &[u8]) -> Option<CqUnit> {
        let unit: &[u8; UNIT_SIZE] = bytes.get(..UNIT_SIZE)?.try_into().ok()?;
        let (offset, rest) = unit.split_at(8);
        let (size, tags) = rest.split_at(4);
        Some(CqUnit {
            physical_offset: i64::from_be_bytes(offset.try_into().ok()?),
            size: i32::from_be_bytes(size.try_into().ok()?),
            tags_code: i64::from_be_bytes(tags.try_into().ok()?),
        })
    }

    /// The 20 bytes of this unit.
    #[must_use]
    pub fn encode(&self) -> [u8; UNIT_SIZE] {
        let mut bytes = [0u8; UNIT_SIZE];
        bytes[..8].copy_from_slice(&self.physical_offset.to_be_bytes());
        bytes[8..12].copy_from_slice(&self.size.to_be_bytes());
        bytes[12..].copy_from_slice(&self.tags_code.to_be_bytes());
        bytes
    }

    /// Whether this is a written unit; recovery stops at the first that is not (a
    /// zero-filled tail has offset 0 and size 0).
    #[must_use]
    pub fn is_written(&self) -> bool {
        self.physical_offset >= 0 && self.size > 0
    }
}

/// The tags code of a message with `tags` (`MessageExtBrokerInner.tagsString2tagsCode`).
#[must_use]
pub fn tags_code(tags: Option<&str>) -> i64 {
    tags.filter(|tags| !tags.is_empty())
        .map_or(0, |tags| i64::from(java_string_hash(tags)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unit_round_trips_and_zero_tail_is_unwritten() {
        let unit = CqUnit {
            physical_offset: 1883,
            size: 280,
            tags_code: -5,
        };
        assert_eq!(CqUnit::decode(&unit.encode()), Some(unit));
        assert!(unit.is_written());
        assert!(!CqUnit::decode(&[0; UNIT_SIZE]).unwrap().is_written());
        assert_eq!(CqUnit::decode(&[0; 19]), None);
        assert_eq!(tags_code(Some("TagA")), 2_598_919);
        assert_eq!(tags_code(None), 0);
    }
}
