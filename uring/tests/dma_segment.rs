//! `DmaSegment` on a real file: O_DIRECT writes through io_uring, preallocation, fdatasync.
//!
//! Method: on a glommio executor, create a segment in the target directory (a real disk;
//! tmpfs has no O_DIRECT), write aligned blocks, sync, read back, reopen, and check the
//! preallocated size and the misaligned-write refusal. Fails with the io_uring remedy text
//! when io_uring is unavailable, never skips.

mod common;

use common::on_executor;
use ferromq_uring::file::{DmaSegment, SegmentFile};
use ferromq_uring::IoError;
use std::path::PathBuf;

fn segment_path(name: &str) -> PathBuf {
    common::segment_path("dma-segment", name)
}

#[test]
fn dma_segment_preallocates_writes_syncs_and_reads_back() {
    let path = segment_path("roundtrip");
    let task_path = path.clone();
    on_executor(move || async move {
        let segment = DmaSegment::open(&task_path, 1 << 20).await.unwrap();
        let alignment = usize::try_from(segment.alignment()).unwrap();
        assert!(alignment >= 512);
        let block: Vec<u8> = (0..alignment * 2).map(|i| (i % 251) as u8).collect();
        segment.write_at(8192, &block).await.unwrap();
        segment.sync().await.unwrap();
        assert_eq!(segment.read_at(8192, block.len()).await.unwrap(), block);
        assert_eq!(segment.read_at(8192 + 3, 5).await.unwrap(), &block[3..8]);
        let refused = segment.write_at(100, &block).await;
        assert!(
            matches!(refused, Err(IoError::Misaligned { .. })),
            "{refused:?}"
        );
        drop(segment);
        let reopened = DmaSegment::open(&task_path, 1 << 20).await.unwrap();
        assert_eq!(reopened.read_at(8192, block.len()).await.unwrap(), block);
    });
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        1 << 20,
        "preallocated to full size"
    );
    std::fs::remove_file(path).unwrap();
}

/// A write from a buffer of the segment's own writes the first `len` bytes of it, from
/// where the caller filled them, and nothing of the rest of the buffer.
#[test]
fn dma_segment_writes_the_front_of_its_own_buffer() {
    let path = segment_path("own-buffer");
    let task_path = path.clone();
    on_executor(move || async move {
        let segment = DmaSegment::open(&task_path, 1 << 20).await.unwrap();
        let alignment = usize::try_from(segment.alignment()).unwrap();
        let mut buffer = segment.alloc_buffer(4 * alignment);
        assert_eq!(buffer.as_ref().len(), 4 * alignment);
        let filled: Vec<u8> = (0..4 * alignment).map(|i| (i % 253) as u8).collect();
        buffer.as_mut().copy_from_slice(&filled);
        segment
            .write_buffer_at(0, buffer, 2 * alignment)
            .await
            .unwrap();
        segment.sync().await.unwrap();
        let read = segment.read_at(0, 4 * alignment).await.unwrap();
        assert_eq!(&read[..2 * alignment], &filled[..2 * alignment]);
        assert!(
            read[2 * alignment..].iter().all(|&byte| byte == 0),
            "beyond the length, the file keeps what it had"
        );
        let misaligned = segment.alloc_buffer(alignment);
        let refused = segment.write_buffer_at(0, misaligned, 100).await;
        assert!(
            matches!(refused, Err(IoError::Misaligned { .. })),
            "{refused:?}"
        );
    });
    std::fs::remove_file(path).unwrap();
}

#[test]
fn dma_segment_open_failure_names_the_path() {
    let missing_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-such-dir/segment");
    let message = on_executor(move || async move {
        DmaSegment::open(&missing_dir, 4096)
            .await
            .unwrap_err()
            .to_string()
    });
    assert!(
        message.contains("create of") && message.contains("no-such-dir"),
        "{message}"
    );
}

#[test]
fn dma_segment_of_unaligned_size_keeps_its_exact_size() {
    // A ConsumeQueue file of 300 units is 6,000 bytes: its last block is written padded.
    let path = segment_path("unaligned");
    let task_path = path.clone();
    on_executor(move || async move {
        let segment = DmaSegment::open(&task_path, 6000).await.unwrap();
        let alignment = usize::try_from(segment.alignment()).unwrap();
        let last_block_at = (6000 / alignment) * alignment;
        let block = vec![7u8; alignment];
        segment
            .write_at(last_block_at as u64, &block)
            .await
            .unwrap();
        segment.sync().await.unwrap();
        let tail = segment
            .read_at(last_block_at as u64, alignment)
            .await
            .unwrap();
        assert_eq!(
            tail.len(),
            6000 - last_block_at,
            "reads stop at the file's end"
        );
        assert!(tail.iter().all(|b| *b == 7));
    });
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        6000,
        "exact size kept"
    );
    std::fs::remove_file(path).unwrap();
}

