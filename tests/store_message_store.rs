//! The assembled store on real files: puts through the writer, dispatch into ConsumeQueues
//! and the IndexFile, and every read API, on a glommio executor over a directory on disk.

mod common;

use common::store::{recovered_parts, DispatchHeld, RunningStore};
use common::{small_store_config, store_message, TempDir};
use ferromq::store::consume_queue::tags_code;
use ferromq::store::message::{decode_record, parse_properties, Record};
use ferromq::store::message_store::LocalStore;
use ferromq::store::reader::{FoundMessage, GetMessageStatus, PullFilter};
use ferromq::store::recovery::RecoveryMode;
use ferromq::store::time_search::Boundary;
use std::collections::HashMap;

/// Per queue: (queue offset, physical offset, body) of each message.
type QueueContents = HashMap<(String, i32), Vec<(i64, i64, Vec<u8>)>>;

const NO_FILTER: PullFilter<'static> = PullFilter::ALL;

/// Pulls a whole queue from offset 0; returns (queue offset, physical offset, body) of each
/// record, checked against what the pull said of it.
async fn pull_all(
    reader: &ferromq::store::reader::StoreReader,
    topic: &str,
    queue_id: i32,
) -> Vec<(i64, i64, Vec<u8>)> {
    let mut all = Vec::new();
    for (found, bytes) in pull_raw(reader, topic, queue_id).await {
        let Ok(Record::Message { record, size }) = decode_record(&bytes, true) else {
            panic!("not a record at {}", found.physical_offset);
        };
        assert_eq!(size, found.size);
        assert_eq!(record.queue_offset, found.queue_offset);
        assert_eq!(record.physical_offset, found.physical_offset);
        assert_eq!(record.topic, topic);
        all.push((
            record.queue_offset,
            record.physical_offset,
            record.body.to_vec(),
        ));
    }
    all
}

/// Every record of a queue as pulls from offset 0 return it: what the pull said of it, and
/// its stored bytes.
async fn pull_raw(
    reader: &ferromq::store::reader::StoreReader,
    topic: &str,
    queue_id: i32,
) -> Vec<(FoundMessage, Vec<u8>)> {
    let mut offset = 0;
    let mut all = Vec::new();
    loop {
        let result = reader
            .get_message(topic, queue_id, offset, 32, &NO_FILTER)
            .await
            .unwrap();
        match result.status {
            GetMessageStatus::Found => {}
            GetMessageStatus::OffsetOverflowOne | GetMessageStatus::NoMessageInQueue => break,
            other => panic!("unexpected {other:?} at {offset}"),
        }
        for found in &result.messages {
            let bytes = result.record(found);
            all.push((*found, bytes.to_vec()));
        }
        offset = result.next_begin_offset;
    }
    all
}

#[test]
fn puts_come_back_at_their_offsets_across_segment_rolls() {
    let dir = TempDir::on_disk("store-roundtrip");
    let config = small_store_config(dir.path());
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        assert_eq!(store.recovery().mode, RecoveryMode::Fresh);
        let handle = store.handle().clone();
        let mut expected: QueueContents = HashMap::new();
        for i in 0..600 {
            let topic = if i % 2 == 0 { "T" } else { "U" };
            let queue = (i / 2 % 4) as i32;
            let body = format!("message-{i}-{}", "x".repeat(200 + i % 100)).into_bytes();
            let appended = handle
                .put(store_message(topic, queue, &body, Some("a"), None))
                .await
                .unwrap();
            let list = expected.entry((topic.to_owned(), queue)).or_default();
            assert_eq!(appended.queue_offset, list.len() as i64);
            list.push((
                appended.queue_offset,
                i64::try_from(appended.physical_offset).unwrap(),
                body,
            ));
        }
        let segments = std::fs::read_dir(dir.path().join("commitlog"))
            .unwrap()
            .count();
        assert!(
            segments >= 3,
            "600 records of ~300 bytes roll 64 KiB segments: {segments}"
        );
        // Dispatch publishes right after each commit; wait until it caught up.
        let reader = handle.reader();
        for _ in 0..200 {
            if reader.max_offset_in_queue("U", 3) == 75 {
                break;
            }
            glommio::timer::sleep(std::time::Duration::from_millis(5)).await;
        }
        for ((topic, queue), list) in &expected {
            assert_eq!(reader.max_offset_in_queue(topic, *queue), list.len() as i64);
            assert_eq!(
                &pull_all(&reader, topic, *queue).await,
                list,
                "{topic}/{queue}"
            );
        }
        // The ConsumeQueue rolled too: 75 units in files of 100 need one; 150 would need two.
        let unknown = reader
            .get_message("nope", 0, 5, 32, &NO_FILTER)
            .await
            .unwrap();
        assert_eq!(unknown.status, GetMessageStatus::NoMessageInQueue);
        assert_eq!(unknown.next_begin_offset, 0);
        let one = reader
            .get_message("T", 0, 75, 32, &NO_FILTER)
            .await
            .unwrap();
        assert_eq!(one.status, GetMessageStatus::OffsetOverflowOne);
        assert_eq!(one.next_begin_offset, 75);
        let badly = reader
            .get_message("T", 0, 90, 32, &NO_FILTER)
            .await
            .unwrap();
        assert_eq!(badly.status, GetMessageStatus::OffsetOverflowBadly);
        assert_eq!(
            badly.next_begin_offset, 0,
            "min offset 0: Java sends the consumer to it"
        );
        store.shutdown().await.unwrap();
    });
}

