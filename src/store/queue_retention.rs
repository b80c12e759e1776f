//! ConsumeQueue retention (`CleanConsumeQueueService`): once the CommitLog's minimum has
//! moved, each queue's files whose units all lie below it go, and the queue's min offset rises
//! to its first unit still in the CommitLog (`deleteExpiredFile` + `correctMinOffset`).
//!
//! It runs on the dispatch shard, which owns the ConsumeQueue files (`Reput::delete_below`);
//! CommitLog retention, which moves the minimum, is in `retention`. A queue's newest file is
//! never deleted.

use super::consume_queue::{CqUnit, BLANK_UNIT, UNIT_SIZE};
use super::segment::{parse_segment_name, segment_name};
use super::segment_writer::StoreError;
use super::shared::StoreShared;
use ferromq_uring::file::remove_file_off_executor;
use ferromq_uring::IoError;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;

/// Deletes each queue's files whose last unit lies below `min_physical_offset` (never a
/// queue's newest file) and raises its min offset (`deleteExpiredFile` +
/// `correctMinOffset`). Small reads of file tails; runs on the dispatch shard.
///
/// # Errors
/// [`StoreError`] from listing or deleting.
pub async fn delete_queue_files_below(
    shared: &Arc<StoreShared>,
    min_physical_offset: u64,
) -> Result<(), StoreError> {
    let config = &shared.config;
    let file_size = (config.consume_queue_units_per_file * UNIT_SIZE) as u64;
    for ((topic, queue_id), state) in shared.queues() {
        let dir = config.queue_dir(&topic, queue_id);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut starts: Vec<u64> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().and_then(parse_segment_name))
            .collect();
        starts.sort_unstable();
        let newest = starts.pop();
        for start in starts {
            let path = dir.join(segment_name(start));
            let last = read_unit(&path, file_size - UNIT_SIZE as u64)?;
            let below = last.is_some_and(|unit| {
                unit == BLANK_UNIT
                    || u64::try_from(unit.physical_offset).unwrap_or(0)
                        + u64::try_from(unit.size).unwrap_or(0)
                        <= min_physical_offset
            });
            if !below {
                break;
            }
            remove_file_off_executor(&path).await?;
            let next_first = i64::try_from((start + file_size) / UNIT_SIZE as u64).unwrap_or(0);
            if state.min_offset() < next_first {
                state.set_min_offset(next_first);
            }
        }
        // Within the first remaining file, the first unit still in the CommitLog.
        let first_file = std::fs::read_dir(&dir)
            .ok()
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().and_then(parse_segment_name))
            .min()
            .or(newest);
        if let Some(start) = first_file {
            let first_offset = i64::try_from(start / UNIT_SIZE as u64).unwrap_or(0);
            let units_in_file = i64::try_from(file_size / UNIT_SIZE as u64).unwrap_or(i64::MAX);
            let from = state.min_offset().max(first_offset);
            let end = state
                .max_offset()
                .min(first_offset.saturating_add(units_in_file));
            let path = dir.join(segment_name(start));
            let offset = first_kept_unit(&path, first_offset, from..end, min_physical_offset)?;
            if state.min_offset() < offset {
                state.set_min_offset(offset);
            }
        }
    }
    Ok(())
}

/// The first queue offset in `offsets` whose unit, in the ConsumeQueue file at `path` that
/// begins at queue offset `first_offset`, still points into the CommitLog (written, not a
/// blank, at or above `min_physical_offset`); `offsets.end` if none does.
///
/// A queue's units follow the CommitLog's order and blanks only come before its first
/// message, so the units below form a prefix: a binary search finds its end in about 20
/// reads. (Reading unit after unit, each with its own open, took ~850 ms for the 29k units
/// per queue that a 256 MiB segment holds, on the dispatch shard, which also serves
/// connections.)
fn first_kept_unit(
    path: &Path,
    first_offset: i64,
    offsets: std::ops::Range<i64>,
    min_physical_offset: u64,
) -> Result<i64, StoreError> {
    if offsets.is_empty() {
        return Ok(offsets.start);
    }
    let file = std::fs::File::open(path).map_err(|source| IoError::file("open", path, source))?;
    let below = |offset: i64| -> Result<bool, StoreError> {
        let at = u64::try_from(offset - first_offset).unwrap_or(0) * UNIT_SIZE as u64;
        Ok(read_unit_of(&file, path, at)?.is_some_and(|unit| {
            unit == BLANK_UNIT
                || u64::try_from(unit.physical_offset).unwrap_or(0) < min_physical_offset
        }))
    };
    let (mut low, mut high) = (offsets.start, offsets.end);
    while low < high {
        let middle = low + (high - low) / 2;
        if below(middle)? {
            low = middle + 1;
        } else {
            high = middle;
        }
    }
    Ok(low)
}

fn read_unit(path: &Path, at: u64) -> Result<Option<CqUnit>, StoreError> {
    let file = std::fs::File::open(path).map_err(|source| IoError::file("open", path, source))?;
    read_unit_of(&file, path, at)
}

/// The written unit at byte `at` of `file` (the ConsumeQueue file at `path`), if any.
fn read_unit_of(file: &std::fs::File, path: &Path, at: u64) -> Result<Option<CqUnit>, StoreError> {
    let mut bytes = [0u8; UNIT_SIZE];
    match file.read_exact_at(&mut bytes, at) {
        Ok(()) => Ok(CqUnit::decode(&bytes).filter(CqUnit::is_written)),
        Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
        Err(source) => Err(IoError::file("read", path, source).into()),
    }
}
