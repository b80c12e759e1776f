//! The recovery decision table of `src/store/recovery.rs`, one test per row, and the repairs
//! recovery makes after an unclean stop — each written as a crash story.
//!
//! Method: a store on real files (`TempDir::on_disk`, direct I/O needs a real filesystem) with
//! small segments, run under `SYNC_FLUSH` on a glommio executor. A crash is the end of that
//! executor without `LocalStore::shutdown`: the `abort` file stays, the lock goes with the
//! dropped store, and the writer and dispatch tasks never run again. Between two runs the
//! test edits the files the way a crash or a disk would (a torn record, a lost ConsumeQueue, a
//! stale checkpoint) with `std::fs`, then opens the store again in a new executor. Each test
//! checks what `RecoveryReport` says and what the store then serves: every message at its
//! queue offset with its bytes, the queues' offsets, key lookups, and where the next put lands.

mod common;

use common::{small_store_config, TempDir};
use ferromq::store::checkpoint::StoreCheckpoint;
use ferromq::store::commit_log::{Appended, PutMessage};
use ferromq::store::config::StoreConfig;
use ferromq::store::consume_queue::{CqUnit, UNIT_SIZE};
use ferromq::store::message::{decode_record, parse_properties, properties_to_string, Record};
use ferromq::store::message_store::{LocalStore, StoreHandle};
use ferromq::store::reader::{GetMessageStatus, PullFilter, StoreReader};
use ferromq::store::recovery::RecoveryMode;
use ferromq::store::segment::segment_name;
use futures::future::select;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

const NO_FILTER: PullFilter<'static> = PullFilter::ALL;

/// Segment size of the tests' CommitLog (`small_store_config`).
const SEGMENT: u64 = 64 * 1024;

/// One message as its producer was told it was stored.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Stored {
    topic: String,
    queue_id: i32,
    queue_offset: i64,
    physical_offset: u64,
    size: usize,
    body: Vec<u8>,
    /// The `KEYS` value and the `UNIQ_KEY`, if the message has them.
    keys: Option<(String, String)>,
}

/// What the workload writes: message `i` goes to topic `T`, queue `i % 3`, with a body of
/// about 900 bytes (about 70 records per 64 KiB segment); keyed messages carry `KEYS` =
/// `k-<i>` and a `UNIQ_KEY`, as a Java producer sends them.
fn workload_message(i: usize, keyed: bool) -> (PutMessage, Option<(String, String)>) {
    let body = format!("m-{i}-{}", "x".repeat(880 + i % 37)).into_bytes();
    let queue_id = i32::try_from(i % 3).unwrap();
    let keys = keyed.then(|| (format!("k-{i}"), format!("7F0000010000{i:020X}")));
    let mut properties = vec![("TAGS", "t")];
    if let Some((key, uniq)) = &keys {
        properties.push(("KEYS", key.as_str()));
        properties.push(("UNIQ_KEY", uniq.as_str()));
    }
    let message = PutMessage {
        topic: "T".into(),
        properties: properties_to_string(properties).into_bytes(),
        ..common::put_message(queue_id, &body)
    };
    (message, keys)
}

/// Puts messages `range` of the workload one by one; returns them as acknowledged.
async fn put_workload(
    handle: &StoreHandle,
    range: std::ops::Range<usize>,
    keyed: bool,
) -> Vec<Stored> {
    let mut stored = Vec::new();
    for i in range {
        let (message, keys) = workload_message(i, keyed);
        let body = message.body.clone();
        let appended = handle.put(message).await.unwrap();
        stored.push(stored_from(
            &appended,
            "T",
            i32::try_from(i % 3).unwrap(),
            body,
            keys,
        ));
    }
    stored
}

fn stored_from(
    appended: &Appended,
    topic: &str,
    queue_id: i32,
    body: Vec<u8>,
    keys: Option<(String, String)>,
) -> Stored {
    Stored {
        topic: topic.to_owned(),
        queue_id,
        queue_offset: appended.queue_offset,
        physical_offset: appended.physical_offset,
        size: appended.size,
        body,
        keys,
    }
}

/// Next queue offset of every queue in `stored`.
fn queue_ends(stored: &[Stored]) -> BTreeMap<(String, i32), i64> {
    let mut ends = BTreeMap::new();
    for message in stored {
        let end = ends
            .entry((message.topic.clone(), message.queue_id))
            .or_insert(0);
        *end = (*end).max(message.queue_offset + 1);
    }
    ends
}

/// Opens a store at `config`, puts messages `range` of the workload, waits until dispatch
/// has them all, and leaves the executor with the store still running: a crash (the
/// `abort` file stays). Returns the puts as acknowledged.
fn crash_after_workload(
    config: &StoreConfig,
    range: std::ops::Range<usize>,
    keyed: bool,
) -> Vec<Stored> {
    let config = config.clone();
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let stored = put_workload(store.handle(), range, keyed).await;
        wait_dispatched(store.handle(), &stored).await;
        stored
    })
}

