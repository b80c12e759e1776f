//! The store both ways: a store directory `ferromq` wrote opens in the Java 4.9.8 broker and
//! serves the same, and `ferromq` opens it again after the Java broker ran on it.
//!
//! Both brokers get the same store sizes (1 MiB CommitLog segments, so the log rolls over
//! several files; ConsumeQueue files of 5,990 bytes, which both round up to 300 units; small
//! IndexFiles) and the same delay levels. What a broker "serves" is read over the wire with
//! our remoting client, the same way from either: every topic's and subscription group's
//! config, each queue's min and max offsets and, for every queue offset between them, the
//! record bytes a PULL returns (the record's own queue offset, physical offset, properties
//! and body included), the consumer offsets (GET_ALL_CONSUMER_OFFSET, each entry checked
//! with QUERY_CONSUMER_OFFSET), and a sample of keys found by QUERY_MESSAGE.
//!
//! - After a clean stop: `StoreTraffic write` (the Java client) puts a varied workload into
//!   `ferromq standalone` (topics of 4 and 8 queues, tags, keys, unicode, long and many user
//!   properties, compressed and large bodies, a batch, delayed messages delivered and still
//!   waiting, a retry, committed, rolled-back and unknown transactions, three consumer groups
//!   that commit at shutdown, one committed by UPDATE_CONSUMER_OFFSET, and a topic and a
//!   group made by admin requests with other settings than the defaults). The Java broker
//!   over a copy of the stopped store must serve exactly what ferromq served; `StoreTraffic
//!   java` then resumes the groups where they stopped, sends more (a new topic, a delayed
//!   message the Java schedule delivers after the ones ferromq delivered, not with them
//!   again) and reads every message back. Stopped cleanly, the Java broker's store opens in
//!   ferromq, which must serve exactly what the Java broker served last, offsets, consumer
//!   offsets and delay offsets included, and go on from there.
//! - Either broker refuses to start on a store the other runs on (the `lock` file).
//! - After kill -9 under load: ferromq is killed while pipelined sends are in flight, at a
//!   random point (early, when the Java broker's recovery walks from the first segment, or
//!   after seconds, when it starts where ferromq's checkpoint says), half the rounds at the
//!   instant the CommitLog directory changes (a segment being made). ferromq (on one copy)
//!   and the Java broker (on another, through its abnormal recovery) must serve the same
//!   queues byte for byte, with every acknowledged message at the queue offset its answer
//!   named; and the CommitLog directory, watched all along, must never show a name the Java
//!   broker refuses to load.

mod common;

use common::java::{run_java, JavaServer, Serialize, Standalone};
use common::{connect, pull_header, send_request, TempDir};
use ferromq::config::fastjson::parse_lenient;
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::{
    CreateTopicRequestHeader, GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader,
    OffsetResponseHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader, QueryMessageRequestHeader, SendMessageResponseHeader,
    UpdateConsumerOffsetRequestHeader,
};
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use ferromq::store::message::{decode_record, parse_properties, properties_to_string, Record};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The store and schedule settings both brokers run with. The ConsumeQueue size is not a
/// multiple of 20 on purpose: Java rounds it up to whole units (6,000 bytes) and refuses
/// files of any other size. Delay levels 1–17 are 1 s, so
/// that delayed messages and retries (level 3 + reconsume times) come back within the test;
/// level 18 stays two hours, for a delayed message that waits through every broker's run.
/// The transaction check runs every 10 minutes: the unknown transaction must stay as it was
/// written while the test compares. The disk is shared and may be nearly full: forced
/// cleaning is off, so that it deletes none of the segments under test (expired files still
/// go, none are), and puts are refused only above 99% (ferromq's key; the Java broker's is a
/// system property in 4.9, [`JAVA_JVM`]).
const STORE_CONF: &str = "mappedFileSizeCommitLog=1048576\n\
    mappedFileSizeConsumeQueue=5990\n\
    maxHashSlotNum=4096\n\
    maxIndexNum=16384\n\
    messageDelayLevel=1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 2h\n\
    transactionCheckInterval=600000\n\
    cleanFileForciblyEnable=false\n\
    diskSpaceWarningLevelRatio=0.99";

/// The Java broker's JVM flags: its put refusal above 99% of the disk, as ferromq's.
const JAVA_JVM: &str = "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.99";

const JAVA_TIMEOUT: Duration = Duration::from_secs(240);

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn java_addr(server: &JavaServer) -> SocketAddr {
    ([127, 0, 0, 1], server.port).into()
}

/// A topic's config as both brokers answer GET_ALL_TOPIC_CONFIG (the 4.9 fields).
#[derive(Clone, Debug, PartialEq, Eq)]
struct TopicConf {
    read: i64,
    write: i64,
    perm: i64,
    filter: String,
    sys_flag: i64,
    order: bool,
}

/// The fields of a 4.9 `SubscriptionGroupConfig` (a 5.x-shaped answer has more).
const GROUP_FIELDS: [&str; 9] = [
    "groupName",
    "consumeEnable",
    "consumeFromMinEnable",
    "consumeBroadcastEnable",
    "retryQueueNums",
    "retryMaxTimes",
    "brokerId",
    "whichBrokerWhenConsumeSlowly",
    "notifyConsumerIdsChangedEnable",
];

/// One queue as a broker serves it: `records[i]` is the record at queue offset `min + i`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct QueueView {
    min: i64,
    max: i64,
    records: Vec<Vec<u8>>,
}

/// What a broker serves of a store.
#[derive(Clone, Debug)]
struct BrokerView {
    topics: BTreeMap<String, TopicConf>,
    /// Subscription groups: name → the 4.9 fields.
    groups: BTreeMap<String, BTreeMap<String, Value>>,
    queues: BTreeMap<(String, i32), QueueView>,
    /// `topic@group` → queue id → committed offset.
    offsets: BTreeMap<String, BTreeMap<i32, i64>>,
}

impl BrokerView {
    fn max(&self, topic: &str, queue: i32) -> i64 {
        self.queues
            .get(&(topic.to_owned(), queue))
            .map_or(0, |queue| queue.max)
    }

    fn offsets_of(&self, topic: &str, group: &str) -> BTreeMap<i32, i64> {
        self.offsets
            .get(&format!("{topic}@{group}"))
            .cloned()
            .unwrap_or_default()
    }
}

async fn request(client: &RemotingClient, request: RemotingCommand) -> RemotingCommand {
    client
        .request_timeout(request, Duration::from_secs(30))
        .await
        .expect("an answer within 30 s")
}

