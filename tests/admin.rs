//! `ferromq admin` against a running name server and broker: each command is the real binary,
//! run as a child process, and its table and `--json` output are checked against what the
//! test put into the broker over a raw remoting connection (sends, offset commits,
//! heartbeats) and against what the broker reports on its own (subscription groups).
//!
//! Method: one name server and one broker process (registering every 200 ms so that topic
//! changes reach the name server quickly); every wait is a bounded poll.

mod common;

use common::{connect, BrokerProcess, NamesrvProcess, TempDir};
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::{SendMessageResponseHeader, UpdateConsumerOffsetRequestHeader};
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use serde_json::Value;
use std::net::SocketAddr;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const TOPIC: &str = "AdminCliT";
const BROKER_NAME: &str = "admin-broker";
const CLUSTER: &str = "AdminCluster";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// `ferromq admin -n <namesrv> <args>`.
fn admin(namesrv: SocketAddr, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .arg("admin")
        .args(["-n", &namesrv.to_string()])
        .args(args)
        .env_remove("NAMESRV_ADDR")
        .output()
        .expect("run ferromq admin")
}

/// The stdout of a command that must succeed.
fn text(namesrv: SocketAddr, args: &[&str]) -> String {
    let output = admin(namesrv, args);
    let stdout = String::from_utf8(output.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "admin {args:?} failed: {stderr}\n{stdout}"
    );
    stdout
}

