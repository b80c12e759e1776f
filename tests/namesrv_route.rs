//! The name server as a process, driven over TCP the way brokers and clients drive it.
//!
//! Method: each test starts `ferromq namesrv` on an ephemeral loopback port with its KV file
//! in a temporary directory, registers brokers as a broker would (REGISTER_BROKER on one
//! connection per broker), and checks what clients see: exact route JSON in both flavours,
//! routes disappearing when a broker's connection closes or it stops registering, and the
//! documented outcome for malformed input while other connections keep being served.

mod common;

use common::{connect, NamesrvProcess};
use ferromq::remoting::body::{RegisterBrokerBody, TopicConfig};
use ferromq::remoting::client::RemotingClient;
use ferromq::remoting::codec::encode_to_vec;
use ferromq::remoting::headers::{
    GetKvConfigRequestHeader, GetRouteInfoRequestHeader, PutKvConfigRequestHeader,
    RegisterBrokerRequestHeader, UnregisterBrokerRequestHeader, WipeWritePermOfBrokerRequestHeader,
};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
use std::io::{Read, Write};
use std::time::{Duration, Instant};

const TIMEOUT: Duration = Duration::from_secs(5);

fn register_request(
    name: &str,
    addr: &str,
    topics: &[(&str, i32)],
    counter: i64,
) -> RemotingCommand {
    let mut body = RegisterBrokerBody::default();
    for (topic, queues) in topics {
        body.topic_config_serialize_wrapper.insert(TopicConfig {
            read_queue_nums: *queues,
            write_queue_nums: *queues,
            ..TopicConfig::named(topic)
        });
    }
    body.topic_config_serialize_wrapper.data_version.counter = counter;
    body.topic_config_serialize_wrapper.data_version.timestamp = 1_700_000_000_000;
    let body = serde_json::to_vec(&body).unwrap();
    let crc = ferromq::bytes::java_crc32(&body);
    let header = RegisterBrokerRequestHeader {
        broker_name: name.into(),
        broker_addr: addr.into(),
        cluster_name: "DefaultCluster".into(),
        ha_server_addr: "127.0.0.1:10912".into(),
        broker_id: 0,
        compressed: Some(false),
        body_crc32: Some(crc),
        ..Default::default()
    };
    RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header).with_body(body)
}

async fn route(client: &RemotingClient, topic: &str, version: i32) -> RemotingCommand {
    let header = GetRouteInfoRequestHeader {
        topic: topic.into(),
        accept_standard_json_only: None,
    };
    let mut request =
        RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
    request.version = version;
    client.request_timeout(request, TIMEOUT).await.unwrap()
}