/// Waits (at most 20 s) until dispatch published every queue up to its end in `stored`.
async fn wait_dispatched(handle: &StoreHandle, stored: &[Stored]) {
    let growth = handle.shared().subscribe();
    let reader = handle.reader();
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let lagging = queue_ends(stored)
            .into_iter()
            .find(|((topic, queue), end)| reader.max_offset_in_queue(topic, *queue) < *end);
        let Some(lagging) = lagging else { return };
        assert!(
            Instant::now() < deadline,
            "dispatch did not publish {lagging:?} within 20 s"
        );
        // The timer only bounds the wait; the growth announcement is what wakes us.
        let timer = glommio::timer::sleep(Duration::from_millis(200));
        let _ = select(Box::pin(growth.next()), Box::pin(timer)).await;
    }
}

/// A message as pulled: queue offset, physical offset, body.
type Pulled = (i64, u64, Vec<u8>);

/// Pulls one queue from its min offset to its max; returns (queue offset, physical offset,
/// body) of each message, checking that every record agrees with the unit that led to it.
async fn pull_queue(reader: &StoreReader, topic: &str, queue_id: i32) -> Vec<Pulled> {
    let mut offset = reader.min_offset_in_queue(topic, queue_id);
    let mut all = Vec::new();
    for _ in 0..10_000 {
        let result = reader
            .get_message(topic, queue_id, offset, 32, &NO_FILTER)
            .await
            .unwrap();
        match result.status {
            GetMessageStatus::Found => {}
            GetMessageStatus::OffsetOverflowOne | GetMessageStatus::NoMessageInQueue => return all,
            other => panic!("{topic}/{queue_id} @{offset}: {other:?}"),
        }
        for found in &result.messages {
            let bytes = result.record(found);
            let Ok(Record::Message { record, size }) = decode_record(bytes, true) else {
                panic!(
                    "{topic}/{queue_id} @{}: not a whole record",
                    found.queue_offset
                );
            };
            assert_eq!(size, found.size);
            assert_eq!(record.queue_offset, found.queue_offset);
            assert_eq!(record.physical_offset, found.physical_offset);
            assert_eq!((record.topic, record.queue_id), (topic, queue_id));
            let physical = u64::try_from(found.physical_offset).unwrap();
            all.push((found.queue_offset, physical, record.body.to_vec()));
        }
        offset = result.next_begin_offset;
    }
    panic!("{topic}/{queue_id}: more than 10,000 pulls");
}

/// Asserts that the store serves exactly `stored`: each queue, pulled whole, holds these
/// messages at these queue and physical offsets with these bodies, and nothing else.
async fn assert_serves_exactly(reader: &StoreReader, stored: &[Stored]) {
    let mut expected: BTreeMap<(String, i32), Vec<Pulled>> = BTreeMap::new();
    for message in stored {
        expected
            .entry((message.topic.clone(), message.queue_id))
            .or_default()
            .push((
                message.queue_offset,
                message.physical_offset,
                message.body.clone(),
            ));
    }
    for ((topic, queue_id), list) in &expected {
        assert_eq!(
            reader.max_offset_in_queue(topic, *queue_id),
            list.last().unwrap().0 + 1,
            "{topic}/{queue_id} max offset"
        );
        let pulled = pull_queue(reader, topic, *queue_id).await;
        assert_eq!(pulled.len(), list.len(), "{topic}/{queue_id} message count");
        assert!(
            pulled == *list,
            "{topic}/{queue_id} differs from what was acknowledged"
        );
    }
}

/// The record stored at `offset`, read from the CommitLog file (not through the store).
fn record_on_disk(root: &Path, offset: u64) -> Vec<u8> {
    let start = offset - offset % SEGMENT;
    let bytes = std::fs::read(root.join("commitlog").join(segment_name(start))).unwrap();
    let at = usize::try_from(offset - start).unwrap();
    let size = i32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    bytes[at..at + usize::try_from(size).unwrap()].to_vec()
}

/// Store time of the record at `offset`, read from disk.
fn store_time_on_disk(root: &Path, offset: u64) -> i64 {
    let bytes = record_on_disk(root, offset);
    match decode_record(&bytes, true) {
        Ok(Record::Message { record, .. }) => record.store_timestamp,
        other => panic!("no record at {offset}: {other:?}"),
    }
}

