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
use super::segment::SegmentOpener;
use super::segment_writer::{FileSyncs, SegmentWriter, StoreError};
use ferromq_uring::file::SegmentFile;
use ferromq_uring::IoError;

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

/// A unit Java writes into a hole before the first real unit of a queue (`fillPreBlank`).
pub const BLANK_UNIT: CqUnit = CqUnit {
    physical_offset: 0,
    size: i32::MAX,
    tags_code: 0,
};

/// Appends units to one queue's files (the dispatch side of `ConsumeQueue`).
#[derive(Debug)]
pub struct ConsumeQueueWriter<O: SegmentOpener> {
    writer: SegmentWriter<O>,
}

impl<O: SegmentOpener> ConsumeQueueWriter<O> {
    /// A writer whose next unit is `max_offset`, with files of `units_per_file` units.
    ///
    /// # Errors
    /// [`StoreError::Io`].
    pub async fn open(
        opener: O,
        units_per_file: usize,
        max_offset: i64,
    ) -> Result<ConsumeQueueWriter<O>, StoreError> {
        let file_size = u64::try_from(units_per_file * UNIT_SIZE).expect("fits u64");
        let write_offset = u64::try_from(max_offset).expect("non-negative") * UNIT_SIZE as u64;
        let writer = SegmentWriter::open(opener, file_size, write_offset).await?;
        Ok(ConsumeQueueWriter { writer })
    }

    /// The next logical offset (units written so far, holes included).
    #[must_use]
    pub fn max_offset(&self) -> i64 {
        i64::try_from(self.writer.write_offset() / UNIT_SIZE as u64).expect("fits i64")
    }

    /// Puts `unit` at logical offset `queue_offset`. A unit already there is left alone
    /// (dispatch may repeat after recovery); a gap before it is filled with blank units.
    /// Returns whether the unit was written.
    ///
    /// # Errors
    /// [`StoreError`] from the files.
    pub async fn put(&mut self, queue_offset: i64, unit: CqUnit) -> Result<bool, StoreError> {
        if queue_offset < self.max_offset() {
            return Ok(false);
        }
        while self.max_offset() < queue_offset {
            self.append(BLANK_UNIT).await?;
        }
        self.append(unit).await?;
        Ok(true)
    }

    /// Writes and syncs everything put so far; returns the durable logical end.
    ///
    /// # Errors
    /// [`StoreError`] from the files.
    pub async fn flush(&mut self) -> Result<i64, StoreError> {
        let end = self.writer.flush().await?;
        Ok(i64::try_from(end / UNIT_SIZE as u64).expect("fits i64"))
    }

    /// The syncs that make every unit written out so far durable, to run while dispatch goes
    /// on ([`SegmentWriter::take_syncs`]); `None` if they are durable already.
    ///
    /// # Errors
    /// [`StoreError::NotWritable`] after a failed write.
    pub fn take_syncs(&mut self) -> Result<Option<FileSyncs<O::File>>, StoreError> {
        self.writer.take_syncs()
    }

    /// The syncs taken by [`ConsumeQueueWriter::take_syncs`] made the queue durable up to
    /// the byte offset `end` they returned.
    pub fn synced(&mut self, end: u64) {
        self.writer.synced(end);
    }

    /// Writes everything put so far to the files without syncing, so that readers on other
    /// shards see it; returns the logical end.
    ///
    /// # Errors
    /// [`StoreError`] from the files.
    pub async fn write_out(&mut self) -> Result<i64, StoreError> {
        let end = self.writer.write_out().await?;
        Ok(i64::try_from(end / UNIT_SIZE as u64).expect("fits i64"))
    }

    async fn append(&mut self, unit: CqUnit) -> Result<(), StoreError> {
        if self.writer.remaining() < UNIT_SIZE as u64 {
            self.writer.roll().await?;
        }
        self.writer.append(&unit.encode())
    }
}

/// The logical end of a queue whose files start at `file_starts`: units are read until the
/// first unwritten one (ConsumeQueue recovery).
///
/// # Errors
/// The I/O error of reading a file.
pub async fn recover_max_offset<O: SegmentOpener>(
    opener: &O,
    units_per_file: usize,
    file_starts: &[u64],
) -> Result<i64, IoError> {
    let file_size = units_per_file * UNIT_SIZE;
    let mut end = file_starts.first().copied().unwrap_or(0);
    for &start in file_starts {
        if start != end {
            break;
        }
        let file = opener.open(start, file_size as u64).await?;
        let bytes = file.read_at(0, file_size).await?;
        let written = bytes
            .chunks_exact(UNIT_SIZE)
            .take_while(|unit| CqUnit::decode(unit).is_some_and(|unit| unit.is_written()))
            .count();
        end = start + (written * UNIT_SIZE) as u64;
        if written < units_per_file {
            break;
        }
    }
    Ok(i64::try_from(end / UNIT_SIZE as u64).expect("fits i64"))
}

