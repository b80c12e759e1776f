//! Take-over: a store directory the Java 4.9.8 broker wrote opens in ferromq, serves what the
//! Java broker acknowledged, takes new puts, and stays readable by the Java broker.
//!
//! Method: copy `fixtures/java-4.9.8/store/clean` (clean stop) or `crashed` (kill -9 after
//! 100 acknowledged sync sends, `abort` present) to a directory on disk — never touching the
//! fixture — and open it with `LocalStore` and the sizes of the fixture's `broker.conf`.
//! Everything is checked against `MANIFEST.json` and the fixture's own files: the recovery row
//! and offsets; every message at its queue offset and physical offset with the exact record
//! bytes of the Java CommitLog; each queue's min and max offsets; every `KEYS` token and
//! `UNIQ_KEY` found by key, with exactly the records that carry it; after the crash, the 100
//! acknowledged messages with their body SHA-256. Then one put lands at the next queue offset
//! and physical offset, and after a clean shutdown the layout is still Java's: segment and
//! file sizes, every Java-written byte unchanged, and the new unit and record in Java's format.

mod common;

use common::{store_message, TempDir};
use ferromq::store::commit_log::Appended;
use ferromq::store::config::StoreConfig;
use ferromq::store::consume_queue::{tags_code, CqUnit, UNIT_SIZE};
use ferromq::store::flush::FlushDiskType;
use ferromq::store::message::{decode_offset_msg_id, decode_record, parse_properties, Record};
use ferromq::store::message_store::{LocalStore, RecoveryReport};
use ferromq::store::reader::{GetMessageStatus, PullFilter, StoreReader};
use ferromq::store::recovery::RecoveryMode;
use ferromq::store::segment::segment_name;
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const NO_FILTER: PullFilter<'static> = PullFilter::ALL;

fn fixture_store() -> PathBuf {
    common::fixtures_dir().join("store")
}

fn manifest() -> Value {
    let path = fixture_store().join("MANIFEST.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The sizes of the fixture's `broker.conf`, as a `StoreConfig` over `root`.
fn java_config(root: &Path) -> StoreConfig {
    let text = std::fs::read_to_string(fixture_store().join("broker.conf")).unwrap();
    let conf: HashMap<&str, &str> = text
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.trim(), value.trim()))
        .collect();
    let number = |key: &str| -> usize { conf[key].parse().unwrap() };
    let mut config = StoreConfig::new(root);
    config.mapped_file_size_commit_log = number("mappedFileSizeCommitLog") as u64;
    config.consume_queue_units_per_file = number("mappedFileSizeConsumeQueue") / UNIT_SIZE;
    config.max_hash_slot_num = number("maxHashSlotNum");
    config.max_index_num = number("maxIndexNum");
    config.flush_disk_type = FlushDiskType::SyncFlush;
    assert_eq!(config.mapped_file_size_commit_log, 1_048_576);
    assert_eq!(config.consume_queue_units_per_file, 300);
    config
}

/// Copies a fixture store to `to`, writable (the fixture files are read-only).
fn copy_store(name: &str, to: &Path) {
    fn copy_tree(from: &Path, to: &Path) {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            let target = to.join(entry.file_name());
            if entry.file_type().unwrap().is_dir() {
                copy_tree(&entry.path(), &target);
            } else {
                std::fs::copy(entry.path(), &target).unwrap();
                let mut permissions = std::fs::metadata(&target).unwrap().permissions();
                #[allow(clippy::permissions_set_readonly_false)]
                permissions.set_readonly(false);
                std::fs::set_permissions(&target, permissions).unwrap();
            }
        }
    }
    copy_tree(&fixture_store().join(name), to);
}

/// A fixture store's CommitLog, its segments back to back: byte `o` is physical offset `o`.
fn java_commit_log(name: &str) -> Vec<u8> {
    let dir = fixture_store().join(name).join("commitlog");
    let mut bytes = Vec::new();
    for start in [0u64, 1_048_576, 2_097_152] {
        bytes.extend(std::fs::read(dir.join(segment_name(start))).unwrap());
    }
    bytes
}

