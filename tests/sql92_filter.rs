//! SQL92 filters end to end (issue 39 part 1): Java's clients and ours against ferromq, and the
//! Java 5.x broker as the reference.
//!
//! Method: `tests/java-sql/Sql92Filter.java`, compiled against the 4.9.8 and the 5.x client,
//! sends 60 messages whose user properties follow a table, then runs one push consumer per
//! expression of [`TABLE`] (the broker filters with the selector its heartbeat registered;
//! each its own group, from the first offset), pulls every queue with each expression with a
//! DefaultMQPullConsumer (its pulls carry the selector), and prints the messages each
//! received. The test holds them against its own evaluation of each expression over the table
//! (a Rust closure per expression, written from Java's rules, not with ferromq's evaluator)
//! and against what the Java 5.x broker delivered for the same messages. Waits are bounded:
//! the Java program waits until every push consumer has its expected count, then 3 s for
//! anything more.

mod common;

use common::java::{self, JavaCluster, Serialize, Standalone};
use common::TempDir;
use ferromq::client::consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, LitePullConsumer, LitePullConsumerConfig,
    MessageQueue, MessageSelector, PushConsumer, PushConsumerConfig,
};
use ferromq::client::producer::Producer;
use ferromq::client::{ClientConfig, Message, MessageExt};
use ferromq::remoting::headers::{
    CreateTopicRequestHeader, PullMessageRequestHeader, SendMessageRequestHeaderV2,
};
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use ferromq::store::message::{decode_record, Record};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The test machines' disks may be fuller than the brokers' default 90% refusal point; these
/// tests write little.
const DISK: &str = "diskSpaceWarningLevelRatio=0.999";

/// The messages the Java program sends.
const MESSAGES: i64 = 60;

/// Message `i`'s properties, as `Sql92Filter.message` sets them.
struct Props {
    /// `a`: `i`, absent for multiples of 7.
    a: Option<i64>,
    /// `b`: a colour, a unicode word or a quote.
    b: &'static str,
    /// `c`: `i.5` as text.
    c: f64,
    /// `e`: 3000000000 + i for multiples of 4 (a Long).
    e: Option<i64>,
    /// The tag.
    tag: &'static str,
    /// `idx`: `i`.
    idx: i64,
}

fn props(i: i64) -> Props {
    let colors = ["red", "green", "blue", "日本語", "it's"];
    let tags = ["TagA", "TagB", "TagC"];
    let at = usize::try_from(i).unwrap();
    Props {
        a: (i % 7 != 0).then_some(i),
        b: colors[at % 5],
        c: i as f64 + 0.5,
        e: (i % 4 == 0).then_some(3_000_000_000 + i),
        tag: tags[at % 3],
        idx: i,
    }
}

type Predicate = fn(&Props) -> bool;

