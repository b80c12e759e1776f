//! Hostile input against a real `ferromq broker` process: requests a client may send that
//! used to reach a panic on a shard (which aborts the whole process), an arithmetic overflow,
//! or a path outside the store. One test per family; each sends what once broke the broker,
//! checks the answer (Java's code, a remark that says what is wrong), then checks that the
//! broker still serves a good request and that what it stored before is still there.

mod common;

use common::{connect, BrokerProcess, TempDir};
use ferromq::remoting::client::{connect_tokio, ClientConfig, RemotingClient};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use ferromq::store::message::{decode_record, Record};
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

/// Keys every broker here gets: room to store on a nearly full disk (the test box's may be).
const ROOMY: &str = "diskSpaceWarningLevelRatio=0.999\ndiskMaxUsedSpaceRatio=95";

/// A broker over `dir/store` with [`ROOMY`] and `conf`.
fn broker(dir: &TempDir, conf: &str) -> BrokerProcess {
    BrokerProcess::start(&dir.path().join("store"), &format!("{ROOMY}\n{conf}"))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A request with `code`, these extFields and `body`.
fn command(code: RequestCode, fields: &[(&str, &str)], body: &[u8]) -> RemotingCommand {
    let mut command = RemotingCommand::request(code);
    if !fields.is_empty() {
        command.ext_fields = Some(fields.iter().copied().collect());
    }
    command.body = body.to_vec();
    command
}

/// The extFields of a SEND_MESSAGE_V2 to `topic`/`queue`, with `set` replacing fields.
fn send_fields<'a>(
    topic: &'a str,
    queue: &'a str,
    properties: &'a str,
    set: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut fields = vec![
        ("a", "hostile-producer"),
        ("b", topic),
        ("c", "TBW102"),
        ("d", "4"),
        ("e", queue),
        ("f", "0"),
        ("g", "1700000000000"),
        ("h", "0"),
        ("i", properties),
        ("j", "0"),
        ("k", "false"),
        ("m", "false"),
    ];
    for (key, value) in set {
        fields.retain(|(k, _)| k != key);
        fields.push((key, value));
    }
    fields
}

fn send(topic: &str, queue: &str, properties: &str, body: &[u8]) -> RemotingCommand {
    let fields = send_fields(topic, queue, properties, &[]);
    command(RequestCode::SEND_MESSAGE_V2, &fields, body)
}

fn pull(topic: &str, queue: &str, offset: &str) -> RemotingCommand {
    command(
        RequestCode::PULL_MESSAGE,
        &[
            ("consumerGroup", "hostile-group"),
            ("topic", topic),
            ("queueId", queue),
            ("queueOffset", offset),
            ("maxMsgNums", "32"),
            ("sysFlag", "4"),
            ("commitOffset", "0"),
            ("suspendTimeoutMillis", "0"),
            ("subscription", "*"),
            ("subVersion", "0"),
            ("expressionType", "TAG"),
        ],
        b"",
    )
}

async fn request(client: &RemotingClient, request: RemotingCommand) -> RemotingCommand {
    client
        .request_timeout(request, Duration::from_secs(10))
        .await
        .expect("the broker answers")
}

/// The CommitLog offset in a send answer's offset message id.
fn stored_offset(response: &RemotingCommand) -> i64 {
    let id = response.ext("msgId").expect("a msgId");
    ferromq::store::message::decode_offset_msg_id(id)
        .expect("an offset id")
        .1
}

/// Waits (bounded) until `topic`/`queue` has `count` dispatched messages.
async fn wait_dispatched(client: &RemotingClient, topic: &str, queue: &str, count: i64) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let max = command(
            RequestCode::GET_MAX_OFFSET,
            &[("topic", topic), ("queueId", queue)],
            b"",
        );
        let response = request(client, max).await;
        let offset: i64 = response.ext("offset").unwrap().parse().unwrap();
        if offset >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}/{queue} stays at {offset}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A record of a pull answer, by the fields these tests look at.
struct Pulled {
    sys_flag: i32,
    born_host: SocketAddr,
    body: Vec<u8>,
}