async fn wait_until_route<F: Fn(&RemotingCommand) -> bool>(
    client: &RemotingClient,
    topic: &str,
    done: F,
) -> RemotingCommand {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = route(client, topic, 409).await;
        if done(&response) {
            return response;
        }
        assert!(
            Instant::now() < deadline,
            "route of {topic} never changed: {response:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn register_two_brokers_route_in_both_flavours_has_exact_shape() {
    let namesrv = NamesrvProcess::start("");
    let broker_a = connect(namesrv.addr, SerializeType::Json).await;
    let broker_b = connect(namesrv.addr, SerializeType::RocketMq).await;
    let client = connect(namesrv.addr, SerializeType::Json).await;

    let request = register_request("broker-a", "127.0.0.1:10911", &[("T1", 4), ("T2", 2)], 1);
    let response = broker_a.request_timeout(request, TIMEOUT).await.unwrap();
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    assert!(response.is_response());
    let request = register_request("broker-b", "127.0.0.1:10921", &[("T1", 8)], 1);
    let response = broker_b.request_timeout(request, TIMEOUT).await.unwrap();
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    assert_eq!(
        response.serialize_type,
        SerializeType::RocketMq,
        "answered in request's type"
    );

    let standard = route(&client, "T1", 409).await;
    assert_eq!(standard.response_code(), ResponseCode::SUCCESS);
    assert_eq!(
        String::from_utf8(standard.body).unwrap(),
        concat!(
            r#"{"brokerDatas":["#,
            r#"{"brokerAddrs":{"0":"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false},"#,
            r#"{"brokerAddrs":{"0":"127.0.0.1:10921"},"brokerName":"broker-b","cluster":"DefaultCluster","enableActingMaster":false}],"#,
            r#""filterServerTable":{},"queueDatas":["#,
            r#"{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4},"#,
            r#"{"brokerName":"broker-b","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}"#
        )
    );
    let legacy = route(&client, "T2", 317).await;
    assert_eq!(
        String::from_utf8(legacy.body).unwrap(),
        concat!(
            r#"{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"DefaultCluster","enableActingMaster":false}],"#,
            r#""filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":2,"topicSysFlag":0,"writeQueueNums":2}]}"#
        )
    );
    // acceptStandardJsonOnly overrides an old version.
    let header = GetRouteInfoRequestHeader {
        topic: "T2".into(),
        accept_standard_json_only: Some(true),
    };
    let mut request =
        RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
    request.version = 317;
    let forced = client.request_timeout(request, TIMEOUT).await.unwrap();
    assert!(String::from_utf8(forced.body)
        .unwrap()
        .contains(r#"{"0":"127.0.0.1:10911"}"#));

    let missing = route(&client, "Nope", 409).await;
    assert_eq!(missing.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert!(missing
        .remark
        .unwrap()
        .starts_with("No topic route info in name server for the topic: Nope"));

    let cluster = client
        .request_timeout(
            RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO),
            TIMEOUT,
        )
        .await
        .unwrap();
    let cluster = String::from_utf8(cluster.body).unwrap();
    assert!(cluster.contains(r#""clusterAddrTable":{"DefaultCluster":["broker-a","broker-b"]}"#));
    assert!(cluster.contains(r#""brokerAddrs":{0:"127.0.0.1:10911"}"#));

    let topics = client
        .request_timeout(
            RemotingCommand::request(RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
            TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8(topics.body).unwrap(),
        r#"{"topicList":["T1","T2"]}"#
    );
}

#[tokio::test]
async fn broker_connection_closed_leaves_route_at_once() {
    let namesrv = NamesrvProcess::start("");
    let broker_a = connect(namesrv.addr, SerializeType::Json).await;
    let client = connect(namesrv.addr, SerializeType::Json).await;
    let request = register_request("broker-a", "127.0.0.1:10911", &[("T", 4)], 1);
    broker_a.request_timeout(request, TIMEOUT).await.unwrap();
    {
        let broker_b = connect(namesrv.addr, SerializeType::Json).await;
        let request = register_request("broker-b", "127.0.0.1:10921", &[("T", 4)], 1);
        broker_b.request_timeout(request, TIMEOUT).await.unwrap();
        let both = route(&client, "T", 409).await;
        assert!(String::from_utf8(both.body).unwrap().contains("broker-b"));
        // Dropping the last handle ends the driver and closes the socket.
    }
    let after = wait_until_route(&client, "T", |r| {
        !String::from_utf8_lossy(&r.body).contains("broker-b")
    })
    .await;
    let body = String::from_utf8(after.body).unwrap();
    assert!(body.contains("broker-a"), "the other broker stays: {body}");
}

#[tokio::test]
async fn silent_broker_expires_after_configured_timeout() {
    let namesrv =
        NamesrvProcess::start("brokerExpiredTimeoutMillis=300\nscanNotActiveBrokerInterval=100");
    let broker = connect(namesrv.addr, SerializeType::Json).await;
    let client = connect(namesrv.addr, SerializeType::Json).await;
    let request = register_request("broker-a", "127.0.0.1:10911", &[("T", 4)], 1);
    let started = Instant::now();
    broker.request_timeout(request, TIMEOUT).await.unwrap();
    // The broker's connection stays open; only its silence removes it.
    let gone = wait_until_route(&client, "T", |r| {
        r.response_code() == ResponseCode::TOPIC_NOT_EXIST
    })
    .await;
    assert_eq!(gone.response_code(), ResponseCode::TOPIC_NOT_EXIST);
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "not before the timeout"
    );
    assert!(namesrv.wait_for_log("broker expired", TIMEOUT).is_some());
    assert!(!broker.is_closed());
}

#[tokio::test]
async fn unregister_and_write_perm_update_the_route() {
    let namesrv = NamesrvProcess::start("");
    let broker = connect(namesrv.addr, SerializeType::Json).await;
    let request = register_request("broker-a", "127.0.0.1:10911", &[("T", 4)], 1);
    broker.request_timeout(request, TIMEOUT).await.unwrap();

    let wipe = RemotingCommand::request_with_header(
        RequestCode::WIPE_WRITE_PERM_OF_BROKER,
        &WipeWritePermOfBrokerRequestHeader {
            broker_name: "broker-a".into(),
        },
    );
    let response = broker.request_timeout(wipe, TIMEOUT).await.unwrap();
    assert_eq!(response.ext("wipeTopicCount"), Some("1"));
    let body = String::from_utf8(route(&broker, "T", 409).await.body).unwrap();
    assert!(body.contains(r#""perm":4"#), "{body}");

    let unregister = RemotingCommand::request_with_header(
        RequestCode::UNREGISTER_BROKER,
        &UnregisterBrokerRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: "127.0.0.1:10911".into(),
            cluster_name: "DefaultCluster".into(),
            broker_id: 0,
        },
    );
    let response = broker.request_timeout(unregister, TIMEOUT).await.unwrap();
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    assert_eq!(
        route(&broker, "T", 409).await.response_code(),
        ResponseCode::TOPIC_NOT_EXIST
    );
}

#[tokio::test]
async fn kv_config_survives_restart() {
    let mut namesrv = NamesrvProcess::start("");
    let client = connect(namesrv.addr, SerializeType::RocketMq).await;
    let put = RemotingCommand::request_with_header(
        RequestCode::PUT_KV_CONFIG,
        &PutKvConfigRequestHeader {
            namespace: "ORDER_TOPIC_CONFIG".into(),
            key: "T".into(),
            value: "broker-a:4".into(),
        },
    );
    let response = client.request_timeout(put, TIMEOUT).await.unwrap();
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    let status = namesrv.terminate();
    assert_eq!(status.code(), Some(0), "clean exit on SIGTERM");

    let config = std::fs::read_to_string(namesrv.dir.path().join("namesrv.conf")).unwrap();
    let restarted = NamesrvProcess::start(&config);
    let client = connect(restarted.addr, SerializeType::Json).await;
    let get = |key: &str| {
        RemotingCommand::request_with_header(
            RequestCode::GET_KV_CONFIG,
            &GetKvConfigRequestHeader {
                namespace: "ORDER_TOPIC_CONFIG".into(),
                key: key.into(),
            },
        )
    };
    let response = client.request_timeout(get("T"), TIMEOUT).await.unwrap();
    assert_eq!(response.ext("value"), Some("broker-a:4"));
    let missing = client.request_timeout(get("U"), TIMEOUT).await.unwrap();
    assert_eq!(missing.response_code(), ResponseCode::QUERY_NOT_FOUND);
}

/// Opens a raw socket, writes `bytes`, and returns what the server sent back before closing.
fn raw_exchange(addr: std::net::SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    stream.write_all(bytes).unwrap();
    let mut received = Vec::new();
    match stream.read_to_end(&mut received) {
        Ok(_) => received,
        Err(error) => panic!("server did not close the connection: {error}"),
    }
}

#[tokio::test]
async fn bad_input_closes_only_that_connection() {
    let namesrv = NamesrvProcess::start("");
    let healthy = connect(namesrv.addr, SerializeType::Json).await;
    let addr = namesrv.addr;

    // Garbage: its first four bytes announce a frame far above the 16 MiB limit.
    assert!(raw_exchange(addr, b"GET / HTTP/1.1\r\n\r\n").is_empty());
    // An oversized length prefix.
    assert!(raw_exchange(addr, &(64i32 << 20).to_be_bytes()).is_empty());
    // A frame of the right length whose JSON header is not JSON.
    let mut bad_header = Vec::new();
    bad_header.extend_from_slice(&12i32.to_be_bytes());
    bad_header.extend_from_slice(&8u32.to_be_bytes());
    bad_header.extend_from_slice(b"not json");
    assert!(raw_exchange(addr, &bad_header).is_empty());
    // A length below the header-length word.
    assert!(raw_exchange(addr, &2i32.to_be_bytes()).is_empty());

    // A truncated frame followed by the peer going away: the server just drops it.
    let frame = encode_to_vec(&RemotingCommand::request(
        RequestCode::GET_BROKER_CLUSTER_INFO,
    ));
    let mut truncated = std::net::TcpStream::connect(addr).unwrap();
    truncated.write_all(&frame[..frame.len() - 3]).unwrap();
    drop(truncated);

    // Unknown request code: answered, connection kept.
    let unknown = healthy
        .request_timeout(RemotingCommand::request(RequestCode(9999)), TIMEOUT)
        .await
        .unwrap();
    assert_eq!(
        unknown.response_code(),
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED
    );
    assert_eq!(
        unknown.remark.as_deref(),
        Some(" request type 9999 not supported")
    );

    // Missing required header field.
    let missing = healthy
        .request_timeout(
            RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC),
            TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(missing.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        missing.remark.as_deref(),
        Some("the custom field <topic> is null")
    );

    // A oneway request with an unknown code gets no answer; the next request is still served.
    healthy
        .oneway(RemotingCommand::request(RequestCode(9998)))
        .await
        .unwrap();
    let cluster = healthy
        .request_timeout(
            RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO),
            TIMEOUT,
        )
        .await
        .unwrap();
    assert_eq!(cluster.response_code(), ResponseCode::SUCCESS);
    assert!(namesrv.wait_for_log("bad frame", TIMEOUT).is_some());
}

async fn call(client: &RemotingClient, request: RemotingCommand) -> RemotingCommand {
    client.request_timeout(request, TIMEOUT).await.unwrap()
}

#[tokio::test]
async fn cluster_topic_kv_and_config_requests_answer_as_java() {
    use ferromq::remoting::headers::{
        AddWritePermOfBrokerRequestHeader, DeleteKvConfigRequestHeader,
        DeleteTopicFromNamesrvRequestHeader, GetKvListByNamespaceRequestHeader,
        GetTopicsByClusterRequestHeader, QueryDataVersionRequestHeader,
    };
    let namesrv = NamesrvProcess::start("");
    let client = connect(namesrv.addr, SerializeType::Json).await;

    // Compressed body, and a slave that learns its master's addresses.
    let mut compressed = register_request("broker-a", "127.0.0.1:10911", &[("T", 4), ("U", 2)], 3);
    let body: RegisterBrokerBody = serde_json::from_slice(&compressed.body).unwrap();
    compressed.body = body.encode_compressed();
    let mut fields = compressed.ext_fields.take().unwrap();
    fields.insert("compressed", "true");
    fields.insert("bodyCrc32", "0");
    compressed.ext_fields = Some(fields);
    assert_eq!(
        call(&client, compressed).await.response_code(),
        ResponseCode::SUCCESS
    );
    let mut slave = register_request("broker-a", "127.0.0.1:10915", &[("T", 4)], 3);
    slave.ext_fields.as_mut().unwrap().insert("brokerId", "1");
    let crc = ferromq::bytes::java_crc32(&slave.body);
    slave
        .ext_fields
        .as_mut()
        .unwrap()
        .insert("bodyCrc32", crc.to_string());
    let response = call(&client, slave).await;
    assert_eq!(response.ext("masterAddr"), Some("127.0.0.1:10911"));
    assert_eq!(response.ext("haServerAddr"), Some("127.0.0.1:10912"));
    let body = String::from_utf8(route(&client, "U", 409).await.body).unwrap();
    assert!(
        body.contains(r#"{"0":"127.0.0.1:10911","1":"127.0.0.1:10915"}"#),
        "{body}"
    );

    // A body that does not match its CRC is refused.
    let mut corrupt = register_request("broker-z", "127.0.0.1:10999", &[("Z", 1)], 1);
    corrupt.body.push(b' ');
    let response = call(&client, corrupt).await;
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(response.remark.as_deref(), Some("crc32 not match"));

    let by_cluster = RemotingCommand::request_with_header(
        RequestCode::GET_TOPICS_BY_CLUSTER,
        &GetTopicsByClusterRequestHeader {
            cluster: "DefaultCluster".into(),
        },
    );
    let body = call(&client, by_cluster).await.body;
    assert_eq!(
        String::from_utf8(body).unwrap(),
        r#"{"topicList":["T","U"]}"#
    );

    let version = RemotingCommand::request_with_header(
        RequestCode::QUERY_DATA_VERSION,
        &QueryDataVersionRequestHeader {
            broker_name: "broker-a".into(),
            broker_addr: "127.0.0.1:10911".into(),
            cluster_name: "DefaultCluster".into(),
            broker_id: 0,
        },
    );
    let same = r#"{"counter":3,"stateVersion":0,"timestamp":1700000000000}"#;
    let response = call(&client, version.clone().with_body(same.into())).await;
    assert_eq!(response.ext("changed"), Some("false"));
    let newer = r#"{"counter":4,"timestamp":1700000000000}"#;
    let response = call(&client, version.with_body(newer.into())).await;
    assert_eq!(response.ext("changed"), Some("true"));

    let wipe = RemotingCommand::request_with_header(
        RequestCode::WIPE_WRITE_PERM_OF_BROKER,
        &WipeWritePermOfBrokerRequestHeader {
            broker_name: "broker-a".into(),
        },
    );
    assert_eq!(call(&client, wipe).await.ext("wipeTopicCount"), Some("2"));
    let add = RemotingCommand::request_with_header(
        RequestCode::ADD_WRITE_PERM_OF_BROKER,
        &AddWritePermOfBrokerRequestHeader {
            broker_name: "broker-a".into(),
        },
    );
    assert_eq!(call(&client, add).await.ext("addTopicCount"), Some("2"));
    assert!(String::from_utf8(route(&client, "T", 409).await.body)
        .unwrap()
        .contains(r#""perm":6"#));

    let delete = RemotingCommand::request_with_header(
        RequestCode::DELETE_TOPIC_IN_NAMESRV,
        &DeleteTopicFromNamesrvRequestHeader {
            topic: "U".into(),
            cluster_name: None,
        },
    );
    assert_eq!(
        call(&client, delete).await.response_code(),
        ResponseCode::SUCCESS
    );
    assert_eq!(
        route(&client, "U", 409).await.response_code(),
        ResponseCode::TOPIC_NOT_EXIST
    );

    // KV: list a namespace, delete a key.
    for key in ["a", "b"] {
        let put = RemotingCommand::request_with_header(
            RequestCode::PUT_KV_CONFIG,
            &PutKvConfigRequestHeader {
                namespace: "ns".into(),
                key: key.into(),
                value: "v".into(),
            },
        );
        call(&client, put).await;
    }
    let list = RemotingCommand::request_with_header(
        RequestCode::GET_KVLIST_BY_NAMESPACE,
        &GetKvListByNamespaceRequestHeader {
            namespace: "ns".into(),
        },
    );
    let body = call(&client, list.clone()).await.body;
    assert_eq!(
        String::from_utf8(body).unwrap(),
        r#"{"table":{"a":"v","b":"v"}}"#
    );
    for key in ["a", "b"] {
        let delete = RemotingCommand::request_with_header(
            RequestCode::DELETE_KV_CONFIG,
            &DeleteKvConfigRequestHeader {
                namespace: "ns".into(),
                key: key.into(),
            },
        );
        call(&client, delete).await;
    }
    assert_eq!(
        call(&client, list).await.response_code(),
        ResponseCode::QUERY_NOT_FOUND
    );

    // Config: read, update a live key, refuse a black-listed one.
    let get_config = RemotingCommand::request(RequestCode::GET_NAMESRV_CONFIG);
    let text = String::from_utf8(call(&client, get_config.clone()).await.body).unwrap();
    assert!(text.contains("orderMessageEnable=false\n"), "{text}");
    let update = RemotingCommand::request(RequestCode::UPDATE_NAMESRV_CONFIG)
        .with_body(b"orderMessageEnable=true\n".to_vec());
    assert_eq!(
        call(&client, update).await.response_code(),
        ResponseCode::SUCCESS
    );
    let text = String::from_utf8(call(&client, get_config).await.body).unwrap();
    assert!(text.contains("orderMessageEnable=true\n"), "{text}");
    let refused = RemotingCommand::request(RequestCode::UPDATE_NAMESRV_CONFIG)
        .with_body(b"kvConfigPath=/tmp/x\n".to_vec());
    let response = call(&client, refused).await;
    assert_eq!(response.response_code(), ResponseCode::NO_PERMISSION);
    assert_eq!(
        response.remark.as_deref(),
        Some("Can not update config in black list.")
    );
    // With orderMessageEnable on, routes carry the topic's order config.
    let put = RemotingCommand::request_with_header(
        RequestCode::PUT_KV_CONFIG,
        &PutKvConfigRequestHeader {
            namespace: "ORDER_TOPIC_CONFIG".into(),
            key: "T".into(),
            value: "broker-a:4".into(),
        },
    );
    call(&client, put).await;
    let body = String::from_utf8(route(&client, "T", 409).await.body).unwrap();
    assert!(body.contains(r#""orderTopicConf":"broker-a:4""#), "{body}");
}

#[tokio::test]
async fn idle_connection_is_closed_after_the_configured_time() {
    let namesrv = NamesrvProcess::start("serverChannelMaxIdleTimeSeconds=1");
    let started = Instant::now();
    let mut idle = std::net::TcpStream::connect(namesrv.addr).unwrap();
    idle.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut buf = [0u8; 1];
    let read = idle.read(&mut buf).expect("closed, not timed out");
    assert_eq!(read, 0, "server closed the idle connection");
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "not before the idle time"
    );
    assert!(namesrv
        .wait_for_log("closing idle connection", TIMEOUT)
        .is_some());
}

#[tokio::test]
async fn connections_over_the_limit_are_closed_at_accept() {
    let namesrv = NamesrvProcess::start_with_args("serverMaxConnections=2", &["--shards", "1"]);
    let first = connect(namesrv.addr, SerializeType::Json).await;
    let second = connect(namesrv.addr, SerializeType::Json).await;
    for client in [&first, &second] {
        let response = call(
            client,
            RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO),
        )
        .await;
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    }
    let mut third = std::net::TcpStream::connect(namesrv.addr).unwrap();
    third.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut buf = [0u8; 1];
    assert_eq!(
        third.read(&mut buf).expect("closed"),
        0,
        "third connection closed"
    );
    assert!(namesrv
        .wait_for_log("connection limit reached", TIMEOUT)
        .is_some());
    // The first two keep working.
    let response = call(
        &first,
        RemotingCommand::request(RequestCode::GET_BROKER_CLUSTER_INFO),
    )
    .await;
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
}