/// Every message of the manifest's `topics`: (topic, queue id, entry).
fn manifest_messages(manifest: &Value) -> Vec<(String, i32, Value)> {
    let mut all = Vec::new();
    for (topic, description) in manifest["topics"].as_object().unwrap() {
        for (queue, queue_description) in description["queues"].as_object().unwrap() {
            for message in queue_description["messages"].as_array().unwrap() {
                all.push((topic.clone(), queue.parse().unwrap(), message.clone()));
            }
        }
    }
    all
}

fn int(value: &Value) -> i64 {
    value.as_i64().unwrap()
}

/// Opens the store under `config`, timing the recovery.
async fn open_timed(config: StoreConfig, what: &str) -> LocalStore {
    let started = Instant::now();
    let store = LocalStore::open(config).await.unwrap();
    eprintln!(
        "take-over of {what}: LocalStore::open took {} ms; {:?}",
        started.elapsed().as_millis(),
        store.recovery()
    );
    store
}

/// Every manifest message comes back at its queue offset and physical offset, with the very
/// bytes the Java broker wrote.
async fn assert_serves_manifest(reader: &StoreReader, manifest: &Value, java_log: &[u8]) {
    let messages = manifest_messages(manifest);
    assert_eq!(messages.len(), 2515);
    for (topic, queue_id, message) in &messages {
        let queue_offset = int(&message["queueOffset"]);
        let physical = int(&message["physicalOffset"]);
        let size = usize::try_from(int(&message["recordSize"])).unwrap();
        let result = reader
            .get_message(topic, *queue_id, queue_offset, 1, &NO_FILTER)
            .await
            .unwrap();
        let at = format!("{topic}/{queue_id}@{queue_offset}");
        assert_eq!(result.status, GetMessageStatus::Found, "{at}");
        assert_eq!(result.messages.len(), 1, "{at}");
        let found = result.messages[0];
        assert_eq!(found.queue_offset, queue_offset, "{at}");
        assert_eq!(found.physical_offset, physical, "{at}");
        assert_eq!(found.size, size, "{at}");
        let start = usize::try_from(physical).unwrap();
        assert!(
            result.record(&found)[..size] == java_log[start..start + size],
            "{at}: record bytes differ from the Java CommitLog"
        );
    }
    for (topic, description) in manifest["topics"].as_object().unwrap() {
        for (queue, queue_description) in description["queues"].as_object().unwrap() {
            let queue_id: i32 = queue.parse().unwrap();
            assert_eq!(
                reader.min_offset_in_queue(topic, queue_id),
                int(&queue_description["minOffset"]),
                "{topic}/{queue} min offset"
            );
            assert_eq!(
                reader.max_offset_in_queue(topic, queue_id),
                int(&queue_description["maxOffset"]),
                "{topic}/{queue} max offset"
            );
        }
    }
}

/// Every (topic, key) the Java index holds — each `KEYS` token and the `UNIQ_KEY` of every
/// message in the manifest — with the physical offsets of the records that carry it.
fn keys_of_manifest(manifest: &Value) -> BTreeMap<(String, String), BTreeSet<i64>> {
    let mut keys: BTreeMap<(String, String), BTreeSet<i64>> = BTreeMap::new();
    for (topic, _, message) in manifest_messages(manifest) {
        let properties = message["properties"].as_object().unwrap();
        let mut tokens: Vec<String> = Vec::new();
        if let Some(uniq) = properties.get("UNIQ_KEY") {
            tokens.push(uniq.as_str().unwrap().to_owned());
        }
        if let Some(list) = properties.get("KEYS") {
            tokens.extend(list.as_str().unwrap().split(' ').map(str::to_owned));
        }
        for token in tokens.into_iter().filter(|t| !t.is_empty()) {
            keys.entry((topic.clone(), token))
                .or_default()
                .insert(int(&message["physicalOffset"]));
        }
    }
    keys
}

