//! The broker over real sockets: a `ferromq broker` process, driven with the library's
//! remoting client in both header serializations — sends, pulls, long polling, heartbeats,
//! consumer offsets, restart, and bad input answered with Java's codes and remarks.

mod common;

use common::{connect, BrokerProcess, TempDir};
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::headers::{
    CreateTopicRequestHeader, GetConsumerListByGroupRequestHeader, GetMaxOffsetRequestHeader,
    OffsetResponseHeader, PullMessageRequestHeader, PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader,
    SendMessageRequestHeaderV2, SendMessageResponseHeader, UpdateConsumerOffsetRequestHeader,
};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use ferromq::store::message::{decode_offset_msg_id, decode_record, Record};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

fn send_request(topic: &str, queue_id: i32, body: &[u8], tags: &str) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: "test-producer".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: queue_id,
        f: 0,
        g: 1_700_000_000_000,
        h: 0,
        i: Some(format!("TAGS\u{1}{tags}\u{2}WAIT\u{1}true\u{2}")),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(false),
        n: None,
    };
    let mut request = RemotingCommand::request_with_header(RequestCode::SEND_MESSAGE_V2, &header);
    request.body = body.to_vec();
    request
}

fn pull_request(topic: &str, queue_id: i32, offset: i64, suspend_ms: i64) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: "test-group".into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 32,
        // Suspend (0x2) when asked, and the subscription in the request (0x4).
        sys_flag: 0x4 | if suspend_ms > 0 { 0x2 } else { 0 },
        commit_offset: 0,
        suspend_timeout_millis: suspend_ms,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
        request_source: None,
        broker_name: None,
    };
    RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header)
}

async fn send(client: &RemotingClient, topic: &str, queue: i32, body: &[u8]) -> RemotingCommand {
    client
        .request(send_request(topic, queue, body, "a"))
        .await
        .unwrap()
}

async fn max_offset(client: &RemotingClient, topic: &str, queue_id: i32) -> i64 {
    let request = RemotingCommand::request_with_header(
        RequestCode::GET_MAX_OFFSET,
        &GetMaxOffsetRequestHeader {
            topic: topic.into(),
            queue_id,
            committed: None,
        },
    );
    let response = client.request(request).await.unwrap();
    let header: OffsetResponseHeader = response.decode_header().unwrap();
    header.offset
}

/// Waits until `topic`'s queue `queue_id` has a max offset of at least `at_least`; fails the
/// test after 10 s instead of hanging.
async fn wait_max_offset(client: &RemotingClient, topic: &str, queue_id: i32, at_least: i64) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let max = max_offset(client, topic, queue_id).await;
        if max >= at_least {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}:{queue_id} still ends at {max} after 10 s, not at {at_least}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// (flag, body, properties) of every record in a pull response.
fn records(response: &RemotingCommand) -> Vec<(i32, Vec<u8>, String)> {
    let mut at = 0;
    let mut found = Vec::new();
    while at < response.body.len() {
        let Ok(Record::Message { record, size }) = decode_record(&response.body[at..], true) else {
            panic!("pull body is not records at {at}");
        };
        let properties = String::from_utf8(record.properties.to_vec()).unwrap();
        found.push((record.flag, record.body.to_vec(), properties));
        at += size;
    }
    found
}

/// Bodies of the records in a pull response.
fn bodies(response: &RemotingCommand) -> Vec<Vec<u8>> {
    records(response)
        .into_iter()
        .map(|(_, body, _)| body)
        .collect()
}

/// One message of a batch body, as the producer encodes it.
fn encode(flag: i32, body: &[u8], properties: &str) -> Vec<u8> {
    let mut out = Vec::new();
    ferromq::broker::batch::BatchEntry {
        flag,
        body: body.to_vec(),
        properties: properties.as_bytes().to_vec(),
    }
    .encode(&mut out);
    out
}

fn batch_request(topic: &str, queue_id: i32, sys_flag: i32, properties: &str) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        a: "batch-producer".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: queue_id,
        f: sys_flag,
        g: 1_700_000_000_000,
        h: 0,
        i: Some(properties.into()),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(true),
        n: None,
    };
    RemotingCommand::request_with_header(RequestCode::SEND_BATCH_MESSAGE, &header)
}

#[test]
fn sends_and_pulls_round_trip_in_both_serializations() {
    let dir = TempDir::on_disk("broker-roundtrip");
    let broker = BrokerProcess::start(&dir.path().join("store"), "flushDiskType=SYNC_FLUSH");
    runtime().block_on(async {
        for (round, serialize) in [SerializeType::Json, SerializeType::RocketMq]
            .into_iter()
            .enumerate()
        {
            let client = connect(broker.addr, serialize).await;
            for i in 0..10 {
                let body = format!("{serialize:?}-{i}").into_bytes();
                let response = send(&client, "BrokerT", 1, &body).await;
                assert_eq!(response.code, 0, "{:?}", response.remark);
                let header: SendMessageResponseHeader = response.decode_header().unwrap();
                assert_eq!(header.queue_id, 1);
                assert_eq!(header.queue_offset, (round * 10 + i) as i64);
                assert_eq!(header.msg_id.len(), 32, "offset msgId of an IPv4 broker");
                assert!(header.msg_id.starts_with("7F000001"), "{}", header.msg_id);
                let (store_host, _) = decode_offset_msg_id(&header.msg_id).unwrap();
                assert_eq!(
                    store_host, broker.addr,
                    "the id names the port actually bound"
                );
            }
            wait_max_offset(&client, "BrokerT", 1, (round * 10 + 10) as i64).await;
            let response = client
                .request(pull_request("BrokerT", 1, (round * 10) as i64, 0))
                .await
                .unwrap();
            assert_eq!(response.code, 0, "{:?}", response.remark);
            let header: PullMessageResponseHeader = response.decode_header().unwrap();
            assert_eq!(header.next_begin_offset, (round * 10 + 10) as i64);
            assert_eq!(header.max_offset, (round * 10 + 10) as i64);
            let expected: Vec<Vec<u8>> = (0..10)
                .map(|i| format!("{serialize:?}-{i}").into_bytes())
                .collect();
            assert_eq!(bodies(&response), expected);
        }
    });
}