/// The records of a pull answer.
fn records(response: &RemotingCommand) -> Vec<Pulled> {
    let mut at = 0;
    let mut found = Vec::new();
    while at < response.body.len() {
        let Ok(Record::Message { record, size }) = decode_record(&response.body[at..], true) else {
            panic!("pull body is not records at {at}");
        };
        found.push(Pulled {
            sys_flag: record.sys_flag,
            born_host: record.born_host,
            body: record.body.to_vec(),
        });
        at += size;
    }
    found
}

/// Stores `before` in `kept`/0, for the checks after the hostile requests.
async fn store_before(client: &RemotingClient, kept: &str) {
    let response = request(client, send(kept, "0", "TAGS\u{1}k", b"before")).await;
    assert_eq!(response.code, 0, "{:?}", response.remark);
}

/// The broker still takes a send to `kept`, and still has what it stored there before.
async fn still_serving(client: &RemotingClient, kept: &str) {
    let response = request(client, send(kept, "0", "TAGS\u{1}k", b"after")).await;
    assert_eq!(response.code, 0, "{:?}", response.remark);
    wait_dispatched(client, kept, "0", 2).await;
    let response = request(client, pull(kept, "0", "0")).await;
    assert_eq!(response.code, 0, "{:?}", response.remark);
    let bodies: Vec<Vec<u8>> = records(&response).into_iter().map(|r| r.body).collect();
    assert_eq!(bodies, [b"before".to_vec(), b"after".to_vec()]);
}

#[test]
fn send_claiming_ipv6_hosts_on_ipv4_is_stored_with_the_real_bits() {
    let dir = TempDir::on_disk("hostile-v6");
    let broker = broker(&dir, "");
    runtime().block_on(async {
        for serialize in [SerializeType::Json, SerializeType::RocketMq] {
            let client = connect(broker.addr, serialize).await;
            let kept = format!("Kept{serialize:?}");
            store_before(&client, &kept).await;
            let topic = format!("V6{serialize:?}");
            for flag in ["16", "32", "48"] {
                let fields = send_fields(&topic, "0", "TAGS\u{1}v6", &[("f", flag)]);
                let response = request(
                    &client,
                    command(RequestCode::SEND_MESSAGE_V2, &fields, b"v2"),
                )
                .await;
                assert_eq!(response.code, 0, "flag {flag}: {:?}", response.remark);
                let id = response.ext("msgId").unwrap();
                assert_eq!(id.len(), 32, "the id of the IPv4 record stored: {id}");
            }
            let v1 = command(
                RequestCode::SEND_MESSAGE,
                &[
                    ("producerGroup", "hostile-producer"),
                    ("topic", &topic),
                    ("defaultTopic", "TBW102"),
                    ("defaultTopicQueueNums", "4"),
                    ("queueId", "0"),
                    ("sysFlag", "48"),
                    ("bornTimestamp", "1700000000000"),
                    ("flag", "0"),
                ],
                b"v1",
            );
            assert_eq!(request(&client, v1).await.code, 0);
            let mut body = Vec::new();
            ferromq::broker::batch::BatchEntry {
                flag: 0,
                body: b"batched".to_vec(),
                properties: b"TAGS\x01b".to_vec(),
            }
            .encode(&mut body);
            let fields = send_fields(&topic, "1", "", &[("m", "true"), ("f", "48")]);
            let batch = command(RequestCode::SEND_BATCH_MESSAGE, &fields, &body);
            let response = request(&client, batch).await;
            assert_eq!(response.code, 0, "{:?}", response.remark);

            wait_dispatched(&client, &topic, "0", 4).await;
            wait_dispatched(&client, &topic, "1", 1).await;
            let queue0 = records(&request(&client, pull(&topic, "0", "0")).await);
            let queue1 = records(&request(&client, pull(&topic, "1", "0")).await);
            let bodies: Vec<&[u8]> = queue0.iter().chain(&queue1).map(|r| &r.body[..]).collect();
            assert_eq!(bodies, [&b"v2"[..], b"v2", b"v2", b"v1", b"batched"]);
            for pulled in queue0.iter().chain(&queue1) {
                assert_eq!(pulled.sys_flag & 0x30, 0, "IPv4 hosts, no IPv6 bit");
                assert!(pulled.born_host.is_ipv4());
            }
            still_serving(&client, &kept).await;
        }
    });
}