#[test]
fn tag_filter_and_batch_limits_follow_java() {
    let dir = TempDir::on_disk("store-filter");
    let config = small_store_config(dir.path());
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let handle = store.handle().clone();
        for i in 0..120 {
            let tag = if i % 3 == 0 { "red" } else { "blue" };
            let body = format!("{tag}-{i}").into_bytes();
            handle
                .put(store_message("F", 0, &body, Some(tag), None))
                .await
                .unwrap();
        }
        let reader = handle.reader();
        until_dispatched(&reader, "F", 0, 120).await;
        // At most 32 messages per pull from memory, whatever the client asks.
        let all = reader
            .get_message("F", 0, 0, 100, &NO_FILTER)
            .await
            .unwrap();
        assert_eq!(all.messages.len(), 32);
        assert_eq!(all.next_begin_offset, 32);
        let few = reader.get_message("F", 0, 0, 5, &NO_FILTER).await.unwrap();
        assert_eq!(few.messages.len(), 5);
        assert_eq!(few.next_begin_offset, 5);
        // Tag filter: only red, and the next offset passes the blue ones examined.
        let red = tags_code(Some("red"));
        let accepts = move |code: i64| code == red;
        let filter = PullFilter {
            tags_codes: Some(&accepts),
            records: None,
        };
        let mut offset = 0;
        let mut reds = Vec::new();
        while offset < 120 {
            let result = reader
                .get_message("F", 0, offset, 4, &filter)
                .await
                .unwrap();
            for found in &result.messages {
                let bytes = result.record(found);
                let Ok(Record::Message { record, .. }) = decode_record(bytes, false) else {
                    panic!()
                };
                let props = parse_properties(record.properties);
                assert!(props.contains(&("TAGS".to_owned(), "red".to_owned())));
                reds.push(found.queue_offset);
            }
            assert!(result.next_begin_offset > offset);
            offset = result.next_begin_offset;
        }
        assert_eq!(reds, (0..120).step_by(3).collect::<Vec<i64>>());
        let none = |_: i64| false;
        let nothing = reader
            .get_message(
                "F",
                0,
                0,
                32,
                &PullFilter {
                    tags_codes: Some(&none),
                    records: None,
                },
            )
            .await
            .unwrap();
        assert_eq!(nothing.status, GetMessageStatus::NoMatchedMessage);
        // One pull scans one ConsumeQueue file at most (Java's `getIndexBuffer`): 100 units.
        assert_eq!(nothing.next_begin_offset, 100);
        // A record filter (SQL92's `isMatchedByCommitLog`) reads on past refused records
        // until the batch is full: 4 reds per pull, not 4 records of which a third are red.
        let red_record = |bytes: &[u8]| {
            let Ok(Record::Message { record, .. }) = decode_record(bytes, false) else {
                return false;
            };
            parse_properties(record.properties).contains(&("TAGS".to_owned(), "red".to_owned()))
        };
        let by_record = PullFilter {
            tags_codes: None,
            records: Some(&red_record),
        };
        let mut offset = 0;
        let mut by_records = Vec::new();
        while offset < 120 {
            let result = reader
                .get_message("F", 0, offset, 4, &by_record)
                .await
                .unwrap();
            if offset + 12 <= 100 {
                assert_eq!(result.messages.len(), 4, "from {offset}");
            }
            for found in &result.messages {
                assert!(red_record(result.record(found)));
                by_records.push(found.queue_offset);
            }
            assert!(result.next_begin_offset > offset);
            offset = result.next_begin_offset;
        }
        assert_eq!(by_records, reds);
        store.shutdown().await.unwrap();
    });
}