async fn all_topics(client: &RemotingClient) -> BTreeMap<String, TopicConf> {
    let response = request(
        client,
        RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG),
    )
    .await;
    assert_eq!(
        response.code, 0,
        "GET_ALL_TOPIC_CONFIG: {:?}",
        response.remark
    );
    let body = parse_lenient(&response.body).expect("topic configs are fastjson");
    let table = body["topicConfigTable"]
        .as_object()
        .expect("a topicConfigTable");
    table
        .iter()
        .map(|(name, config)| {
            let field = |key: &str| config[key].as_i64().unwrap_or(-1);
            let conf = TopicConf {
                read: field("readQueueNums"),
                write: field("writeQueueNums"),
                perm: field("perm"),
                filter: config["topicFilterType"].as_str().unwrap_or("?").to_owned(),
                sys_flag: field("topicSysFlag"),
                order: config["order"].as_bool().unwrap_or(false),
            };
            (name.clone(), conf)
        })
        .collect()
}

async fn all_groups(client: &RemotingClient) -> BTreeMap<String, BTreeMap<String, Value>> {
    let response = request(
        client,
        RemotingCommand::request(RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG),
    )
    .await;
    assert_eq!(
        response.code, 0,
        "GET_ALL_SUBSCRIPTIONGROUP_CONFIG: {:?}",
        response.remark
    );
    let body = parse_lenient(&response.body).expect("subscription groups are fastjson");
    let table = body["subscriptionGroupTable"]
        .as_object()
        .expect("a subscriptionGroupTable");
    table
        .iter()
        .map(|(name, config)| {
            let fields = GROUP_FIELDS
                .iter()
                .map(|field| ((*field).to_owned(), config[*field].clone()))
                .collect();
            (name.clone(), fields)
        })
        .collect()
}

async fn consumer_offsets(client: &RemotingClient) -> BTreeMap<String, BTreeMap<i32, i64>> {
    let response = request(
        client,
        RemotingCommand::request(RequestCode::GET_ALL_CONSUMER_OFFSET),
    )
    .await;
    assert_eq!(
        response.code, 0,
        "GET_ALL_CONSUMER_OFFSET: {:?}",
        response.remark
    );
    let body = parse_lenient(&response.body).expect("consumer offsets are fastjson");
    let mut table = BTreeMap::new();
    for (key, queues) in body["offsetTable"].as_object().expect("an offsetTable") {
        let queues: BTreeMap<i32, i64> = queues
            .as_object()
            .expect("queue offsets")
            .iter()
            .map(|(queue, offset)| (queue.parse().unwrap(), offset.as_i64().unwrap()))
            .collect();
        table.insert(key.clone(), queues);
    }
    table
}

async fn query_offset(client: &RemotingClient, topic: &str, group: &str, queue: i32) -> i64 {
    let response = request(
        client,
        RemotingCommand::request_with_header(
            RequestCode::QUERY_CONSUMER_OFFSET,
            &QueryConsumerOffsetRequestHeader {
                consumer_group: group.into(),
                topic: topic.into(),
                queue_id: queue,
                set_zero_if_not_found: Some(false),
            },
        ),
    )
    .await;
    assert_eq!(
        response.code, 0,
        "QUERY_CONSUMER_OFFSET {topic}@{group}/{queue}: {:?}",
        response.remark
    );
    let header: QueryConsumerOffsetResponseHeader = response.decode_header().unwrap();
    header.offset.expect("an offset")
}

async fn update_offset(client: &RemotingClient, topic: &str, group: &str, queue: i32, to: i64) {
    let response = request(
        client,
        RemotingCommand::request_with_header(
            RequestCode::UPDATE_CONSUMER_OFFSET,
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: group.into(),
                topic: topic.into(),
                queue_id: queue,
                commit_offset: to,
            },
        ),
    )
    .await;
    assert_eq!(
        response.code, 0,
        "UPDATE_CONSUMER_OFFSET: {:?}",
        response.remark
    );
}

async fn queue_offset(client: &RemotingClient, code: RequestCode, topic: &str, queue: i32) -> i64 {
    let command = if code == RequestCode::GET_MIN_OFFSET {
        RemotingCommand::request_with_header(
            code,
            &GetMinOffsetRequestHeader {
                topic: topic.into(),
                queue_id: queue,
            },
        )
    } else {
        RemotingCommand::request_with_header(
            code,
            &GetMaxOffsetRequestHeader {
                topic: topic.into(),
                queue_id: queue,
                committed: None,
            },
        )
    };
    let response = request(client, command).await;
    assert_eq!(response.code, 0, "{topic}/{queue}: {:?}", response.remark);
    let header: OffsetResponseHeader = response.decode_header().unwrap();
    header.offset
}

/// Every record of `topic`/`queue` from `min` to `max`, pulled 32 at a time; each must carry
/// its own topic, queue and queue offset.
async fn pull_queue(
    client: &RemotingClient,
    topic: &str,
    queue: i32,
    min: i64,
    max: i64,
) -> Vec<Vec<u8>> {
    let mut records = Vec::new();
    let mut offset = min;
    let at = |offset: i64| format!("{topic}/{queue}@{offset}");
    while offset < max {
        let response = request(
            client,
            RemotingCommand::request_with_header(
                RequestCode::PULL_MESSAGE,
                &pull_header("StoreProbe", topic, queue, offset),
            ),
        )
        .await;
        assert_eq!(
            response.code,
            0,
            "pull {}: {:?}",
            at(offset),
            response.remark
        );
        let header: PullMessageResponseHeader = response.decode_header().unwrap();
        let mut from = 0;
        let before = offset;
        while from < response.body.len() {
            let Ok(Record::Message { record, size }) = decode_record(&response.body[from..], true)
            else {
                panic!("pull {}: not a record at byte {from}", at(offset));
            };
            assert_eq!(
                (record.topic, record.queue_id, record.queue_offset),
                (topic, queue, offset),
                "the record pulled at {}",
                at(offset)
            );
            records.push(response.body[from..from + size].to_vec());
            from += size;
            offset += 1;
        }
        assert!(offset > before, "pull {}: an empty FOUND", at(before));
        assert_eq!(
            header.next_begin_offset,
            offset,
            "next offset after {}",
            at(before)
        );
    }
    assert_eq!(offset, max, "{topic}/{queue}: pulled past the max offset");
    records
}

