//! The kit's real `mqadmin` and benchmark tools (RocketMQ 4.9.8) against `ferromq
//! standalone`, checking what each command prints, not only that it ran (mqadmin exits 0
//! even when a sub-command fails; a Java exception in its text is a failure).
//!
//! - The inspection commands (`clusterList`, `topicList`, `topicRoute`, `topicStatus`,
//!   `brokerStatus`, `getBrokerConfig`, `queryMsgByKey`, `queryMsgByOffset`, `queryMsgById`)
//!   run against ferromq and against the kit's Java name server and broker in the same
//!   state (the same topic, the same messages sent over a raw connection), and their outputs
//!   must match once addresses, ports, paths and times are masked; where ferromq differs on
//!   purpose the test says so.
//! - The commands about live clients (`consumerConnection`, `producerConnection`,
//!   `consumerProgress`, `topicList -c`, `queryMsgById`'s message track, `resetOffsetByTime`
//!   of an online and of an offline group) run against the Java clients of
//!   `tests/java/AdminClients.java`, whose state is known exactly.
//! - `updateBrokerConfig` must change what `getBrokerConfig` shows, what the name server
//!   routes and what the broker accepts, and be written to the config file; with
//!   `updateTopic`, `updateSubGroup`, `deleteTopic` and the refusals of system topics, in the
//!   binary ROCKETMQ header serialization.
//! - `bench producer`, `consumer`, `batch` and `tproducer` run a few seconds each and must
//!   report throughput and no failure.
//!
//! Each mqadmin call is a JVM of about 4 s, so each test groups its commands over one server.

mod common;

use common::java::{run_kit, spawn_java, spawn_kit, JavaOutput, JavaServer, Serialize, Standalone};
use common::{connect, TempDir};
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::{
    CreateTopicRequestHeader, GetRouteInfoRequestHeader, SendMessageRequestHeaderV2,
    SendMessageResponseHeader, UpdateConsumerOffsetRequestHeader,
};
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

/// Broker settings both brokers of the comparison get: small CommitLog segments; a
/// transaction check every second, whose first round makes the half topic (the default
/// waits a minute, so a topic list would depend on when it is taken); and puts taken on a
/// disk up to 99% full (a shared test machine's disk can be fuller than Java's default
/// 90%; the Java broker gets the same through its system property).
const BROKER_CONF: &str = "mappedFileSizeCommitLog=67108864\ntransactionCheckInterval=1000\n\
                           diskSpaceWarningLevelRatio=0.99";
const JAVA_DISK_FLAG: &str = "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.99";
const MQADMIN_TIMEOUT: Duration = Duration::from_secs(60);

/// `mqadmin <command> -n <namesrv> <args>`; its text, which must hold no Java exception.
fn mqadmin(namesrv: &str, command: &str, args: &[&str], serialize: Serialize) -> String {
    let text = mqadmin_text(namesrv, command, args, serialize);
    assert!(
        !text.contains("Exception") && !text.contains("\tat org.apache"),
        "mqadmin {command} {args:?} failed:\n{text}"
    );
    text
}

/// `mqadmin <command> -n <namesrv> <args>`, which may fail: its text.
fn mqadmin_text(namesrv: &str, command: &str, args: &[&str], serialize: Serialize) -> String {
    let mut all = vec![command, "-n", namesrv];
    all.extend_from_slice(args);
    let output = run_kit("mqadmin", &all, serialize, MQADMIN_TIMEOUT);
    assert!(
        !output.timed_out && output.status.is_some_and(|s| s.success()),
        "mqadmin {command} {args:?} did not end cleanly: {:?}\n{}",
        output.status,
        output.text
    );
    output.text
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The `UNIQ_KEY` (client message id) of raw message `i`: the same on both brokers.
fn uniq_key(i: usize) -> String {
    format!("7F00000100002A9F0000000000{i:06X}")
}

/// SEND_MESSAGE_V2 of message `i` of `topic` to `queue_id`, as a Java producer sends it
/// (tag, key, unique key, `WAIT`), with a fixed born time.
fn send_request(topic: &str, queue_id: i32, i: usize) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: "mqadmin_raw_producer".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: queue_id,
        f: 0,
        g: 1_700_000_000_000 + i64::try_from(i).unwrap(),
        h: 0,
        i: Some(format!(
            "KEYS\u{1}key-{i}\u{2}UNIQ_KEY\u{1}{}\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA",
            uniq_key(i)
        )),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    let mut request = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header);
    request.body = format!("body-{i}").into_bytes();
    request
}

/// Sends raw message `i`; the response.
async fn send_raw(
    client: &RemotingClient,
    topic: &str,
    queue_id: i32,
    i: usize,
) -> RemotingCommand {
    client
        .request(send_request(topic, queue_id, i))
        .await
        .expect("send answered")
}

/// The perm the name server routes `topic` with, if it routes it.
async fn routed_perm(client: &RemotingClient, topic: &str) -> Option<i64> {
    let request = RemotingCommand::request_with_header(
        RequestCode::GET_ROUTEINFO_BY_TOPIC,
        &GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        },
    );
    let response = client.request(request).await.ok()?;
    if response.code != 0 {
        return None;
    }
    let route: serde_json::Value = serde_json::from_slice(&response.body).ok()?;
    route["queueDatas"][0]["perm"].as_i64()
}

/// Polls (bounded) until the name server routes `topic` with `perm`.
async fn wait_routed_perm(namesrv: SocketAddr, serialize: SerializeType, topic: &str, perm: i64) {
    let client = connect(namesrv, serialize).await;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let seen = routed_perm(&client, topic).await;
        if seen == Some(perm) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{topic} still routed with perm {seen:?}, not {perm}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The rows of a table mqadmin printed: whitespace-separated cells of each line.
fn rows(text: &str) -> Vec<Vec<&str>> {
    text.lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>())
        .filter(|cells| !cells.is_empty())
        .collect()
}

