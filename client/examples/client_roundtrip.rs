//! A produce/consume round trip through ferromq's client library against any
//! RocketMQ-protocol name server and broker: sends `--messages` messages with the producer
//! (sync sends, keys and tags), then consumes them with a push consumer of a fresh group
//! from the first offset and checks that every acknowledged message id arrived.
//!
//! ```text
//! cargo run --release -p ferromq-client --example client_roundtrip -- \
//!     --namesrv 127.0.0.1:9876 --messages 1000
//! ```
//!
//! Exit status 0 when every acknowledged message was consumed with its body intact, 1
//! otherwise. `scripts/interop-rocketmq-rust.sh` runs it against the crates.io rocketmq-rust
//! broker.

use ferromq_client::consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer, PushConsumerConfig,
};
use ferromq_client::{ClientConfig, Message, MessageExt, Producer};
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

struct Args {
    namesrv: String,
    topic: String,
    messages: usize,
    size: usize,
    timeout: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        namesrv: "127.0.0.1:9876".to_owned(),
        topic: "RoundTripTopic".to_owned(),
        messages: 1000,
        size: 1024,
        timeout: Duration::from_secs(60),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let number = || {
            value
                .parse::<u64>()
                .map_err(|e| format!("{flag} {value}: {e}"))
        };
        match flag.as_str() {
            "--namesrv" | "-n" => args.namesrv = value.clone(),
            "--topic" | "-t" => args.topic = value.clone(),
            "--messages" => {
                args.messages = usize::try_from(number()?).map_err(|e| e.to_string())?
            }
            "--size" => args.size = usize::try_from(number()?).map_err(|e| e.to_string())?,
            "--timeout-secs" => args.timeout = Duration::from_secs(number()?),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(args)
}

/// What the listener saw: message id → (body, times delivered).
type Received = Arc<Mutex<HashMap<String, (Vec<u8>, usize)>>>;

fn body_of(index: usize, size: usize) -> Vec<u8> {
    let mut body = format!("roundtrip-{index}-").into_bytes();
    body.resize(size.max(body.len()), b'x');
    body
}

async fn run(args: Args) -> Result<(), String> {
    let producer = Producer::new("roundtrip_producer", ClientConfig::new(&args.namesrv));
    producer
        .start()
        .await
        .map_err(|e| format!("producer start: {e}"))?;
    let mut sent: HashMap<String, Vec<u8>> = HashMap::new();
    let started = Instant::now();
    for index in 0..args.messages {
        let body = body_of(index, args.size);
        let message = Message::new(&args.topic, body.clone())
            .with_tags("RoundTrip")
            .with_keys([format!("roundtrip-key-{index}")]);
        match producer.send(message).await {
            Ok(result) => {
                sent.insert(result.msg_id.clone(), body);
            }
            Err(error) => eprintln!("send {index}: {error}"),
        }
    }
    let produce_secs = started.elapsed().as_secs_f64();
    println!(
        "produced {} of {} in {produce_secs:.2} s ({:.0} msgs/s)",
        sent.len(),
        args.messages,
        sent.len() as f64 / produce_secs.max(1e-9)
    );
    producer.shutdown().await;

    let received: Received = Arc::default();
    let group = format!("roundtrip_{}", std::process::id());
    let mut config = PushConsumerConfig::new(&group);
    config.consume_from_where = ConsumeFromWhere::FirstOffset;
    let consumer = PushConsumer::new(ClientConfig::new(&args.namesrv), config);
    consumer
        .subscribe(&args.topic, "RoundTrip")
        .map_err(|e| format!("subscribe: {e}"))?;
    let sink = Arc::clone(&received);
    consumer.register_message_listener_concurrently(move |messages: &[MessageExt]| {
        if let Ok(mut seen) = sink.lock() {
            for message in messages {
                let entry = seen
                    .entry(message.msg_id())
                    .or_insert_with(|| (message.body.clone(), 0));
                entry.1 += 1;
            }
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let started = Instant::now();
    consumer
        .start()
        .await
        .map_err(|e| format!("consumer start: {e}"))?;
    let deadline = started + args.timeout;
    loop {
        let done = received
            .lock()
            .map(|seen| sent.keys().all(|id| seen.contains_key(id)))
            .unwrap_or(false);
        if done || Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let consume_secs = started.elapsed().as_secs_f64();
    consumer.shutdown().await;
    let seen = received
        .lock()
        .map_err(|_| "listener panicked".to_owned())?;
    let missing = sent.keys().filter(|id| !seen.contains_key(*id)).count();
    let corrupt = sent
        .iter()
        .filter(|(id, body)| seen.get(*id).is_some_and(|(got, _)| got != *body))
        .count();
    let redelivered: usize = seen.values().map(|(_, times)| times - 1).sum();
    println!(
        "consumed {} of {} in {consume_secs:.2} s (incl. rebalance); missing {missing}, \
         corrupt {corrupt}, redelivered {redelivered}",
        sent.keys().filter(|id| seen.contains_key(*id)).count(),
        sent.len()
    );
    if sent.len() != args.messages || missing > 0 || corrupt > 0 {
        return Err("round trip incomplete".to_owned());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(error) => {
            eprintln!("client_roundtrip: {error}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("client_roundtrip: tokio: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("client_roundtrip: {error}");
            ExitCode::FAILURE
        }
    }
}