#[test]
fn a_waiting_pull_returns_as_soon_as_a_message_arrives() {
    let dir = TempDir::on_disk("broker-longpoll");
    let broker = BrokerProcess::start(&dir.path().join("store"), "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        assert_eq!(send(&client, "PollT", 0, b"first").await.code, 0);
        // A send is acknowledged when stored; dispatch makes it pullable a moment later.
        wait_max_offset(&client, "PollT", 0, 1).await;
        // Nothing at offset 1 yet: the pull waits up to 10 s.
        let waiting = {
            let client = client.clone();
            tokio::spawn(async move {
                let response = client
                    .request(pull_request("PollT", 0, 1, 10_000))
                    .await
                    .unwrap();
                (response, Instant::now())
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        if waiting.is_finished() {
            let (response, _) = waiting.await.unwrap();
            panic!(
                "the pull did not wait: {} {:?}",
                response.code, response.remark
            );
        }
        let sent = send(&client, "PollT", 0, b"second").await;
        let acked = Instant::now();
        assert_eq!(sent.code, 0);
        let (response, returned) = tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("the pull returns long before its 10 s suspend time")
            .unwrap();
        assert_eq!(response.code, 0, "{:?}", response.remark);
        assert_eq!(bodies(&response), vec![b"second".to_vec()]);
        eprintln!(
            "long poll answered {:?} after the send was acknowledged",
            returned.saturating_duration_since(acked)
        );
        // An absurd suspend time is served like a long one, not a crash.
        let absurd = {
            let client = client.clone();
            tokio::spawn(async move {
                client
                    .request(pull_request("PollT", 0, 2, i64::MAX))
                    .await
                    .unwrap()
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(send(&client, "PollT", 0, b"third").await.code, 0);
        let response = tokio::time::timeout(Duration::from_secs(5), absurd)
            .await
            .expect("woken by the send")
            .unwrap();
        assert_eq!(bodies(&response), vec![b"third".to_vec()]);
        // With nothing arriving, it answers PULL_NOT_FOUND when the suspend time runs out.
        let started = Instant::now();
        let response = client
            .request(pull_request("PollT", 0, 3, 300))
            .await
            .unwrap();
        assert_eq!(response.code, ResponseCode::PULL_NOT_FOUND.0);
        assert!(started.elapsed() >= Duration::from_millis(250));
    });
}

#[test]
fn heartbeats_offsets_and_messages_survive_a_restart() {
    let dir = TempDir::on_disk("broker-restart");
    let store = dir.path().join("store");
    let mut broker = BrokerProcess::start(&store, "flushConsumerOffsetInterval=100");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let mut heartbeat = RemotingCommand::request(RequestCode::HEART_BEAT);
        heartbeat.body = br#"{"clientID":"127.0.0.1@test","producerDataSet":[],
            "consumerDataSet":[{"groupName":"restart-group","consumeType":"CONSUME_PASSIVELY",
            "messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",
            "subscriptionDataSet":[{"topic":"RestartT","subString":"*","tagsSet":[],
            "codeSet":[],"subVersion":1}],"unitMode":false}]}"#
            .to_vec();
        assert_eq!(client.request(heartbeat).await.unwrap().code, 0);
        let list = RemotingCommand::request_with_header(
            RequestCode::GET_CONSUMER_LIST_BY_GROUP,
            &GetConsumerListByGroupRequestHeader {
                consumer_group: "restart-group".into(),
            },
        );
        let response = client.request(list).await.unwrap();
        assert_eq!(response.code, 0);
        assert_eq!(
            String::from_utf8(response.body).unwrap(),
            r#"{"consumerIdList":["127.0.0.1@test"]}"#
        );
        for i in 0..5 {
            assert_eq!(
                send(&client, "RestartT", 2, format!("m{i}").as_bytes())
                    .await
                    .code,
                0
            );
        }
        let update = RemotingCommand::request_with_header(
            RequestCode::UPDATE_CONSUMER_OFFSET,
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: "restart-group".into(),
                topic: "RestartT".into(),
                queue_id: 2,
                commit_offset: 3,
            },
        );
        assert_eq!(client.request(update).await.unwrap().code, 0);
    });
    assert!(broker.terminate().success());
    let broker = BrokerProcess::start(&store, "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::RocketMq).await;
        let query = RemotingCommand::request_with_header(
            RequestCode::QUERY_CONSUMER_OFFSET,
            &QueryConsumerOffsetRequestHeader {
                consumer_group: "restart-group".into(),
                topic: "RestartT".into(),
                queue_id: 2,
                set_zero_if_not_found: None,
            },
        );
        let response = client.request(query).await.unwrap();
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let header: QueryConsumerOffsetResponseHeader = response.decode_header().unwrap();
        assert_eq!(header.offset, Some(3));
        let max = RemotingCommand::request_with_header(
            RequestCode::GET_MAX_OFFSET,
            &GetMaxOffsetRequestHeader {
                topic: "RestartT".into(),
                queue_id: 2,
                committed: None,
            },
        );
        let response = client.request(max).await.unwrap();
        let header: OffsetResponseHeader = response.decode_header().unwrap();
        assert_eq!(header.offset, 5);
        let response = client
            .request(pull_request("RestartT", 2, 3, 0))
            .await
            .unwrap();
        assert_eq!(bodies(&response), vec![b"m3".to_vec(), b"m4".to_vec()]);
        let next = send(&client, "RestartT", 2, b"m5").await;
        let header: SendMessageResponseHeader = next.decode_header().unwrap();
        assert_eq!(
            header.queue_offset, 5,
            "queue offsets continue after a restart"
        );
    });
}

