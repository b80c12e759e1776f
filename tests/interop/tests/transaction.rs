//! Transactional messages through the crates.io RocketMQ client (`rocketmq-client-rust`): its
//! `TransactionMQProducer` sends half messages to a ferromq whose transaction check runs every
//! 300 ms on halves older than one second, at most three times per half. A commit from the
//! local transaction is delivered once to the client's push consumer and never checked; a
//! rollback is never delivered nor checked, even after several check rounds; an `Unknown`
//! answer is checked back and the check's commit delivers once; a producer that keeps
//! answering `Unknown` is asked `transactionCheckMax` times and the message is never delivered;
//! a broker restarted between the half and its end still checks it back and delivers the commit.
//! What is stored under the real topic is read back with ferromq's own remoting client too.

mod common;

use common::{
    bounded, pull_queue, start_push_consumer, unique, wait_until, Client, Ferromq, Received,
    Stored, SEND_TIMEOUT_MS,
};
use rocketmq_client_rust::{
    ClientConfig, LocalTransactionState, SendStatus, TransactionListener, TransactionMQProducer,
    TransactionSendResult,
};
use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::common::message::MessageTrait;
use std::any::Any;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TEST_LIMIT: Duration = Duration::from_secs(90);
/// Halves older than 1 s are checked, every 300 ms, at most 3 times each.
const TX_CONFIG: &str = "transactionTimeOut=1000\ntransactionCheckInterval=300\n\
                         transactionCheckMax=3\nflushConsumerOffsetInterval=200";
/// Comfortably more than `transactionTimeOut` plus two check rounds.
const CHECK_ROUNDS_PASSED: Duration = Duration::from_millis(2_500);
const QUEUES: i32 = 2;

/// What the listener saw of one check.
#[derive(Clone, Debug)]
struct Check {
    topic: String,
    body: String,
    transaction_id: Option<String>,
}

/// A transaction listener answering fixed states and recording what it was asked.
struct Listener {
    execute: LocalTransactionState,
    check: LocalTransactionState,
    executed: Arc<Mutex<Vec<String>>>,
    checks: Arc<Mutex<Vec<Check>>>,
}

impl TransactionListener for Listener {
    fn execute_local_transaction(
        &self,
        message: &dyn MessageTrait,
        _arg: Option<&(dyn Any + Send + Sync)>,
    ) -> LocalTransactionState {
        let body =
            String::from_utf8_lossy(&message.get_body().map(|b| b.to_vec()).unwrap_or_default())
                .into_owned();
        self.executed.lock().expect("not poisoned").push(body);
        self.execute
    }

    fn check_local_transaction(&self, message: &MessageExt) -> LocalTransactionState {
        let check = Check {
            topic: message.topic().to_string(),
            body: String::from_utf8_lossy(&message.body().unwrap_or_default()).into_owned(),
            transaction_id: message.get_transaction_id().map(ToString::to_string),
        };
        self.checks.lock().expect("not poisoned").push(check);
        self.check
    }
}

/// A started transactional producer whose local transaction answers `execute` and whose
/// check answers `check`, with what its listener records.
struct Producer {
    producer: TransactionMQProducer,
    executed: Arc<Mutex<Vec<String>>>,
    checks: Arc<Mutex<Vec<Check>>>,
}

impl Producer {
    async fn start(
        client: &Client,
        ferromq: &Ferromq,
        topic: &str,
        states: (LocalTransactionState, LocalTransactionState),
    ) -> Producer {
        Self::start_configured(client, ferromq, topic, states, ClientConfig::default()).await
    }

    /// As [`Producer::start`], with `client_config` (set before the name server address).
    async fn start_configured(
        client: &Client,
        ferromq: &Ferromq,
        topic: &str,
        (execute, check): (LocalTransactionState, LocalTransactionState),
        client_config: ClientConfig,
    ) -> Producer {
        let executed = Arc::<Mutex<Vec<String>>>::default();
        let checks = Arc::<Mutex<Vec<Check>>>::default();
        let listener = Listener {
            execute,
            check,
            executed: Arc::clone(&executed),
            checks: Arc::clone(&checks),
        };
        let mut producer = TransactionMQProducer::builder(client.runtime())
            .client_config(client_config)
            .producer_group(unique("tx_pg"))
            .name_server_addr(ferromq.namesrv_addr.clone())
            .topics(vec![topic.to_owned()])
            .send_msg_timeout(u32::try_from(SEND_TIMEOUT_MS).unwrap_or(u32::MAX))
            .transaction_listener(listener)
            .build();
        bounded("transactional producer start", producer.start())
            .await
            .expect("the transactional producer starts");
        Producer {
            producer,
            executed,
            checks,
        }
    }