/// What the broker at `addr` serves: all its topic configs, every queue of `topics`, and
/// every consumer offset (each checked against QUERY_CONSUMER_OFFSET).
async fn view(addr: SocketAddr, topics: &BTreeSet<String>) -> BrokerView {
    let client = connect(addr, SerializeType::Json).await;
    let all = all_topics(&client).await;
    let mut queues = BTreeMap::new();
    for topic in topics {
        let conf = all
            .get(topic)
            .unwrap_or_else(|| panic!("{addr} has no topic {topic}"));
        for queue in 0..i32::try_from(conf.read.max(conf.write)).unwrap() {
            let min = queue_offset(&client, RequestCode::GET_MIN_OFFSET, topic, queue).await;
            let max = queue_offset(&client, RequestCode::GET_MAX_OFFSET, topic, queue).await;
            let records = pull_queue(&client, topic, queue, min, max).await;
            queues.insert((topic.clone(), queue), QueueView { min, max, records });
        }
    }
    let offsets = consumer_offsets(&client).await;
    for (key, table) in &offsets {
        let (topic, group) = key.split_once('@').expect("topic@group");
        for (queue, offset) in table {
            assert_eq!(
                query_offset(&client, topic, group, *queue).await,
                *offset,
                "{addr}: QUERY_CONSUMER_OFFSET {key}/{queue} and the table"
            );
        }
    }
    BrokerView {
        topics: all,
        groups: all_groups(&client).await,
        queues,
        offsets,
    }
}

/// A record's place, for failure messages.
fn describe(record: &[u8]) -> String {
    match decode_record(record, false) {
        Ok(Record::Message { record, size }) => format!(
            "{}/{}@{} physical {} size {size}",
            record.topic, record.queue_id, record.queue_offset, record.physical_offset
        ),
        _ => "not a record".to_owned(),
    }
}

/// Differences between two views of the same queues: min, max and every record.
fn queue_differences(
    expected: &BTreeMap<(String, i32), QueueView>,
    actual: &BTreeMap<(String, i32), QueueView>,
) -> Vec<String> {
    let mut wrong = Vec::new();
    for ((topic, queue), want) in expected {
        let Some(got) = actual.get(&(topic.clone(), *queue)) else {
            wrong.push(format!("{topic}/{queue}: not served"));
            continue;
        };
        if (want.min, want.max) != (got.min, got.max) {
            wrong.push(format!(
                "{topic}/{queue}: min/max {}/{} expected {}/{}",
                got.min, got.max, want.min, want.max
            ));
        }
        for (index, (a, b)) in want.records.iter().zip(&got.records).enumerate() {
            if a != b {
                wrong.push(format!(
                    "{topic}/{queue}@{}: bytes differ ({} vs expected {})",
                    want.min + i64::try_from(index).unwrap(),
                    describe(b),
                    describe(a)
                ));
                break;
            }
        }
    }
    wrong
}

fn assert_same_queues(what: &str, expected: &BrokerView, actual: &BrokerView) {
    let records: usize = expected.queues.values().map(|q| q.records.len()).sum();
    let bytes: usize = expected
        .queues
        .values()
        .flat_map(|q| &q.records)
        .map(Vec::len)
        .sum();
    eprintln!(
        "{what}: comparing {} queues, {records} records, {bytes} bytes",
        expected.queues.len()
    );
    let wrong = queue_differences(&expected.queues, &actual.queues);
    assert!(
        wrong.is_empty(),
        "{what}: {} of {} queues differ:\n{}",
        wrong.len(),
        expected.queues.len(),
        wrong[..wrong.len().min(20)].join("\n")
    );
}

/// Every topic and subscription group of `expected` is configured alike in `actual`.
fn assert_configs_kept(what: &str, expected: &BrokerView, actual: &BrokerView) {
    let mut wrong: Vec<String> = expected
        .topics
        .iter()
        .filter(|(name, conf)| actual.topics.get(*name) != Some(conf))
        .map(|(name, conf)| {
            format!(
                "topic {name}: {:?}, expected {conf:?}",
                actual.topics.get(name)
            )
        })
        .collect();
    wrong.extend(
        expected
            .groups
            .iter()
            .filter(|(name, conf)| actual.groups.get(*name) != Some(conf))
            .map(|(name, conf)| {
                format!(
                    "group {name}: {:?}, expected {conf:?}",
                    actual.groups.get(name)
                )
            }),
    );
    assert!(
        wrong.is_empty(),
        "{what}: configs differ:\n{}",
        wrong.join("\n")
    );
}

/// Keys looked up by QUERY_MESSAGE: `(topic, key)` → physical offsets of the records found.
type KeyLookups = BTreeMap<(String, String), BTreeSet<i64>>;

/// A sample of the keys of `topics` in `view` (every `KEYS` token and `UNIQ_KEY` of every
/// fifth record), each with the physical offset of the record it came from.
fn sample_keys(view: &BrokerView, topics: &[&str]) -> Vec<(String, String, i64)> {
    let mut keys = Vec::new();
    for ((topic, _), queue) in &view.queues {
        if !topics.contains(&topic.as_str()) {
            continue;
        }
        for bytes in queue.records.iter().step_by(5) {
            let Ok(Record::Message { record, .. }) = decode_record(bytes, false) else {
                panic!("{topic}: not a record");
            };
            for (name, value) in parse_properties(record.properties) {
                let tokens: Vec<&str> = match name.as_str() {
                    "KEYS" => value.split(' ').filter(|t| !t.is_empty()).collect(),
                    "UNIQ_KEY" => vec![value.as_str()],
                    _ => continue,
                };
                for token in tokens {
                    keys.push((topic.clone(), token.to_owned(), record.physical_offset));
                }
            }
        }
    }
    keys
}

/// QUERY_MESSAGE for each key (all time, 32 at most); each must find its own record.
async fn look_up_keys(addr: SocketAddr, keys: &[(String, String, i64)]) -> KeyLookups {
    let client = connect(addr, SerializeType::Json).await;
    let mut found = KeyLookups::new();
    for (topic, key, physical) in keys {
        let response = request(
            &client,
            RemotingCommand::request_with_header(
                RequestCode::QUERY_MESSAGE,
                &QueryMessageRequestHeader {
                    topic: topic.clone(),
                    key: key.clone(),
                    max_num: 32,
                    begin_timestamp: 0,
                    end_timestamp: i64::MAX,
                },
            ),
        )
        .await;
        let mut offsets = BTreeSet::new();
        let mut from = 0;
        while from < response.body.len() {
            let Ok(Record::Message { record, size }) = decode_record(&response.body[from..], true)
            else {
                panic!("{addr}: QUERY_MESSAGE {topic}#{key}: not records");
            };
            offsets.insert(record.physical_offset);
            from += size;
        }
        assert!(
            offsets.contains(physical),
            "{addr}: QUERY_MESSAGE {topic}#{key} (code {}) found {offsets:?}, not {physical}",
            response.code
        );
        found.insert((topic.clone(), key.clone()), offsets);
    }
    found
}