/// Starts of the CommitLog segments on disk, sorted.
fn segments_on_disk(root: &Path) -> Vec<u64> {
    let mut starts: Vec<u64> = std::fs::read_dir(root.join("commitlog"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .map(|name| name.parse().unwrap())
        .collect();
    starts.sort_unstable();
    starts
}

/// Rewrites `<root>/checkpoint` as a flush at those store times would have left it.
fn write_checkpoint(root: &Path, physic: i64, logics: i64, index: i64) {
    let checkpoint = StoreCheckpoint {
        physic_msg_timestamp: physic,
        logics_msg_timestamp: logics,
        index_msg_timestamp: index,
        ..StoreCheckpoint::default()
    };
    write_synced(&root.join("checkpoint"), 0, &checkpoint.encode());
}

fn read_checkpoint(root: &Path) -> StoreCheckpoint {
    StoreCheckpoint::decode(&std::fs::read(root.join("checkpoint")).unwrap())
}

/// Overwrites `bytes` at `offset` of an existing file and syncs it (the store reads with
/// direct I/O, which sees synced page-cache writes).
fn write_synced(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    file.write_all_at(bytes, offset).unwrap();
    file.sync_all().unwrap();
}

/// The ConsumeQueue unit at `queue_offset` of a queue, read from its file on disk.
fn unit_on_disk(config: &StoreConfig, topic: &str, queue_id: i32, queue_offset: i64) -> CqUnit {
    let units = i64::try_from(config.consume_queue_units_per_file).unwrap();
    let first = queue_offset - queue_offset % units;
    let name = segment_name(u64::try_from(first).unwrap() * UNIT_SIZE as u64);
    let bytes = std::fs::read(config.queue_dir(topic, queue_id).join(name)).unwrap();
    let at = usize::try_from(queue_offset - first).unwrap() * UNIT_SIZE;
    CqUnit::decode(&bytes[at..]).unwrap()
}

/// Keys lookups: every keyed message of `stored` is found exactly once by its `KEYS` token
/// and by its `UNIQ_KEY`, and the record found is that message.
async fn assert_keys_found_once(reader: &StoreReader, stored: &[Stored]) {
    let mut missing = Vec::new();
    let mut repeated = Vec::new();
    for message in stored {
        let Some((key, uniq)) = &message.keys else {
            continue;
        };
        for lookup in [key, uniq] {
            let found = reader
                .query_by_key(&message.topic, lookup, 32, 0, i64::MAX)
                .await
                .unwrap();
            match found.len() {
                0 => missing.push((lookup.clone(), message.physical_offset)),
                1 => {
                    let Ok(Record::Message { record, .. }) = decode_record(&found[0], true) else {
                        panic!("{lookup}: not a record");
                    };
                    assert_eq!(
                        u64::try_from(record.physical_offset).unwrap(),
                        message.physical_offset,
                        "{lookup}"
                    );
                    assert_eq!(record.body, message.body, "{lookup}");
                }
                n => repeated.push((lookup.clone(), message.physical_offset, n)),
            }
        }
    }
    assert!(
        missing.is_empty() && repeated.is_empty(),
        "{} keys not found (first: {:?}); {} found more than once (first: {:?})",
        missing.len(),
        missing.first(),
        repeated.len(),
        repeated.first()
    );
}

// --- The decision table -------------------------------------------------------------------

/// Row 1: no CommitLog segment. Nothing to walk; the first put starts the log at 0.
#[test]
fn recover_fresh_store_starts_empty() {
    let dir = TempDir::on_disk("recover-fresh");
    let config = small_store_config(dir.path());
    let root = dir.path().to_owned();
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let report = store.recovery().clone();
        assert_eq!(report.mode, RecoveryMode::Fresh);
        assert_eq!(
            (report.walk_start, report.valid_end, report.redispatch_from),
            (0, 0, 0)
        );
        assert_eq!((report.redispatched, report.queues), (0, 0));
        assert!(
            root.join("abort").exists(),
            "a running store has an abort file"
        );
        let first = put_workload(store.handle(), 0..1, false).await;
        assert_eq!((first[0].physical_offset, first[0].queue_offset), (0, 0));
        store.shutdown().await.unwrap();
        assert!(!root.join("abort").exists());
    });
}

/// Row 2: a clean stop (no `abort`). The walk checks only the last three segments, and
/// nothing is dispatched again: the queues and the index were synced at the stop.
#[test]
fn recover_after_clean_stop_is_normal_and_redispatches_nothing() {
    let dir = TempDir::on_disk("recover-normal");
    let config = small_store_config(dir.path());
    let root = dir.path().to_owned();
    let stored = {
        let config = config.clone();
        ferromq_shards::testing::run_local(async move {
            let store = LocalStore::open(config).await.unwrap();
            let stored = put_workload(store.handle(), 0..400, true).await;
            store.shutdown().await.unwrap();
            stored
        })
    };
    let segments = segments_on_disk(&root);
    assert!(
        segments.len() >= 5,
        "400 records of ~1 KiB fill 5+ segments: {segments:?}"
    );
    let last = stored.last().unwrap().clone();
    let synced = read_checkpoint(&root);
    assert_eq!(
        synced.physic_msg_timestamp,
        store_time_on_disk(&root, last.physical_offset),
        "a clean stop leaves the last record's store time in the checkpoint"
    );
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config.clone()).await.unwrap();
        let report = store.recovery().clone();
        assert_eq!(report.mode, RecoveryMode::Normal);
        assert_eq!(report.walk_start, segments[segments.len() - 3]);
        assert_eq!(report.valid_end, last.physical_offset + last.size as u64);
        assert_eq!(report.redispatch_from, report.valid_end);
        assert_eq!(report.redispatched, 0);
        assert_eq!(report.queues, 3);
        assert_eq!(
            read_checkpoint(&root).physic_msg_timestamp,
            synced.physic_msg_timestamp,
            "opening keeps the synced store time: nothing new was synced"
        );
        let reader = store.handle().reader();
        assert_serves_exactly(&reader, &stored).await;
        assert_keys_found_once(&reader, &stored).await;
        let next = put_workload(store.handle(), 400..401, true).await;
        assert_eq!(next[0].physical_offset, report.valid_end);
        assert_eq!(next[0].queue_offset, queue_ends(&stored)[&("T".into(), 1)]);
        store.shutdown().await.unwrap();
    });
}