    async fn send(&self, topic: &str, body: &str) -> TransactionSendResult {
        let message = Message::builder()
            .topic(topic)
            .tags("TxTag")
            .keys(vec![format!("key-{body}")])
            .body_slice(body.as_bytes())
            .build_unchecked();
        let sent = bounded(
            "transactional send",
            self.producer
                .send_message_in_transaction::<(), _>(message, None),
        )
        .await
        .expect("the transactional send succeeds");
        let status = sent.send_result.as_ref().map(|r| r.send_status);
        assert_eq!(status, Some(SendStatus::SendOk), "{body}: {sent:?}");
        assert_eq!(
            *self.executed.lock().expect("not poisoned"),
            [body],
            "the local transaction ran once, for {body}"
        );
        sent
    }

    fn checks(&self) -> Vec<Check> {
        self.checks.lock().expect("not poisoned").clone()
    }
}

/// Every copy of `topic` stored in any of its queues, read with a raw pull.
async fn stored(ferromq: &Ferromq, topic: &str) -> Vec<Stored> {
    let mut all = Vec::new();
    for queue in 0..QUEUES {
        let limit = Duration::from_millis(100);
        all.extend(pull_queue(ferromq, ("tx-reader", topic, queue), 0, limit).await);
    }
    all
}

#[test]
fn a_commit_from_the_local_transaction_is_delivered_once_and_never_checked() {
    let ferromq = Ferromq::start_with_config("tx-commit", TX_CONFIG);
    let client = Client::new("tx-commit");
    client.run(TEST_LIMIT, async {
        let topic = unique("TxCommit");
        ferromq.create_topic(&topic, QUEUES).await;
        let received = Received::default();
        let mut consumer = start_push_consumer(
            &client,
            &ferromq,
            &unique("tx_commit_cg"),
            (&topic, "*"),
            "c1",
            &received,
        )
        .await;
        let commit = LocalTransactionState::CommitMessage;
        let mut producer = Producer::start(&client, &ferromq, &topic, (commit, commit)).await;
        let sent = producer.send(&topic, "committed").await;
        assert_eq!(sent.local_transaction_state, Some(commit));

        let arrived = wait_until(Duration::from_secs(30), || !received.is_empty()).await;
        assert!(arrived, "the committed message was not received in 30 s");
        // Past the timeout and a few check rounds: no second copy, no check of an ended half.
        tokio::time::sleep(CHECK_ROUNDS_PASSED).await;
        let all = received.all();
        assert_eq!(all.len(), 1, "delivered exactly once: {all:#?}");
        let seen = &all[0].1;
        assert_eq!(seen.body, "committed");
        assert_eq!(seen.tag.as_deref(), Some("TxTag"));
        assert_eq!(seen.keys.as_deref(), Some("key-committed"));
        assert!(
            producer.checks().is_empty(),
            "an ended transaction was checked: {:?}",
            producer.checks()
        );
        let copies = stored(&ferromq, &topic).await;
        assert_eq!(
            copies.len(),
            1,
            "one copy under the real topic: {copies:#?}"
        );
        assert_eq!(copies[0].body, "committed");
        assert_eq!(copies[0].topic, topic);
        assert_eq!(copies[0].prop("KEYS"), Some("key-committed"));

        bounded("consumer shutdown", consumer.shutdown()).await;
        bounded("producer shutdown", producer.producer.shutdown()).await;
    });
}

