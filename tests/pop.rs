//! POP consumption over remoting (RocketMQ 5.x: POP_MESSAGE, ACK_MESSAGE,
//! BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME), side by side with the Java 5.5.0
//! broker.
//!
//! Method: `ferromq standalone` and the kit's 5.5.0 name server and broker run at once; the
//! 5.5.0 remoting client's own POP calls (`tests/java5/Java5Pop.java`) run against each, and
//! the program checks what it gets itself: each message popped once with a handle naming
//! its broker, queue and offset, exactly the unacked ones back after their invisible time
//! with reconsume times 1, none early, acked ones never. The test then compares every
//! figure the two runs print but the elapsed time. Raw frames check the refusals and
//! NOTIFICATION/POLLING_INFO answers (codes, remarks and fields of both brokers compared).
//! Another kills the broker with SIGKILL between pops and acks: after the restart exactly the
//! unacked messages come back, once each. A third takes a message through two revives into the group's `%DLQ%` topic (a
//! ferromq choice: the Java broker revives without end and leaves the DLQ to its clients).

mod common;
mod sched;

use common::java::{self, JavaCluster, JavaOutput, Serialize, Standalone};
use common::TempDir;
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use std::time::Duration;

/// Messages sent; a multiple of 4 so each way of ending a pop gets the same share.
const COUNT: &str = "20";
/// The invisible time of the pops: short, to keep the test short (the 5.x brokers set no
/// least one on remoting; the 5.x proxy's least for a gRPC receive is 10 s).
const INVISIBLE_MS: &str = "5000";
/// ferromq's config: puts go on while a shared test machine's disk is nearly full.
const ROOMY: &str = "diskSpaceWarningLevelRatio=0.999\ndiskMaxUsedSpaceRatio=95";

/// Figures that are times, not outcomes.
const TIMING_KEYS: &[&str] = &["back_after_ms"];

fn run_pop(kit: &std::path::Path, namesrv: &str, topic: &str) -> JavaOutput {
    java::run_java_on(
        kit,
        &java::classes5(),
        "Java5Pop",
        &[namesrv, topic, COUNT, INVISIBLE_MS],
        Serialize::Json,
        "",
        Duration::from_secs(150),
    )
}

/// The kit's name server and broker, with room on a full test disk.
fn java_broker(kit: &std::path::Path, dir: &TempDir) -> JavaCluster {
    // The Java broker reads its disk-full level from a system property only.
    let (conf, jvm) = (
        "diskMaxUsedSpaceRatio=95",
        "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.999",
    );
    JavaCluster::start(kit, dir.path(), conf, jvm)
}

#[test]
fn java5_client_pops_acks_and_gets_the_unacked_back_as_from_the_java5_broker() {
    let kit = java::kit5();
    let ferromq = Standalone::start(ROOMY);
    let dir = TempDir::on_disk("pop-java5");
    let started = std::time::Instant::now();
    let java5 = java_broker(&kit, &dir);
    println!("Java 5.5.0 broker up in {:?}", started.elapsed());
    let java_namesrv = java5.namesrv_addr();
    let ferromq_namesrv = ferromq.namesrv_addr();
    let (ours, javas) = std::thread::scope(|scope| {
        let timed = |namesrv: &str, topic: &str| {
            let started = std::time::Instant::now();
            let output = run_pop(&kit, namesrv, topic);
            println!("{topic}: {:?}", started.elapsed());
            output
        };
        let ours = scope.spawn(move || timed(&ferromq_namesrv, "PopFerro"));
        let javas = scope.spawn(move || timed(&java_namesrv, "PopJava"));
        (ours.join().unwrap(), javas.join().unwrap())
    });
    println!(
        "ferromq: {:?}\nJava 5.5.0: {:?}",
        ours.results, javas.results
    );
    javas.assert_passed("Java5Pop against the Java 5.5.0 broker");
    ours.assert_passed("Java5Pop against ferromq");
    assert_eq!(ours.figure("first_pass"), 20.0);
    assert_eq!(ours.figure("handles_ok"), 20.0);
    assert_eq!(ours.figure("came_back"), 10.0);
    assert_eq!(ours.figure("reconsume_one"), 10.0);
    assert_eq!(ours.figure("after_ack_returned"), 0.0);
    let outcome = |output: &JavaOutput| {
        let mut results = output.results.clone();
        results.retain(|key, _| !TIMING_KEYS.contains(&key.as_str()));
        results
    };
    assert_eq!(outcome(&ours), outcome(&javas), "ferromq vs Java 5.5.0");
    println!(
        "unacked back after {} ms (ferromq) and {} ms (Java 5.5.0) from the first pop",
        ours.results["back_after_ms"], javas.results["back_after_ms"]
    );
    java5.stop_now();
}