/// Polls the broker's consumer offsets until `done` holds for them (30 s at most).
async fn wait_offsets(
    addr: SocketAddr,
    what: &str,
    done: impl Fn(&BTreeMap<String, BTreeMap<i32, i64>>) -> bool,
) {
    let client = connect(addr, SerializeType::Json).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let table = consumer_offsets(&client).await;
        if done(&table) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: consumer offsets {table:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Max offsets of every queue of `topic` the broker has.
async fn max_offsets(addr: SocketAddr, topic: &str) -> BTreeMap<i32, i64> {
    let client = connect(addr, SerializeType::Json).await;
    let conf = all_topics(&client).await[topic].clone();
    let mut maxes = BTreeMap::new();
    for queue in 0..i32::try_from(conf.read.max(conf.write)).unwrap() {
        maxes.insert(
            queue,
            queue_offset(&client, RequestCode::GET_MAX_OFFSET, topic, queue).await,
        );
    }
    maxes
}

/// Whether `topic@group` has committed every queue of `maxes` that holds messages to its max.
fn consumed_all(
    table: &BTreeMap<String, BTreeMap<i32, i64>>,
    topic: &str,
    group: &str,
    maxes: &BTreeMap<i32, i64>,
) -> bool {
    let committed = table.get(&format!("{topic}@{group}"));
    maxes
        .iter()
        .filter(|(_, max)| **max > 0)
        .all(|(queue, max)| committed.and_then(|c| c.get(queue)) == Some(max))
}

fn committed_total(table: &BTreeMap<String, BTreeMap<i32, i64>>, key: &str) -> i64 {
    table.get(key).map_or(0, |queues| queues.values().sum())
}

/// Copies a store directory (after its broker has exited).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn java_store_log(server: &JavaServer) -> String {
    std::fs::read_to_string(server.home.join("logs/rocketmqlogs/store.log")).unwrap_or_default()
}

/// `delayOffset.json` of a stopped store: level → offset.
fn delay_offsets(store: &Path) -> BTreeMap<String, i64> {
    let bytes = std::fs::read(store.join("config/delayOffset.json")).unwrap();
    let json = parse_lenient(&bytes).expect("delayOffset.json is fastjson");
    json["offsetTable"]
        .as_object()
        .expect("an offsetTable")
        .iter()
        .map(|(level, offset)| (level.clone(), offset.as_i64().unwrap()))
        .collect()
}

/// Topic `StoreCustom` (6 read and 4 write queues, read-only, multi-tag, ordered) and group
/// `StoreCustomGroup` (no broadcast, 2 retry queues, 5 retries, consumption from the max).
async fn create_custom_configs(broker: SocketAddr) {
    let client = connect(broker, SerializeType::Json).await;
    let mut header = CreateTopicRequestHeader::read_write("StoreCustom", 6);
    header.write_queue_nums = 4;
    header.perm = 4;
    header.topic_filter_type = "MULTI_TAG".into();
    header.order = true;
    let response = request(
        &client,
        RemotingCommand::request_with_header(RequestCode::UPDATE_AND_CREATE_TOPIC, &header),
    )
    .await;
    assert_eq!(
        response.code, 0,
        "UPDATE_AND_CREATE_TOPIC: {:?}",
        response.remark
    );
    let mut group = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP);
    group.body = br#"{"groupName":"StoreCustomGroup","consumeEnable":true,
        "consumeFromMinEnable":false,"consumeBroadcastEnable":false,"retryQueueNums":2,
        "retryMaxTimes":5,"brokerId":0,"whichBrokerWhenConsumeSlowly":1,
        "notifyConsumerIdsChangedEnable":false}"#
        .to_vec();
    let response = request(&client, group).await;
    assert_eq!(
        response.code, 0,
        "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: {:?}",
        response.remark
    );
}

/// Sends one message and returns its queue offset.
async fn send_one(
    client: &RemotingClient,
    topic: &str,
    queue: i32,
    body: &[u8],
    properties: &str,
) -> i64 {
    let response = request(client, send_request(topic, queue, body, properties)).await;
    assert_eq!(
        response.code, 0,
        "send to {topic}/{queue}: {:?}",
        response.remark
    );
    let header: SendMessageResponseHeader = response.decode_header().unwrap();
    assert_eq!(header.queue_id, queue);
    header.queue_offset
}

/// The queues of the workload view that only the Java run may have grown: new sends to
/// StoreA, StoreJ, StoreL and StoreD (delayed, through SCHEDULE_TOPIC_XXXX queue 0).
fn grows_in_java(topic: &str, queue: i32) -> bool {
    matches!(topic, "StoreA" | "StoreJ" | "StoreL" | "StoreD")
        || (topic == "SCHEDULE_TOPIC_XXXX" && queue == 0)
}