#[test]
fn dma_segment_made_unsynced_gets_its_name_durable_with_its_first_sync() {
    let root = segment_path("unsynced-root");
    let dir = root.join("topic").join("3");
    let task_dir = dir.clone();
    let (named_before, named_after, bytes) = on_executor(move || async move {
        let new_dirs = ferromq_uring::disk::create_dir_all_unsynced(&task_dir).unwrap();
        assert_eq!(
            new_dirs.len(),
            3,
            "root's parent, root and topic: {new_dirs:?}"
        );
        let path = task_dir.join("00000000000000000000");
        let segment = DmaSegment::create_unsynced(&path, 6000, new_dirs)
            .await
            .unwrap();
        let named_before = segment.is_durably_named();
        let block = vec![9u8; usize::try_from(segment.alignment()).unwrap()];
        segment.write_at(0, &block).await.unwrap();
        segment.sync().await.unwrap();
        let named_after = segment.is_durably_named();
        let bytes = segment.read_at(0, 8).await.unwrap();
        (named_before, named_after, bytes)
    });
    assert!(!named_before && named_after);
    assert_eq!(bytes, vec![9u8; 8]);
    let path = dir.join("00000000000000000000");
    assert_eq!(
        std::fs::metadata(&path).unwrap().len(),
        6000,
        "whole length at once"
    );
    assert!(!dir.join("00000000000000000000.tmp").exists());
    std::fs::remove_dir_all(&root).unwrap();
}

/// A Java broker loads every file of a CommitLog or ConsumeQueue directory as a segment and
/// refuses to start on a name that is not an offset, so a kill -9 at any instant of a
/// segment's making must leave no other name there: the directory, polled while 100
/// segments are made (each with its syncs, the slow part), never shows one.
#[test]
fn create_with_first_block_names_nothing_but_the_whole_file() {
    use std::collections::BTreeSet;
    use std::sync::atomic::{AtomicBool, Ordering};
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("first-block-names-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let names: Vec<String> = (0..100u64).map(|i| format!("{:020}", i << 20)).collect();
    let done = AtomicBool::new(false);
    let seen = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| {
            let mut seen = BTreeSet::new();
            while !done.load(Ordering::Acquire) {
                for entry in std::fs::read_dir(&dir).unwrap() {
                    seen.insert(entry.unwrap().file_name().into_string().unwrap());
                }
            }
            seen
        });
        for name in &names {
            let path = dir.join(name);
            ferromq_uring::file::create_with_first_block(&path, 1 << 20).unwrap();
            assert_eq!(std::fs::metadata(&path).unwrap().len(), 1 << 20);
        }
        done.store(true, Ordering::Release);
        watcher.join().unwrap()
    });
    let strays: Vec<&String> = seen.iter().filter(|name| !names.contains(name)).collect();
    assert!(strays.is_empty(), "the directory showed {strays:?}");
    // An empty file under the name (a crash before its first sync) is replaced by a whole one;
    // a short one is extended, its bytes kept.
    let empty = dir.join("empty");
    std::fs::write(&empty, b"").unwrap();
    ferromq_uring::file::create_with_first_block(&empty, 8192).unwrap();
    assert_eq!(std::fs::read(&empty).unwrap(), vec![0; 8192]);
    let short = dir.join("short");
    std::fs::write(&short, b"kept").unwrap();
    ferromq_uring::file::create_with_first_block(&short, 8192).unwrap();
    let bytes = std::fs::read(&short).unwrap();
    assert_eq!((&bytes[..4], bytes.len()), (&b"kept"[..], 8192));
    let listed: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(listed.len(), names.len() + 2, "{listed:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A ConsumeQueue file must be exactly its configured size whenever a Java broker might look,
/// including after a kill -9 at any instant: the file, watched while its last block is
/// written 300 times, never shows another length; and what was written reads back, across the
/// boundary between direct and buffered writes.
#[test]
fn dma_segment_of_unaligned_size_never_grows_past_it() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let path = segment_path("never-grows");
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (path, done) = (path.clone(), done.clone());
        std::thread::spawn(move || {
            let mut lengths = std::collections::BTreeSet::new();
            while !done.load(Ordering::Acquire) {
                if let Ok(meta) = std::fs::metadata(&path) {
                    lengths.insert(meta.len());
                }
            }
            lengths
        })
    };
    let task_path = path.clone();
    on_executor(move || async move {
        let segment = DmaSegment::open(&task_path, 6000).await.unwrap();
        let alignment = usize::try_from(segment.alignment()).unwrap();
        let last_block_at = (6000 / alignment) * alignment;
        for round in 0..300u32 {
            let block = vec![u8::try_from(round % 251).unwrap(); alignment];
            segment
                .write_at(last_block_at as u64, &block)
                .await
                .unwrap();
        }
        // One write from the start across the end.
        let whole: Vec<u8> = (0..6000usize.next_multiple_of(alignment))
            .map(|i| u8::try_from(i % 253).unwrap())
            .collect();
        segment.write_at(0, &whole).await.unwrap();
        segment.sync().await.unwrap();
        assert_eq!(segment.read_at(0, 8192).await.unwrap(), &whole[..6000]);
    });
    done.store(true, Ordering::Release);
    let lengths = watcher.join().unwrap();
    assert_eq!(
        lengths.into_iter().collect::<Vec<_>>(),
        [6000],
        "the file's lengths"
    );
    assert_eq!(std::fs::metadata(&path).unwrap().len(), 6000);
    std::fs::remove_file(path).unwrap();
}
