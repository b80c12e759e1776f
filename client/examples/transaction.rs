//! Transactional messages with [`TransactionProducer`]: a half message is stored but hidden
//! until the local transaction commits it; a rolled-back one is never delivered. Sends
//! `count` messages whose transactions commit and `count` whose transactions roll back, then
//! reads the topic from its start and checks that exactly the committed ones are there.
//!
//! ```text
//! cargo run -p ferromq-client --example transaction -- 127.0.0.1:9876 ExampleTransaction
//! ```
//!
//! Arguments: name server (default `$FERROMQ_NAMESRV`, else `127.0.0.1:9876`), topic
//! (`ExampleTransaction`, which should be new) and `count` (1). Exit status 0 when only the
//! committed messages are delivered.

mod args;

use ferromq_client::consumer::{LitePullConsumer, LitePullConsumerConfig};
use ferromq_client::transaction::{
    LocalTransactionState, TransactionListener, TransactionProducer,
};
use ferromq_client::{ClientConfig, Message, MessageExt};
use std::any::Any;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Commits a message whose body says "commit", rolls back any other.
struct ByBody;

impl ByBody {
    fn decide(body: &[u8]) -> LocalTransactionState {
        if body == b"commit" {
            LocalTransactionState::CommitMessage
        } else {
            LocalTransactionState::RollbackMessage
        }
    }
}

impl TransactionListener for ByBody {
    fn execute_local_transaction(
        &self,
        message: &Message,
        _arg: Option<&(dyn Any + Send + Sync)>,
    ) -> LocalTransactionState {
        ByBody::decide(&message.body)
    }

    /// Asked by the broker when it has not heard the outcome of a half message.
    fn check_local_transaction(&self, message: &MessageExt) -> LocalTransactionState {
        ByBody::decide(&message.body)
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let outcome = match args::parse("ExampleTransaction", 1) {
        Ok(args) => run(&args.namesrv, &args.topic, args.count).await,
        Err(error) => Err(error),
    };
    args::exit("transaction", outcome)
}

async fn run(namesrv: &str, topic: &str, count: usize) -> Result<(), String> {
    let config = ClientConfig::new(namesrv);
    let producer = TransactionProducer::new("example_tx", config, Arc::new(ByBody));
    producer.start().await.map_err(|e| e.to_string())?;
    for body in std::iter::repeat_n(["commit", "rollback"], count).flatten() {
        let sent = producer
            .send_message_in_transaction(Message::new(topic, body), None)
            .await
            .map_err(|e| e.to_string())?;
        println!("{body}: {:?}", sent.local_transaction_state);
    }
    producer.shutdown().await;

    let consumer = LitePullConsumer::new(
        ClientConfig::new(namesrv),
        LitePullConsumerConfig::new(&format!("example_tx_reader_{}", std::process::id())),
    );
    // The broker made the topic on the first send and tells the name server at once, but
    // that registration may still be on its way.
    let deadline = Instant::now() + Duration::from_secs(10);
    let queues = loop {
        match consumer.fetch_message_queues(topic).await {
            Ok(queues) => break queues,
            Err(error) if Instant::now() > deadline => return Err(error.to_string()),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    };
    consumer
        .assign(queues.clone())
        .await
        .map_err(|e| e.to_string())?;
    consumer.start().await.map_err(|e| e.to_string())?;
    for queue in &queues {
        consumer.seek(queue, 0).map_err(|e| e.to_string())?;
    }
    // The commit is visible once the broker wrote it; wait a little longer for anything else.
    let mut delivered = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut quiet_until = None;
    while Instant::now() < deadline && quiet_until.is_none_or(|t| Instant::now() < t) {
        for message in consumer.poll(Duration::from_millis(500)).await {
            delivered.push(String::from_utf8_lossy(&message.body).into_owned());
            quiet_until = Some(Instant::now() + Duration::from_secs(2));
        }
    }
    consumer.shutdown().await;
    println!("delivered: {delivered:?}");
    if delivered.len() == count && delivered.iter().all(|body| body == "commit") {
        Ok(())
    } else {
        Err(format!(
            "expected {count} committed messages only, got {delivered:?}"
        ))
    }
}