#[test]
fn store_ferromq_wrote_serves_the_same_in_java_and_again_in_ferromq() {
    let dir = TempDir::on_disk("java-store-clean");
    let rt = runtime();

    // 1. The workload, into ferromq, with a topic and a group of other settings than the
    // defaults, made by admin requests.
    let server = Standalone::start(STORE_CONF);
    rt.block_on(create_custom_configs(server.broker));
    run_java(
        "StoreTraffic",
        &[&server.namesrv_addr(), "write"],
        Serialize::Json,
        JAVA_TIMEOUT,
    )
    .assert_passed("StoreTraffic write");
    let broker = server.broker;
    rt.block_on(async {
        let client = connect(broker, SerializeType::Json).await;
        for queue in 0..8 {
            update_offset(
                &client,
                "StoreB",
                "StoreManualGroup",
                queue,
                i64::from(queue),
            )
            .await;
        }
        let (d, r, retry) = (
            max_offsets(broker, "StoreD").await,
            max_offsets(broker, "StoreR").await,
            max_offsets(broker, "%RETRY%StoreRetryGroup").await,
        );
        wait_offsets(broker, "the groups' commits at shutdown", |table| {
            committed_total(table, "StoreA@StorePartGroup") == 301
                && consumed_all(table, "StoreD", "StoreDelayGroup", &d)
                && consumed_all(table, "StoreR", "StoreRetryGroup", &r)
                && consumed_all(table, "%RETRY%StoreRetryGroup", "StoreRetryGroup", &retry)
        })
        .await;
    });
    let workload: BTreeSet<String> = rt
        .block_on(async { all_topics(&connect(broker, SerializeType::Json).await).await })
        .into_keys()
        .collect();
    for topic in [
        "StoreA",
        "StoreB",
        "StoreD",
        "StoreL",
        "StoreR",
        "StoreT",
        "%RETRY%StoreRetryGroup",
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    ] {
        assert!(
            workload.contains(topic),
            "ferromq has no {topic}: {workload:?}"
        );
    }
    let ours = rt.block_on(view(broker, &workload));
    assert_eq!(
        ours.topics["StoreCustom"],
        TopicConf {
            read: 6,
            write: 4,
            perm: 4,
            filter: "MULTI_TAG".into(),
            sys_flag: 0,
            order: true,
        }
    );
    assert_eq!(ours.groups["StoreCustomGroup"]["retryMaxTimes"], 5);
    let keys = sample_keys(&ours, &["StoreA", "StoreB", "StoreL", "StoreR"]);
    let our_keys = rt.block_on(look_up_keys(broker, &keys));
    assert_eq!(ours.queues[&("StoreB".to_owned(), 7)].min, 0);
    assert_eq!(
        ours.max("RMQ_SYS_TRANS_HALF_TOPIC", 0),
        3,
        "three half messages"
    );
    assert_eq!(ours.max("RMQ_SYS_TRANS_OP_HALF_TOPIC", 0), 2, "two ended");
    assert_eq!(ours.max("SCHEDULE_TOPIC_XXXX", 17), 2, "two wait two hours");
    let (_stopped, data) = server.stop();
    let store = data.join("store");
    assert!(!store.join("abort").exists(), "a clean stop removes abort");
    let ours_delay = delay_offsets(&store);
    let segments = std::fs::read_dir(store.join("commitlog")).unwrap().count();
    assert!(segments >= 3, "the CommitLog rolled: {segments} segments");
    let java_store = dir.path().join("java/store");

    // 2. The Java broker over a copy.
    copy_tree(&store, &java_store);
    let namesrv = JavaServer::namesrv(dir.path());
    let java =
        JavaServer::broker_with_jvm(dir.path(), namesrv.port, &java_store, STORE_CONF, JAVA_JVM);
    assert!(
        java_store_log(&java).contains("last shutdown normally"),
        "{}",
        java_store_log(&java)
    );
    let theirs = rt.block_on(view(java_addr(&java), &workload));
    assert_configs_kept("Java over ferromq's store", &ours, &theirs);
    assert_same_queues("Java over ferromq's store", &ours, &theirs);
    assert_eq!(theirs.offsets, ours.offsets, "consumer offsets in Java");
    // The Java broker finds every key through ferromq's IndexFiles, as ferromq does.
    assert_eq!(
        rt.block_on(look_up_keys(java_addr(&java), &keys)),
        our_keys,
        "QUERY_MESSAGE in Java"
    );

    // The Java client resumes there and adds to it.
    run_java(
        "StoreTraffic",
        &[&format!("127.0.0.1:{}", namesrv.port), "java"],
        Serialize::Json,
        JAVA_TIMEOUT,
    )
    .assert_passed("StoreTraffic java");
    let java_broker = java_addr(&java);
    rt.block_on(async {
        let d = max_offsets(java_broker, "StoreD").await;
        wait_offsets(java_broker, "the Java run's commits", |table| {
            committed_total(table, "StoreA@StorePartGroup") == 341
                && consumed_all(table, "StoreD", "StoreDelayGroup", &d)
        })
        .await;
        let client = connect(java_broker, SerializeType::Json).await;
        update_offset(&client, "StoreB", "StoreManualGroup", 0, 7).await;
    });
    let mut grown = workload.clone();
    grown.insert("StoreJ".to_owned());
    let java_after = rt.block_on(view(java_broker, &grown));
    let later_keys = sample_keys(&java_after, &["StoreA", "StoreB", "StoreJ"]);
    let java_keys = rt.block_on(look_up_keys(java_broker, &later_keys));
    // The Java broker only appended: every record ferromq wrote is where it was.
    let kept: BTreeMap<_, _> = ours
        .queues
        .iter()
        .map(|(key, queue)| {
            let mut later = java_after.queues[key].clone();
            if grows_in_java(&key.0, key.1) {
                later.records.truncate(queue.records.len());
                later.max = queue.max;
            }
            (key.clone(), later)
        })
        .collect();
    let wrong = queue_differences(&ours.queues, &kept);
    assert!(wrong.is_empty(), "the Java run changed: {wrong:#?}");
    assert_eq!(
        java_after.queues.values().map(|q| q.max).sum::<i64>()
            - ours.queues.values().map(|q| q.max).sum::<i64>(),
        20 + 50 + 1 + 1 + 1,
        "the Java run added StoreA 340..359, StoreJ 0..49, StoreL 1 and StoreD 12 (and its \
         schedule record)"
    );
    assert_eq!(
        java_after.offsets_of("StoreB", "StoreManualGroup")[&0],
        7,
        "the offset committed in Java"
    );
    java.stop();
    let java_segments = std::fs::read_dir(java_store.join("commitlog"))
        .unwrap()
        .count();
    assert!(
        java_segments > segments,
        "the Java broker rolled the CommitLog on (its 700,000-byte StoreL 1)"
    );
    let java_delay = delay_offsets(&java_store);
    let mut want_delay = ours_delay.clone();
    *want_delay.get_mut("1").expect("level 1 has an offset") += 1;
    assert_eq!(
        java_delay, want_delay,
        "the Java broker kept the delay offsets and moved level 1"
    );

    // 3. ferromq over the store the Java broker left.
    let back_dir = TempDir::on_disk("java-store-back");
    let back_data = back_dir.path().join("data");
    std::fs::create_dir_all(&back_data).unwrap();
    std::fs::rename(&java_store, back_data.join("store")).unwrap();
    let back = Standalone::start_in(back_dir, back_data, STORE_CONF);
    let again = rt.block_on(view(back.broker, &grown));
    assert_configs_kept("ferromq over the Java broker's store", &java_after, &again);
    assert_same_queues("ferromq over the Java broker's store", &java_after, &again);
    assert_eq!(
        again.offsets, java_after.offsets,
        "consumer offsets back in ferromq"
    );
    // ferromq finds every key through the IndexFiles both brokers wrote.
    assert_eq!(
        rt.block_on(look_up_keys(back.broker, &later_keys)),
        java_keys,
        "QUERY_MESSAGE back in ferromq"
    );
    // It goes on from there: the next put lands at the Java broker's max offset, and a
    // delayed message is delivered after the Java-delivered ones, not with them again.
    let back_broker = back.broker;
    rt.block_on(async {
        let client = connect(back_broker, SerializeType::Json).await;
        let next = send_one(&client, "StoreJ", 0, b"after Java", "TAGS\u{1}TagJ").await;
        assert_eq!(next, java_after.max("StoreJ", 0));
        let queue = 2;
        let before = java_after.max("StoreD", queue);
        let delayed = properties_to_string([("TAGS", "TagD"), ("DELAY", "1")]);
        send_one(&client, "StoreD", queue, b"delayed after Java", &delayed).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        while queue_offset(&client, RequestCode::GET_MAX_OFFSET, "StoreD", queue).await == before {
            assert!(
                Instant::now() < deadline,
                "the delayed message was not delivered"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let records = pull_queue(&client, "StoreD", queue, before, before + 1).await;
        let Ok(Record::Message { record, .. }) = decode_record(&records[0], true) else {
            panic!("not a record");
        };
        assert_eq!(record.body, b"delayed after Java");
        for (queue, max) in &max_offsets(back_broker, "StoreD").await {
            let want = java_after.max("StoreD", *queue) + i64::from(*queue == 2);
            assert_eq!(*max, want, "StoreD/{queue}: nothing delivered twice");
        }
    });
    drop(namesrv);
}

/// Each broker refuses to start on a store the other runs on: ferromq's lock on the `lock`
/// file is the record lock Java takes, so a Java broker started over a running ferromq's
/// store exits ("Lock failed,MQ already started") instead of writing into it, and the other
/// way round.
#[test]
fn store_one_broker_runs_on_is_refused_by_the_other() {
    let dir = TempDir::on_disk("java-store-lock");
    let namesrv = JavaServer::namesrv(dir.path());
    let server = Standalone::start(STORE_CONF);
    let store = server.data.join("store");
    let refused =
        JavaServer::try_broker_with_jvm(dir.path(), namesrv.port, &store, STORE_CONF, JAVA_JVM);
    let text = match refused {
        Ok(mut java) => {
            common::kill(&mut java.child);
            panic!("the Java broker started on the store ferromq runs on");
        }
        Err(text) => text,
    };
    assert!(text.contains("Lock failed,MQ already started"), "{text}");
    let (_kept, data) = server.stop();
    let store = data.join("store");

    let java = JavaServer::broker_with_jvm(dir.path(), namesrv.port, &store, STORE_CONF, JAVA_JVM);
    let conf = dir.path().join("ferromq.conf");
    std::fs::write(&conf, format!("{STORE_CONF}\n")).unwrap();
    let mut ferromq = std::process::Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .args([
            "broker",
            "-c",
            conf.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .arg("--store")
        .arg(&store)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let status = common::wait_exit(&mut ferromq, Duration::from_secs(30));
    if status.is_none() {
        common::kill(&mut ferromq);
    }
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut ferromq.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(
        status.is_some_and(|status| !status.success()),
        "ferromq started on the store the Java broker runs on: {status:?}\n{stderr}"
    );
    assert!(stderr.contains("locked by another process"), "{stderr}");
    let mut java = java;
    common::kill(&mut java.child);
    drop(namesrv);
}

/// A small deterministic generator (splitmix64), so that a failing round can be replayed
/// from the seed it prints.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// An acknowledged send: where the broker said it stored it, and what.
#[derive(Clone, Debug)]
struct Acked {
    topic: String,
    queue: i32,
    offset: i64,
    body_sha: [u8; 32],
}

/// The topics of the crash load: (name, queues sent to).
const CRASH_TOPICS: [(&str, i32); 2] = [("CrashA", 4), ("CrashB", 8)];

/// Message `n` of a crash round: a body of 100 B to 4 KiB (one in fifty 64 KiB) of
/// pseudo-random bytes, with tags, keys and a user property.
fn crash_message(rng: &mut Rng, n: u64) -> (String, i32, Vec<u8>, String) {
    let (topic, queues) = CRASH_TOPICS[usize::try_from(n % 2).unwrap()];
    let queue = i32::try_from(rng.below(u64::try_from(queues).unwrap())).unwrap();
    let len = if rng.below(50) == 0 {
        64 * 1024
    } else {
        100 + usize::try_from(rng.below(4 * 1024)).unwrap()
    };
    let mut body = Vec::with_capacity(len + 8);
    while body.len() < len {
        body.extend_from_slice(&rng.next().to_le_bytes());
    }
    body.truncate(len);
    let keys = format!("crash-{n} common-{}", n % 7);
    let uniq = format!("{n:032X}");
    let seq = n.to_string();
    let properties = properties_to_string([
        (
            "TAGS",
            ["TagA", "TagB", "TagC"][usize::try_from(n % 3).unwrap()],
        ),
        ("KEYS", keys.as_str()),
        ("UNIQ_KEY", uniq.as_str()),
        ("seq", seq.as_str()),
    ]);
    (topic.to_owned(), queue, body, properties)
}

/// When a crash round kills ferromq: once `acked` sends are acknowledged and the load has
/// run for `elapsed`, and then, if `at_roll`, the moment the CommitLog directory changes
/// (ferromq is making the next segment: a kill in the middle must leave nothing the Java
/// broker refuses to load).
#[derive(Clone, Copy, Debug)]
struct KillAt {
    acked: usize,
    elapsed: Duration,
    at_roll: bool,
}

/// Pipelined sends to the crash topics until `kill` says, then SIGKILL to `child` while
/// sends are still in flight; returns every acknowledged send.
fn load_until_killed(
    broker: SocketAddr,
    child: &mut Child,
    store: &Path,
    kill: KillAt,
    seed: u64,
) -> Vec<Acked> {
    const CONNECTIONS: usize = 4;
    const IN_FLIGHT: usize = 8;
    let started = Instant::now();
    let acked: RefCell<Vec<Acked>> = RefCell::new(Vec::new());
    let count = AtomicUsize::new(0);
    let killed = AtomicBool::new(false);
    let next = RefCell::new(0u64);
    let rng = RefCell::new(Rng(seed));
    // Set when the load ends, whatever way: a killer still waiting then gives up.
    let load_over = AtomicBool::new(false);
    // Set by the killer when it is done, killed or not: the senders then stop.
    let stop_sending = AtomicBool::new(false);
    struct SetOnDrop<'a>(&'a AtomicBool);
    impl Drop for SetOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }
    std::thread::scope(|scope| {
        // The killer polls from a thread of its own, so that it sees the CommitLog directory
        // change within microseconds.
        let (count, killed, load_over, stop) = (&count, &killed, &load_over, &stop_sending);
        let killer = scope.spawn(move || {
            let deadline = started + kill.elapsed + Duration::from_secs(120);
            let segments = || -> BTreeSet<std::ffi::OsString> {
                std::fs::read_dir(store.join("commitlog"))
                    .map(|dir| dir.filter_map(|e| e.ok().map(|e| e.file_name())).collect())
                    .unwrap_or_default()
            };
            let waiting = || !load_over.load(Ordering::Acquire) && Instant::now() < deadline;
            // Every name the directory shows meanwhile: a kill at that instant would leave it.
            let mut seen = BTreeSet::new();
            let mut look = || {
                let names = segments();
                seen.extend(names.iter().cloned());
                names
            };
            while (count.load(Ordering::Acquire) < kill.acked || started.elapsed() < kill.elapsed)
                && waiting()
            {
                look();
                std::thread::sleep(Duration::from_micros(200));
            }
            if kill.at_roll {
                let before = look();
                while look() == before && waiting() {
                    std::thread::yield_now();
                }
            }
            if waiting() {
                killed.store(true, Ordering::Release);
                child.kill().unwrap();
                child.wait().unwrap();
            }
            stop.store(true, Ordering::Release);
            seen
        });
        let _over = SetOnDrop(load_over);
        runtime().block_on(async {
            let mut clients = Vec::new();
            for _ in 0..CONNECTIONS {
                clients.push(connect(broker, SerializeType::Json).await);
            }
            let worker = |client: &RemotingClient| {
                let client = client.clone();
                let (acked, next, rng) = (&acked, &next, &rng);
                async move {
                    // Bounded: the killer gives up, and kills, within its deadline.
                    while !stop.load(Ordering::Acquire) {
                        let n = {
                            let mut next = next.borrow_mut();
                            *next += 1;
                            *next
                        };
                        let (topic, queue, body, properties) =
                            crash_message(&mut rng.borrow_mut(), n);
                        let sha: [u8; 32] = Sha256::digest(&body).into();
                        let request = send_request(&topic, queue, &body, &properties);
                        let response = match client
                            .request_timeout(request, Duration::from_secs(30))
                            .await
                        {
                            Ok(response) => response,
                            Err(error) => {
                                assert!(
                                    killed.load(Ordering::Acquire),
                                    "send {n} failed before the kill: {error}"
                                );
                                return;
                            }
                        };
                        assert_eq!(response.code, 0, "send {n}: {:?}", response.remark);
                        let header: SendMessageResponseHeader = response.decode_header().unwrap();
                        assert_eq!(header.queue_id, queue);
                        acked.borrow_mut().push(Acked {
                            topic,
                            queue,
                            offset: header.queue_offset,
                            body_sha: sha,
                        });
                        count.fetch_add(1, Ordering::Release);
                    }
                }
            };
            let workers: Vec<_> = clients
                .iter()
                .flat_map(|client| (0..IN_FLIGHT).map(|_| worker(client)).collect::<Vec<_>>())
                .collect();
            futures::future::join_all(workers).await;
        });
        drop(_over);
        let seen = killer.join().expect("the killer thread");
        let strays: Vec<_> = seen
            .iter()
            .filter_map(|name| name.to_str())
            .filter(|name| name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit()))
            .collect();
        assert!(
            strays.is_empty(),
            "the CommitLog directory showed {strays:?} while ferromq ran: a kill -9 then \
             leaves a file the Java broker refuses to load"
        );
    });
    assert!(
        killed.load(Ordering::Acquire),
        "the load ended at {} acknowledgements without the kill ({kill:?})",
        count.load(Ordering::Acquire)
    );
    acked.into_inner()
}

/// Every queue of the crash topics as the broker at `addr` serves it.
fn crash_view(addr: SocketAddr) -> BrokerView {
    let topics = CRASH_TOPICS
        .iter()
        .map(|(name, _)| (*name).to_owned())
        .collect();
    runtime().block_on(view(addr, &topics))
}

/// Files in the CommitLog and ConsumeQueue directories that are not segments named by their
/// 20-digit start offset: the Java broker refuses to load a store with any.
fn not_segments(store: &Path) -> Vec<PathBuf> {
    let list = |dir: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(dir)
            .map(|entries| entries.map(|entry| entry.unwrap().path()).collect())
            .unwrap_or_default()
    };
    let mut dirs = vec![store.join("commitlog")];
    for topic in list(&store.join("consumequeue")) {
        dirs.extend(list(&topic).into_iter().filter(|queue| {
            queue
                .file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| name.parse::<i32>().is_ok())
        }));
    }
    dirs.iter()
        .flat_map(|dir| list(dir))
        .filter(|file| {
            let name = file
                .file_name()
                .and_then(|name| name.to_str())
                .unwrap_or("");
            name.len() != 20 || !name.bytes().all(|b| b.is_ascii_digit())
        })
        .collect()
}