#[test]
fn queue_growth_reaches_subscribers() {
    let dir = TempDir::on_disk("store-growth");
    let config = small_store_config(dir.path());
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let handle = store.handle().clone();
        let growth = handle.shared().subscribe();
        handle
            .put(store_message("G", 2, b"hello", None, None))
            .await
            .unwrap();
        let grown = growth.next().await;
        assert_eq!(grown.get(&("G".to_owned(), 2)), Some(&1));
        handle
            .put(store_message("G", 2, b"again", None, None))
            .await
            .unwrap();
        handle
            .put(store_message("G", 2, b"and again", None, None))
            .await
            .unwrap();
        let mut max = 0;
        while max < 3 {
            max = growth.next().await[&("G".to_owned(), 2)];
        }
        assert_eq!(max, 3);
        store.shutdown().await.unwrap();
    });
}

#[test]
fn clean_restart_continues_queue_and_physical_offsets() {
    let dir = TempDir::on_disk("store-restart");
    let config = small_store_config(dir.path());
    let first_run = {
        let config = config.clone();
        ferromq_shards::testing::run_local(async move {
            let store = LocalStore::open(config).await.unwrap();
            let handle = store.handle().clone();
            let mut last = None;
            for i in 0..300 {
                let body = format!("before-{i}-{}", "y".repeat(300)).into_bytes();
                last = Some(
                    handle
                        .put(store_message("R", i % 2, &body, None, None))
                        .await
                        .unwrap(),
                );
            }
            store.shutdown().await.unwrap();
            last.unwrap()
        })
    };
    assert!(
        !dir.path().join("abort").exists(),
        "a clean stop removes the abort file"
    );
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        assert_eq!(store.recovery().mode, RecoveryMode::Normal);
        assert_eq!(
            store.recovery().redispatched,
            0,
            "a clean stop leaves nothing to re-dispatch"
        );
        assert!(
            dir.path().join("abort").exists(),
            "a running store has an abort file"
        );
        let handle = store.handle().clone();
        let next = handle
            .put(store_message("R", 1, b"after", None, None))
            .await
            .unwrap();
        assert_eq!(next.queue_offset, 150);
        assert_eq!(
            next.physical_offset,
            first_run.physical_offset + first_run.size as u64
        );
        let reader = handle.reader();
        until_dispatched(&reader, "R", 1, 151).await;
        let all = pull_all(&reader, "R", 1).await;
        assert_eq!(all.len(), 151);
        assert_eq!(all[150].2, b"after");
        assert!(all[0].2.starts_with(b"before-1-"));
        store.shutdown().await.unwrap();
    });
}

#[test]
fn lookups_by_key_offset_and_time() {
    let dir = TempDir::on_disk("store-lookups");
    let config = small_store_config(dir.path());
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let handle = store.handle().clone();
        let mut stored = Vec::new();
        // 300 keys overflow the 256-item test IndexFile: lookups span two files.
        for i in 0..300 {
            let keys = format!("k-{i} shared-{}", i % 7);
            let appended = handle
                .put(store_message(
                    "K",
                    0,
                    format!("b{i}").as_bytes(),
                    None,
                    Some(&keys),
                ))
                .await
                .unwrap();
            stored.push(appended);
        }
        let index_files = std::fs::read_dir(dir.path().join("index")).unwrap().count();
        assert!(index_files >= 2, "{index_files}");
        let reader = handle.reader();
        until_dispatched(&reader, "K", 0, 300).await;
        let found = reader
            .query_by_key("K", "k-123", 32, 0, i64::MAX)
            .await
            .unwrap();
        assert_eq!(found.len(), 1);
        let Ok(Record::Message { record, .. }) = decode_record(&found[0], true) else {
            panic!()
        };
        assert_eq!(record.body, b"b123");
        let shared = reader
            .query_by_key("K", "shared-3", 100, 0, i64::MAX)
            .await
            .unwrap();
        assert_eq!(shared.len(), (0..300).filter(|i| i % 7 == 3).count());
        assert!(reader
            .query_by_key("K", "k-9999", 32, 0, i64::MAX)
            .await
            .unwrap()
            .is_empty());
        assert!(reader
            .query_by_key("other", "k-1", 32, 0, i64::MAX)
            .await
            .unwrap()
            .is_empty());
        // By CommitLog offset.
        let at = reader
            .record_at(i64::try_from(stored[42].physical_offset).unwrap())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(at.len(), stored[42].size);
        assert!(reader.record_at(1 << 40).await.unwrap().is_none());
        // By time: the lower boundary of offset 200's store time is the first offset stored
        // that millisecond, the upper one the last; a time between two messages' falls to
        // the later one (lower) or the earlier one (upper).
        let time_at = |offset: i64| {
            let reader = &reader;
            async move { reader.store_time_at("K", 0, offset).await.unwrap().unwrap() }
        };
        let time = time_at(200).await;
        let lower = reader
            .offset_by_time("K", 0, time, Boundary::Lower)
            .await
            .unwrap();
        let upper = reader
            .offset_by_time("K", 0, time, Boundary::Upper)
            .await
            .unwrap();
        assert!(lower <= 200 && 200 <= upper, "{lower}..{upper}");
        assert_eq!(time_at(lower).await, time);
        assert_eq!(time_at(upper).await, time);
        assert!(lower == 0 || time_at(lower - 1).await < time);
        assert!(upper == 299 || time_at(upper + 1).await > time);
        if upper < 299 {
            let later = time_at(upper + 1).await;
            if later > time + 1 {
                let between = time + 1;
                let at = |boundary| reader.offset_by_time("K", 0, between, boundary);
                assert_eq!(at(Boundary::Lower).await.unwrap(), upper + 1);
                assert_eq!(at(Boundary::Upper).await.unwrap(), upper);
            }
        }
        for (timestamp, boundary, expected) in [
            (0, Boundary::Lower, 0),
            (0, Boundary::Upper, 0),
            (i64::MAX, Boundary::Lower, 300),
            (i64::MAX, Boundary::Upper, 299),
        ] {
            let offset = reader.offset_by_time("K", 0, timestamp, boundary);
            assert_eq!(offset.await.unwrap(), expected, "{timestamp} {boundary:?}");
        }
        let earliest = reader.earliest_message_time("K", 0).await.unwrap().unwrap();
        assert!(earliest <= time);
        store.shutdown().await.unwrap();
    });
}