#[test]
fn bad_input_gets_java_codes_and_remarks_and_the_broker_keeps_serving() {
    let dir = TempDir::on_disk("broker-bad-input");
    let broker = BrokerProcess::start(&dir.path().join("store"), "maxMessageSize=1024");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let big = send(&client, "BadT", 0, &[b'x'; 2048]).await;
        assert_eq!(big.code, ResponseCode::MESSAGE_ILLEGAL.0);
        assert!(big.remark.unwrap().contains("msg body length limit 1024B"));

        // A request that fails a check: INVALID_PARAMETER, as Java 5.x (4.9.8: SYSTEM_ERROR).
        let bad_topic = send(&client, "bad topic!", 0, b"x").await;
        assert_eq!(bad_topic.code, ResponseCode::INVALID_PARAMETER.0);
        assert!(bad_topic
            .remark
            .unwrap()
            .contains("contains illegal characters"));

        assert_eq!(send(&client, "BadT", 0, b"ok").await.code, 0);
        let bad_queue = send(&client, "BadT", 99, b"x").await;
        assert_eq!(bad_queue.code, ResponseCode::INVALID_PARAMETER.0);
        assert!(bad_queue
            .remark
            .unwrap()
            .starts_with("request queueId[99] is illegal"));

        let pull_bad_queue = client
            .request(pull_request("BadT", 99, 0, 0))
            .await
            .unwrap();
        assert_eq!(pull_bad_queue.code, ResponseCode::INVALID_PARAMETER.0);
        assert!(pull_bad_queue
            .remark
            .unwrap()
            .starts_with("queueId[99] is illegal"));

        let unknown_topic = client
            .request(pull_request("NoSuchT", 0, 0, 0))
            .await
            .unwrap();
        assert_eq!(unknown_topic.code, ResponseCode::TOPIC_NOT_EXIST.0);
        assert!(unknown_topic
            .remark
            .unwrap()
            .starts_with("topic[NoSuchT] not exist"));

        let past_end = client
            .request(pull_request("BadT", 0, 50, 0))
            .await
            .unwrap();
        assert_eq!(past_end.code, ResponseCode::PULL_OFFSET_MOVED.0);
        let header: PullMessageResponseHeader = past_end.decode_header().unwrap();
        assert_eq!(
            header.next_begin_offset, 0,
            "Java sends the consumer back to the min"
        );

        let unknown = client
            .request(RemotingCommand::request(RequestCode(9999)))
            .await
            .unwrap();
        assert_eq!(unknown.code, ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0);
        assert_eq!(
            unknown.remark.as_deref(),
            Some(" request type 9999 not supported")
        );

        let missing = client
            .request(RemotingCommand::request(RequestCode::SEND_MESSAGE_V2))
            .await
            .unwrap();
        assert_eq!(missing.code, ResponseCode::SYSTEM_ERROR.0);

        let after = send(&client, "BadT", 0, b"still serving").await;
        assert_eq!(after.code, 0);
        let header: SendMessageResponseHeader = after.decode_header().unwrap();
        assert_eq!(header.queue_offset, 1);
    });
}

#[test]
fn members_of_a_consumer_group_are_told_when_it_changes() {
    async fn next_notice(
        inbound: &mut ferromq::remoting::client::InboundRequests,
    ) -> RemotingCommand {
        use futures::StreamExt;
        tokio::time::timeout(Duration::from_secs(5), inbound.next())
            .await
            .expect("a notice within 5 s")
            .unwrap()
    }
    use ferromq::remoting::client::{connect_tokio, ClientConfig};
    let dir = TempDir::on_disk("broker-notify");
    let broker = BrokerProcess::start(&dir.path().join("store"), "");
    let heartbeat = |client: &str| {
        let mut request = RemotingCommand::request(RequestCode::HEART_BEAT);
        request.body = format!(
            r#"{{"clientID":"{client}","producerDataSet":[],"consumerDataSet":[{{
            "groupName":"notify-group","subscriptionDataSet":[{{"topic":"NotifyT",
            "subString":"*","subVersion":1}}]}}]}}"#
        )
        .into_bytes();
        request
    };
    runtime().block_on(async {
        let (first, mut first_inbound) = connect_tokio(broker.addr, ClientConfig::default())
            .await
            .unwrap();
        // Java notifies every member, the joining one included.
        assert_eq!(first.request(heartbeat("first")).await.unwrap().code, 0);
        let joined_self = next_notice(&mut first_inbound).await;
        assert_eq!(
            joined_self.request_code(),
            RequestCode::NOTIFY_CONSUMER_IDS_CHANGED
        );
        assert!(joined_self.is_oneway());
        assert_eq!(joined_self.ext("consumerGroup"), Some("notify-group"));
        // A heartbeat that changes nothing announces nothing; the second member joining does.
        assert_eq!(first.request(heartbeat("first")).await.unwrap().code, 0);
        let second = connect(broker.addr, SerializeType::RocketMq).await;
        assert_eq!(second.request(heartbeat("second")).await.unwrap().code, 0);
        let joined = next_notice(&mut first_inbound).await;
        assert_eq!(
            joined.request_code(),
            RequestCode::NOTIFY_CONSUMER_IDS_CHANGED
        );
        // The second member leaving (its connection closes) is announced as well.
        drop(second);
        let left = next_notice(&mut first_inbound).await;
        assert_eq!(
            left.request_code(),
            RequestCode::NOTIFY_CONSUMER_IDS_CHANGED
        );
        let list = RemotingCommand::request_with_header(
            RequestCode::GET_CONSUMER_LIST_BY_GROUP,
            &GetConsumerListByGroupRequestHeader {
                consumer_group: "notify-group".into(),
            },
        );
        let response = first.request(list).await.unwrap();
        assert_eq!(
            String::from_utf8(response.body).unwrap(),
            r#"{"consumerIdList":["first"]}"#
        );
        let connections = RemotingCommand::request_with_header(
            RequestCode::GET_CONSUMER_CONNECTION_LIST,
            &ferromq::remoting::headers::GetConsumerConnectionListRequestHeader {
                consumer_group: "notify-group".into(),
            },
        );
        let response = first.request(connections).await.unwrap();
        let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
        assert_eq!(body["connectionSet"][0]["clientId"], "first");
        assert_eq!(body["connectionSet"][0]["language"], "JAVA");
        assert_eq!(body["subscriptionTable"]["NotifyT"]["subString"], "*");
    });
}