/// Each acknowledged send is served at its queue offset with the body it had.
fn assert_acked_served(what: &str, served: &BrokerView, acked: &[Acked]) {
    for ack in acked {
        let at = format!("{what}: {}/{}@{}", ack.topic, ack.queue, ack.offset);
        let queue = &served.queues[&(ack.topic.clone(), ack.queue)];
        let index = usize::try_from(ack.offset - queue.min).expect("not below the min");
        let record = queue
            .records
            .get(index)
            .unwrap_or_else(|| panic!("{at}: not served"));
        let Ok(Record::Message { record, .. }) = decode_record(record, true) else {
            panic!("{at}: not a record");
        };
        let sha: [u8; 32] = Sha256::digest(record.body).into();
        assert_eq!(sha, ack.body_sha, "{at}: body");
    }
}

/// What older ferromq versions could leave at a kill -9: unfinished segments made under a
/// temporary name (whole-sized `<segment>.tmp` files far ahead of the data, in the CommitLog
/// and in a ConsumeQueue directory), and a ConsumeQueue file longer than its size (its last
/// block written padded, not yet cut back).
fn plant_unfinished_segments(store: &Path) {
    let planted: [(PathBuf, u64, usize); 2] = [
        (store.join("commitlog"), 999 << 20, 1_048_576),
        (store.join("consumequeue/CrashA/0"), 999 * 6000, 6000),
    ];
    for (dir, start, size) in planted {
        std::fs::write(dir.join(format!("{start:020}.tmp")), vec![0; size]).unwrap();
    }
    let long = store.join("consumequeue/CrashB/0/00000000000000000000");
    let file = std::fs::OpenOptions::new().write(true).open(&long).unwrap();
    assert_eq!(file.metadata().unwrap().len(), 6000);
    file.set_len(6144).unwrap();
}