/// Expressions and which messages match, per Java's rules: a missing property makes a
/// comparison unknown (no match), `c` compared with an int literal is read as an Integer
/// ("20.5" is not one: the evaluation fails and nothing matches).
const TABLE: &[(&str, Predicate)] = &[
    ("a > 30", |p| p.a.is_some_and(|a| a > 30)),
    ("a >= 10 AND a < 20", |p| {
        p.a.is_some_and(|a| (10..20).contains(&a))
    }),
    ("a BETWEEN 5 AND 15", |p| {
        p.a.is_some_and(|a| (5..=15).contains(&a))
    }),
    ("a NOT BETWEEN 5 AND 50", |p| {
        p.a.is_some_and(|a| !(5..=50).contains(&a))
    }),
    ("a = 15", |p| p.a == Some(15)),
    ("a <> 15", |p| p.a.is_some_and(|a| a != 15)),
    ("a IS NULL", |p| p.a.is_none()),
    ("a IS NOT NULL", |p| p.a.is_some()),
    ("b = 'red'", |p| p.b == "red"),
    ("b <> 'red'", |p| p.b != "red"),
    ("b IN ('red', 'blue')", |p| ["red", "blue"].contains(&p.b)),
    ("b NOT IN ('red', 'blue')", |p| {
        !["red", "blue"].contains(&p.b)
    }),
    ("b = '日本語'", |p| p.b == "日本語"),
    ("b = 'it''s'", |p| p.b == "it's"),
    ("b CONTAINS 'e'", |p| p.b.contains('e')),
    ("b NOT CONTAINS 'e'", |p| !p.b.contains('e')),
    ("b STARTSWITH 'gr'", |p| p.b.starts_with("gr")),
    ("b ENDSWITH 'ue'", |p| p.b.ends_with("ue")),
    ("b NOT STARTSWITH 'r'", |p| !p.b.starts_with('r')),
    ("b NOT ENDSWITH 'n'", |p| !p.b.ends_with('n')),
    ("TAGS = 'TagA'", |p| p.tag == "TagA"),
    ("TAGS IN ('TagB', 'TagC') AND a > 40", |p| {
        p.tag != "TagA" && p.a.is_some_and(|a| a > 40)
    }),
    ("c > 20.5", |p| p.c > 20.5),
    ("c > 20", |_| false),
    ("c <= 10.5", |p| p.c <= 10.5),
    ("e > 3000000040", |p| p.e.is_some_and(|e| e > 3_000_000_040)),
    ("e = 3000000000", |p| p.e == Some(3_000_000_000)),
    ("e > 2.5", |p| p.e.is_some()),
    ("a > 5 OR b = 'blue'", |p| {
        p.a.is_some_and(|a| a > 5) || p.b == "blue"
    }),
    ("NOT (a > 30)", |p| p.a.is_some_and(|a| a <= 30)),
    ("(a < 10 OR a > 50) AND TAGS <> 'TagA'", |p| {
        p.a.is_some_and(|a| !(10..=50).contains(&a)) && p.tag != "TagA"
    }),
    ("missing IS NULL AND idx < 10", |p| p.idx < 10),
    ("idx >= 0 AND NOT (b = 'green')", |p| p.b != "green"),
    ("a = 15.0", |p| p.a == Some(15)),
    ("a > -1 AND a < 3", |p| p.a.is_some_and(|a| a < 3)),
    ("a = '15'", |p| p.a == Some(15)),
    ("TRUE OR a > 1", |_| true),
    ("b in ('red') and a between 0 and 20", |p| {
        p.b == "red" && p.a.is_some_and(|a| a <= 20)
    }),
];

/// The table's expected sets, and the expressions file the Java program reads.
fn expectations(dir: &Path) -> (Vec<BTreeSet<i64>>, std::path::PathBuf) {
    let expected: Vec<BTreeSet<i64>> = TABLE
        .iter()
        .map(|(_, predicate)| (0..MESSAGES).filter(|i| predicate(&props(*i))).collect())
        .collect();
    let lines: Vec<String> = TABLE
        .iter()
        .zip(&expected)
        .map(|((expression, _), set)| format!("{}\t{expression}", set.len()))
        .collect();
    let file = dir.join("expressions.txt");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    (expected, file)
}

/// What each consumer of a run received: (push, pull) per expression.
fn received(output: &java::JavaOutput) -> Vec<(BTreeSet<i64>, BTreeSet<i64>)> {
    let set = |key: String| -> BTreeSet<i64> {
        let text = output
            .results
            .get(&key)
            .unwrap_or_else(|| panic!("no RESULT {key} in:\n{}", output.text));
        text.trim_matches(['[', ']'])
            .split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect()
    };
    (0..TABLE.len())
        .map(|k| (set(format!("push_{k}")), set(format!("pull_{k}"))))
        .collect()
}

