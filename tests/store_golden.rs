//! Golden test of the CommitLog record codec on a store the Java 4.9.8 broker wrote.
//!
//! Method: walk every CommitLog segment of `fixtures/java-4.9.8/store/clean` (clean stop) and
//! `crashed` (kill -9 after 100 more sends) record by record, as recovery will: each segment is
//! messages up to a blank record (at the place MANIFEST.json says), the last one up to the end
//! of valid data. Every message is compared field by field with the manifest (which the
//! fixture's authors cross-checked against every SendResult): queue, offsets, flags, times,
//! hosts, properties, body length and SHA-256, offset message id, tag hash; its body CRC is
//! verified; and it re-encodes to exactly the bytes on disk.

mod common;

use ferromq::store::message::{
    decode_record, encode_record, java_string_hash, offset_msg_id, parse_properties, MessageRecord,
    Record,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;

fn manifest() -> Value {
    let path = common::fixtures_dir().join("store/MANIFEST.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Manifest messages by physical offset.
fn messages_by_offset(manifest: &Value) -> HashMap<i64, Value> {
    let mut messages = HashMap::new();
    for topic in manifest["topics"].as_object().unwrap().values() {
        for queue in topic["queues"].as_object().unwrap().values() {
            for message in queue["messages"].as_array().unwrap() {
                messages.insert(message["physicalOffset"].as_i64().unwrap(), message.clone());
            }
        }
    }
    messages
}

/// Walks one store's CommitLog; returns how many messages it decoded.
fn walk(store: &str, commitlog: &Value, expected: &HashMap<i64, Value>) -> (usize, usize) {
    let dir = common::fixtures_dir()
        .join("store")
        .join(store)
        .join("commitlog");
    let mut decoded = 0;
    let mut compared = 0;
    for file in commitlog["files"].as_array().unwrap() {
        let bytes = std::fs::read(dir.join(file["name"].as_str().unwrap())).unwrap();
        let start = file["startOffset"].as_i64().unwrap();
        let valid_end = usize::try_from(file["validDataEnd"].as_i64().unwrap() - start).unwrap();
        let mut at = 0;
        let mut records = 0;
        while at < valid_end {
            match decode_record(&bytes[at..], true).unwrap_or_else(|e| panic!("{store} @{at}: {e}"))
            {
                Record::Blank { remaining } => {
                    assert_eq!(
                        i64::try_from(at).unwrap() + start,
                        file["blankRecordAt"].as_i64().unwrap()
                    );
                    assert_eq!(
                        remaining as i64,
                        file["blankRecordLength"].as_i64().unwrap()
                    );
                    assert_eq!(
                        at + remaining,
                        bytes.len(),
                        "blank runs to the end of the segment"
                    );
                    at += remaining;
                }
                Record::Message { record, size } => {
                    let physical = start + i64::try_from(at).unwrap();
                    assert_eq!(record.physical_offset, physical);
                    let mut again = Vec::new();
                    encode_record(&record, &mut again);
                    assert_eq!(
                        &again[..],
                        &bytes[at..at + size],
                        "{store} re-encode @{physical}"
                    );
                    if let Some(message) = expected.get(&physical) {
                        check_against_manifest(&record, size, message);
                        compared += 1;
                    }
                    records += 1;
                    at += size;
                }
            }
        }
        assert_eq!(at, valid_end, "{store}: walk ends at the valid end");
        if at < bytes.len() {
            // What follows the valid end is not a record: recovery stops here.
            assert!(
                decode_record(&bytes[at..], true).is_err(),
                "{store}: data past the end"
            );
        }
        assert_eq!(
            records,
            file["records"].as_u64().unwrap() as usize,
            "{store} record count"
        );
        decoded += records;
    }
    (decoded, compared)
}

fn check_against_manifest(
    record: &ferromq::store::message::MessageRecord<'_>,
    size: usize,
    m: &Value,
) {
    let at = record.physical_offset;
    assert_eq!(size as i64, m["recordSize"].as_i64().unwrap(), "@{at}");
    assert_eq!(
        i64::from(record.queue_id),
        m["queueId"].as_i64().unwrap(),
        "@{at}"
    );
    assert_eq!(
        record.queue_offset,
        m["recordQueueOffset"].as_i64().unwrap(),
        "@{at}"
    );
    assert_eq!(
        i64::from(record.sys_flag),
        m["sysFlag"].as_i64().unwrap(),
        "@{at}"
    );
    assert_eq!(i64::from(record.flag), m["flag"].as_i64().unwrap(), "@{at}");
    assert_eq!(
        record.born_timestamp,
        m["bornTimestamp"].as_i64().unwrap(),
        "@{at}"
    );
    assert_eq!(
        record.store_timestamp,
        m["storeTimestamp"].as_i64().unwrap(),
        "@{at}"
    );
    assert_eq!(
        record.born_host.to_string(),
        m["bornHost"].as_str().unwrap(),
        "@{at}"
    );
    assert_eq!(
        record.store_host.to_string(),
        m["storeHost"].as_str().unwrap(),
        "@{at}"
    );
    assert_eq!(
        i64::from(record.reconsume_times),
        m["reconsumeTimes"].as_i64().unwrap()
    );
    assert_eq!(
        record.prepared_transaction_offset,
        m["preparedTransactionOffset"].as_i64().unwrap()
    );
    assert_eq!(
        record.body.len() as i64,
        m["storedBodyLength"].as_i64().unwrap(),
        "@{at}"
    );
    if !m["compressed"].as_bool().unwrap() {
        let sha = format!("{:x}", Sha256::digest(record.body));
        assert_eq!(sha, m["bodySha256"].as_str().unwrap(), "@{at}");
    }
    assert_eq!(
        offset_msg_id(record.store_host, at),
        m["offsetMsgId"].as_str().unwrap()
    );
    let properties: HashMap<String, String> =
        parse_properties(record.properties).into_iter().collect();
    let expected: HashMap<String, String> = m["properties"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(properties, expected, "@{at}");
    // The ConsumeQueue tag code is the Java hash of TAGS, except for delayed messages (there
    // it is the delivery time).
    if let (Some(tags), Some(code)) = (properties.get("TAGS"), m["cqTagsCode"].as_i64()) {
        if record.topic != "SCHEDULE_TOPIC_XXXX" {
            assert_eq!(i64::from(java_string_hash(tags)), code, "@{at} tags {tags}");
        }
    }
}

#[test]
fn clean_java_commitlog_decodes_matches_manifest_and_reencodes() {
    let manifest = manifest();
    let expected = messages_by_offset(&manifest);
    let (decoded, compared) = walk("clean", &manifest["commitlog"], &expected);
    assert_eq!(
        decoded as u64,
        manifest["commitlog"]["recordCount"].as_u64().unwrap()
    );
    assert_eq!(compared, expected.len(), "every manifest message was found");
}

#[test]
fn crashed_java_commitlog_decodes_to_its_valid_end() {
    let manifest = manifest();
    let expected = messages_by_offset(&manifest);
    let crashed = &manifest["crashed"]["commitlog"];
    let (decoded, compared) = walk("crashed", crashed, &expected);
    assert_eq!(decoded as u64, crashed["recordCount"].as_u64().unwrap());
    assert_eq!(compared, expected.len(), "the clean part is unchanged");
}

#[test]
fn java_consume_queues_hold_the_manifest_units() {
    use ferromq::store::consume_queue::{CqUnit, UNIT_SIZE};
    let manifest = manifest();
    let root = common::fixtures_dir().join("store/clean/consumequeue");
    let mut checked = 0;
    for (topic, entry) in manifest["topics"].as_object().unwrap() {
        for (queue_id, queue) in entry["queues"].as_object().unwrap() {
            let dir = root.join(topic).join(queue_id);
            let mut bytes = Vec::new();
            for file in queue["cqFiles"].as_array().unwrap() {
                let name = file["name"].as_str().unwrap();
                let start = usize::try_from(name.parse::<u64>().unwrap()).unwrap();
                assert_eq!(
                    start,
                    bytes.len(),
                    "{topic}/{queue_id}: files are contiguous"
                );
                bytes.extend(std::fs::read(dir.join(name)).unwrap());
            }
            for message in queue["messages"].as_array().unwrap() {
                let offset = usize::try_from(message["queueOffset"].as_u64().unwrap()).unwrap();
                let unit = CqUnit::decode(&bytes[offset * UNIT_SIZE..]).unwrap();
                let expected = CqUnit {
                    physical_offset: message["cqPhysicalOffset"].as_i64().unwrap(),
                    size: i32::try_from(message["cqSize"].as_i64().unwrap()).unwrap(),
                    tags_code: message["cqTagsCode"].as_i64().unwrap(),
                };
                assert_eq!(unit, expected, "{topic}/{queue_id}@{offset}");
                checked += 1;
            }
            let max = usize::try_from(queue["maxOffset"].as_u64().unwrap()).unwrap();
            if let Some(after) = CqUnit::decode(&bytes[max * UNIT_SIZE..]) {
                assert!(
                    !after.is_written(),
                    "{topic}/{queue_id}: nothing past maxOffset"
                );
            }
        }
    }
    assert_eq!(checked, 2515);
}

#[test]
fn java_index_files_find_every_key_and_unique_key() {
    use ferromq::store::index::{IndexFileView, IndexHeader};
    const SLOTS: usize = 1000; // maxHashSlotNum of the fixture's broker.conf
    let manifest = manifest();
    let dir = common::fixtures_dir().join("store/clean/index");
    let files: Vec<(Vec<u8>, &Value)> = manifest["index"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            (
                std::fs::read(dir.join(entry["name"].as_str().unwrap())).unwrap(),
                entry,
            )
        })
        .collect();
    let mut views = Vec::new();
    for (bytes, entry) in &files {
        assert_eq!(bytes.len() as u64, entry["size"].as_u64().unwrap());
        let view = IndexFileView::new(bytes, SLOTS).unwrap();
        let expected = IndexHeader {
            begin_timestamp: entry["beginTimestamp"].as_i64().unwrap(),
            end_timestamp: entry["endTimestamp"].as_i64().unwrap(),
            begin_phy_offset: entry["beginPhyOffset"].as_i64().unwrap(),
            end_phy_offset: entry["endPhyOffset"].as_i64().unwrap(),
            hash_slot_count: i32::try_from(entry["hashSlotCount"].as_i64().unwrap()).unwrap(),
            index_count: i32::try_from(entry["indexCount"].as_i64().unwrap()).unwrap(),
        };
        assert_eq!(view.header, expected);
        views.push(view);
    }
    let indexed_end = views.last().unwrap().header.end_phy_offset;
    let mut looked_up = 0;
    for (topic, entry) in manifest["topics"].as_object().unwrap() {
        for queue in entry["queues"].as_object().unwrap().values() {
            for message in queue["messages"].as_array().unwrap() {
                let offset = message["physicalOffset"].as_i64().unwrap();
                if offset > indexed_end {
                    continue; // Written after the last index flush.
                }
                let properties = message["properties"].as_object().unwrap();
                let mut keys: Vec<&str> = properties
                    .get("KEYS")
                    .and_then(Value::as_str)
                    .map(|keys| keys.split(' ').filter(|k| !k.is_empty()).collect())
                    .unwrap_or_default();
                keys.extend(properties.get("UNIQ_KEY").and_then(Value::as_str));
                for key in keys {
                    let found = views
                        .iter()
                        .flat_map(|view| view.lookup(topic, key, 0, i64::MAX, 4096))
                        .any(|candidate| candidate == offset);
                    assert!(found, "{topic}#{key} -> {offset} not in the index");
                    looked_up += 1;
                }
            }
        }
    }
    assert!(looked_up > 4000, "only {looked_up} keys looked up");
}

#[test]
fn java_checkpoint_reads_back() {
    use ferromq::store::checkpoint::StoreCheckpoint;
    let manifest = manifest();
    let bytes = std::fs::read(common::fixtures_dir().join("store/clean/checkpoint")).unwrap();
    let checkpoint = StoreCheckpoint::decode(&bytes);
    let expected = &manifest["checkpoint"];
    assert_eq!(
        checkpoint.physic_msg_timestamp,
        expected["physicMsgTimestamp"].as_i64().unwrap()
    );
    assert_eq!(
        checkpoint.logics_msg_timestamp,
        expected["logicsMsgTimestamp"].as_i64().unwrap()
    );
    assert_eq!(
        checkpoint.index_msg_timestamp,
        expected["indexMsgTimestamp"].as_i64().unwrap()
    );
    assert_eq!(&checkpoint.encode()[..24], &bytes[..24]);
}

/// Calls `visit` with every message of the clean Java CommitLog, in log order.
fn for_each_clean_record(manifest: &Value, mut visit: impl FnMut(&MessageRecord<'_>, usize)) {
    let store = common::fixtures_dir().join("store/clean/commitlog");
    for file in manifest["commitlog"]["files"].as_array().unwrap() {
        let bytes = std::fs::read(store.join(file["name"].as_str().unwrap())).unwrap();
        let start = file["startOffset"].as_i64().unwrap();
        let end = usize::try_from(file["validDataEnd"].as_i64().unwrap() - start).unwrap();
        let mut at = 0;
        while at < end {
            match decode_record(&bytes[at..], true).unwrap() {
                Record::Blank { remaining } => at += remaining,
                Record::Message { record, size } => {
                    visit(&record, size);
                    at += size;
                }
            }
        }
    }
}

#[test]
fn dispatching_the_java_commitlog_rebuilds_java_consume_queues_byte_for_byte() {
    use ferromq::store::consume_queue::UNIT_SIZE;
    use ferromq::store::dispatch::{dispatch, DelayLevels};
    let manifest = manifest();
    let store = common::fixtures_dir().join("store/clean");
    let levels = DelayLevels::default();
    let mut rebuilt: HashMap<(String, i32), Vec<u8>> = HashMap::new();
    for_each_clean_record(&manifest, |record, size| {
        if let Some(request) = dispatch(record, size, &levels) {
            let queue = rebuilt
                .entry((request.topic, request.queue_id))
                .or_default();
            let position = usize::try_from(request.queue_offset).unwrap() * UNIT_SIZE;
            assert_eq!(queue.len(), position, "units arrive in queue order");
            queue.extend_from_slice(&request.unit.encode());
        }
    });
    let mut queues = 0;
    for (topic, entry) in manifest["topics"].as_object().unwrap() {
        for (queue_id, queue) in entry["queues"].as_object().unwrap() {
            let mut java = Vec::new();
            for file in queue["cqFiles"].as_array().unwrap() {
                let path = store.join("consumequeue").join(topic).join(queue_id);
                java.extend(std::fs::read(path.join(file["name"].as_str().unwrap())).unwrap());
            }
            let max = usize::try_from(queue["maxOffset"].as_u64().unwrap()).unwrap();
            let ours = &rebuilt[&(topic.clone(), queue_id.parse::<i32>().unwrap())];
            assert_eq!(ours.len(), max * UNIT_SIZE, "{topic}/{queue_id}");
            assert_eq!(
                &ours[..],
                &java[..max * UNIT_SIZE],
                "{topic}/{queue_id} differs from Java"
            );
            queues += 1;
        }
    }
    assert_eq!(queues, rebuilt.len(), "no queue Java lacks");
}

#[test]
fn java_offset_files_parse_to_the_manifest_and_rewrite_byte_for_byte() {
    use ferromq::store::config_files::{ConsumerOffsetTable, DelayOffsetTable};
    let manifest = manifest();
    let config = common::fixtures_dir().join("store/clean/config");
    let bytes = std::fs::read(config.join("consumerOffset.json")).unwrap();
    let offsets = ConsumerOffsetTable::parse(&bytes).unwrap();
    for (key, queues) in manifest["consumerOffsets"].as_object().unwrap() {
        let (topic, group) = key.split_once('@').unwrap();
        for (queue, offset) in queues.as_object().unwrap() {
            let queue = queue.parse().unwrap();
            assert_eq!(
                offsets.offset(topic, group, queue),
                offset.as_i64(),
                "{key} {queue}"
            );
        }
    }
    assert_eq!(
        offsets.to_json().as_bytes(),
        &bytes[..],
        "consumerOffset.json as Java wrote it"
    );
    let bytes = std::fs::read(config.join("delayOffset.json")).unwrap();
    let delays = DelayOffsetTable::parse(&bytes).unwrap();
    let expected: Vec<(i32, i64)> = manifest["delayOffsets"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(level, offset)| (level.parse().unwrap(), offset.as_i64().unwrap()))
        .collect();
    assert_eq!(delays.offset_table, expected);
    assert_eq!(
        delays.to_json().as_bytes(),
        &bytes[..],
        "delayOffset.json as Java wrote it"
    );
}

#[test]
fn indexing_the_java_commitlog_rebuilds_java_index_files_byte_for_byte() {
    use ferromq::store::index::IndexFileBuilder;
    const SLOTS: usize = 1000; // maxHashSlotNum and maxIndexNum of the fixture's broker.conf
    const ITEMS: usize = 4000;
    let manifest = manifest();
    let store = common::fixtures_dir().join("store/clean");
    let java_files = manifest["index"].as_array().unwrap();
    let indexed_end = java_files.last().unwrap()["endPhyOffset"].as_i64().unwrap();
    let mut built = vec![IndexFileBuilder::new(SLOTS, ITEMS, 0, 0)];
    for_each_clean_record(&manifest, |record, _size| {
        // Java indexes every type but rolled-back transaction records: UNIQ_KEY first, then
        // each KEYS token.
        if record.sys_flag & 0xC == 0xC || record.physical_offset > indexed_end {
            return;
        }
        let properties = parse_properties(record.properties);
        let get = |name: &str| {
            properties
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        let mut keys: Vec<String> = get("UNIQ_KEY").into_iter().collect();
        if let Some(tokens) = get("KEYS") {
            keys.extend(
                tokens
                    .split(' ')
                    .filter(|k| !k.is_empty())
                    .map(str::to_owned),
            );
        }
        for key in keys {
            let (offset, time) = (record.physical_offset, record.store_timestamp);
            let current = built.last_mut().unwrap();
            if !current.put_key(record.topic, &key, offset, time) {
                let header = current.header();
                let mut next = IndexFileBuilder::new(
                    SLOTS,
                    ITEMS,
                    header.end_phy_offset,
                    header.end_timestamp,
                );
                assert!(next.put_key(record.topic, &key, offset, time));
                built.push(next);
            }
        }
    });
    assert_eq!(built.len(), java_files.len());
    for (ours, java) in built.into_iter().zip(java_files) {
        let name = java["name"].as_str().unwrap();
        let java_bytes = std::fs::read(store.join("index").join(name)).unwrap();
        let ours = ours.into_bytes();
        assert_eq!(ours.len(), java_bytes.len(), "{name}");
        assert!(ours == java_bytes, "index file {name} differs from Java's");
    }
}