#[test]
fn a_rollback_is_never_delivered_nor_checked() {
    let ferromq = Ferromq::start_with_config("tx-rollback", TX_CONFIG);
    let client = Client::new("tx-rollback");
    client.run(TEST_LIMIT, async {
        let topic = unique("TxRollback");
        ferromq.create_topic(&topic, QUEUES).await;
        let received = Received::default();
        let mut consumer = start_push_consumer(
            &client,
            &ferromq,
            &unique("tx_rollback_cg"),
            (&topic, "*"),
            "c1",
            &received,
        )
        .await;
        let rollback = LocalTransactionState::RollbackMessage;
        let commit = LocalTransactionState::CommitMessage;
        // Should the broker wrongly check the rolled-back half, the check answers commit and
        // the message shows up.
        let mut producer = Producer::start(&client, &ferromq, &topic, (rollback, commit)).await;
        let sent = producer.send(&topic, "rolled-back").await;
        assert_eq!(sent.local_transaction_state, Some(rollback));

        // A marker through the same consumer proves it was listening the whole time.
        let mut marker_producer =
            Producer::start(&client, &ferromq, &topic, (commit, commit)).await;
        marker_producer.send(&topic, "marker").await;
        let marked = wait_until(Duration::from_secs(30), || {
            received.body_counts().contains_key("marker")
        })
        .await;
        assert!(marked, "the committed marker was not received in 30 s");
        tokio::time::sleep(CHECK_ROUNDS_PASSED).await;

        let counts = received.body_counts();
        assert!(
            !counts.contains_key("rolled-back"),
            "a rolled-back message was delivered: {counts:?}"
        );
        assert!(
            producer.checks().is_empty(),
            "a rolled-back transaction was checked: {:?}",
            producer.checks()
        );
        let bodies: Vec<String> = stored(&ferromq, &topic)
            .await
            .into_iter()
            .map(|s| s.body)
            .collect();
        assert_eq!(
            bodies,
            ["marker"],
            "only the marker is stored under the topic"
        );

        bounded("consumer shutdown", consumer.shutdown()).await;
        bounded("producer shutdown", producer.producer.shutdown()).await;
        bounded("marker shutdown", marker_producer.producer.shutdown()).await;
    });
}

#[test]
fn an_unknown_transaction_is_checked_back_and_the_checks_commit_is_delivered_once() {
    let ferromq = Ferromq::start_with_config("tx-check", TX_CONFIG);
    let client = Client::new("tx-check");
    client.run(TEST_LIMIT, async {
        let topic = unique("TxCheck");
        ferromq.create_topic(&topic, QUEUES).await;
        let received = Received::default();
        let mut consumer = start_push_consumer(
            &client,
            &ferromq,
            &unique("tx_check_cg"),
            (&topic, "*"),
            "c1",
            &received,
        )
        .await;
        let unknown = LocalTransactionState::Unknown;
        let commit = LocalTransactionState::CommitMessage;
        let mut producer = Producer::start(&client, &ferromq, &topic, (unknown, commit)).await;
        let sent = producer.send(&topic, "checked").await;
        assert_eq!(sent.local_transaction_state, Some(unknown));

        let arrived = wait_until(Duration::from_secs(30), || !received.is_empty()).await;
        assert!(
            arrived,
            "the message committed by the check was not received in 30 s (checks: {:?})",
            producer.checks()
        );
        tokio::time::sleep(CHECK_ROUNDS_PASSED).await;
        let all = received.all();
        assert_eq!(all.len(), 1, "delivered exactly once: {all:#?}");
        assert_eq!(all[0].1.body, "checked");
        assert_eq!(all[0].1.keys.as_deref(), Some("key-checked"));
        let checks = producer.checks();
        assert_eq!(checks.len(), 1, "checked once, then ended: {checks:#?}");
        let check = &checks[0];
        assert_eq!(check.body, "checked");
        assert_eq!(check.topic, topic, "the check names the real topic");
        let sent_id = sent
            .send_result
            .as_ref()
            .and_then(|r| r.transaction_id.clone());
        if let Some(id) = &sent_id {
            assert_eq!(check.transaction_id.as_ref(), Some(id), "{check:?}");
        }
        let copies = stored(&ferromq, &topic).await;
        assert_eq!(
            copies.len(),
            1,
            "one copy under the real topic: {copies:#?}"
        );

        bounded("consumer shutdown", consumer.shutdown()).await;
        bounded("producer shutdown", producer.producer.shutdown()).await;
    });
}

