//! The ConsumeQueue writer on the simulated disk: units across files of an unaligned size,
//! holes filled, repeats ignored, and recovery after a power loss.
//!
//! Method: a writer with 100-unit files (2,000 bytes, not a multiple of the 512-byte sector,
//! as Java's 6,000,000-byte files are not a multiple of 4 KiB) takes 450 units with a flush
//! every 50; the power then fails, dropping what was not flushed; recovery must find exactly
//! the flushed units, and a reopened writer carries on.

mod common;

use common::SimDirectory;
use ferromq::store::consume_queue::{
    recover_max_offset, ConsumeQueueWriter, CqUnit, BLANK_UNIT, UNIT_SIZE,
};
use ferromq_uring::file::SegmentFile;
use ferromq_uring::sim::CrashKeep;

const UNITS_PER_FILE: usize = 100;

fn unit(n: i64) -> CqUnit {
    CqUnit {
        physical_offset: n * 100,
        size: 100,
        tags_code: n,
    }
}

fn starts(directory: &SimDirectory) -> Vec<u64> {
    directory.0.borrow().keys().copied().collect()
}

#[test]
fn units_roll_over_unaligned_files_and_survive_what_was_flushed() {
    futures_lite::future::block_on(async {
        let directory = SimDirectory::default();
        let mut queue = ConsumeQueueWriter::open(directory.clone(), UNITS_PER_FILE, 0)
            .await
            .unwrap();
        for n in 0..450 {
            assert!(queue.put(n, unit(n)).await.unwrap());
            if n % 50 == 49 {
                assert_eq!(queue.flush().await.unwrap(), n + 1);
            }
        }
        assert_eq!(starts(&directory), [0, 2000, 4000, 6000, 8000]);
        for file in directory.0.borrow().values() {
            file.crash(CrashKeep::Nothing);
        }
        let max = recover_max_offset(&directory, UNITS_PER_FILE, &starts(&directory))
            .await
            .unwrap();
        assert_eq!(max, 450, "every flushed unit is back");
        let file = directory.0.borrow()[&2000].clone();
        let bytes = file.read_at(0, 2000).await.unwrap();
        assert_eq!(bytes.len(), 2000, "files keep their exact size");
        assert_eq!(CqUnit::decode(&bytes[5 * UNIT_SIZE..]), Some(unit(105)));

        let mut queue = ConsumeQueueWriter::open(directory.clone(), UNITS_PER_FILE, max)
            .await
            .unwrap();
        assert!(
            !queue.put(10, unit(10)).await.unwrap(),
            "a repeated dispatch is ignored"
        );
        assert!(queue.put(452, unit(452)).await.unwrap(), "a gap is filled");
        queue.flush().await.unwrap();
        let max = recover_max_offset(&directory, UNITS_PER_FILE, &starts(&directory))
            .await
            .unwrap();
        assert_eq!(max, 453);
        let file = directory.0.borrow()[&8000].clone();
        let bytes = file.read_at(0, 2000).await.unwrap();
        assert_eq!(CqUnit::decode(&bytes[50 * UNIT_SIZE..]), Some(BLANK_UNIT));
        assert_eq!(CqUnit::decode(&bytes[52 * UNIT_SIZE..]), Some(unit(452)));
    });
}

#[test]
fn unflushed_units_are_lost_on_power_failure_not_corrupted() {
    futures_lite::future::block_on(async {
        let directory = SimDirectory::default();
        let mut queue = ConsumeQueueWriter::open(directory.clone(), UNITS_PER_FILE, 0)
            .await
            .unwrap();
        for n in 0..30 {
            queue.put(n, unit(n)).await.unwrap();
        }
        queue.flush().await.unwrap();
        for n in 30..60 {
            queue.put(n, unit(n)).await.unwrap();
        }
        for file in directory.0.borrow().values() {
            file.crash(CrashKeep::Nothing);
        }
        let max = recover_max_offset(&directory, UNITS_PER_FILE, &starts(&directory))
            .await
            .unwrap();
        assert_eq!(max, 30);
    });
}