#[test]
fn admin_requests_manage_topics_groups_locks_and_find_messages() {
    use ferromq::remoting::headers::{
        CreateTopicRequestHeader, DeleteTopicRequestHeader, QueryMessageRequestHeader,
        ViewMessageRequestHeader,
    };
    let dir = TempDir::on_disk("broker-admin");
    let broker = BrokerProcess::start(&dir.path().join("store"), "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let create = RemotingCommand::request_with_header(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &CreateTopicRequestHeader {
                topic: "AdminT".into(),
                default_topic: "TBW102".into(),
                read_queue_nums: 3,
                write_queue_nums: 3,
                perm: 6,
                topic_filter_type: "SINGLE_TAG".into(),
                topic_sys_flag: Some(0),
                order: false,
                attributes: None,
                force: None,
            },
        );
        assert_eq!(client.request(create).await.unwrap().code, 0);
        // Answered once the file holds it, as Java persists before it answers.
        let config_file = |name: &str| {
            std::fs::read_to_string(dir.path().join("store/config").join(name)).unwrap()
        };
        assert!(config_file("topics.json").contains("\"AdminT\""));
        let all = client
            .request(RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG))
            .await
            .unwrap();
        let topics: serde_json::Value = serde_json::from_slice(&all.body).unwrap();
        assert_eq!(topics["topicConfigTable"]["AdminT"]["writeQueueNums"], 3);
        assert!(topics["topicConfigTable"]["TBW102"].is_object());

        // A message with a key: found by key, and by its offset message id.
        let mut keyed = send_request("AdminT", 2, b"find me", "t");
        if let Some(fields) = keyed.ext_fields.as_mut() {
            fields.insert("i", "KEYS\u{1}order-42\u{2}");
        }
        let sent = client.request(keyed).await.unwrap();
        let header: SendMessageResponseHeader = sent.decode_header().unwrap();
        let physical = i64::from_str_radix(&header.msg_id[16..], 16).unwrap();
        let view = RemotingCommand::request_with_header(
            RequestCode::VIEW_MESSAGE_BY_ID,
            &ViewMessageRequestHeader {
                offset: physical,
                topic: None,
            },
        );
        let viewed = client.request(view).await.unwrap();
        assert_eq!(viewed.code, 0, "{:?}", viewed.remark);
        assert_eq!(bodies(&viewed), vec![b"find me".to_vec()]);
        let query = |key: &str| {
            RemotingCommand::request_with_header(
                RequestCode::QUERY_MESSAGE,
                &QueryMessageRequestHeader {
                    topic: "AdminT".into(),
                    key: key.into(),
                    max_num: 32,
                    begin_timestamp: 0,
                    end_timestamp: i64::MAX,
                },
            )
        };
        // The IndexFile is written by dispatch, after the send's answer: poll, bounded.
        let mut found = client.request(query("order-42")).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while found.code != 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
            found = client.request(query("order-42")).await.unwrap();
        }
        assert_eq!(bodies(&found), vec![b"find me".to_vec()]);
        let missing = client.request(query("no-such-key")).await.unwrap();
        assert_eq!(missing.code, ResponseCode::QUERY_NOT_FOUND.0);

        // Subscription groups.
        let mut group = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP);
        group.body = br#"{"groupName":"admin-group","retryMaxTimes":3}"#.to_vec();
        assert_eq!(client.request(group).await.unwrap().code, 0);
        assert!(config_file("subscriptionGroup.json").contains("\"admin-group\""));
        let groups = client
            .request(RemotingCommand::request(
                RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
            ))
            .await
            .unwrap();
        let groups: serde_json::Value = serde_json::from_slice(&groups.body).unwrap();
        assert_eq!(
            groups["subscriptionGroupTable"]["admin-group"]["retryMaxTimes"],
            3
        );

        // Queue locks: the first client gets the queue, the second does not.
        let lock = |client_id: &str| {
            let mut request = RemotingCommand::request(RequestCode::LOCK_BATCH_MQ);
            request.body = format!(
                r#"{{"consumerGroup":"admin-group","clientId":"{client_id}","mqSet":[
                {{"topic":"AdminT","brokerName":"b","queueId":1}}]}}"#
            )
            .into_bytes();
            request
        };
        let first = client.request(lock("c1")).await.unwrap();
        let first: serde_json::Value = serde_json::from_slice(&first.body).unwrap();
        assert_eq!(first["lockOKMQSet"].as_array().unwrap().len(), 1);
        let second = client.request(lock("c2")).await.unwrap();
        let second: serde_json::Value = serde_json::from_slice(&second.body).unwrap();
        assert!(second["lockOKMQSet"].as_array().unwrap().is_empty());

        // Stats: the fastjson maps keyed by message queue objects, as Java writes them.
        use ferromq::remoting::headers::{
            GetConsumeStatsRequestHeader, GetConsumerConnectionListRequestHeader,
            GetTopicStatsInfoRequestHeader,
        };
        let stats = RemotingCommand::request_with_header(
            RequestCode::GET_TOPIC_STATS_INFO,
            &GetTopicStatsInfoRequestHeader {
                topic: "AdminT".into(),
            },
        );
        let stats = String::from_utf8(client.request(stats).await.unwrap().body).unwrap();
        assert!(
            stats.starts_with(r#"{"offsetTable":{{"brokerName":"#),
            "{stats}"
        );
        assert!(stats.contains(r#""queueId":2,"topic":"AdminT"}:{"lastUpdateTimestamp":"#));
        assert!(stats.contains(r#""maxOffset":1,"minOffset":0}"#), "{stats}");
        let commit = RemotingCommand::request_with_header(
            RequestCode::UPDATE_CONSUMER_OFFSET,
            &UpdateConsumerOffsetRequestHeader {
                consumer_group: "admin-group".into(),
                topic: "AdminT".into(),
                queue_id: 2,
                commit_offset: 1,
            },
        );
        assert_eq!(client.request(commit).await.unwrap().code, 0);
        let consume = RemotingCommand::request_with_header(
            RequestCode::GET_CONSUME_STATS,
            &GetConsumeStatsRequestHeader {
                consumer_group: "admin-group".into(),
                topic: None,
                topic_list: None,
            },
        );
        let consume = String::from_utf8(client.request(consume).await.unwrap().body).unwrap();
        assert!(
            consume
                .contains(r#""queueId":2,"topic":"AdminT"}:{"brokerOffset":1,"consumerOffset":1"#),
            "{consume}"
        );
        let offline = RemotingCommand::request_with_header(
            RequestCode::GET_CONSUMER_CONNECTION_LIST,
            &GetConsumerConnectionListRequestHeader {
                consumer_group: "nobody".into(),
            },
        );
        let offline = client.request(offline).await.unwrap();
        assert_eq!(offline.code, ResponseCode::CONSUMER_NOT_ONLINE.0);
        assert_eq!(
            offline.remark.as_deref(),
            Some("the consumer group[nobody] not online")
        );

        let delete = RemotingCommand::request_with_header(
            RequestCode::DELETE_TOPIC_IN_BROKER,
            &DeleteTopicRequestHeader {
                topic: "AdminT".into(),
            },
        );
        assert_eq!(client.request(delete).await.unwrap().code, 0);
        assert!(!config_file("topics.json").contains("\"AdminT\""));
        let pull = client
            .request(pull_request("AdminT", 0, 0, 0))
            .await
            .unwrap();
        assert_eq!(pull.code, ResponseCode::TOPIC_NOT_EXIST.0);
    });
}

#[test]
fn a_batch_is_stored_in_order_and_answered_with_every_message_id() {
    let dir = TempDir::on_disk("broker-batch");
    let broker = BrokerProcess::start(&dir.path().join("store"), "flushDiskType=SYNC_FLUSH");
    runtime().block_on(async {
        for (round, serialize) in [SerializeType::Json, SerializeType::RocketMq]
            .into_iter()
            .enumerate()
        {
            let client = connect(broker.addr, serialize).await;
            let mut body = Vec::new();
            let mut expected = Vec::new();
            for i in 0..5 {
                let own = if i == 3 {
                    // The last pair without its separator: the broker adds one.
                    format!("TAGS\u{1}T{i}")
                } else {
                    format!("TAGS\u{1}T{i}\u{2}KEYS\u{1}K{i}\u{2}")
                };
                let message_body = format!("{serialize:?}-{i}").into_bytes();
                body.extend(encode(i, &message_body, &own));
                let own = own.trim_end_matches('\u{2}');
                let stored = format!("{own}\u{2}WAIT\u{1}true\u{2}CLUSTER\u{1}DefaultCluster");
                expected.push((i, message_body, stored));
            }
            let mut request = batch_request("BatchT", 2, 0, "WAIT\u{1}true\u{2}");
            request.body = body;
            let response = client.request(request).await.unwrap();
            assert_eq!(response.code, 0, "{:?}", response.remark);
            let header: SendMessageResponseHeader = response.decode_header().unwrap();
            assert_eq!(header.queue_id, 2);
            let first = i64::try_from(round * 5).unwrap();
            assert_eq!(header.queue_offset, first);
            let ids: Vec<&str> = header.msg_id.split(',').collect();
            assert_eq!(ids.len(), 5, "{}", header.msg_id);
            for id in &ids {
                assert_eq!(id.len(), 32, "offset msgId of an IPv4 broker: {id}");
                assert!(id.starts_with("7F000001"), "{id}");
            }
            let physical: Vec<u64> = ids
                .iter()
                .map(|id| u64::from_str_radix(&id[16..], 16).unwrap())
                .collect();
            assert!(physical.windows(2).all(|w| w[0] < w[1]), "{physical:?}");

            wait_max_offset(&client, "BatchT", 2, first + 5).await;
            let response = client
                .request(pull_request("BatchT", 2, first, 0))
                .await
                .unwrap();
            assert_eq!(response.code, 0, "{:?}", response.remark);
            assert_eq!(records(&response), expected);
        }
    });
}

#[test]
fn bad_batches_get_javas_codes_and_the_broker_keeps_serving() {
    let dir = TempDir::on_disk("broker-batch-bad");
    let broker = BrokerProcess::start(&dir.path().join("store"), "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let illegal = "the message is illegal, maybe msg body or properties length not matched.";
        let good = encode(0, b"fine", "TAGS\u{1}a\u{2}");

        // No message at all.
        let response = client
            .request(batch_request("BatchBad", 0, 0, ""))
            .await
            .unwrap();
        assert_eq!(response.code, ResponseCode::MESSAGE_ILLEGAL.0);
        assert!(response.remark.as_deref().unwrap().starts_with(illegal));

        // The second message cut short.
        let mut request = batch_request("BatchBad", 0, 0, "");
        request.body = [good.clone(), good[..good.len() - 3].to_vec()].concat();
        let response = client.request(request).await.unwrap();
        assert_eq!(response.code, ResponseCode::SYSTEM_ERROR.0);
        let remark = response.remark.unwrap();
        assert!(remark.contains("batch message 1 is truncated"), "{remark}");

        // A delay level, and a transaction flag: not for batches.
        let mut request = batch_request("BatchBad", 0, 0, "DELAY\u{1}3\u{2}");
        request.body.clone_from(&good);
        let response = client.request(request).await.unwrap();
        assert_eq!(response.code, ResponseCode::MESSAGE_ILLEGAL.0);
        let mut request = batch_request("BatchBad", 0, 0x4, "");
        request.body.clone_from(&good);
        let response = client.request(request).await.unwrap();
        assert_eq!(response.code, ResponseCode::MESSAGE_ILLEGAL.0);

        // A bad topic name, as for a single send.
        let mut request = batch_request("bad topic", 0, 0, "");
        request.body.clone_from(&good);
        let response = client.request(request).await.unwrap();
        assert_eq!(response.code, ResponseCode::INVALID_PARAMETER.0);

        // Nothing of the above was stored, and a good batch still is.
        let mut request = batch_request("BatchBad", 0, 0, "");
        request.body = [good.clone(), good.clone()].concat();
        let response = client.request(request).await.unwrap();
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let header: SendMessageResponseHeader = response.decode_header().unwrap();
        assert_eq!(header.queue_offset, 0);
        assert_eq!(header.msg_id.split(',').count(), 2);
    });
}

#[test]
fn the_vip_channel_two_ports_below_serves_the_same_broker() {
    // A port whose VIP neighbour is free too (a race with other processes is possible but
    // harmless: the broker then starts without a VIP channel and this test reports it).
    let port = (0..50)
        .find_map(|_| {
            let main = std::net::TcpListener::bind("127.0.0.1:0").ok()?;
            let port = main.local_addr().ok()?.port();
            std::net::TcpListener::bind(("127.0.0.1", port.checked_sub(2)?)).ok()?;
            Some(port)
        })
        .expect("a free port pair");
    let dir = TempDir::on_disk("broker-vip");
    let broker =
        BrokerProcess::start_on(&dir.path().join("store"), "", &format!("127.0.0.1:{port}"));
    assert_eq!(broker.addr.port(), port);
    runtime().block_on(async {
        let vip = std::net::SocketAddr::new(broker.addr.ip(), port - 2);
        let client = connect(vip, SerializeType::RocketMq).await;
        let response = send(&client, "VipT", 0, b"through the VIP port").await;
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let main = connect(broker.addr, SerializeType::Json).await;
        wait_max_offset(&main, "VipT", 0, 1).await;
        let pulled = main.request(pull_request("VipT", 0, 0, 0)).await.unwrap();
        assert_eq!(bodies(&pulled), vec![b"through the VIP port".to_vec()]);
    });
}

/// The README's run command: `ferromq standalone` gives a name server that routes clients
/// to its broker, which stores and serves; SIGTERM stops both cleanly.
#[test]
fn standalone_routes_clients_to_its_broker_and_stops_cleanly() {
    use ferromq::remoting::headers::GetRouteInfoRequestHeader;
    let dir = TempDir::on_disk("standalone");
    let data = dir.path().join("data");
    let args = [
        "--data",
        data.to_str().unwrap(),
        "--namesrv-listen",
        "127.0.0.1:0",
        "--broker-listen",
        "127.0.0.1:0",
    ];
    // The name server reports its address first.
    let (mut child, namesrv, _log, _early) = common::spawn_server("standalone", &args);
    runtime().block_on(async {
        let lookup = connect(namesrv, SerializeType::Json).await;
        let route_of = |topic: &str| {
            RemotingCommand::request_with_header(
                RequestCode::GET_ROUTEINFO_BY_TOPIC,
                &GetRouteInfoRequestHeader {
                    topic: topic.into(),
                    accept_standard_json_only: Some(true),
                },
            )
        };
        // The broker registers right after it listens.
        let mut route = lookup.request(route_of("TBW102")).await.unwrap();
        for _ in 0..500 {
            if route.code == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
            route = lookup.request(route_of("TBW102")).await.unwrap();
        }
        assert_eq!(route.code, 0, "{:?}", route.remark);
        let route: serde_json::Value = serde_json::from_slice(&route.body).unwrap();
        let broker: SocketAddr = route["brokerDatas"][0]["brokerAddrs"]["0"]
            .as_str()
            .expect("a master address")
            .parse()
            .unwrap();
        let client = connect(broker, SerializeType::Json).await;
        let sent = send(&client, "StandaloneT", 0, b"hello standalone").await;
        assert_eq!(sent.code, 0, "{:?}", sent.remark);
        // As Java, a request that made a topic is answered once the name server has been
        // sent it: the auto-created topic's route is there at once...
        let found = lookup.request(route_of("StandaloneT")).await.unwrap();
        assert_eq!(found.code, 0, "auto-created topic: {:?}", found.remark);
        // ...and so is a new group's retry topic after its first heartbeat (a Java push
        // consumer that misses it takes its retry queue at a later rebalance, 20-40 s on,
        // and its first redeliveries come that late).
        for round in 0..20 {
            let group = format!("StandaloneGroup{round}");
            let mut heartbeat = RemotingCommand::request(RequestCode::HEART_BEAT);
            heartbeat.body = format!(
                r#"{{"clientID":"127.0.0.1@route","producerDataSet":[],
                "consumerDataSet":[{{"groupName":"{group}","consumeType":"CONSUME_PASSIVELY",
                "messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",
                "subscriptionDataSet":[],"unitMode":false}}]}}"#
            )
            .into_bytes();
            assert_eq!(client.request(heartbeat).await.unwrap().code, 0);
            let found = lookup
                .request(route_of(&format!("%RETRY%{group}")))
                .await
                .unwrap();
            assert_eq!(found.code, 0, "retry topic {round}: {:?}", found.remark);
        }
        wait_max_offset(&client, "StandaloneT", 0, 1).await;
        let pulled = client
            .request(pull_request("StandaloneT", 0, 0, 0))
            .await
            .unwrap();
        assert_eq!(bodies(&pulled), vec![b"hello standalone".to_vec()]);

        // A topic created by an admin request too, not at the next periodic registration
        // (30 s by default).
        let create = RemotingCommand::request_with_header(
            RequestCode::UPDATE_AND_CREATE_TOPIC,
            &CreateTopicRequestHeader {
                topic: "StandaloneNew".into(),
                default_topic: "TBW102".into(),
                read_queue_nums: 2,
                write_queue_nums: 2,
                perm: 6,
                topic_filter_type: "SINGLE_TAG".into(),
                topic_sys_flag: Some(0),
                order: false,
                attributes: None,
                force: None,
            },
        );
        assert_eq!(client.request(create).await.unwrap().code, 0);
        let found = lookup.request(route_of("StandaloneNew")).await.unwrap();
        assert_eq!(found.code, 0, "route of a new topic: {:?}", found.remark);
    });
    let status = common::terminate(&mut child, Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    assert!(data.join("store/commitlog").is_dir());
    assert!(
        !data.join("store/abort").exists(),
        "a clean stop removes the abort file"
    );
    assert!(data.join("store/config/topics.json").is_file());
}

/// DELETE_TOPIC_IN_BROKER drops the topic's queues as Java's `cleanUnusedTopic` does: made
/// again, the topic starts at offset 0 and hands new groups only its new messages, also
/// after a restart; its old ConsumeQueue files are gone. Sends racing the deletion (from
/// another connection) land in the old or the new queues, never in both.
#[test]
fn a_deleted_topic_made_again_starts_empty() {
    use ferromq::remoting::headers::DeleteTopicRequestHeader;
    let dir = TempDir::on_disk("delete-topic");
    let store = dir.path().join("store");
    let mut broker = BrokerProcess::start(&store, "");
    let topic = "DeleteMeT";
    let delete = || {
        RemotingCommand::request_with_header(
            RequestCode::DELETE_TOPIC_IN_BROKER,
            &DeleteTopicRequestHeader {
                topic: topic.into(),
            },
        )
    };
    let queue_dir = store.join("consumequeue").join(topic);
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        for round in 0..3 {
            for i in 0..5 {
                let sent = send(&client, topic, 0, format!("old-{round}-{i}").as_bytes()).await;
                assert_eq!(sent.code, 0, "{:?}", sent.remark);
                let header: SendMessageResponseHeader = sent.decode_header().unwrap();
                assert_eq!(
                    header.queue_offset, i,
                    "round {round}: the queue starts at 0"
                );
            }
            assert_eq!(max_offset(&client, topic, 0).await, 5);
            assert!(queue_dir.is_dir());
            let deleted = client.request(delete()).await.unwrap();
            assert_eq!(deleted.code, 0, "{:?}", deleted.remark);
            assert_eq!(max_offset(&client, topic, 0).await, 0, "round {round}");
            assert!(
                !queue_dir.exists(),
                "round {round}: the ConsumeQueues are gone"
            );
        }
        let sent = send(&client, topic, 0, b"new").await;
        let header: SendMessageResponseHeader = sent.decode_header().unwrap();
        assert_eq!(header.queue_offset, 0);
        wait_max_offset(&client, topic, 0, 1).await;
        let pulled = client.request(pull_request(topic, 0, 0, 0)).await.unwrap();
        assert_eq!(bodies(&pulled), vec![b"new".to_vec()]);
    });
    assert!(broker.terminate().success());
    let broker = BrokerProcess::start(&store, "");
    runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        assert_eq!(max_offset(&client, topic, 0).await, 1, "after a restart");
        let pulled = client.request(pull_request(topic, 0, 0, 0)).await.unwrap();
        assert_eq!(bodies(&pulled), vec![b"new".to_vec()]);

        // Sends from another connection while the topic is deleted: every message that was
        // answered is in exactly one incarnation, and the new queue has no holes.
        let sender = connect(broker.addr, SerializeType::Json).await;
        let (started, sending_now) = tokio::sync::oneshot::channel();
        let sending = tokio::spawn(async move {
            let mut offsets = Vec::new();
            let mut started = Some(started);
            for i in 0..200 {
                if i == 50 {
                    let _ = started.take().map(|s| s.send(()));
                }
                let sent = send(&sender, topic, 1, format!("race-{i}").as_bytes()).await;
                assert_eq!(sent.code, 0, "{:?}", sent.remark);
                let header: SendMessageResponseHeader = sent.decode_header().unwrap();
                offsets.push(header.queue_offset);
            }
            offsets
        });
        sending_now.await.unwrap();
        let deleted = client.request(delete()).await.unwrap();
        assert_eq!(deleted.code, 0, "{:?}", deleted.remark);
        let offsets = sending.await.unwrap();
        // The offsets restart at 0 once, at the deletion.
        let restarts = offsets.windows(2).filter(|w| w[1] != w[0] + 1).count();
        assert!(restarts <= 1, "{offsets:?}");
        assert!(
            offsets.windows(2).all(|w| w[1] == w[0] + 1 || w[1] == 0),
            "{offsets:?}"
        );
        let last = *offsets.last().unwrap();
        wait_max_offset(&client, topic, 1, last + 1).await;
        let mut next = 0;
        let mut read = 0;
        while next <= last {
            let pulled = client
                .request(pull_request(topic, 1, next, 0))
                .await
                .unwrap();
            assert_eq!(pulled.code, 0, "{:?}", pulled.remark);
            let header: PullMessageResponseHeader = pulled.decode_header().unwrap();
            read += bodies(&pulled).len();
            next = header.next_begin_offset;
        }
        assert_eq!(
            i64::try_from(read).unwrap(),
            last + 1,
            "the new queue has no holes"
        );
    });
}

