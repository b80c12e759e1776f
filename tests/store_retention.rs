//! Retention on real files: the disk-space gate refuses puts past
//! `diskSpaceWarningLevelRatio` and lifts by itself; forcible cleaning past
//! `diskSpaceCleanForciblyRatio` deletes the oldest segments but never the newest; expired
//! segments go only at `deleteWhen`; ConsumeQueue files and min offsets follow.
//!
//! Method: the disk probe is injected (a cell the test sets), so that the decisions are
//! tested at the ratios that matter without filling the machine's disk.

mod common;

use common::{small_store_config, store_message, TempDir};
use ferromq::store::message_store::LocalStore;
use ferromq::store::reader::{GetMessageStatus, PullFilter};
use ferromq::store::retention::{run_pass, DiskProbe};
use ferromq::store::segment_writer::StoreError;
use ferromq_uring::IoError;
use std::cell::Cell;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A probe reporting whatever the test last set.
struct FakeDisk(Cell<f64>);

impl DiskProbe for FakeDisk {
    fn used_ratio(&self, _path: &Path) -> Result<f64, IoError> {
        Ok(self.0.get())
    }
}

const NO_FILTER: PullFilter<'static> = PullFilter::ALL;

fn segments(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("commitlog"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// An hour of the day that is not the current local hour, for a `deleteWhen` that is not now.
fn another_hour(now: SystemTime) -> u32 {
    (ferromq::store::retention::local_hour(now) + 12) % 24
}

#[test]
fn a_full_disk_refuses_puts_and_space_coming_back_resumes_them() {
    let dir = TempDir::on_disk("retention-full");
    let mut config = small_store_config(dir.path());
    config.delete_when = format!("{:02}", another_hour(SystemTime::now()));
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let handle = store.handle().clone();
        let disk = FakeDisk(Cell::new(0.50));
        handle
            .put(store_message("D", 0, b"before", None, None))
            .await
            .unwrap();

        disk.0.set(0.95);
        let pass = run_pass(&handle, &disk, SystemTime::now(), false)
            .await
            .unwrap();
        assert!(pass.refusing_puts);
        let refused = handle
            .put(store_message("D", 0, b"refused", None, None))
            .await;
        assert!(
            matches!(refused, Err(StoreError::DiskFull { used_percent: 95 })),
            "{refused:?}"
        );
        // Just under the warning level: the gate follows each probe, no restart needed.
        disk.0.set(0.89);
        let pass = run_pass(&handle, &disk, SystemTime::now(), false)
            .await
            .unwrap();
        assert!(!pass.refusing_puts);
        let resumed = handle
            .put(store_message("D", 0, b"after", None, None))
            .await
            .unwrap();
        assert_eq!(resumed.queue_offset, 1, "the refused put took no offset");
        // 0.89 is past diskSpaceCleanForciblyRatio, but there is only one segment: kept.
        assert!(pass.deleted_segments.is_empty());
        store.shutdown().await.unwrap();
    });
}

