//! Transactional messages through the client's `TransactionProducer` against real
//! `ferromq namesrv` and `ferromq broker` processes: commit delivers once, rollback never,
//! an unknown outcome is settled by the broker's check, a producer that never knows is
//! discarded after `transactionCheckMax` checks, the half is invisible until it ends, and a
//! broker restart (SIGTERM or SIGKILL) between half and end still ends right.

mod common;

use common::{BrokerProcess, NamesrvProcess, TempDir};
use ferromq::client::transaction::{
    LocalTransactionState, TransactionListener, TransactionProducer, TransactionSendResult,
};
use ferromq::client::{
    ClientConfig, ClientInstance, Message, MessageExt, MessageQueue, PullStatus,
};
use ferromq::remoting::headers::PullMessageRequestHeader;
use ferromq::store::message::decode_offset_msg_id;
use std::any::Any;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(30);
/// Check every 300 ms, at most 3 times per half.
const TX_CONFIG: &str =
    "transactionCheckInterval=300\ntransactionCheckMax=3\nflushConsumerOffsetInterval=200";
/// Halves are checked after 1 s...
const CHECK_SOON_MS: u64 = 1_000;
/// ...after 3 s where the broker restarts first...
const CHECK_LATER_MS: u64 = 3_000;
/// ...or, where a test holds a transaction open on purpose, not within the test.
const CHECK_NEVER_MS: u64 = 600_000;
/// Long enough for several check rounds to pass over a half.
const SEVERAL_ROUNDS: Duration = Duration::from_millis(2_500);

fn free_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    addr.to_string()
}

/// A name server and one broker on a fixed port (so that it can come back on it).
struct Cluster {
    broker: BrokerProcess,
    namesrv: NamesrvProcess,
    store: PathBuf,
    broker_config: String,
    listen: String,
    _dir: TempDir,
}

impl Cluster {
    /// `timeout_ms` is the broker's `transactionTimeOut`.
    fn start(name: &str, timeout_ms: u64) -> Cluster {
        let namesrv = NamesrvProcess::start("");
        let dir = TempDir::on_disk(name);
        let store = dir.path().join("store");
        let broker_config = format!(
            "brokerName=broker-a\nnamesrvAddr={}\n{TX_CONFIG}\ntransactionTimeOut={timeout_ms}",
            namesrv.addr
        );
        let listen = free_address();
        let broker = BrokerProcess::start_on(&store, &broker_config, &listen);
        Cluster {
            broker,
            namesrv,
            store,
            broker_config,
            listen,
            _dir: dir,
        }
    }

    /// Stops the broker (SIGTERM, or SIGKILL when `kill`) and starts it again on its port.
    fn restart(&mut self, kill: bool) {
        self.restart_and(kill, || {});
    }

    /// Stops the broker (SIGKILL or SIGTERM), calls `stopped` and starts it again.
    fn restart_and(&mut self, kill: bool, stopped: impl FnOnce()) {
        if kill {
            common::kill(&mut self.broker.child);
        } else {
            let status = self.broker.terminate();
            assert!(status.success(), "{status:?}");
        }
        stopped();
        self.broker = BrokerProcess::start_on(&self.store, &self.broker_config, &self.listen);
    }
}

/// What the test's listener does: `execute` answers from `decisions` (waiting for the test
/// when `gate` is set), `check` answers `check_answer` and counts.
struct Listener {
    executing: Mutex<Option<mpsc::Sender<()>>>,
    decisions: Mutex<mpsc::Receiver<LocalTransactionState>>,
    check_answer: LocalTransactionState,
    checks: AtomicUsize,
    /// How long the first check waits before it answers.
    first_check_delay: Mutex<Duration>,
}

impl TransactionListener for Listener {
    fn execute_local_transaction(
        &self,
        _message: &Message,
        _arg: Option<&(dyn Any + Send + Sync)>,
    ) -> LocalTransactionState {
        if let Some(executing) = self.executing.lock().unwrap().as_ref() {
            let _ = executing.send(());
        }
        self.decisions
            .lock()
            .unwrap()
            .recv_timeout(DEADLINE)
            .expect("the test decides the local transaction")
    }

    fn check_local_transaction(&self, _message: &MessageExt) -> LocalTransactionState {
        if self.checks.fetch_add(1, Ordering::SeqCst) == 0 {
            let delay = *self.first_check_delay.lock().unwrap();
            std::thread::sleep(delay);
        }
        self.check_answer
    }
}

