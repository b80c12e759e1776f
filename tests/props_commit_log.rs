//! Crash property of the CommitLog writer, on the simulated disk.
//!
//! Story: a writer appends messages of random sizes to small segments (so segments roll and
//! end in blank records) and flushes at random points; then the machine loses power — each
//! segment file keeps its last synced image plus, at random, a prefix of the writes since,
//! the last one torn at a sector boundary. Recovery must find exactly a prefix of the appended
//! messages, byte for byte, containing every message a flush acknowledged; and a writer
//! reopened at the recovered end must append and flush on from there.
//!
//! Method: proptest drives the operations and the crash from its seed (failures print it and
//! `proptest-regressions/` replays it); `SimSegment` is the disk.

mod common;

use common::SimDirectory;
use ferromq::store::commit_log::{recover, CommitLog, SegmentOpener};
use ferromq::store::message::{decode_record, Record};
use ferromq_uring::file::SegmentFile;
use ferromq_uring::sim::CrashKeep;
use proptest::prelude::*;
use std::collections::HashMap;

const SEGMENT_SIZE: u64 = 4096;

#[derive(Clone, Debug)]
enum Op {
    Append { body_len: usize, queue: i32 },
    Flush,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0usize..700, 0i32..3).prop_map(|(body_len, queue)| Op::Append { body_len, queue }),
        1 => Just(Op::Flush),
    ]
}

fn crash_keep() -> impl Strategy<Value = CrashKeep> {
    prop_oneof![
        Just(CrashKeep::Nothing),
        (0usize..4, 0usize..9).prop_map(|(writes, sectors)| CrashKeep::Prefix { writes, sectors }),
    ]
}

