//! Differential tests: the kit's Java 4.9.8 broker and `ferromq standalone` get the same
//! scripted requests, good and bad, over our remoting client in both header serializations,
//! and must answer alike.
//!
//! The test runs two configurations, one after the other: the defaults, and a broker that
//! creates neither topics nor groups on demand. For each it starts a Java name server and
//! broker and a standalone (a ferromq broker alone for the second: the standalone waits for
//! `TBW102` at start-up) with the same broker.conf keys, then runs a script against both, step
//! by step, in each serialization: a step is sent to the Java broker, then to ferromq, and
//! the two outcomes are compared — whether there was an answer at all
//! (or the connection closed), the response code, the remark (loopback ports masked), the
//! extFields clients read (values too, except those that name a time, an address or an id),
//! and the body: the records of a pull or lookup (topic, queue, offsets, flags, body and
//! properties), the key paths and value types of a JSON body, or the keys of a properties
//! text. Steps that make state (sends, heartbeats, offset commits) are the same on both
//! sides, so queue offsets line up.
//!
//! Every difference fails the test unless [`INTENDED`] lists it with its reason; an entry
//! there that no longer shows up fails it too, so the table stays the list of what is left.
//! Each step's two outcomes are logged (`--no-capture` shows them). The Java broker takes
//! about 5 s to start; a run takes about a minute.
//!
//! A second test gives the same steps to the Java 4.9.8 broker and the Java 5.x broker (both
//! built from Maven Central by `scripts/java-kit`), each with its own name server, and
//! compares their answers the same way: every difference must be listed, with what 5.x
//! does, in [`JAVA5_DIFFERENCES`], and every entry there must still show up. It takes about
//! two minutes.
//!
//! A third gives the steps to the Java 5.x broker and ferromq: ferromq answers as 5.x where
//! 4.9.8 and 5.x differ (DESIGN.md), so every difference left is listed in
//! [`JAVA5_INTENDED`], with its reason or as "not yet".

mod common;

use common::java::{JavaServer, Standalone};
use common::{connect, BrokerProcess, TempDir};
use ferromq::remoting::client::{ClientError, RemotingClient};
use ferromq::remoting::codec::FrameDecoder;
use ferromq::remoting::{serialize_json, serialize_rocketmq};
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use ferromq::store::message::{decode_offset_msg_id, decode_record, parse_properties, Record};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A difference kept on purpose.
struct Intended {
    /// The steps, as named in the scripts without the serialization prefix; `*` matches
    /// any text, `|` separates alternatives.
    step: &'static str,
    /// `answer`, `code`, `remark`, `ext:<key>` or `body`.
    aspect: &'static str,
    /// Text the Java side's value contains ("" for any).
    java: &'static str,
    /// Why ferromq answers otherwise.
    why: &'static str,
}

/// Every difference from the Java broker that ferromq keeps, with its reason.
const INTENDED: &[Intended] = &[
    Intended {
        step: "*",
        aspect: "remark",
        java: "Exception",
        why: "Java's remark is the exception it hit on input it did not check (a \
              NullPointerException on a missing field or body, a NumberFormatException, a \
              fastjson or ByteBuffer error), with a stack frame; ferromq answers the same code \
              and says what is wrong (`the custom field <queueId> is null`, `the custom field \
              <e> is not an int: one`, `batch message 1 is truncated ...`)",
    },
    Intended {
        step: "*",
        aspect: "body",
        java: "record",
        why: "a message sent without a UNIQ_KEY: ferromq makes one, as 5.x (its msgId for \
              lookups and the `transactionId` of the answer); 4.9.8 stores none",
    },
    Intended {
        step: "*",
        aspect: "ext:transactionId",
        java: "",
        why: "as 5.x, ferromq answers a SEND_MESSAGE with the message's UNIQ_KEY as \
              `transactionId`; 4.9.8 sends none",
    },
    Intended {
        step: "search_offset.future*",
        aspect: "ext:offset",
        java: "",
        why: "SEARCH_OFFSET_BY_TIMESTAMP after the last message: ferromq, as 5.x, answers \
              the lower boundary (the first offset stored at or after the time: the max \
              offset, 6) unless `boundaryType` is UPPER; 4.9.8 ignores `boundaryType` and \
              answers the offset stored nearest the time (5)",
    },
    Intended {
        step: "*create_topic*",
        aspect: "remark",
        java: "not set any response code",
        why: "Java leaves its placeholder remark on a SUCCESS of UPDATE_AND_CREATE_TOPIC; no \
              client reads the remark of a success, and this one would mislead a person",
    },
    Intended {
        step: "send.sysflag_*",
        aspect: "ext:msgId",
        java: "hex56",
        why: "Java takes the client's IPv6 bits for the store host of an IPv4 broker and \
              answers an id of 56 digits for a record it then never dispatches; ferromq sets \
              the bits from the real addresses and answers the id of the IPv4 record it stored",
    },
    Intended {
        step: "batch.sysflag_v6",
        aspect: "*",
        java: "",
        why: "Java fails on a batch whose sysFlag claims IPv6 hosts of an IPv4 connection \
              (its encoder overruns the buffer: SYSTEM_ERROR); ferromq stores it with the host \
              bits of the real addresses",
    },
    Intended {
        step: "pull.v6_*",
        aspect: "*",
        java: "",
        why: "Java acknowledges a send whose sysFlag claims IPv6 hosts on an IPv4 connection \
              and never dispatches the record (it cannot read it back), so a pull finds \
              nothing; ferromq stored it with the right host bits and the pull finds it",
    },
    Intended {
        step: "pull.offset_past_max",
        aspect: "ext:nextBeginOffset",
        java: "",
        why: "past the end of a queue whose min offset is 0, ferromq sends the consumer to 0 \
              (the broker's store was emptied: what it stores since must not be skipped); \
              4.9.8 sends it to the max offset, and so does 5.5.0 (JAVA5_INTENDED)",
    },
    Intended {
        step: "pull.offset_huge",
        aspect: "ext:nextBeginOffset",
        java: "",
        why: "as pull.offset_past_max",
    },
    Intended {
        step: "pull.empty_queue",
        aspect: "ext:nextBeginOffset",
        java: "",
        why: "as pull.offset_past_max",
    },
    Intended {
        step: "pull.lite",
        aspect: "*",
        java: "",
        why: "LITE_PULL_MESSAGE (361) is RocketMQ 5's; 4.9.8 does not know it (\
              REQUEST_CODE_NOT_SUPPORTED), ferromq serves 5.x clients too",
    },
    Intended {
        step: "broker_config",
        aspect: "body",
        java: "",
        why: "GET_BROKER_CONFIG lists the settings ferromq has; Java's others configure what \
              ferromq does not have (thread pools, netty buffers, mmap, ACL, DLedger)",
    },
    Intended {
        step: "reset_offset.no_consumer",
        aspect: "*",
        java: "",
        why: "with no member of the group online ferromq answers CONSUMER_NOT_ONLINE before \
              looking at committed offsets, so mqadmin falls back to committing them itself; \
              Java answers SYSTEM_ERROR `THe consumer group <g> not exist` for a queue the \
              group never committed, and mqadmin gives up",
    },
    Intended {
        step: "send_back.group_is_a_path",
        aspect: "*",
        java: "",
        why: "Java takes any group name and makes `consumequeue/%RETRY%<group>/` of it \
              (`a/b` nests, `../` leaves the store); ferromq refuses a group whose retry \
              topic is not a valid topic name (SYSTEM_ERROR `the retry topic of group[g]: \
              ...`), which no Java client can send (its Validators.checkGroup)",
    },
    Intended {
        step: "batch.empty",
        aspect: "code",
        java: "",
        why: "Java hits a NullPointerException on an empty batch (SYSTEM_ERROR, which \
              producers retry); a batch of nothing can never be stored, so ferromq answers \
              MESSAGE_ILLEGAL, which they do not retry",
    },
    Intended {
        step: "offset.query_unknown_*",
        aspect: "*",
        java: "",
        why: "answers as 5.x: QUERY_NOT_FOUND (22) for a committed offset of an unknown topic \
              or queue; 4.9.8 answers SUCCESS with 0",
    },
    Intended {
        step: "offset.update_unknown_topic",
        aspect: "*",
        java: "",
        why: "answers as 5.x: TOPIC_NOT_EXIST (17) `Topic <t> not exist!` to a commit on an \
              unknown topic; 4.9.8 commits it",
    },
    Intended {
        step: "offset.update_no_offset",
        aspect: "*",
        java: "",
        why: "answers as 5.x: INVALID_PARAMETER (29) `Offset is null, topic is <t>`; 4.9.8 \
              answers SYSTEM_ERROR (a NullPointerException)",
    },
    Intended {
        step: "noauto.offset.update_unknown_group",
        aspect: "*",
        java: "",
        why: "answers as 5.x: SUBSCRIPTION_GROUP_NOT_EXIST (26) `Group <g> not exist!` to a \
              commit of a group that does not exist and may not be created; 4.9.8 commits it",
    },
    Intended {
        step: "reset_offset.unknown_topic",
        aspect: "*",
        java: "",
        why: "answers as 5.x: TOPIC_NOT_EXIST (17) `Topic <t> does not exist`; 4.9.8 answers \
              SYSTEM_ERROR",
    },
    Intended {
        step: "*",
        aspect: "remark",
        java: "docs/faq",
        why: "answers as 5.x: the remarks link https://rocketmq.apache.org/docs/bestPractice/\
              06FAQ; 4.9.8's link http://rocketmq.apache.org/docs/faq/",
    },
    Intended {
        step: "*",
        aspect: "remark",
        java: "The specified topic",
        why: "answers as 5.x: the topic checks name the topic (and the maximum length, 127)",
    },
    Intended {
        step: "send.bad_queue",
        aspect: "remark",
        java: "TopicConfig",
        why: "answers as 5.x: the TopicConfig text ends with its `attributes`",
    },
    Intended {
        step: "*pull.*",
        aspect: "ext:*SysFlag",
        java: "absent",
        why: "answers as 5.x: PULL_MESSAGE's answer carries the topic's and the group's \
              sysFlag (`topicSysFlag`, `groupSysFlag`)",
    },
    Intended {
        step: "topic_stats.ok",
        aspect: "body",
        java: "",
        why: "answers as 5.x: GET_TOPIC_STATS_INFO's body adds the topic's puts per second \
              (`topicPutTps`)",
    },
    Intended {
        step: "pull.broadcast_not_allowed",
        aspect: "ext:forbiddenType",
        java: "absent",
        why: "answers as 5.x: the refusal names why the pull is forbidden (`forbiddenType` 4)",
    },
    Intended {
        step: "send.bad_queue|send.topic_*|pull.bad_queue|pull.negative_queue|\
               *_topic.system_*|create_topic.too_long|create_topic.illegal_chars|\
               delete_topic.no_header",
        aspect: "code",
        java: "1",
        why: "answers as 5.x: INVALID_PARAMETER (29) where 4.9.8 answers SYSTEM_ERROR (1) to \
              a request that fails a check: a queue id out of range, a topic too long, with \
              illegal characters or blank, creating or deleting a system topic, a \
              delete-topic request without a topic",
    },
];

/// Time a step waits for an answer before it counts as "no answer" (the test box may be
/// loaded: brokers there have answered a send seconds late).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(15);

/// extFields whose values name a time, an address or an id: compared by presence only.
const VOLATILE_EXT: &[&str] = &[
    "msgId",
    "transactionId",
    "version",
    "indexLastUpdateTimestamp",
    "indexLastUpdatePhyoffset",
];

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// A Java name server and broker and a standalone, with the same `conf` lines.
struct Servers {
    // Fields drop in order: the Java broker stops before its name server.
    java_broker: JavaServer,
    _java_namesrv: JavaServer,
    ours: Ours,
    _dir: TempDir,
}

/// The ferromq side: a standalone, or (when there is no `TBW102` for the standalone to wait
/// for at start-up: `autoCreateTopicEnable=false`) a broker alone, which is all the steps
/// talk to.
enum Ours {
    Standalone(Standalone),
    Broker(BrokerProcess),
}