/// 33,000 connections opened and dropped one after another (more than the 32,767 wakers a
/// glommio task may hold): each is accepted, and the broker answers at the end.
#[test]
fn more_connections_than_a_task_has_wakers_come_and_go_and_the_broker_answers() {
    let dir = TempDir::new("broker-churn");
    let broker = BrokerProcess::start(&dir.path().join("store"), "");
    let started = std::time::Instant::now();
    for i in 0..33_000 {
        let stream = std::net::TcpStream::connect(broker.addr)
            .unwrap_or_else(|e| panic!("connection {i} refused: {e}"));
        drop(stream);
    }
    eprintln!("33,000 connections in {:?}", started.elapsed());
    let code = runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let request = RemotingCommand::request(RequestCode::GET_ALL_TOPIC_CONFIG);
        client.request(request).await.map(|r| r.code)
    });
    assert_eq!(code.ok(), Some(0), "the broker answers after the churn");
}

/// suggestWhichBrokerId as 4.9.8 computes it: 0 (the master) without `slaveReadEnable`;
/// with it, the group's `whichBrokerWhenConsumeSlowly` (1) when the pull reads what is no
/// longer in memory (`accessMessageInMemoryMaxRatio=0`: the CommitLog's end is past even the
/// newest record's start, as in Java), else the group's `brokerId` (0).
#[test]
fn pulls_suggest_the_slave_for_old_messages_only_with_slave_read_enable() {
    let suggested = |config: &str| -> (i64, i64) {
        let dir = TempDir::new("broker-suggest");
        let broker = BrokerProcess::start(&dir.path().join("store"), config);
        runtime().block_on(async {
            let client = connect(broker.addr, SerializeType::Json).await;
            for i in 0..100 {
                let answer = send(&client, "Suggest", 0, format!("m{i}").as_bytes()).await;
                assert_eq!(answer.code, 0);
            }
            let mut suggestions = Vec::new();
            // The oldest, then the newest.
            for offset in [0, 99] {
                let mut answer = None;
                for _ in 0..100 {
                    let response = client.request(pull_request("Suggest", 0, offset, 0)).await;
                    let response = response.unwrap();
                    if response.code == 0 {
                        answer = Some(response);
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                let header: PullMessageResponseHeader = answer
                    .expect("a pull finds messages")
                    .decode_header()
                    .unwrap();
                suggestions.push(header.suggest_which_broker_id);
            }
            (suggestions[0], suggestions[1])
        })
    };
    assert_eq!(suggested("accessMessageInMemoryMaxRatio=0"), (0, 0));
    assert_eq!(
        suggested("slaveReadEnable=true\naccessMessageInMemoryMaxRatio=0"),
        (1, 1)
    );
    assert_eq!(suggested("slaveReadEnable=true"), (0, 0));
}

/// GET_BROKER_CONFIG shows the keys the broker read with the values it runs with:
/// `brokerIP2`, `rocketmqHome`, and `useTLS` (Java's default is `tls.enable`, TLS on the
/// broker's own client connections).
#[test]
fn get_broker_config_shows_broker_ip2_rocketmq_home_and_use_tls() {
    let dir = TempDir::new("broker-config-keys");
    let home = dir.path().join("home");
    let broker = BrokerProcess::start(
        &dir.path().join("store"),
        &format!(
            "brokerIP2=10.1.2.3\nrocketmqHome={}\ntls.enable=true\n",
            home.display()
        ),
    );
    let text = runtime().block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let request = RemotingCommand::request(RequestCode::GET_BROKER_CONFIG);
        let response = client.request(request).await.unwrap();
        assert_eq!(
            response.code,
            ResponseCode::SUCCESS.0,
            "{:?}",
            response.remark
        );
        String::from_utf8(response.body).unwrap()
    });
    let value = |key: &str| {
        text.lines()
            .find_map(|line| line.strip_prefix(&format!("{key}=")))
            .map(str::to_owned)
    };
    assert_eq!(value("brokerIP2").as_deref(), Some("10.1.2.3"), "{text}");
    assert_eq!(
        value("rocketmqHome"),
        Some(home.display().to_string()),
        "{text}"
    );
    assert_eq!(value("useTLS").as_deref(), Some("true"), "{text}");
    assert_eq!(value("brokerIP1").as_deref(), Some("127.0.0.1"), "{text}");
}

