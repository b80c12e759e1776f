//! Retention (`CleanCommitLogService`, `CleanConsumeQueueService`): expired CommitLog
//! segments go at `deleteWhen`, or at any hour once the disk is past
//! `diskMaxUsedSpaceRatio`; past `diskSpaceCleanForciblyRatio` the oldest go even if young;
//! past `diskSpaceWarningLevelRatio` puts are refused until a later probe sees space again.
//! ConsumeQueue files ([`super::queue_retention`]) and IndexFiles follow the CommitLog's new
//! minimum, on the dispatch shard.
//!
//! The newest CommitLog segment is never deleted. A reader holding a deleted segment open
//! keeps reading it (the handle outlives the name).

use super::handle::StoreHandle;
pub use super::queue_retention::delete_queue_files_below;
use super::segment::{parse_segment_name, segment_name};
use super::segment_writer::StoreError;
use ferromq_uring::file::remove_file_off_executor;
use ferromq_uring::IoError;
use std::path::Path;
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

/// The hour of the day (0–23) at `now` in the local time zone (`TZ`, else
/// `/etc/localtime`): the hour `deleteWhen` names, as Java compares it with
/// `Calendar.HOUR_OF_DAY` in the JVM's default zone.
#[must_use]
pub fn local_hour(now: SystemTime) -> u32 {
    hour_in(now, &chrono::Local)
}

/// The hour of the day at `now` in `zone`.
fn hour_in<Z: chrono::TimeZone>(now: SystemTime, zone: &Z) -> u32 {
    use chrono::Timelike;
    chrono::DateTime::<chrono::Utc>::from(now)
        .with_timezone(zone)
        .hour()
}

/// One retention pass at wall-clock time `now` (its local hour for `deleteWhen`).
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
    let hour = local_hour(now);
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
            let manual = handle.shared().take_manual_delete_pass();
            if let Err(error) = run_pass(&handle, probe.as_ref(), SystemTime::now(), manual).await {
                tracing::error!(%error, "retention pass failed");
            }
        }
    };
    futures::pin_mut!(work, stop);
    futures::future::select(work, stop).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::FixedOffset;

    /// 2026-01-01T20:30:00Z.
    fn evening_utc() -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_299_400)
    }

    #[test]
    fn delete_hour_is_the_hour_of_the_local_zone_not_utc() {
        let now = evening_utc();
        let utc = FixedOffset::east_opt(0).expect("offset 0 is valid");
        let tokyo = FixedOffset::east_opt(9 * 3600).expect("+09:00 is valid");
        let new_york = FixedOffset::west_opt(5 * 3600).expect("-05:00 is valid");
        let kolkata = FixedOffset::east_opt(5 * 3600 + 1800).expect("+05:30 is valid");
        assert_eq!(hour_in(now, &utc), 20);
        assert_eq!(hour_in(now, &tokyo), 5);
        assert_eq!(hour_in(now, &new_york), 15);
        assert_eq!(hour_in(now, &kolkata), 2);
    }

    /// `local_hour` follows `TZ`: checked in a child process (this test binary, run again on
    /// the test below) so that no other test sees the changed variable.
    #[test]
    fn local_hour_follows_the_tz_variable() {
        if let Ok(expected) = std::env::var("FERROMQ_LOCAL_HOUR_EXPECTED") {
            assert_eq!(local_hour(evening_utc()).to_string(), expected);
            return;
        }
        for (tz, expected) in [("UTC0", "20"), ("JST-9", "5"), ("EST5", "15")] {
            let exe = std::env::current_exe().expect("the test binary's path");
            let child = std::process::Command::new(exe)
                .args([
                    "--exact",
                    "store::retention::tests::local_hour_follows_the_tz_variable",
                ])
                .env("TZ", tz)
                .env("FERROMQ_LOCAL_HOUR_EXPECTED", expected)
                .output()
                .expect("run the test binary");
            let output = String::from_utf8_lossy(&child.stdout);
            assert!(
                child.status.success(),
                "TZ={tz}: not hour {expected}: {output}"
            );
        }
    }
}