#[test]
fn a_producer_that_never_decides_is_checked_check_max_times_and_never_delivered() {
    let ferromq = Ferromq::start_with_config("tx-never", TX_CONFIG);
    let client = Client::new("tx-never");
    client.run(TEST_LIMIT, async {
        let topic = unique("TxNever");
        ferromq.create_topic(&topic, QUEUES).await;
        let unknown = LocalTransactionState::Unknown;
        let mut producer = Producer::start(&client, &ferromq, &topic, (unknown, unknown)).await;
        producer.send(&topic, "undecided").await;

        // transactionCheckMax=3: three checks, then the half is discarded.
        let checked = wait_until(Duration::from_secs(20), || producer.checks().len() >= 3).await;
        assert!(
            checked,
            "three checks expected in 20 s: {:?}",
            producer.checks()
        );
        tokio::time::sleep(CHECK_ROUNDS_PASSED).await;
        let checks = producer.checks();
        assert_eq!(
            checks.len(),
            3,
            "no check past transactionCheckMax: {checks:#?}"
        );
        assert!(checks.iter().all(|c| c.body == "undecided"), "{checks:#?}");
        let copies = stored(&ferromq, &topic).await;
        assert!(
            copies.is_empty(),
            "an undecided message was delivered: {copies:#?}"
        );
        let discarded = pull_queue(
            &ferromq,
            ("tx-reader", "TRANS_CHECK_MAX_TIME_TOPIC", 0),
            1,
            Duration::from_secs(2),
        )
        .await;
        let bodies: Vec<&str> = discarded.iter().map(|s| s.body.as_str()).collect();
        assert_eq!(
            bodies,
            ["undecided"],
            "the half went to TRANS_CHECK_MAX_TIME_TOPIC"
        );

        bounded("producer shutdown", producer.producer.shutdown()).await;
    });
}

#[test]
fn a_broker_restart_between_the_half_and_its_end_still_delivers_the_checks_commit() {
    // After the restart the broker knows no producer of the group until the client's next
    // heartbeat (10 s at the least); each check round meanwhile counts as a check, as in
    // Java, so the limit is raised well past that.
    let config = format!("{TX_CONFIG}\ntransactionCheckMax=200");
    let mut ferromq = Ferromq::start_with_config("tx-restart", &config);
    let client = Client::new("tx-restart");
    client.run(TEST_LIMIT, async {
        let topic = unique("TxRestart");
        ferromq.create_topic(&topic, QUEUES).await;
        let unknown = LocalTransactionState::Unknown;
        let commit = LocalTransactionState::CommitMessage;
        // Route refresh and heartbeats at the client's minimum, 10 s (30 s by default): after
        // the restart the producer must find the broker's new address and beat to it before
        // the broker knows a live producer to check with.
        let config = ClientConfig {
            poll_name_server_interval: 10_000,
            heartbeat_broker_interval: 10_000,
            ..ClientConfig::default()
        };
        let states = (unknown, commit);
        let mut producer =
            Producer::start_configured(&client, &ferromq, &topic, states, config).await;
        producer.send(&topic, "survivor").await;
        // Well within transactionTimeOut: nothing was checked before the restart.
        ferromq.stop_broker();
        assert!(
            producer.checks().is_empty(),
            "checked before the restart: {:?}",
            producer.checks()
        );
        ferromq.start_broker();

        let mut copies = Vec::new();
        let deadline = std::time::Instant::now() + Duration::from_secs(40);
        while copies.is_empty() && std::time::Instant::now() < deadline {
            copies = stored(&ferromq, &topic).await;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(
            !copies.is_empty(),
            "not delivered in 40 s after the restart (checks: {:?})",
            producer.checks()
        );
        tokio::time::sleep(CHECK_ROUNDS_PASSED).await;
        let copies = stored(&ferromq, &topic).await;
        let bodies: Vec<&str> = copies.iter().map(|s| s.body.as_str()).collect();
        assert_eq!(
            bodies,
            ["survivor"],
            "delivered exactly once after the restart"
        );
        let checks = producer.checks();
        assert_eq!(
            checks.len(),
            1,
            "checked once after the restart: {checks:#?}"
        );
        assert_eq!(checks[0].body, "survivor");

        bounded("producer shutdown", producer.producer.shutdown()).await;
    });
}