struct Harness {
    producer: TransactionProducer,
    listener: Arc<Listener>,
    decide: mpsc::Sender<LocalTransactionState>,
    executing: mpsc::Receiver<()>,
}

async fn started_producer(
    cluster: &Cluster,
    group: &str,
    check_answer: LocalTransactionState,
) -> Harness {
    let (decide, decisions) = mpsc::channel();
    let (executing_tx, executing) = mpsc::channel();
    let listener = Arc::new(Listener {
        executing: Mutex::new(Some(executing_tx)),
        decisions: Mutex::new(decisions),
        check_answer,
        checks: AtomicUsize::new(0),
        first_check_delay: Mutex::new(Duration::ZERO),
    });
    let config = ClientConfig::new(&cluster.namesrv.addr.to_string());
    let producer = TransactionProducer::new(group, config, listener.clone());
    let started = Instant::now();
    while producer.instance().fetch_route("TBW102").await.is_err() {
        assert!(started.elapsed() < DEADLINE, "the broker never registered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    producer.start().await.unwrap();
    Harness {
        producer,
        listener,
        decide,
        executing,
    }
}

/// Sends one transactional message whose local transaction answers `state` at once.
async fn send_deciding(
    harness: &Harness,
    topic: &str,
    body: &str,
    state: LocalTransactionState,
) -> TransactionSendResult {
    harness.decide.send(state).unwrap();
    harness
        .producer
        .send_message_in_transaction(Message::new(topic, body), None)
        .await
        .unwrap()
}

fn pull_header(queue: &MessageQueue, offset: i64) -> PullMessageRequestHeader {
    common::pull_header("tx-test-reader", &queue.topic, queue.queue_id, offset)
}

/// Every message stored in `queue` now (bounded).
async fn stored(instance: &ClientInstance, queue: &MessageQueue) -> Vec<MessageExt> {
    let addr = instance.master_addr_of(queue).await.unwrap();
    let mut messages = Vec::new();
    let mut next = 0;
    for _ in 0..1_000 {
        let result = instance
            .pull(&addr, pull_header(queue, next), Duration::from_secs(5))
            .await;
        let Ok(result) = result else {
            // Right after a restart the connection may still be the dead one.
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        if result.status != PullStatus::Found {
            return messages;
        }
        next = result.next_begin_offset;
        messages.extend(result.messages);
    }
    panic!("{queue} never ended");
}

/// Waits until `queue` holds exactly `count` messages with `body` (more fails at once).
async fn wait_delivered(
    instance: &ClientInstance,
    queue: &MessageQueue,
    body: &str,
    count: usize,
) -> Vec<MessageExt> {
    let started = Instant::now();
    loop {
        let found: Vec<MessageExt> = stored(instance, queue)
            .await
            .into_iter()
            .filter(|m| m.body == body.as_bytes())
            .collect();
        assert!(found.len() <= count, "{} copies of {body}", found.len());
        if found.len() == count {
            return found;
        }
        assert!(started.elapsed() < DEADLINE, "{body} not delivered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn delivered_count(instance: &ClientInstance, queue: &MessageQueue, body: &str) -> usize {
    stored(instance, queue)
        .await
        .iter()
        .filter(|m| m.body == body.as_bytes())
        .count()
}

fn system_queue(topic: &str) -> MessageQueue {
    MessageQueue::new(topic, "broker-a", 0)
}

#[test]
fn commit_delivers_exactly_once_and_the_uniq_key_finds_the_delivered_copy() {
    let cluster = Cluster::start("tx-commit", CHECK_SOON_MS);
    common::runtime().block_on(async {
        let harness =
            started_producer(&cluster, "tx_commit_pg", LocalTransactionState::Unknown).await;
        let sent = send_deciding(
            &harness,
            "TxCommitT",
            "paid",
            LocalTransactionState::CommitMessage,
        )
        .await;
        assert_eq!(
            sent.local_transaction_state,
            LocalTransactionState::CommitMessage
        );
        assert_eq!(
            sent.transaction_id.as_deref(),
            Some(sent.send_result.msg_id.as_str())
        );
        let instance = harness.producer.instance();
        let queue = &sent.send_result.message_queue;
        let found = wait_delivered(instance, queue, "paid", 1).await;
        let copy = &found[0];
        assert_eq!(copy.msg_id(), sent.send_result.msg_id);
        // As Java's broker stores a commit: the half's properties as they were.
        assert_eq!(copy.property("TRAN_MSG"), Some("true"));
        assert!(copy.property("REAL_TOPIC").is_some());
        assert_eq!(copy.property("PGROUP"), Some("tx_commit_pg"));
        assert_eq!(copy.sys_flag & 0xC, 0x8, "commit type");
        let (_, half_offset) = decode_offset_msg_id(&sent.send_result.offset_msg_id).unwrap();
        assert_eq!(copy.prepared_transaction_offset, half_offset);
        assert_ne!(copy.commit_log_offset, half_offset);
        // Several check rounds later: still once, and nobody was asked.
        tokio::time::sleep(SEVERAL_ROUNDS).await;
        assert_eq!(delivered_count(instance, queue, "paid").await, 1);
        assert_eq!(harness.listener.checks.load(Ordering::SeqCst), 0);
        // QUERY_MESSAGE by UNIQ_KEY in the real topic finds the delivered copy.
        let started = Instant::now();
        let queried = loop {
            let queried = instance
                .query_message_by_uniq_key("TxCommitT", &sent.send_result.msg_id)
                .await
                .unwrap();
            if !queried.is_empty() {
                break queried;
            }
            assert!(started.elapsed() < DEADLINE, "never indexed");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(queried.len(), 1);
        assert_eq!(queried[0].topic, "TxCommitT");
        assert_eq!(queried[0].body, b"paid");
        harness.producer.shutdown().await;
    });
}

#[test]
fn the_half_is_invisible_until_the_transaction_commits() {
    let cluster = Cluster::start("tx-invisible", CHECK_NEVER_MS);
    let rt = common::runtime();
    let harness = rt.block_on(started_producer(
        &cluster,
        "tx_invisible_pg",
        LocalTransactionState::Unknown,
    ));
    let producer = harness.producer.clone();
    let sending = rt.spawn(async move {
        producer
            .send_message_in_transaction(Message::new("TxInvisibleT", "pending"), None)
            .await
            .unwrap()
    });
    harness.executing.recv_timeout(DEADLINE).unwrap();
    rt.block_on(async {
        let instance = harness.producer.instance();
        let half = system_queue("RMQ_SYS_TRANS_HALF_TOPIC");
        let pending = wait_delivered(instance, &half, "pending", 1).await;
        assert_eq!(pending[0].property("REAL_TOPIC"), Some("TxInvisibleT"));
        assert_eq!(pending[0].property("TRAN_MSG"), Some("true"));
        let mut visible = 0;
        for queue in harness
            .producer
            .producer()
            .publish_queues("TxInvisibleT")
            .await
            .unwrap()
        {
            visible += delivered_count(instance, &queue, "pending").await;
        }
        assert_eq!(visible, 0, "nothing in the real topic before the end");
    });
    harness
        .decide
        .send(LocalTransactionState::CommitMessage)
        .unwrap();
    rt.block_on(async {
        let sent = sending.await.unwrap();
        let instance = harness.producer.instance();
        wait_delivered(instance, &sent.send_result.message_queue, "pending", 1).await;
        harness.producer.shutdown().await;
    });
}

#[test]
fn rollback_never_delivers() {
    let cluster = Cluster::start("tx-rollback", CHECK_SOON_MS);
    common::runtime().block_on(async {
        let harness = started_producer(
            &cluster,
            "tx_rollback_pg",
            LocalTransactionState::CommitMessage,
        )
        .await;
        let sent = send_deciding(
            &harness,
            "TxRollbackT",
            "cancelled",
            LocalTransactionState::RollbackMessage,
        )
        .await;
        // A committed message after it, on the same queue, proves END_TRANSACTION went
        // through in order before the rolled-back one is looked for.
        harness
            .decide
            .send(LocalTransactionState::CommitMessage)
            .unwrap();
        let marker = harness
            .producer
            .send_message_in_transaction(Message::new("TxRollbackT", "marker"), None)
            .await
            .unwrap();
        let instance = harness.producer.instance();
        wait_delivered(instance, &marker.send_result.message_queue, "marker", 1).await;
        tokio::time::sleep(SEVERAL_ROUNDS).await;
        let queue = &sent.send_result.message_queue;
        assert_eq!(delivered_count(instance, queue, "cancelled").await, 0);
        // The check never asked about it: the rollback's op message closed the half.
        assert_eq!(harness.listener.checks.load(Ordering::SeqCst), 0);
        harness.producer.shutdown().await;
    });
}

#[test]
fn unknown_is_settled_by_the_check_and_then_delivered_once() {
    let cluster = Cluster::start("tx-unknown", CHECK_SOON_MS);
    common::runtime().block_on(async {
        let harness = started_producer(
            &cluster,
            "tx_unknown_pg",
            LocalTransactionState::CommitMessage,
        )
        .await;
        let sent = send_deciding(
            &harness,
            "TxUnknownT",
            "later",
            LocalTransactionState::Unknown,
        )
        .await;
        assert_eq!(sent.local_transaction_state, LocalTransactionState::Unknown);
        let instance = harness.producer.instance();
        let queue = &sent.send_result.message_queue;
        let found = wait_delivered(instance, queue, "later", 1).await;
        assert_eq!(found[0].msg_id(), sent.send_result.msg_id);
        assert!(harness.listener.checks.load(Ordering::SeqCst) >= 1);
        tokio::time::sleep(SEVERAL_ROUNDS).await;
        assert_eq!(delivered_count(instance, queue, "later").await, 1);
        // One check, or two when the first answer took longer than transactionTimeOut on a
        // loaded machine; never a check after the commit was stored.
        let checks = harness.listener.checks.load(Ordering::SeqCst);
        assert!((1..=2).contains(&checks), "{checks} checks");
        tokio::time::sleep(SEVERAL_ROUNDS).await;
        assert_eq!(harness.listener.checks.load(Ordering::SeqCst), checks);
        harness.producer.shutdown().await;
    });
}

/// A check answered after `transactionTimeOut` is asked again; both answers commit, and the
/// message is delivered once (Java delivers it twice).
#[test]
fn a_transaction_committed_by_two_late_check_answers_is_delivered_once() {
    for round in 0..3 {
        let cluster = Cluster::start("tx-late-answer", CHECK_SOON_MS);
        common::runtime().block_on(async {
            let harness = started_producer(
                &cluster,
                &format!("tx_late_pg_{round}"),
                LocalTransactionState::CommitMessage,
            )
            .await;
            *harness.listener.first_check_delay.lock().unwrap() = Duration::from_millis(1_800);
            let body = format!("late-{round}");
            let sent =
                send_deciding(&harness, "TxLateT", &body, LocalTransactionState::Unknown).await;
            let instance = harness.producer.instance();
            let queue = &sent.send_result.message_queue;
            let started = Instant::now();
            while harness.listener.checks.load(Ordering::SeqCst) < 2 {
                assert!(
                    started.elapsed() < DEADLINE,
                    "the half was not checked again"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            wait_delivered(instance, queue, &body, 1).await;
            tokio::time::sleep(SEVERAL_ROUNDS).await;
            assert_eq!(delivered_count(instance, queue, &body).await, 1);
            harness.producer.shutdown().await;
        });
    }
}

#[test]
fn a_producer_that_never_knows_is_discarded_after_the_max_checks() {
    let cluster = Cluster::start("tx-discard", CHECK_SOON_MS);
    common::runtime().block_on(async {
        let harness =
            started_producer(&cluster, "tx_discard_pg", LocalTransactionState::Unknown).await;
        let sent = send_deciding(
            &harness,
            "TxDiscardT",
            "limbo",
            LocalTransactionState::Unknown,
        )
        .await;
        let instance = harness.producer.instance();
        // transactionCheckMax=3: three checks, then the half moves to
        // TRANS_CHECK_MAX_TIME_TOPIC.
        let discarded = system_queue("TRANS_CHECK_MAX_TIME_TOPIC");
        let started = Instant::now();
        let moved = loop {
            let moved: Vec<MessageExt> = stored(instance, &discarded)
                .await
                .into_iter()
                .filter(|m| m.body == b"limbo")
                .collect();
            if !moved.is_empty() {
                break moved;
            }
            assert!(started.elapsed() < DEADLINE, "never discarded");
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        assert_eq!(moved.len(), 1);
        assert_eq!(moved[0].property("TRANSACTION_CHECK_TIMES"), Some("3"));
        assert_eq!(moved[0].property("REAL_TOPIC"), Some("TxDiscardT"));
        assert_eq!(harness.listener.checks.load(Ordering::SeqCst), 3);
        tokio::time::sleep(SEVERAL_ROUNDS).await;
        assert_eq!(harness.listener.checks.load(Ordering::SeqCst), 3);
        let queue = &sent.send_result.message_queue;
        assert_eq!(delivered_count(instance, queue, "limbo").await, 0);
        harness.producer.shutdown().await;
    });
}

/// Half stored, broker restarted (SIGTERM or SIGKILL) while the local transaction runs,
/// then the commit reaches the new broker process: delivered once.
fn commit_after_restart(name: &str, kill: bool) {
    let mut cluster = Cluster::start(name, CHECK_NEVER_MS);
    let rt = common::runtime();
    let harness = rt.block_on(started_producer(
        &cluster,
        "tx_restart_pg",
        LocalTransactionState::Unknown,
    ));
    let producer = harness.producer.clone();
    let sending = rt.spawn(async move {
        producer
            .send_message_in_transaction(Message::new("TxRestartT", "survivor"), None)
            .await
            .unwrap()
    });
    harness.executing.recv_timeout(DEADLINE).unwrap();
    cluster.restart(kill);
    harness
        .decide
        .send(LocalTransactionState::CommitMessage)
        .unwrap();
    rt.block_on(async {
        let sent = sending.await.unwrap();
        let instance = harness.producer.instance();
        let queue = &sent.send_result.message_queue;
        wait_delivered(instance, queue, "survivor", 1).await;
        tokio::time::sleep(SEVERAL_ROUNDS).await;
        assert_eq!(delivered_count(instance, queue, "survivor").await, 1);
        assert_eq!(harness.listener.checks.load(Ordering::SeqCst), 0);
        harness.producer.shutdown().await;
    });
}

#[test]
fn a_commit_after_a_broker_sigterm_restart_delivers_once() {
    commit_after_restart("tx-restart-term", false);
}

#[test]
fn a_commit_after_a_broker_sigkill_restart_delivers_once() {
    commit_after_restart("tx-restart-kill", true);
}

/// Half stored and left unknown, broker restarted: the new process checks it and delivers.
fn check_after_restart(name: &str, kill: bool) {
    let mut cluster = Cluster::start(name, CHECK_LATER_MS);
    let rt = common::runtime();
    let harness = rt.block_on(started_producer(
        &cluster,
        "tx_recheck_pg",
        LocalTransactionState::CommitMessage,
    ));
    let sent = rt.block_on(async {
        let producer = harness.producer.clone();
        harness.decide.send(LocalTransactionState::Unknown).unwrap();
        producer
            .send_message_in_transaction(Message::new("TxRecheckT", "resumed"), None)
            .await
            .unwrap()
    });
    harness.executing.recv_timeout(DEADLINE).unwrap();
    // Counted before the new process starts: on a slow machine it may be up only after the
    // half's check age has passed, and then asks at once.
    cluster.restart_and(kill, || {
        assert_eq!(
            harness.listener.checks.load(Ordering::SeqCst),
            0,
            "the old process asked already"
        );
    });
    rt.block_on(async {
        let instance = harness.producer.instance();
        // The new process knows the producer once it heartbeats again.
        let started = Instant::now();
        while instance.send_heartbeat_to_all_brokers().await.is_err() {
            assert!(
                started.elapsed() < DEADLINE,
                "no heartbeat after the restart"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let queue = &sent.send_result.message_queue;
        wait_delivered(instance, queue, "resumed", 1).await;
        assert!(harness.listener.checks.load(Ordering::SeqCst) >= 1);
        tokio::time::sleep(SEVERAL_ROUNDS).await;
        assert_eq!(delivered_count(instance, queue, "resumed").await, 1);
        harness.producer.shutdown().await;
    });
}

#[test]
fn an_unknown_half_is_checked_and_delivered_after_a_sigterm_restart() {
    check_after_restart("tx-recheck-term", false);
}

#[test]
fn an_unknown_half_is_checked_and_delivered_after_a_sigkill_restart() {
    check_after_restart("tx-recheck-kill", true);
}