/// Sends the table's messages to `topic` and runs the consumers with the client of `kit`.
fn run(
    kit: &Path,
    classes: &Path,
    namesrv: &str,
    topic: &str,
    run: &str,
    file: &Path,
) -> Vec<(BTreeSet<i64>, BTreeSet<i64>)> {
    let timeout = Duration::from_secs(180);
    let count = MESSAGES.to_string();
    let args = ["send", namesrv, topic, &count];
    let sent = java::run_java_on(
        kit,
        classes,
        "Sql92Filter",
        &args,
        Serialize::Json,
        "",
        timeout,
    );
    sent.assert_passed("send the table's messages");
    assert_eq!(sent.figure("sent"), MESSAGES as f64);
    let args = ["consume", namesrv, topic, run, file.to_str().unwrap()];
    // The clients rebalance every second, not every 20 s: a new consumer gets its queues at
    // once.
    let output = java::run_java_on(
        kit,
        classes,
        "Sql92Filter",
        &args,
        Serialize::Json,
        "-Drocketmq.client.rebalance.waitInterval=1000",
        timeout,
    );
    output.assert_passed("consume with each expression");
    eprintln!(
        "{run} on {namesrv}: push consumers started in {} ms, pulls done {} ms and every push \
         consumer had its messages {} ms later",
        output.figure("start_ms"),
        output.figure("pull_done_ms"),
        output.figure("reached_ms"),
    );
    received(&output)
}

fn assert_matches_table(
    what: &str,
    got: &[(BTreeSet<i64>, BTreeSet<i64>)],
    expected: &[BTreeSet<i64>],
) {
    for (k, ((push, pull), want)) in got.iter().zip(expected).enumerate() {
        let expression = TABLE[k].0;
        assert_eq!(push, want, "{what}: push consumer of {expression:?}");
        assert_eq!(pull, want, "{what}: pull consumer of {expression:?}");
    }
}

#[test]
fn java_clients_receive_exactly_what_the_java5_broker_delivers() {
    assert!(TABLE.len() >= 30);
    let dir = TempDir::on_disk("sql92-java");
    let (expected, file) = expectations(dir.path());
    let kit4 = java::kit();
    let kit5 = java::kit5();
    java::require_kit();
    java::require_kit5();
    let classes4 = java::compile(&kit4, "tests/java-sql");
    let classes5 = java::compile(&kit5, "tests/java-sql");

    let ours = Standalone::start(&format!("enablePropertyFilter=true\n{DISK}"));
    let namesrv = ours.namesrv_addr();
    let ours4 = run(&kit4, &classes4, &namesrv, "Sql92T4", "j4", &file);
    assert_matches_table("ferromq, 4.9.8 client", &ours4, &expected);
    let ours5 = run(&kit5, &classes5, &namesrv, "Sql92T5", "j5", &file);
    assert_matches_table("ferromq, 5.x client", &ours5, &expected);
    drop(ours);

    let java5 = JavaCluster::start(
        &kit5,
        dir.path(),
        "enablePropertyFilter=true",
        "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.999",
    );
    let addr = java5.namesrv_addr();
    let theirs = run(&kit5, &classes5, &addr, "Sql92T5", "j5", &file);
    assert_eq!(theirs, ours5, "the Java 5.x broker delivered otherwise");
    java5.broker.stop();
    java5.namesrv.stop();
}

/// A tokio runtime for the tests that drive ferromq's own client.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

/// Creates `topic` with one queue on the broker and waits for its route.
async fn create_topic(server: &Standalone, topic: &str) {
    let admin = common::connect(server.broker, SerializeType::Json).await;
    let header = CreateTopicRequestHeader::read_write(topic, 1);
    let request =
        RemotingCommand::request_with_header(RequestCode::UPDATE_AND_CREATE_TOPIC, &header);
    let response = admin.request(request).await.unwrap();
    assert_eq!(response.code, 0, "{:?}", response.remark);
    let namesrv = server.namesrv;
    let topic = topic.to_owned();
    tokio::task::spawn_blocking(move || {
        java::wait_topic_route(namesrv, &topic, None, Duration::from_secs(30));
    })
    .await
    .unwrap();
}

fn client_config(server: &Standalone, instance: &str) -> ClientConfig {
    let mut config = ClientConfig::new(&server.namesrv_addr());
    config.instance_name = instance.to_owned();
    config.poll_name_server_interval = Duration::from_millis(500);
    config.heartbeat_broker_interval = Duration::from_secs(1);
    config.persist_consumer_offset_interval = Duration::from_millis(200);
    config
}