#[test]
fn properties_grown_past_the_record_limit_are_refused_not_a_crash() {
    let dir = TempDir::on_disk("hostile-properties");
    let broker = broker(&dir, "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        store_before(&client, "Kept").await;
        // 32,682 bytes of properties: storable as sent (the broker adds CLUSTER and a
        // UNIQ_KEY), but not once a send-back, a delay or a transaction half adds its own.
        let big = format!("K\u{1}{}", "v".repeat(32_680));
        let response = request(&client, send("Big", "0", &big, b"big")).await;
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let offset = stored_offset(&response).to_string();
        let back = command(
            RequestCode::CONSUMER_SEND_MSG_BACK,
            &[
                ("offset", &offset),
                ("group", "hostile-group"),
                ("delayLevel", "0"),
                ("originMsgId", "00"),
                ("originTopic", "Big"),
                ("maxReconsumeTimes", "16"),
            ],
            b"",
        );
        let response = request(&client, back).await;
        assert_eq!(response.code, ResponseCode::SYSTEM_ERROR.0);
        assert_eq!(response.remark.as_deref(), Some("MESSAGE_ILLEGAL"));

        let delayed = format!("{big}\u{2}DELAY\u{1}3");
        let response = request(&client, send("Big", "0", &delayed, b"delayed")).await;
        assert_eq!(
            response.code,
            ResponseCode::MESSAGE_ILLEGAL.0,
            "{:?}",
            response.remark
        );
        let smaller = format!("K\u{1}{}", "v".repeat(32_700));
        let half = format!("{smaller}\u{2}TRAN_MSG\u{1}true\u{2}PGROUP\u{1}pg");
        let response = request(&client, send("Big", "0", &half, b"half")).await;
        assert_eq!(
            response.code,
            ResponseCode::MESSAGE_ILLEGAL.0,
            "{:?}",
            response.remark
        );
        still_serving(&client, "Kept").await;
    });
}

#[test]
fn numbers_at_their_limits_are_answered_not_overflowed() {
    let dir = TempDir::on_disk("hostile-overflow");
    let broker = broker(&dir, "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        store_before(&client, "Kept").await;
        // Redelivered almost i32::MAX times, handed back with no level of its own: its
        // level is 3 + the count.
        let max = i32::MAX.to_string();
        let almost = (i32::MAX - 1).to_string();
        let fields = send_fields("Retried", "0", "", &[("j", &almost)]);
        let response = request(
            &client,
            command(RequestCode::SEND_MESSAGE_V2, &fields, b"r"),
        )
        .await;
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let offset = stored_offset(&response).to_string();
        let back = command(
            RequestCode::CONSUMER_SEND_MSG_BACK,
            &[
                ("offset", &offset),
                ("group", "hostile-group"),
                ("delayLevel", "0"),
                ("originMsgId", "00"),
                ("originTopic", "Retried"),
                ("maxReconsumeTimes", &max),
            ],
            b"",
        );
        let response = request(&client, back).await;
        assert_eq!(response.code, 0, "{:?}", response.remark);

        // Numbers that are not numbers, or too big for their field.
        for (key, value, remark) in [
            ("e", "one", "the custom field <e> is not an int: one"),
            (
                "e",
                "99999999999",
                "the custom field <e> is not an int: 99999999999",
            ),
            (
                "g",
                "yesterday",
                "the custom field <g> is not a long: yesterday",
            ),
            ("j", "twice", "the custom field <j> is not an int: twice"),
        ] {
            let fields = send_fields("Kept", "0", "", &[(key, value)]);
            let response = request(
                &client,
                command(RequestCode::SEND_MESSAGE_V2, &fields, b"x"),
            )
            .await;
            assert_eq!(response.code, ResponseCode::SYSTEM_ERROR.0);
            assert_eq!(response.remark.as_deref(), Some(remark));
        }
        still_serving(&client, "Kept").await;
    });
}