/// Row 3: `abort` and a checkpoint. The broker ran, its last checkpoint flush happened while
/// segment 2 was being written, then it died. The walk starts at the newest segment whose
/// first record is stored at or before the checkpoint's older time less 3 s, and re-dispatch
/// starts there. If the store then dies again before any put, the next start finds the same
/// row: opening must not lose the checkpoint's times.
#[test]
fn recover_with_abort_and_checkpoint_walks_from_the_checkpoint_segment() {
    let dir = TempDir::on_disk("recover-abnormal");
    let config = small_store_config(dir.path());
    let root = dir.path().to_owned();
    let stored = crash_after_workload(&config, 0..400, false);
    assert!(root.join("abort").exists());
    let segments = segments_on_disk(&root);
    assert!(segments.len() >= 5, "{segments:?}");
    let first_times: Vec<i64> = segments
        .iter()
        .map(|start| store_time_on_disk(&root, *start))
        .collect();
    assert!(
        first_times[1] < first_times[2] && first_times[2] < first_times[3],
        "segments 1, 2 and 3 start at distinct store times: {first_times:?}"
    );
    // physicMsgTimestamp and logicsMsgTimestamp 3 s after segment 2's first record; the
    // index holds nothing (no keys), so its time (0) does not count.
    let checkpoint_time = first_times[2] + 3000;
    write_checkpoint(&root, checkpoint_time + 5, checkpoint_time, 0);
    let last = stored.last().unwrap().clone();
    let expected_redispatched = stored
        .iter()
        .filter(|m| m.physical_offset >= segments[2])
        .count() as u64;
    let walk_start = segments[2];
    for run in ["first start", "second start, after a crash before any put"] {
        let config = config.clone();
        let stored = stored.clone();
        ferromq_shards::testing::run_local(async move {
            let store = LocalStore::open(config).await.unwrap();
            let report = store.recovery().clone();
            assert_eq!(report.mode, RecoveryMode::Abnormal, "{run}");
            assert_eq!(report.walk_start, walk_start, "{run}");
            assert_eq!(report.redispatch_from, walk_start, "{run}");
            assert_eq!(report.redispatched, expected_redispatched, "{run}");
            assert_eq!(report.valid_end, last.physical_offset + last.size as u64);
            assert_eq!(report.queues, 3);
            assert_serves_exactly(&store.handle().reader(), &stored).await;
            // A crash again.
        });
    }
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let next = put_workload(store.handle(), 400..401, false).await;
        assert_eq!(
            next[0].physical_offset,
            last.physical_offset + last.size as u64
        );
        assert_eq!(next[0].queue_offset, queue_ends(&stored)[&("T".into(), 1)]);
        store.shutdown().await.unwrap();
    });
}

/// Row 4: `abort` and no checkpoint (lost, or never written). Nothing says where durable
/// data ends, so every segment is walked and every record dispatched again.
#[test]
fn recover_with_abort_and_no_checkpoint_walks_from_the_first_segment() {
    let dir = TempDir::on_disk("recover-from-first");
    let config = small_store_config(dir.path());
    let root = dir.path().to_owned();
    let stored = crash_after_workload(&config, 0..300, true);
    std::fs::remove_file(root.join("checkpoint")).unwrap();
    let last = stored.last().unwrap().clone();
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let report = store.recovery().clone();
        assert_eq!(report.mode, RecoveryMode::AbnormalFromFirst);
        assert_eq!(report.walk_start, 0);
        assert_eq!(report.redispatch_from, 0);
        assert_eq!(report.redispatched, stored.len() as u64);
        assert_eq!(report.valid_end, last.physical_offset + last.size as u64);
        let reader = store.handle().reader();
        assert_serves_exactly(&reader, &stored).await;
        assert_keys_found_once(&reader, &stored).await;
        let next = put_workload(store.handle(), 300..301, true).await;
        assert_eq!(next[0].physical_offset, report.valid_end);
        assert_eq!(next[0].queue_offset, queue_ends(&stored)[&("T".into(), 0)]);
        store.shutdown().await.unwrap();
    });
}

// --- Repairs ------------------------------------------------------------------------------

/// How the last record is damaged.
#[derive(Clone, Copy, Debug)]
enum Damage {
    /// One body byte flipped: whole, but its CRC fails.
    FlippedBodyByte,
    /// Its second half never reached the disk (zeros).
    ZeroedSecondHalf,
}

