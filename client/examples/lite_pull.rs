//! Consuming at the application's own pace with [`LitePullConsumer`]: sends `count`
//! messages, then a consumer of a fresh group subscribes to the topic from its first offset,
//! calls `poll()` until it has seen every message id it was acknowledged, and commits.
//!
//! ```text
//! cargo run -p ferromq-client --example lite_pull -- 127.0.0.1:9876 ExampleLitePull 100
//! ```
//!
//! Arguments: name server (default `$FERROMQ_NAMESRV`, else `127.0.0.1:9876`), topic
//! (`ExampleLitePull`) and message count (100). Exit status 0 when every sent message was
//! polled with its body, within 60 s.

mod args;

use ferromq_client::consumer::{ConsumeFromWhere, LitePullConsumer, LitePullConsumerConfig};
use ferromq_client::{ClientConfig, Message, Producer};
use std::collections::HashMap;
use std::time::{Duration, Instant};

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let outcome = match args::parse("ExampleLitePull", 100) {
        Ok(args) => run(&args.namesrv, &args.topic, args.count).await,
        Err(error) => Err(error),
    };
    args::exit("lite_pull", outcome)
}

async fn run(namesrv: &str, topic: &str, count: usize) -> Result<(), String> {
    let producer = Producer::new("example_lite_pull_producer", ClientConfig::new(namesrv));
    producer.start().await.map_err(|e| e.to_string())?;
    let mut sent = HashMap::new();
    for i in 0..count {
        let body = format!("message {i}");
        let message = Message::new(topic, body.clone());
        let result = producer.send(message).await.map_err(|e| e.to_string())?;
        sent.insert(result.msg_id, body);
    }
    producer.shutdown().await;
    println!("sent {count} messages to {topic}");

    let group = format!("example_lite_pull_{}", std::process::id());
    let mut config = LitePullConsumerConfig::new(&group);
    config.consume_from_where = ConsumeFromWhere::FirstOffset;
    let consumer = LitePullConsumer::new(ClientConfig::new(namesrv), config);
    consumer.subscribe(topic, "*").map_err(|e| e.to_string())?;
    consumer.start().await.map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut polled = 0;
    while !sent.is_empty() && Instant::now() < deadline {
        for message in consumer.poll(Duration::from_secs(1)).await {
            polled += 1;
            if let Some(body) = sent.remove(&message.msg_id()) {
                if body.as_bytes() != message.body.as_slice() {
                    return Err(format!("{}: the body changed", message.msg_id()));
                }
            }
        }
    }
    consumer.commit_sync().await;
    consumer.shutdown().await;
    println!("polled {polled} messages; {} sent ones missing", sent.len());
    if sent.is_empty() {
        Ok(())
    } else {
        Err(format!("{} sent messages were never polled", sent.len()))
    }
}
