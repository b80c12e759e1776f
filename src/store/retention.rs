//! Retention (`CleanCommitLogService`, `CleanConsumeQueueService`): expired CommitLog
//! segments go at `deleteWhen`, or at any hour once the disk is past
//! `diskMaxUsedSpaceRatio`; past `diskSpaceCleanForciblyRatio` the oldest go even if young;
//! past `diskSpaceWarningLevelRatio` puts are refused until a later probe sees space again.
//! ConsumeQueue files and IndexFiles follow the CommitLog's new minimum.
//!
//! The newest CommitLog segment is never deleted. A reader holding a deleted segment open
//! keeps reading it (the handle outlives the name).

use super::consume_queue::{CqUnit, BLANK_UNIT, UNIT_SIZE};
use super::message_store::StoreHandle;
use super::segment::{parse_segment_name, segment_name};
use super::segment_writer::StoreError;
use super::shared::StoreShared;
use ferromq_uring::file::remove_file_off_executor;
use ferromq_uring::IoError;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Segments deleted in one pass at most (`DELETE_FILES_BATCH_MAX`).
pub const DELETE_FILES_BATCH_MAX: usize = 10;

/// Where the fraction of disk in use comes from (a probe tests can steer).
pub trait DiskProbe {
    /// Fraction of the disk holding `path` in use, 0.0–1.0.
    ///
    /// # Errors
    /// [`IoError`] if it cannot be measured.
    fn used_ratio(&self, path: &Path) -> Result<f64, IoError>;
}

/// The real probe: `statvfs`.
#[derive(Clone, Copy, Debug, Default)]
pub struct StatvfsProbe;

impl DiskProbe for StatvfsProbe {
    fn used_ratio(&self, path: &Path) -> Result<f64, IoError> {
        ferromq_uring::disk::used_ratio(path)
    }
}

/// What one pass decided and did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RetentionPass {
    /// Disk use seen.
    pub used_ratio: f64,
    /// Whether puts are now refused.
    pub refusing_puts: bool,
    /// CommitLog segments deleted (start offsets).
    pub deleted_segments: Vec<u64>,
}

/// One retention pass at wall-clock time `now` (UTC hour for `deleteWhen`).
///
/// # Errors
/// [`StoreError`] from the probe or deleting files.
pub async fn run_pass(
    handle: &StoreHandle,
    probe: &dyn DiskProbe,
    now: SystemTime,
    manual: bool,
) -> Result<RetentionPass, StoreError> {
    let shared = handle.shared();
    let config = &shared.config;
    let dir = config.commit_log_dir();
    let used_ratio = probe.used_ratio(&dir)?;
    let refusing_puts = used_ratio > config.disk_space_warning_level_ratio;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // 0..=100
    let used_percent = (used_ratio * 100.0).round().clamp(0.0, 100.0) as u32;
    if refusing_puts != shared.disk_full().is_some() {
        if refusing_puts {
            tracing::error!(used_percent, "disk full: refusing puts until space returns");
        } else {
            tracing::info!(used_percent, "disk space back: taking puts again");
        }
    }
    shared.set_disk_state(used_percent, refusing_puts);
    let clean_immediately =
        config.clean_file_forcibly_enable && used_ratio > config.disk_space_clean_forcibly_ratio;
    let hour = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| (d.as_secs() / 3600 % 24) as u32);
    let due = manual
        || config.is_delete_hour(hour)
        || used_ratio > config.disk_max_used_space_ratio
        || clean_immediately;
    let mut pass = RetentionPass {
        used_ratio,
        refusing_puts,
        deleted_segments: Vec::new(),
    };
    if !due {
        return Ok(pass);
    }
    let reserved = Duration::from_secs(config.file_reserved_time_hours * 3600);
    let mut starts: Vec<u64> = std::fs::read_dir(&dir)
        .map_err(|source| IoError::file("list", &dir, source))?
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str().and_then(parse_segment_name))
        .collect();
    starts.sort_unstable();
    // Never the newest: the writer appends to it.
    starts.pop();
    for start in starts.into_iter().take(DELETE_FILES_BATCH_MAX) {
        let path = dir.join(segment_name(start));
        let modified = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .map_err(|source| IoError::file("stat", &path, source))?;
        let expired = now
            .duration_since(modified)
            .is_ok_and(|age| age >= reserved);
        if !expired && !clean_immediately {
            break;
        }
        remove_file_off_executor(&path).await?;
        tracing::info!(
            segment = %path.display(),
            expired,
            clean_immediately,
            "deleted CommitLog segment"
        );
        pass.deleted_segments.push(start);
        let next = start + config.mapped_file_size_commit_log;
        shared.set_min_physical_offset(next);
        if !config.delete_commit_log_files_interval.is_zero() {
            glommio::timer::sleep(config.delete_commit_log_files_interval).await;
        }
    }
    if !pass.deleted_segments.is_empty() {
        handle
            .report_min_physical_offset(shared.min_physical_offset())
            .await;
    }
    Ok(pass)
}

/// Runs [`run_pass`] every `cleanResourceInterval` until `stop` resolves.
pub async fn run_retention(
    handle: StoreHandle,
    probe: Box<dyn DiskProbe>,
    stop: impl std::future::Future<Output = ()>,
) {
    let interval = handle.shared().config.clean_resource_interval;
    let work = async {
        loop {
            glommio::timer::sleep(interval).await;
            if let Err(error) = run_pass(&handle, probe.as_ref(), SystemTime::now(), false).await {
                tracing::error!(%error, "retention pass failed");
            }
        }
    };
    futures::pin_mut!(work, stop);
    futures::future::select(work, stop).await;
}

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