#[test]
fn a_second_store_on_the_same_directory_is_refused() {
    let dir = TempDir::on_disk("store-lock");
    let config = small_store_config(dir.path());
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config.clone()).await.unwrap();
        let error = LocalStore::open(config).await.unwrap_err();
        assert!(
            error.to_string().contains("locked by another process"),
            "{error}"
        );
        store.shutdown().await.unwrap();
    });
}

#[test]
fn writer_and_dispatch_run_on_different_shards() {
    use ferromq::store::message_store::{run_writer, StoreLock};
    use ferromq::store::reput::run_reput;
    use std::sync::Arc;

    let dir = TempDir::on_disk("store-two-shards");
    let config = small_store_config(dir.path());
    let _lock = StoreLock::acquire(dir.path()).unwrap();
    let (to_writer, writer_gets) = std::sync::mpsc::channel();
    let (to_test, test_gets) = std::sync::mpsc::channel();
    // The dispatch shard recovers, keeps the dispatch side, and hands the writer its part.
    let dispatch = glommio::LocalExecutorBuilder::default()
        .name("dispatch")
        .spawn(move || async move {
            let (shared, reput, start, channels) = recovered_parts(config).await;
            to_writer
                .send((
                    Arc::clone(&shared),
                    start,
                    channels.puts,
                    channels.batches_tx,
                ))
                .unwrap();
            to_test.send(channels.handle.clone()).unwrap();
            let reput = glommio::spawn_local(run_reput(
                reput,
                channels.batches_rx,
                channels.queries,
                channels.control,
            ));
            // This shard reads too: it sees what the writer on the other shard stored.
            let reader = channels.handle.reader();
            until_dispatched(&reader, "S", 1, 200).await;
            let result = reader.get_message("S", 1, 0, 32, &NO_FILTER).await.unwrap();
            drop(channels.handle);
            reput.await;
            result.messages.len()
        })
        .unwrap();
    let writer = glommio::LocalExecutorBuilder::default()
        .name("writer")
        .spawn(move || async move {
            let (shared, start, puts, batches) = writer_gets.recv().unwrap();
            run_writer(shared, start, puts, batches).await.unwrap().puts
        })
        .unwrap();
    // Producers on a third executor, as a net shard would be.
    let handle = test_gets.recv().unwrap();
    let produced = glommio::LocalExecutorBuilder::default()
        .name("net")
        .spawn(move || async move {
            let mut offsets = Vec::new();
            for i in 0..400 {
                let body = format!("cross-{i}").into_bytes();
                let appended = handle
                    .put(store_message(
                        "S",
                        i % 2,
                        &body,
                        None,
                        Some(&format!("x{i}")),
                    ))
                    .await
                    .unwrap();
                offsets.push(appended.queue_offset);
            }
            let found = handle
                .reader()
                .query_by_key("S", "x77", 4, 0, i64::MAX)
                .await
                .unwrap();
            handle.close();
            (offsets, found.len())
        })
        .unwrap()
        .join()
        .unwrap();
    let (offsets, found) = produced;
    assert_eq!(offsets.iter().filter(|o| **o == 199).count(), 2);
    assert_eq!(found, 1, "index lookups reach the dispatch shard");
    assert_eq!(writer.join().unwrap(), 400);
    assert_eq!(dispatch.join().unwrap(), 32);
}

