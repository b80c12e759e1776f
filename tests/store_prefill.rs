//! The next CommitLog segment is zero-filled ahead of the writer, beside the CommitLog
//! directory, and moved into place when the writer rolls.
//!
//! Method: a store of 64 KiB segments on a real directory takes puts until it has rolled a few
//! times. The story checks what a user (or a Java broker taking the store back) would see in
//! the CommitLog directory, that the segment the writer rolls into is the very file the fill
//! made, that a file a crash left in the fill directory does not survive the next start, and
//! that the writer's segment is open with O_DSYNC under SYNC_FLUSH; under ASYNC_FLUSH the
//! next segment is made ahead too, but not filled, and opened without O_DSYNC.

mod common;

use common::{small_store_config, store_message, TempDir};
use ferromq::store::message_store::LocalStore;
use ferromq::store::prefill::fill_dir_of;
use ferromq::store::segment::{parse_segment_name, segment_name};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Duration;

/// Segment starts in `dir`, sorted; panics on a file that is not a segment.
fn segments(dir: &Path) -> Vec<u64> {
    let mut starts: Vec<u64> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| {
            let name = entry.unwrap().file_name().into_string().unwrap();
            parse_segment_name(&name).unwrap_or_else(|| panic!("{name} is not a segment"))
        })
        .collect();
    starts.sort_unstable();
    starts
}

/// The open flags of every descriptor of this process open on `path` (`/proc/self/fdinfo`).
fn open_flags(path: &Path) -> Vec<u32> {
    let target = std::fs::canonicalize(path).unwrap();
    let mut flags = Vec::new();
    for entry in std::fs::read_dir("/proc/self/fd").unwrap() {
        let entry = entry.unwrap();
        if std::fs::read_link(entry.path()).ok().as_deref() != Some(target.as_path()) {
            continue;
        }
        let info = std::fs::read_to_string(Path::new("/proc/self/fdinfo").join(entry.file_name()))
            .unwrap_or_default();
        let octal = info
            .lines()
            .find_map(|line| line.strip_prefix("flags:"))
            .map(str::trim);
        if let Some(bits) = octal.and_then(|o| u32::from_str_radix(o, 8).ok()) {
            flags.push(bits);
        }
    }
    flags
}

/// `O_DSYNC` on Linux.
const O_DSYNC: u32 = 0o10000;

/// Waits (bounded) until `path` exists; returns its inode.
async fn inode_when_present(path: &Path) -> u64 {
    for _ in 0..1000 {
        if let Ok(meta) = std::fs::metadata(path) {
            return meta.ino();
        }
        glommio::timer::sleep(Duration::from_millis(5)).await;
    }
    panic!("{} never appeared", path.display());
}

#[test]
fn the_writer_rolls_into_the_segment_the_fill_made_and_the_commit_log_holds_only_segments() {
    let dir = TempDir::on_disk("store-prefill");
    let config = small_store_config(dir.path());
    let segment_size = config.mapped_file_size_commit_log;
    let commit_log = config.commit_log_dir();
    let fill_dir = fill_dir_of(&commit_log);
    // What a crash in the middle of a fill leaves: a file the next start must not trust.
    std::fs::create_dir_all(&fill_dir).unwrap();
    let stale = fill_dir.join(segment_name(segment_size * 40));
    std::fs::write(&stale, b"left by a crash").unwrap();

    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let handle = store.handle().clone();
        let body = vec![b'x'; 1000];
        let mut last_offset = 0;
        let mut adopted = 0;
        let mut puts = 0i64;
        for round in 0..4u64 {
            // The fill for the segment after the writer's is under way or done.
            let current = last_offset - last_offset % segment_size;
            let next = current + segment_size;
            let filled = inode_when_present(&fill_dir.join(segment_name(next))).await;
            assert!(!stale.exists(), "the stale fill file was removed");
            // Put until the writer is in that segment.
            while last_offset < next {
                let appended = handle
                    .put(store_message("T", 0, &body, None, None))
                    .await
                    .unwrap();
                last_offset = appended.physical_offset;
                puts += 1;
            }
            let rolled_into = std::fs::metadata(commit_log.join(segment_name(next))).unwrap();
            assert_eq!(rolled_into.len(), segment_size, "round {round}");
            if rolled_into.ino() == filled {
                adopted += 1;
            }
            // Only segments the writer reached, contiguous, each whole.
            let starts = segments(&commit_log);
            let expected: Vec<u64> = (0..=next / segment_size)
                .map(|i| i * segment_size)
                .collect();
            assert_eq!(starts, expected, "round {round}");
            for start in starts {
                let meta = std::fs::metadata(commit_log.join(segment_name(start))).unwrap();
                assert_eq!(meta.len(), segment_size);
            }
        }
        assert_eq!(adopted, 4, "every roll took the filled file");
        // The writer's segment is open with O_DSYNC: its writes need no fdatasync.
        let current = commit_log.join(segment_name(last_offset - last_offset % segment_size));
        let flags = open_flags(&current);
        assert!(
            flags.iter().any(|f| f & O_DSYNC != 0),
            "no O_DSYNC descriptor on {}: {flags:?}",
            current.display()
        );
        // Everything put is still there, across the adopted segments.
        let reader = handle.reader();
        for _ in 0..1000 {
            if reader.max_offset_in_queue("T", 0) == puts {
                break;
            }
            glommio::timer::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(reader.max_offset_in_queue("T", 0), puts);
        let no_filter = ferromq::store::reader::PullFilter::ALL;
        let first = reader.get_message("T", 0, 0, 1, &no_filter).await.unwrap();
        assert_eq!(first.messages.first().map(|m| m.physical_offset), Some(0));
        let last = reader
            .get_message("T", 0, puts - 1, 1, &no_filter)
            .await
            .unwrap();
        assert_eq!(
            last.messages.first().map(|m| m.physical_offset),
            Some(i64::try_from(last_offset).unwrap())
        );
        store.shutdown().await.unwrap();
    });
}