/// The story: puts acknowledged, the store dies, and the last record on disk is damaged.
/// Recovery cuts the log at the start of that record, drops the ConsumeQueue unit that
/// pointed at it, and the next put takes its physical and queue offset.
fn torn_tail_is_cut(damage: Damage) {
    let dir = TempDir::on_disk("recover-torn");
    let config = small_store_config(dir.path());
    let root = dir.path().to_owned();
    let mut stored = {
        let config = config.clone();
        ferromq_shards::testing::run_local(async move {
            let store = LocalStore::open(config).await.unwrap();
            let stored = put_workload(store.handle(), 0..200, true).await;
            wait_dispatched(store.handle(), &stored).await;
            stored
        })
    };
    let torn = stored.pop().unwrap();
    let segment_start = torn.physical_offset - torn.physical_offset % SEGMENT;
    let segment = root.join("commitlog").join(segment_name(segment_start));
    let at = torn.physical_offset - segment_start;
    match damage {
        Damage::FlippedBodyByte => {
            let record = record_on_disk(&root, torn.physical_offset);
            let body_at = record
                .windows(torn.body.len())
                .position(|w| w == torn.body)
                .unwrap();
            write_synced(&segment, at + body_at as u64, &[record[body_at] ^ 0x20]);
        }
        Damage::ZeroedSecondHalf => {
            let half = torn.size / 2;
            write_synced(&segment, at + half as u64, &vec![0; torn.size - half]);
        }
    }
    assert_eq!(
        unit_on_disk(&config, "T", torn.queue_id, torn.queue_offset).physical_offset,
        i64::try_from(torn.physical_offset).unwrap(),
        "before recovery a unit points at the damaged record"
    );
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config.clone()).await.unwrap();
        let report = store.recovery().clone();
        assert!(
            matches!(
                report.mode,
                RecoveryMode::Abnormal | RecoveryMode::AbnormalFromFirst
            ),
            "{report:?}"
        );
        assert_eq!(report.valid_end, torn.physical_offset, "{damage:?}");
        let tail = std::fs::read(&segment).unwrap();
        let from = usize::try_from(at).unwrap();
        assert!(
            tail[from..from + torn.size].iter().all(|b| *b == 0),
            "the damaged bytes are zeroed, so no later walk meets them"
        );
        assert!(
            !unit_on_disk(&config, "T", torn.queue_id, torn.queue_offset).is_written(),
            "the unit that pointed at the damaged record is gone from the file"
        );
        let reader = store.handle().reader();
        assert_eq!(
            reader.max_offset_in_queue("T", torn.queue_id),
            torn.queue_offset
        );
        let gone = reader
            .get_message("T", torn.queue_id, torn.queue_offset, 1, &NO_FILTER)
            .await
            .unwrap();
        assert_eq!(gone.status, GetMessageStatus::OffsetOverflowOne);
        assert!(reader
            .record_at(i64::try_from(torn.physical_offset).unwrap())
            .await
            .unwrap()
            .is_none());
        assert_serves_exactly(&reader, &stored).await;
        assert_keys_found_once(&reader, &stored).await;
        let (torn_key, torn_uniq) = torn.keys.clone().unwrap();
        for key in [&torn_key, &torn_uniq] {
            let found = reader
                .query_by_key("T", key, 32, 0, i64::MAX)
                .await
                .unwrap();
            assert!(found.is_empty(), "the cut record's key {key} finds nothing");
        }
        // The next put to that queue takes the cut record's place and queue offset.
        let (message, keys) = workload_message(10_000, true);
        let body = message.body.clone();
        let message = PutMessage {
            queue_id: torn.queue_id,
            ..message
        };
        let appended = store.handle().put(message).await.unwrap();
        assert_eq!(appended.physical_offset, torn.physical_offset);
        assert_eq!(appended.queue_offset, torn.queue_offset);
        stored.push(stored_from(&appended, "T", torn.queue_id, body, keys));
        wait_dispatched(store.handle(), &stored).await;
        assert_serves_exactly(&reader, &stored).await;
        assert_keys_found_once(&reader, &stored).await;
        store.shutdown().await.unwrap();
    });
}

#[test]
fn recover_abnormally_truncates_record_with_bad_body_crc() {
    torn_tail_is_cut(Damage::FlippedBodyByte);
}

#[test]
fn recover_abnormally_truncates_half_written_record() {
    torn_tail_is_cut(Damage::ZeroedSecondHalf);
}