/// A crash between creating an IndexFile and sizing it leaves an empty file: the store
/// opens anyway (it is no other layout), drops it, and the keys stay findable.
#[test]
fn an_empty_index_file_left_by_a_crash_does_not_stop_the_store() {
    let dir = TempDir::on_disk("store-empty-index");
    let config = small_store_config(dir.path());
    let reopen = config.clone();
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let handle = store.handle().clone();
        handle
            .put(store_message("E", 0, b"kept", None, Some("key-1")))
            .await
            .unwrap();
        store.shutdown().await.unwrap();
    });
    let empty = dir.path().join("index").join("29991231235959999");
    std::fs::write(&empty, b"").unwrap();
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(reopen).await.unwrap();
        let reader = store.handle().reader();
        let found = reader
            .query_by_key("E", "key-1", 32, 0, i64::MAX)
            .await
            .unwrap();
        assert_eq!(found.len(), 1);
        store.shutdown().await.unwrap();
    });
    assert!(!empty.exists(), "the empty IndexFile is dropped");
}

#[test]
fn dispatch_publishes_the_batches_waiting_together() {
    use ferromq::store::message_store::StoreLock;

    let dir = TempDir::on_disk("store-publish-together");
    let config = small_store_config(dir.path());
    let _lock = StoreLock::acquire(dir.path()).unwrap();
    ferromq_shards::testing::run_local(async move {
        let store = DispatchHeld::start(config).await;
        // One put at a time under SYNC_FLUSH: each is a commit of its own, and dispatch is
        // not running yet, so 40 committed batches wait for it.
        for i in 0..40 {
            let body = format!("together-{i}").into_bytes();
            store
                .handle
                .put(store_message("P", i % 4, &body, None, None))
                .await
                .unwrap();
        }
        let store = store.release();
        let reader = store.handle.reader();
        for queue in 0..4 {
            until_dispatched(&reader, "P", queue, 10).await;
        }
        drop(reader);
        let (puts, reput) = store.stop().await;
        assert_eq!(puts, 40);
        // All 40 went out in one publish (a publish per batch would be 40 writes of each
        // queue touched, one after another).
        assert_eq!(reput.publishes(), 1);
    });
}

#[test]
fn dispatch_goes_on_while_a_periodic_flush_waits_for_its_syncs() {
    use ferromq::store::message_store::StoreLock;
    use ferromq_shards::runtime::BLOCKING_THREADS;

    let dir = TempDir::on_disk("store-flush-beside");
    let config = small_store_config(dir.path());
    let interval = config.flush_interval_consume_queue;
    let _lock = StoreLock::acquire(dir.path()).unwrap();
    let before_ms = ferromq_shards::testing::run_local(async move {
        let store = RunningStore::start(config).await;
        let handle = &store.handle;
        let reader = handle.reader();
        // A first message makes the queue's file and an IndexFile, whose periodic sync runs
        // on the executor's blocking thread.
        let keyed = store_message("B", 0, b"first", None, Some("k-0"));
        handle.put(keyed).await.unwrap();
        until_dispatched(&reader, "B", 0, 1).await;
        // Hold every such thread: the next flush's index sync waits behind them.
        let held = HeldThreads::hold(BLOCKING_THREADS);
        glommio::timer::sleep(interval * 3).await;
        let before_ms = ferromq::store::reput::wall_clock_ms();
        for i in 1..=10 {
            let body = format!("beside-{i}").into_bytes();
            let keys = format!("k-{i}");
            handle
                .put(store_message("B", 0, &body, None, Some(&keys)))
                .await
                .unwrap();
        }
        until_dispatched(&reader, "B", 0, 11).await;
        // Dispatch made them pullable while the flush still waited (a flush that held
        // dispatch would have kept them back until the thread was free).
        assert!(!held.released());
        held.join().await;
        drop(reader);
        assert_eq!(store.stop().await.0, 11);
        before_ms
    });
    // The flush that waited, and the last one, wrote what dispatch did meanwhile.
    let checkpoint = std::fs::read(dir.path().join("checkpoint")).unwrap();
    let checkpoint = ferromq::store::checkpoint::StoreCheckpoint::decode(&checkpoint);
    assert!(
        checkpoint.logics_msg_timestamp >= before_ms,
        "{checkpoint:?}"
    );
    assert!(
        checkpoint.index_msg_timestamp >= before_ms,
        "{checkpoint:?}"
    );
}