impl Ours {
    fn broker_addr(&self) -> SocketAddr {
        match self {
            Ours::Standalone(standalone) => standalone.broker,
            Ours::Broker(broker) => broker.addr,
        }
    }
}

/// Keys both brokers get: names as the scripts expect them, room on a nearly full disk.
const COMMON_CONF: &str = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\n\
     diskMaxUsedSpaceRatio=95\nmaxMessageSize=65536\n";

impl Servers {
    /// The Java servers of the kit at `kit` (4.9.8's or 5.x's) and ours.
    fn start(kit: &std::path::Path, conf: &str) -> Servers {
        let dir = TempDir::on_disk("java-differential");
        let java_namesrv = JavaServer::namesrv_on(kit, dir.path());
        // The Java broker reads its disk-full level from a system property only: the test
        // box's disk may be fuller than its 90% default.
        let java_broker = JavaServer::try_broker_on(
            kit,
            dir.path(),
            java_namesrv.port,
            &dir.path().join("java-store"),
            &format!("{COMMON_CONF}{conf}"),
            "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.999",
        )
        .unwrap_or_else(|text| panic!("{text}"));
        let our_conf = format!("{COMMON_CONF}diskSpaceWarningLevelRatio=0.999\n{conf}");
        let ours = if conf.contains("autoCreateTopicEnable=false") {
            Ours::Broker(BrokerProcess::start(&dir.path().join("ours"), &our_conf))
        } else {
            Ours::Standalone(Standalone::start(&our_conf))
        };
        Servers {
            java_broker,
            _java_namesrv: java_namesrv,
            ours,
            _dir: dir,
        }
    }

    fn java_addr(&self) -> SocketAddr {
        self.java_broker.addr().parse().unwrap()
    }
}

/// One broker as the script sees it: its address and a connection per serialization,
/// made again after the broker closed one.
struct Side {
    addr: SocketAddr,
    clients: BTreeMap<u8, RemotingClient>,
    /// CommitLog offsets of the setup messages, in the order they were sent.
    stored: Vec<i64>,
}

impl Side {
    fn new(addr: SocketAddr) -> Side {
        Side {
            addr,
            clients: BTreeMap::new(),
            stored: Vec::new(),
        }
    }

    async fn client(&mut self, serialize: SerializeType) -> RemotingClient {
        let key = serialize.code();
        if let Some(client) = self.clients.get(&key).filter(|c| !c.is_closed()) {
            return client.clone();
        }
        let client = connect(self.addr, serialize).await;
        self.clients.insert(key, client.clone());
        client
    }

    async fn run(&mut self, serialize: SerializeType, step: &Step) -> Outcome {
        match &step.request {
            Request::Command(command) => {
                let client = self.client(serialize).await;
                match client.request_timeout(command.clone(), step.timeout).await {
                    Ok(response) => Outcome::Answer(response),
                    Err(ClientError::Timeout(_)) => Outcome::NoAnswer,
                    Err(_) => {
                        self.clients.remove(&serialize.code());
                        Outcome::Closed
                    }
                }
            }
            Request::Raw { command, from, to } => {
                let frame = raw_frame(command, serialize, from, to);
                raw_exchange(self.addr, &frame, RAW_OPAQUE, step.timeout).await
            }
        }
    }
}

/// The opaque of hand-made frames.
const RAW_OPAQUE: i32 = 4242;

/// `command` as a frame in `serialize`, with the header bytes of `from` replaced by `to`.
fn raw_frame(
    command: &RemotingCommand,
    serialize: SerializeType,
    from: &str,
    to: &[u8],
) -> Vec<u8> {
    assert_eq!(from.len(), to.len(), "a same-length replacement");
    let mut command = command.clone();
    command.opaque = RAW_OPAQUE;
    command.serialize_type = serialize;
    let mut header = Vec::new();
    match serialize {
        SerializeType::Json => serialize_json::encode_header(&command, &mut header),
        SerializeType::RocketMq => serialize_rocketmq::encode_header(&command, &mut header),
    }
    let at = header
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .expect("the placeholder is in the header");
    header[at..at + to.len()].copy_from_slice(to);
    let mut frame = Vec::new();
    let total = u32::try_from(4 + header.len() + command.body.len()).unwrap();
    frame.extend_from_slice(&total.to_be_bytes());
    let word = (u32::from(serialize.code()) << 24) | u32::try_from(header.len()).unwrap();
    frame.extend_from_slice(&word.to_be_bytes());
    frame.extend_from_slice(&header);
    frame.extend_from_slice(&command.body);
    frame
}

/// Sends one hand-made frame on a connection of its own; the answer with `opaque`.
async fn raw_exchange(addr: SocketAddr, frame: &[u8], opaque: i32, timeout: Duration) -> Outcome {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(frame).await.unwrap();
    let mut decoder = FrameDecoder::new(1 << 24);
    let mut chunk = vec![0u8; 64 * 1024];
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        while let Ok(Some(command)) = decoder.next_command() {
            if command.opaque == opaque && command.is_response() {
                return Outcome::Answer(command);
            }
        }
        match tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
            Err(_) => return Outcome::NoAnswer,
            Ok(Ok(0) | Err(_)) => return Outcome::Closed,
            Ok(Ok(n)) => decoder.extend(&chunk[..n]),
        }
    }
}

/// What a request got.
#[derive(Debug)]
enum Outcome {
    Answer(RemotingCommand),
    NoAnswer,
    Closed,
}

enum Request {
    Command(RemotingCommand),
    /// A command whose header text `from` is replaced by the bytes `to` once encoded in
    /// the step's serialization: what our encoder cannot make (a header that is not UTF-8).
    /// `to` is as long as `from`, so the binary header's lengths stay right.
    Raw {
        command: RemotingCommand,
        from: &'static str,
        to: &'static [u8],
    },
}

/// How a step's response body is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyKind {
    /// Records if it decodes as records, else JSON key paths, else the bytes.
    Auto,
    /// JSON with values too (after masking loopback ports).
    JsonValues,
    /// `key=value` lines: the set of keys.
    PropertiesKeys,
    /// Not compared.
    Ignore,
}

/// One request of a script.
struct Step {
    name: String,
    request: Request,
    timeout: Duration,
    body: BodyKind,
    volatile: Vec<&'static str>,
    /// Queues that must hold this many dispatched messages (on both brokers) first.
    dispatched: Vec<(String, i32, i64)>,
}

impl Step {
    fn new(name: impl Into<String>, command: RemotingCommand) -> Step {
        Step {
            name: name.into(),
            request: Request::Command(command),
            timeout: ANSWER_TIMEOUT,
            body: BodyKind::Auto,
            volatile: Vec::new(),
            dispatched: Vec::new(),
        }
    }

    /// Runs once `topic`/`queue` holds `count` dispatched messages: a send is answered when
    /// stored, dispatch makes it pullable a moment later (on both brokers).
    fn after_dispatch(mut self, topic: &str, queue: i32, count: i64) -> Step {
        self.dispatched.push((topic.to_owned(), queue, count));
        self
    }

    fn raw(
        name: impl Into<String>,
        command: RemotingCommand,
        from: &'static str,
        to: &'static [u8],
    ) -> Step {
        Step {
            request: Request::Raw { command, from, to },
            ..Step::new(name, RemotingCommand::request(RequestCode(0)))
        }
    }

    fn timeout(mut self, timeout: Duration) -> Step {
        self.timeout = timeout;
        self
    }

    fn body(mut self, kind: BodyKind) -> Step {
        self.body = kind;
        self
    }