/// Looks up every key and compares the records found with the expected offsets.
async fn assert_keys_found(
    reader: &StoreReader,
    expected: &BTreeMap<(String, String), BTreeSet<i64>>,
) {
    let mut wrong = Vec::new();
    for ((topic, key), offsets) in expected {
        let found = reader
            .query_by_key(topic, key, 4096, 0, i64::MAX)
            .await
            .unwrap();
        let mut got = BTreeSet::new();
        for bytes in &found {
            let Ok(Record::Message { record, .. }) = decode_record(bytes, true) else {
                panic!("{topic}#{key}: not a record");
            };
            got.insert(record.physical_offset);
        }
        if got != *offsets || found.len() != offsets.len() {
            wrong.push(format!(
                "{topic}#{key}: expected {offsets:?}, found {:?}",
                found
                    .iter()
                    .map(|bytes| match decode_record(bytes, false) {
                        Ok(Record::Message { record, .. }) => record.physical_offset,
                        _ => -1,
                    })
                    .collect::<Vec<_>>()
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} keys are wrong; first: {:#?}",
        wrong.len(),
        expected.len(),
        &wrong[..wrong.len().min(5)]
    );
}

/// Puts one message to `FixStoreA` queue 0 and waits until it can be pulled.
async fn put_one(store: &LocalStore) -> (Appended, Vec<u8>) {
    let body = b"ferromq took over".to_vec();
    let appended = store
        .handle()
        .put(store_message(
            "FixStoreA",
            0,
            &body,
            Some("TagNew"),
            Some("k-ferromq"),
        ))
        .await
        .unwrap();
    let reader = store.handle().reader();
    let growth = store.handle().shared().subscribe();
    let deadline = Instant::now() + Duration::from_secs(20);
    while reader.max_offset_in_queue("FixStoreA", 0) <= appended.queue_offset {
        assert!(
            Instant::now() < deadline,
            "the new message was not dispatched"
        );
        let timer = glommio::timer::sleep(Duration::from_millis(200));
        let _ = futures::future::select(Box::pin(growth.next()), Box::pin(timer)).await;
    }
    let result = reader
        .get_message("FixStoreA", 0, appended.queue_offset, 1, &NO_FILTER)
        .await
        .unwrap();
    assert_eq!(result.status, GetMessageStatus::Found);
    let stored = result.body_to_vec();
    let Ok(Record::Message { record, .. }) = decode_record(&stored, true) else {
        panic!("the new message is not a record");
    };
    assert_eq!(record.body, body);
    assert_eq!(record.queue_offset, appended.queue_offset);
    let found = reader
        .query_by_key("FixStoreA", "k-ferromq", 32, 0, i64::MAX)
        .await
        .unwrap();
    assert_eq!(found, vec![result.body_to_vec()]);
    (appended, result.body_to_vec())
}

/// After a clean shutdown: the store is laid out as Java lays it out, every byte the Java
/// broker wrote is still there, and the new record and its unit are in Java's format.
fn assert_java_layout(root: &Path, fixture: &str, appended: &Appended, record: &[u8]) {
    let files = |dir: &Path| -> Vec<PathBuf> {
        let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        all.sort();
        all
    };
    let len = |path: &Path| std::fs::metadata(path).unwrap().len();
    assert!(!root.join("abort").exists(), "a clean stop removes abort");
    assert_eq!(len(&root.join("checkpoint")), 4096);
    let segments = files(&root.join("commitlog"));
    assert_eq!(segments.len(), 3, "{segments:?}");
    let java_log = java_commit_log(fixture);
    let mut log = Vec::new();
    for segment in &segments {
        assert_eq!(len(segment), 1_048_576, "{}", segment.display());
        log.extend(std::fs::read(segment).unwrap());
    }
    let new_at = usize::try_from(appended.physical_offset).unwrap();
    assert!(
        log[..new_at] == java_log[..new_at],
        "the Java records are unchanged"
    );
    assert_eq!(&log[new_at..new_at + appended.size], record);
    assert!(
        log[new_at + appended.size..].iter().all(|b| *b == 0),
        "zeros after the new record"
    );
    let java_queues = fixture_store().join(fixture).join("consumequeue");
    let mut queue_files = 0;
    for topic in files(&root.join("consumequeue")) {
        for queue in files(&topic) {
            for file in files(&queue) {
                assert_eq!(len(&file), 6000, "{}", file.display());
                queue_files += 1;
                let relative = file.strip_prefix(root.join("consumequeue")).unwrap();
                let java = std::fs::read(java_queues.join(relative)).unwrap();
                let ours = std::fs::read(&file).unwrap();
                let written = java
                    .chunks_exact(UNIT_SIZE)
                    .take_while(|unit| CqUnit::decode(unit).unwrap().is_written())
                    .count()
                    * UNIT_SIZE;
                assert_eq!(&ours[..written], &java[..written], "{}", file.display());
            }
        }
    }
    assert_eq!(
        queue_files, 22,
        "the fixture's 22 ConsumeQueue files, no new one"
    );
    let unit_file = root
        .join("consumequeue/FixStoreA/0")
        .join(segment_name(6000));
    let units = std::fs::read(unit_file).unwrap();
    let at = usize::try_from(appended.queue_offset - 300).unwrap() * UNIT_SIZE;
    let unit = CqUnit::decode(&units[at..]).unwrap();
    assert_eq!(
        unit,
        CqUnit {
            physical_offset: i64::try_from(appended.physical_offset).unwrap(),
            size: i32::try_from(appended.size).unwrap(),
            tags_code: tags_code(Some("TagNew")),
        }
    );
    assert!(!CqUnit::decode(&units[at + UNIT_SIZE..])
        .unwrap()
        .is_written());
    for file in files(&root.join("index")) {
        assert_eq!(len(&file), 84_040, "{}", file.display());
    }
}

/// The Java broker stopped cleanly: the normal row, nothing re-dispatched, every message,
/// offset and key as the Java broker left them; the next put continues the queue and the log.
#[test]
fn java_clean_store_opens_normally_and_serves_every_message() {
    let dir = TempDir::on_disk("takeover-clean");
    let root = dir.path().join("store");
    copy_store("clean", &root);
    let config = java_config(&root);
    let manifest = manifest();
    let java_log = java_commit_log("clean");
    let root_for_check = root.clone();
    let (appended, record) = ferromq_shards::testing::run_local(async move {
        let store = open_timed(config, "clean").await;
        let valid_end = u64::try_from(int(&manifest["commitlog"]["validDataEnd"])).unwrap();
        assert_eq!(
            store.recovery(),
            &RecoveryReport {
                mode: RecoveryMode::Normal,
                walk_start: 0,
                valid_end,
                redispatch_from: valid_end,
                redispatched: 0,
                queues: 18,
            }
        );
        let reader = store.handle().reader();
        assert_serves_manifest(&reader, &manifest, &java_log).await;
        let keys = keys_of_manifest(&manifest);
        let ka_7 = &keys[&("FixStoreA".to_owned(), "kA-7".to_owned())];
        // One record: the sent-back copies of kA-7 are in other topics.
        let ka_7_at = manifest_messages(&manifest)
            .iter()
            .find(|(topic, _, message)| topic == "FixStoreA" && message["keys"] == "kA-7")
            .map(|(_, _, message)| int(&message["physicalOffset"]))
            .unwrap();
        assert_eq!(ka_7.iter().copied().collect::<Vec<_>>(), [ka_7_at]);
        assert_keys_found(&reader, &keys).await;
        let (appended, record) = put_one(&store).await;
        assert_eq!(appended.queue_offset, 325);
        assert_eq!(appended.physical_offset, valid_end);
        store.shutdown().await.unwrap();
        (appended, record)
    });
    assert_java_layout(&root_for_check, "clean", &appended, &record);
}

/// The Java broker was killed after 100 acknowledged sync sends: an abnormal row, and every
/// acknowledged message is there at the queue offset its SendResult named, with its body.
#[test]
fn java_crashed_store_recovers_every_acknowledged_message() {
    let dir = TempDir::on_disk("takeover-crashed");
    let root = dir.path().join("store");
    copy_store("crashed", &root);
    let config = java_config(&root);
    let manifest = manifest();
    let crashed = manifest["crashed"].clone();
    let java_log = java_commit_log("crashed");
    // The walk starts at the newest segment whose first record is stored at or before the
    // checkpoint's oldest time less 3 s (the index time counts: messageIndexEnable).
    let checkpoint = &crashed["checkpoint"];
    let oldest = [
        "physicMsgTimestamp",
        "logicsMsgTimestamp",
        "indexMsgTimestamp",
    ]
    .iter()
    .map(|name| int(&checkpoint[name]))
    .min()
    .unwrap();
    let walk_start = [0u64, 1_048_576, 2_097_152]
        .into_iter()
        .filter(|start| {
            let at = usize::try_from(*start).unwrap();
            match decode_record(&java_log[at..], true) {
                Ok(Record::Message { record, .. }) => record.store_timestamp <= oldest - 3000,
                _ => false,
            }
        })
        .max()
        .unwrap();
    assert_eq!(
        walk_start, 0,
        "the checkpoint's index time (the first IndexFile filled) is less than 3 s after \
         segment 1 began, so the walk goes back to segment 0"
    );
    let root_for_check = root.clone();
    let (appended, record) = ferromq_shards::testing::run_local(async move {
        let store = open_timed(config, "crashed").await;
        let valid_end = u64::try_from(int(&crashed["commitlog"]["maxPhysicalOffset"])).unwrap();
        let report = store.recovery().clone();
        assert_eq!(report.mode, RecoveryMode::Abnormal);
        assert_eq!(report.walk_start, walk_start);
        assert_eq!(report.valid_end, valid_end);
        assert_eq!(report.redispatch_from, walk_start);
        assert_eq!(
            report.redispatched,
            crashed["commitlog"]["recordCount"].as_u64().unwrap(),
            "every record from the first segment on"
        );
        let reader = store.handle().reader();
        // The 100 sends acknowledged before the kill, as the producer was told.
        let send_log = std::fs::read_to_string(fixture_store().join("send-log-crashed.jsonl"))
            .unwrap()
            .lines()
            .map(|line| serde_json::from_str::<Value>(line).unwrap())
            .collect::<Vec<_>>();
        let extra = crashed["extraMessages"].as_array().unwrap();
        assert_eq!((send_log.len(), extra.len()), (100, 100));
        for (sent, message) in send_log.iter().zip(extra) {
            assert_eq!(sent["status"], "SEND_OK");
            for field in [
                "queueId",
                "queueOffset",
                "msgId",
                "offsetMsgId",
                "bodySha256",
            ] {
                assert_eq!(
                    sent[field], message[field],
                    "send log and manifest: {field}"
                );
            }
            let topic = message["topic"].as_str().unwrap();
            let queue_id = i32::try_from(int(&message["queueId"])).unwrap();
            let queue_offset = int(&message["queueOffset"]);
            let at = format!("{topic}/{queue_id}@{queue_offset}");
            let result = reader
                .get_message(topic, queue_id, queue_offset, 1, &NO_FILTER)
                .await
                .unwrap();
            assert_eq!(result.status, GetMessageStatus::Found, "{at}");
            let stored = result.body_to_vec();
            let Ok(Record::Message { record, .. }) = decode_record(&stored, true) else {
                panic!("{at}: not a record");
            };
            let (_, physical) =
                decode_offset_msg_id(message["offsetMsgId"].as_str().unwrap()).unwrap();
            assert_eq!(record.physical_offset, physical, "{at}");
            assert_eq!(record.queue_offset, queue_offset, "{at}");
            assert_eq!(
                format!("{:x}", Sha256::digest(record.body)),
                message["bodySha256"].as_str().unwrap(),
                "{at}"
            );
            let properties: HashMap<String, String> =
                parse_properties(record.properties).into_iter().collect();
            assert_eq!(properties["UNIQ_KEY"], message["msgId"].as_str().unwrap());
            assert_eq!(properties["KEYS"], message["keys"].as_str().unwrap());
        }
        for (topic, queues) in crashed["queueMaxOffsets"].as_object().unwrap() {
            for (queue, max) in queues.as_object().unwrap() {
                assert_eq!(
                    reader.max_offset_in_queue(topic, queue.parse().unwrap()),
                    int(max),
                    "{topic}/{queue}"
                );
            }
        }
        // What the clean run stored is all still there, byte for byte.
        assert_serves_manifest_prefix(&reader, &manifest, &java_log).await;
        // The IndexFile the Java broker wrote after its last checkpoint was dropped and
        // rebuilt: every key is found, exactly once per record.
        let mut keys = keys_of_manifest(&manifest);
        for message in extra {
            let topic = message["topic"].as_str().unwrap().to_owned();
            let physical = decode_offset_msg_id(message["offsetMsgId"].as_str().unwrap())
                .unwrap()
                .1;
            let mut tokens = vec![message["msgId"].as_str().unwrap().to_owned()];
            tokens.extend(
                message["keys"]
                    .as_str()
                    .unwrap()
                    .split(' ')
                    .map(str::to_owned),
            );
            for token in tokens {
                keys.entry((topic.clone(), token))
                    .or_default()
                    .insert(physical);
            }
        }
        assert_keys_found(&reader, &keys).await;
        let (appended, record) = put_one(&store).await;
        assert_eq!(appended.queue_offset, 350);
        assert_eq!(appended.physical_offset, valid_end);
        store.shutdown().await.unwrap();
        (appended, record)
    });
    assert_java_layout(&root_for_check, "crashed", &appended, &record);
    // And the store opens again, cleanly this time, with nothing to redo.
    let config = java_config(&root_for_check);
    ferromq_shards::testing::run_local(async move {
        let store = open_timed(config, "crashed, after ferromq's clean stop").await;
        assert_eq!(store.recovery().mode, RecoveryMode::Normal);
        assert_eq!(store.recovery().redispatched, 0);
        assert_eq!(
            store.handle().reader().max_offset_in_queue("FixStoreA", 0),
            351
        );
        store.shutdown().await.unwrap();
    });
}

/// [`assert_serves_manifest`] for the crashed copy: the clean run's messages at their
/// offsets and bytes (the queues have grown since, so min/max are checked elsewhere).
async fn assert_serves_manifest_prefix(reader: &StoreReader, manifest: &Value, java_log: &[u8]) {
    for (topic, queue_id, message) in manifest_messages(manifest) {
        let queue_offset = int(&message["queueOffset"]);
        let size = usize::try_from(int(&message["recordSize"])).unwrap();
        let start = usize::try_from(int(&message["physicalOffset"])).unwrap();
        let result = reader
            .get_message(&topic, queue_id, queue_offset, 1, &NO_FILTER)
            .await
            .unwrap();
        assert_eq!(
            result.status,
            GetMessageStatus::Found,
            "{topic}/{queue_id}@{queue_offset}"
        );
        assert_eq!(
            result.messages[0].physical_offset,
            i64::try_from(start).unwrap()
        );
        assert!(
            result.body_to_vec()[..size] == java_log[start..start + size],
            "{topic}/{queue_id}@{queue_offset}: bytes differ"
        );
    }
}

/// Every file under `root`, relative path → bytes.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(dir: &Path, root: &Path, into: &mut BTreeMap<PathBuf, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, root, into);
            } else {
                let relative = path.strip_prefix(root).unwrap().to_owned();
                into.insert(relative, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut all = BTreeMap::new();
    walk(root, root, &mut all);
    all
}

/// An operator who forgets `mappedFileSizeConsumeQueue` or `maxHashSlotNum` (Java's defaults
/// are 6,000,000 bytes and 5,000,000 slots) must get an error naming the file and the key —
/// not a store whose queues and index were read, extended and overwritten with the wrong
/// layout. The copy stays byte for byte what the Java broker left.
#[test]
fn java_store_opened_with_other_file_sizes_is_refused_and_left_untouched() {
    let dir = TempDir::on_disk("takeover-sizes");
    let root = dir.path().join("store");
    copy_store("clean", &root);
    let before = snapshot(&root);
    let mut wrong_queue = java_config(&root);
    wrong_queue.consume_queue_units_per_file = 300_000;
    let mut wrong_index = java_config(&root);
    wrong_index.max_hash_slot_num = 5_000_000;
    wrong_index.max_index_num = 20_000_000;
    let cases = [
        (wrong_queue, "mappedFileSizeConsumeQueue", "consumequeue"),
        (wrong_index, "maxHashSlotNum", "index"),
    ];
    for (config, key, dir_name) in cases {
        let text = ferromq_shards::testing::run_local(async move {
            LocalStore::open(config).await.unwrap_err().to_string()
        });
        assert!(text.contains(key), "{text}");
        assert!(
            text.contains(&root.join(dir_name).display().to_string()),
            "{text}"
        );
        let after = snapshot(&root);
        let changed: Vec<_> = before
            .iter()
            .filter(|(path, bytes)| after.get(*path) != Some(bytes))
            .map(|(path, _)| path.display().to_string())
            .collect();
        // `lock` gets "lock" written again, as Java writes it: same bytes.
        assert!(changed.is_empty(), "{key}: changed {changed:?}");
    }
    let config = java_config(&root);
    ferromq_shards::testing::run_local(async move {
        let store = LocalStore::open(config).await.unwrap();
        assert_eq!(store.recovery().mode, RecoveryMode::Normal);
        assert_eq!(
            store.handle().reader().max_offset_in_queue("FixStoreA", 3),
            325
        );
        store.shutdown().await.unwrap();
    });
}