/// The `--json` output of a command that must succeed.
fn json(namesrv: SocketAddr, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = text(namesrv, &all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// Runs `check` until it returns `Some`, for at most ten seconds.
fn poll<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The whitespace-separated cells of the table line that starts with `first` and has
/// `second` as its second cell.
fn row(table: &str, first: &str, second: &str) -> Vec<String> {
    table
        .lines()
        .map(|line| {
            line.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        })
        .find(|cells| cells.len() > 1 && cells[0] == first && cells[1] == second)
        .unwrap_or_else(|| panic!("no row {first} {second} in\n{table}"))
}

fn send_request(queue_id: i32, body: &str, properties: &str) -> RemotingCommand {
    let properties = format!("TAGS\u{1}tag-a\u{2}WAIT\u{1}true\u{2}{properties}");
    let mut header = common::send_header(TOPIC, queue_id, &properties);
    header.d = 4;
    common::send_command(&header, body.as_bytes())
}

/// Sends and returns the offset message id the broker answers with.
async fn send(client: &RemotingClient, queue_id: i32, body: &str, properties: &str) -> String {
    let response = client
        .request(send_request(queue_id, body, properties))
        .await
        .unwrap();
    assert_eq!(response.code, 0, "{:?}", response.remark);
    let header: SendMessageResponseHeader = response.decode_header().unwrap();
    header.msg_id
}

async fn commit(client: &RemotingClient, group: &str, queue_id: i32, offset: i64) {
    let request = RemotingCommand::request_with_header(
        RequestCode::UPDATE_CONSUMER_OFFSET,
        &UpdateConsumerOffsetRequestHeader {
            consumer_group: group.into(),
            topic: TOPIC.into(),
            queue_id,
            commit_offset: offset,
        },
    );
    assert_eq!(client.request(request).await.unwrap().code, 0);
}

async fn subscription_groups(client: &RemotingClient) -> Value {
    let request = RemotingCommand::request(RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG);
    let response = client.request(request).await.unwrap();
    assert_eq!(response.code, 0);
    ferromq::config::fastjson::parse_lenient(&response.body).unwrap()
}

/// The `queues` entry of a `--json` report for queue `queue_id` of the test topic.
fn queue(report: &Value, queue_id: i64) -> &Value {
    report["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queueId"] == queue_id && q["topic"].as_str().is_none_or(|t| t == TOPIC))
        .unwrap_or_else(|| panic!("no queue {queue_id} in {report}"))
}

#[test]
fn admin_commands_manage_and_inspect_a_running_broker() {
    let namesrv = NamesrvProcess::start("");
    let dir = TempDir::on_disk("admin-cli");
    let config = format!(
        "namesrvAddr=127.0.0.1:{}\nbrokerName={BROKER_NAME}\nbrokerClusterName={CLUSTER}\n\
         registerNameServerPeriod=200",
        namesrv.addr.port()
    );
    // A fixed free port: the broker stamps its configured port into every stored message's
    // store host, so message ids only lead back to it when that port is the real one.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let broker = BrokerProcess::start_on(&dir.path().join("store"), &config, &listen);
    let ns = namesrv.addr;
    let broker_addr = format!("127.0.0.1:{}", broker.addr.port());
    let rt = runtime();
    let client = rt.block_on(connect(broker.addr, SerializeType::Json));

    // clusterList: the broker once it has registered.
    let clusters = poll("the broker to register", || {
        let list = json(ns, &["clusterList"]);
        (list.as_array()?.len() == 1).then_some(list)
    });
    assert_eq!(clusters[0]["clusterName"], CLUSTER);
    assert_eq!(clusters[0]["brokerName"], BROKER_NAME);
    assert_eq!(clusters[0]["brokerId"], 0);
    assert_eq!(clusters[0]["brokerAddr"], broker_addr.as_str());
    assert!(clusters[0]["runtime"]["brokerVersion"].is_string());
    let table = text(ns, &["clusterList"]);
    assert!(table.starts_with("#Cluster Name"), "{table}");
    assert_eq!(
        row(&table, CLUSTER, BROKER_NAME)[2..4],
        ["0", broker_addr.as_str()]
    );

    // updateTopic on every master of the cluster; the name server learns it.
    let created = text(
        ns,
        &[
            "updateTopic",
            "-t",
            TOPIC,
            "-c",
            CLUSTER,
            "-r",
            "8",
            "-w",
            "8",
        ],
    );
    assert!(
        created.contains(&format!("create topic to {broker_addr} success.")),
        "{created}"
    );
    poll("the topic to reach the name server", || {
        let list = json(ns, &["topicList"]);
        list["topicList"]
            .as_array()?
            .contains(&Value::from(TOPIC))
            .then_some(())
    });
    assert!(text(ns, &["topicList"]).lines().any(|line| line == TOPIC));

    // topicRoute: 8 read and 8 write queues on the one broker.
    let route = json(ns, &["topicRoute", "-t", TOPIC]);
    assert_eq!(route["queueDatas"][0]["brokerName"], BROKER_NAME);
    assert_eq!(route["queueDatas"][0]["readQueueNums"], 8);
    assert_eq!(route["queueDatas"][0]["writeQueueNums"], 8);
    assert_eq!(
        route["brokerDatas"][0]["brokerAddrs"]["0"],
        broker_addr.as_str()
    );
    let table = text(ns, &["topicRoute", "-t", TOPIC]);
    let cells = row(&table, CLUSTER, BROKER_NAME);
    assert_eq!(cells[3..], ["8", "8", "6"], "{table}");
    assert_eq!(row(&table, "Total:", "1")[2..], ["8", "8"]);

    // Three messages to queue 1, one keyed message with a UNIQ_KEY to queue 5.
    let unique_id = "7F00000100002A9F0000000000000001";
    let ids: Vec<String> = rt.block_on(async {
        let mut ids = Vec::new();
        for i in 0..3 {
            ids.push(send(&client, 1, &format!("body-{i}"), "").await);
        }
        let keyed = format!("KEYS\u{1}order-42\u{2}UNIQ_KEY\u{1}{unique_id}\u{2}");
        ids.push(send(&client, 5, "keyed body", &keyed).await);
        ids
    });

    // topicStatus: the max offsets of what was sent, once dispatched.
    let status = poll("the messages to be dispatched", || {
        let status = json(ns, &["topicStatus", "-t", TOPIC]);
        (queue(&status, 1)["maxOffset"] == 3 && queue(&status, 5)["maxOffset"] == 1)
            .then_some(status)
    });
    assert_eq!(status["queues"].as_array().unwrap().len(), 8);
    assert_eq!(queue(&status, 0)["maxOffset"], 0);
    assert!(queue(&status, 1)["lastUpdateTimestamp"].as_i64().unwrap() > 0);
    let table = text(ns, &["topicStatus", "-t", TOPIC]);
    assert!(table.starts_with("#Broker Name  #QID  #Min Offset  #Max Offset  #Last Updated"));
    assert_eq!(row(&table, BROKER_NAME, "1")[2..4], ["0", "3"]);
    assert_eq!(row(&table, BROKER_NAME, "0")[2..], ["0", "0", "N/A"]);

    // updateSubGroup / deleteSubGroup, as the broker itself reports its groups.
    let group = "admin-cli-group";
    let made = text(
        ns,
        &["updateSubGroup", "-g", group, "-b", &broker_addr, "-r", "5"],
    );
    assert!(made.contains(&format!(
        "create subscription group to {broker_addr} success."
    )));
    let groups = rt.block_on(subscription_groups(&client));
    assert_eq!(groups["subscriptionGroupTable"][group]["retryMaxTimes"], 5);
    assert_eq!(
        groups["subscriptionGroupTable"][group]["consumeEnable"],
        true
    );

    // consumerProgress after a commit: the difference per queue and in total.
    rt.block_on(commit(&client, group, 1, 1));
    let progress = json(ns, &["consumerProgress", "-g", group, "-t", TOPIC]);
    assert_eq!(queue(&progress, 1)["brokerOffset"], 3);
    assert_eq!(queue(&progress, 1)["consumerOffset"], 1);
    assert_eq!(queue(&progress, 1)["diff"], 2);
    assert_eq!(queue(&progress, 5)["diff"], 1);
    assert_eq!(progress["diffTotal"], 3);
    let table = text(ns, &["consumerProgress", "-g", group]);
    assert!(table.contains("Consume Diff Total: 3"), "{table}");
    let line = table
        .lines()
        .find(|l| l.split_whitespace().take(3).eq([TOPIC, BROKER_NAME, "1"]))
        .unwrap();
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells[3..6], ["3", "1", "2"], "{table}");

    // resetOffsetByTime (by commits: no member of the group is online):
    // back to the start (time 0), then forward to the end (`now`).
    let reset = json(
        ns,
        &["resetOffsetByTime", "-g", group, "-t", TOPIC, "-s", "0"],
    );
    assert_eq!(queue(&reset, 1)["consumerOffset"], 1);
    assert_eq!(queue(&reset, 1)["rollbackOffset"], 0);
    assert_eq!(reset["mode"], "commit");
    let progress = json(ns, &["consumerProgress", "-g", group, "-t", TOPIC]);
    assert_eq!(queue(&progress, 1)["consumerOffset"], 0);
    let table = text(
        ns,
        &["resetOffsetByTime", "-g", group, "-t", TOPIC, "-s", "now"],
    );
    assert!(table.contains("#rollbackOffset"), "{table}");
    assert_eq!(
        row(&table, BROKER_NAME, "1")[2..],
        ["3", "0", "3", "3"],
        "{table}"
    );
    let progress = json(ns, &["consumerProgress", "-g", group, "-t", TOPIC]);
    assert_eq!(queue(&progress, 1)["consumerOffset"], 3);
    assert_eq!(progress["diffTotal"], 0);
    // One queue only.
    let one = [
        "resetOffsetByTime",
        "-g",
        group,
        "-t",
        TOPIC,
        "-s",
        "0",
        "-q",
        "5",
    ];
    let reset = json(ns, &one);
    assert_eq!(reset["queues"].as_array().unwrap().len(), 1);
    assert_eq!(queue(&reset, 5)["rollbackOffset"], 0);
    let progress = json(ns, &["consumerProgress", "-g", group, "-t", TOPIC]);
    assert_eq!(queue(&progress, 5)["consumerOffset"], 0);
    assert_eq!(queue(&progress, 1)["consumerOffset"], 3);

    let deleted = text(ns, &["deleteSubGroup", "-g", group, "-b", &broker_addr]);
    assert!(deleted.contains("success"), "{deleted}");
    let groups = rt.block_on(subscription_groups(&client));
    assert!(
        groups["subscriptionGroupTable"][group].is_null(),
        "{groups}"
    );

    // producerConnection / consumerConnection with a live heartbeating connection.
    rt.block_on(async {
        let mut heartbeat = RemotingCommand::request(RequestCode::HEART_BEAT);
        heartbeat.body = format!(
            r#"{{"clientID":"127.0.0.1@admin-test","producerDataSet":[{{"groupName":
            "admin-producer"}}],"consumerDataSet":[{{"groupName":"admin-consumer",
            "consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",
            "consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{{
            "topic":"{TOPIC}","subString":"tag-a","tagsSet":["tag-a"],"codeSet":[],
            "subVersion":1}}]}}]}}"#
        )
        .into_bytes();
        assert_eq!(client.request(heartbeat).await.unwrap().code, 0);
    });
    let producers = json(
        ns,
        &["producerConnection", "-g", "admin-producer", "-t", TOPIC],
    );
    assert_eq!(
        producers["connectionSet"][0]["clientId"],
        "127.0.0.1@admin-test"
    );
    let table = text(
        ns,
        &["producerConnection", "-g", "admin-producer", "-t", TOPIC],
    );
    assert!(table.starts_with("#ClientId"), "{table}");
    let cells = row(&table, "127.0.0.1@admin-test", &client_addr(&producers));
    assert_eq!(cells[2..], ["JAVA", "479"], "{table}");
    let consumers = json(ns, &["consumerConnection", "-g", "admin-consumer"]);
    assert_eq!(
        consumers["connectionSet"][0]["clientId"],
        "127.0.0.1@admin-test"
    );
    assert_eq!(consumers["messageModel"], "CLUSTERING");
    assert_eq!(consumers["subscriptionTable"][TOPIC]["subString"], "tag-a");
    let summary = poll(
        "the consumer's retry topic to reach the name server",
        || {
            let all = json(ns, &["consumerProgress"]);
            let found = all
                .as_array()?
                .iter()
                .find(|g| g["group"] == "admin-consumer")?;
            Some(found.clone())
        },
    );
    assert_eq!(summary["count"], 1);
    assert_eq!(summary["consumeType"], "PUSH");
    assert_eq!(summary["messageModel"], "CLUSTERING");
    let table = text(ns, &["consumerProgress"]);
    assert!(table.starts_with("#Group"), "{table}");
    let cells = row(&table, "admin-consumer", "1");
    assert_eq!(
        cells[2..],
        ["479", "PUSH", "CLUSTERING", "0", "0"],
        "{table}"
    );
    let connection = ["consumerConnection", "-g", "admin-consumer", "-b"];
    let table = text(ns, &[&connection[..], &[broker_addr.as_str()]].concat());
    assert!(table.contains("127.0.0.1@admin-test"), "{table}");
    assert_eq!(row(&table, TOPIC, "tag-a").len(), 2, "{table}");
    assert!(table.contains("MessageModel: CLUSTERING"), "{table}");

    // clusterList's OutTPS: the broker's pull rate (`getTransferedTps`, Java's spelling).
    let header = common::pull_header("admin-puller", TOPIC, 1, 0);
    let pull = RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header);
    let pulled = rt.block_on(client.request(pull)).unwrap();
    assert_eq!(pulled.code, 0, "{:?}", pulled.remark);
    poll("clusterList to show the pulls as OutTPS", || {
        let table = text(ns, &["clusterList"]);
        let out_tps: f64 = row(&table, CLUSTER, BROKER_NAME)[6].parse().ok()?;
        (out_tps > 0.0).then_some(())
    });

    // queryMsgById by the offset id, and by the UNIQ_KEY id with the topic.
    let by_offset_id = json(ns, &["queryMsgById", "-i", &ids[1]]);
    let message = &by_offset_id["messages"][0];
    assert_eq!(message["body"], "body-1");
    assert_eq!(message["topic"], TOPIC);
    assert_eq!(message["queueId"], 1);
    assert_eq!(message["queueOffset"], 1);
    assert_eq!(message["offsetMsgId"], ids[1].as_str());
    assert_eq!(message["tags"], "tag-a");
    let printed = text(ns, &["queryMsgById", "-i", &ids[1]]);
    assert!(
        printed.contains(&format!("{:<20} {TOPIC}\n", "Topic:")),
        "{printed}"
    );
    assert!(
        printed.contains(&format!("{:<20} body-1\n", "Message Body:")),
        "{printed}"
    );
    assert!(
        printed.contains(&format!("{:<20} [tag-a]\n", "Tags:")),
        "{printed}"
    );
    let by_unique = json(ns, &["queryMsgById", "-i", unique_id, "-t", TOPIC]);
    assert_eq!(by_unique["messages"][0]["body"], "keyed body");
    assert_eq!(by_unique["messages"][0]["msgId"], unique_id);
    assert_eq!(by_unique["messages"][0]["offsetMsgId"], ids[3].as_str());

    // queryMsgByKey: the keyed message, once indexed.
    let by_key = poll("the key to be indexed", || {
        let output = admin(
            ns,
            &["queryMsgByKey", "-t", TOPIC, "-k", "order-42", "--json"],
        );
        output
            .status
            .success()
            .then(|| serde_json::from_slice::<Value>(&output.stdout).unwrap())
    });
    assert_eq!(by_key["messages"].as_array().unwrap().len(), 1);
    assert_eq!(by_key["messages"][0]["body"], "keyed body");
    assert_eq!(by_key["messages"][0]["keys"], "order-42");
    let table = text(ns, &["queryMsgByKey", "-t", TOPIC, "-k", "order-42"]);
    let cells = row(&table, unique_id, "5");
    assert_eq!(cells[2], "0");
    assert!(table.contains("keyed body"), "{table}");

    // queryMsgByOffset: the message at offset 2 of queue 1.
    let by_offset = |offset: &str| {
        let args = [
            "queryMsgByOffset",
            "-t",
            TOPIC,
            "-b",
            BROKER_NAME,
            "-i",
            "1",
            "-o",
        ];
        admin(ns, &[&args[..], &[offset, "--json"]].concat())
    };
    let at: Value = serde_json::from_slice(&by_offset("2").stdout).unwrap();
    assert_eq!(at["messages"][0]["body"], "body-2");
    assert_eq!(at["messages"][0]["offsetMsgId"], ids[2].as_str());
    assert_eq!(by_offset("9").status.code(), Some(1));

    // brokerStatus and getBrokerConfig.
    let status = json(ns, &["brokerStatus", "-b", &broker_addr]);
    assert_eq!(status[0]["brokerAddr"], broker_addr.as_str());
    let max: i64 = status[0]["table"]["commitLogMaxOffset"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(max > 0, "{status}");
    let table = text(ns, &["brokerStatus", "-c", CLUSTER]);
    assert!(table.contains("commitLogMaxOffset"), "{table}");
    let config = json(ns, &["getBrokerConfig", "-b", &broker_addr]);
    assert_eq!(config[0]["config"]["brokerName"], BROKER_NAME);
    assert_eq!(config[0]["config"]["brokerClusterName"], CLUSTER);
    let table = text(ns, &["getBrokerConfig", "-c", CLUSTER]);
    assert!(table.starts_with(&format!("============{broker_addr}============\n")));
    assert_eq!(row(&table, "brokerName", "=")[2], BROKER_NAME);

    // deleteTopic: gone from the broker and the name server.
    let deleted = text(ns, &["deleteTopic", "-t", TOPIC, "-c", CLUSTER]);
    assert!(deleted.contains(&format!(
        "delete topic [{TOPIC}] from cluster [{CLUSTER}] success."
    )));
    // A registration the broker sent just before its delete can land on the name server
    // after the name server's own delete and bring the topic back (name servers never drop
    // a topic a broker stops reporting, in Java as here); deleting again is what an operator
    // does then, and is harmless.
    poll("the topic to leave the name server", || {
        let list = json(ns, &["topicList"]);
        let listed = list["topicList"].as_array()?.contains(&Value::from(TOPIC));
        if listed {
            text(ns, &["deleteTopic", "-t", TOPIC, "-c", CLUSTER]);
        }
        (!listed).then_some(())
    });
    let gone = admin(ns, &["topicRoute", "-t", TOPIC]);
    assert_eq!(gone.status.code(), Some(1));
}