#[test]
fn transaction_halves_with_hostile_fields_are_checked_and_committed_safely() {
    let dir = TempDir::on_disk("hostile-transaction");
    let broker = broker(
        &dir,
        "transactionCheckInterval=100\ntransactionTimeOut=1000",
    );
    runtime().block_on(async {
        let config = ClientConfig {
            serialize_type: SerializeType::Json,
            ..ClientConfig::default()
        };
        let (client, mut inbound) = connect_tokio(broker.addr, config).await.unwrap();
        store_before(&client, "Kept").await;
        let heartbeat = serde_json::json!({
            "clientID": "127.0.0.1@hostile",
            "producerDataSet": [{"groupName": "hostile-pg"}],
            "consumerDataSet": []
        });
        let heartbeat = command(
            RequestCode::HEART_BEAT,
            &[],
            heartbeat.to_string().as_bytes(),
        );
        assert_eq!(request(&client, heartbeat).await.code, 0);

        // A half born at the start of time (its age overflows a subtraction), then one born
        // ten seconds ago that names a topic of its own in REAL_TOPIC.
        let half = "TRAN_MSG\u{1}true\u{2}PGROUP\u{1}hostile-pg";
        let min = i64::MIN.to_string();
        let fields = send_fields("Txn", "0", half, &[("g", &min)]);
        let response = request(
            &client,
            command(RequestCode::SEND_MESSAGE_V2, &fields, b"old"),
        )
        .await;
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let born = (ferromq::broker::state::now_ms() - 10_000).to_string();
        let injected = format!("{half}\u{2}REAL_TOPIC\u{1}Victim\u{2}REAL_QID\u{1}3");
        let fields = send_fields("Txn", "1", &injected, &[("g", &born)]);
        let response = request(
            &client,
            command(RequestCode::SEND_MESSAGE_V2, &fields, b"new"),
        )
        .await;
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let half_offset = stored_offset(&response);

        // The check walks past the first and asks about the second.
        let check = tokio::time::timeout(Duration::from_secs(30), async {
            loop {
                let next = futures::StreamExt::next(&mut inbound)
                    .await
                    .expect("a request");
                if next.code == RequestCode::CHECK_TRANSACTION_STATE.0 {
                    return next;
                }
            }
        })
        .await
        .expect("a CHECK_TRANSACTION_STATE within 30 s");
        // It names the copy the check stored of the second half.
        let Ok(Record::Message { record, .. }) = decode_record(&check.body, true) else {
            panic!("the check carries the half");
        };
        assert_eq!(record.body, b"new");
        let copy_offset: i64 = check.ext("commitLogOffset").unwrap().parse().unwrap();
        assert!(copy_offset > half_offset);

        let half_offset = copy_offset.to_string();
        let table_offset = check.ext("tranStateTableOffset").unwrap().to_owned();
        let commit = command(
            RequestCode::END_TRANSACTION,
            &[
                ("producerGroup", "hostile-pg"),
                ("tranStateTableOffset", &table_offset),
                ("commitLogOffset", &half_offset),
                ("commitOrRollback", "8"),
                ("fromTransactionCheck", "true"),
                ("msgId", "00"),
            ],
            b"",
        );
        let response = request(&client, commit).await;
        assert_eq!(response.code, 0, "{:?}", response.remark);
        // Committed where it was sent, not where its REAL_TOPIC said.
        wait_dispatched(&client, "Txn", "1", 1).await;
        let committed = records(&request(&client, pull("Txn", "1", "0")).await);
        assert_eq!(committed.len(), 1);
        assert_eq!(committed[0].body, b"new");
        let victim = request(&client, pull("Victim", "3", "0")).await;
        assert_eq!(victim.code, ResponseCode::TOPIC_NOT_EXIST.0);
        still_serving(&client, "Kept").await;
    });
}

