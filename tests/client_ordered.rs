//! Ordered messages through the public client against real `ferromq namesrv` and `ferromq
//! broker` processes: orderly push consumers of one group joining, leaving gracefully and
//! dying without unlocking while 10,000 keyed messages flow, and the broker's queue locks
//! (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ, `rebalanceLockMaxLiveTime`) deciding when a queue may
//! move.
//!
//! Method: every consumer runs on its own tokio runtime. "Killing" one stops its listener
//! (it records nothing more) and shuts its runtime down in the background: its tasks and
//! sockets go at once and no UNLOCK_BATCH_MQ is sent, as when a process dies. Each listener
//! call takes two tickets of one global counter (entering, leaving), so calls on one queue
//! can be checked for overlap and put in one order across consumers. Keys are sent with
//! `send_with_selector` (Java's `SelectMessageQueueByHash`: `|hashCode| % queues`), each key
//! by one sender in sequence, so a key's sequence numbers follow its queue offsets.

mod common;

use common::{connect, BrokerProcess, NamesrvProcess, TempDir};
use ferromq::client::consumer::{
    ConsumeFromWhere, ConsumeOrderlyStatus, MessageQueue, PushConsumer, PushConsumerConfig,
};
use ferromq::client::producer::Producer;
use ferromq::client::{ClientConfig, ClientInstance, Message, MessageExt};
use ferromq::remoting::headers::CreateTopicRequestHeader;
use ferromq::remoting::{RemotingCommand, RequestCode, SerializeType};
use ferromq::store::message::java_string_hash;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(30);
/// How often a member renews its locks, and how long it trusts one (client side).
const LOCK_INTERVAL: Duration = Duration::from_millis(500);
const LOCK_MAX_LIVE: Duration = Duration::from_millis(1500);

struct Cluster {
    namesrv: NamesrvProcess,
    _broker: BrokerProcess,
    dir: TempDir,
    producer: Producer,
}

impl Cluster {
    async fn start(name: &str, extra: &str) -> Cluster {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
        let dir = TempDir::on_disk(name);
        let namesrv = NamesrvProcess::start("");
        let config = format!(
            "brokerName=broker-a\nbrokerClusterName=DefaultCluster\nnamesrvAddr={}\n\
             registerNameServerPeriod=200\nflushConsumerOffsetInterval=100\n{extra}",
            namesrv.addr
        );
        let broker = BrokerProcess::start(&dir.path().join("store"), &config);
        let mut producer_client = ClientConfig::new(&namesrv.addr.to_string());
        producer_client.instance_name = "producer".to_owned();
        let producer = Producer::new("ordered-producer", producer_client);
        producer.start().await.unwrap();
        let cluster = Cluster {
            namesrv,
            _broker: broker,
            dir,
            producer,
        };
        cluster.create_topic(name, 8).await;
        cluster
    }