/// After its recovery, `recovered` takes 200 more sends, each at the next offset of its
/// queue, and is stopped cleanly; the Java broker over that store must serve what it served.
fn continue_then_java(
    recovered: Standalone,
    before: &BrokerView,
    conf: &str,
    dir: &Path,
    namesrv_port: u16,
    seed: u64,
) {
    let broker = recovered.broker;
    runtime().block_on(async {
        let client = connect(broker, SerializeType::Json).await;
        let mut next: BTreeMap<(String, i32), i64> = before
            .queues
            .iter()
            .map(|(key, queue)| (key.clone(), queue.max))
            .collect();
        let mut rng = Rng(seed);
        for n in 0..200 {
            let (topic, queue, body, properties) = crash_message(&mut rng, 1_000_000 + n);
            let offset = send_one(&client, &topic, queue, &body, &properties).await;
            let expected = next.get_mut(&(topic.clone(), queue)).unwrap();
            assert_eq!(offset, *expected, "{topic}/{queue} after the recovery");
            *expected += 1;
        }
    });
    let after = crash_view(broker);
    let (_dir, data) = recovered.stop();
    let store = data.join("store");
    let strays = not_segments(&store);
    assert!(
        strays.is_empty(),
        "left after ferromq's recovery: {strays:?}"
    );
    let long = store.join("consumequeue/CrashB/0/00000000000000000000");
    assert_eq!(
        std::fs::metadata(long).unwrap().len(),
        6000,
        "cut to its size"
    );
    let mut java = JavaServer::broker_with_jvm(dir, namesrv_port, &store, conf, JAVA_JVM);
    let log = java_store_log(&java);
    assert!(log.contains("last shutdown normally"), "{log}");
    let theirs = crash_view(java_addr(&java));
    assert_same_queues("Java after ferromq's recovery and more", &after, &theirs);
    common::kill(&mut java.child);
}