#[test]
fn a_new_queue_is_dispatched_while_every_blocking_thread_is_busy() {
    use ferromq::store::message_store::StoreLock;
    use ferromq_shards::runtime::BLOCKING_THREADS;

    let dir = TempDir::on_disk("store-new-queue-busy");
    let config = small_store_config(dir.path());
    let _lock = StoreLock::acquire(dir.path()).unwrap();
    ferromq_shards::testing::run_local(async move {
        let store = RunningStore::start(config).await;
        let reader = store.handle.reader();
        // Every thread busy, as with long IndexFile and ConsumeQueue syncs of the dispatch
        // shard.
        let held = HeldThreads::hold(BLOCKING_THREADS);
        // The queue's first message: dispatch makes its directory and file without a sync,
        // which waits for the next flush.
        store
            .handle
            .put(store_message("N", 2, b"first of its queue", None, None))
            .await
            .unwrap();
        until_dispatched(&reader, "N", 2, 1).await;
        assert!(!held.released());
        held.join().await;
        drop(reader);
        assert_eq!(store.stop().await.0, 1);
    });
}

/// Waits until dispatch has made `count` messages of the queue pullable.
async fn until_dispatched(
    reader: &ferromq::store::reader::StoreReader,
    topic: &str,
    queue_id: i32,
    count: i64,
) {
    while reader.max_offset_in_queue(topic, queue_id) < count {
        glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
    }
}

/// Some of the executor's blocking threads, held for 4 s from when [`HeldThreads::hold`] is
/// called, not when awaited (the margin is for a loaded CI machine).
struct HeldThreads {
    released: std::sync::Arc<std::sync::atomic::AtomicBool>,
    blockers: Vec<glommio::Task<()>>,
}

impl HeldThreads {
    fn hold(threads: usize) -> HeldThreads {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let released = Arc::new(AtomicBool::new(false));
        let blockers = (0..threads)
            .map(|_| {
                let released = Arc::clone(&released);
                glommio::spawn_local(glommio::executor().spawn_blocking(move || {
                    std::thread::sleep(std::time::Duration::from_secs(4));
                    released.store(true, Ordering::SeqCst);
                }))
            })
            .collect();
        HeldThreads { released, blockers }
    }