    /// Creates `topic` and waits (bounded) until the name server routes all its queues.
    async fn create_topic(&self, topic: &str, queues: i32) {
        let admin = connect(self._broker.addr, SerializeType::Json).await;
        let header = CreateTopicRequestHeader {
            order: true,
            ..CreateTopicRequestHeader::read_write(topic, queues)
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::UPDATE_AND_CREATE_TOPIC, &header);
        let response = admin.request(request).await.unwrap();
        assert_eq!(response.code, 0, "{:?}", response.remark);
        let routes = ClientInstance::new(ClientConfig::new(&self.namesrv.addr.to_string()));
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(route) = routes.refresh_topic_route(topic).await {
                if route.subscribe_queues.len() == queues as usize {
                    return;
                }
            }
            assert!(Instant::now() < deadline, "no route for {topic}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn client(&self, instance: &str) -> ClientConfig {
        let mut config = ClientConfig::new(&self.namesrv.addr.to_string());
        config.instance_name = instance.to_owned();
        config.poll_name_server_interval = Duration::from_millis(500);
        config.heartbeat_broker_interval = Duration::from_secs(1);
        config.persist_consumer_offset_interval = Duration::from_millis(200);
        config
    }

    fn offsets_root(&self) -> PathBuf {
        self.dir.path().join("offsets")
    }

    async fn send_keys(&self, topic: &str, keys: &[usize], seqs: std::ops::Range<u32>) {
        send_keys(&self.producer, topic, keys, seqs).await;
    }
}

/// Sends `seqs` of every key in `keys`, key by key in sequence order, with the hash selector
/// (each checked to land in its key's queue).
async fn send_keys(producer: &Producer, topic: &str, keys: &[usize], seqs: std::ops::Range<u32>) {
    for seq in seqs {
        for &key in keys {
            let name = key_name(key);
            let body = format!("{name}:{seq}");
            let message = Message::new(topic, body).with_keys([name.as_str()]);
            let hash = java_string_hash(&name).unsigned_abs() as usize;
            let sent = producer
                .send_with_selector(message, |queues, _| hash % queues.len())
                .await
                .unwrap();
            assert_eq!(sent.message_queue.queue_id, queue_of(key), "{name}");
        }
    }
}

fn key_name(key: usize) -> String {
    format!("order-{key}")
}

/// The queue of a key over 8 queues (`SelectMessageQueueByHash`).
fn queue_of(key: usize) -> i32 {
    let hash = java_string_hash(&key_name(key)).unsigned_abs() as usize;
    i32::try_from(hash % 8).unwrap()
}

/// One message a listener was given.
#[derive(Clone, Debug)]
struct Delivery {
    who: usize,
    queue: i32,
    offset: i64,
    key: usize,
    seq: u32,
    /// Global tickets taken when the listener call began and ended.
    enter: u64,
    exit: u64,
    at: Instant,
}

type Log = Arc<Mutex<Vec<Delivery>>>;

/// One consumer of the group on its own runtime.
struct Member {
    id: usize,
    consumer: PushConsumer,
    alive: Arc<AtomicBool>,
    runtime: Option<tokio::runtime::Runtime>,
}

fn member_config(cluster: &Cluster, group: &str) -> PushConsumerConfig {
    let mut config = PushConsumerConfig::new(group);
    config.consume_from_where = ConsumeFromWhere::FirstOffset;
    config.rebalance_interval = Duration::from_millis(300);
    config.suspend_current_queue_time = Duration::from_millis(100);
    config.pull_time_delay_when_exception = Duration::from_millis(200);
    config.lock_interval = LOCK_INTERVAL;
    config.lock_max_live_time = LOCK_MAX_LIVE;
    config.broker_suspend_max_time = Duration::from_secs(1);
    config.consumer_timeout_when_suspend = Duration::from_secs(5);
    config.offsets_root = cluster.offsets_root();
    config
}

/// Builds, subscribes and starts member `id` of the topic's group on a runtime of its own;
/// its orderly listener logs every message after `pace`.
async fn new_member(
    cluster: &Cluster,
    id: usize,
    topic: &str,
    log: &Log,
    tick: &Arc<AtomicU64>,
    pace: Duration,
) -> Member {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let config = member_config(cluster, &format!("{topic}-g"));
    let consumer = PushConsumer::new(cluster.client(&format!("member-{id}")), config);
    consumer.subscribe(topic, "*").unwrap();
    let alive = Arc::new(AtomicBool::new(true));
    let (log, tick, still) = (log.clone(), tick.clone(), alive.clone());
    consumer.register_message_listener_orderly(move |messages: &[MessageExt]| {
        if !still.load(Ordering::SeqCst) {
            // Dead: a process that is gone consumes nothing.
            return ConsumeOrderlyStatus::SuspendCurrentQueueAMoment;
        }
        let enter = tick.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(pace);
        let exit = tick.fetch_add(1, Ordering::SeqCst);
        let mut log = log.lock().unwrap();
        for message in messages {
            let body = String::from_utf8_lossy(&message.body).into_owned();
            let (name, seq) = body.split_once(':').unwrap();
            log.push(Delivery {
                who: id,
                queue: message.queue_id,
                offset: message.queue_offset,
                key: name.trim_start_matches("order-").parse().unwrap(),
                seq: seq.parse().unwrap(),
                enter,
                exit,
                at: Instant::now(),
            });
        }
        ConsumeOrderlyStatus::Success
    });
    let starting = consumer.clone();
    runtime
        .spawn(async move { starting.start().await })
        .await
        .unwrap()
        .unwrap();
    Member {
        id,
        consumer,
        alive,
        runtime: Some(runtime),
    }
}

impl Member {
    /// Graceful shutdown: offsets persisted, locks released (UNLOCK_BATCH_MQ).
    async fn shutdown(&mut self) {
        let Some(runtime) = self.runtime.take() else {
            return;
        };
        let consumer = self.consumer.clone();
        runtime
            .spawn(async move { consumer.shutdown().await })
            .await
            .unwrap();
        self.alive.store(false, Ordering::SeqCst);
        std::thread::spawn(move || drop(runtime)).join().unwrap();
    }

    /// Dies: nothing more is consumed, sockets close, no unlock, no offset persisted.
    fn kill(&mut self) {
        self.alive.store(false, Ordering::SeqCst);
        if let Some(runtime) = self.runtime.take() {
            std::thread::spawn(move || runtime.shutdown_background())
                .join()
                .unwrap();
        }
    }