/// Every record from offset 0 up to `end`, as (physical offset, body).
fn read_back(directory: &SimDirectory, end: u64) -> Vec<(u64, Vec<u8>)> {
    futures_lite::future::block_on(async {
        let mut records = Vec::new();
        let mut offset = 0;
        while offset < end {
            let start = offset - offset % SEGMENT_SIZE;
            let file = directory.open(start, SEGMENT_SIZE).await.unwrap();
            let bytes = file.read_at(0, SEGMENT_SIZE as usize).await.unwrap();
            let at = usize::try_from(offset - start).unwrap();
            match decode_record(&bytes[at..], true).unwrap() {
                Record::Message { record, size } => {
                    records.push((offset, record.body.to_vec()));
                    offset += size as u64;
                }
                Record::Blank { remaining } => offset += remaining as u64,
            }
        }
        records
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn crash_recovers_a_prefix_holding_every_flushed_message(
        ops in proptest::collection::vec(op(), 1..60),
        keeps in proptest::collection::vec(crash_keep(), 16),
    ) {
        futures_lite::future::block_on(async {
            let directory = SimDirectory::default();
            let mut log = CommitLog::open(directory.clone(), SEGMENT_SIZE, 0, HashMap::new())
                .await
                .unwrap();
            let mut appended: Vec<(u64, Vec<u8>)> = Vec::new();
            let mut acknowledged = 0;
            for (index, op) in ops.iter().enumerate() {
                match op {
                    Op::Append { body_len, queue } => {
                        let body = vec![u8::try_from(index % 251).unwrap(); *body_len];
                        let at = log.append(&common::put_message(*queue, &body), 2).await.unwrap();
                        appended.push((at.physical_offset, body));
                    }
                    Op::Flush => {
                        let durable = log.flush().await.unwrap();
                        assert_eq!(durable, log.write_offset());
                        acknowledged = appended.len();
                    }
                }
            }
            // Power loss: every file keeps its synced image and maybe a torn prefix of more.
            for (index, file) in directory.0.borrow().values().enumerate() {
                file.crash(keeps[index % keeps.len()]);
            }
            let starts: Vec<u64> = directory.0.borrow().keys().copied().collect();
            let (end, queue_offsets) = recover(&directory, SEGMENT_SIZE, &starts).await.unwrap();
            let recovered = read_back(&directory, end);
            prop_assert!(recovered.len() >= acknowledged, "lost an acknowledged message");
            prop_assert_eq!(&recovered[..], &appended[..recovered.len()], "not a prefix");

            // The writer reopened at the recovered end carries on.
            let mut log = CommitLog::open(directory.clone(), SEGMENT_SIZE, end, queue_offsets)
                .await
                .unwrap();
            let extra = log.append(&common::put_message(0, b"after the crash"), 3).await.unwrap();
            log.flush().await.unwrap();
            let starts: Vec<u64> = directory.0.borrow().keys().copied().collect();
            let (end_after, _) = recover(&directory, SEGMENT_SIZE, &starts).await.unwrap();
            prop_assert_eq!(end_after, extra.physical_offset + extra.size as u64);
            let again = read_back(&directory, end_after);
            prop_assert_eq!(again.last().map(|(_, body)| body.as_slice()), Some(&b"after the crash"[..]));
            prop_assert_eq!(&again[..recovered.len()], &recovered[..]);
            Ok(())
        })?;
    }
}

#[test]
fn failed_sync_poisons_the_log() {
    futures_lite::future::block_on(async {
        let directory = SimDirectory::default();
        let mut log = CommitLog::open(directory.clone(), SEGMENT_SIZE, 0, HashMap::new())
            .await
            .unwrap();
        log.append(&common::put_message(0, b"one"), 1)
            .await
            .unwrap();
        directory.0.borrow()[&0].fail_operation(2); // The write succeeds, the sync fails.
        assert!(log.flush().await.is_err());
        assert!(log.is_poisoned());
        let refused = log.append(&common::put_message(0, b"two"), 1).await;
        assert!(refused.is_err(), "no put is accepted after a failed flush");
        assert!(log.flush().await.is_err(), "never ok after a failed flush");
    });
}

#[test]
fn queue_offsets_are_per_queue_and_survive_recovery() {
    futures_lite::future::block_on(async {
        let directory = SimDirectory::default();
        let mut log = CommitLog::open(directory.clone(), SEGMENT_SIZE, 0, HashMap::new())
            .await
            .unwrap();
        let offsets: Vec<i64> = {
            let mut offsets = Vec::new();
            for queue in [0, 1, 0, 0, 1] {
                offsets.push(
                    log.append(&common::put_message(queue, b"x"), 1)
                        .await
                        .unwrap()
                        .queue_offset,
                );
            }
            offsets
        };
        assert_eq!(offsets, [0, 0, 1, 2, 1]);
        log.flush().await.unwrap();
        let (_, queue_offsets) = recover(&directory, SEGMENT_SIZE, &[0]).await.unwrap();
        assert_eq!(queue_offsets[&("T".to_owned(), 0)], 3);
        assert_eq!(queue_offsets[&("T".to_owned(), 1)], 2);
    });
}

#[test]
fn host_bits_a_client_claims_follow_the_real_addresses() {
    futures_lite::future::block_on(async {
        let directory = SimDirectory::default();
        let mut log = CommitLog::open(directory.clone(), SEGMENT_SIZE, 0, HashMap::new())
            .await
            .unwrap();
        // IPv4 hosts with both IPv6 bits claimed (a client's sysFlag), then an IPv6 born host
        // with none: each record is laid out by its addresses, and reads back whole.
        let mut claimed = common::put_message(0, b"claims");
        claimed.sys_flag = 0x10 | 0x20 | 0x1;
        let mut v6 = common::put_message(0, b"is v6!");
        v6.born_host = "[fd00::7]:5000".parse().unwrap();
        let first = log.append(&claimed, 1).await.unwrap();
        let second = log.append(&v6, 1).await.unwrap();
        assert_eq!(
            first.size,
            second.size - 12,
            "an IPv6 born host is 12 bytes longer"
        );
        log.flush().await.unwrap();
        let file = directory.open(0, SEGMENT_SIZE).await.unwrap();
        let bytes = file.read_at(0, SEGMENT_SIZE as usize).await.unwrap();
        let Ok(Record::Message { record, size }) = decode_record(&bytes, true) else {
            panic!("the first record does not decode");
        };
        assert_eq!(size, first.size);
        assert_eq!(
            record.sys_flag, 0x1,
            "the host bits cleared, the others kept"
        );
        assert_eq!(record.born_host, claimed.born_host);
        let Ok(Record::Message { record, .. }) = decode_record(&bytes[size..], true) else {
            panic!("the second record does not decode");
        };
        assert_eq!(record.sys_flag, 0x10);
        assert_eq!(record.born_host, v6.born_host);
    });
}

#[test]
fn properties_or_topic_too_long_for_the_layout_are_refused_before_any_append() {
    futures_lite::future::block_on(async {
        let directory = SimDirectory::default();
        let mut log = CommitLog::open(directory.clone(), 1 << 20, 0, HashMap::new())
            .await
            .unwrap();
        let mut properties = common::put_message(0, b"x");
        properties.properties = vec![b'p'; 32_768];
        let refused = log.append(&properties, 1).await;
        assert!(
            matches!(
                refused,
                Err(ferromq::store::commit_log::StoreError::Illegal(_))
            ),
            "{refused:?}"
        );
        let mut topic = common::put_message(0, b"x");
        topic.topic = "T".repeat(32_768);
        let batch = [common::put_message(0, b"fine"), topic];
        let refused = log.append_each(&batch, &[], 1, |_| {}).await;
        assert!(matches!(
            refused,
            Err(ferromq::store::commit_log::StoreError::Illegal(_))
        ));
        assert!(!log.is_poisoned());
        let stored = log
            .append(&common::put_message(0, b"after"), 1)
            .await
            .unwrap();
        assert_eq!((stored.physical_offset, stored.queue_offset), (0, 0));
    });
}
