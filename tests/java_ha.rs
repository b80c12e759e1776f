//! Replication against the Java 4.9.8 broker of the kit (`scripts/java-kit`) over the
//! classic HA link (`reference/ha.md` §2): a Java slave (`brokerRole=SLAVE`, `brokerId=1`)
//! behind a ferromq master copies the master's CommitLog byte for byte, across a segment
//! roll, and serves the messages at the master's offsets.

mod common;

use common::java::{java_broker_port, JavaServer, Standalone};
use common::{connect, pull_header, TempDir};
use ferromq::broker::codes::ROUTES;
use ferromq::client::{ClientConfig, Message, Producer};
use ferromq::remoting::headers::PullMessageResponseHeader;
use ferromq::remoting::{ExtFields, RemotingCommand, RequestCode, ResponseCode, SerializeType};
use ferromq::store::message::{decode_record, Record};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Small segments, so that the run rolls into a second one.
const SEGMENT: u64 = 4 << 20;
const TOPIC: &str = "HaCopy";

/// The CommitLog directory under a store root or a standalone's data directory.
fn commit_log_dir(root: &Path) -> PathBuf {
    [root.join("commitlog"), root.join("store").join("commitlog")]
        .into_iter()
        .find(|dir| dir.is_dir())
        .unwrap_or_else(|| root.join("commitlog"))
}