    fn locked(&self, topic: &str) -> BTreeSet<i32> {
        queue_ids(&self.consumer.locked_queues(), topic)
    }

    fn running(&self) -> bool {
        self.runtime.is_some()
    }
}

fn queue_ids(queues: &BTreeSet<MessageQueue>, topic: &str) -> BTreeSet<i32> {
    queues
        .iter()
        .filter(|q| q.topic == topic)
        .map(|q| q.queue_id)
        .collect()
}

async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Samples the locked sets of the running members; a queue counts as held by two at once
/// only when member A shows it before and after member B shows it (reads A, B, A), so a
/// handover between two reads is never mistaken for an overlap.
#[derive(Default)]
struct LockSampler {
    samples: usize,
    conflicts: Vec<String>,
}

impl LockSampler {
    fn sample(&mut self, members: &[(usize, PushConsumer)]) {
        let first: Vec<BTreeSet<MessageQueue>> =
            members.iter().map(|(_, c)| c.locked_queues()).collect();
        let second: Vec<BTreeSet<MessageQueue>> =
            members.iter().map(|(_, c)| c.locked_queues()).collect();
        for a in 0..members.len() {
            for b in a + 1..members.len() {
                for mq in first[a].intersection(&first[b]) {
                    if second[a].contains(mq) {
                        self.conflicts.push(format!(
                            "{mq} locked by members {} and {}",
                            members[a].0, members[b].0
                        ));
                    }
                }
            }
        }
        self.samples += 1;
    }
}

/// What the checks found besides failures.
#[derive(Debug, Default)]
struct Verdict {
    deliveries: usize,
    redelivered: usize,
    handovers: usize,
}

/// The checks of the ordered-consumption contract over everything the listeners saw:
/// 1. every (key, seq) sent was delivered at least once (nothing lost), each from its key's
///    queue;
/// 2. listener calls on one queue never overlap in time, across all members (one holder);
/// 3. per queue, in the global order of calls: while the same member keeps consuming it the
///    offsets go up by exactly one; where another member takes over (a handover) it starts
///    at most one past where the previous one stopped (no gap) and may go back (a
///    redelivery from the committed offset, at least once);
/// 4. per key and member, sequence numbers only go back where another member consumed the
///    key's queue in between (the handover of rule 3), else they strictly increase.
fn check(log: &[Delivery], keys: usize, per_key: u32) -> Verdict {
    let mut verdict = Verdict {
        deliveries: log.len(),
        ..Verdict::default()
    };
    let seen: BTreeSet<(usize, u32)> = log.iter().map(|d| (d.key, d.seq)).collect();
    for key in 0..keys {
        for seq in 0..per_key {
            assert!(
                seen.contains(&(key, seq)),
                "{} seq {seq} lost",
                key_name(key)
            );
        }
    }
    let mut per_queue: BTreeMap<i32, Vec<&Delivery>> = BTreeMap::new();
    for d in log {
        assert_eq!(
            d.queue,
            queue_of(d.key),
            "{} in the wrong queue",
            key_name(d.key)
        );
        per_queue.entry(d.queue).or_default().push(d);
    }
    for (queue, list) in &mut per_queue {
        list.sort_by_key(|d| (d.enter, d.offset));
        for pair in list.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            if prev.enter != next.enter {
                assert!(
                    prev.exit < next.enter,
                    "queue {queue}: member {} consumed offset {} while member {} was still \
                     consuming offset {}",
                    next.who,
                    next.offset,
                    prev.who,
                    prev.offset
                );
            }
            if prev.who == next.who {
                assert_eq!(
                    next.offset,
                    prev.offset + 1,
                    "queue {queue}: member {} skipped or repeated without a handover",
                    next.who
                );
            } else {
                verdict.handovers += 1;
                assert!(
                    next.offset <= prev.offset + 1,
                    "queue {queue}: member {} started at {} after member {} stopped at {}",
                    next.who,
                    next.offset,
                    prev.who,
                    prev.offset
                );
                verdict.redelivered += usize::try_from(prev.offset + 1 - next.offset).unwrap();
            }
        }
    }
    let mut per_key_member: BTreeMap<(usize, usize), Vec<&Delivery>> = BTreeMap::new();
    for d in log {
        per_key_member.entry((d.key, d.who)).or_default().push(d);
    }
    for ((key, who), list) in &mut per_key_member {
        list.sort_by_key(|d| d.enter);
        for pair in list.windows(2) {
            let (prev, next) = (pair[0], pair[1]);
            if next.seq > prev.seq {
                continue;
            }
            let queue = &per_queue[&prev.queue];
            let handover = queue
                .iter()
                .any(|d| d.who != *who && d.enter > prev.enter && d.enter < next.enter);
            assert!(
                handover,
                "{} at member {who}: seq {} after {} with no handover between",
                key_name(*key),
                next.seq,
                prev.seq
            );
        }
    }
    verdict
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_key_order_holds_while_members_join_leave_and_die() {
    const KEYS: usize = 100;
    const PER_KEY: u32 = 100;
    const ROUNDS: u32 = 20;
    let topic = "OrderedT";
    let cluster = Cluster::start(topic, "rebalanceLockMaxLiveTime=3000").await;
    let log: Log = Arc::default();
    let tick = Arc::new(AtomicU64::new(0));
    let pace = Duration::from_micros(300);
    let members: Arc<Mutex<Vec<(usize, PushConsumer)>>> = Arc::default();
    let sampling = Arc::new(AtomicBool::new(true));
    let sampler = {
        let (members, sampling) = (members.clone(), sampling.clone());
        tokio::spawn(async move {
            let mut sampler = LockSampler::default();
            // Bounded: the test ends well before 3000 samples of 20 ms.
            for _ in 0..3000 {
                if !sampling.load(Ordering::SeqCst) {
                    break;
                }
                let running = members.lock().unwrap().clone();
                sampler.sample(&running);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            sampler
        })
    };
    let add = |member: &Member| {
        members
            .lock()
            .unwrap()
            .push((member.id, member.consumer.clone()));
    };
    let remove = |id: usize| members.lock().unwrap().retain(|(m, _)| *m != id);
    let by = |id: usize| {
        let log = log.clone();
        move || log.lock().unwrap().iter().any(|d| d.who == id)
    };
    // 100 keys over 8 queues, 10 senders of 10 keys each, one round of 5 per key at a time
    // while the membership changes between rounds.
    let per_round = PER_KEY / ROUNDS;
    let send_rounds = |rounds: std::ops::Range<u32>| {
        let producer = cluster.producer.clone();
        async move {
            let mut senders = Vec::new();
            for sender in 0..10 {
                let producer = producer.clone();
                let keys: Vec<usize> = (sender * 10..sender * 10 + 10).collect();
                let seqs = rounds.start * per_round..rounds.end * per_round;
                senders.push(tokio::spawn(async move {
                    send_keys(&producer, "OrderedT", &keys, seqs).await;
                }));
            }
            for sender in senders {
                sender.await.unwrap();
            }
        }
    };
    let mut m1 = new_member(&cluster, 1, topic, &log, &tick, pace).await;
    add(&m1);
    send_rounds(0..4).await;
    wait_until("member 1 under way", by(1)).await;
    let mut m2 = new_member(&cluster, 2, topic, &log, &tick, pace).await;
    add(&m2);
    send_rounds(4..8).await;
    wait_until("member 2 taking queues over", by(2)).await;
    let mut m3 = new_member(&cluster, 3, topic, &log, &tick, pace).await;
    add(&m3);
    send_rounds(8..12).await;
    wait_until("member 3 taking queues over", by(3)).await;
    // Member 1 leaves gracefully (unlocks), member 2 dies holding its locks.
    remove(1);
    m1.shutdown().await;
    send_rounds(12..16).await;
    remove(2);
    let m2_queues: BTreeSet<i32> = queue_ids(&m2.consumer.locked_queues(), topic);
    m2.kill();
    let died = Instant::now();
    send_rounds(16..20).await;
    // Bounded; on timeout the checks below name what is missing.
    let total = KEYS * PER_KEY as usize;
    let deadline = Instant::now() + WAIT;
    while Instant::now() < deadline {
        let seen: BTreeSet<(usize, u32)> =
            log.lock().unwrap().iter().map(|d| (d.key, d.seq)).collect();
        if seen.len() == total {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    sampling.store(false, Ordering::SeqCst);
    let sampler = sampler.await.unwrap();
    assert!(m3.running() && !m1.running() && !m2.running());
    m3.shutdown().await;
    let log = log.lock().unwrap().clone();
    let verdict = check(&log, KEYS, PER_KEY);
    assert!(
        sampler.samples > 20,
        "only {} lock samples",
        sampler.samples
    );
    assert!(sampler.conflicts.is_empty(), "{:?}", sampler.conflicts);
    // Nothing of member 2's queues moved before its broker locks could have expired: it
    // renewed them at most LOCK_INTERVAL (+ scheduling) before dying, they last 3 s.
    let early = log.iter().find(|d| {
        d.who == 3
            && m2_queues.contains(&d.queue)
            && d.at > died
            && d.at < died + Duration::from_millis(1500)
    });
    assert!(
        early.is_none(),
        "a dead member's queue moved early: {early:?}"
    );
    assert!(verdict.handovers >= 3, "{verdict:?}");
    eprintln!("{verdict:?}, {} lock samples", sampler.samples);
}

/// Starts two members and waits until each holds the lock of 4 of the 8 queues.
async fn two_members(cluster: &Cluster, topic: &str, log: &Log) -> (Member, Member) {
    let tick = Arc::new(AtomicU64::new(0));
    let pace = Duration::from_millis(1);
    let a = new_member(cluster, 1, topic, log, &tick, pace).await;
    let b = new_member(cluster, 2, topic, log, &tick, pace).await;
    wait_until("two members holding 4 locked queues each", || {
        a.locked(topic).len() == 4 && b.locked(topic).len() == 4
    })
    .await;
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_members_queues_move_only_after_the_broker_lock_expires() {
    let topic = "OrderedDeadT";
    let expiry = Duration::from_secs(4);
    let cluster = Cluster::start(topic, "rebalanceLockMaxLiveTime=4000").await;
    let log: Log = Arc::default();
    let (mut a, mut b) = two_members(&cluster, topic, &log).await;
    let held = a.locked(topic);
    a.kill();
    let died = Instant::now();
    let keys: Vec<usize> = (0..100).collect();
    cluster.send_keys(topic, &keys, 0..2).await;
    // The survivor keeps consuming its own queues while the dead member's stay locked.
    wait_until("the survivor consuming its own queues", || {
        log.lock()
            .unwrap()
            .iter()
            .any(|d| d.who == 2 && !held.contains(&d.queue))
    })
    .await;
    let no_early_move = died + expiry - LOCK_INTERVAL - Duration::from_millis(1000);
    while Instant::now() < no_early_move {
        let locked = b.locked(topic);
        assert!(
            locked.is_disjoint(&held),
            "the survivor locked {locked:?} of the dead member's {held:?} before expiry"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_until("every message consumed", || {
        log.lock()
            .unwrap()
            .iter()
            .map(|d| (d.key, d.seq))
            .collect::<BTreeSet<_>>()
            .len()
            == 200
    })
    .await;
    let log = log.lock().unwrap().clone();
    let first = log
        .iter()
        .filter(|d| d.who == 2 && held.contains(&d.queue))
        .map(|d| d.at)
        .min()
        .unwrap();
    let moved = first - died;
    assert!(
        moved >= no_early_move - died,
        "moved after {moved:?}, before the lock could expire"
    );
    assert!(
        moved < expiry + Duration::from_secs(5),
        "moved only after {moved:?}"
    );
    assert!(log.iter().all(|d| d.who == 2), "the dead member consumed");
    check(&log, 100, 2);
    eprintln!("a dead member's queues moved after {moved:?} (lock expiry {expiry:?})");
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_graceful_shutdown_unlocks_and_hands_queues_over_at_once() {
    let topic = "OrderedLeaveT";
    // Java's 60 s expiry: only the unlock can move the queues within the test.
    let cluster = Cluster::start(topic, "").await;
    let log: Log = Arc::default();
    let (mut a, mut b) = two_members(&cluster, topic, &log).await;
    let keys: Vec<usize> = (0..100).collect();
    cluster.send_keys(topic, &keys, 0..2).await;
    let count = |log: &Log| log.lock().unwrap().len();
    wait_until("the first 200 messages", || count(&log) >= 200).await;
    let held = a.locked(topic);
    a.shutdown().await;
    let left = Instant::now();
    wait_until("the survivor locking all 8 queues", || {
        b.locked(topic).len() == 8
    })
    .await;
    let handed = left.elapsed();
    cluster.send_keys(topic, &keys, 2..4).await;
    wait_until("all 400 messages", || count(&log) >= 400).await;
    let log = log.lock().unwrap().clone();
    assert!(
        handed < Duration::from_secs(5),
        "handed over after {handed:?}"
    );
    assert!(log
        .iter()
        .any(|d| d.who == 2 && held.contains(&d.queue) && d.seq >= 2));
    let verdict = check(&log, 100, 4);
    // Idle at shutdown: its committed offsets were complete, nothing is consumed twice.
    assert_eq!(verdict.redelivered, 0, "{verdict:?}");
    assert_eq!(verdict.deliveries, 400, "{verdict:?}");
    eprintln!("a leaving member's queues were locked by the other after {handed:?}");
    b.shutdown().await;
}