#[test]
fn store_ferromq_killed_under_load_serves_the_same_in_java_after_recovery() {
    let dir = TempDir::on_disk("java-store-crash");
    let namesrv = JavaServer::namesrv(dir.path());
    let seed = std::env::var("FERROMQ_STORE_SEED").map_or_else(
        |_| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        },
        |text| text.parse().expect("FERROMQ_STORE_SEED is a number"),
    );
    eprintln!("kill -9 rounds: FERROMQ_STORE_SEED={seed}");
    let mut rng = Rng(seed);
    for round in 0..4 {
        // Early kills (the Java broker's recovery walks from the first segment) and kills
        // after 4.5-7.5 s (it walks from the segment the checkpoint points to, so ferromq's
        // checkpoint and ConsumeQueues are what it relies on); odd rounds at a roll.
        let early = round < 2;
        let kill = KillAt {
            acked: if early {
                300 + usize::try_from(rng.below(3000)).unwrap()
            } else {
                0
            },
            elapsed: if early {
                Duration::ZERO
            } else {
                Duration::from_millis(4500 + rng.below(3000))
            },
            at_roll: round % 2 == 1,
        };
        // Odd rounds under SYNC_FLUSH, whose next segment is made ahead in a directory of
        // its own and moved into the CommitLog's at the roll.
        let conf = if round % 2 == 1 {
            format!("{STORE_CONF}\nflushDiskType=SYNC_FLUSH")
        } else {
            STORE_CONF.to_owned()
        };
        let round_seed = rng.next();
        eprintln!("round {round}: kill {kill:?}");
        let mut server = Standalone::start(&conf);
        let broker = server.broker;
        let store = server.data.join("store");
        let acked = load_until_killed(broker, &mut server.child, &store, kill, round_seed);
        assert!(
            store.join("abort").exists(),
            "a killed ferromq leaves abort"
        );
        let ours_dir = TempDir::on_disk("java-store-crash-ours");
        let ours_data = ours_dir.path().join("data");
        copy_tree(&store, &ours_data.join("store"));
        let java_store = dir.path().join(format!("java-{round}/store"));
        copy_tree(&store, &java_store);
        eprintln!("round {round}: {} acknowledged", acked.len());
        let strays = not_segments(&store);
        assert!(strays.is_empty(), "round {round}: the kill left {strays:?}");
        drop(server);

        // In the last round, what older ferromq versions could leave at a kill (see
        // `plant_unfinished_segments`): ferromq's recovery clears it.
        if round == 3 {
            plant_unfinished_segments(&ours_data.join("store"));
        }
        let recovered = Standalone::start_in(ours_dir, ours_data, &conf);
        let ours = crash_view(recovered.broker);
        assert_acked_served("ferromq after its recovery", &ours, &acked);
        if round == 3 {
            // ferromq goes on after its recovery and stops cleanly: the Java broker then
            // serves what it wrote before and after the kill.
            continue_then_java(
                recovered,
                &ours,
                &conf,
                dir.path(),
                namesrv.port,
                round_seed,
            );
        } else {
            drop(recovered);
        }

        let mut java =
            JavaServer::broker_with_jvm(dir.path(), namesrv.port, &java_store, &conf, JAVA_JVM);
        let log = java_store_log(&java);
        assert!(log.contains("last shutdown abnormally"), "{log}");
        eprintln!(
            "round {round}: the Java broker's recovery: {}",
            log.lines()
                .find(|line| line.contains("recover from this mapped file"))
                .unwrap_or("from the first segment")
        );
        let theirs = crash_view(java_addr(&java));
        assert_same_queues(
            &format!("round {round}: Java after kill -9"),
            &ours,
            &theirs,
        );
        assert_acked_served("Java after kill -9", &theirs, &acked);
        // The copy is thrown away: no need for the clean stop's seconds.
        common::kill(&mut java.child);
    }
    drop(namesrv);
}
