//! The four ways to send with [`Producer`]: sync (wait for the broker's answer), async (a
//! callback gets it), oneway (no answer) and batch (many messages in one request). Sends
//! `count` of each to `topic`, then reads the topic's queue ends and checks that the broker
//! stored every acknowledged message.
//!
//! ```text
//! cargo run -p ferromq-client --example produce -- 127.0.0.1:9876 ExampleTopic 10
//! ```
//!
//! Arguments: name server (default `$FERROMQ_NAMESRV`, else `127.0.0.1:9876`), topic
//! (`ExampleProduce`) and how many of each kind (10). The topic should be new or empty, as
//! the check counts everything in it. Exit status 0 when every send was stored.

mod args;

use ferromq_client::{ClientConfig, Message, Producer, SendStatus};
use std::time::Duration;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let outcome = match args::parse("ExampleProduce", 10) {
        Ok(args) => run(&args.namesrv, &args.topic, args.count).await,
        Err(error) => Err(error),
    };
    args::exit("produce", outcome)
}

async fn run(namesrv: &str, topic: &str, count: usize) -> Result<(), String> {
    let producer = Producer::new("example_producer", ClientConfig::new(namesrv));
    producer.start().await.map_err(|e| e.to_string())?;

    // Sync: each send waits for the broker.
    for i in 0..count {
        let message = Message::new(topic, format!("sync {i}"))
            .with_tags("sync")
            .with_keys([format!("sync-{i}")]);
        let sent = producer.send(message).await.map_err(|e| e.to_string())?;
        if sent.send_status != SendStatus::SendOk {
            return Err(format!("sync send {i}: {:?}", sent.send_status));
        }
    }
    println!("sync: {count} SEND_OK");

    // Async: the callback reports each outcome; a channel collects them.
    let (done, mut outcomes) = tokio::sync::mpsc::unbounded_channel();
    for i in 0..count {
        let done = done.clone();
        let message = Message::new(topic, format!("async {i}")).with_tags("async");
        producer
            .send_async(message, move |outcome| {
                let _ = done.send(outcome.map(|sent| sent.send_status));
            })
            .await;
    }
    for _ in 0..count {
        match outcomes.recv().await {
            Some(Ok(SendStatus::SendOk)) => {}
            other => return Err(format!("async send: {other:?}")),
        }
    }
    println!("async: {count} SEND_OK");

    // Oneway: no answer; the count check below shows whether they arrived.
    for i in 0..count {
        let message = Message::new(topic, format!("oneway {i}")).with_tags("oneway");
        producer
            .send_oneway(message)
            .await
            .map_err(|e| e.to_string())?;
    }
    println!("oneway: {count} sent");

    // Batch: one request, stored as separate messages with consecutive queue offsets.
    let batch = (0..count)
        .map(|i| Message::new(topic, format!("batch {i}")).with_tags("batch"))
        .collect();
    let sent = producer
        .send_batch(batch)
        .await
        .map_err(|e| e.to_string())?;
    println!("batch: {count} in one request, {:?}", sent.send_status);

    // Every queue's end, summed, is what the topic holds; oneway sends may land late.
    let want = i64::try_from(4 * count).map_err(|e| e.to_string())?;
    let queues = producer
        .publish_queues(topic)
        .await
        .map_err(|e| e.to_string())?;
    let mut stored = 0;
    for _ in 0..50 {
        stored = 0;
        for queue in &queues {
            let end = producer.instance().get_max_offset(queue).await;
            stored += end.map_err(|e| e.to_string())?;
        }
        if stored >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    producer.shutdown().await;
    if stored == want {
        println!("stored {stored} of {want} messages sent");
        Ok(())
    } else {
        Err(format!(
            "the topic holds {stored} messages, {want} were sent"
        ))
    }
}
