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
    decode_record, encode_record, java_string_hash, offset_msg_id, parse_properties, Record,
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