/// A request of `code` with `fields` and `body`.
fn request(code: RequestCode, fields: &[(&str, &str)], body: &[u8]) -> RemotingCommand {
    let mut request = RemotingCommand::request(code);
    let mut ext = ferromq::remoting::ExtFields::new();
    for (key, value) in fields {
        ext.insert(*key, *value);
    }
    request.ext_fields = Some(ext);
    request.body = body.to_vec();
    request
}

/// A request: its code, fields and body.
type Case = (RequestCode, Vec<(&'static str, String)>, Vec<u8>);

/// The response codes (and remarks) of the refusals, from one broker.
async fn refusals(addr: &str) -> Vec<(i32, String)> {
    let client = common::connect(addr.parse().unwrap(), SerializeType::Json).await;
    let now = sched::now_ms().to_string();
    let pop = |topic: &str, max: &str, poll: &str| {
        vec![
            ("consumerGroup", "G_refusals".to_owned()),
            ("topic", topic.to_owned()),
            ("queueId", "-1".to_owned()),
            ("maxMsgNums", max.to_owned()),
            ("invisibleTime", "10000".to_owned()),
            ("pollTime", poll.to_owned()),
            ("bornTime", now.clone()),
            ("initMode", "1".to_owned()),
        ]
    };
    let as_fields =
        |fields: &[(&'static str, String)]| -> Vec<(&'static str, String)> { fields.to_vec() };
    let topic = "TBW102";
    let handle = format!("0 {now} 10000 0 0 broker-a 0 0");
    let cases: Vec<Case> = vec![
        // Too many messages asked: INVALID_PARAMETER. (A poll time, so that a request slowed
        // on a busy machine is not refused as born too long ago first: both brokers look at
        // the age before the count.)
        (
            RequestCode::POP_MESSAGE,
            as_fields(&pop(topic, "33", "10000")),
            vec![],
        ),
        // No such topic.
        (
            RequestCode::POP_MESSAGE,
            as_fields(&pop("NoSuchPopTopic", "1", "10000")),
            vec![],
        ),
        // Nothing there, no poll time: POLLING_TIMEOUT at once.
        (
            RequestCode::POP_MESSAGE,
            as_fields(&pop(topic, "1", "0")),
            vec![],
        ),
        // An ack of an offset the queue does not have.
        (
            RequestCode::ACK_MESSAGE,
            vec![
                ("consumerGroup", "G_refusals".to_owned()),
                ("topic", topic.to_owned()),
                ("queueId", "0".to_owned()),
                ("extraInfo", handle.clone()),
                ("offset", "1000".to_owned()),
            ],
            vec![],
        ),
        // A change of invisible time of an offset past the queue's end.
        (
            RequestCode::CHANGE_MESSAGE_INVISIBLETIME,
            vec![
                ("consumerGroup", "G_refusals".to_owned()),
                ("topic", topic.to_owned()),
                ("queueId", "0".to_owned()),
                ("extraInfo", handle.clone()),
                ("offset", "0".to_owned()),
                ("invisibleTime", "10000".to_owned()),
            ],
            vec![],
        ),
        // A batch ack with no acks.
        (
            RequestCode::BATCH_ACK_MESSAGE,
            vec![],
            b"{\"acks\":[]}".to_vec(),
        ),
        // Nothing to pop, and no wait: hasMsg false at once.
        (
            RequestCode::NOTIFICATION,
            vec![
                ("consumerGroup", "G_refusals".to_owned()),
                ("topic", topic.to_owned()),
                ("queueId", "-1".to_owned()),
                ("pollTime", "0".to_owned()),
                ("bornTime", now.clone()),
            ],
            vec![],
        ),
        // No pop waits.
        (
            RequestCode::POLLING_INFO,
            vec![
                ("consumerGroup", "G_refusals".to_owned()),
                ("topic", topic.to_owned()),
                ("queueId", "-1".to_owned()),
            ],
            vec![],
        ),
        // A peek at no topic, and at a queue with nothing in it.
        (
            RequestCode::PEEK_MESSAGE,
            vec![
                ("consumerGroup", "G_refusals".to_owned()),
                ("topic", "NoSuchPopTopic".to_owned()),
                ("queueId", "0".to_owned()),
                ("maxMsgNums", "8".to_owned()),
            ],
            vec![],
        ),
        (
            RequestCode::PEEK_MESSAGE,
            vec![
                ("consumerGroup", "G_refusals".to_owned()),
                ("topic", topic.to_owned()),
                ("queueId", "0".to_owned()),
                ("maxMsgNums", "8".to_owned()),
            ],
            vec![],
        ),
        // A retry topic's mode cannot be set; nor an unknown topic's.
        (
            RequestCode::SET_MESSAGE_REQUEST_MODE,
            vec![],
            mode_body("%RETRY%G_refusals"),
        ),
        (
            RequestCode::SET_MESSAGE_REQUEST_MODE,
            vec![],
            mode_body("NoSuchTopicForMode"),
        ),
    ];
    let mut codes = Vec::new();
    for (code, fields, body) in cases {
        // Born now: a pop born over 500 ms before its poll time ends is refused.
        let born = sched::now_ms().to_string();
        let fields: Vec<(&str, &str)> = fields
            .iter()
            .map(|(k, v)| {
                (
                    *k,
                    if *k == "bornTime" {
                        born.as_str()
                    } else {
                        v.as_str()
                    },
                )
            })
            .collect();
        let response = client.request(request(code, &fields, &body)).await.unwrap();
        let field = |name: &str| {
            let fields = response.ext_fields.as_ref();
            fields
                .and_then(|f| f.get(name))
                .unwrap_or_default()
                .to_owned()
        };
        let remark = response.remark.clone().unwrap_or_default();
        let fields = format!("{}{}", field("hasMsg"), field("pollingNum"));
        codes.push((response.code, format!("{remark} {fields}")));
    }
    codes
}

/// A SET_MESSAGE_REQUEST_MODE body asking POP for `G_refusals` on `topic`.
fn mode_body(topic: &str) -> Vec<u8> {
    format!(
        r#"{{"consumerGroup":"G_refusals","mode":"POP","popShareQueueNum":0,"topic":"{topic}"}}"#
    )
    .into_bytes()
}

#[test]
fn refusals_have_the_java5_brokers_codes() {
    let kit = java::kit5();
    let ferromq = Standalone::start(ROOMY);
    let dir = TempDir::on_disk("pop-refusals");
    let java5 = java_broker(&kit, &dir);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let ours = runtime.block_on(refusals(&ferromq.broker_addr()));
    let javas = runtime.block_on(refusals(&java5.broker.addr()));
    let codes = |all: &[(i32, String)]| all.iter().map(|(code, _)| *code).collect::<Vec<_>>();
    println!("ferromq: {ours:?}\nJava 5.5.0: {javas:?}");
    assert_eq!(codes(&ours), codes(&javas));
    assert_eq!(
        codes(&ours),
        [29, 17, 210, 208, 208, 208, 0, 0, 17, 19, 16, 17]
    );
    assert_eq!(ours, javas, "remarks");
    java5.stop_now();
}

/// A POP_MESSAGE of one message of any queue of `topic`, waiting up to `poll_ms`.
fn pop_request(group: &str, topic: &str, invisible_ms: i64, poll_ms: i64) -> RemotingCommand {
    let now = sched::now_ms().to_string();
    let (invisible, poll) = (invisible_ms.to_string(), poll_ms.to_string());
    request(
        RequestCode::POP_MESSAGE,
        &[
            ("consumerGroup", group),
            ("topic", topic),
            ("queueId", "-1"),
            ("maxMsgNums", "1"),
            ("invisibleTime", invisible.as_str()),
            ("pollTime", poll.as_str()),
            ("bornTime", now.as_str()),
            ("initMode", "1"),
        ],
        &[],
    )
}

#[test]
fn a_message_never_acked_goes_to_the_dlq_after_the_groups_retry_max_times() {
    let ferromq = Standalone::start(ROOMY);
    sched::runtime().block_on(async {
        let client = common::connect(ferromq.broker, SerializeType::Json).await;
        let mut group = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP);
        group.body = br#"{"groupName":"G_pop_dlq","retryMaxTimes":1}"#.to_vec();
        assert_eq!(client.request(group).await.unwrap().code, 0);
        let topic = "PopDlq";
        let sent = client
            .request(common::send_request(topic, 0, b"never acked", ""))
            .await
            .unwrap();
        assert_eq!(sent.code, 0, "{:?}", sent.remark);
        // Popped three times: new, then revived once (reconsume 1), never acked.
        let started = std::time::Instant::now();
        let mut reconsumed = Vec::new();
        while reconsumed.len() < 2 && started.elapsed() < sched::DEADLINE {
            let popped = client
                .request(pop_request("G_pop_dlq", topic, 2000, 2000))
                .await
                .unwrap();
            if popped.code == 0 {
                let messages = sched::stored(&popped.body);
                assert_eq!(messages.len(), 1);
                assert_eq!(messages[0].body, b"never acked");
                assert_eq!(messages[0].topic, topic);
                assert!(messages[0].prop("POP_CK").is_some() || reconsumed.is_empty());
                reconsumed.push(messages[0].reconsume_times);
            } else {
                assert_eq!(popped.code, 210, "{:?}", popped.remark);
            }
        }
        assert_eq!(reconsumed, [0, 1]);
        // The second revive sends it to %DLQ%G_pop_dlq, reconsume 2, RETRY_TOPIC the topic.
        let dlq = sched::wait_for(&client, "dlq-reader", "%DLQ%G_pop_dlq", 0, 1).await;
        assert_eq!(dlq.len(), 1);
        assert_eq!(dlq[0].body, b"never acked");
        assert_eq!(dlq[0].reconsume_times, 2);
        assert_eq!(dlq[0].prop("RETRY_TOPIC"), Some(topic));
        assert!(dlq[0].prop("1ST_POP_TIME").is_some());
        let after = client
            .request(pop_request("G_pop_dlq", topic, 2000, 500))
            .await
            .unwrap();
        assert_eq!(after.code, 210, "nothing left to pop");
    });
}

/// Each message of a POP_MESSAGE answer with the handle an ack names it by, built from
/// the response header as Java's client builds it (`startOffsetInfo`, `popTime`, ...).
fn popped_with_handles(response: &RemotingCommand) -> Vec<(sched::Stored, String)> {
    use ferromq::broker::pop::format::ExtraInfo;
    use ferromq::remoting::headers::PopMessageResponseHeader;
    let header: PopMessageResponseHeader = response.decode_header().unwrap();
    let starts = header.start_offset_info.unwrap_or_default();
    sched::stored(&response.body)
        .into_iter()
        .map(|message| {
            let start = starts
                .split(';')
                .map(|entry| entry.split(' ').collect::<Vec<_>>())
                .find(|words| words[1] == message.queue_id.to_string())
                .map(|words| words[2].parse::<i64>().unwrap())
                .unwrap();
            let handle = ExtraInfo {
                ck_queue_offset: start,
                pop_time: header.pop_time,
                invisible_time: header.invisible_time,
                revive_qid: header.revive_qid,
                retry: "0".to_owned(),
                broker_name: "broker-a".to_owned(),
                queue_id: message.queue_id,
                queue_offset: Some(message.queue_offset),
            };
            let handle = message
                .prop("POP_CK")
                .map_or_else(|| handle.build(), str::to_owned);
            (message, handle)
        })
        .collect()
}

#[test]
fn popped_unacked_messages_come_back_after_a_kill_9_and_acked_ones_do_not() {
    let dir = TempDir::on_disk("pop-crash");
    // Offsets persisted each second, so that the kill below loses none of the pop's.
    let config = format!("brokerName=broker-a\nflushConsumerOffsetInterval=1000\n{ROOMY}");
    let mut broker = common::BrokerProcess::start(dir.path(), &config);
    let (group, topic) = ("G_pop_crash", "PopCrash");
    let acked: Vec<String> = sched::runtime().block_on(async {
        let client = common::connect(broker.addr, SerializeType::Json).await;
        for i in 0..8 {
            let body = format!("m{i}");
            let sent = client
                .request(common::send_request(topic, 0, body.as_bytes(), ""))
                .await
                .unwrap();
            assert_eq!(sent.code, 0, "{:?}", sent.remark);
        }
        let mut popped = Vec::new();
        let started = std::time::Instant::now();
        while popped.len() < 8 && started.elapsed() < sched::DEADLINE {
            let mut pop = pop_request(group, topic, 6000, 1000);
            pop.ext_fields.as_mut().unwrap().insert("maxMsgNums", "8");
            let response = client.request(pop).await.unwrap();
            if response.code == 0 {
                popped.extend(popped_with_handles(&response));
            }
        }
        assert_eq!(popped.len(), 8);
        let mut acked = Vec::new();
        for (message, handle) in popped.iter().filter(|(m, _)| m.queue_offset % 2 == 0) {
            let offset = message.queue_offset.to_string();
            let queue = message.queue_id.to_string();
            let fields = [
                ("consumerGroup", group),
                ("topic", topic),
                ("queueId", queue.as_str()),
                ("extraInfo", handle.as_str()),
                ("offset", offset.as_str()),
            ];
            let ack = request(RequestCode::ACK_MESSAGE, &fields, &[]);
            assert_eq!(client.request(ack).await.unwrap().code, 0);
            acked.push(String::from_utf8(message.body.clone()).unwrap());
        }
        acked
    });
    // Once an offset flush has written the group's offsets (moved at pop time), SIGKILL.
    let offsets = dir.path().join("config").join("consumerOffset.json");
    let key = format!("{topic}@{group}");
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(&offsets).is_ok_and(|json| json.contains(&key)) {
        assert!(
            started.elapsed() < sched::DEADLINE,
            "no offset flush of {key}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    common::kill(&mut broker.child);
    let broker = common::BrokerProcess::start(dir.path(), &config);
    let back = sched::runtime().block_on(async {
        let client = common::connect(broker.addr, SerializeType::Json).await;
        let mut back: Vec<sched::Stored> = Vec::new();
        let started = std::time::Instant::now();
        while back.len() < 4 && started.elapsed() < sched::DEADLINE {
            let response = client
                .request(pop_request(group, topic, 6000, 2000))
                .await
                .unwrap();
            if response.code == 0 {
                back.extend(sched::stored(&response.body));
            }
        }
        // Nothing else: no acked one, no second copy.
        let response = client
            .request(pop_request(group, topic, 6000, 1000))
            .await
            .unwrap();
        back.extend(sched::stored(&response.body));
        back
    });
    let mut bodies: Vec<String> = back
        .iter()
        .map(|m| String::from_utf8(m.body.clone()).unwrap())
        .collect();
    bodies.sort();
    println!("acked before the kill: {acked:?}; back after it: {bodies:?}");
    assert_eq!(
        bodies,
        ["m1", "m3", "m5", "m7"],
        "exactly the unacked, once each"
    );
    assert!(back.iter().all(|m| m.reconsume_times == 1));
}

#[test]
fn hostile_pop_fields_and_queueless_topics_are_answered() {
    let ferromq = Standalone::start(ROOMY);
    sched::runtime().block_on(async {
        let client = common::connect(ferromq.broker, SerializeType::Json).await;
        // A bornTime of i64::MIN: Java's long arithmetic wraps, the pop is too late.
        let mut pop = pop_request("G_pop_hostile", "TBW102", 10_000, 0);
        let min = i64::MIN.to_string();
        pop.ext_fields.as_mut().unwrap().insert("bornTime", &min);
        let response = client.request(pop).await.unwrap();
        assert_eq!(response.code, 210, "{:?}", response.remark);
        // A batch ack whose start offset plus its index passes i64::MAX acks nothing.
        let body = format!(
            r#"{{"acks":[{{"c":"G_pop_hostile","t":"TBW102","r":"0","so":{},"q":0,"rq":0,"#,
            i64::MAX
        ) + r#""pt":0,"it":0,"b":"Ag=="}]}"#;
        let ack = request(RequestCode::BATCH_ACK_MESSAGE, &[], body.as_bytes());
        let response = client.request(ack).await.unwrap();
        assert_eq!(response.code, 0, "{:?}", response.remark);
        // A topic and retry topic of no read queues: a waiting NOTIFICATION has nothing to
        // wait on but its time, and answers.
        for topic in ["PopNoQueues", "%RETRY%G_pop_hostile_PopNoQueues"] {
            let fields = [
                ("topic", topic),
                ("defaultTopic", "TBW102"),
                ("readQueueNums", "0"),
                ("writeQueueNums", "1"),
                ("perm", "6"),
                ("topicFilterType", "SINGLE_TAG"),
            ];
            let create = request(RequestCode::UPDATE_AND_CREATE_TOPIC, &fields, &[]);
            let response = client.request(create).await.unwrap();
            assert_eq!(response.code, 0, "{topic}: {:?}", response.remark);
        }
        let born = sched::now_ms().to_string();
        let fields = [
            ("consumerGroup", "G_pop_hostile"),
            ("topic", "PopNoQueues"),
            ("queueId", "-1"),
            ("pollTime", "200"),
            ("bornTime", born.as_str()),
        ];
        let notification = request(RequestCode::NOTIFICATION, &fields, &[]);
        let response = client.request(notification).await.unwrap();
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let has_msg = response.ext_fields.as_ref().and_then(|f| f.get("hasMsg"));
        assert_eq!(has_msg, Some("false"));
    });
}

/// `mqadmin updateTopic` (4 queues) and `setConsumeMode -m POP` for `group` on `topic`,
/// then the Java 5.x push consumer (clientRebalance off) consumes by POP.
fn pop_push_consumer(kit: &std::path::Path, namesrv: &str, topic: &str) -> JavaOutput {
    let group = format!("G_{topic}");
    let admin = |args: &[&str]| {
        let output = java::run_kit_on(kit, "mqadmin", args, Duration::from_secs(120));
        output.assert_passed(&format!("mqadmin {}", args[0]));
        output.text
    };
    let cluster = ["-n", namesrv, "-c", "DefaultCluster", "-t", topic];
    admin(&[&["updateTopic"], &cluster[..], &["-r", "4", "-w", "4"]].concat());
    let set = admin(
        &[
            &["setConsumeMode"],
            &cluster[..],
            &["-g", &group, "-m", "POP"],
        ]
        .concat(),
    );
    assert!(set.contains("success"), "setConsumeMode: {set}");
    java::run_java_on(
        kit,
        &java::classes5(),
        "Java5PopPush",
        &[namesrv, topic, &group, "40"],
        Serialize::Json,
        "",
        Duration::from_secs(240),
    )
}

#[test]
fn java5_push_consumer_in_pop_mode_consumes_by_pop_as_from_the_java5_broker() {
    let kit = java::kit5();
    let ferromq = Standalone::start(ROOMY);
    let dir = TempDir::on_disk("pop-push-java5");
    let java5 = java_broker(&kit, &dir);
    let (ferromq_namesrv, java_namesrv) = (ferromq.namesrv_addr(), java5.namesrv_addr());
    let (ours, javas) = std::thread::scope(|scope| {
        let ours = scope.spawn(|| pop_push_consumer(&kit, &ferromq_namesrv, "PopPushF"));
        let javas = scope.spawn(|| pop_push_consumer(&kit, &java_namesrv, "PopPushJ"));
        (ours.join().unwrap(), javas.join().unwrap())
    });
    println!(
        "ferromq: {:?}\nJava 5.5.0: {:?}",
        ours.results, javas.results
    );
    javas.assert_passed("Java5PopPush against the Java 5.5.0 broker");
    ours.assert_passed("Java5PopPush against ferromq");
    assert_eq!(
        ours.results, javas.results,
        "ferromq's outcome, then Java 5.5.0's"
    );
    assert_eq!(ours.figure("consumed"), 40.0);
    java5.stop_now();
}

#[test]
fn peek_shows_what_a_pop_would_take_and_moves_nothing() {
    let ferromq = Standalone::start(ROOMY);
    let (group, topic) = ("G_peek", "PeekT");
    sched::runtime().block_on(async {
        let client = common::connect(ferromq.broker, SerializeType::Json).await;
        for i in 0..3 {
            let body = format!("p{i}");
            let sent = client
                .request(common::send_request(topic, 0, body.as_bytes(), ""))
                .await
                .unwrap();
            assert_eq!(sent.code, 0, "{:?}", sent.remark);
        }
        let peek = |queue: &str| {
            let fields = [
                ("consumerGroup", group),
                ("topic", topic),
                ("queueId", queue),
                ("maxMsgNums", "8"),
            ];
            request(RequestCode::PEEK_MESSAGE, &fields, &[])
        };
        let bodies = |response: &RemotingCommand| -> Vec<String> {
            let mut all = response.body.clone();
            for part in &response.body_parts {
                all.extend_from_slice(part);
            }
            sched::stored(&all)
                .iter()
                .map(|m| String::from_utf8(m.body.clone()).unwrap())
                .collect()
        };
        // Once dispatched, twice the same: a peek moves no offset and writes no checkpoint.
        let started = std::time::Instant::now();
        while sched::max_offset(&client, topic, 0).await < 3 {
            assert!(
                started.elapsed() < sched::DEADLINE,
                "the sends are not dispatched"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for queue in ["0", "-1"] {
            let response = client.request(peek(queue)).await.unwrap();
            assert_eq!(response.code, 0, "{:?}", response.remark);
            assert_eq!(response.remark.as_deref(), Some("FOUND"));
            assert_eq!(bodies(&response), ["p0", "p1", "p2"]);
        }
        // A pop afterwards takes all three.
        let mut pop = pop_request(group, topic, 60_000, 1000);
        pop.ext_fields.as_mut().unwrap().insert("maxMsgNums", "8");
        let popped = client.request(pop).await.unwrap();
        assert_eq!(popped.code, 0, "{:?}", popped.remark);
        assert_eq!(popped_with_handles(&popped).len(), 3);
        // Now the group's offset is past them: nothing to peek.
        let response = client.request(peek("0")).await.unwrap();
        assert_eq!(response.code, 19, "{:?}", response.remark);
        assert_eq!(response.remark.as_deref(), Some("NO_MESSAGE_IN_QUEUE"));
    });
}