    fn volatile(mut self, keys: &[&'static str]) -> Step {
        self.volatile.extend_from_slice(keys);
        self
    }
}

/// A request with `code`, these extFields and `body`.
fn command(code: i32, fields: &[(&str, &str)], body: &[u8]) -> RemotingCommand {
    let mut command = RemotingCommand::request(RequestCode(code));
    if !fields.is_empty() {
        command.ext_fields = Some(fields.iter().copied().collect());
    }
    command.body = body.to_vec();
    command
}

/// The extFields of a SEND_MESSAGE_V2 a Java producer sends to `topic`/`queue`.
fn send_v2_fields(topic: &str, queue: &str, properties: &str) -> Vec<(String, String)> {
    [
        ("a", "diff-producer"),
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
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect()
}

/// A request from owned fields, with `set` replacing (or adding) and `remove` dropping keys.
fn with_fields(
    code: i32,
    fields: &[(String, String)],
    set: &[(&str, &str)],
    remove: &[&str],
    body: &[u8],
) -> RemotingCommand {
    let mut all: Vec<(&str, &str)> = fields
        .iter()
        .filter(|(k, _)| !remove.contains(&k.as_str()))
        .filter(|(k, _)| !set.iter().any(|(s, _)| s == k))
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    all.extend_from_slice(set);
    command(code, &all, body)
}

fn send_v2(topic: &str, queue: &str, properties: &str, body: &[u8]) -> RemotingCommand {
    with_fields(
        310,
        &send_v2_fields(topic, queue, properties),
        &[],
        &[],
        body,
    )
}

/// A PULL_MESSAGE of `group` from `topic`/`queue` at `offset`, subscription in the request.
fn pull_fields(group: &str, topic: &str, queue: &str, offset: &str) -> Vec<(String, String)> {
    [
        ("consumerGroup", group),
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
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect()
}

fn pull(group: &str, topic: &str, queue: &str, offset: &str) -> RemotingCommand {
    with_fields(11, &pull_fields(group, topic, queue, offset), &[], &[], b"")
}

/// One message of a SEND_BATCH_MESSAGE body, as the producer encodes it.
fn batch_entry(body: &[u8], properties: &str) -> Vec<u8> {
    let mut out = Vec::new();
    ferromq::broker::batch::BatchEntry {
        flag: 0,
        body: body.to_vec(),
        properties: properties.as_bytes().to_vec(),
    }
    .encode(&mut out);
    out
}

/// The heartbeat of one consumer of `group` subscribed to `topic` with `sub_version`.
fn heartbeat_body(group: &str, topic: &str, sub_version: i64) -> Vec<u8> {
    serde_json::json!({
        "clientID": "127.0.0.1@diff",
        "producerDataSet": [{"groupName": "diff-producer"}],
        "consumerDataSet": [{
            "groupName": group,
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "CLUSTERING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
            "subscriptionDataSet": [{
                "classFilterMode": false,
                "topic": topic,
                "subString": "*",
                "tagsSet": [],
                "codeSet": [],
                "subVersion": sub_version,
                "expressionType": "TAG"
            }],
            "unitMode": false
        }]
    })
    .to_string()
    .into_bytes()
}

/// Steps that store the messages later steps read, per serialization `tag`.
fn setup(tag: &str) -> Vec<Step> {
    let topic = format!("DiffT{tag}");
    let mut steps = vec![Step::new(
        "setup.create_topic",
        command(
            17,
            &[
                ("topic", &topic),
                ("defaultTopic", "TBW102"),
                ("readQueueNums", "4"),
                ("writeQueueNums", "4"),
                ("perm", "6"),
                ("topicFilterType", "SINGLE_TAG"),
                ("topicSysFlag", "0"),
                ("order", "false"),
            ],
            b"",
        ),
    )];
    for (index, tags) in ["a", "b", "a"].iter().enumerate() {
        let properties = format!("TAGS\u{1}{tags}\u{2}KEYS\u{1}key{index}\u{2}WAIT\u{1}true");
        steps.push(Step::new(
            format!("setup.send{index}"),
            send_v2(&topic, "0", &properties, format!("body-{index}").as_bytes()),
        ));
    }
    steps
}

/// The offset message id of a send answer, as a CommitLog offset.
fn stored_offset(outcome: &Outcome) -> Option<i64> {
    let Outcome::Answer(response) = outcome else {
        return None;
    };
    let id = response.ext("msgId")?;
    decode_offset_msg_id(id).map(|(_, offset)| offset)
}

/// The requests every broker gets, after [`setup`], for the serialization `tag`; `stored`
/// are the side's own CommitLog offsets of the setup messages.
#[allow(clippy::too_many_lines)]
fn script(tag: &str, stored: &[i64]) -> Vec<Step> {
    let topic = format!("DiffT{tag}");
    let t = topic.as_str();
    let first = stored.first().copied().unwrap_or(0).to_string();
    let v2 = send_v2_fields(t, "0", "TAGS\u{1}x");
    let long_topic = "T".repeat(128);
    let mut steps = Vec::new();

    // Sends.
    steps.push(Step::new(
        "send.ok",
        send_v2(t, "1", "TAGS\u{1}x", b"hello"),
    ));
    steps.push(Step::new(
        "send.v1",
        command(
            10,
            &[
                ("producerGroup", "diff-producer"),
                ("topic", t),
                ("defaultTopic", "TBW102"),
                ("defaultTopicQueueNums", "4"),
                ("queueId", "1"),
                ("sysFlag", "0"),
                ("bornTimestamp", "1700000000000"),
                ("flag", "0"),
                ("properties", "TAGS\u{1}v1"),
                ("reconsumeTimes", "0"),
            ],
            b"v1",
        ),
    ));
    steps.push(
        Step::new(
            "send.any_queue",
            send_v2(&format!("DiffAny{tag}"), "-1", "", b"anywhere"),
        )
        .volatile(&["queueId", "queueOffset"]),
    );
    steps.push(
        Step::new(
            "send.auto_create",
            send_v2(&format!("DiffNew{tag}"), "0", "", b"new"),
        )
        .volatile(&["queueOffset"]),
    );
    steps.push(Step::new(
        "send.unknown_default_topic",
        with_fields(
            310,
            &send_v2_fields(&format!("DiffNone{tag}"), "0", ""),
            &[("c", "NoSuchDefault")],
            &[],
            b"x",
        ),
    ));
    steps.push(Step::new("send.bad_queue", send_v2(t, "99", "", b"x")));
    steps.push(Step::new(
        "send.body_too_large",
        send_v2(t, "0", "", &vec![b'x'; 65_537]),
    ));
    steps.push(Step::new(
        "send.properties_too_large",
        send_v2(t, "0", &format!("K\u{1}{}", "v".repeat(33_000)), b"x"),
    ));
    steps.push(Step::new(
        "send.properties_malformed",
        send_v2(
            t,
            "2",
            "\u{1}\u{2}K\u{1}\u{2}\u{1}v\u{2}\u{2}A\u{1}1\u{1}2\u{2}B",
            b"odd",
        ),
    ));
    steps.push(Step::new(
        "send.no_topic",
        with_fields(310, &v2, &[], &["b"], b"x"),
    ));
    steps.push(Step::new(
        "send.no_queue",
        with_fields(310, &v2, &[], &["e"], b"x"),
    ));
    steps.push(Step::new(
        "send.queue_not_number",
        with_fields(310, &v2, &[("e", "one")], &[], b"x"),
    ));
    steps.push(Step::new(
        "send.born_not_number",
        with_fields(310, &v2, &[("g", "yesterday")], &[], b"x"),
    ));
    steps.push(Step::new(
        "send.reconsume_not_number",
        with_fields(310, &v2, &[("j", "twice")], &[], b"x"),
    ));
    steps.push(Step::new(
        "send.queue_too_big",
        with_fields(310, &v2, &[("e", "99999999999")], &[], b"x"),
    ));
    steps.push(Step::new(
        "send.no_producer_group",
        with_fields(310, &v2, &[], &["a"], b"no group"),
    ));
    steps.push(Step::new(
        "send.no_default_topic",
        with_fields(310, &v2, &[], &["c"], b"no default"),
    ));
    steps.push(Step::new(
        "send.v1_no_producer_group",
        command(
            10,
            &[
                ("topic", t),
                ("defaultTopic", "TBW102"),
                ("defaultTopicQueueNums", "4"),
                ("queueId", "0"),
                ("sysFlag", "0"),
                ("bornTimestamp", "1700000000000"),
                ("flag", "0"),
            ],
            b"v1 no group",
        ),
    ));
    steps.push(Step::new(
        "send.v1_queue_not_number",
        command(
            10,
            &[
                ("producerGroup", "diff-producer"),
                ("topic", t),
                ("defaultTopic", "TBW102"),
                ("defaultTopicQueueNums", "4"),
                ("queueId", "one"),
                ("sysFlag", "0"),
                ("bornTimestamp", "1700000000000"),
                ("flag", "0"),
            ],
            b"v1",
        ),
    ));
    steps.push(Step::new("send.no_header", command(310, &[], b"x")));
    steps.push(Step::new(
        "send.topic_too_long",
        send_v2(&long_topic, "0", "", b"x"),
    ));
    steps.push(Step::new(
        "send.topic_illegal_chars",
        send_v2("bad topic!", "0", "", b"x"),
    ));
    steps.push(Step::new("send.topic_blank", send_v2(" ", "0", "", b"x")));
    for system in [
        "SCHEDULE_TOPIC_XXXX",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
    ] {
        steps.push(Step::new(
            format!("send.system_{system}"),
            send_v2(system, "0", "", b"x"),
        ));
    }
    for system in [
        "DefaultCluster",
        "broker-a",
        "BenchmarkTest",
        "RMQ_SYS_TRACE_TOPIC",
    ] {
        steps.push(
            Step::new(
                format!("send.system_{system}"),
                send_v2(system, "0", "", b"x"),
            )
            .volatile(&["queueOffset"]),
        );
    }
    steps.push(
        Step::new("send.system_TBW102", send_v2("TBW102", "0", "", b"x"))
            .volatile(&["queueOffset"]),
    );
    for (name, flag) in [("born_v6", "16"), ("store_v6", "32"), ("both_v6", "48")] {
        let topic = format!("DiffV6{tag}");
        steps.push(Step::new(
            format!("send.sysflag_{name}"),
            with_fields(
                310,
                &send_v2_fields(&topic, "0", ""),
                &[("f", flag)],
                &[],
                name.as_bytes(),
            ),
        ));
    }
    steps.push(Step::new(
        "send.sysflag_v6_v1",
        command(
            10,
            &[
                ("producerGroup", "diff-producer"),
                ("topic", &format!("DiffV6{tag}")),
                ("defaultTopic", "TBW102"),
                ("defaultTopicQueueNums", "4"),
                ("queueId", "0"),
                ("sysFlag", "48"),
                ("bornTimestamp", "1700000000000"),
                ("flag", "0"),
            ],
            b"v1-v6",
        ),
    ));

    // Batches.
    let good = batch_entry(b"batched", "TAGS\u{1}b");
    let batch = |properties: &str, sys_flag: &str, topic: &str, body: Vec<u8>| {
        with_fields(
            320,
            &send_v2_fields(topic, "3", properties),
            &[("m", "true"), ("f", sys_flag)],
            &[],
            &body,
        )
    };
    steps.push(Step::new(
        "batch.ok",
        batch("", "0", t, [good.clone(), good.clone()].concat()),
    ));
    steps.push(Step::new("batch.empty", batch("", "0", t, Vec::new())));
    steps.push(Step::new(
        "batch.truncated",
        batch(
            "",
            "0",
            t,
            [good.clone(), good[..good.len() - 3].to_vec()].concat(),
        ),
    ));
    let mut negative = good.clone();
    negative[16..20].copy_from_slice(&(-5_i32).to_be_bytes());
    steps.push(Step::new(
        "batch.negative_body_length",
        batch("", "0", t, negative),
    ));
    steps.push(Step::new(
        "batch.transaction_flag",
        batch("", "4", t, good.clone()),
    ));
    steps.push(Step::new(
        "batch.delay",
        batch("DELAY\u{1}3", "0", t, good.clone()),
    ));
    steps.push(Step::new(
        "batch.system_topic",
        batch("", "0", "SCHEDULE_TOPIC_XXXX", good.clone()),
    ));
    steps.push(Step::new(
        "batch.sysflag_v6",
        batch("", "48", &format!("DiffV6{tag}"), good.clone()),
    ));
    steps.push(Step::new(
        "send.after_bad_ones",
        send_v2(t, "1", "", b"after"),
    ));

    // Pulls (dispatch is waited for first).
    steps.push(
        Step::new("pull.ok", pull("diff-group", t, "0", "0"))
            .after_dispatch(t, 0, 6)
            .after_dispatch(t, 1, 3)
            .after_dispatch(t, 2, 1)
            .after_dispatch(t, 3, 2),
    );
    steps.push(Step::new("pull.ok_queue1", pull("diff-group", t, "1", "0")));
    steps.push(Step::new(
        "pull.properties_kept",
        pull("diff-group", t, "2", "0"),
    ));
    steps.push(Step::new("pull.batch", pull("diff-group", t, "3", "0")));
    steps.push(Step::new(
        "pull.offset_middle",
        pull("diff-group", t, "0", "1"),
    ));
    steps.push(Step::new(
        "pull.offset_at_max",
        pull("diff-group", t, "0", "6"),
    ));
    steps.push(Step::new(
        "pull.offset_past_max",
        pull("diff-group", t, "0", "50"),
    ));
    steps.push(Step::new(
        "pull.offset_negative",
        pull("diff-group", t, "0", "-1"),
    ));
    steps.push(Step::new(
        "pull.offset_huge",
        pull("diff-group", t, "0", "9223372036854775807"),
    ));
    steps.push(Step::new(
        "pull.empty_queue",
        pull("diff-group", t, "3", "5"),
    ));
    steps.push(Step::new(
        "pull.empty_queue_zero",
        pull("diff-group", t, "3", "2"),
    ));
    steps.push(Step::new(
        "pull.unknown_topic",
        pull("diff-group", "NoSuchT", "0", "0"),
    ));
    steps.push(Step::new(
        "pull.bad_queue",
        pull("diff-group", t, "99", "0"),
    ));
    steps.push(Step::new(
        "pull.negative_queue",
        pull("diff-group", t, "-1", "0"),
    ));
    steps.push(Step::new(
        "pull.max_zero",
        with_fields(
            11,
            &pull_fields("diff-group", t, "0", "0"),
            &[("maxMsgNums", "0")],
            &[],
            b"",
        ),
    ));
    steps.push(Step::new(
        "pull.tag_filter",
        with_fields(
            11,
            &pull_fields("diff-group", t, "0", "0"),
            &[("subscription", "b")],
            &[],
            b"",
        ),
    ));
    steps.push(Step::new(
        "pull.no_subscription",
        with_fields(
            11,
            &pull_fields("diff-nosub", t, "0", "0"),
            &[("sysFlag", "0")],
            &[],
            b"",
        ),
    ));
    steps.push(Step::new(
        "pull.queue_not_number",
        with_fields(
            11,
            &pull_fields("diff-group", t, "0", "0"),
            &[("queueId", "zero")],
            &[],
            b"",
        ),
    ));
    steps.push(Step::new(
        "pull.optional_not_number",
        with_fields(
            11,
            &pull_fields("diff-group", t, "0", "0"),
            &[("maxMsgBytes", "lots")],
            &[],
            b"",
        ),
    ));
    steps.push(Step::new(
        "pull.no_group",
        with_fields(
            11,
            &pull_fields("diff-group", t, "0", "0"),
            &[],
            &["consumerGroup"],
            b"",
        ),
    ));
    // Java's hold service looks at waiting pulls every 5 s.
    steps.push(
        Step::new(
            "pull.suspend_at_max",
            with_fields(
                11,
                &pull_fields("diff-group", t, "0", "6"),
                &[("sysFlag", "6"), ("suspendTimeoutMillis", "300")],
                &[],
                b"",
            ),
        )
        .timeout(Duration::from_secs(8)),
    );
    steps.push(Step::new(
        "pull.lite",
        with_fields(361, &pull_fields("diff-group", t, "0", "0"), &[], &[], b""),
    ));
    steps.push(Step::new(
        "pull.v6_messages",
        pull("diff-group", &format!("DiffV6{tag}"), "0", "0"),
    ));
    steps.push(Step::new(
        "pull.v6_batch",
        pull("diff-group", &format!("DiffV6{tag}"), "3", "0"),
    ));

    // Heartbeats and subscriptions.
    let sub_group = format!("diff-sub{tag}");
    steps.push(Step::new(
        "heartbeat.ok",
        command(34, &[], &heartbeat_body(&sub_group, t, 5)),
    ));
    steps.push(Step::new(
        "pull.subscription_latest",
        with_fields(
            11,
            &pull_fields(&sub_group, t, "0", "0"),
            &[("sysFlag", "0"), ("subVersion", "5")],
            &[],
            b"",
        ),
    ));
    steps.push(Step::new(
        "pull.subscription_not_latest",
        with_fields(
            11,
            &pull_fields(&sub_group, t, "0", "0"),
            &[("sysFlag", "0"), ("subVersion", "6")],
            &[],
            b"",
        ),
    ));
    steps.push(Step::new(
        "pull.subscription_other_topic",
        with_fields(
            11,
            &pull_fields(&sub_group, &format!("DiffNew{tag}"), "0", "0"),
            &[("sysFlag", "0")],
            &[],
            b"",
        ),
    ));
    let no_broadcast = format!("diff-nobroadcast{tag}");
    let group = serde_json::json!({
        "groupName": no_broadcast,
        "consumeEnable": true,
        "consumeBroadcastEnable": false,
        "retryQueueNums": 1,
        "retryMaxTimes": 16
    });
    steps.push(Step::new(
        "group.create_no_broadcast",
        command(200, &[], group.to_string().as_bytes()),
    ));
    let mut broadcasting: Value =
        serde_json::from_slice(&heartbeat_body(&no_broadcast, t, 1)).unwrap();
    broadcasting["consumerDataSet"][0]["messageModel"] = "BROADCASTING".into();
    steps.push(Step::new(
        "heartbeat.broadcasting",
        command(34, &[], broadcasting.to_string().as_bytes()),
    ));
    steps.push(Step::new(
        "pull.broadcast_not_allowed",
        with_fields(
            11,
            &pull_fields(&no_broadcast, t, "0", "0"),
            &[("sysFlag", "0"), ("subVersion", "1")],
            &[],
            b"",
        ),
    ));
    steps.push(Step::new(
        "pull.sql92_filter_disabled",
        with_fields(
            11,
            &pull_fields("diff-group", t, "0", "0"),
            &[("subscription", "a > 1"), ("expressionType", "SQL92")],
            &[],
            b"",
        ),
    ));
    steps.push(
        Step::new(
            "consumer_list.known",
            command(38, &[("consumerGroup", &sub_group)], b""),
        )
        .body(BodyKind::JsonValues),
    );
    steps.push(Step::new(
        "consumer_list.unknown",
        command(38, &[("consumerGroup", "NoSuchGroup")], b""),
    ));
    steps.push(Step::new("consumer_list.no_group", command(38, &[], b"")));
    for (name, body) in [
        ("heartbeat.empty", &b""[..]),
        ("heartbeat.empty_object", b"{}"),
        ("heartbeat.not_json", b"not json"),
        ("heartbeat.array", b"[]"),
        (
            "heartbeat.group_only",
            br#"{"clientID":"c1","consumerDataSet":[{"groupName":"diff-odd"}]}"#,
        ),
        (
            "heartbeat.strings_for_numbers",
            concat!(
                r#"{"clientID":"c2","consumerDataSet":[{"groupName":"diff-odd2","#,
                r#""subscriptionDataSet":[{"topic":"DiffTJ","subString":"*","subVersion":"7"}]}]}"#
            )
            .as_bytes(),
        ),
        (
            "heartbeat.nulls",
            br#"{"clientID":null,"producerDataSet":null,"consumerDataSet":[null]}"#,
        ),
        (
            "heartbeat.null_sets",
            br#"{"clientID":"c4","producerDataSet":null,"consumerDataSet":null}"#,
        ),
        (
            "heartbeat.null_client",
            br#"{"clientID":null,"producerDataSet":[],"consumerDataSet":[]}"#,
        ),
        (
            "heartbeat.unknown_fields",
            br#"{"clientID":"c3","heartbeatFingerprint":7,"withoutSub":true}"#,
        ),
    ] {
        steps.push(Step::new(name, command(34, &[], body)));
    }
    steps.push(Step::new(
        "unregister.ok",
        command(
            35,
            &[
                ("clientID", "127.0.0.1@diff"),
                ("producerGroup", "diff-producer"),
            ],
            b"",
        ),
    ));
    steps.push(Step::new("unregister.no_client", command(35, &[], b"")));
    steps.push(Step::new(
        "unregister.group_only",
        command(35, &[("consumerGroup", "diff-odd")], b""),
    ));

    // Consumer offsets.
    let offset_query = |group: &str, topic: &str, queue: &str| {
        command(
            14,
            &[
                ("consumerGroup", group),
                ("topic", topic),
                ("queueId", queue),
            ],
            b"",
        )
    };
    steps.push(Step::new(
        "offset.query_unknown_group",
        offset_query("NoSuchGroup", t, "0"),
    ));
    steps.push(Step::new(
        "offset.query_unknown_queue",
        offset_query("diff-group", t, "77"),
    ));
    steps.push(Step::new(
        "offset.query_unknown_topic",
        offset_query("diff-group", "NoSuchT", "0"),
    ));
    steps.push(Step::new(
        "offset.update",
        command(
            15,
            &[
                ("consumerGroup", "diff-group"),
                ("topic", t),
                ("queueId", "0"),
                ("commitOffset", "2"),
            ],
            b"",
        ),
    ));
    steps.push(Step::new(
        "offset.query_after_update",
        offset_query("diff-group", t, "0"),
    ));
    steps.push(Step::new(
        "offset.update_unknown_topic",
        command(
            15,
            &[
                ("consumerGroup", "diff-group"),
                ("topic", "NoSuchT"),
                ("queueId", "0"),
                ("commitOffset", "9"),
            ],
            b"",
        ),
    ));
    steps.push(Step::new(
        "offset.update_no_offset",
        command(
            15,
            &[
                ("consumerGroup", "diff-group"),
                ("topic", t),
                ("queueId", "0"),
            ],
            b"",
        ),
    ));
    steps.push(Step::new(
        "offset.query_no_queue",
        command(14, &[("consumerGroup", "diff-group"), ("topic", t)], b""),
    ));
    for (code, name) in [(30, "max"), (31, "min")] {
        let request =
            |topic: &str, queue: &str| command(code, &[("topic", topic), ("queueId", queue)], b"");
        steps.push(Step::new(format!("{name}_offset.ok"), request(t, "0")));
        steps.push(Step::new(
            format!("{name}_offset.unknown_topic"),
            request("NoSuchT", "0"),
        ));
        steps.push(Step::new(
            format!("{name}_offset.bad_queue"),
            request(t, "99"),
        ));
        steps.push(Step::new(
            format!("{name}_offset.negative_queue"),
            request(t, "-1"),
        ));
        steps.push(Step::new(
            format!("{name}_offset.no_queue"),
            command(code, &[("topic", t)], b""),
        ));
    }
    let search = |topic: &str, queue: &str, timestamp: &str| {
        command(
            29,
            &[
                ("topic", topic),
                ("queueId", queue),
                ("timestamp", timestamp),
            ],
            b"",
        )
    };
    steps.push(Step::new("search_offset.zero", search(t, "0", "0")));
    steps.push(Step::new(
        "search_offset.future",
        search(t, "0", "4102444800000"),
    ));
    let search_boundary = |timestamp: &str, boundary: &str| {
        command(
            29,
            &[
                ("topic", t),
                ("queueId", "0"),
                ("timestamp", timestamp),
                ("boundaryType", boundary),
            ],
            b"",
        )
    };
    for (name, timestamp) in [("zero", "0"), ("future", "4102444800000")] {
        for boundary in ["LOWER", "UPPER", "upper", "sideways"] {
            steps.push(Step::new(
                format!("search_offset.{name}_{boundary}"),
                search_boundary(timestamp, boundary),
            ));
        }
    }
    steps.push(Step::new(
        "search_offset.unknown_topic",
        search("NoSuchT", "0", "0"),
    ));
    steps.push(Step::new("search_offset.bad_queue", search(t, "99", "0")));
    steps.push(Step::new(
        "search_offset.no_timestamp",
        command(29, &[("topic", t), ("queueId", "0")], b""),
    ));
    let earliest =
        |topic: &str, queue: &str| command(32, &[("topic", topic), ("queueId", queue)], b"");
    steps.push(Step::new("earliest_time.ok", earliest(t, "0")).volatile(&["timestamp"]));
    steps.push(Step::new(
        "earliest_time.unknown_topic",
        earliest("NoSuchT", "0"),
    ));
    steps.push(Step::new("earliest_time.bad_queue", earliest(t, "99")));

    // Lookups.
    steps.push(Step::new(
        "view.ok",
        command(33, &[("offset", &first)], b""),
    ));
    steps.push(Step::new(
        "view.negative",
        command(33, &[("offset", "-1")], b""),
    ));
    steps.push(Step::new(
        "view.past_end",
        command(33, &[("offset", "999999999")], b""),
    ));
    steps.push(Step::new(
        "view.not_a_record",
        command(
            33,
            &[(
                "offset",
                &(stored.first().copied().unwrap_or(0) + 3).to_string(),
            )],
            b"",
        ),
    ));
    steps.push(Step::new("view.no_offset", command(33, &[], b"")));
    let query = |key: &str, begin: &str, end: &str| {
        command(
            12,
            &[
                ("topic", t),
                ("key", key),
                ("maxNum", "32"),
                ("beginTimestamp", begin),
                ("endTimestamp", end),
            ],
            b"",
        )
    };
    steps.push(
        Step::new("query.found", query("key1", "0", "9223372036854775807"))
            .volatile(&["indexLastUpdateTimestamp"]),
    );
    steps.push(Step::new(
        "query.not_found",
        query("no-such-key", "0", "9223372036854775807"),
    ));
    steps.push(Step::new("query.empty_range", query("key1", "10", "5")));
    steps.push(Step::new(
        "query.unknown_topic",
        command(
            12,
            &[
                ("topic", "NoSuchT"),
                ("key", "key1"),
                ("maxNum", "32"),
                ("beginTimestamp", "0"),
                ("endTimestamp", "9223372036854775807"),
            ],
            b"",
        ),
    ));

    // Orderly consumers' locks.
    let lock_body = |group: &str, client: &str| {
        serde_json::json!({
            "consumerGroup": group,
            "clientId": client,
            "mqSet": [
                {"topic": t, "brokerName": "broker-a", "queueId": 0},
                {"topic": t, "brokerName": "broker-a", "queueId": 1}
            ]
        })
        .to_string()
        .into_bytes()
    };
    steps.push(
        Step::new("lock.ok", command(41, &[], &lock_body("diff-lock", "c1")))
            .body(BodyKind::JsonValues),
    );
    steps.push(
        Step::new(
            "lock.held_by_other",
            command(41, &[], &lock_body("diff-lock", "c2")),
        )
        .body(BodyKind::JsonValues),
    );
    steps.push(Step::new("lock.empty_body", command(41, &[], b"")));
    steps.push(Step::new("lock.not_json", command(41, &[], b"nope")));
    steps.push(Step::new(
        "unlock.ok",
        command(42, &[], &lock_body("diff-lock", "c1")),
    ));
    steps.push(Step::new("unlock.empty_body", command(42, &[], b"")));

    // Transactions and send-back.
    let end = |offset: &str, kind: &str| {
        command(
            37,
            &[
                ("producerGroup", "diff-producer"),
                ("tranStateTableOffset", "0"),
                ("commitLogOffset", offset),
                ("commitOrRollback", kind),
                ("fromTransactionCheck", "false"),
                ("msgId", "00"),
            ],
            b"",
        )
    };
    steps.push(Step::new(
        "end_transaction.commit_bad_offset",
        end("-1", "8"),
    ));
    steps.push(Step::new(
        "end_transaction.rollback_past_end",
        end("999999999", "12"),
    ));
    steps.push(Step::new(
        "end_transaction.commit_not_half",
        end(&first, "8"),
    ));
    // Neither broker answers "unknown": wait for that no longer than needed.
    steps.push(
        Step::new("end_transaction.unknown_type", end(&first, "0"))
            .body(BodyKind::Ignore)
            .timeout(Duration::from_secs(3)),
    );
    steps.push(Step::new(
        "end_transaction.no_header",
        command(37, &[], b""),
    ));
    let back = |offset: &str| {
        command(
            36,
            &[
                ("offset", offset),
                ("group", "diff-group"),
                ("delayLevel", "0"),
                ("originMsgId", "00"),
                ("originTopic", t),
                ("maxReconsumeTimes", "16"),
            ],
            b"",
        )
    };
    steps.push(Step::new("send_back.bad_offset", back("-1")));
    steps.push(Step::new("send_back.past_end", back("999999999")));
    steps.push(Step::new(
        "send_back.not_a_record",
        back(&(stored.first().copied().unwrap_or(0) + 3).to_string()),
    ));
    steps.push(Step::new("send_back.ok", back(&first)));
    steps.push(Step::new("send_back.no_header", command(36, &[], b"")));
    steps.push(Step::new(
        "send_back.group_is_a_path",
        command(
            36,
            &[
                ("offset", &first),
                ("group", &format!("diff/nested{tag}")),
                ("delayLevel", "0"),
                ("originMsgId", "00"),
                ("originTopic", t),
                ("maxReconsumeTimes", "16"),
            ],
            b"",
        ),
    ));

    // Admin.
    let create = |topic: &str| {
        command(
            17,
            &[
                ("topic", topic),
                ("defaultTopic", "TBW102"),
                ("readQueueNums", "2"),
                ("writeQueueNums", "2"),
                ("perm", "6"),
                ("topicFilterType", "SINGLE_TAG"),
                ("topicSysFlag", "0"),
                ("order", "false"),
            ],
            b"",
        )
    };
    for system in [
        "SCHEDULE_TOPIC_XXXX",
        "TBW102",
        "BenchmarkTest",
        "RMQ_SYS_TRANS_HALF_TOPIC",
        "RMQ_SYS_TRACE_TOPIC",
        "RMQ_SYS_TRANS_OP_HALF_TOPIC",
        "TRANS_CHECK_MAX_TIME_TOPIC",
        "SELF_TEST_TOPIC",
        "OFFSET_MOVED_EVENT",
        "DefaultCluster",
        "broker-a",
        "DefaultCluster_REPLY_TOPIC",
        "rmq_sys_anything",
    ] {
        steps.push(Step::new(
            format!("create_topic.system_{system}"),
            create(system),
        ));
        steps.push(Step::new(
            format!("delete_topic.system_{system}"),
            command(215, &[("topic", system)], b""),
        ));
    }
    steps.push(Step::new("create_topic.too_long", create(&long_topic)));
    steps.push(Step::new("create_topic.illegal_chars", create("a/b")));
    steps.push(Step::new("create_topic.no_header", command(17, &[], b"")));
    steps.push(Step::new(
        "create_topic.queues_not_number",
        with_fields(
            17,
            &[
                ("topic".into(), format!("DiffQ{tag}")),
                ("defaultTopic".into(), "TBW102".into()),
                ("readQueueNums".into(), "many".into()),
                ("writeQueueNums".into(), "2".into()),
                ("perm".into(), "6".into()),
                ("topicFilterType".into(), "SINGLE_TAG".into()),
                ("order".into(), "false".into()),
            ],
            &[],
            &[],
            b"",
        ),
    ));
    steps.push(Step::new(
        "create_topic.minimal",
        command(
            17,
            &[
                ("topic", &format!("DiffMin{tag}")),
                ("readQueueNums", "1"),
                ("writeQueueNums", "1"),
                ("perm", "6"),
                ("topicFilterType", "SINGLE_TAG"),
            ],
            b"",
        ),
    ));
    steps.push(Step::new(
        "create_topic.ok",
        create(&format!("DiffAdmin{tag}")),
    ));
    steps.push(Step::new(
        "delete_topic.ok",
        command(215, &[("topic", &format!("DiffAdmin{tag}"))], b""),
    ));
    steps.push(Step::new(
        "delete_topic.unknown",
        command(215, &[("topic", "NoSuchT")], b""),
    ));
    steps.push(Step::new(
        "delete_topic.illegal_chars",
        command(215, &[("topic", "a/b")], b""),
    ));
    steps.push(Step::new("delete_topic.no_header", command(215, &[], b"")));
    steps.push(Step::new("all_topic_config", command(21, &[], b"")));
    steps.push(Step::new("all_groups", command(201, &[], b"")));
    steps.push(Step::new("all_consumer_offsets", command(43, &[], b"")));
    steps.push(Step::new("broker_config", command(26, &[], b"")).body(BodyKind::PropertiesKeys));
    steps.push(Step::new("runtime_info", command(28, &[], b"")));
    steps.push(Step::new(
        "topic_stats.ok",
        command(202, &[("topic", t)], b""),
    ));
    steps.push(Step::new(
        "topic_stats.unknown",
        command(202, &[("topic", "NoSuchT")], b""),
    ));
    steps.push(Step::new(
        "consume_stats.ok",
        command(208, &[("consumerGroup", "diff-group"), ("topic", t)], b""),
    ));
    steps.push(Step::new(
        "consume_stats.unknown_group",
        command(208, &[("consumerGroup", "NoSuchGroup")], b""),
    ));
    steps.push(Step::new(
        "consumer_connections.known",
        command(203, &[("consumerGroup", &sub_group)], b""),
    ));
    steps.push(Step::new(
        "producer_connections.known",
        command(204, &[("producerGroup", "diff-producer")], b""),
    ));
    steps.push(Step::new(
        "consumer_connections.unknown",
        command(203, &[("consumerGroup", "NoSuchGroup")], b""),
    ));
    steps.push(Step::new(
        "producer_connections.unknown",
        command(204, &[("producerGroup", "NoSuchGroup")], b""),
    ));
    let group_body = |name: &str| {
        serde_json::json!({
            "groupName": name,
            "consumeEnable": true,
            "consumeFromMinEnable": true,
            "consumeBroadcastEnable": true,
            "retryQueueNums": 1,
            "retryMaxTimes": 16,
            "brokerId": 0,
            "whichBrokerWhenConsumeSlowly": 1,
            "notifyConsumerIdsChangedEnable": true
        })
        .to_string()
        .into_bytes()
    };
    steps.push(Step::new(
        "group.create",
        command(200, &[], &group_body(&format!("diff-admin{tag}"))),
    ));
    steps.push(Step::new("group.create_empty_body", command(200, &[], b"")));
    steps.push(Step::new("group.create_not_json", command(200, &[], b"{x")));
    steps.push(Step::new(
        "group.delete",
        command(207, &[("groupName", &format!("diff-admin{tag}"))], b""),
    ));
    steps.push(Step::new(
        "group.delete_unknown",
        command(207, &[("groupName", "NoSuchGroup")], b""),
    ));
    steps.push(Step::new(
        "reset_offset.no_consumer",
        command(
            222,
            &[
                ("topic", t),
                ("group", "diff-group"),
                ("timestamp", "0"),
                ("isForce", "true"),
            ],
            b"",
        ),
    ));
    steps.push(Step::new(
        "reset_offset.unknown_topic",
        command(
            222,
            &[
                ("topic", "NoSuchT"),
                ("group", "diff-group"),
                ("timestamp", "0"),
                ("isForce", "true"),
            ],
            b"",
        ),
    ));
    steps.push(Step::new("unknown_code", command(9999, &[], b"")));
    steps.push(Step::new("unknown_code_negative", command(-3, &[], b"")));

    // Headers a Java server reads with replacement characters.
    let mut max_with_remark = command(30, &[("topic", t), ("queueId", "0")], b"");
    max_with_remark.remark = Some("bad@@".into());
    steps.push(Step::raw(
        "header.invalid_utf8_remark",
        max_with_remark,
        "@@",
        b"\xff\xfe",
    ));
    steps.push(Step::raw(
        "header.invalid_utf8_field",
        command(30, &[("topic", "Diff@@T"), ("queueId", "0")], b""),
        "@@",
        b"\xfe\xff",
    ));
    steps.push(Step::raw(
        "header.invalid_utf8_properties",
        send_v2(
            t,
            "2",
            "TAGS\u{1}x@@y\u{2}KEYS\u{1}k",
            b"not utf-8 properties",
        ),
        "@@",
        b"\xc3\x28",
    ));
    steps.push(
        Step::new(
            "pull.invalid_utf8_properties",
            pull("diff-group", t, "2", "1"),
        )
        .after_dispatch(t, 2, 2),
    );
    steps
}

/// Waits (bounded) until `topic`/`queue` has at least `count` messages dispatched. A minute:
/// under the full suite on two cores, the Java 5.x broker once took over 20 s to dispatch.
async fn wait_dispatched(client: &RemotingClient, side: &str, topic: &str, queue: i32, count: i64) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let request = command(
            30,
            &[("topic", topic), ("queueId", &queue.to_string())],
            b"",
        );
        let response = client.request(request).await.unwrap();
        let offset: i64 = response
            .ext("offset")
            .and_then(|o| o.parse().ok())
            .unwrap_or(-1);
        if offset >= count {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{topic}/{queue} stays at {offset} on the {side} broker: {response:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One difference between the brokers' outcomes of a step.
#[derive(Debug)]
struct Diff {
    step: String,
    aspect: String,
    java: String,
    ours: String,
}

/// One line about an outcome, for the test's log.
fn summary(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Answer(r) => {
            let remark = r.remark.as_deref().unwrap_or_default();
            let remark: String = remark.chars().take(60).collect();
            format!("{} {remark:?}", r.code)
        }
        Outcome::NoAnswer => "no answer".to_owned(),
        Outcome::Closed => "closed".to_owned(),
    }
}

/// Masks the ports of loopback addresses (they differ between the two brokers).
fn mask_ports(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("127.0.0.1:") {
        let (head, tail) = rest.split_at(at + "127.0.0.1:".len());
        out.push_str(head);
        let digits = tail.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("PORT");
        }
        rest = &tail[digits..];
    }
    out.push_str(rest);
    out
}

/// The outcomes of a step, compared aspect by aspect.
fn compare(step: &Step, label: &str, java: &Outcome, ours: &Outcome) -> Vec<Diff> {
    let mut diffs = Vec::new();
    let mut push = |aspect: &str, java: String, ours: String| {
        diffs.push(Diff {
            step: label.to_owned(),
            aspect: aspect.to_owned(),
            java,
            ours,
        });
    };
    let (java, ours) = match (java, ours) {
        (Outcome::Answer(java), Outcome::Answer(ours)) => (java, ours),
        (java, ours) => {
            let name = |o: &Outcome| match o {
                Outcome::Answer(r) => format!("answer code {} {:?}", r.code, r.remark),
                Outcome::NoAnswer => "no answer".to_owned(),
                Outcome::Closed => "connection closed".to_owned(),
            };
            if std::mem::discriminant(java) != std::mem::discriminant(ours) {
                push("answer", name(java), name(ours));
            }
            return diffs;
        }
    };
    if java.code != ours.code {
        push("code", java.code.to_string(), ours.code.to_string());
    }
    let remark = |r: &RemotingCommand| r.remark.as_deref().map(mask_ports).unwrap_or_default();
    if remark(java) != remark(ours) {
        push("remark", remark(java), remark(ours));
    }
    let fields = |r: &RemotingCommand| -> BTreeMap<String, String> {
        r.ext_fields
            .iter()
            .flat_map(|f| f.iter())
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    };
    let (java_fields, our_fields) = (fields(java), fields(ours));
    let keys: BTreeSet<&String> = java_fields.keys().chain(our_fields.keys()).collect();
    for key in keys {
        let (j, o) = (java_fields.get(key), our_fields.get(key));
        let volatile =
            VOLATILE_EXT.contains(&key.as_str()) || step.volatile.contains(&key.as_str());
        let shown = |v: Option<&String>| match v {
            None => "absent".to_owned(),
            Some(v) if key == "msgId" => id_shape(v),
            Some(_) if volatile => "present".to_owned(),
            Some(v) => mask_ports(v),
        };
        if shown(j) != shown(o) {
            push(&format!("ext:{key}"), shown(j), shown(o));
        }
    }
    if step.body != BodyKind::Ignore {
        let (j, o) = (
            body_shape(&java.body, step.body),
            body_shape(&ours.body, step.body),
        );
        if j != o {
            let (j, o) = describe_difference(&j, &o);
            push("body", j, o);
        }
    }
    diffs
}

/// A message id by its shape: the lengths of its comma-separated parts.
fn id_shape(id: &str) -> String {
    let parts: Vec<String> = id.split(',').map(|p| format!("hex{}", p.len())).collect();
    parts.join(",")
}

/// A comparable description of a body, one item per line.
fn body_shape(body: &[u8], kind: BodyKind) -> Vec<String> {
    if body.is_empty() {
        return vec!["empty".to_owned()];
    }
    if kind == BodyKind::PropertiesKeys {
        let text = String::from_utf8_lossy(body);
        return text
            .lines()
            .filter_map(|line| line.split_once('='))
            .map(|(key, _)| format!("key {key}"))
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
    }
    if let Some(records) = records_shape(body) {
        return records;
    }
    if let Some(json) = json_value(body) {
        if kind == BodyKind::JsonValues {
            return vec![mask_ports(&canonical(&json).to_string())];
        }
        let mut paths = BTreeSet::new();
        json_paths(&json, "$", &mut paths);
        return paths.into_iter().collect();
    }
    vec![format!(
        "{} bytes: {:?}",
        body.len(),
        String::from_utf8_lossy(&body[..body.len().min(200)])
    )]
}

/// Each record of a pull or lookup body, by the fields a consumer reads.
fn records_shape(body: &[u8]) -> Option<Vec<String>> {
    let mut at = 0;
    let mut out = Vec::new();
    while at < body.len() {
        let Ok(Record::Message { record, size }) = decode_record(&body[at..], false) else {
            return None;
        };
        // A UNIQ_KEY by its shape: the broker makes one when the client sent none.
        let properties: BTreeMap<String, String> = parse_properties(record.properties)
            .into_iter()
            .map(|(name, value)| match name.as_str() {
                "UNIQ_KEY" => (name, id_shape(&value)),
                _ => (name, value),
            })
            .collect();
        out.push(format!(
            "record topic={} queue={} queueOffset={} flag={} sysFlag={} reconsume={} \
             bornHost={} storeHost={} body={:?} properties={:?}",
            record.topic,
            record.queue_id,
            record.queue_offset,
            record.flag,
            record.sys_flag,
            record.reconsume_times,
            record.born_host.ip(),
            record.store_host.ip(),
            String::from_utf8_lossy(record.body),
            properties
        ));
        at += size;
    }
    Some(out)
}

/// A fastjson body as JSON: bare numeric keys quoted, object keys (queues) made strings.
fn json_value(body: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(body).ok()?;
    let text = ferromq::config::fastjson::quote_numeric_keys(&quote_object_keys(text));
    serde_json::from_str(&text).ok()
}

/// Rewrites object keys that are themselves objects (`{{"topic":..}:1}`) as strings.
fn quote_object_keys(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    // Open containers (true: an object) and whether the next token is an object key.
    let mut objects: Vec<bool> = Vec::new();
    let mut key_next = false;
    let mut index = 0;
    while index < bytes.len() {
        let end = match bytes[index] {
            b'"' => string_end(bytes, index),
            b'{' if key_next => {
                let end = container_end(bytes, index);
                out.push_str(&serde_json::to_string(&text[index..end]).unwrap());
                index = end;
                key_next = false;
                continue;
            }
            b'{' => {
                objects.push(true);
                key_next = true;
                index + 1
            }
            b'[' => {
                objects.push(false);
                key_next = false;
                index + 1
            }
            b'}' | b']' => {
                objects.pop();
                key_next = false;
                index + 1
            }
            b',' => {
                key_next = objects.last() == Some(&true);
                index + 1
            }
            b':' => {
                key_next = false;
                index + 1
            }
            _ => index + 1,
        };
        out.push_str(&text[index..end]);
        if bytes[index] == b'"' {
            key_next = false;
        }
        index = end;
    }
    out
}

/// The index after the JSON string starting at `start`.
fn string_end(bytes: &[u8], start: usize) -> usize {
    let mut index = start + 1;
    while index < bytes.len() {
        match bytes[index] {
            b'\\' => index += 2,
            b'"' => return index + 1,
            _ => index += 1,
        }
    }
    bytes.len()
}

/// The index after the object or array starting at `start`.
fn container_end(bytes: &[u8], start: usize) -> usize {
    let mut depth = 0;
    let mut index = start;
    while index < bytes.len() {
        match bytes[index] {
            b'"' => {
                index = string_end(bytes, index);
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth -= 1;
                if depth == 0 {
                    return index + 1;
                }
            }
            _ => {}
        }
        index += 1;
    }
    bytes.len()
}

/// Objects whose keys are data (topic names, queue ids, group names), not field names.
const MAP_FIELDS: &[&str] = &[
    "topicConfigTable",
    "subscriptionGroupTable",
    "offsetTable",
    "table",
    "subscriptionTable",
    "dataVersion",
];

/// Every path to a leaf with its type; the keys of data maps read as `*`.
fn json_paths(value: &Value, path: &str, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            let is_map = MAP_FIELDS.iter().any(|f| path.ends_with(&format!(".{f}")));
            if map.is_empty() {
                out.insert(format!("{path}: {{}}"));
            }
            for (key, child) in map {
                let key = if is_map { "*" } else { key.as_str() };
                json_paths(child, &format!("{path}.{key}"), out);
            }
        }
        Value::Array(items) => {
            if items.is_empty() {
                out.insert(format!("{path}: []"));
            }
            for item in items {
                json_paths(item, &format!("{path}[]"), out);
            }
        }
        Value::String(_) => {
            out.insert(format!("{path}: string"));
        }
        Value::Number(_) => {
            out.insert(format!("{path}: number"));
        }
        Value::Bool(_) => {
            out.insert(format!("{path}: bool"));
        }
        Value::Null => {
            out.insert(format!("{path}: null"));
        }
    }
}

/// JSON with arrays sorted, for comparing sets that Java keeps in hash order.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Array(items) => {
            let mut items: Vec<Value> = items.iter().map(canonical).collect();
            items.sort_by_key(std::string::ToString::to_string);
            Value::Array(items)
        }
        Value::Object(map) => {
            let sorted: BTreeMap<&String, Value> =
                map.iter().map(|(k, v)| (k, canonical(v))).collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        other => other.clone(),
    }
}