/// The segment files of a CommitLog directory, by name.
fn segments(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().len() == 20)
                .map(|e| {
                    let bytes = std::fs::read(e.path()).unwrap_or_default();
                    (e.file_name().to_string_lossy().into_owned(), bytes)
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// The kit's broker as the slave (`brokerId=1`) of `broker_name`, whose master listens on
/// `master_port` (HA on the next port), its store in `dir`; and its CommitLog directory.
fn java_slave(
    dir: &TempDir,
    master: &Standalone,
    broker_name: &str,
    master_port: u16,
) -> (JavaServer, PathBuf) {
    let store = dir.path().join("slave-store");
    let slave = JavaServer::broker(
        dir.path(),
        master.namesrv.port(),
        &store,
        &format!(
            "brokerName={broker_name}\nbrokerId=1\nbrokerRole=SLAVE\n\
             haMasterAddress=127.0.0.1:{}\nmappedFileSizeCommitLog={SEGMENT}",
            master_port + 1
        ),
    );
    (slave, commit_log_dir(&store))
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// Sends `count` messages of about 1 KiB to the master, numbered from `first`.
fn produce(namesrv: &str, first: usize, count: usize) {
    runtime().block_on(async {
        let producer = Producer::new("ha_copy_pg", ClientConfig::new(namesrv));
        producer.start().await.unwrap();
        for i in first..first + count {
            let body = format!("ha-{i:06}-{}", "h".repeat(900 + i % 200));
            producer.send(Message::new(TOPIC, body)).await.unwrap();
        }
        producer.shutdown().await;
    });
}

/// (queue offset, body) of every message of queue 0 of [`TOPIC`] a broker serves.
fn pull_queue(broker: &str) -> Vec<(i64, Vec<u8>)> {
    pull_queue_of(broker, TOPIC)
}

/// (queue offset, body) of every message of queue 0 of `topic` a broker serves.
fn pull_queue_of(broker: &str, topic: &str) -> Vec<(i64, Vec<u8>)> {
    pull_queue_from(broker, topic, 0)
}

/// (queue offset, body) of every message of queue 0 of `topic` from `first` on.
fn pull_queue_from(broker: &str, topic: &str, first: i64) -> Vec<(i64, Vec<u8>)> {
    runtime().block_on(async {
        let client = connect(broker.parse().unwrap(), SerializeType::Json).await;
        let mut offset = first;
        let mut all = Vec::new();
        loop {
            let request = RemotingCommand::request_with_header(
                RequestCode::PULL_MESSAGE,
                &pull_header("ha_copy_reader", topic, 0, offset),
            );
            let response = client
                .request_timeout(request, Duration::from_secs(10))
                .await
                .unwrap();
            if response.code != 0 {
                eprintln!(
                    "{broker}: pull at {offset} answered {} {:?}",
                    response.code, response.remark
                );
                return all;
            }
            let header: PullMessageResponseHeader = response.decode_header().unwrap();
            let mut at = 0;
            while at < response.body.len() {
                let Ok(Record::Message { record, size }) =
                    decode_record(&response.body[at..], false)
                else {
                    panic!("{broker}: not a record at {at} of a pull at {offset}");
                };
                all.push((record.queue_offset, record.body.to_vec()));
                at += size;
            }
            offset = header.next_begin_offset;
        }
    })
}

/// `ferromq standalone` as a master whose HA port (the broker's + 1) is free, with
/// [`SEGMENT`]-byte segments and the `config` lines; and its broker port.
fn master_on_ha_port(config: &str) -> (Standalone, u16) {
    let port = java_broker_port();
    let master = Standalone::start_on(
        &format!("{config}\nmappedFileSizeCommitLog={SEGMENT}"),
        port,
    );
    (master, port)
}

#[test]
fn a_java_slave_copies_a_ferromq_masters_commit_log_byte_for_byte() {
    let (master, port) = master_on_ha_port("brokerName=broker-ha");
    let namesrv = master.namesrv_addr();
    produce(&namesrv, 0, 1000);
    let dir = TempDir::on_disk("java-ha");
    let (slave, slave_log) = java_slave(&dir, &master, "broker-ha", port);
    // The slave reports 0 (empty) within haSendHeartbeatInterval; the master then sends
    // from the start of its last segment, here the first.
    let deadline = Instant::now() + Duration::from_secs(60);
    while segments(&slave_log).is_empty() {
        assert!(Instant::now() < deadline, "the slave never got a byte");
        std::thread::sleep(Duration::from_millis(200));
    }
    produce(&namesrv, 1000, 6000);
    let master_log = commit_log_dir(&master.data);
    wait_same_log(&master_log, &slave_log, Duration::from_secs(60));
    let names = |dir: &Path| segments(dir).into_iter().map(|f| f.0).collect::<Vec<_>>();
    let ours = names(&master_log);
    assert!(ours.len() >= 2, "the run stays in one segment: {ours:?}");
    // The slave began at the master's first segment (its last when the slave started) and
    // holds every one after.
    assert_eq!(names(&slave_log).get(..ours.len()), Some(&ours[..]));
    // The slave serves what the master serves, at the same offsets.
    let from_master = pull_queue(&master.broker_addr());
    assert!(
        from_master.len() > 500,
        "{} messages in queue 0",
        from_master.len()
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let from_slave = pull_queue(&slave.addr());
        if from_slave == from_master {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slave serves {} messages of queue 0, the master {}",
            from_slave.len(),
            from_master.len()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    slave.stop();
}

/// The CommitLog offset in an offset message id (`offsetMsgId`: address, port, offset).
fn physical_of(offset_msg_id: &str) -> u64 {
    u64::from_str_radix(&offset_msg_id[offset_msg_id.len() - 16..], 16).unwrap()
}

/// The record at `physical` in a CommitLog directory of `SEGMENT`-byte files, if there is one.
fn record_body_at(dir: &Path, physical: u64) -> Option<Vec<u8>> {
    let start = physical - physical % SEGMENT;
    let file = std::fs::read(dir.join(format!("{start:020}"))).ok()?;
    let at = usize::try_from(physical - start).ok()?;
    match decode_record(file.get(at..)?, true) {
        Ok(Record::Message { record, .. }) => Some(record.body.to_vec()),
        _ => None,
    }
}

/// SYNC_MASTER: with no slave a put is answered SLAVE_NOT_AVAILABLE (stored all the same);
/// with a Java slave attached each put is answered SEND_OK only once the slave holds it (its
/// CommitLog has the record when the answer arrives); once the slave is killed, puts are
/// answered SLAVE_NOT_AVAILABLE again, never SEND_OK, and every one of them is stored.
#[test]
fn a_sync_master_answers_once_the_java_slave_holds_the_message() {
    use common::send_request;
    use ferromq::remoting::headers::SendMessageResponseHeader;
    use ferromq::remoting::ResponseCode;
    let (master, port) = master_on_ha_port("brokerName=broker-sync\nbrokerRole=SYNC_MASTER");
    let rt = runtime();
    let client = rt.block_on(connect(master.broker, SerializeType::Json));
    let send = |i: usize| -> (i32, SendMessageResponseHeader) {
        rt.block_on(async {
            let body = format!("sync-{i:05}");
            let request = send_request("HaSync", 0, body.as_bytes(), "WAIT\u{1}true\u{2}");
            let response = client
                .request_timeout(request, Duration::from_secs(10))
                .await
                .unwrap();
            (response.code, response.decode_header().unwrap())
        })
    };
    let (code, _) = send(0);
    assert_eq!(code, ResponseCode::SLAVE_NOT_AVAILABLE.0, "no slave yet");

    let dir = TempDir::on_disk("java-ha-sync");
    let (slave, slave_log) = java_slave(&dir, &master, "broker-sync", port);
    // The slave counts once it has reported (within haSendHeartbeatInterval).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut i = 1;
    loop {
        let (code, _) = send(i);
        i += 1;
        if code == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the slave never counted: {code}");
        std::thread::sleep(Duration::from_millis(200));
    }
    for _ in 0..200 {
        let (code, header) = send(i);
        assert_eq!(code, 0, "message {i}");
        let body = record_body_at(&slave_log, physical_of(&header.msg_id));
        assert_eq!(
            body.as_deref(),
            Some(format!("sync-{i:05}").as_bytes()),
            "message {i} answered before the slave held it"
        );
        i += 1;
    }
    let mut slave = slave;
    slave.child.kill().unwrap();
    let _ = slave.child.wait();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (code, _) = send(i);
        i += 1;
        assert_ne!(code, 0, "SEND_OK with the slave dead");
        assert!(
            code == ResponseCode::FLUSH_SLAVE_TIMEOUT.0
                || code == ResponseCode::SLAVE_NOT_AVAILABLE.0,
            "{code}"
        );
        if code == ResponseCode::SLAVE_NOT_AVAILABLE.0 {
            break;
        }
        assert!(Instant::now() < deadline, "never SLAVE_NOT_AVAILABLE");
    }
    // Every put was stored, whatever its answer said of the slave.
    let stored = pull_queue_of(&master.broker_addr(), "HaSync");
    assert_eq!(stored.len(), i, "stored on the master");
}

/// A ferromq slave (`brokerId=1`) of `broker_name`, registered with `namesrv`, following the
/// HA address `ha` (or, with `None`, the one the name server tells it); its CommitLog
/// directory.
fn ferromq_slave(
    store: &Path,
    namesrv: &str,
    broker_name: &str,
    ha: Option<&str>,
) -> (common::BrokerProcess, PathBuf) {
    ferromq_slave_on(store, namesrv, broker_name, ha, "127.0.0.1:0")
}

/// As [`ferromq_slave`], listening on `listen`.
fn ferromq_slave_on(
    store: &Path,
    namesrv: &str,
    broker_name: &str,
    ha: Option<&str>,
    listen: &str,
) -> (common::BrokerProcess, PathBuf) {
    let ha_line = ha
        .map(|a| format!("haMasterAddress={a}\n"))
        .unwrap_or_default();
    let slave = common::BrokerProcess::start_on(
        store,
        &format!(
            "namesrvAddr={namesrv}\nbrokerName={broker_name}\nbrokerId=1\nbrokerRole=SLAVE\n\
             {ha_line}mappedFileSizeCommitLog={SEGMENT}"
        ),
        listen,
    );
    (slave, store.join("commitlog"))
}

/// Whether the slave's CommitLog is the master's from where the slave began (an empty slave
/// starts at the master's last segment): each of its files is the master's of that name, it
/// has the master's last written one, and any file past the other side's last is an empty
/// one made ahead (Java's `AllocateMappedFileService`, on a Java master or a Java slave).
fn same_log(master: &[(String, Vec<u8>)], slave: &[(String, Vec<u8>)]) -> Result<(), String> {
    let empty = |bytes: &[u8]| bytes.iter().all(|&b| b == 0);
    let Some(last) = slave.iter().rev().find(|(_, bytes)| !empty(bytes)) else {
        return Err("the slave holds no segment".to_owned());
    };
    for (name, bytes) in slave {
        let Some((_, theirs)) = master.iter().find(|(n, _)| n == name) else {
            if name > &last.0 && empty(bytes) {
                continue;
            }
            return Err(format!("the master has no segment {name}"));
        };
        if theirs != bytes {
            let at = theirs.iter().zip(bytes).position(|(a, b)| a != b);
            return Err(format!("segment {name} differs first at {at:?}"));
        }
    }
    if let Some((name, _)) = master
        .iter()
        .find(|(name, bytes)| name > &last.0 && !empty(bytes))
    {
        return Err(format!("the slave lacks the master's segment {name}"));
    }
    Ok(())
}

/// Waits (bounded) until the slave's CommitLog is the master's ([`same_log`]).
fn wait_same_log(master_log: &Path, slave_log: &Path, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    loop {
        let outcome = same_log(&segments(master_log), &segments(slave_log));
        match outcome {
            Ok(()) => return,
            Err(why) if Instant::now() >= deadline => {
                panic!("the slave's CommitLog is not the master's: {why}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(300)),
        }
    }
}

/// What the slave serves of queue 0 is the tail of what the master serves, at the same
/// queue offsets, and holds every message stored since the slave began.
fn wait_same_queue(master: &str, slave: &str, at_least: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let from_master = pull_queue(master);
        let from_slave = pull_queue_from_min(slave, TOPIC);
        let tail = from_master.len().saturating_sub(from_slave.len());
        if from_slave.len() >= at_least && from_master[tail..] == from_slave[..] {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the slave serves {} messages of queue 0, the master {} (first {:?} and {:?})",
            from_slave.len(),
            from_master.len(),
            from_slave.first().map(|m| m.0),
            from_master.get(tail).map(|m| m.0)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// [`pull_queue_of`] from the queue's min offset (a slave that began at the master's last
/// segment has no message below it).
fn pull_queue_from_min(broker: &str, topic: &str) -> Vec<(i64, Vec<u8>)> {
    use ferromq::remoting::headers::{GetMinOffsetRequestHeader, OffsetResponseHeader};
    let min = runtime().block_on(async {
        let client = connect(broker.parse().unwrap(), SerializeType::Json).await;
        let request = RemotingCommand::request_with_header(
            RequestCode::GET_MIN_OFFSET,
            &GetMinOffsetRequestHeader {
                topic: topic.into(),
                queue_id: 0,
            },
        );
        let response = client.request(request).await.unwrap();
        let header: OffsetResponseHeader = response.decode_header().unwrap();
        header.offset
    });
    pull_queue_from(broker, topic, min)
}

/// A ferromq slave behind a ferromq master that already has several segments: it starts at
/// the master's last one, takes what follows across rolls, and ends with the master's
/// CommitLog byte for byte and the same queue; it refuses each code the table of codes says a
/// slave refuses, with Java's answer.
#[test]
fn a_ferromq_slave_copies_a_ferromq_masters_commit_log_byte_for_byte() {
    let (master, _) = master_on_ha_port("brokerName=broker-fs");
    let namesrv = master.namesrv_addr();
    // About 10 MB: the master is in its third segment when the slave starts.
    produce(&namesrv, 0, 10_000);
    let dir = TempDir::on_disk("ferromq-slave");
    let (slave, slave_log) = ferromq_slave(&dir.path().join("slave"), &namesrv, "broker-fs", None);
    produce(&namesrv, 10_000, 6_000);
    let master_log = commit_log_dir(&master.data);
    wait_same_log(&master_log, &slave_log, Duration::from_secs(60));
    let slave_files = segments(&slave_log);
    assert!(
        slave_files.len() >= 2 && slave_files[0].0 != "00000000000000000000",
        "the slave began at the master's last segment and rolled: {:?}",
        slave_files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    wait_same_queue(&master.broker_addr(), &slave.addr.to_string(), 500);
    group_shown_by_admin(&namesrv, &master.broker_addr(), &slave.addr.to_string());
    // A slave refuses what the table of codes says it refuses, as Java's slave does, and
    // still serves reads. Its first segment begins with a record.
    let first_record: i64 = slave_files[0].0.parse().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let client = connect(slave.addr, SerializeType::Json).await;
        // The last offset of the topic's queue 0, which POP's acks must name to reach a put.
        let mut request = RemotingCommand::request(RequestCode::GET_MAX_OFFSET);
        let mut queue = ExtFields::new();
        queue.insert("topic", TOPIC);
        queue.insert("queueId", "0");
        request.ext_fields = Some(queue);
        let answer = client.request(request).await.unwrap();
        let queue_last: i64 = answer.ext("offset").unwrap().parse::<i64>().unwrap() - 1;
        for route in ROUTES.iter().filter(|route| route.slave_refuses) {
            let (request, code, remark) =
                slave_refused_request(route.code, first_record, queue_last);
            let answer = client.request(request).await.unwrap();
            let what = format!("{:?}: {:?} {:?}", route.code, answer.code, answer.remark);
            assert_eq!(answer.code, code.0, "{what}");
            if let Some(remark) = remark {
                assert_eq!(answer.remark.as_deref(), Some(remark), "{what}");
            }
        }
        let served = [
            RequestCode::GET_MAX_OFFSET,
            RequestCode::QUERY_CONSUMER_OFFSET,
        ];
        for code in served {
            let route = ROUTES.iter().find(|route| route.code == code).unwrap();
            assert!(!route.slave_refuses, "{code:?}");
        }
        let mut request = RemotingCommand::request(RequestCode::GET_MAX_OFFSET);
        let mut fields = ExtFields::new();
        fields.insert("topic", TOPIC);
        fields.insert("queueId", "0");
        request.ext_fields = Some(fields);
        let answer = client.request(request).await.unwrap();
        assert_eq!(answer.code, ResponseCode::SUCCESS.0, "{:?}", answer.remark);
    });
}

/// A request of a code a slave refuses, with the answer a Java slave gives it: its code and,
/// where the refusal names it, the remark.
fn slave_refused_request(
    code: RequestCode,
    record_offset: i64,
    queue_last: i64,
) -> (RemotingCommand, ResponseCode, Option<&'static str>) {
    let record_offset = record_offset.to_string();
    let send = common::send_request(TOPIC, 0, b"to the slave", "");
    let fields = |pairs: &[(&str, &str)]| {
        let mut fields = ExtFields::new();
        for (key, value) in pairs {
            fields.insert(*key, *value);
        }
        Some(fields)
    };
    match code {
        RequestCode::SEND_MESSAGE_V2 => (send, ResponseCode::SERVICE_NOT_AVAILABLE, None),
        // A reply with no requester: the push fails first (SYSTEM_ERROR naming the missing
        // property), then the slave's store refuses to keep it, which only goes to the log.
        RequestCode::SEND_REPLY_MESSAGE_V2 | RequestCode::SEND_REPLY_MESSAGE => {
            let mut request = if code == RequestCode::SEND_REPLY_MESSAGE_V2 {
                send
            } else {
                slave_refused_request(RequestCode::SEND_MESSAGE, 0, 0).0
            };
            request.code = code.0;
            let remark = Some("reply message properties[REPLY_TO_CLIENT] is null");
            (request, ResponseCode::SYSTEM_ERROR, remark)
        }
        RequestCode::SEND_MESSAGE => {
            let mut request = RemotingCommand::request(code);
            request.ext_fields = fields(&[
                ("producerGroup", "slave_refusals"),
                ("topic", TOPIC),
                ("defaultTopic", "TBW102"),
                ("defaultTopicQueueNums", "8"),
                ("queueId", "0"),
                ("sysFlag", "0"),
                ("bornTimestamp", "0"),
                ("flag", "0"),
            ]);
            request.body = b"to the slave".to_vec();
            (request, ResponseCode::SERVICE_NOT_AVAILABLE, None)
        }
        RequestCode::SEND_BATCH_MESSAGE => {
            let mut request = send;
            request.code = code.0;
            let mut body = Vec::new();
            ferromq::broker::batch::BatchEntry {
                flag: 0,
                body: b"to the slave".to_vec(),
                properties: Vec::new(),
            }
            .encode(&mut body);
            request.body = body;
            (request, ResponseCode::SERVICE_NOT_AVAILABLE, None)
        }
        // A message the slave holds, handed back: its copy for the retry topic is a put,
        // which the slave's store refuses (Java: SYSTEM_ERROR naming the status).
        RequestCode::CONSUMER_SEND_MSG_BACK => {
            let mut request = RemotingCommand::request(code);
            request.ext_fields = fields(&[
                ("offset", &record_offset),
                ("group", "slave_refusals"),
                ("delayLevel", "0"),
                ("originTopic", TOPIC),
            ]);
            let remark = Some("SERVICE_NOT_AVAILABLE");
            (request, ResponseCode::SYSTEM_ERROR, remark)
        }
        // A record the slave holds, put back into the half queue: the slave's store
        // refuses the put.
        RequestCode::RESUME_CHECK_HALF_MESSAGE => {
            let mut request = RemotingCommand::request(code);
            let addr: std::net::SocketAddr = "127.0.0.1:10911".parse().unwrap();
            let id = ferromq::store::message::offset_msg_id(addr, record_offset.parse().unwrap());
            request.ext_fields = fields(&[("msgId", &id)]);
            let remark = Some("Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.");
            (request, ResponseCode::SYSTEM_ERROR, remark)
        }
        RequestCode::END_TRANSACTION => {
            let mut request = RemotingCommand::request(code);
            request.ext_fields = fields(&[
                ("producerGroup", "slave_refusals"),
                ("tranStateTableOffset", "0"),
                ("commitLogOffset", "0"),
                ("commitOrRollback", "8"),
                ("msgId", "0"),
            ]);
            (request, ResponseCode::SLAVE_NOT_AVAILABLE, None)
        }
        // POP's acks and changes of invisible time write revive messages, which the
        // slave's store refuses (ferromq's answer: Java 4.9.8 has no POP, and a Java 5.x
        // slave's answer is not compared yet).
        RequestCode::ACK_MESSAGE | RequestCode::CHANGE_MESSAGE_INVISIBLETIME => {
            let mut request = RemotingCommand::request(code);
            let pop_time = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis()
                .to_string();
            let extra = format!("0 {pop_time} 60000 0 0 broker-a 0 0");
            request.ext_fields = fields(&[
                ("consumerGroup", "slave_refusals"),
                ("topic", TOPIC),
                ("queueId", "0"),
                ("extraInfo", &extra),
                ("offset", &queue_last.to_string()),
                ("invisibleTime", "60000"),
            ]);
            (request, ResponseCode::SYSTEM_ERROR, None)
        }
        RequestCode::BATCH_ACK_MESSAGE => {
            let mut request = RemotingCommand::request(code);
            let pop_time = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis();
            request.body = format!(
                "{{\"brokerName\":\"broker-a\",\"acks\":[{{\"c\":\"slave_refusals\",\
                 \"t\":\"{TOPIC}\",\"r\":\"0\",\"so\":{queue_last},\"q\":0,\"rq\":0,\
                 \"pt\":{pop_time},\"it\":60000,\"b\":\"AQ==\"}}]}}"
            )
            .into_bytes();
            (request, ResponseCode::SYSTEM_ERROR, None)
        }
        other => panic!("no request for {other:?}, which the table says a slave refuses"),
    }
}

/// A slave whose own HA port (its port + 1) another process holds still follows its master:
/// it only cannot serve slaves of its own (it once did neither, silently).
#[test]
fn a_ferromq_slave_whose_ha_port_is_taken_still_copies_its_master() {
    let (master, _) = master_on_ha_port("brokerName=broker-taken");
    let namesrv = master.namesrv_addr();
    produce(&namesrv, 0, 500);
    let (port, _holder) = loop {
        let port = common::java::free_port();
        if let Some(ha) = port.checked_add(1) {
            if let Ok(holder) = std::net::TcpListener::bind(("127.0.0.1", ha)) {
                break (port, holder);
            }
        }
    };
    let dir = TempDir::on_disk("ferromq-slave-taken");
    let (_slave, slave_log) = ferromq_slave_on(
        &dir.path().join("slave"),
        &namesrv,
        "broker-taken",
        None,
        &format!("127.0.0.1:{port}"),
    );
    produce(&namesrv, 500, 500);
    wait_same_log(
        &commit_log_dir(&master.data),
        &slave_log,
        Duration::from_secs(60),
    );
}

/// `ferromq admin -n <namesrv> <args> --json`, which must succeed.
fn admin_json(namesrv: &str, args: &[&str]) -> serde_json::Value {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_ferromq"))
        .args(["admin", "-n", namesrv])
        .args(args)
        .arg("--json")
        .output()
        .expect("run ferromq admin");
    assert!(
        output.status.success(),
        "admin {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("admin prints JSON")
}

/// The runtime table `ferromq admin brokerStatus` prints for the broker at `addr`.
fn broker_status(namesrv: &str, addr: &str) -> serde_json::Value {
    admin_json(namesrv, &["brokerStatus", "-b", addr])[0]["table"].clone()
}

/// A caught-up group as the admin commands show it: `ferromq admin clusterList` lists the
/// master and the slave with their roles and no lag, `brokerStatus` shows the master's one
/// slave with its acknowledged offset and the slave's link up; `mqadmin clusterList` (the
/// kit's) lists both brokers of the group with their ids.
fn group_shown_by_admin(namesrv: &str, master: &str, slave: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let runtime_of = |rows: &serde_json::Value, addr: &str| {
        rows.as_array()
            .and_then(|rows| rows.iter().find(|r| r["brokerAddr"] == addr))
            .cloned()
            .unwrap_or_default()
    };
    loop {
        let rows = admin_json(namesrv, &["clusterList"]);
        let (m, s) = (runtime_of(&rows, master), runtime_of(&rows, slave));
        let shown = (
            m["brokerId"] == 0,
            s["brokerId"] == 1,
            m["role"].as_str(),
            s["role"].as_str(),
        );
        let lags = (m["haLagBytes"].as_i64(), s["haLagBytes"].as_i64());
        if shown == (true, true, Some("ASYNC_MASTER"), Some("SLAVE")) && lags == (Some(0), Some(0))
        {
            break;
        }
        assert!(Instant::now() < deadline, "clusterList: {rows:#}");
        std::thread::sleep(Duration::from_millis(300));
    }
    let (m, s) = (
        broker_status(namesrv, master),
        broker_status(namesrv, slave),
    );
    assert_eq!(m["haConnectedSlaves"], "1", "{m:#}");
    assert_eq!(m["haSlaveLagBytes"], "0", "{m:#}");
    assert_eq!(m["haSlaveAckOffset"], m["commitLogMaxOffset"], "{m:#}");
    let per_slave: Vec<&String> = m
        .as_object()
        .map(|table| {
            table
                .keys()
                .filter(|k| k.starts_with("haSlaveAckOffset_"))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(per_slave.len(), 1, "{m:#}");
    assert_eq!(m[per_slave[0].as_str()], m["commitLogMaxOffset"], "{m:#}");
    let lag_key = per_slave[0].replace("haSlaveAckOffset_", "haSlaveLagBytes_");
    assert_eq!(m[lag_key.as_str()], "0", "{m:#}");
    assert_eq!(s["brokerRole"], "SLAVE", "{s:#}");
    assert!(
        s["haConnection"]
            .as_str()
            .is_some_and(|c| c.starts_with("UP ")),
        "{s:#}"
    );
    assert_eq!(s["masterAddr"], master, "{s:#}");
    let listed = common::java::run_kit(
        "mqadmin",
        &["clusterList", "-n", namesrv],
        common::java::Serialize::Json,
        Duration::from_secs(60),
    );
    let ids: Vec<(String, String)> = listed
        .text
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            (words.len() > 3 && (words[3] == master || words[3] == slave))
                .then(|| (words[2].to_owned(), words[3].to_owned()))
        })
        .collect();
    assert_eq!(
        ids,
        [
            ("0".to_owned(), master.to_owned()),
            ("1".to_owned(), slave.to_owned())
        ],
        "{}",
        listed.text
    );
}

/// The Java 4.9.8 producer and a ferromq SYNC_MASTER group (a ferromq slave): once the slave
/// has reported, every send is answered SEND_OK and the slave serves each message at the
/// master's queue offset; with the slave killed -9, sends are answered SLAVE_NOT_AVAILABLE
/// (FLUSH_SLAVE_TIMEOUT while the master learns it), never SEND_OK.
#[test]
fn a_java_producer_to_a_sync_master_group_is_answered_once_the_slave_holds_each_message() {
    use common::java::{run_java, Serialize};
    const SYNC_TOPIC: &str = "HaJavaSync";
    let (master, _) = master_on_ha_port("brokerName=broker-js\nbrokerRole=SYNC_MASTER");
    let namesrv = master.namesrv_addr();
    let dir = TempDir::on_disk("ha-java-sync");
    let (slave, _) = ferromq_slave(&dir.path().join("slave"), &namesrv, "broker-js", None);
    let deadline = Instant::now() + Duration::from_secs(30);
    while broker_status(&namesrv, &master.broker_addr())["haConnectedSlaves"] != "1" {
        assert!(Instant::now() < deadline, "the slave never connected");
        std::thread::sleep(Duration::from_millis(200));
    }
    let count = 400;
    let sent = run_java(
        "SyncSend",
        &[&namesrv, SYNC_TOPIC, &count.to_string(), "ok"],
        Serialize::Json,
        Duration::from_secs(120),
    );
    sent.assert_passed("SyncSend to a SYNC_MASTER group");
    assert_eq!(sent.figure("SEND_OK"), f64::from(count));
    let expected: Vec<(i64, Vec<u8>)> = (0..count)
        .map(|i| (i64::from(i), format!("jsync-{i:06}").into_bytes()))
        .collect();
    let on_master = pull_queue_of(&master.broker_addr(), SYNC_TOPIC);
    assert!(
        on_master == expected,
        "the master serves {} messages",
        on_master.len()
    );
    // The slave holds them all (each was answered); it serves them once its sync from the
    // master (every 10 s) has brought the topic.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let on_slave = pull_queue_from_min(&slave.addr.to_string(), SYNC_TOPIC);
        if on_slave == expected {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the slave serves {} of the messages",
            on_slave.len()
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let mut slave = slave;
    common::kill(&mut slave.child);
    let refused = run_java(
        "SyncSend",
        &[&namesrv, SYNC_TOPIC, "100000", "noslave"],
        Serialize::Rocketmq,
        Duration::from_secs(120),
    );
    refused.assert_passed("SyncSend to a SYNC_MASTER whose slave is dead");
    assert_eq!(refused.figure("SEND_OK"), 0.0);
    assert_eq!(refused.figure("SLAVE_NOT_AVAILABLE"), 1.0);
    eprintln!(
        "with the slave dead: {} FLUSH_SLAVE_TIMEOUT before SLAVE_NOT_AVAILABLE",
        refused.figure("FLUSH_SLAVE_TIMEOUT")
    );
}

/// A Java 4.9.8 master (its own name server) and a ferromq slave that learns the master's
/// HA address from the name server: the slave's CommitLog is the master's byte for byte
/// across a roll, and it serves queue 0 as the master does.
#[test]
fn a_ferromq_slave_copies_a_java_masters_commit_log_byte_for_byte() {
    let dir = TempDir::on_disk("java-master");
    let namesrv = JavaServer::namesrv(dir.path());
    let master_store = dir.path().join("master-store");
    let master = JavaServer::broker(
        dir.path(),
        namesrv.port,
        &master_store,
        &format!(
            "brokerName=broker-jm\nbrokerIP1=127.0.0.1\nbrokerIP2=127.0.0.1\n\
             mappedFileSizeCommitLog={SEGMENT}"
        ),
    );
    let ns = namesrv.addr();
    let (slave, slave_log) = ferromq_slave(&dir.path().join("slave"), &ns, "broker-jm", None);
    produce(&ns, 0, 6_000);
    wait_same_log(
        &master_store.join("commitlog"),
        &slave_log,
        Duration::from_secs(90),
    );
    assert!(segments(&slave_log).len() >= 2, "the run rolls");
    wait_same_queue(&master.addr(), &slave.addr.to_string(), 1_000);
    master.stop();
}

/// Consumers (the Java 4.9.8 client) keep reading when the master is killed: from the
/// ferromq slave, which holds everything the master stored; and once the master is back
/// they read what is sent to it. No message is missed; repeats are reported.
#[test]
fn java_consumers_read_from_the_slave_while_the_master_is_down() {
    consumers_read_from_the_slave(common::java::Serialize::Json);
}

/// [`java_consumers_read_from_the_slave_while_the_master_is_down`] with the binary header.
#[test]
fn java_consumers_read_from_the_slave_while_the_master_is_down_rocketmq_headers() {
    consumers_read_from_the_slave(common::java::Serialize::Rocketmq);
}

fn consumers_read_from_the_slave(serialize: common::java::Serialize) {
    use common::java::spawn_java;
    let namesrv = common::NamesrvProcess::start("");
    let ns = namesrv.addr.to_string();
    let port = java_broker_port();
    let dir = TempDir::on_disk("ha-failover");
    let master_store = dir.path().join("master");
    let master_conf =
        format!("namesrvAddr={ns}\nbrokerName=broker-fo\nmappedFileSizeCommitLog={SEGMENT}");
    let listen = format!("127.0.0.1:{port}");
    let mut master = common::BrokerProcess::start_on(&master_store, &master_conf, &listen);
    let (slave, slave_log) = ferromq_slave(&dir.path().join("slave"), &ns, "broker-fo", None);
    produce(&ns, 0, 2_000);
    wait_same_log(
        &master_store.join("commitlog"),
        &slave_log,
        Duration::from_secs(60),
    );
    // The slave knows the topic (its sync) and serves every message.
    wait_same_queue(&master.addr.to_string(), &slave.addr.to_string(), 500);
    common::kill(&mut master.child);
    let mut reader = spawn_java(
        "SlaveRead",
        &[&ns, TOPIC, "ha_failover_cg", "2000", "3000"],
        serialize,
    );
    let line = reader.wait_for_line("PHASE1", Duration::from_secs(150));
    eprintln!("while the master is down: {line}");
    let master = common::BrokerProcess::start_on(&master_store, &master_conf, &listen);
    wait_routed(&ns, TOPIC, &master.addr.to_string());
    produce(&ns, 2_000, 1_000);
    let out = reader.finish(Duration::from_secs(150));
    out.assert_passed(&format!("SlaveRead across a master kill, {serialize:?}"));
    eprintln!(
        "distinct {} repeats {}",
        out.figure("distinct"),
        out.figure("repeats")
    );
    drop(master);
}

/// Waits (bounded) until the name server routes `topic` to `broker`.
fn wait_routed(namesrv: &str, topic: &str, broker: &str) {
    use ferromq::remoting::headers::GetRouteInfoRequestHeader;
    let deadline = Instant::now() + Duration::from_secs(60);
    runtime().block_on(async {
        let client = connect(namesrv.parse().unwrap(), SerializeType::Json).await;
        loop {
            let request = RemotingCommand::request_with_header(
                RequestCode::GET_ROUTEINFO_BY_TOPIC,
                &GetRouteInfoRequestHeader {
                    topic: topic.into(),
                    accept_standard_json_only: None,
                },
            );
            let routed = client.request(request).await.is_ok_and(|response| {
                response.code == 0 && String::from_utf8_lossy(&response.body).contains(broker)
            });
            if routed {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{topic} never routed to {broker}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
}

/// A TCP relay from `listen` to `target` that cuts each connection after about `cut`
/// bytes from the target (a different amount each time, inside frames), until `stop`.
fn cutting_relay(target: std::net::SocketAddr, cut: usize) -> (std::net::SocketAddr, Relay) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let cuts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (cuts2, stop2) = (cuts.clone(), stop.clone());
    listener.set_nonblocking(true).unwrap();
    std::thread::spawn(move || {
        let mut round = 0usize;
        while !stop2.load(std::sync::atomic::Ordering::Acquire) {
            let Ok((mut slave, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            slave.set_nonblocking(false).unwrap();
            let Ok(mut master) = std::net::TcpStream::connect(target) else {
                continue;
            };
            round += 1;
            let limit = cut + round * 7_919 % cut;
            let (mut slave_rx, mut master_tx) =
                (slave.try_clone().unwrap(), master.try_clone().unwrap());
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while let Ok(n) = slave_rx.read(&mut buf) {
                    if n == 0 || master_tx.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
            let cuts = cuts2.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 7_777];
                let mut relayed = 0usize;
                while let Ok(n) = master.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let take = n.min(limit - relayed);
                    if slave.write_all(&buf[..take]).is_err() {
                        break;
                    }
                    relayed += take;
                    if relayed >= limit {
                        cuts.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                        break;
                    }
                }
                let _ = slave.shutdown(std::net::Shutdown::Both);
                let _ = master.shutdown(std::net::Shutdown::Both);
            });
        }
    });
    (addr, Relay { cuts, stop })
}

/// The relay's counters; stops it on drop.
struct Relay {
    cuts: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// A ferromq slave whose HA connection is cut mid-frame again and again, then killed with
/// kill -9 under load and started again over its store once the master has moved on by five
/// segments and more, ends with the master's CommitLog byte for byte and the same queue:
/// reconnects resume at its end, a record split across connections is whole once, recovery
/// keeps what it had written, and a slave far behind takes every segment it lacks.
#[test]
fn a_ferromq_slave_survives_cut_connections_kill_9_and_falling_far_behind() {
    let (master, port) = master_on_ha_port("brokerName=broker-cut");
    let namesrv = master.namesrv_addr();
    let ha: std::net::SocketAddr = format!("127.0.0.1:{}", port + 1).parse().unwrap();
    let (relay_addr, relay) = cutting_relay(ha, 300_000);
    let dir = TempDir::on_disk("ferromq-slave-cut");
    let store = dir.path().join("slave");
    let relay_text = relay_addr.to_string();
    let (slave, slave_log) = ferromq_slave(&store, &namesrv, "broker-cut", Some(&relay_text));
    produce(&namesrv, 0, 3_000);
    let master_log = commit_log_dir(&master.data);
    wait_same_log(&master_log, &slave_log, Duration::from_secs(90));
    let cuts = relay.cuts.load(std::sync::atomic::Ordering::Acquire);
    assert!(cuts >= 3, "the relay cut {cuts} connections");
    drop(relay);
    // kill -9 while the master is being written to, then start again over the store.
    let producing = std::thread::spawn({
        let namesrv = namesrv.clone();
        move || produce(&namesrv, 3_000, 3_000)
    });
    std::thread::sleep(Duration::from_millis(700));
    let mut slave = slave;
    common::kill(&mut slave.child);
    producing.join().unwrap();
    // While the slave is down the master moves on by five segments and more: the slave,
    // far behind, takes them all on its return.
    let before = segments(&master_log).len();
    produce(&namesrv, 6_000, 22_000);
    let behind = segments(&master_log).len() - before;
    assert!(behind >= 5, "the master moved on by {behind} segments");
    let direct = ha.to_string();
    let (slave, slave_log) = ferromq_slave(&store, &namesrv, "broker-cut", Some(&direct));
    wait_same_log(&master_log, &slave_log, Duration::from_secs(90));
    wait_same_queue(&master.broker_addr(), &slave.addr.to_string(), 1_000);
    eprintln!("connections cut mid-stream: {cuts}");
}

/// A ferromq slave that holds more than the master it is sent to is refused by that master
/// (an error line), and one whose end falls inside a record of a master with another history
/// refuses that master's bytes (an error line); in both cases its CommitLog keeps exactly the
/// bytes it had, and brokerStatus says why the link is down.
#[test]
fn a_slave_whose_log_diverged_is_refused_and_keeps_its_bytes() {
    let (first, first_port) = master_on_ha_port("brokerName=broker-dv");
    produce(&first.namesrv_addr(), 0, 2_000);
    let dir = TempDir::on_disk("ha-diverged");
    let store = dir.path().join("slave");
    let first_ha = format!("127.0.0.1:{}", first_port + 1);
    let start_slave =
        |namesrv: &str, ha: &str| ferromq_slave(&store, namesrv, "broker-dv", Some(ha));
    let (mut slave, slave_log) = start_slave(&first.namesrv_addr(), &first_ha);
    wait_same_log(
        &commit_log_dir(&first.data),
        &slave_log,
        Duration::from_secs(60),
    );
    slave.terminate();
    let held = segments(&slave_log);
    let link_of = |namesrv: &str, slave: &common::BrokerProcess| {
        broker_status(namesrv, &slave.addr.to_string())["haConnection"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };

    // A master holding less than the slave: it refuses to serve it.
    let (other, other_port) = master_on_ha_port("brokerName=broker-dv");
    let ns = other.namesrv_addr();
    produce(&ns, 0, 300);
    let other_ha = format!("127.0.0.1:{}", other_port + 1);
    let (slave, _) = start_slave(&ns, &other_ha);
    let refused = common::wait_for_line(
        &other.log,
        "slave ahead of this master",
        Duration::from_secs(20),
    );
    assert!(refused.is_some(), "the master did not refuse the slave");
    let link = link_of(&ns, &slave);
    assert!(link.starts_with("DOWN") || link.starts_with("UP"), "{link}");
    drop(slave);
    assert!(
        segments(&slave_log) == held,
        "the slave's CommitLog changed"
    );

    // The same master once it holds more, with records of other sizes: the slave's end falls
    // inside one of them, and the slave refuses what it is sent.
    produce(&ns, 77, 3_000);
    let (slave, _) = start_slave(&ns, &other_ha);
    let line = common::wait_for_line(
        &slave.log,
        "is not a copy of the master's",
        Duration::from_secs(20),
    );
    assert!(
        line.is_some(),
        "the slave did not refuse the master's bytes"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let link = link_of(&ns, &slave);
        if link.starts_with("DOWN diverged") {
            break;
        }
        assert!(Instant::now() < deadline, "brokerStatus says {link}");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        segments(&slave_log) == held,
        "the slave appended a diverged master's bytes"
    );
}

/// 4 senders to `addr`, each sending `WAIT=true` puts of `HaDrill` one after another until
/// the broker is gone (or 60 s), each returning the (CommitLog offset, body) of every put
/// answered SEND_OK.
fn spawn_senders(
    addr: std::net::SocketAddr,
    tag: &str,
) -> Vec<std::thread::JoinHandle<Vec<(u64, String)>>> {
    use common::send_request;
    use ferromq::remoting::headers::SendMessageResponseHeader;
    (0..4)
        .map(|sender| {
            let tag = tag.to_owned();
            std::thread::spawn(move || {
                runtime().block_on(async {
                    let client = connect(addr, SerializeType::Json).await;
                    let mut acked = Vec::new();
                    let deadline = Instant::now() + Duration::from_secs(60);
                    for i in 0.. {
                        if Instant::now() > deadline {
                            break;
                        }
                        let body = format!("{tag}-{sender}-{i:06}");
                        let request =
                            send_request("HaDrill", sender, body.as_bytes(), "WAIT\u{1}true\u{2}");
                        let answer = client
                            .request_timeout(request, Duration::from_secs(10))
                            .await;
                        let Ok(response) = answer else { break };
                        if response.code == 0 {
                            let header: SendMessageResponseHeader =
                                response.decode_header().unwrap();
                            acked.push((physical_of(&header.msg_id), body));
                        } else {
                            // SLAVE_NOT_AVAILABLE before the slave is back.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                    acked
                })
            })
        })
        .collect()
}

/// SYNC_MASTER with a ferromq slave, the master killed with kill -9 under load at a
/// different moment in each of 3 rounds and started again over its store: every put
/// answered SEND_OK is in the slave's CommitLog (the crash drill's count, with the slave as
/// the witness).
#[test]
fn every_send_ok_of_a_killed_sync_master_is_on_its_ferromq_slave() {
    let namesrv = common::NamesrvProcess::start("");
    let ns = namesrv.addr.to_string();
    let port = java_broker_port();
    let dir = TempDir::on_disk("ha-drill");
    let master_store = dir.path().join("master");
    let conf = format!(
        "namesrvAddr={ns}\nbrokerName=broker-drill\nbrokerRole=SYNC_MASTER\n\
         mappedFileSizeCommitLog={SEGMENT}"
    );
    let listen = format!("127.0.0.1:{port}");
    let ha = format!("127.0.0.1:{}", port + 1);
    let (_slave, slave_log) =
        ferromq_slave(&dir.path().join("slave"), &ns, "broker-drill", Some(&ha));
    let mut total_acked = 0;
    for round in 0..3u64 {
        let mut master = common::BrokerProcess::start_on(&master_store, &conf, &listen);
        let senders = spawn_senders(master.addr, &format!("drill-{round}"));
        // Wait for SEND_OKs to flow (the slave is back), then kill at a round's own moment.
        std::thread::sleep(Duration::from_millis(6_000 + 700 * round));
        common::kill(&mut master.child);
        let acked: Vec<(u64, String)> = senders
            .into_iter()
            .flat_map(|sender| sender.join().unwrap())
            .collect();
        assert!(
            !acked.is_empty(),
            "round {round}: no put was answered SEND_OK"
        );
        for (physical, body) in &acked {
            assert_eq!(
                record_body_at(&slave_log, *physical).as_deref(),
                Some(body.as_bytes()),
                "round {round}: {body} was answered SEND_OK but is not on the slave"
            );
        }
        eprintln!("round {round}: {} SEND_OK, all on the slave", acked.len());
        total_acked += acked.len();
    }
    eprintln!("{total_acked} SEND_OK over 3 kills, all on the slave");
    let mut slave = _slave;
    assert!(
        slave.child.try_wait().unwrap().is_none(),
        "the slave died during the drill"
    );
}

/// A counter of `ferromq admin brokerStatus` (0 when not shown).
fn status_count(table: &serde_json::Value, key: &str) -> u64 {
    table[key]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// The master's counts of its one slave's link: frames sent and reports read.
fn link_counts(namesrv: &str, master: &str) -> (u64, u64) {
    let table = broker_status(namesrv, master);
    let key = |prefix: &str| {
        table
            .as_object()
            .and_then(|t| t.keys().find(|k| k.starts_with(prefix)).cloned())
            .unwrap_or_default()
    };
    (
        status_count(&table, &key("haSlaveFramesSent_")),
        status_count(&table, &key("haSlaveReports_")),
    )
}

/// SYNC_MASTER with a ferromq slave, frames of 1 KiB (`haTransferBatchSize`) and 64 puts of
/// 1 KiB in flight at a time, 40 times over: the slave acknowledges what each read of its
/// socket brought with one report (4.9's slave sends one a frame), so the master reads far
/// fewer reports than it sends frames, and one report answers many puts. Every put is
/// answered SEND_OK and is in the slave's CommitLog at its offset.
#[test]
fn a_ferromq_slave_acknowledges_many_frames_and_puts_with_one_report() {
    use common::send_request;
    use ferromq::remoting::headers::SendMessageResponseHeader;
    const IN_FLIGHT: usize = 64;
    const ROUNDS: usize = 40;
    let (master, _) = master_on_ha_port(
        "brokerName=broker-batch\nbrokerRole=SYNC_MASTER\nhaTransferBatchSize=1024",
    );
    let namesrv = master.namesrv_addr();
    let dir = TempDir::on_disk("ha-batch");
    let (mut slave, slave_log) =
        ferromq_slave(&dir.path().join("slave"), &namesrv, "broker-batch", None);
    let deadline = Instant::now() + Duration::from_secs(30);
    while broker_status(&namesrv, &master.broker_addr())["haConnectedSlaves"] != "1" {
        assert!(Instant::now() < deadline, "the slave never connected");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (frames_before, reports_before) = link_counts(&namesrv, &master.broker_addr());
    let addr: std::net::SocketAddr = master.broker_addr().parse().unwrap();
    let acked: Vec<(u64, String)> = runtime().block_on(async {
        let client = connect(addr, SerializeType::Json).await;
        let mut acked = Vec::new();
        for round in 0..ROUNDS {
            let puts = (0..IN_FLIGHT).map(|i| {
                let body = format!("batch-{round:02}-{i:02}-{}", "x".repeat(1024));
                let queue = i32::try_from(i % 4).unwrap();
                let request = send_request("HaBatch", queue, body.as_bytes(), "WAIT\u{1}true\u{2}");
                let answer = client.request_timeout(request, Duration::from_secs(10));
                async move { (answer.await, body) }
            });
            for (answer, body) in futures::future::join_all(puts).await {
                let response = answer.expect("an answer");
                assert_eq!(response.code, 0, "{body:.12}: {:?}", response.remark);
                let header: SendMessageResponseHeader = response.decode_header().unwrap();
                acked.push((physical_of(&header.msg_id), body));
            }
        }
        acked
    });
    assert_eq!(acked.len(), IN_FLIGHT * ROUNDS);
    for (physical, body) in &acked {
        assert_eq!(
            record_body_at(&slave_log, *physical).as_deref(),
            Some(body.as_bytes()),
            "{body:.12} was answered SEND_OK but is not on the slave"
        );
    }
    let (frames_after, reports_after) = link_counts(&namesrv, &master.broker_addr());
    let (frames, reports) = (frames_after - frames_before, reports_after - reports_before);
    let slave_table = broker_status(&namesrv, &slave.addr.to_string());
    eprintln!(
        "{} puts, {frames} frames, {reports} reports (the slave: {} frames taken, {} reports \
         sent in all)",
        acked.len(),
        status_count(&slave_table, "haFramesTaken"),
        status_count(&slave_table, "haReportsSent"),
    );
    assert!(reports > 0, "no report read");
    assert!(
        reports * 4 <= frames,
        "{reports} reports for {frames} frames: not acknowledged in batches"
    );
    assert!(
        reports * 4 <= acked.len() as u64,
        "{reports} reports for {} puts",
        acked.len()
    );
    assert!(
        status_count(&slave_table, "haFramesTaken") >= frames,
        "{slave_table:#}"
    );
    assert!(slave.child.try_wait().unwrap().is_none(), "the slave died");
}

/// A ferromq slave fed in frames of 512 bytes (`haTransferBatchSize`): 20,000 and more
/// frames, each written and reported, more wake-ups of the slave's HA task than a glommio
/// task has wakers (32,767). A task that also polled a pending accept at each wake-up kept
/// a waker per poll and crashed the slave; the copy must be whole.
#[test]
fn a_ferromq_slave_takes_tens_of_thousands_of_small_frames() {
    let (master, _) = master_on_ha_port("brokerName=broker-small\nhaTransferBatchSize=512");
    let namesrv = master.namesrv_addr();
    let dir = TempDir::on_disk("ferromq-slave-small");
    let (mut slave, slave_log) =
        ferromq_slave(&dir.path().join("slave"), &namesrv, "broker-small", None);
    produce(&namesrv, 0, 12_000);
    wait_same_log(
        &commit_log_dir(&master.data),
        &slave_log,
        Duration::from_secs(120),
    );
    assert!(
        slave.child.try_wait().unwrap().is_none(),
        "the slave died taking small frames"
    );
}

/// ASYNC_MASTER with a ferromq slave, the master killed with kill -9 under load: no loss
/// claim, the drill reports how many SEND_OK puts the slave lacked; what it has is the
/// master's CommitLog byte for byte, and once the master is back the slave catches up.
#[test]
fn an_async_masters_ferromq_slave_lags_and_catches_up_after_a_kill() {
    let namesrv = common::NamesrvProcess::start("");
    let ns = namesrv.addr.to_string();
    let port = java_broker_port();
    let dir = TempDir::on_disk("ha-async-drill");
    let master_store = dir.path().join("master");
    let conf =
        format!("namesrvAddr={ns}\nbrokerName=broker-adrill\nmappedFileSizeCommitLog={SEGMENT}");
    let listen = format!("127.0.0.1:{port}");
    let ha = format!("127.0.0.1:{}", port + 1);
    let mut master = common::BrokerProcess::start_on(&master_store, &conf, &listen);
    let (_slave, slave_log) =
        ferromq_slave(&dir.path().join("slave"), &ns, "broker-adrill", Some(&ha));
    // The slave connected (its first report goes at once).
    std::thread::sleep(Duration::from_millis(1_000));
    let senders = spawn_senders(master.addr, "async");
    std::thread::sleep(Duration::from_millis(3_000));
    common::kill(&mut master.child);
    let acked: Vec<(u64, String)> = senders
        .into_iter()
        .flat_map(|sender| sender.join().unwrap())
        .collect();
    assert!(!acked.is_empty(), "no put was answered SEND_OK");
    let missing = acked
        .iter()
        .filter(|(physical, body)| {
            record_body_at(&slave_log, *physical).as_deref() != Some(body.as_bytes())
        })
        .count();
    eprintln!(
        "ASYNC_MASTER killed: {} SEND_OK, {missing} not on the slave at the kill",
        acked.len()
    );
    // What the slave holds is the master's; once the master is back it has it all.
    let _master = common::BrokerProcess::start_on(&master_store, &conf, &listen);
    wait_same_log(
        &master_store.join("commitlog"),
        &slave_log,
        Duration::from_secs(60),
    );
    for (physical, body) in &acked {
        assert_eq!(
            record_body_at(&slave_log, *physical).as_deref(),
            Some(body.as_bytes()),
            "{body} never reached the slave"
        );
    }
}

/// A slave that starts before its master (the name server has no master to tell it of) follows
/// the master within about 15 s of the master's start: it registers again 10 s after its start,
/// as Java's broker does, not a whole `registerNameServerPeriod` (30 s) later.
#[test]
fn a_ferromq_slave_started_before_its_master_follows_it_within_15_s() {
    let namesrv = common::NamesrvProcess::start("");
    let namesrv_addr = namesrv.addr.to_string();
    let dir = TempDir::on_disk("ferromq-slave-first");
    let (_slave, slave_log) = ferromq_slave(
        &dir.path().join("slave"),
        &namesrv_addr,
        "broker-late",
        None,
    );
    let port = java_broker_port();
    let master_store = dir.path().join("master");
    let started = Instant::now();
    let master = common::BrokerProcess::start_on(
        &master_store,
        &format!(
            "namesrvAddr={namesrv_addr}\nbrokerName=broker-late\n\
             mappedFileSizeCommitLog={SEGMENT}"
        ),
        &format!("127.0.0.1:{port}"),
    );
    wait_routed(&namesrv_addr, "TBW102", &master.addr.to_string());
    produce(&namesrv_addr, 0, 200);
    let left = Duration::from_secs(15).saturating_sub(started.elapsed());
    wait_same_log(&master_store.join("commitlog"), &slave_log, left);
}