#[test]
fn group_names_that_are_paths_never_reach_the_store() {
    let dir = TempDir::on_disk("hostile-paths");
    let broker = broker(&dir, "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        store_before(&client, "Kept").await;
        let response = request(&client, send("Paths", "0", "", b"x")).await;
        let offset = stored_offset(&response).to_string();
        for group in ["../../../escaped", "a/b", &"g".repeat(200)] {
            let heartbeat = serde_json::json!({
                "clientID": "127.0.0.1@paths",
                "consumerDataSet": [{"groupName": group, "subscriptionDataSet": []}]
            });
            let heartbeat = command(
                RequestCode::HEART_BEAT,
                &[],
                heartbeat.to_string().as_bytes(),
            );
            assert_eq!(request(&client, heartbeat).await.code, 0);
            let back = command(
                RequestCode::CONSUMER_SEND_MSG_BACK,
                &[
                    ("offset", &offset),
                    ("group", group),
                    ("delayLevel", "-1"),
                    ("originMsgId", "00"),
                    ("originTopic", "Paths"),
                ],
                b"",
            );
            let response = request(&client, back).await;
            assert_eq!(response.code, ResponseCode::SYSTEM_ERROR.0, "{group}");
            let remark = response.remark.unwrap();
            assert!(remark.starts_with("the retry topic of group["), "{remark}");
        }
        still_serving(&client, "Kept").await;
    });
    assert!(
        !escaped(dir.path()),
        "nothing was written outside the store directory"
    );
}

/// Whether anything named `escaped` exists under `dir` outside `dir/store`.
fn escaped(dir: &Path) -> bool {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap().flatten() {
            let path = entry.path();
            if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().contains("escaped"))
            {
                return true;
            }
            if path.is_dir() {
                pending.push(path);
            }
        }
    }
    dir.parent()
        .is_some_and(|parent| parent.join("escaped").exists())
}

/// Sends `command` as a frame in `serialize` whose header has the bytes of `from` replaced
/// by `to` (of the same length: what our encoder cannot make), on a connection of its own;
/// its answer.
async fn raw_request(
    addr: SocketAddr,
    command: &RemotingCommand,
    serialize: SerializeType,
    from: &[u8],
    to: &[u8],
) -> RemotingCommand {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut command = command.clone();
    command.opaque = 77;
    command.serialize_type = serialize;
    let mut header = Vec::new();
    match serialize {
        SerializeType::Json => {
            ferromq::remoting::serialize_json::encode_header(&command, &mut header)
        }
        SerializeType::RocketMq => {
            ferromq::remoting::serialize_rocketmq::encode_header(&command, &mut header);
        }
    }
    let at = header.windows(from.len()).position(|w| w == from).unwrap();
    header[at..at + to.len()].copy_from_slice(to);
    let mut frame = Vec::new();
    frame.extend_from_slice(&u32::try_from(4 + header.len()).unwrap().to_be_bytes());
    let word = (u32::from(serialize.code()) << 24) | u32::try_from(header.len()).unwrap();
    frame.extend_from_slice(&word.to_be_bytes());
    frame.extend_from_slice(&header);
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(&frame).await.unwrap();
    let mut decoder = ferromq::remoting::FrameDecoder::new(1 << 25);
    let mut chunk = vec![0u8; 1 << 16];
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            if let Some(answer) = decoder.next_command().unwrap() {
                return answer;
            }
            let n = stream.read(&mut chunk).await.unwrap();
            assert!(n > 0, "the broker closed the connection");
            decoder.extend(&chunk[..n]);
        }
    })
    .await
    .expect("an answer within 20 s")
}

#[test]
fn answers_too_big_for_a_frame_go_as_an_error() {
    let dir = TempDir::on_disk("hostile-echo");
    let broker = broker(&dir, "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        store_before(&client, "Kept").await;
        for serialize in [SerializeType::Json, SerializeType::RocketMq] {
            // A topic of 6 MiB of bytes that are not UTF-8: each reads as U+FFFD, three
            // bytes, so the remark that echoes it is 18 MiB, over what a header can hold.
            let placeholder = vec![b'x'; 6 << 20];
            let topic = String::from_utf8(placeholder.clone()).unwrap();
            let bad = vec![0xFF; placeholder.len()];
            let answer = raw_request(
                broker.addr,
                &pull(&topic, "0", "0"),
                serialize,
                &placeholder,
                &bad,
            )
            .await;
            assert!(answer.is_response());
            assert_eq!(answer.code, ResponseCode::SYSTEM_ERROR.0, "{serialize:?}");
            let remark = answer.remark.unwrap();
            assert!(remark.contains("does not fit a frame"), "{remark}");
        }
        still_serving(&client, "Kept").await;
    });
}