/// The lines only one side has.
fn describe_difference(java: &[String], ours: &[String]) -> (String, String) {
    let j: BTreeSet<&String> = java.iter().collect();
    let o: BTreeSet<&String> = ours.iter().collect();
    if j == o {
        return (java.join(" | "), ours.join(" | "));
    }
    let only = |a: &BTreeSet<&String>, b: &BTreeSet<&String>| {
        let lines: Vec<&str> = a.difference(b).map(|s| s.as_str()).collect();
        format!("[{}] {}", a.len(), lines.join(" | "))
    };
    (only(&j, &o), only(&o, &j))
}

/// Runs the script against both brokers in both serializations and returns every
/// difference.
fn run_differential(
    servers: &Servers,
    setup: fn(&str) -> Vec<Step>,
    script: fn(&str, &[i64]) -> Vec<Step>,
) -> Vec<Diff> {
    let sides = [
        ("Java", servers.java_addr()),
        ("ferromq", servers.ours.broker_addr()),
    ];
    run_differential_between(sides, setup, script)
}

/// [`run_differential`] between any two brokers: `sides` names each and gives its address;
/// the first is the `java` side of each [`Diff`], the second the `ours` side.
fn run_differential_between(
    sides: [(&str, SocketAddr); 2],
    setup: fn(&str) -> Vec<Step>,
    script: fn(&str, &[i64]) -> Vec<Step>,
) -> Vec<Diff> {
    let [(java_name, java_addr), (our_name, our_addr)] = sides;
    let runtime = runtime();
    runtime.block_on(async {
        let mut java = Side::new(java_addr);
        let mut ours = Side::new(our_addr);
        let mut diffs = Vec::new();
        for (serialize, tag) in [(SerializeType::Json, "J"), (SerializeType::RocketMq, "R")] {
            let prefix = if tag == "J" { "json" } else { "rocketmq" };
            java.stored.clear();
            ours.stored.clear();
            for step in setup(tag) {
                let (j, o) = (
                    java.run(serialize, &step).await,
                    ours.run(serialize, &step).await,
                );
                if step.name.starts_with("setup.send") {
                    java.stored.extend(stored_offset(&j));
                    ours.stored.extend(stored_offset(&o));
                }
                diffs.extend(compare(&step, &format!("{prefix}/{}", step.name), &j, &o));
            }
            let java_steps = script(tag, &java.stored);
            let our_steps = script(tag, &ours.stored);
            assert_eq!(java_steps.len(), our_steps.len());
            for (java_step, our_step) in java_steps.iter().zip(&our_steps) {
                assert_eq!(java_step.name, our_step.name);
                for (name, side) in [(java_name, &mut java), (our_name, &mut ours)] {
                    let client = side.client(serialize).await;
                    for (topic, queue, count) in &java_step.dispatched {
                        wait_dispatched(&client, name, topic, *queue, *count).await;
                    }
                }
                let j = java.run(serialize, java_step).await;
                let o = ours.run(serialize, our_step).await;
                let label = format!("{prefix}/{}", java_step.name);
                eprintln!(
                    "{label}: {java_name} {} | {our_name} {}",
                    summary(&j),
                    summary(&o)
                );
                diffs.extend(compare(java_step, &label, &j, &o));
            }
        }
        diffs
    })
}