/// The story: the store dies, and one queue's ConsumeQueue files are lost while another
/// queue's file lost its last units (written but never synced). No checkpoint survives
/// either. Re-dispatch from the first segment rebuilds both, at the same queue offsets.
#[test]
fn recover_abnormally_rebuilds_missing_and_lagging_consume_queues() {
    let dir = TempDir::on_disk("recover-cq");
    let config = small_store_config(dir.path());
    let root = dir.path().to_owned();
    let stored = crash_after_workload(&config, 0..330, true);
    let ends = queue_ends(&stored);
    assert_eq!(
        ends[&("T".into(), 0)],
        110,
        "queue 0 spans two files of 100 units"
    );
    std::fs::remove_dir_all(config.queue_dir("T", 0)).unwrap();
    // Queue 1: its last 7 units never reached the disk.
    let queue1 = config
        .queue_dir("T", 1)
        .join(segment_name(100 * UNIT_SIZE as u64));
    write_synced(&queue1, 3 * UNIT_SIZE as u64, &[0; 7 * UNIT_SIZE]);
    std::fs::remove_file(root.join("checkpoint")).unwrap();
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config.clone()).await.unwrap();
        let report = store.recovery().clone();
        assert_eq!(report.mode, RecoveryMode::AbnormalFromFirst);
        assert_eq!(report.redispatch_from, 0);
        assert_eq!(report.redispatched, stored.len() as u64);
        assert_eq!(report.queues, 2, "recovery found queues 1 and 2 on disk");
        let reader = store.handle().reader();
        assert_serves_exactly(&reader, &stored).await;
        for message in &stored {
            let unit = unit_on_disk(&config, "T", message.queue_id, message.queue_offset);
            assert_eq!(
                (unit.physical_offset, unit.size),
                (
                    i64::try_from(message.physical_offset).unwrap(),
                    i32::try_from(message.size).unwrap()
                ),
                "unit {} of queue {} on disk",
                message.queue_offset,
                message.queue_id
            );
        }
        let next = put_workload(store.handle(), 330..333, true).await;
        let offsets: Vec<i64> = next.iter().map(|m| m.queue_offset).collect();
        assert_eq!(offsets, [110, 110, 110]);
        store.shutdown().await.unwrap();
    });
}

/// Dispatch makes a queue's new file without waiting for a sync; a power cut before the
/// next flush can leave it empty (the rename reached the disk, the length did not). The
/// checkpoint never covers units in such a file: recovery drops it and dispatches again.
#[test]
fn recover_abnormally_takes_an_empty_queue_file_for_one_never_made() {
    let dir = TempDir::on_disk("recover-cq-empty");
    let config = small_store_config(dir.path());
    let root = dir.path().to_owned();
    let stored = crash_after_workload(&config, 0..330, true);
    assert_eq!(queue_ends(&stored)[&("T".into(), 2)], 110);
    // Queue 2's second file (units 100..110) as a power cut may leave it; the checkpoint
    // below all of them.
    let second = config
        .queue_dir("T", 2)
        .join(segment_name(100 * UNIT_SIZE as u64));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&second)
        .unwrap()
        .set_len(0)
        .unwrap();
    std::fs::remove_file(root.join("checkpoint")).unwrap();
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config.clone()).await.unwrap();
        assert_eq!(store.recovery().mode, RecoveryMode::AbnormalFromFirst);
        let reader = store.handle().reader();
        assert_serves_exactly(&reader, &stored).await;
        let next = put_workload(store.handle(), 330..333, true).await;
        let offsets: Vec<i64> = next.iter().map(|m| m.queue_offset).collect();
        assert_eq!(offsets, [110, 110, 110]);
        store.shutdown().await.unwrap();
    });
    let len = std::fs::metadata(&second).unwrap().len();
    assert_eq!(len, 100 * UNIT_SIZE as u64, "made again, whole");
}

/// The story: a broker runs for a while, its IndexFiles taking keys; more than 3 s pass;
/// it takes more puts, flushes its checkpoint, takes a few more, and dies. Recovery walks
/// from the newest segment stored 3 s before the checkpoint, and drops the IndexFiles that
/// took keys after the checkpoint (they may index records the walk cuts). One of the
/// dropped files began before the walk's start, and the kept one ends in the middle of a
/// record's keys (its `UNIQ_KEY` in the kept file, its `KEYS` in the dropped one): every key
/// must still be found, exactly once.
#[test]
fn recover_abnormally_keeps_every_key_findable() {
    let dir = TempDir::on_disk("recover-index");
    let mut config = small_store_config(dir.path());
    // 199 items a file: records 0..98 and the UNIQ_KEY of record 99 fill the first file.
    config.max_index_num = 200;
    let root = dir.path().to_owned();
    let stored = {
        let config = config.clone();
        ferromq_shards::testing::run_local(async move {
            let store = LocalStore::open(config).await.unwrap();
            let mut stored = put_workload(store.handle(), 0..150, true).await;
            // Time passes: the broker is idle for longer than recovery's 3 s margin.
            glommio::timer::sleep(Duration::from_millis(3100)).await;
            stored.extend(put_workload(store.handle(), 150..300, true).await);
            wait_dispatched(store.handle(), &stored).await;
            stored
        })
    };
    let index_files = std::fs::read_dir(root.join("index")).unwrap().count();
    assert_eq!(index_files, 4, "600 keys in files of 199");
    // The last checkpoint flush came after record 160: the second IndexFile (keys of records
    // 99 to 198) and the later ones took keys after it.
    let checkpoint_time = store_time_on_disk(&root, stored[160].physical_offset);
    write_checkpoint(&root, checkpoint_time, checkpoint_time, checkpoint_time);
    let segments = segments_on_disk(&root);
    let walk_start = *segments
        .iter()
        .filter(|start| **start <= stored[149].physical_offset)
        .max()
        .unwrap();
    assert!(
        walk_start > stored[99].physical_offset,
        "the walk starts after the dropped IndexFile's first record"
    );
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let report = store.recovery().clone();
        assert_eq!(report.mode, RecoveryMode::Abnormal);
        assert_eq!(report.walk_start, walk_start);
        let reader = store.handle().reader();
        assert_serves_exactly(&reader, &stored).await;
        assert_keys_found_once(&reader, &stored).await;
        store.shutdown().await.unwrap();
    });
}

