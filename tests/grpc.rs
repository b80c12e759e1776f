//! The gRPC endpoint (`apache.rocketmq.v2.MessagingService`) of a real `ferromq broker`
//! process, called by RocketMQ 5.x's own Java gRPC client and by the generated Rust client.
//!
//! Method: the broker starts with `grpcServerEnable=true` on a free port and a
//! `topics.json` written beforehand (a topic whose `message.type` is MIXED, one without
//! the attribute). The Java producer (`tests/java5-grpc/Java5GrpcProducer.java`) sends every
//! kind of message through the endpoint; the messages are then read back through the
//! broker's remoting side (PULL_MESSAGE), so what the endpoint stored is checked property by
//! property. The Java round trip (`Java5GrpcRoundTrip.java`, also run against the Java 5.x
//! proxy in `java5_reference.rs`) sends and receives with a simple consumer (POP: receive,
//! ack). One test asks the Java 5.5.0 proxy (cluster mode, in front of the Java 5.5.0
//! broker) the same QueryRoute and Heartbeat questions and compares the answers. The Rust
//! client checks the answers the proxy gives in words: routes, codes of
//! refusals, the Telemetry settings answer.

mod common;
mod sched;

use common::java;
use common::{connect, BrokerProcess, TempDir};
use ferromq::grpc::proto::messaging_service_client::MessagingServiceClient;
use ferromq::grpc::proto::{
    self, telemetry_command, Code, Endpoints, MessageType, Permission, Publishing,
    QueryRouteRequest, Resource, Settings, TelemetryCommand,
};
use ferromq::remoting::SerializeType;
use sched::{pull_all, Stored};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// The topic that takes every message type.
const MIXED: &str = "GrpcMixed";
/// A topic without `message.type`: NORMAL.
const PLAIN: &str = "GrpcPlain";
const QUEUES: i32 = 4;

/// A broker with the gRPC endpoint on a free port, its topics written before it starts.
fn start_broker(dir: &Path) -> (BrokerProcess, u16) {
    let store = dir.join("store");
    let config_dir = store.join("config");
    std::fs::create_dir_all(&config_dir).unwrap();
    let topic = |name: &str, attributes: serde_json::Value| {
        serde_json::json!({
            "topicName": name, "readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6,
            "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": false,
            "attributes": attributes,
        })
    };
    let topics = serde_json::json!({
        "topicConfigTable": {
            MIXED: topic(MIXED, serde_json::json!({"message.type": "MIXED"})),
            PLAIN: topic(PLAIN, serde_json::json!({})),
        },
        "dataVersion": {"timestamp": 0, "counter": 1},
    });
    std::fs::write(config_dir.join("topics.json"), topics.to_string()).unwrap();
    let port = java::free_port();
    let config = format!("grpcServerEnable=true\ngrpcServerPort={port}\nrecallMessageEnable=true");
    (BrokerProcess::start(&store, &config), port)
}