    /// Whether the first has let go.
    fn released(&self) -> bool {
        self.released.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits until all have let go.
    async fn join(self) {
        for blocker in self.blockers {
            blocker.await;
        }
    }
}

/// The small store under ASYNC_FLUSH (the CommitLog in the page cache).
fn async_flush_config(dir: &std::path::Path) -> ferromq::store::config::StoreConfig {
    let mut config = small_store_config(dir);
    config.flush_disk_type = ferromq::store::flush::FlushDiskType::AsyncFlush {
        interval: std::time::Duration::from_millis(200),
    };
    config
}

/// (physical offset, stored bytes) of each record of a queue.
type RawRecords = Vec<(i64, Vec<u8>)>;

/// Under ASYNC_FLUSH the CommitLog is written into the page cache through a mapping and read
/// through it; with `commitLogPageCacheWrites=false` it is written and read with direct I/O.
/// A store written one way and reopened the other serves byte for byte the same records, and
/// both equal the segment files' bytes at the records' physical offsets.
#[test]
fn page_cache_and_direct_io_serve_the_same_bytes() {
    let dir = TempDir::on_disk("store-page-cache");
    let config = async_flush_config(dir.path());
    let queues = [("P", 0), ("P", 1), ("Q", 0)];
    // Per run, per queue: (physical offset, stored bytes) of each record.
    let mut served: Vec<Vec<RawRecords>> = Vec::new();
    for (run, page_cache) in [true, false, true].into_iter().enumerate() {
        let mut config = config.clone();
        config.commit_log_page_cache_writes = page_cache;
        served.push(ferromq_shards::testing::run_local(async move {
            let store = LocalStore::open(config).await.unwrap();
            let handle = store.handle().clone();
            for i in 0..300usize {
                let (topic, queue) = queues[i % queues.len()];
                let body = format!("run-{run}-{i}-{}", "z".repeat(100 + i * 7 % 900));
                handle
                    .put(store_message(
                        topic,
                        queue,
                        body.as_bytes(),
                        Some("t"),
                        None,
                    ))
                    .await
                    .unwrap();
            }
            let reader = handle.reader();
            let mut all = Vec::new();
            for (topic, queue) in queues {
                until_dispatched(&reader, topic, queue, 100 * (run as i64 + 1)).await;
                let records = pull_raw(&reader, topic, queue).await;
                all.push(
                    records
                        .into_iter()
                        .map(|(found, bytes)| (found.physical_offset, bytes))
                        .collect::<Vec<_>>(),
                );
            }
            store.shutdown().await.unwrap();
            all
        }));
    }
    for (index, (topic, queue)) in queues.iter().enumerate() {
        let first = &served[0][index];
        let second = &served[1][index];
        let third = &served[2][index];
        assert_eq!(first.len(), 100);
        assert_eq!(second.len(), 200);
        assert_eq!(third.len(), 300);
        assert!(
            second.starts_with(first) && third.starts_with(second),
            "{topic}/{queue}: a reopened store serves other bytes"
        );
    }
    // The files hold what was served.
    let segment_size = config.mapped_file_size_commit_log;
    for (physical, bytes) in served[2].iter().flatten() {
        let physical = u64::try_from(*physical).unwrap();
        let start = physical - physical % segment_size;
        let file =
            std::fs::read(dir.path().join("commitlog").join(format!("{start:020}"))).unwrap();
        let at = usize::try_from(physical - start).unwrap();
        assert_eq!(
            &file[at..at + bytes.len()],
            &bytes[..],
            "record at {physical}"
        );
    }
}

/// Under SYNC_FLUSH the writer rewrites the CommitLog's last block with direct I/O while
/// readers read it through the page cache. A pull right behind the writer must never see the
/// bytes of the block as they were before the write: every record pulled as soon as it is
/// dispatched decodes, with its body CRC, to what was put, while the writer keeps writing.
#[test]
fn pulls_right_behind_direct_writes_never_see_stale_bytes() {
    let dir = TempDir::on_disk("store-tail-race");
    let mut config = small_store_config(dir.path());
    config.mapped_file_size_commit_log = 1 << 20;
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        let handle = store.handle().clone();
        const COUNT: i64 = 1500;
        let writer = {
            let handle = handle.clone();
            glommio::spawn_local(async move {
                let mut puts = Vec::new();
                for i in 0..COUNT {
                    let body = format!("tail-{i}-{}", "w".repeat((i as usize * 37) % 700));
                    let message = store_message("W", 0, body.as_bytes(), None, None);
                    let handle = handle.clone();
                    // A few puts in flight, so that writes and reads overlap.
                    puts.push(glommio::spawn_local(
                        async move { handle.put(message).await },
                    ));
                    if puts.len() >= 4 {
                        puts.remove(0).await.unwrap();
                    }
                }
                for put in puts {
                    put.await.unwrap();
                }
            })
        };
        let reader = handle.reader();
        let mut next = 0i64;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while next < COUNT {
            assert!(std::time::Instant::now() < deadline, "stuck at {next}");
            let result = reader
                .get_message("W", 0, next, 32, &NO_FILTER)
                .await
                .unwrap();
            if result.status != GetMessageStatus::Found {
                glommio::yield_if_needed().await;
                glommio::timer::sleep(std::time::Duration::from_micros(50)).await;
                continue;
            }
            for found in &result.messages {
                let bytes = result.record(found);
                let Ok(Record::Message { record, .. }) = decode_record(bytes, true) else {
                    panic!(
                        "stale or torn record at queue offset {}",
                        found.queue_offset
                    );
                };
                let i = found.queue_offset;
                let want = format!("tail-{i}-{}", "w".repeat((i as usize * 37) % 700));
                assert_eq!(record.body, want.as_bytes(), "queue offset {i}");
                next = i + 1;
            }
        }
        writer.await;
        store.shutdown().await.unwrap();
    });
}

/// Waits until `count` messages of a queue are dispatched, then pulls them from offset 0 in
/// pulls of 32, each answer (FOUND) handed to `each`.
async fn pull_through(
    reader: &ferromq::store::reader::StoreReader,
    topic: &str,
    queue_id: i32,
    count: i64,
    mut each: impl FnMut(ferromq::store::reader::GetMessageResult),
) {
    until_dispatched(reader, topic, queue_id, count).await;
    let mut offset = 0;
    while offset < count {
        let result = reader
            .get_message(topic, queue_id, offset, 32, &NO_FILTER)
            .await
            .unwrap();
        assert_eq!(result.status, GetMessageStatus::Found, "at {offset}");
        offset = result.next_begin_offset;
        each(result);
    }
}

/// Drops `path`'s pages from the page cache (they are clean after a shutdown), so that the
/// next read of it must come from the device.
fn evict_from_page_cache(path: &std::path::Path) {
    let file = std::fs::File::open(path).unwrap();
    rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed).unwrap();
}