/// Whether `pattern` (with `*` for any text) matches all of `text`.
fn glob(pattern: &str, text: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = text.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    for (index, part) in parts.iter().enumerate() {
        if index + 1 == parts.len() {
            return rest.ends_with(part);
        }
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.is_empty()
}

/// The entry of `table` that explains `diff`, if one does (the first that matches).
fn listed_in(table: &[Intended], diff: &Diff) -> Option<usize> {
    let step = diff
        .step
        .split_once('/')
        .map_or(diff.step.as_str(), |(_, n)| n);
    table.iter().position(|entry| {
        entry.step.split('|').any(|pattern| glob(pattern, step))
            && glob(entry.aspect, &diff.aspect)
            && diff.java.contains(entry.java)
    })
}

/// Fails with every difference `table` does not explain, and names the entries of it that
/// explained nothing; `names` are the two sides, as in the diffs.
fn assert_listed(diffs: &[Diff], table: &[Intended], names: [&str; 2]) {
    let [java_name, our_name] = names;
    let unexplained: Vec<String> = diffs
        .iter()
        .filter(|d| listed_in(table, d).is_none())
        .map(|d| {
            format!(
                "{} [{}]\n    {java_name}: {}\n    {our_name}: {}",
                d.step, d.aspect, d.java, d.ours
            )
        })
        .collect();
    let used: BTreeSet<usize> = diffs.iter().filter_map(|d| listed_in(table, d)).collect();
    let stale: Vec<String> = (0..table.len())
        .filter(|index| !used.contains(index))
        .map(|index| {
            let entry = &table[index];
            format!("{} [{}]: {}", entry.step, entry.aspect, entry.why)
        })
        .collect();
    assert!(
        unexplained.is_empty() && stale.is_empty(),
        "{} differences between {java_name} and {our_name} not listed:\n{}\n{} listed \
         differences no longer seen:\n{}",
        unexplained.len(),
        unexplained.join("\n"),
        stale.len(),
        stale.join("\n")
    );
}

/// The differences `run` finds with the defaults ([`script`]) and, named `noauto.<step>`,
/// with a broker that creates neither topics nor groups on demand
/// ([`script_no_auto_create`]).
fn both_configurations(
    run: impl Fn(&str, fn(&str, &[i64]) -> Vec<Step>) -> Vec<Diff>,
) -> Vec<Diff> {
    let mut diffs = run("", script);
    let no_auto = "autoCreateTopicEnable=false\nautoCreateSubscriptionGroup=false";
    let more = run(no_auto, script_no_auto_create);
    diffs.extend(more.into_iter().map(|d| {
        let (serialization, step) = d.step.split_once('/').unwrap();
        Diff {
            step: format!("{serialization}/noauto.{step}"),
            ..d
        }
    }));
    diffs
}

/// The requests that differ when the broker creates neither topics nor groups on demand
/// (`autoCreateTopicEnable=false`, `autoCreateSubscriptionGroup=false`).
fn script_no_auto_create(tag: &str, stored: &[i64]) -> Vec<Step> {
    let topic = format!("DiffT{tag}");
    let t = topic.as_str();
    let first = stored.first().copied().unwrap_or(0).to_string();
    let known = format!("diff-known{tag}");
    let group_body = serde_json::json!({
        "groupName": known,
        "consumeEnable": true,
        "retryQueueNums": 1,
        "retryMaxTimes": 16
    })
    .to_string()
    .into_bytes();
    let mut steps = vec![
        Step::new(
            "send.unknown_topic",
            send_v2(&format!("DiffNone{tag}"), "0", "", b"x"),
        ),
        Step::new(
            "send.unknown_topic_v1",
            command(
                10,
                &[
                    ("producerGroup", "diff-producer"),
                    ("topic", &format!("DiffNone{tag}")),
                    ("defaultTopic", "TBW102"),
                    ("defaultTopicQueueNums", "4"),
                    ("queueId", "0"),
                    ("sysFlag", "0"),
                    ("bornTimestamp", "1700000000000"),
                    ("flag", "0"),
                ],
                b"x",
            ),
        ),
        Step::new("send.to_TBW102", send_v2("TBW102", "0", "", b"x")),
        Step::new(
            "send.retry_unknown_group",
            send_v2("%RETRY%NoSuchGroup", "0", "", b"x"),
        ),
        Step::new("group.create", command(200, &[], &group_body)),
        Step::new(
            "send.retry_known_group",
            send_v2(&format!("%RETRY%{known}"), "0", "", b"retry"),
        ),
        Step::new("pull.unknown_group", pull("NoSuchGroup", t, "0", "0")),
        Step::new("pull.known_group", pull(&known, t, "0", "0")).after_dispatch(t, 0, 3),
        Step::new(
            "heartbeat.unknown_group",
            command(34, &[], &heartbeat_body("NoSuchGroup", t, 1)),
        ),
        Step::new(
            "pull.unknown_group_after_heartbeat",
            with_fields(
                11,
                &pull_fields("NoSuchGroup", t, "0", "0"),
                &[("sysFlag", "0"), ("subVersion", "1")],
                &[],
                b"",
            ),
        ),
        Step::new(
            "send_back.unknown_group",
            command(
                36,
                &[
                    ("offset", &first),
                    ("group", "NoSuchGroup"),
                    ("delayLevel", "0"),
                    ("originMsgId", "00"),
                    ("originTopic", t),
                    ("maxReconsumeTimes", "16"),
                ],
                b"",
            ),
        ),
        Step::new(
            "send_back.known_group",
            command(
                36,
                &[
                    ("offset", &first),
                    ("group", &known),
                    ("delayLevel", "0"),
                    ("originMsgId", "00"),
                    ("originTopic", t),
                    ("maxReconsumeTimes", "16"),
                ],
                b"",
            ),
        ),
        Step::new(
            "offset.query_unknown_group",
            command(
                14,
                &[
                    ("consumerGroup", "NoSuchGroup"),
                    ("topic", t),
                    ("queueId", "0"),
                ],
                b"",
            ),
        ),
        Step::new(
            "offset.update_unknown_group",
            command(
                15,
                &[
                    ("consumerGroup", "NoSuchGroup2"),
                    ("topic", t),
                    ("queueId", "0"),
                    ("commitOffset", "1"),
                ],
                b"",
            ),
        ),
        Step::new(
            "consume_stats.unknown_group",
            command(208, &[("consumerGroup", "NoSuchGroup3"), ("topic", t)], b""),
        ),
    ];
    steps.push(Step::new("all_groups", command(201, &[], b"")));
    steps
}

/// Starts the Java broker of `kit` and a standalone with `conf`, runs the scripts, stops
/// the Java servers at once (their stores are thrown away) and returns the differences.
fn differences(
    kit: &std::path::Path,
    conf: &str,
    script: fn(&str, &[i64]) -> Vec<Step>,
) -> Vec<Diff> {
    let mut servers = Servers::start(kit, conf);
    let diffs = run_differential(&servers, setup, script);
    for child in [
        &mut servers.java_broker.child,
        &mut servers._java_namesrv.child,
    ] {
        let _ = child.kill();
        let _ = child.wait();
    }
    diffs
}

#[test]
fn java_broker_and_ferromq_answer_alike() {
    let kit = common::java::kit();
    let diffs = both_configurations(|conf, script| differences(&kit, conf, script));
    assert_listed(&diffs, INTENDED, ["Java", "ferromq"]);
}

/// The steps of [`java_broker_and_ferromq_answer_alike`] against the Java 5.x broker of the
/// kit (`scripts/java-kit`) and ferromq: every difference must be listed, with its reason, in
/// [`JAVA5_INTENDED`], and every entry there must still show up.
#[test]
fn java_5_broker_and_ferromq_answer_alike() {
    let kit = common::java::kit5();
    let diffs = both_configurations(|conf, script| differences(&kit, conf, script));
    assert_listed(&diffs, JAVA5_INTENDED, ["Java5", "ferromq"]);
}

/// Every difference from the Java 5.x broker that ferromq keeps, with its reason (`java` is
/// text of 5.x's value). A difference takes the first entry that matches it, so the narrow
/// entries come first. Entries that say "not yet" are 5.x answers ferromq should give.
const JAVA5_INTENDED: &[Intended] = &[
    Intended {
        step: "*create_topic*",
        aspect: "remark",
        java: "not set any response code",
        why: "as in INTENDED: 5.x too leaves its placeholder remark on a SUCCESS of \
              UPDATE_AND_CREATE_TOPIC",
    },
    Intended {
        step: "send.no_*",
        aspect: "ext:*",
        java: "absent",
        why: "a send without a topic: ferromq checks the topic first and answers `The \
              specified topic is blank.` with the region extFields, as 4.9.8; 5.x hits a \
              NullPointerException before it sets them",
    },
    Intended {
        step: "*",
        aspect: "remark",
        java: "Exception",
        why: "as in INTENDED: 5.x's remark is the exception it hit on input it did not check \
              (NullPointerException, NumberFormatException, fastjson2's JSONException, a \
              ByteBuffer error); ferromq answers the same code and says what is wrong",
    },
    Intended {
        step: "*",
        aspect: "remark",
        java: "Cannot invoke",
        why: "as the entry above: a few of 5.x's exception remarks drop the class name",
    },
    Intended {
        step: "send.sysflag_*",
        aspect: "ext:msgId",
        java: "hex56",
        why: "as in INTENDED: 5.x too takes the client's IPv6 bits for the store host of an \
              IPv4 broker",
    },
    Intended {
        step: "batch.sysflag_v6",
        aspect: "*",
        java: "",
        why: "as in INTENDED: 5.x too fails on a batch whose sysFlag claims IPv6 hosts of an \
              IPv4 connection (SYSTEM_ERROR); ferromq stores it with the real host bits",
    },
    Intended {
        step: "pull.v6_*",
        aspect: "*",
        java: "",
        why: "as in INTENDED: 5.x too acknowledges such a send and never dispatches it",
    },
    Intended {
        step: "batch.empty",
        aspect: "code",
        java: "",
        why: "as in INTENDED: 5.x too hits a NullPointerException (SYSTEM_ERROR, retried); \
              ferromq answers MESSAGE_ILLEGAL",
    },
    Intended {
        step: "*",
        aspect: "body",
        java: "record",
        why: "ferromq stores a message's properties as 4.9.8 (no MSG_REGION and TRACE_ON, \
              which 5.x adds to every message it stores, no WAIT, and a batch's own \
              properties given to each member, where 5.x stores the members' alone), and a \
              UNIQ_KEY when the client sent none as 5.x: the same records, 40 bytes shorter",
    },
    Intended {
        step: "pull.offset_past_max",
        aspect: "ext:nextBeginOffset",
        java: "",
        why: "as in INTENDED: past the end of a queue whose min offset is 0 ferromq sends the \
              consumer to 0; 5.5.0, as 4.9.8, sends it to the max offset",
    },
    Intended {
        step: "pull.offset_huge",
        aspect: "ext:nextBeginOffset",
        java: "",
        why: "as pull.offset_past_max",
    },
    Intended {
        step: "pull.empty_queue",
        aspect: "ext:nextBeginOffset",
        java: "",
        why: "as pull.offset_past_max",
    },
    Intended {
        step: "pull.optional_not_number",
        aspect: "*",
        java: "",
        why: "an optional pull field that is not a number: ferromq ignores it and answers, as \
              4.9.8; 5.x answers SYSTEM_ERROR (a NumberFormatException), which a consumer \
              retries for ever",
    },
    Intended {
        step: "pull.invalid_utf8_properties",
        aspect: "*",
        java: "",
        why: "a stored message whose properties are not UTF-8: ferromq returns it, as 4.9.8; \
              5.x cannot decode it and answers PULL_OFFSET_MOVED to 0, which sends the \
              consumer back to the start of the queue",
    },
    Intended {
        step: "header.invalid_utf8_*",
        aspect: "answer",
        java: "",
        why: "a JSON header with invalid UTF-8: ferromq answers, as 4.9.8; 5.x's parser \
              (fastjson2) fails and the connection closes",
    },
    Intended {
        step: "*heartbeat.*",
        aspect: "ext:IS_*",
        java: "",
        why: "5.x answers HEART_BEAT with `IS_SUB_CHANGE` and `IS_SUPPORT_HEART_BEAT_V2`; \
              ferromq does not serve heartbeat v2 (a heartbeat without its subscriptions, \
              named by a fingerprint), so it must not say it does",
    },
    Intended {
        step: "send_back.group_is_a_path",
        aspect: "*",
        java: "",
        why: "as in INTENDED: ferromq refuses a group whose retry topic is not a valid topic \
              name (SYSTEM_ERROR); 5.x answers SUBSCRIPTION_GROUP_NOT_EXIST (26)",
    },
    Intended {
        step: "delete_topic.illegal_chars",
        aspect: "*",
        java: "",
        why: "deleting a topic whose name no topic can have: ferromq refuses it, as 4.9.8 (the \
              name could be a path of the store); 5.x answers SUCCESS",
    },
    Intended {
        step: "group.create_empty_body",
        aspect: "*",
        java: "",
        why: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP without a body: ferromq refuses it (there is \
              no group to create), as 4.9.8 does; 5.x answers SUCCESS",
    },
    Intended {
        step: "reset_offset.no_consumer",
        aspect: "*",
        java: "",
        why: "as in INTENDED: with no member of the group online ferromq answers \
              CONSUMER_NOT_ONLINE, and mqadmin commits the offsets itself; 5.x answers \
              SUCCESS with the offsetTable",
    },
    Intended {
        step: "*all_topic_config",
        aspect: "*",
        java: "",
        why: "GET_ALL_TOPIC_CONFIG: ferromq has no static topic queue mapping \
              (`mappingDataVersion`, `topicQueueMapping*`), and writes a topic's `attributes` \
              only when it has some (its body is topics.json, which stays readable by 4.9); \
              `totalTopicNum` comes with 5.x's paging (topicSeq, maxTopicNum), which ferromq \
              does not serve: without it a 5.x slave takes the whole table at once, as from an \
              older server",
    },
    Intended {
        step: "*all_groups",
        aspect: "*",
        java: "",
        why: "GET_ALL_SUBSCRIPTIONGROUP_CONFIG: ferromq has no group attributes, forbidden \
              table, retry policy, orderly or timeout keys; `totalGroupNum` comes with 5.x's \
              paging, which ferromq does not serve (as `totalTopicNum`)",
    },
    Intended {
        step: "all_consumer_offsets",
        aspect: "body",
        java: "",
        why: "GET_ALL_CONSUMER_OFFSET: ferromq keeps no pull offsets apart from commits, and \
              its body has no `dataVersion` or `groupTopicMap` yet",
    },
    Intended {
        step: "broker_config",
        aspect: "body",
        java: "",
        why: "as in INTENDED: GET_BROKER_CONFIG lists the settings ferromq has (5.x has 486)",
    },
    Intended {
        step: "*consume_stats.*",
        aspect: "body",
        java: "",
        why: "ferromq keeps no pull offsets apart from commits (5.x's `pullOffset` of each \
              queue)",
    },
];

/// The Java 4.9.8 and 5.x brokers of the kits (`scripts/java-kit`), each with its own name
/// server, given the same keys.
struct JavaVersions {
    // Fields drop in order: each broker stops before its name server.
    java4_broker: JavaServer,
    _java4_namesrv: JavaServer,
    java5_broker: JavaServer,
    _java5_namesrv: JavaServer,
    _dir: TempDir,
}

impl JavaVersions {
    fn start(conf: &str) -> JavaVersions {
        let dir = TempDir::on_disk("java-versions");
        let conf = format!("{COMMON_CONF}{conf}");
        // The brokers read their disk-full level from a system property only.
        let jvm = "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.999";
        let java4_namesrv = JavaServer::namesrv(dir.path());
        let java4_broker = JavaServer::try_broker_on(
            &common::java::kit(),
            dir.path(),
            java4_namesrv.port,
            &dir.path().join("java4-store"),
            &conf,
            jvm,
        )
        .unwrap_or_else(|text| panic!("{text}"));
        let kit5 = common::java::kit5();
        let java5_namesrv = JavaServer::namesrv_on(&kit5, dir.path());
        let java5_broker = JavaServer::try_broker_on(
            &kit5,
            dir.path(),
            java5_namesrv.port,
            &dir.path().join("java5-store"),
            &conf,
            jvm,
        )
        .unwrap_or_else(|text| panic!("{text}"));
        JavaVersions {
            java4_broker,
            _java4_namesrv: java4_namesrv,
            java5_broker,
            _java5_namesrv: java5_namesrv,
            _dir: dir,
        }
    }
}

/// What the Java 5.x broker answers otherwise than 4.9.8 to the steps of [`script`] and
/// [`script_no_auto_create`] (`java` is text of 4.9.8's value, `why` says what 5.x does). A
/// difference takes the first entry that matches it, so the narrow entries come first.
const JAVA5_DIFFERENCES: &[Intended] = &[
    Intended {
        step: "*",
        aspect: "ext:transactionId",
        java: "absent",
        why: "5.x answers every SEND_MESSAGE with a `transactionId` extField; 4.9.8 with none",
    },
    Intended {
        step: "*pull.*",
        aspect: "ext:*SysFlag",
        java: "absent",
        why: "5.x's PULL_MESSAGE answer carries the topic's and the group's sysFlag \
              (`topicSysFlag`, `groupSysFlag`)",
    },
    Intended {
        step: "*heartbeat.*",
        aspect: "ext:IS_*",
        java: "absent",
        why: "5.x answers HEART_BEAT with `IS_SUB_CHANGE` and `IS_SUPPORT_HEART_BEAT_V2`",
    },
    Intended {
        step: "pull.broadcast_not_allowed",
        aspect: "ext:forbiddenType",
        java: "absent",
        why: "5.x names why the pull is forbidden (`forbiddenType` 4)",
    },
    Intended {
        step: "pull.lite",
        aspect: "*",
        java: "",
        why: "4.9.8 does not serve LITE_PULL_MESSAGE (361: REQUEST_CODE_NOT_SUPPORTED); 5.x \
              does, as a pull",
    },
    Intended {
        step: "pull.optional_not_number",
        aspect: "*",
        java: "",
        why: "an optional pull field that is not a number: 4.9.8 ignores it and answers FOUND; \
              5.x answers SYSTEM_ERROR with the NumberFormatException",
    },
    Intended {
        step: "pull.invalid_utf8_properties",
        aspect: "*",
        java: "",
        why: "a stored message whose properties are not UTF-8: 4.9.8 returns it (FOUND); 5.x \
              answers PULL_OFFSET_MOVED (21, OFFSET_RESET) with nextBeginOffset 0 and no body",
    },
    Intended {
        step: "header.invalid_utf8_*",
        aspect: "answer",
        java: "",
        why: "a JSON header with invalid UTF-8: 4.9.8 answers; 5.x (fastjson2) closes the \
              connection",
    },
    Intended {
        step: "pull.batch",
        aspect: "body",
        java: "record",
        why: "5.x stores the members of a batch without the CLUSTER property (and with \
              UNIQ_KEY); 4.9.8 gives each CLUSTER",
    },
    Intended {
        step: "*",
        aspect: "body",
        java: "record",
        why: "5.x stores MSG_REGION and TRACE_ON as sent, and a UNIQ_KEY (and WAIT) the broker \
              makes when the client sent none; 4.9.8 strips MSG_REGION and TRACE_ON and adds no \
              UNIQ_KEY",
    },
    Intended {
        step: "send.no_*",
        aspect: "ext:*",
        java: "",
        why: "a send without a topic: 4.9.8 answers with MSG_REGION and TRACE_ON extFields, 5.x \
              (a NullPointerException) without",
    },
    Intended {
        step: "*.no_*",
        aspect: "remark",
        java: "is blank",
        why: "no topic in the header: 4.9.8 says `The specified topic is blank.`, 5.x answers a \
              NullPointerException",
    },
    Intended {
        step: "*",
        aspect: "remark",
        java: "The specified topic",
        why: "5.x's topic checks name the topic (and the maximum length, 127) in the remark",
    },
    Intended {
        step: "send.bad_queue",
        aspect: "remark",
        java: "TopicConfig",
        why: "5.x's TopicConfig text ends with `attributes={}`",
    },
    Intended {
        step: "*",
        aspect: "remark",
        java: "docs/faq",
        why: "5.x's remarks link https://rocketmq.apache.org/docs/bestPractice/06FAQ where \
              4.9.8's link http://rocketmq.apache.org/docs/faq/",
    },
    Intended {
        step: "offset.query_unknown_*",
        aspect: "*",
        java: "",
        why: "a committed offset of an unknown topic or queue: 4.9.8 answers SUCCESS with offset \
              0; 5.x QUERY_NOT_FOUND (22) `Not found, V3_0_6_SNAPSHOT maybe this group consumer \
              boot first`",
    },
    Intended {
        step: "offset.update_unknown_topic",
        aspect: "*",
        java: "",
        why: "committing an offset of an unknown topic: 4.9.8 answers SUCCESS; 5.x \
              TOPIC_NOT_EXIST (17) `Topic NoSuchT not exist!`",
    },
    Intended {
        step: "offset.update_no_offset",
        aspect: "*",
        java: "",
        why: "committing without commitOffset: 4.9.8 answers SYSTEM_ERROR (a \
              NullPointerException); 5.x INVALID_PARAMETER (29) `Offset is null, topic is \
              DiffTJ`",
    },
    Intended {
        step: "noauto.offset.update_unknown_group",
        aspect: "*",
        java: "",
        why: "committing an offset of an unknown group (no auto-create): 4.9.8 answers SUCCESS; \
              5.x SUBSCRIPTION_GROUP_NOT_EXIST (26) `Group NoSuchGroup2 not exist!`",
    },
    Intended {
        step: "send_back.group_is_a_path",
        aspect: "*",
        java: "",
        why: "CONSUMER_SEND_MSG_BACK for a group named like a path: 4.9.8 answers SUCCESS; 5.x \
              SUBSCRIPTION_GROUP_NOT_EXIST (26)",
    },
    Intended {
        step: "search_offset.future*",
        aspect: "ext:offset",
        java: "",
        why: "SEARCH_OFFSET_BY_TIMESTAMP after the last message: 4.9.8 answers the last \
              message's offset (5), 5.x the queue's max offset (6), its lower boundary, \
              unless `boundaryType` is UPPER (in any case)",
    },
    Intended {
        step: "delete_topic.illegal_chars",
        aspect: "*",
        java: "",
        why: "deleting a topic with illegal characters: 4.9.8 refuses (SYSTEM_ERROR), 5.x \
              answers SUCCESS",
    },
    Intended {
        step: "group.create_empty_body",
        aspect: "*",
        java: "",
        why: "UPDATE_AND_CREATE_SUBSCRIPTIONGROUP without a body: 4.9.8 answers SYSTEM_ERROR (a \
              NullPointerException), 5.x SUCCESS",
    },
    Intended {
        step: "reset_offset.no_consumer",
        aspect: "*",
        java: "",
        why: "resetting the offsets of a group with no online consumer: 4.9.8 refuses (`THe \
              consumer group <diff-group> not exist`), 5.x answers SUCCESS with the offsetTable",
    },
    Intended {
        step: "reset_offset.unknown_topic",
        aspect: "*",
        java: "",
        why: "resetting offsets on an unknown topic: 4.9.8 answers SYSTEM_ERROR, 5.x \
              TOPIC_NOT_EXIST (17) `Topic NoSuchT does not exist`",
    },
    Intended {
        step: "*",
        aspect: "code",
        java: "1",
        why: "5.x answers INVALID_PARAMETER (29) where 4.9.8 answers SYSTEM_ERROR (1) to a \
              request that fails a check: a queue id out of range, a topic too long, with \
              illegal characters or blank, creating or deleting a system topic, a missing \
              delete-topic header",
    },
    Intended {
        step: "*all_topic_config",
        aspect: "*",
        java: "",
        why: "GET_ALL_TOPIC_CONFIG: 5.x adds the `totalTopicNum` extField and, in the body, each \
              topic's `attributes`, `mappingDataVersion`, `topicQueueMappingDetailMap` and \
              `topicQueueMappingInfoMap`",
    },
    Intended {
        step: "*all_groups",
        aspect: "*",
        java: "",
        why: "GET_ALL_SUBSCRIPTIONGROUP_CONFIG: 5.x adds the `totalGroupNum` extField and, in \
              the body, `forbiddenTable` and each group's `attributes`, `consumeMessageOrderly`, \
              `consumeTimeoutMinute`, `groupRetryPolicy`, ...",
    },
    Intended {
        step: "all_consumer_offsets",
        aspect: "body",
        java: "",
        why: "GET_ALL_CONSUMER_OFFSET: 5.x's body adds `dataVersion`, `groupTopicMap` and \
              `pullOffsetTable`",
    },
    Intended {
        step: "broker_config",
        aspect: "body",
        java: "",
        why: "GET_BROKER_CONFIG: 5.x has 486 keys where 4.9.8 has 177",
    },
    Intended {
        step: "topic_stats.ok",
        aspect: "body",
        java: "",
        why: "GET_TOPIC_STATS_INFO: 5.x's body adds `topicPutTps`",
    },
    Intended {
        step: "*consume_stats.*",
        aspect: "body",
        java: "",
        why: "GET_CONSUME_STATS: 5.x adds each queue's `pullOffset`",
    },
    Intended {
        step: "*",
        aspect: "remark",
        java: "Exception",
        why: "both answer SYSTEM_ERROR with the exception they hit, whose text differs: 5.x's \
              request classes moved to org.apache.rocketmq.remoting.protocol, it parses JSON \
              with fastjson2, its line numbers differ, and a few of its remarks drop the \
              exception's class name",
    },
];

/// The steps against the Java 4.9.8 broker (the `java` side) and the Java 5.x broker (the
/// `ours` side), with `conf`.
fn java_versions_differences(conf: &str, script: fn(&str, &[i64]) -> Vec<Step>) -> Vec<Diff> {
    let versions = JavaVersions::start(conf);
    let sides = [
        ("Java4", versions.java4_broker.addr().parse().unwrap()),
        ("Java5", versions.java5_broker.addr().parse().unwrap()),
    ];
    run_differential_between(sides, setup, script)
}

/// The Java 4.9.8 and 5.x brokers get the steps of [`java_broker_and_ferromq_answer_alike`];
/// every difference between their answers must be listed in [`JAVA5_DIFFERENCES`], and every
/// entry there must still show up.
#[test]
fn java_4_9_8_and_5_brokers_differ_only_as_listed() {
    let diffs = both_configurations(java_versions_differences);
    assert_listed(&diffs, JAVA5_DIFFERENCES, ["4.9.8", "5.x"]);
}