/// The four SQL scenarios of rocketmq-e2e (`filter.push/SqlFilter.feature`), with ferromq's
/// push consumer, and its lite pull consumer on the `price>20` one: `TRUE` takes all, `price>20`
/// only the messages with price 30, `(price BETWEEN 10 AND 100) AND regionId IS NOT NUll` all,
/// and `product = 'MQ'` (a property no message has) none.
#[test]
fn our_client_passes_the_e2e_sql_scenarios() {
    let server = Standalone::start(&format!(
        "enablePropertyFilter=true\nbrokerName=broker-a\n{DISK}"
    ));
    runtime().block_on(async {
        let scenarios = [
            ("SqlTrue", "TRUE", 10),
            ("SqlPrice", "price>20", 10),
            (
                "SqlBetween",
                "(price BETWEEN 10 AND 100) AND regionId IS NOT NUll",
                10,
            ),
            ("SqlUnknown", "product = 'MQ'", 0),
        ];
        let seen: Arc<Mutex<HashMap<String, Vec<MessageExt>>>> = Arc::default();
        let mut consumers = Vec::new();
        for (topic, expression, _) in scenarios {
            create_topic(&server, topic).await;
            let mut config = PushConsumerConfig::new(&format!("G_{topic}"));
            config.rebalance_interval = Duration::from_millis(300);
            config.consume_from_where = ConsumeFromWhere::FirstOffset;
            let consumer = PushConsumer::new(client_config(&server, topic), config);
            let selector = MessageSelector::by_sql(expression);
            consumer.subscribe_with_selector(topic, &selector).unwrap();
            let seen = seen.clone();
            let name = topic.to_owned();
            consumer.register_message_listener_concurrently(move |messages: &[MessageExt]| {
                let mut seen = seen.lock().unwrap();
                seen.entry(name.clone())
                    .or_default()
                    .extend(messages.iter().cloned());
                ConsumeConcurrentlyStatus::ConsumeSuccess
            });
            consumer.start().await.unwrap();
            consumers.push(consumer);
        }
        let producer = Producer::new("sql-e2e-producer", client_config(&server, "producer"));
        producer.start().await.unwrap();
        for (topic, _, _) in scenarios {
            // The price 10 ones go first, so a filter letting them through shows at once.
            let prices: &[&str] = if topic == "SqlPrice" {
                &["10", "30"]
            } else {
                &["30"]
            };
            for price in prices {
                for i in 0..10 {
                    let mut message = Message::new(topic, format!("{price}-{i}")).with_tags("TagA");
                    message
                        .put_user_property("regionId", "cn-hangzhou")
                        .unwrap();
                    message.put_user_property("price", price).unwrap();
                    producer.send(message).await.unwrap();
                }
            }
        }
        // Every consumer reads its queue to the end: the pushed sets are then complete.
        let deadline = Instant::now() + Duration::from_secs(60);
        for ((topic, _, _), consumer) in scenarios.iter().zip(&consumers) {
            let queue = MessageQueue::new(*topic, "broker-a", 0);
            let max = if *topic == "SqlPrice" { 20 } else { 10 };
            while consumer.consumed_offset(&queue) != Some(max) {
                assert!(Instant::now() < deadline, "{topic}: not consumed to {max}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        let seen = seen.lock().unwrap().clone();
        for (topic, expression, count) in scenarios {
            let got = seen.get(topic).map_or(0, Vec::len);
            assert_eq!(got, count, "{expression}");
        }
        assert!(seen["SqlPrice"]
            .iter()
            .all(|m| m.property("price") == Some("30")));

        // The lite pull consumer, whose pulls carry the selector.
        let mut config = LitePullConsumerConfig::new("G_SqlPrice_lite");
        config.consume_from_where = ConsumeFromWhere::FirstOffset;
        config.rebalance_interval = Duration::from_millis(300);
        let lite = LitePullConsumer::new(client_config(&server, "lite"), config);
        let selector = MessageSelector::by_sql("price>20");
        lite.subscribe_with_selector("SqlPrice", &selector).unwrap();
        lite.start().await.unwrap();
        let mut pulled = Vec::new();
        while pulled.len() < 10 {
            assert!(Instant::now() < deadline, "lite pull got {}", pulled.len());
            pulled.extend(lite.poll(Duration::from_millis(200)).await);
        }
        assert_eq!(pulled.len(), 10);
        assert!(pulled.iter().all(|m| m.property("price") == Some("30")));
        lite.shutdown().await;
        for consumer in consumers {
            consumer.shutdown().await;
        }
        producer.shutdown().await;
    });
}

/// The bodies of the records of a pull's answer.
fn records(mut body: &[u8]) -> Vec<Vec<u8>> {
    let mut found = Vec::new();
    while let Ok(Record::Message { record, size }) = decode_record(body, false) {
        found.push(record.body.to_vec());
        body = &body[size..];
    }
    found
}

/// A heartbeat of `group` subscribing to `topic` with the SQL92 `expression` at `version`.
fn heartbeat(group: &str, topic: &str, expression: &str, version: i64) -> RemotingCommand {
    let mut request = RemotingCommand::request(RequestCode::HEART_BEAT);
    request.body = serde_json::json!({
        "clientID": "127.0.0.1@sql92",
        "producerDataSet": [],
        "consumerDataSet": [{
            "groupName": group,
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
            "subscriptionDataSet": [{
                "topic": topic,
                "subString": expression,
                "expressionType": "SQL92",
                "tagsSet": [],
                "codeSet": [],
                "subVersion": version,
            }],
            "unitMode": false,
        }],
    })
    .to_string()
    .into_bytes();
    request
}

/// CHECK_CLIENT_CONFIG of a subscription of `expression_type`.
fn check_client_config(expression_type: &str, expression: &str) -> RemotingCommand {
    let mut request = RemotingCommand::request(RequestCode::CHECK_CLIENT_CONFIG);
    request.body = serde_json::json!({
        "clientId": "127.0.0.1@sql92",
        "group": "G_check",
        "subscriptionData": {
            "topic": "SqlRefused",
            "subString": expression,
            "expressionType": expression_type,
            "subVersion": 1,
        },
    })
    .to_string()
    .into_bytes();
    request
}

/// A pull of `group`; with `selector`, the pull carries it (the subscription flag).
fn pull(group: &str, selector: Option<&str>, sub_version: i64) -> RemotingCommand {
    pull_of("SqlRefused", group, selector, "SQL92", sub_version)
}

/// A pull of `topic` by `group`, with `selector` of `expression_type` when given.
fn pull_of(
    topic: &str,
    group: &str,
    selector: Option<&str>,
    expression_type: &str,
    sub_version: i64,
) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id: 0,
        queue_offset: 0,
        max_msg_nums: 32,
        sys_flag: if selector.is_some() { 0x4 } else { 0 },
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: selector.map(str::to_owned),
        sub_version,
        expression_type: Some(expression_type.into()),
        max_msg_bytes: None,
        request_source: None,
        broker_name: None,
    };
    RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header)
}