#[test]
fn under_async_flush_the_next_segment_is_made_ahead_and_opened_without_o_dsync() {
    // No put waits for a segment to be made: under ASYNC_FLUSH too the next segment's file is
    // made ahead (never filled: zeros would only compete with the writes) and the writer
    // rolls into that very file. Nor O_DSYNC: every write would wait for the device.
    let dir = TempDir::on_disk("store-prefill-async");
    let mut config = small_store_config(dir.path());
    config.flush_disk_type = ferromq::store::flush::FlushDiskType::AsyncFlush {
        interval: Duration::from_millis(20),
    };
    let segment_size = config.mapped_file_size_commit_log;
    let commit_log = config.commit_log_dir();
    let fill_dir = fill_dir_of(&commit_log);
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let handle = store.handle().clone();
        let body = vec![b'x'; 1000];
        let mut last_offset = 0;
        for round in 0..3u64 {
            let next = last_offset - last_offset % segment_size + segment_size;
            let fill = fill_dir.join(segment_name(next));
            let made = inode_when_present(&fill).await;
            while last_offset < next {
                let appended = handle
                    .put(store_message("T", 0, &body, None, None))
                    .await
                    .unwrap();
                last_offset = appended.physical_offset;
            }
            let rolled_into = std::fs::metadata(commit_log.join(segment_name(next))).unwrap();
            assert_eq!(made, rolled_into.ino(), "round {round}");
        }
        let current = commit_log.join(segment_name(last_offset - last_offset % segment_size));
        let flags = open_flags(&current);
        assert!(!flags.is_empty(), "the writer's segment is open");
        assert!(flags.iter().all(|f| f & O_DSYNC == 0), "{flags:?}");
        store.shutdown().await.unwrap();
    });
}

#[test]
fn under_big_jobs_the_fill_holds_but_still_makes_the_segment_the_writer_rolls_into() {
    // Puts of 300 KiB: every write job is big, so the fill writes no zeros; it still makes
    // the next segment's file, and the writer moves that file into place at the roll instead
    // of making one on its own path.
    let dir = TempDir::on_disk("store-prefill-held");
    let mut config = small_store_config(dir.path());
    config.mapped_file_size_commit_log = 4 << 20;
    let segment_size = config.mapped_file_size_commit_log;
    let commit_log = config.commit_log_dir();
    let fill_dir = fill_dir_of(&commit_log);
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let handle = store.handle().clone();
        let body = vec![b'y'; 300 << 10];
        let mut last_offset = 0;
        for round in 0..4u64 {
            let current = last_offset - last_offset % segment_size;
            let next = current + segment_size;
            let fill = fill_dir.join(segment_name(next));
            let mut made = None;
            while last_offset < next {
                let appended = handle
                    .put(store_message("B", 0, &body, None, None))
                    .await
                    .unwrap();
                last_offset = appended.physical_offset;
                if made.is_none() && last_offset < next {
                    made = std::fs::metadata(&fill).ok().map(|meta| meta.ino());
                }
            }
            let rolled_into = std::fs::metadata(commit_log.join(segment_name(next))).unwrap();
            assert_eq!(rolled_into.len(), segment_size, "round {round}");
            // From the second roll on, the fill started under big jobs and held throughout.
            if round > 0 {
                assert_eq!(made, Some(rolled_into.ino()), "round {round}");
            }
        }
        store.shutdown().await.unwrap();
    });
}