/// The story: the index was synced with the keys of the last records, then the store died
/// and those records were lost (ASYNC_FLUSH and a power cut; here: the third-last record is
/// damaged, so the walk cuts three). New puts reuse the cut offsets; their keys must be found,
/// and the cut records' keys must not.
#[test]
fn recover_abnormally_reindexes_offsets_reused_after_a_cut() {
    let dir = TempDir::on_disk("recover-reindex");
    let config = small_store_config(dir.path());
    let root = dir.path().to_owned();
    let mut stored = {
        let config = config.clone();
        ferromq_shards::testing::run_local(async move {
            let store = LocalStore::open(config).await.unwrap();
            let stored = put_workload(store.handle(), 0..100, true).await;
            wait_dispatched(store.handle(), &stored).await;
            stored
        })
    };
    // The checkpoint a flush after the last dispatch writes: the index is kept.
    let last_time = store_time_on_disk(&root, stored.last().unwrap().physical_offset);
    write_checkpoint(&root, last_time, last_time, last_time);
    let cut = stored.split_off(stored.len() - 3);
    let first_cut = cut[0].physical_offset;
    let segment_start = first_cut - first_cut % SEGMENT;
    let segment = root.join("commitlog").join(segment_name(segment_start));
    let record = record_on_disk(&root, first_cut);
    let body_at = record
        .windows(cut[0].body.len())
        .position(|w| w == cut[0].body)
        .unwrap();
    write_synced(
        &segment,
        first_cut - segment_start + body_at as u64,
        &[record[body_at] ^ 1],
    );
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        assert_eq!(store.recovery().valid_end, first_cut);
        let reader = store.handle().reader();
        for message in &cut {
            let (key, _) = message.keys.as_ref().unwrap();
            assert!(reader
                .query_by_key("T", key, 32, 0, i64::MAX)
                .await
                .unwrap()
                .is_empty());
        }
        // Three new messages land where the cut ones were (shorter bodies: the second and
        // third start before the old index end).
        for (i, old) in cut.iter().enumerate() {
            let (message, keys) = workload_message(20_000 + i, true);
            let queue_id = old.queue_id;
            let message = PutMessage {
                queue_id,
                body: format!("new-{i}").into_bytes(),
                ..message
            };
            let body = message.body.clone();
            let appended = store.handle().put(message).await.unwrap();
            assert_eq!(appended.queue_offset, old.queue_offset);
            stored.push(stored_from(&appended, "T", queue_id, body, keys));
        }
        assert_eq!(stored[stored.len() - 3].physical_offset, first_cut);
        wait_dispatched(store.handle(), &stored).await;
        assert_serves_exactly(&reader, &stored).await;
        assert_keys_found_once(&reader, &stored).await;
        store.shutdown().await.unwrap();
    });
}

/// The story: the store dies with a damaged record followed by two whole ones; recovery
/// cuts all three. One new message of the damaged one's size takes its place, and the store
/// dies again. The two old records behind it are whole and sit exactly where a walk would
/// look next (the damaged record ends on a 4 KiB boundary, so the writer's zero padding of
/// its last block does not reach them): unless the first recovery erased them, the second
/// would bring back messages that were cut, at queue offsets that belong to new ones.
#[test]
fn recover_abnormally_never_revives_records_after_a_cut() {
    let dir = TempDir::on_disk("recover-revive");
    let config = small_store_config(dir.path());
    let root = dir.path().to_owned();
    let mut stored = {
        let config = config.clone();
        ferromq_shards::testing::run_local(async move {
            let store = LocalStore::open(config).await.unwrap();
            let mut stored = put_workload(store.handle(), 0..98, false).await;
            stored.push(put_ending_on_a_block_boundary(store.handle(), &stored).await);
            stored.extend(put_workload(store.handle(), 98..100, false).await);
            wait_dispatched(store.handle(), &stored).await;
            stored
        })
    };
    let cut = stored.split_off(stored.len() - 3);
    assert_eq!((cut[0].physical_offset + cut[0].size as u64) % 4096, 0);
    let damaged = cut[0].clone();
    let segment_start = damaged.physical_offset - damaged.physical_offset % SEGMENT;
    assert!(segment_start > 0, "the cut is past the first segment");
    let segment = root.join("commitlog").join(segment_name(segment_start));
    let record = record_on_disk(&root, damaged.physical_offset);
    let body_at = record
        .windows(damaged.body.len())
        .position(|w| w == damaged.body)
        .unwrap();
    let at = damaged.physical_offset - segment_start + body_at as u64;
    write_synced(&segment, at, &[record[body_at] ^ 0x20]);
    let replacement = {
        let config = config.clone();
        ferromq_shards::testing::run_local(async move {
            let store = LocalStore::open(config).await.unwrap();
            assert_eq!(store.recovery().valid_end, damaged.physical_offset);
            let (message, _) = workload_message(30_000, false);
            let body = vec![b'r'; damaged.body.len()];
            let message = PutMessage {
                queue_id: damaged.queue_id,
                body: body.clone(),
                ..message
            };
            let appended = store.handle().put(message).await.unwrap();
            assert_eq!(appended.physical_offset, damaged.physical_offset);
            assert_eq!(appended.size, damaged.size, "the damaged record's size");
            let replacement = stored_from(&appended, "T", damaged.queue_id, body, None);
            wait_dispatched(store.handle(), std::slice::from_ref(&replacement)).await;
            replacement // A crash again.
        })
    };
    stored.push(replacement.clone());
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        assert_eq!(
            store.recovery().valid_end,
            replacement.physical_offset + replacement.size as u64,
            "the walk ends after the replacement"
        );
        assert_serves_exactly(&store.handle().reader(), &stored).await;
        store.shutdown().await.unwrap();
    });
}