/// Bad expressions and a broker without `enablePropertyFilter` are refused with Java's
/// codes and words: CHECK_CLIENT_CONFIG 23 with the parse error's position; a pull carrying
/// a bad selector 23; a pull of a group whose registered selector did not compile 27;
/// SYSTEM_ERROR without `enablePropertyFilter`. With `filterSupportRetry`, a retry topic's
/// messages are filtered by the selector of their original topic. And a Java push consumer
/// with a bad selector does not start.
#[test]
fn bad_selectors_and_disabled_filters_are_refused_as_java_refuses_them() {
    let server = Standalone::start(&format!(
        "enablePropertyFilter=true\nfilterSupportRetry=true\n{DISK}"
    ));
    let disabled = Standalone::start(DISK);
    runtime().block_on(async {
        create_topic(&server, "SqlRefused").await;
        let client = common::connect(server.broker, SerializeType::Json).await;
        let answer = |request: RemotingCommand| {
            let client = &client;
            async move {
                let response = client.request(request).await.unwrap();
                (response.code, response.remark.unwrap_or_default())
            }
        };
        let (code, remark) = answer(check_client_config("SQL92", "a > 1 AND b >")).await;
        assert_eq!(code, 23, "{remark}");
        assert!(remark.contains("line 1, column 14"), "{remark}");
        assert_eq!(answer(check_client_config("SQL92", "a > 1")).await.0, 0);
        assert_eq!(answer(check_client_config("TAG", "*")).await.0, 0);

        let (code, remark) = answer(pull("G_flag", Some("a >"), 1)).await;
        assert_eq!(
            (code, remark.as_str()),
            (23, "parse the consumer's subscription failed")
        );
        // A good selector in the pull: nothing there yet.
        assert_eq!(answer(pull("G_flag", Some("a > 1"), 1)).await.0, 19);

        // Registered by heartbeat: a good one serves pulls; a newer version that does not
        // compile removes it, and the group's pulls are told so.
        assert_eq!(
            answer(heartbeat("G_hb", "SqlRefused", "a > 1", 100))
                .await
                .0,
            0
        );
        assert_eq!(answer(pull("G_hb", None, 100)).await.0, 19);
        assert_eq!(
            answer(heartbeat("G_hb", "SqlRefused", "a >", 200)).await.0,
            0
        );
        let (code, remark) = answer(pull("G_hb", None, 200)).await;
        assert_eq!(
            (code, remark.as_str()),
            (
                27,
                "The broker's consumer filter data is not exist!Your expression may be wrong!"
            )
        );
        // A pull newer than the heartbeat's subscription.
        let (code, remark) = answer(pull("G_hb", None, 300)).await;
        assert_eq!(
            (code, remark.as_str()),
            (25, "the consumer's subscription not latest")
        );

        // filterSupportRetry: a retry topic's messages pass the selector their group
        // registered for their original topic (RETRY_TOPIC), here price > 20.
        let group = "G_retry";
        let retry = format!("%RETRY%{group}");
        assert_eq!(
            answer(heartbeat(group, "SqlRefused", "price > 20", 1))
                .await
                .0,
            0
        );
        for price in ["10", "30"] {
            let header = SendMessageRequestHeaderV2 {
                a: "P_retry".into(),
                b: retry.clone(),
                c: "TBW102".into(),
                d: 1,
                e: 0,
                f: 0,
                g: 0,
                h: 0,
                i: Some(format!(
                    "RETRY_TOPIC\u{1}SqlRefused\u{2}price\u{1}{price}\u{2}"
                )),
                j: Some(0),
                k: Some(false),
                l: None,
                m: Some(false),
                n: None,
            };
            let mut send =
                RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header);
            send.body = price.as_bytes().to_vec();
            let (code, remark) = answer(send).await;
            assert_eq!(code, 0, "{remark}");
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        let bodies = loop {
            let request = pull_of(&retry, group, Some("*"), "TAG", 1);
            let response = client.request(request).await.unwrap();
            if response.code == 0 {
                break records(&response.body);
            }
            assert!(
                Instant::now() < deadline,
                "no retry message: {}",
                response.code
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(bodies, vec![b"30".to_vec()]);

        let off = common::connect(disabled.broker, SerializeType::Json).await;
        let not_supported = "The broker does not support consumer to filter message by SQL92";
        let response = off
            .request(check_client_config("SQL92", "a > 1"))
            .await
            .unwrap();
        assert_eq!(
            (response.code, response.remark.as_deref()),
            (1, Some(not_supported))
        );
        create_topic(&disabled, "SqlRefused").await;
        let response = off.request(pull("G_off", Some("a > 1"), 1)).await.unwrap();
        assert_eq!(
            (response.code, response.remark.as_deref()),
            (1, Some(not_supported))
        );
    });
    // The Java client's push consumer checks its selector with the broker at start.
    let kit = java::kit();
    java::require_kit();
    let classes = java::compile(&kit, "tests/java-sql");
    for (who, namesrv, expression) in [
        ("bad expression", server.namesrv_addr(), "a >"),
        ("no enablePropertyFilter", disabled.namesrv_addr(), "a > 1"),
    ] {
        let args = ["refused", &namesrv, "SqlRefused", expression];
        let timeout = Duration::from_secs(120);
        let output = java::run_java_on(
            &kit,
            &classes,
            "Sql92Filter",
            &args,
            Serialize::Json,
            "",
            timeout,
        );
        output.assert_passed(who);
        assert_eq!(output.figure("refused"), 1.0, "{who}: {}", output.text);
    }
}