#[test]
fn forcible_cleaning_deletes_the_oldest_segments_never_the_newest() {
    let dir = TempDir::on_disk("retention-forcibly");
    let mut config = small_store_config(dir.path());
    config.delete_when = format!("{:02}", another_hour(SystemTime::now()));
    let root = dir.path().to_owned();
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let handle = store.handle().clone();
        let mut appended = Vec::new();
        // ~1 KiB records: 64 KiB segments hold ~60; 900 puts make ~15 segments and one
        // queue of 900 units in ConsumeQueue files of 100.
        for i in 0..900 {
            let body = format!("{i:04}-{}", "r".repeat(900)).into_bytes();
            appended.push(
                handle
                    .put(store_message("Q", 0, &body, None, None))
                    .await
                    .unwrap(),
            );
        }
        let before = segments(&root);
        assert!(before.len() >= 14, "{}", before.len());
        let disk = FakeDisk(Cell::new(0.60));
        // A reader that read the oldest segment holds it open.
        let early_reader = handle.reader();
        while early_reader.max_offset_in_queue("Q", 0) < 900 {
            glommio::timer::sleep(Duration::from_millis(2)).await;
        }
        let first = early_reader
            .get_message("Q", 0, 0, 1, &NO_FILTER)
            .await
            .unwrap();
        assert_eq!(first.status, GetMessageStatus::Found);
        // The answer was sent: it points into the segment's mapping no longer.
        drop(first);

        // Young files, not the hour, disk below every ratio: nothing goes.
        let pass = run_pass(&handle, &disk, SystemTime::now(), false)
            .await
            .unwrap();
        assert!(pass.deleted_segments.is_empty());
        assert_eq!(segments(&root), before);

        // Past diskSpaceCleanForciblyRatio: the oldest go, 10 a pass at most.
        disk.0.set(0.86);
        let pass = run_pass(&handle, &disk, SystemTime::now(), false)
            .await
            .unwrap();
        assert_eq!(pass.deleted_segments.len(), 10);
        assert!(!pass.refusing_puts);
        let pass = run_pass(&handle, &disk, SystemTime::now(), false)
            .await
            .unwrap();
        let after = segments(&root);
        assert_eq!(after.len(), 1, "all but the newest: {after:?}");
        assert_eq!(after.last(), before.last());
        assert!(!pass.deleted_segments.is_empty());

        let min = handle.shared().min_physical_offset();
        assert_eq!(min, after[0].parse::<u64>().unwrap());
        // Dispatch deletes ConsumeQueue files below the new minimum and raises min offsets.
        let reader = handle.reader();
        let first_kept = appended
            .iter()
            .find(|a| a.physical_offset >= min)
            .unwrap()
            .queue_offset;
        for _ in 0..500 {
            if reader.min_offset_in_queue("Q", 0) == first_kept {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(2)).await;
        }
        assert_eq!(reader.min_offset_in_queue("Q", 0), first_kept);
        let queue_files = std::fs::read_dir(root.join("consumequeue/Q/0"))
            .unwrap()
            .count();
        assert_eq!(
            queue_files, 1,
            "files 0..800 only pointed at deleted segments"
        );
        let old = reader.get_message("Q", 0, 0, 32, &NO_FILTER).await.unwrap();
        assert_eq!(old.status, GetMessageStatus::OffsetTooSmall);
        assert_eq!(old.next_begin_offset, first_kept);
        let kept = reader
            .get_message("Q", 0, first_kept, 32, &NO_FILTER)
            .await
            .unwrap();
        assert_eq!(kept.status, GetMessageStatus::Found);
        assert_eq!(kept.messages[0].queue_offset, first_kept);
        // The early reader's next read lets go of the deleted segment, so its space returns.
        let again = early_reader
            .get_message("Q", 0, first_kept, 1, &NO_FILTER)
            .await
            .unwrap();
        assert_eq!(again.status, GetMessageStatus::Found);
        let root_text = root.display().to_string();
        let held_deleted: Vec<String> = std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|fd| std::fs::read_link(fd.ok()?.path()).ok())
            .map(|target| target.display().to_string())
            .filter(|target| target.starts_with(&root_text) && target.contains("commitlog"))
            .filter(|target| target.ends_with("(deleted)"))
            .collect();
        assert!(held_deleted.is_empty(), "{held_deleted:?}");
        // And the store keeps taking puts at the next offsets.
        let next = handle
            .put(store_message("Q", 0, b"more", None, None))
            .await
            .unwrap();
        assert_eq!(next.queue_offset, 900);
        store.shutdown().await.unwrap();
    });
}

#[test]
fn expired_segments_go_at_delete_when_and_young_ones_stay() {
    let dir = TempDir::on_disk("retention-expired");
    let mut config = small_store_config(dir.path());
    let now = SystemTime::now();
    config.delete_when = format!("{:02}", another_hour(now));
    config.file_reserved_time_hours = 72;
    let root = dir.path().to_owned();
    let runs = config.clone();
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(runs).await.unwrap();
        let handle = store.handle().clone();
        for i in 0..300 {
            let body = format!("{i:04}-{}", "e".repeat(900)).into_bytes();
            handle
                .put(store_message("E", 0, &body, None, None))
                .await
                .unwrap();
        }
        let before = segments(&root);
        assert!(before.len() >= 5);
        // The two oldest segments were last written 73 hours ago.
        let old = now - Duration::from_secs(73 * 3600);
        for name in &before[..2] {
            let file = std::fs::File::options()
                .write(true)
                .open(root.join("commitlog").join(name))
                .unwrap();
            file.set_modified(old).unwrap();
        }
        let disk = FakeDisk(Cell::new(0.40));
        let pass = run_pass(&handle, &disk, now, false).await.unwrap();
        assert!(pass.deleted_segments.is_empty(), "not deleteWhen's hour");

        // At deleteWhen's hour (or by hand), the expired ones go; the young stay.
        let pass = run_pass(&handle, &disk, now, true).await.unwrap();
        let expected: Vec<u64> = before[..2].iter().map(|n| n.parse().unwrap()).collect();
        assert_eq!(pass.deleted_segments, expected);
        assert_eq!(segments(&root), before[2..].to_vec());

        // Past diskMaxUsedSpaceRatio (75 %), expiry alone decides, at any hour.
        let third = root.join("commitlog").join(&before[2]);
        std::fs::File::options()
            .write(true)
            .open(&third)
            .unwrap()
            .set_modified(old)
            .unwrap();
        disk.0.set(0.80);
        let pass = run_pass(&handle, &disk, now, false).await.unwrap();
        assert_eq!(
            pass.deleted_segments,
            vec![before[2].parse::<u64>().unwrap()]
        );
        store.shutdown().await.unwrap();
    });
}