/// What recovery found in one queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecoveredQueue {
    /// The next logical offset.
    pub max_offset: i64,
    /// The first logical offset whose record is still in the CommitLog.
    pub min_offset: i64,
    /// End (offset + size) in the CommitLog of the last unit, 0 for an empty queue.
    pub max_physical_end: u64,
}

/// Recovers one queue whose files start at `file_starts` (sorted): finds its written end,
/// cuts units that point past `commit_log_end` (zeroing them in the file, so later appends
/// never run into stale units), and finds the first unit at or above `commit_log_min`.
/// Returns the state and the starts of files that now lie wholly past the end (to delete).
///
/// # Errors
/// The I/O error of reading or rewriting a file.
pub async fn recover_queue<O: SegmentOpener>(
    opener: &O,
    units_per_file: usize,
    file_starts: &[u64],
    commit_log_end: u64,
    commit_log_min: u64,
) -> Result<(RecoveredQueue, Vec<u64>), IoError> {
    let file_size = units_per_file * UNIT_SIZE;
    let file_size_u64 = file_size as u64;
    // Files must follow each other; a gap ends the queue.
    let mut contiguous = file_starts.len().min(1);
    while contiguous < file_starts.len()
        && file_starts[contiguous] == file_starts[contiguous - 1] + file_size_u64
    {
        contiguous += 1;
    }
    let mut beyond: Vec<u64> = file_starts[contiguous..].to_vec();
    let mut end = file_starts.first().copied().unwrap_or(0);
    let mut max_physical_end = 0u64;
    // The first file's units as they stand after the cut, when the walk read it already
    // (most queues have one file): the minimum is found in them without a second read.
    let mut first_units: Option<Vec<CqUnit>> = None;
    for (position, &start) in file_starts[..contiguous].iter().enumerate().rev() {
        let file = opener.open(start, file_size_u64).await?;
        let bytes = file.read_at(0, file_size).await?;
        let mut units = written_units(&bytes);
        let keep = units
            .iter()
            .position(|unit| {
                *unit != BLANK_UNIT
                    && u64::try_from(unit.physical_offset).unwrap_or(u64::MAX)
                        + u64::try_from(unit.size).unwrap_or(0)
                        > commit_log_end
            })
            .unwrap_or(units.len());
        if keep < units.len() {
            zero_units(&file, keep, units.len()).await?;
        }
        if keep == 0 && position > 0 {
            beyond.insert(0, start);
            continue;
        }
        end = start + (keep * UNIT_SIZE) as u64;
        max_physical_end = units[..keep]
            .iter()
            .rev()
            .find(|unit| **unit != BLANK_UNIT)
            .map_or(0, |unit| {
                u64::try_from(unit.physical_offset).unwrap_or(0)
                    + u64::try_from(unit.size).unwrap_or(0)
            });
        if position == 0 {
            units.truncate(keep);
            first_units = Some(units);
        }
        break;
    }
    let max_offset = i64::try_from(end / UNIT_SIZE as u64).expect("fits i64");
    let mut min_offset = max_offset;
    if let Some(&first) = file_starts.first().filter(|_| max_offset > 0) {
        let units = match first_units {
            Some(units) => units,
            None => {
                let file = opener.open(first, file_size_u64).await?;
                written_units(&file.read_at(0, file_size).await?)
            }
        };
        let first_kept = units.into_iter().position(|unit| {
            unit != BLANK_UNIT && u64::try_from(unit.physical_offset).unwrap_or(0) >= commit_log_min
        });
        if let Some(index) = first_kept {
            let first_offset = i64::try_from(first / UNIT_SIZE as u64).expect("fits i64");
            min_offset = (first_offset + i64::try_from(index).expect("fits")).min(max_offset);
        }
    }
    Ok((
        RecoveredQueue {
            max_offset,
            min_offset,
            max_physical_end,
        },
        beyond,
    ))
}

/// The units of a file's bytes up to the first unwritten one.
fn written_units(bytes: &[u8]) -> Vec<CqUnit> {
    bytes
        .chunks_exact(UNIT_SIZE)
        .filter_map(CqUnit::decode)
        .take_while(CqUnit::is_written)
        .collect()
}

/// Zeroes units `[from, to)` of a file, rewriting the aligned blocks that hold them.
async fn zero_units<F: SegmentFile>(file: &F, from: usize, to: usize) -> Result<(), IoError> {
    let alignment = usize::try_from(file.alignment()).expect("fits usize");
    let block_start = from * UNIT_SIZE / alignment * alignment;
    let block_end = (to * UNIT_SIZE).div_ceil(alignment) * alignment;
    let mut bytes = file
        .read_at(block_start as u64, block_end - block_start)
        .await?;
    bytes.resize(block_end - block_start, 0);
    bytes[from * UNIT_SIZE - block_start..].fill(0);
    file.write_at(block_start as u64, &bytes).await?;
    file.sync().await
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