/// Every message of `topic`'s queues, by `UNIQ_KEY`, once `wanted` are all there (at most
/// 30 s).
fn read_back(broker: &BrokerProcess, topic: &str, wanted: &[&str]) -> BTreeMap<String, Stored> {
    let runtime = sched::runtime();
    runtime.block_on(async {
        let client = connect(broker.addr, SerializeType::Json).await;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut by_key = BTreeMap::new();
            for queue in 0..QUEUES {
                for stored in pull_all(&client, "grpc-reader", topic, queue).await {
                    let key = stored.prop("UNIQ_KEY").unwrap_or_default().to_owned();
                    by_key.insert(key, stored);
                }
            }
            if wanted.iter().all(|key| by_key.contains_key(*key)) {
                return by_key;
            }
            assert!(
                Instant::now() < deadline,
                "{topic} holds {:?}, wanted {wanted:?}",
                by_key.keys().collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
}

#[test]
fn java5_producer_sends_every_kind_through_the_endpoint() {
    let dir = TempDir::on_disk("grpc-java-producer");
    let (broker, port) = start_broker(dir.path());
    let output = java::run_grpc_java(
        &java::classes5_grpc(),
        "Java5GrpcProducer",
        &[&format!("127.0.0.1:{port}"), MIXED],
        Duration::from_secs(120),
    );
    output.assert_passed("the Java 5.x gRPC producer against ferromq's endpoint");
    let sent: BTreeMap<&str, &str> = output
        .text
        .lines()
        .filter_map(|line| {
            let mut words = line.strip_prefix("SENT ")?.split_whitespace();
            Some((words.next()?, words.next()?))
        })
        .collect();
    let kinds = [
        "plain",
        "tagged",
        "keyed",
        "delayed",
        "recalled",
        "fifo",
        "tx-commit",
        "tx-rollback",
    ];
    for kind in kinds {
        assert!(
            sent.contains_key(kind),
            "no receipt for {kind}:\n{}",
            output.text
        );
    }
    let recalled = output
        .text
        .lines()
        .find_map(|line| line.strip_prefix("RECALLED "))
        .unwrap_or_else(|| panic!("no recall:\n{}", output.text));
    assert_eq!(recalled.trim(), sent["recalled"]);

    let delivered = ["plain", "tagged", "keyed", "delayed", "fifo", "tx-commit"];
    let wanted: Vec<&str> = delivered.iter().map(|kind| sent[kind]).collect();
    let stored = read_back(&broker, MIXED, &wanted);
    let get = |kind: &str| &stored[sent[kind]];
    for kind in delivered {
        let message = get(kind);
        assert_eq!(message.body, kind.as_bytes(), "{kind}");
        assert_eq!(
            message.prop("PGROUP"),
            Some(MIXED),
            "{kind}: producer group = topic"
        );
    }
    assert_eq!(get("plain").prop("TAGS"), None);
    assert_eq!(get("tagged").prop("TAGS"), Some("TagA"));
    assert_eq!(get("keyed").prop("KEYS"), Some("k1 k2"));
    assert_eq!(get("keyed").prop("color"), Some("red"));
    let delayed = get("delayed");
    let deliver_ms: i64 = delayed.prop("TIMER_DELIVER_MS").unwrap().parse().unwrap();
    assert!(
        delayed.store_timestamp + 1500 >= deliver_ms,
        "the delayed message was stored at {}, before its time {deliver_ms}",
        delayed.store_timestamp
    );
    assert_eq!(delayed.prop("TAGS"), Some("Later"));
    assert_eq!(get("fifo").prop("__SHARDINGKEY"), Some("group-1"));
    assert!(get("tx-commit").prop("TRAN_MSG").is_some());
    // Rolled back before the producer closed: never in the topic.
    assert!(
        !stored.contains_key(sent["tx-rollback"]),
        "a rolled-back message was delivered"
    );
    assert!(
        !stored.contains_key(sent["recalled"]),
        "a recalled message was delivered"
    );
}

#[test]
fn java5_simple_consumer_round_trips_through_the_endpoint() {
    let dir = TempDir::on_disk("grpc-java-round-trip");
    let (_broker, port) = start_broker(dir.path());
    let count = 30;
    let output = java::run_grpc_java(
        &java::classes5_grpc(),
        "Java5GrpcRoundTrip",
        &[
            &format!("127.0.0.1:{port}"),
            PLAIN,
            "GrpcRoundTripGroup",
            &count.to_string(),
        ],
        Duration::from_secs(150),
    );
    output.assert_passed("the Java 5.x gRPC producer and simple consumer against ferromq");
    assert_eq!(output.figure("send_ok"), f64::from(count));
    assert_eq!(output.figure("received"), f64::from(count));
}

/// A client of the endpoint at `port` and the request metadata the Java client sends.
async fn client(port: u16) -> MessagingServiceClient<tonic::transport::Channel> {
    let channel = tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{port}"))
        .unwrap()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .connect()
        .await
        .unwrap();
    MessagingServiceClient::new(channel)
}

fn request<T>(message: T, client_id: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let metadata = request.metadata_mut();
    metadata.insert("x-mq-client-id", client_id.parse().unwrap());
    metadata.insert("x-mq-language", "RUST".parse().unwrap());
    metadata.insert("x-mq-protocol", "v2".parse().unwrap());
    request
}

fn resource(name: &str) -> Option<Resource> {
    Some(Resource {
        resource_namespace: String::new(),
        name: name.to_owned(),
    })
}

fn endpoints(port: u16) -> Option<Endpoints> {
    Some(Endpoints {
        scheme: proto::AddressScheme::IPv4 as i32,
        addresses: vec![proto::Address {
            host: "127.0.0.1".to_owned(),
            port: i32::from(port),
        }],
    })
}

fn code(status: Option<&proto::Status>) -> Code {
    Code::try_from(status.map_or(0, |status| status.code)).unwrap()
}

#[test]
fn query_route_and_refusals_answer_as_the_proxy() {
    let dir = TempDir::on_disk("grpc-route");
    let (_broker, port) = start_broker(dir.path());
    sched::runtime().block_on(async {
        let mut client = client(port).await;
        let route = |topic: &str| QueryRouteRequest {
            topic: resource(topic),
            endpoints: endpoints(port),
        };
        let mixed = client
            .query_route(request(route(MIXED), "route-client"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(mixed.status.as_ref()), Code::Ok);
        assert_eq!(mixed.message_queues.len(), 4);
        for (id, queue) in mixed.message_queues.iter().enumerate() {
            assert_eq!(queue.id, i32::try_from(id).unwrap());
            assert_eq!(queue.permission, Permission::ReadWrite as i32);
            let all = [MessageType::Normal, MessageType::Fifo, MessageType::Delay];
            let mut expected: Vec<i32> = all.iter().map(|t| *t as i32).collect();
            expected.push(MessageType::Transaction as i32);
            assert_eq!(queue.accept_message_types, expected);
            let broker = queue.broker.as_ref().unwrap();
            assert_eq!(broker.id, 0);
            let address = &broker.endpoints.as_ref().unwrap().addresses[0];
            assert_eq!(
                (address.host.as_str(), address.port),
                ("127.0.0.1", i32::from(port))
            );
        }
        let plain = client
            .query_route(request(route(PLAIN), "route-client"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            plain.message_queues[0].accept_message_types,
            [MessageType::Normal as i32]
        );
        let unknown = client
            .query_route(request(route("NoSuchTopic"), "route-client"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(unknown.status.as_ref()), Code::TopicNotFound);
        assert!(unknown.message_queues.is_empty());
        let system = client
            .query_route(request(route("rmq_sys_wheel_timer"), "route-client"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(system.status.as_ref()), Code::IllegalTopic);

        // A heartbeat before any settings: the proxy's refusal.
        let heartbeat = proto::HeartbeatRequest {
            group: None,
            client_type: proto::ClientType::Producer as i32,
        };
        let refused = client
            .heartbeat(request(heartbeat.clone(), "fresh-client"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(refused.status.as_ref()), Code::UnrecognizedClientType);

        // Telemetry: the settings answered at once, merged, with OK.
        let settings = Settings {
            client_type: Some(proto::ClientType::Producer as i32),
            pub_sub: Some(proto::settings::PubSub::Publishing(Publishing {
                topics: vec![resource(MIXED).unwrap()],
                max_body_size: 0,
                validate_message_type: false,
            })),
            ..Settings::default()
        };
        let command = TelemetryCommand {
            status: None,
            command: Some(telemetry_command::Command::Settings(settings)),
        };
        let (mut outbox, commands) = futures::channel::mpsc::channel(4);
        futures::SinkExt::send(&mut outbox, command).await.unwrap();
        let mut answers = client
            .telemetry(request(commands, "fresh-client"))
            .await
            .unwrap()
            .into_inner();
        let answer = tokio::time::timeout(Duration::from_secs(10), answers.message())
            .await
            .expect("settings answered within 10 s")
            .unwrap()
            .unwrap();
        assert_eq!(code(answer.status.as_ref()), Code::Ok);
        let Some(telemetry_command::Command::Settings(merged)) = answer.command else {
            panic!("no settings in {answer:?}");
        };
        assert_eq!(merged.backoff_policy.unwrap().max_attempts, 3);
        let Some(proto::settings::PubSub::Publishing(publishing)) = merged.pub_sub else {
            panic!("no publishing in the answer");
        };
        assert!(publishing.validate_message_type);
        assert_eq!(publishing.max_body_size, 4 * 1024 * 1024);
        let accepted = client
            .heartbeat(request(heartbeat, "fresh-client"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(accepted.status.as_ref()), Code::Ok);

        let empty = client
            .send_message(request(
                proto::SendMessageRequest::default(),
                "fresh-client",
            ))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(empty.status.as_ref()), Code::MessageCorrupted);
        drop(outbox);
    });
}

/// Telemetry settings of a simple consumer of `group` on `topic`, answered.
async fn consumer_session(
    client: &mut MessagingServiceClient<tonic::transport::Channel>,
    client_id: &str,
    group: &str,
    topic: &str,
) -> futures::channel::mpsc::Sender<TelemetryCommand> {
    let settings = Settings {
        client_type: Some(proto::ClientType::SimpleConsumer as i32),
        pub_sub: Some(proto::settings::PubSub::Subscription(proto::Subscription {
            group: resource(group),
            subscriptions: vec![proto::SubscriptionEntry {
                topic: resource(topic),
                expression: Some(proto::FilterExpression {
                    r#type: proto::FilterType::Tag as i32,
                    expression: "*".to_owned(),
                }),
            }],
            ..proto::Subscription::default()
        })),
        ..Settings::default()
    };
    let (mut outbox, commands) = futures::channel::mpsc::channel(4);
    let command = TelemetryCommand {
        status: None,
        command: Some(telemetry_command::Command::Settings(settings)),
    };
    futures::SinkExt::send(&mut outbox, command).await.unwrap();
    let mut answers = client
        .telemetry(request(commands, client_id))
        .await
        .unwrap()
        .into_inner();
    let answer = tokio::time::timeout(Duration::from_secs(10), answers.message())
        .await
        .expect("settings answered within 10 s")
        .unwrap()
        .unwrap();
    assert_eq!(code(answer.status.as_ref()), Code::Ok);
    outbox
}

/// One ReceiveMessage of at most 16 messages; the messages.
async fn receive(
    client: &mut MessagingServiceClient<tonic::transport::Channel>,
    client_id: &str,
    group: &str,
    topic: &str,
    invisible: Duration,
) -> Vec<proto::Message> {
    let receive = proto::ReceiveMessageRequest {
        group: resource(group),
        message_queue: Some(proto::MessageQueue {
            topic: resource(topic),
            id: -1,
            ..proto::MessageQueue::default()
        }),
        filter_expression: None,
        batch_size: 16,
        invisible_duration: Some(prost_types_duration(invisible)),
        auto_renew: false,
        long_polling_timeout: Some(prost_types_duration(Duration::from_secs(5))),
        attempt_id: None,
    };
    let mut frames = client
        .receive_message(request(receive, client_id))
        .await
        .unwrap()
        .into_inner();
    let mut messages = Vec::new();
    while let Some(frame) = frames.message().await.unwrap() {
        match frame.content {
            Some(proto::receive_message_response::Content::Message(message)) => {
                messages.push(message);
            }
            Some(proto::receive_message_response::Content::Status(status)) => {
                let code = code(Some(&status));
                assert!(
                    matches!(code, Code::Ok | Code::MessageNotFound),
                    "{status:?}"
                );
            }
            _ => {}
        }
    }
    messages
}

/// The first message a receive of `group` on [`PLAIN`] gets within `wait`.
async fn receive_one(
    client: &mut MessagingServiceClient<tonic::transport::Channel>,
    client_id: &str,
    group: &str,
    wait: Duration,
) -> proto::Message {
    let deadline = Instant::now() + wait;
    loop {
        let got = receive(client, client_id, group, PLAIN, Duration::from_secs(30)).await;
        if let Some(message) = got.into_iter().next() {
            return message;
        }
        assert!(
            Instant::now() < deadline,
            "no message for {group} within {wait:?}"
        );
    }
}

fn prost_types_duration(duration: Duration) -> ferromq::grpc::proto::Duration {
    ferromq::grpc::proto::Duration {
        seconds: i64::try_from(duration.as_secs()).unwrap(),
        nanos: 0,
    }
}

#[test]
fn change_invisible_duration_brings_the_message_back_with_its_attempt() {
    let dir = TempDir::on_disk("grpc-change-invisible");
    let (broker, port) = start_broker(dir.path());
    let group = "GrpcInvisibleGroup";
    let client_id = "invisible-client";
    sched::runtime().block_on(async {
        let mut client = client(port).await;
        let _session = consumer_session(&mut client, client_id, group, PLAIN).await;
        // The group's first pop starts it at the queues' ends: pop once before sending.
        receive(
            &mut client,
            client_id,
            group,
            PLAIN,
            Duration::from_secs(30),
        )
        .await;
        let remoting = connect(broker.addr, SerializeType::Json).await;
        let properties = sched::props(&[("UNIQ_KEY", "invisible-1")]);
        sched::send(&remoting, PLAIN, 0, b"comes back", &properties).await;

        let first = receive_one(&mut client, client_id, group, Duration::from_secs(30)).await;
        let system = first.system_properties.clone().unwrap();
        assert_eq!(system.message_id, "invisible-1");
        assert_eq!(system.delivery_attempt, Some(1));
        let change = proto::ChangeInvisibleDurationRequest {
            group: resource(group),
            topic: resource(PLAIN),
            receipt_handle: system.receipt_handle.clone().unwrap(),
            invisible_duration: Some(prost_types_duration(Duration::from_secs(1))),
            message_id: system.message_id.clone(),
        };
        let changed = client
            .change_invisible_duration(request(change, client_id))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(changed.status.as_ref()), Code::Ok, "{changed:?}");
        assert_ne!(changed.receipt_handle, system.receipt_handle.unwrap());

        let again = receive_one(&mut client, client_id, group, Duration::from_secs(40)).await;
        let system = again.system_properties.unwrap();
        assert_eq!(system.message_id, "invisible-1");
        assert_eq!(system.delivery_attempt, Some(2));
        assert_eq!(again.body, b"comes back");
        let ack = proto::AckMessageRequest {
            group: resource(group),
            topic: resource(PLAIN),
            entries: vec![proto::AckMessageEntry {
                message_id: system.message_id.clone(),
                receipt_handle: system.receipt_handle.unwrap(),
            }],
        };
        let acked = client
            .ack_message(request(ack, client_id))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(acked.status.as_ref()), Code::Ok, "{acked:?}");
    });
}

/// QueryRoute of `topic` and of an unknown topic, and a heartbeat before any settings, at
/// the endpoint on `port`: (queues as (id, permission, accept types), broker name, the
/// codes of the two refusals, the unknown topic's message).
async fn route_facts(port: u16, topic: &str) -> (Vec<(i32, i32, Vec<i32>)>, i32, Code, Code) {
    let mut client = client(port).await;
    let route = |topic: &str| QueryRouteRequest {
        topic: resource(topic),
        endpoints: endpoints(port),
    };
    let known = client
        .query_route(request(route(topic), "facts-client"))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(code(known.status.as_ref()), Code::Ok, "{known:?}");
    let queues = known
        .message_queues
        .iter()
        .map(|queue| {
            (
                queue.id,
                queue.permission,
                queue.accept_message_types.clone(),
            )
        })
        .collect();
    let broker = known.message_queues[0].broker.clone().unwrap();
    let address = &broker.endpoints.unwrap().addresses[0];
    assert_eq!(
        address.port,
        i32::from(port),
        "the route points back at the endpoint"
    );
    let unknown = client
        .query_route(request(route("NoSuchTopicHere"), "facts-client"))
        .await
        .unwrap()
        .into_inner();
    let heartbeat = proto::HeartbeatRequest {
        group: None,
        client_type: proto::ClientType::Producer as i32,
    };
    let refused = client
        .heartbeat(request(heartbeat, "facts-client"))
        .await
        .unwrap()
        .into_inner();
    (
        queues,
        broker.id,
        code(unknown.status.as_ref()),
        code(refused.status.as_ref()),
    )
}

#[test]
fn query_route_answers_as_the_java5_proxy() {
    let kit = java::kit5();
    let dir = TempDir::on_disk("grpc-java-proxy");
    let java5 = java::JavaCluster::start(&kit, dir.path(), "", "");
    let namesrv_addr = java5.namesrv_addr();
    let created = java::run_kit_on(
        &kit,
        "mqadmin",
        &[
            "updateTopic",
            "-n",
            &namesrv_addr,
            "-c",
            "DefaultCluster",
            "-t",
            PLAIN,
            "-r",
            "4",
            "-w",
            "4",
        ],
        Duration::from_secs(120),
    );
    created.assert_passed("mqadmin updateTopic on the 5.x broker");
    let proxy = java::start_proxy(&kit, dir.path(), &namesrv_addr);
    let ours_dir = TempDir::on_disk("grpc-ours-vs-proxy");
    let (_broker, port) = start_broker(ours_dir.path());
    let runtime = sched::runtime();
    let java_facts = runtime.block_on(route_facts(proxy.port, PLAIN));
    let our_facts = runtime.block_on(route_facts(port, PLAIN));
    assert_eq!(
        our_facts, java_facts,
        "ferromq's answers, then the Java 5.5.0 proxy's"
    );
    // Killed, not stopped: nothing of theirs is checked after, and a clean stop takes 30 s.
    let mut proxy = proxy;
    common::kill(&mut proxy.child);
    java5.stop_now();
}

#[test]
fn hostile_input_on_the_grpc_port_leaves_the_endpoint_serving() {
    let dir = TempDir::on_disk("grpc-hostile");
    let (_broker, port) = start_broker(dir.path());
    sched::runtime().block_on(async {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        // Not HTTP/2 at all: that connection ends, nothing else does.
        let mut garbage = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        garbage
            .write_all(&[0x16, 3, 1, 0, 5, 1, 2, 3, 4, 5])
            .await
            .unwrap();
        garbage.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(10), garbage.read_to_end(&mut rest));
        assert!(read.await.is_ok(), "a connection of garbage was left open");

        let mut client = client(port).await;
        // A method the service does not have: gRPC UNIMPLEMENTED.
        let mut grpc = tonic::client::Grpc::new(
            tonic::transport::Channel::from_shared(format!("http://127.0.0.1:{port}"))
                .unwrap()
                .connect()
                .await
                .unwrap(),
        );
        grpc.ready().await.unwrap();
        let path = tonic::codegen::http::uri::PathAndQuery::from_static(
            "/apache.rocketmq.v2.MessagingService/PullMessage",
        );
        let unknown = grpc
            .unary::<proto::QueryRouteRequest, proto::QueryRouteResponse, _>(
                tonic::Request::new(proto::QueryRouteRequest::default()),
                path,
                tonic_prost::ProstCodec::default(),
            )
            .await;
        assert_eq!(unknown.unwrap_err().code(), tonic::Code::Unimplemented);

        // Telemetry streams that never send settings, opened and dropped.
        for round in 0..200 {
            let (outbox, commands) = futures::channel::mpsc::channel::<TelemetryCommand>(1);
            let answer = client
                .telemetry(request(commands, &format!("silent-{round}")))
                .await
                .unwrap();
            drop(answer);
            drop(outbox);
        }
        // A Telemetry settings command with neither publishing nor subscription: the proxy's
        // gRPC INVALID_ARGUMENT.
        let (mut outbox, commands) = futures::channel::mpsc::channel(1);
        let empty = TelemetryCommand {
            status: None,
            command: Some(telemetry_command::Command::Settings(Settings::default())),
        };
        futures::SinkExt::send(&mut outbox, empty).await.unwrap();
        let mut answers = client
            .telemetry(request(commands, "empty-settings"))
            .await
            .unwrap()
            .into_inner();
        let ended = tokio::time::timeout(Duration::from_secs(10), answers.message())
            .await
            .expect("answered within 10 s");
        assert_eq!(ended.unwrap_err().code(), tonic::Code::InvalidArgument);

        // Still serving.
        let route = QueryRouteRequest {
            topic: resource(PLAIN),
            endpoints: endpoints(port),
        };
        let answer = client
            .query_route(request(route, "after-hostile"))
            .await
            .unwrap()
            .into_inner();
        assert_eq!(code(answer.status.as_ref()), Code::Ok);
    });
}

/// The pinned Python 5.x client.
const PYTHON5: common::python::Package = common::python::Package {
    name: "rocketmq-python-client",
    version: "5.1.2",
    module: "rocketmq",
};

#[test]
fn python5_simple_consumer_round_trips_through_the_endpoint() {
    let python = common::python::venv_with("python5-client", &PYTHON5);
    let dir = TempDir::on_disk("grpc-python");
    let (_broker, port) = start_broker(dir.path());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python5/grpc_round_trip.py");
    let count = 20;
    let output = std::process::Command::new("timeout")
        .arg("120")
        .arg(&python)
        .arg(&script)
        .args([
            &format!("127.0.0.1:{port}"),
            PLAIN,
            "GrpcPythonGroup",
            &count.to_string(),
        ])
        .env("HOME", dir.path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "the Python 5.x client against ferromq:\n{text}"
    );
    assert!(text.contains(&format!("RESULT send_ok={count}")), "{text}");
    assert!(text.contains(&format!("RESULT received={count}")), "{text}");
}