/// A key ferromq does not implement is named in a warning at start: a Java store key whose
/// feature ferromq lacks, RocketMQ 3's path keys (Java 4.9.8 has none: it keeps the
/// ConsumeQueue, index, checkpoint and abort file under `storePathRootDir`, and so does
/// ferromq), and a key no broker knows.
#[test]
fn keys_without_effect_are_named_in_a_warning_at_start() {
    let dir = TempDir::new("broker-unimplemented-keys");
    let elsewhere = dir.path().join("elsewhere");
    let store = dir.path().join("store");
    let broker = BrokerProcess::start(
        &store,
        &format!(
            "warmMapedFileEnable=true\nnoSuchBrokerKey=1\nstorePathConsumeQueue={0}/cq\n\
             storePathIndex={0}/index\nstoreCheckpoint={0}/checkpoint\nabortFile={0}/abort\n",
            elsewhere.display()
        ),
    );
    for key in [
        "warmMapedFileEnable",
        "noSuchBrokerKey",
        "storePathConsumeQueue",
        "storePathIndex",
        "storeCheckpoint",
        "abortFile",
    ] {
        let line = broker.wait_for_log(key, Duration::from_secs(5));
        let line = line.unwrap_or_else(|| panic!("no log line names {key}"));
        assert!(line.contains("WARN"), "{line}");
    }
    for name in ["consumequeue", "index", "checkpoint", "abort"] {
        assert!(
            store.join(name).exists(),
            "{name} is under storePathRootDir"
        );
    }
    assert!(!elsewhere.exists());
}