fn client_addr(connections: &Value) -> String {
    connections["connectionSet"][0]["clientAddr"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn admin_errors_print_the_code_and_remark_and_exit_non_zero() {
    let namesrv = NamesrvProcess::start("");
    let ns = namesrv.addr;

    // A name server refusal: its code and remark on stderr, nothing on stdout.
    let unknown = admin(ns, &["topicRoute", "-t", "NoSuchTopic"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(unknown.stdout.is_empty());
    let stderr = String::from_utf8(unknown.stderr).unwrap();
    assert!(stderr.contains("CODE: 17 (TOPIC_NOT_EXIST)"), "{stderr}");
    assert!(stderr.contains("No topic route info in name server for the topic: NoSuchTopic"));
    let unknown = admin(ns, &["topicStatus", "-t", "NoSuchTopic", "--json"]);
    assert_eq!(unknown.status.code(), Some(1));

    // Bad flags: clap's usage error.
    let missing = admin(ns, &["updateTopic", "-t", "T"]);
    assert_eq!(missing.status.code(), Some(2));
    let stderr = String::from_utf8(missing.stderr).unwrap();
    assert!(
        stderr.contains("Usage: ferromq admin updateTopic"),
        "{stderr}"
    );
    let not_a_number = admin(
        ns,
        &["updateTopic", "-t", "T", "-b", "127.0.0.1:1", "-r", "x"],
    );
    assert_eq!(not_a_number.status.code(), Some(2));

    // An unreachable broker: the address and the reason.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = closed.local_addr().unwrap().to_string();
    drop(closed);
    let refused = admin(ns, &["getBrokerConfig", "-b", &dead]);
    assert_eq!(refused.status.code(), Some(1));
    assert!(String::from_utf8(refused.stderr).unwrap().contains(&dead));

    // An empty cluster.
    let empty = admin(ns, &["updateTopic", "-t", "T", "-c", "NoCluster"]);
    assert_eq!(empty.status.code(), Some(1));
    let stderr = String::from_utf8(empty.stderr).unwrap();
    assert!(
        stderr.contains("no master broker in cluster [NoCluster]"),
        "{stderr}"
    );
}