#[test]
fn system_topics_cannot_be_redefined_and_auto_creation_survives_the_attempt() {
    let dir = TempDir::on_disk("hostile-system-topics");
    let broker = broker(&dir, "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        store_before(&client, "Kept").await;
        for topic in [
            "TBW102",
            "SCHEDULE_TOPIC_XXXX",
            "RMQ_SYS_TRANS_HALF_TOPIC",
            "DefaultCluster",
            "DefaultCluster_REPLY_TOPIC",
            "rmq_sys_mine",
        ] {
            let create = command(
                RequestCode::UPDATE_AND_CREATE_TOPIC,
                &[
                    ("topic", topic),
                    ("defaultTopic", "TBW102"),
                    ("readQueueNums", "1"),
                    ("writeQueueNums", "1"),
                    ("perm", "6"),
                    ("topicFilterType", "SINGLE_TAG"),
                ],
                b"",
            );
            // INVALID_PARAMETER, as Java 5.x (4.9.8: SYSTEM_ERROR).
            let response = request(&client, create).await;
            assert_eq!(response.code, ResponseCode::INVALID_PARAMETER.0, "{topic}");
            let expected = format!("The topic[{topic}] is conflict with system topic.");
            assert_eq!(response.remark.as_deref(), Some(expected.as_str()));
            let delete = command(
                RequestCode::DELETE_TOPIC_IN_BROKER,
                &[("topic", topic)],
                b"",
            );
            let response = request(&client, delete).await;
            assert_eq!(response.code, ResponseCode::INVALID_PARAMETER.0, "{topic}");
            assert_eq!(response.remark.as_deref(), Some(expected.as_str()));
        }
        let forbidden = request(&client, send("SCHEDULE_TOPIC_XXXX", "0", "", b"x")).await;
        assert_eq!(forbidden.code, ResponseCode::NO_PERMISSION.0);
        assert_eq!(
            forbidden.remark.as_deref(),
            Some("Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden.")
        );
        // TBW102 keeps its inherit bit: a new topic is still made from it.
        let response = request(&client, send("MadeFromTbw102", "0", "", b"x")).await;
        assert_eq!(response.code, 0, "{:?}", response.remark);
        still_serving(&client, "Kept").await;
    });
}

#[test]
fn namesrv_answer_too_big_for_a_frame_goes_as_an_error() {
    let namesrv = common::NamesrvProcess::start("");
    runtime().block_on(async {
        // A KV value of 6 MiB of bytes that are not UTF-8 is kept as 18 MiB of U+FFFD; the
        // answer that carries it back cannot be a frame.
        let placeholder = vec![b'x'; 6 << 20];
        let value = String::from_utf8(placeholder.clone()).unwrap();
        let put = command(
            RequestCode::PUT_KV_CONFIG,
            &[("namespace", "hostile"), ("key", "big"), ("value", &value)],
            b"",
        );
        let bad = vec![0xFF; placeholder.len()];
        let answer = raw_request(namesrv.addr, &put, SerializeType::Json, &placeholder, &bad).await;
        assert_eq!(answer.code, 0, "{:?}", answer.remark);
        let get = command(
            RequestCode::GET_KV_CONFIG,
            &[("namespace", "hostile"), ("key", "big")],
            b"",
        );
        let client = connect(namesrv.addr, SerializeType::Json).await;
        let answer = request(&client, get).await;
        assert_eq!(answer.code, ResponseCode::SYSTEM_ERROR.0);
        assert!(answer.remark.unwrap().contains("does not fit a frame"));
        let small = command(
            RequestCode::PUT_KV_CONFIG,
            &[("namespace", "hostile"), ("key", "small"), ("value", "v")],
            b"",
        );
        assert_eq!(request(&client, small).await.code, 0);
        let get = command(
            RequestCode::GET_KV_CONFIG,
            &[("namespace", "hostile"), ("key", "small")],
            b"",
        );
        assert_eq!(request(&client, get).await.ext("value"), Some("v"));
    });
}