/// Puts a message to queue 0 whose record ends on a 4 KiB boundary of the CommitLog.
async fn put_ending_on_a_block_boundary(handle: &StoreHandle, stored: &[Stored]) -> Stored {
    let last = stored.last().unwrap();
    let (message, _) = workload_message(0, false);
    // Everything but the body has the size of message 0's.
    let overhead = stored[0].size - stored[0].body.len();
    let start = last.physical_offset + last.size as u64;
    let unaligned = (start + overhead as u64) % 4096;
    let body_len = usize::try_from(4096 - unaligned).unwrap() + 4096;
    assert!(
        start % SEGMENT + (overhead + body_len) as u64 + 8 <= SEGMENT,
        "the record fits the current segment"
    );
    let body = vec![b'a'; body_len];
    let appended = handle
        .put(PutMessage {
            body: body.clone(),
            ..message
        })
        .await
        .unwrap();
    assert_eq!(appended.physical_offset, start);
    stored_from(&appended, "T", 0, body, None)
}

/// A CommitLog segment whose size is not `mappedFileSizeCommitLog` (a copy cut short, or a
/// store written with another size) stops the open with an error naming the file and the
/// key; nothing is changed on disk, and the store opens again once the file is whole.
#[test]
fn open_refuses_commit_log_segment_of_the_wrong_size() {
    let dir = TempDir::on_disk("recover-size");
    let config = small_store_config(dir.path());
    let root = dir.path().to_owned();
    let stored = {
        let config = config.clone();
        ferromq_shards::testing::run_local(async move {
            let store = LocalStore::open(config).await.unwrap();
            let stored = put_workload(store.handle(), 0..150, false).await;
            store.shutdown().await.unwrap();
            stored
        })
    };
    let segment = root.join("commitlog").join(segment_name(SEGMENT));
    let before = std::fs::read(&segment).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(SEGMENT + 4096)
        .unwrap();
    {
        let config = config.clone();
        let segment = segment.clone();
        ferromq_shards::testing::run_local(async move {
            let error = LocalStore::open(config).await.unwrap_err();
            let text = error.to_string();
            assert!(text.contains(&segment.display().to_string()), "{text}");
            assert!(text.contains("mappedFileSizeCommitLog"), "{text}");
            assert!(text.contains(&(SEGMENT + 4096).to_string()), "{text}");
        });
    }
    assert!(
        !root.join("abort").exists(),
        "a refused open does not mark the store running"
    );
    let after = std::fs::read(&segment).unwrap();
    assert_eq!(
        &after[..before.len()],
        &before[..],
        "the segment is untouched"
    );
    std::fs::OpenOptions::new()
        .write(true)
        .open(&segment)
        .unwrap()
        .set_len(SEGMENT)
        .unwrap();
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        assert_eq!(store.recovery().mode, RecoveryMode::Normal);
        assert_serves_exactly(&store.handle().reader(), &stored).await;
        store.shutdown().await.unwrap();
    });
}

/// A sanity check of the workload the stories use: the keys it writes are the ones the
/// index looks up (`KEYS` and `UNIQ_KEY`).
#[test]
fn workload_messages_carry_keys_and_unique_key() {
    let (message, keys) = workload_message(7, true);
    let properties: HashMap<String, String> =
        parse_properties(&message.properties).into_iter().collect();
    let (key, uniq) = keys.unwrap();
    assert_eq!(properties["KEYS"], key);
    assert_eq!(properties["UNIQ_KEY"], uniq);
    assert!(workload_message(7, false).1.is_none());
}