/// `key : value` lines (brokerStatus) or `key = value` lines (getBrokerConfig).
fn key_values(text: &str, separator: char) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| line.split_once(separator))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

// ---------------------------------------------------------------------------------------
// Inspection commands, side by side with the Java broker.

/// What the inspection commands printed about one broker.
struct Inspected {
    cluster_list: String,
    topic_list: String,
    route: String,
    status: String,
    broker_status: String,
    broker_config: String,
    by_key: String,
    by_offset: String,
    by_id: String,
    /// What is masked: (text, mask).
    masks: Vec<(String, &'static str)>,
    /// The store disk's use (`df`) just before and just after `clusterList`.
    disk_around_cluster_list: (f64, f64),
}

/// How full the filesystem of `path` is, by `df`, counted as Java 4.9 counts it (used over
/// used and available, rounded up to a percent): an oracle apart from ferromq's code.
fn df_used_ratio(path: &str) -> f64 {
    let output = std::process::Command::new("df")
        .args(["-B1", "--output=used,avail", path])
        .output()
        .expect("run df");
    let text = String::from_utf8_lossy(&output.stdout);
    let numbers: Vec<u64> = text
        .lines()
        .nth(1)
        .unwrap_or_else(|| panic!("df printed {text}"))
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let (used, avail) = (numbers[0], numbers[1]);
    let percent = (used * 100).div_ceil(used + avail);
    f64::from(u32::try_from(percent).unwrap()) / 100.0
}

const INSPECT_TOPIC: &str = "MqadminInspectT";
const INSPECT_MESSAGES: usize = 6;

/// Creates the topic, sends the messages over a raw connection and runs the inspection
/// commands against one broker.
fn inspect(namesrv: &str, broker: SocketAddr, store: &str) -> Inspected {
    let json = Serialize::Json;
    let broker_addr = format!("127.0.0.1:{}", broker.port());
    mqadmin(
        namesrv,
        "updateTopic",
        &[
            "-c",
            "DefaultCluster",
            "-t",
            INSPECT_TOPIC,
            "-r",
            "4",
            "-w",
            "4",
        ],
        json,
    );
    let offset_ids: Vec<String> = runtime().block_on(async {
        let client = connect(broker, SerializeType::Json).await;
        let mut ids = Vec::new();
        for i in 0..INSPECT_MESSAGES {
            let queue = i32::try_from(i % 4).unwrap();
            let response = send_raw(&client, INSPECT_TOPIC, queue, i).await;
            assert_eq!(response.code, 0, "send {i}: {:?}", response.remark);
            let header: SendMessageResponseHeader = response.decode_header().unwrap();
            ids.push(header.msg_id);
        }
        ids
    });
    let by_id = mqadmin(namesrv, "queryMsgById", &["-i", &offset_ids[5]], json);
    let disk_before = df_used_ratio(store);
    let cluster_list = mqadmin(namesrv, "clusterList", &[], json);
    let disk_after = df_used_ratio(store);
    Inspected {
        cluster_list,
        disk_around_cluster_list: (disk_before, disk_after),
        topic_list: mqadmin(namesrv, "topicList", &[], json),
        route: mqadmin(namesrv, "topicRoute", &["-t", INSPECT_TOPIC], json),
        status: mqadmin(namesrv, "topicStatus", &["-t", INSPECT_TOPIC], json),
        broker_status: mqadmin(namesrv, "brokerStatus", &["-b", &broker_addr], json),
        broker_config: mqadmin(namesrv, "getBrokerConfig", &["-b", &broker_addr], json),
        by_key: mqadmin(
            namesrv,
            "queryMsgByKey",
            &["-t", INSPECT_TOPIC, "-k", "key-4"],
            json,
        ),
        by_offset: mqadmin(
            namesrv,
            "queryMsgByOffset",
            &["-t", INSPECT_TOPIC, "-b", "broker-a", "-i", "1", "-o", "0"],
            json,
        ),
        by_id,
        masks: vec![
            (broker_addr, "<broker>"),
            (namesrv.to_owned(), "<namesrv>"),
            (store.to_owned(), "<store>"),
            (format!("{:08X}", broker.port()), "<PORT>"),
        ],
    }
}

/// Whether `bytes` at `at` match `pattern`, where `d` is any ASCII digit.
fn matches_at(bytes: &[u8], at: usize, pattern: &[u8]) -> bool {
    bytes.len() >= at + pattern.len()
        && pattern.iter().zip(&bytes[at..]).all(|(p, b)| {
            if *p == b'd' {
                b.is_ascii_digit()
            } else {
                p == b
            }
        })
}

/// `text` with the side's addresses, ports and paths masked, times (`yyyy-MM-dd
/// HH:mm:ss[,SSS]`) as `<time>`, and other loopback addresses (clients') as `<client>`.
fn masked(text: &str, masks: &[(String, &'static str)]) -> String {
    let mut text = text.to_owned();
    for (value, mask) in masks {
        text = text.replace(value.as_str(), mask);
    }
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if matches_at(bytes, i, b"dddd-dd-dd dd:dd:dd") {
            i += 19;
            if matches_at(bytes, i, b",ddd") {
                i += 4;
            }
            out.push_str("<time>");
        } else if matches_at(bytes, i, b"127.0.0.1:d") {
            i += 10;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            out.push_str("<client>");
        } else {
            let c = text[i..].chars().next().unwrap();
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}

#[test]
fn mqadmin_inspection_commands_print_what_the_java_broker_prints() {
    let dir = TempDir::on_disk("mqadmin-compare");
    let java_dir = dir.path().to_path_buf();
    // The kit's servers take `JVM_EXTRA` from this process (each test runs in its own).
    std::env::set_var("JVM_EXTRA", JAVA_DISK_FLAG);
    // Both sides at once: the commands are JVMs that mostly wait (netty's quiet period).
    // Scoped, so that a panic on one side waits for the other to stop its servers: a kit
    // JVM outlives a test process that exits under it.
    let (ferro, java) = std::thread::scope(|scope| {
        let java_side = scope.spawn(|| {
            let namesrv = JavaServer::namesrv(&java_dir);
            let store = java_dir.join("java-store");
            let broker = JavaServer::broker(&java_dir, namesrv.port, &store, BROKER_CONF);
            let addr: SocketAddr = broker.addr().parse().unwrap();
            inspect(&namesrv.addr(), addr, &store.display().to_string())
        });
        let server = Standalone::start(BROKER_CONF);
        let ferro_store = server.data.join("store").display().to_string();
        let ferro = inspect(&server.namesrv_addr(), server.broker, &ferro_store);
        drop(server);
        (ferro, java_side.join().unwrap())
    });

    // clusterList: one row each. ferromq says it is 5.3.3 on purpose (it answers with 5.x
    // shapes, `remoting::command::CURRENT_VERSION`). `#Hour` is the age of the oldest
    // message: Java 4.9.8 reads it with a window of twice `maxMessageSize`, past the end
    // of a small CommitLog, so it always reports -1 (an age of 56 years) there; ferromq
    // reports the real time. The disk ratio is the same disk's, a moment apart.
    let cluster_row = |inspected: &Inspected| -> Vec<String> {
        let text = masked(&inspected.cluster_list, &inspected.masks);
        let found = rows(&text);
        assert_eq!(found.len(), 2, "one broker:\n{text}");
        found[1].iter().map(|cell| (*cell).to_owned()).collect()
    };
    let (ferro_row, java_row) = (cluster_row(&ferro), cluster_row(&java));
    assert_eq!(ferro_row[4], "V5_3_3");
    assert_eq!(java_row[4], "V4_9_8");
    let hours: f64 = ferro_row[8].parse().unwrap();
    assert!((0.0..1.0).contains(&hours), "{ferro_row:?}");
    // The disk ratio, as Java counts it: between what df said just before and just after
    // (a shared disk's use moves; a percent of slack for the rounding).
    let space: f64 = ferro_row[9].parse().unwrap();
    let (before, after) = ferro.disk_around_cluster_list;
    assert!(
        space >= before.min(after) - 0.01 && space <= before.max(after) + 0.01,
        "disk ratio {space}, df said {before} then {after}: {ferro_row:?}"
    );
    // Cluster, broker, id, address, and the page cache lock time; the TPS columns are
    // the last 10 s's, which depend on when the command ran, so they only have to parse.
    let comparable = |row: &[String]| [&row[..4], &row[7..8]].concat();
    assert_eq!(comparable(&ferro_row), comparable(&java_row));
    for tps in &ferro_row[5..7] {
        let rate = tps.split('(').next().unwrap();
        assert!(rate.parse::<f64>().is_ok(), "{ferro_row:?}");
    }

    // topicList: the same topics, system topics included, but for POP's revive topic, which
    // a 5.x broker (and ferromq) makes at start and a 4.9.8 broker does not have.
    let topics = |inspected: &Inspected| -> BTreeSet<String> {
        inspected.topic_list.lines().map(str::to_owned).collect()
    };
    let mut ferro_topics = topics(&ferro);
    assert!(ferro_topics.remove("rmq_sys_REVIVE_LOG_DefaultCluster"));
    assert_eq!(ferro_topics, topics(&java));

    for (what, ferro_text, java_text) in [
        ("topicRoute", &ferro.route, &java.route),
        ("topicStatus", &ferro.status, &java.status),
        ("queryMsgByKey", &ferro.by_key, &java.by_key),
        ("queryMsgByOffset", &ferro.by_offset, &java.by_offset),
        ("queryMsgById", &ferro.by_id, &java.by_id),
    ] {
        assert_eq!(
            masked(ferro_text, &ferro.masks),
            masked(java_text, &java.masks),
            "{what}"
        );
    }
    assert!(
        ferro.by_offset.contains("Keys:                [key-1]"),
        "{}",
        ferro.by_offset
    );
    assert!(
        ferro.by_id.contains("Queue Offset:        1"),
        "{}",
        ferro.by_id
    );

    // brokerStatus: the same keys (the CommitLog's path in one of them), past ferromq's own
    // on replication (its role, and on a master its slaves); the same figures where both
    // brokers did the same.
    let status = |inspected: &Inspected| -> BTreeMap<String, String> {
        key_values(&masked(&inspected.broker_status, &inspected.masks), ':')
    };
    let (mut ferro_status, java_status) = (status(&ferro), status(&java));
    assert_eq!(
        ferro_status.remove("brokerRole").as_deref(),
        Some("ASYNC_MASTER")
    );
    assert_eq!(
        ferro_status.remove("haConnectedSlaves").as_deref(),
        Some("0")
    );
    assert_eq!(
        ferro_status.remove("haSlaveAckOffset").as_deref(),
        Some("0")
    );
    // 5.x's timer keys (ferromq has 5.x's timer, 4.9.8 none): no timer message was sent.
    for key in ["timerOffsetBehind", "timerCongestNum"] {
        assert_eq!(ferro_status.remove(key).as_deref(), Some("0"), "{key}");
    }
    let read_behind = ferro_status.remove("timerReadBehind").unwrap_or_default();
    assert!(
        read_behind.parse::<i64>().is_ok_and(|s| s >= 0),
        "{read_behind}"
    );
    for key in ["timerEnqueueTps", "timerDequeueTps"] {
        assert_eq!(ferro_status.remove(key).as_deref(), Some("0.0"), "{key}");
    }
    assert_eq!(
        ferro_status.keys().collect::<Vec<_>>(),
        java_status.keys().collect::<Vec<_>>()
    );
    for key in [
        "commitLogMaxOffset",
        "commitLogMinOffset",
        "putMessageTimesTotal",
        "putMessageSizeTotal",
        "putMessageAverageSize",
        "putMessageFailedTimes",
        "msgPutTotalTodayNow",
        "remainTransientStoreBufferNumbs",
        "sendThreadPoolQueueCapacity",
        // Both idle by now: dispatched, and synced by the 500 ms ASYNC_FLUSH (ferromq's
        // figures measured, `tests/store_figures.rs` holds them back).
        "dispatchBehindBytes",
        "remainHowManyDataToFlush",
    ] {
        assert_eq!(ferro_status[key], java_status[key], "brokerStatus {key}");
    }
    assert_eq!(ferro_status["brokerVersionDesc"], "V5_3_3");
    assert_eq!(
        ferro_status["msgPutTotalTodayNow"],
        INSPECT_MESSAGES.to_string()
    );
    // The 10 s put rate parses as a number, as clusterList needs.
    for key in ["putTps", "getTransferedTps"] {
        let first = ferro_status[key].split(' ').next().unwrap();
        assert!(
            first.parse::<f64>().is_ok(),
            "{key} = {:?}",
            ferro_status[key]
        );
    }

    // getBrokerConfig: each key ferromq shows is one Java shows too (or a ferromq
    // setting of its own), with the same value for the same configuration.
    const FERROMQ_ONLY: [&str; 9] = [
        "bindAddress",
        "commitLogPageCacheWrites",
        "diskSpaceCleanForciblyRatio",
        "diskSpaceWarningLevelRatio",
        "frameMaxLength",
        "pullMappedMemoryMax",
        "rebalanceLockMaxLiveTime",
        "serverMaxConnections",
        "shards",
    ];
    let config = |inspected: &Inspected| -> BTreeMap<String, String> {
        let text = masked(&inspected.broker_config, &inspected.masks);
        let mut values = key_values(&text, '=');
        // The `====addr====` heading has no key.
        values.retain(|key, _| !key.is_empty());
        values
    };
    let (ferro_config, java_config) = (config(&ferro), config(&java));
    assert!(ferro_config.len() > 50, "{ferro_config:?}");
    for (key, value) in &ferro_config {
        if FERROMQ_ONLY.contains(&key.as_str()) {
            continue;
        }
        let java_value = java_config.get(key);
        assert!(
            java_value.is_some(),
            "getBrokerConfig shows {key}, Java does not"
        );
        let port: u16 = ferro.masks[0]
            .0
            .rsplit(':')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        if key == "listenPort" {
            assert_eq!(value, &port.to_string());
            continue;
        }
        if key == "haListenPort" {
            // Each broker's own listenPort + 1, as 4.9 sets it.
            assert_eq!(value, &(port + 1).to_string());
            continue;
        }
        if key == "rocketmqHome" {
            // Each side's own installation: the kit's directory, and ferromq's
            // ROCKETMQ_HOME or working directory.
            continue;
        }
        assert_eq!(Some(value), java_value, "getBrokerConfig {key}");
    }
}

// ---------------------------------------------------------------------------------------
// Live clients.

/// Messages the clients program sends: the first `FIRST` consumed by group C, all
/// `TOTAL` by R and O.
const FIRST: usize = 8;
const TOTAL: usize = 12;
const LIVE_TOPIC: &str = "MqadminLiveT";
/// A topic group C committed in but does not subscribe to.
const LEFT_TOPIC: &str = "MqadminLeftT";

/// A message the clients program sent: its queue, queue offset and ids.
#[derive(Debug, Clone)]
struct Sent {
    queue: i32,
    offset: i64,
    offset_id: String,
    msg_id: String,
}

fn sent(text: &str) -> Vec<Sent> {
    let mut all: Vec<(usize, Sent)> = text
        .lines()
        .filter_map(|line| line.strip_prefix("SENT "))
        .map(|rest| {
            let cells: Vec<&str> = rest.split(' ').collect();
            let entry = Sent {
                queue: cells[1].parse().unwrap(),
                offset: cells[2].parse().unwrap(),
                offset_id: cells[3].to_owned(),
                msg_id: cells[4].to_owned(),
            };
            (cells[0].parse().unwrap(), entry)
        })
        .collect();
    all.sort_by_key(|(i, _)| *i);
    assert_eq!(all.len(), TOTAL, "{text}");
    all.into_iter().map(|(_, s)| s).collect()
}

/// consumerProgress's rows of a topic: queue → (broker offset, consumer offset, diff).
fn progress(text: &str, topic: &str) -> BTreeMap<i32, (i64, i64, i64)> {
    rows(text)
        .into_iter()
        .filter(|cells| cells.first() == Some(&topic) && cells.len() >= 6)
        .map(|cells| {
            let n = |i: usize| cells[i].parse::<i64>().unwrap();
            (cells[2].parse().unwrap(), (n(3), n(4), n(5)))
        })
        .collect()
}

fn diff_total(text: &str) -> i64 {
    text.lines()
        .find_map(|line| line.strip_prefix("Diff Total: "))
        .unwrap_or_else(|| panic!("no Diff Total in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}

#[test]
fn mqadmin_shows_live_clients_offsets_and_resets_them() {
    let server = Standalone::start(BROKER_CONF);
    let ns = server.namesrv_addr();
    let json = Serialize::Json;
    mqadmin(
        &ns,
        "updateTopic",
        &[
            "-c",
            "DefaultCluster",
            "-t",
            LIVE_TOPIC,
            "-r",
            "4",
            "-w",
            "4",
        ],
        json,
    );
    // C_x once committed in a topic it does not subscribe to: an online group's progress
    // leaves that topic out, as Java's.
    runtime().block_on(async {
        let client = connect(server.broker, SerializeType::Json).await;
        let create = RemotingCommand::request_with_header(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &CreateTopicRequestHeader::read_write(LEFT_TOPIC, 1),
        );
        assert_eq!(client.request(create).await.unwrap().code, 0);
        let commit = RemotingCommand::request_with_header(
            RequestCode::UPDATE_CONSUMER_OFFSET,
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: "C_x".into(),
                topic: LEFT_TOPIC.into(),
                queue_id: 0,
                commit_offset: 0,
            },
        );
        assert_eq!(client.request(commit).await.unwrap().code, 0);
    });
    let mut clients = spawn_java(
        "AdminClients",
        &[
            &ns,
            LIVE_TOPIC,
            "x",
            &FIRST.to_string(),
            &TOTAL.to_string(),
            "300",
        ],
        json,
    );
    clients.wait_for_line("READY", Duration::from_secs(120));
    let text = clients.text();
    assert!(
        !text.contains("NOT READY") && !text.contains("FAIL"),
        "{text}"
    );
    let messages = sent(&text);
    let born_before: i64 = text
        .lines()
        .find_map(|line| line.strip_prefix("RESULT born_before="))
        .unwrap()
        .parse()
        .unwrap();

    // consumerConnection: C's one member and its subscriptions.
    let connection = mqadmin(&ns, "consumerConnection", &["-g", "C_x"], json);
    let table = rows(&connection);
    let member = table
        .iter()
        .find(|cells| cells[0].contains("@C_x-"))
        .unwrap_or_else(|| panic!("no member:\n{connection}"));
    assert!(member[1].starts_with("127.0.0.1:"), "{connection}");
    assert_eq!(&member[2..], ["JAVA", "V4_9_8"], "{connection}");
    for subscription in [["%RETRY%C_x", "*"], [LIVE_TOPIC, "*"]] {
        assert!(
            table.iter().any(|cells| cells == &subscription),
            "{connection}"
        );
    }
    for line in [
        "ConsumeType: CONSUME_PASSIVELY",
        "MessageModel: CLUSTERING",
        "ConsumeFromWhere: CONSUME_FROM_FIRST_OFFSET",
    ] {
        assert!(connection.contains(line), "{connection}");
    }

    // producerConnection: P's one producer.
    let producers = mqadmin(
        &ns,
        "producerConnection",
        &["-g", "P_x", "-t", LIVE_TOPIC],
        json,
    );
    let table = rows(&producers);
    assert_eq!(table.len(), 1, "{producers}");
    assert_eq!(table[0][0], "0001");
    assert!(table[0][1].contains("@P_x-"), "{producers}");
    assert_eq!(&table[0][3..], ["JAVA", "V4_9_8"], "{producers}");

    // consumerProgress of C: every queue's end, and C's offsets after the first FIRST.
    // The retry topic's row appears once the Java client has committed an offset for its
    // retry queue, which it does every 5 s (persistConsumerOffsetInterval), against a Java
    // broker too: asked again until it is there (bounded).
    let mut c_progress = mqadmin(&ns, "consumerProgress", &["-g", "C_x"], json);
    for _ in 0..4 {
        if !progress(&c_progress, "%RETRY%C_x").is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_secs(3));
        c_progress = mqadmin(&ns, "consumerProgress", &["-g", "C_x"], json);
    }
    let mut expected: BTreeMap<i32, (i64, i64, i64)> = BTreeMap::new();
    for (i, message) in messages.iter().enumerate() {
        let entry = expected.entry(message.queue).or_default();
        entry.0 += 1;
        if i < FIRST {
            entry.1 += 1;
        }
        entry.2 = entry.0 - entry.1;
    }
    assert_eq!(progress(&c_progress, LIVE_TOPIC), expected, "{c_progress}");
    assert_eq!(
        progress(&c_progress, "%RETRY%C_x")
            .values()
            .collect::<Vec<_>>(),
        [&(0, 0, 0)],
        "{c_progress}"
    );
    assert!(!c_progress.contains(LEFT_TOPIC), "{c_progress}");
    assert_eq!(
        diff_total(&c_progress),
        i64::try_from(TOTAL - FIRST).unwrap()
    );

    // consumerProgress of all groups: members, versions, models and diffs.
    let all = mqadmin(&ns, "consumerProgress", &[], json);
    let group_row = |group: &str| -> Vec<&str> {
        rows(&all)
            .into_iter()
            .find(|cells| cells[0] == group)
            .unwrap_or_else(|| panic!("no {group} in\n{all}"))
    };
    let diff = (TOTAL - FIRST).to_string();
    assert_eq!(
        group_row("C_x"),
        ["C_x", "1", "V4_9_8", "PUSH", "CLUSTERING", "0", &diff]
    );
    assert_eq!(
        group_row("R_x"),
        ["R_x", "1", "V4_9_8", "PUSH", "CLUSTERING", "0", "0"]
    );
    assert_eq!(group_row("O_x"), ["O_x", "0", "OFFLINE", "0", "0"]);

    // topicList -c: the topic's consumer groups (QUERY_TOPIC_CONSUME_BY_WHO).
    let with_groups = mqadmin(&ns, "topicList", &["-c"], json);
    let groups: BTreeSet<&str> = rows(&with_groups)
        .into_iter()
        .filter(|cells| cells.len() == 3 && cells[1] == LIVE_TOPIC)
        .map(|cells| {
            assert_eq!(cells[0], "DefaultCluster", "{with_groups}");
            cells[2]
        })
        .collect();
    assert_eq!(
        groups,
        BTreeSet::from(["C_x", "O_x", "R_x"]),
        "{with_groups}"
    );

    // queryMsgById: the fields of a message C has not consumed, and its track per group.
    let last = &messages[TOTAL - 1];
    let by_id = mqadmin(&ns, "queryMsgById", &["-i", &last.offset_id], json);
    for field in [
        format!("OffsetID:            {}", last.offset_id),
        format!("Topic:               {LIVE_TOPIC}"),
        "Tags:                [TagA]".to_owned(),
        format!("Keys:                [key-{}]", TOTAL - 1),
        format!("Queue ID:            {}", last.queue),
        format!("Queue Offset:        {}", last.offset),
        format!("UNIQ_KEY={}", last.msg_id),
        "MessageTrack [consumerGroup=C_x, trackType=NOT_CONSUME_YET".to_owned(),
        "MessageTrack [consumerGroup=R_x, trackType=CONSUMED".to_owned(),
        "MessageTrack [consumerGroup=O_x, trackType=NOT_ONLINE".to_owned(),
    ] {
        assert!(by_id.contains(&field), "no {field:?} in\n{by_id}");
    }
    // queryMsgByKey: the message under its key.
    let by_key = mqadmin(
        &ns,
        "queryMsgByKey",
        &["-t", LIVE_TOPIC, "-k", "key-3"],
        json,
    );
    let third = &messages[3];
    let row = [
        third.msg_id.as_str(),
        &third.queue.to_string(),
        &third.offset.to_string(),
    ];
    assert!(
        rows(&by_key).iter().any(|cells| cells[..] == row[..]),
        "{by_key}"
    );

    // resetOffsetByTime of the online group R: the broker pushes offset 0 of every queue to
    // R, which consumes everything again.
    let born = born_before.to_string();
    let reset = mqadmin(
        &ns,
        "resetOffsetByTime",
        &["-g", "R_x", "-t", LIVE_TOPIC, "-s", &born],
        json,
    );
    assert!(
        reset.contains("rollback consumer offset by specified group[R_x]"),
        "{reset}"
    );
    let offsets: BTreeSet<(i64, i64)> = rows(&reset)
        .into_iter()
        .filter(|cells| cells.len() == 3 && cells[0] == "broker-a")
        .map(|cells| (cells[1].parse().unwrap(), cells[2].parse().unwrap()))
        .collect();
    assert_eq!(offsets, (0..4).map(|q| (q, 0)).collect(), "{reset}");
    clients.wait_for_line("RECONSUMED", Duration::from_secs(60));

    // resetOffsetByTime of the offline group O: mqadmin commits the offsets itself
    // (CONSUMER_NOT_ONLINE from the broker), and O's whole backlog is back.
    let reset = mqadmin(
        &ns,
        "resetOffsetByTime",
        &["-g", "O_x", "-t", LIVE_TOPIC, "-s", &born],
        json,
    );
    assert!(
        reset.contains("rollback consumer offset by specified consumerGroup[O_x]"),
        "{reset}"
    );
    let o_progress = mqadmin(&ns, "consumerProgress", &["-g", "O_x"], json);
    let back: BTreeMap<i32, (i64, i64, i64)> = expected
        .iter()
        .map(|(queue, (end, _, _))| (*queue, (*end, 0, *end)))
        .collect();
    assert_eq!(progress(&o_progress, LIVE_TOPIC), back, "{o_progress}");
    assert_eq!(diff_total(&o_progress), i64::try_from(TOTAL).unwrap());

    clients
        .finish(Duration::from_secs(60))
        .assert_passed("AdminClients");
}

/// The Java admin API's `cloneGroupOffset` (CLONE_GROUP_OFFSET): the source group's
/// committed offsets become the destination's, queue by queue, as the broker then answers
/// QUERY_CONSUMER_OFFSET for them (mqadmin's `cloneGroupOffset` command goes another way:
/// it reads the source's consume stats and commits each offset itself).
#[test]
fn the_java_admin_api_clones_a_groups_offsets() {
    let server = Standalone::start(BROKER_CONF);
    let output = common::java::run_java(
        "CloneOffsets",
        &[
            &server.namesrv_addr(),
            &server.broker_addr(),
            "CloneOffsetsT",
        ],
        Serialize::Json,
        Duration::from_secs(120),
    );
    output.assert_passed("CloneOffsets");
    let queues: BTreeMap<String, String> = output
        .results
        .iter()
        .filter(|(key, _)| key.starts_with('q'))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    assert!(queues.len() >= 4, "{}", output.text);
    for (queue, offsets) in &queues {
        let id: i64 = queue[1..].parse().unwrap();
        let expected = if id < 4 { id + 1 } else { 0 };
        assert_eq!(
            offsets,
            &format!("{expected}/{expected}"),
            "{queue}: {}",
            output.text
        );
    }
}

// ---------------------------------------------------------------------------------------
// Configuration and management, in the ROCKETMQ header serialization.

#[test]
fn mqadmin_update_broker_config_takes_effect_and_is_kept_rocketmq() {
    let server = Standalone::start(BROKER_CONF);
    let ns = server.namesrv_addr();
    let broker = server.broker_addr();
    let binary = Serialize::Rocketmq;
    let topic = "MqadminConfigT";
    mqadmin(
        &ns,
        "updateTopic",
        &["-c", "DefaultCluster", "-t", topic, "-r", "2", "-w", "2"],
        binary,
    );
    let rt = runtime();
    let client = rt.block_on(connect(server.broker, SerializeType::RocketMq));
    for i in 0..3 {
        let response = rt.block_on(send_raw(&client, topic, 0, i));
        assert_eq!(response.code, 0, "{:?}", response.remark);
    }

    // clusterList and brokerStatus read the runtime info.
    let cluster = mqadmin(&ns, "clusterList", &[], binary);
    let row = rows(&cluster)
        .into_iter()
        .find(|cells| cells.get(3) == Some(&broker.as_str()))
        .unwrap_or_else(|| panic!("no {broker} in\n{cluster}"));
    assert_eq!(
        &row[..5],
        ["DefaultCluster", "broker-a", "0", &broker, "V5_3_3"]
    );
    let status = key_values(&mqadmin(&ns, "brokerStatus", &["-b", &broker], binary), ':');
    assert_eq!(status["msgPutTotalTodayNow"], "3");
    assert_eq!(status["putMessageTimesTotal"], "3");

    // A read-only broker: shown, routed and enforced at once.
    let update = mqadmin(
        &ns,
        "updateBrokerConfig",
        &["-b", &broker, "-k", "brokerPermission", "-v", "4"],
        binary,
    );
    assert!(
        update.contains(&format!("update broker config success, {broker}")),
        "{update}"
    );
    let config = key_values(
        &mqadmin(&ns, "getBrokerConfig", &["-b", &broker], binary),
        '=',
    );
    assert_eq!(config["brokerPermission"], "4");
    assert_eq!(config["listenPort"], server.broker.port().to_string());
    let conf_file = server.data.parent().unwrap().join("broker.conf");
    let kept = std::fs::read_to_string(&conf_file).unwrap();
    assert!(kept.lines().any(|l| l == "brokerPermission=4"), "{kept}");
    assert!(kept.contains(BROKER_CONF), "other keys kept: {kept}");
    rt.block_on(wait_routed_perm(
        server.namesrv,
        SerializeType::RocketMq,
        topic,
        4,
    ));
    let route = mqadmin(&ns, "topicRoute", &["-t", topic], binary);
    assert!(route.contains("\"perm\":4"), "{route}");
    let refused = rt.block_on(send_raw(&client, topic, 0, 3));
    assert_eq!(refused.code, 16, "{:?}", refused.remark);
    assert_eq!(
        refused.remark.as_deref(),
        Some("the broker[127.0.0.1] sending message is forbidden")
    );
    let pull = || {
        RemotingCommand::request_with_header(
            RequestCode::PULL_MESSAGE,
            &common::pull_header("MqadminConfigG", topic, 0, 0),
        )
    };
    let pulled = rt.block_on(client.request(pull())).unwrap();
    assert_eq!(pulled.code, 0, "read-only still reads: {:?}", pulled.remark);

    // Write-only: no pulls.
    mqadmin(
        &ns,
        "updateBrokerConfig",
        &["-b", &broker, "-k", "brokerPermission", "-v", "2"],
        binary,
    );
    let refused = rt.block_on(client.request(pull())).unwrap();
    assert_eq!(refused.code, 16, "{:?}", refused.remark);
    assert_eq!(
        refused.remark.as_deref(),
        Some("the broker[127.0.0.1] pulling message is forbidden")
    );

    // Read-write again, by cluster.
    let update = mqadmin(
        &ns,
        "updateBrokerConfig",
        &["-c", "DefaultCluster", "-k", "brokerPermission", "-v", "6"],
        binary,
    );
    assert!(update.contains("update broker config success"), "{update}");
    rt.block_on(wait_routed_perm(
        server.namesrv,
        SerializeType::RocketMq,
        topic,
        6,
    ));
    let accepted = rt.block_on(send_raw(&client, topic, 0, 3));
    assert_eq!(accepted.code, 0, "{:?}", accepted.remark);

    // No auto-creation once it is off.
    mqadmin(
        &ns,
        "updateBrokerConfig",
        &["-b", &broker, "-k", "autoCreateTopicEnable", "-v", "false"],
        binary,
    );
    let refused = rt.block_on(send_raw(&client, "MqadminNeverCreated", 0, 4));
    assert_eq!(refused.code, 17, "{:?}", refused.remark);

    // Keys of the black list are refused as Java refuses them.
    let blocked = mqadmin_text(
        &ns,
        "updateBrokerConfig",
        &["-b", &broker, "-k", "configBlackList", "-v", "x"],
        binary,
    );
    assert!(
        blocked.contains("CODE: 16") && blocked.contains("Can not update config in black list."),
        "{blocked}"
    );

    // updateSubGroup reaches the broker.
    mqadmin(
        &ns,
        "updateSubGroup",
        &[
            "-c",
            "DefaultCluster",
            "-g",
            "MqadminSubG",
            "-r",
            "5",
            "-q",
            "2",
        ],
        binary,
    );
    let groups = rt
        .block_on(client.request(RemotingCommand::request(
            RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        )))
        .unwrap();
    let groups: serde_json::Value = ferromq::config::fastjson::parse_lenient(&groups.body).unwrap();
    let group = &groups["subscriptionGroupTable"]["MqadminSubG"];
    assert_eq!(group["retryMaxTimes"], 5, "{groups}");
    assert_eq!(group["retryQueueNums"], 2, "{groups}");

    // System topics can be neither deleted nor recreated.
    let refused = mqadmin_text(
        &ns,
        "deleteTopic",
        &["-c", "DefaultCluster", "-t", "BenchmarkTest"],
        binary,
    );
    assert!(
        refused.contains("The topic[BenchmarkTest] is conflict with system topic."),
        "{refused}"
    );
    let refused = mqadmin_text(
        &ns,
        "updateTopic",
        &[
            "-c",
            "DefaultCluster",
            "-t",
            "broker-a",
            "-r",
            "2",
            "-w",
            "2",
        ],
        binary,
    );
    assert!(
        refused.contains("The topic[broker-a] is conflict with system topic."),
        "{refused}"
    );

    // deleteTopic: gone from the broker and the name server.
    let deleted = mqadmin(
        &ns,
        "deleteTopic",
        &["-c", "DefaultCluster", "-t", topic],
        binary,
    );
    assert!(
        deleted.contains(&format!(
            "delete topic [{topic}] from cluster [DefaultCluster] success."
        )) && deleted.contains(&format!("delete topic [{topic}] from NameServer success.")),
        "{deleted}"
    );
    let gone = mqadmin_text(&ns, "topicRoute", &["-t", topic], binary);
    assert!(gone.contains("CODE: 17"), "{gone}");
}

// ---------------------------------------------------------------------------------------
// The benchmark tools.

/// The benchmark tools' heap: the kit's 1 GiB is more than a few seconds need.
const BENCH_HEAP: &str = "-Xms256m -Xmx256m";

/// The figure after `label` in a stats line (`Send TPS: 123`, `TPS: 45`).
fn figure(line: &str, label: &str) -> i64 {
    let rest = &line[line
        .find(label)
        .unwrap_or_else(|| panic!("no {label} in {line}"))
        + label.len()..];
    rest.trim_start()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no number after {label} in {line}"))
}

/// Runs a benchmark tool that reports every 10 s until its first report, then stops it.
fn bench_until_report(tool: &str, args: &[&str], report: &str) -> (String, JavaOutput) {
    let mut run = spawn_kit(
        "bench",
        &[&[tool][..], args].concat(),
        Serialize::Json,
        BENCH_HEAP,
    );
    let line = run.wait_for_line(report, Duration::from_secs(60));
    (line, run.terminate(Duration::from_secs(30)))
}

#[test]
fn bench_tools_report_throughput_and_no_failure() {
    let server = Standalone::start(BROKER_CONF);
    let ns = server.namesrv_addr();
    let topic = "MqadminBenchT";
    mqadmin(
        &ns,
        "updateTopic",
        &["-c", "DefaultCluster", "-t", topic, "-r", "4", "-w", "4"],
        Serialize::Json,
    );

    // producer: a fixed count.
    let produced = spawn_kit(
        "bench",
        &[
            "producer", "-n", &ns, "-t", topic, "-w", "4", "-s", "256", "-q", "2000",
        ],
        Serialize::Json,
        BENCH_HEAP,
    )
    .finish(Duration::from_secs(120));
    let complete = produced
        .text
        .lines()
        .find(|line| line.starts_with("[Complete]"))
        .unwrap_or_else(|| panic!("producer did not complete:\n{}", produced.text));
    assert_eq!(figure(complete, "Send Total:"), 2000, "{complete}");
    // The tool prints its TPS only when the run outlived its first one-second snapshot.
    if complete.contains("Send TPS:") {
        assert!(figure(complete, "Send TPS:") > 0, "{complete}");
    }
    assert_no_refusal(&produced, figure(complete, "Send Failed:"), true);
    assert_eq!(figure(complete, "Response Failed:"), 0, "{complete}");

    // consumer, while batch produces: both report within their first 10 s.
    // Scoped: a panic here waits for the consumer to end, so that its JVM is stopped.
    let ((batch_line, batch), (consumer_line, consumer)) = std::thread::scope(|scope| {
        let consumer = scope.spawn(|| {
            bench_until_report(
                "consumer",
                &["-n", &ns, "-t", topic, "-g", "MqadminBenchG"],
                "Current Time:",
            )
        });
        let batch = bench_until_report(
            "batch",
            &["-n", &ns, "-t", topic, "-w", "2", "-s", "128", "-b", "16"],
            "Current Time:",
        );
        (batch, consumer.join().unwrap())
    });
    assert!(figure(&batch_line, "Send TPS:") > 0, "{batch_line}");
    assert!(figure(&batch_line, "Send MPS:") > 0, "{batch_line}");
    assert_no_refusal(&batch, figure(&batch_line, "Send Failed:"), true);
    assert!(figure(&consumer_line, "TPS:") > 0, "{consumer_line}");
    assert_eq!(figure(&consumer_line, "FAIL:"), 0, "{consumer_line}");
    assert_no_refusal(&consumer, 0, false);

    // tproducer: half messages, committed, none checked back.
    let (line, tproducer) = bench_until_report(
        "tproducer",
        &["-n", &ns, "-t", topic, "-w", "4", "-s", "256"],
        "Current Time:",
    );
    assert!(figure(&line, "Send TPS:") > 0, "{line}");
    assert_eq!(figure(&line, "unexpectedCheck:"), 0, "{line}");
    assert_no_refusal(&tproducer, figure(&line, "Send Failed:"), true);
}

/// No broker refused anything a benchmark tool sent, and no exception reached its output.
/// A failed send must be a client timeout (3 s), never a refusal: on a machine whose disk
/// is saturated a write can take that long (ferromq writes with O_DIRECT, where Java
/// writes to its page cache), and a test may not fail on a time. A consumer's log is not
/// searched: its start races its first heartbeat (GET_CONSUMER_LIST_BY_GROUP answered "no
/// consumer for this group", a pull SUBSCRIPTION_NOT_LATEST), against a Java broker too.
fn assert_no_refusal(output: &JavaOutput, failed: i64, sends: bool) {
    let log_path = output.home.join("logs/rocketmqlogs/rocketmq_client.log");
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(!output.text.contains("Exception"), "{}", output.text);
    if sends {
        assert!(
            !log.contains("MQBrokerException"),
            "a broker refused a request; see {}",
            log_path.display()
        );
    }
    if failed > 0 {
        assert!(
            log.contains("timeout"),
            "{failed} failed, none by a timeout; see {}",
            log_path.display()
        );
    }
}