/// Pulls are answered with slices of mapped CommitLog windows (`pullMappedMemoryMax`): what
/// they return equals, byte for byte, the segment files and what a pull read into buffers
/// (`pullMappedMemoryMax=0`) returns, for data just written and for data read back from the
/// device after a restart. However many answers are held, the windows mapped never exceed
/// the budget (pulls past it read into buffers), and they are all unmapped once the reader
/// and the answers are gone.
#[test]
fn mapped_windows_serve_the_files_bytes_within_their_budget() {
    use ferromq::store::chunks::WINDOW_SIZE;
    let dir = TempDir::on_disk("store-windows");
    let mut config = async_flush_config(dir.path());
    config.mapped_file_size_commit_log = 4 * WINDOW_SIZE;
    config.consume_queue_units_per_file = 10_000;
    config.pull_mapped_memory_max = 2 * WINDOW_SIZE;
    let queues = [("M", 0), ("M", 1)];
    const COUNT: usize = 3000;
    let body_of = |i: usize| format!("m-{i}-{}", "q".repeat(6000 + i * 13 % 4000));
    let segment_size = config.mapped_file_size_commit_log;
    let mut files = HashMap::new();
    let mut files_bytes = |physical: i64, len: usize| {
        let physical = u64::try_from(physical).unwrap();
        let start = physical - physical % segment_size;
        let file = files.entry(start).or_insert_with(|| {
            std::fs::read(dir.path().join("commitlog").join(format!("{start:020}"))).unwrap()
        });
        let at = usize::try_from(physical - start).unwrap();
        file[at..at + len].to_vec()
    };
    // Per run, per queue: (physical offset, bytes) of every record; and the most mapped.
    let run = |config: ferromq::store::config::StoreConfig, write: bool| {
        ferromq_shards::testing::run_local(async move {
            let store = LocalStore::open(config.clone()).await.unwrap();
            let handle = store.handle().clone();
            if write {
                for i in 0..COUNT {
                    let (topic, queue) = queues[i % queues.len()];
                    let message = store_message(topic, queue, body_of(i).as_bytes(), None, None);
                    handle.put(message).await.unwrap();
                }
            }
            let shared = handle.shared().clone();
            let reader = handle.reader();
            let mut held = Vec::new();
            let mut most_mapped = 0;
            let mut served = Vec::new();
            for (topic, queue) in queues {
                let mut records = Vec::new();
                pull_through(&reader, topic, queue, (COUNT / 2) as i64, |result| {
                    for found in &result.messages {
                        records.push((found.physical_offset, result.record(found).to_vec()));
                    }
                    let mapped = shared.mapped_bytes();
                    assert!(
                        mapped <= config.pull_mapped_memory_max,
                        "{mapped} bytes mapped, over the budget"
                    );
                    most_mapped = most_mapped.max(mapped);
                    // Every answer is kept: the windows it points into stay mapped.
                    held.push(result);
                })
                .await;
                served.push(records);
            }
            drop(held);
            drop(reader);
            assert_eq!(shared.mapped_bytes(), 0, "windows left mapped");
            store.shutdown().await.unwrap();
            (served, most_mapped)
        })
    };
    let (written, most_mapped) = run(config.clone(), true);
    assert_eq!(
        most_mapped, config.pull_mapped_memory_max,
        "pulls came from windows"
    );
    for (index, records) in written.iter().enumerate() {
        assert_eq!(records.len(), COUNT / 2);
        for (n, (physical, bytes)) in records.iter().enumerate() {
            let Ok(Record::Message { record, .. }) = decode_record(bytes, true) else {
                panic!("not a record at {physical}");
            };
            assert_eq!(record.body, body_of(n * 2 + index).as_bytes());
            assert_eq!(&files_bytes(*physical, bytes.len()), bytes, "at {physical}");
        }
    }
    // Two readers (two net shards) share the budget: one that went through a whole queue
    // keeps no more than its half, and the other still gets windows.
    ferromq_shards::testing::run_local({
        let config = config.clone();
        async move {
            let store = LocalStore::open(config.clone()).await.unwrap();
            let handle = store.handle().clone();
            let (first, second) = (handle.reader(), handle.reader());
            for (reader, (topic, queue)) in [(&first, queues[0]), (&second, queues[1])] {
                pull_through(reader, topic, queue, (COUNT / 2) as i64, drop).await;
                assert_eq!(reader.mapped_windows(), 1, "{topic}/{queue}: not its share");
            }
            drop((first, second));
            assert_eq!(handle.shared().mapped_bytes(), 0);
            store.shutdown().await.unwrap();
        }
    });
    // After a restart, out of the page cache: read in under the windows, or into buffers.
    for budget in [config.pull_mapped_memory_max, 0] {
        for entry in std::fs::read_dir(dir.path().join("commitlog")).unwrap() {
            evict_from_page_cache(&entry.unwrap().path());
        }
        let mut config = config.clone();
        config.pull_mapped_memory_max = budget;
        let (again, most_mapped) = run(config, false);
        assert_eq!(
            again, written,
            "budget {budget}: other bytes after a restart"
        );
        assert_eq!(most_mapped > 0, budget > 0);
    }
}
