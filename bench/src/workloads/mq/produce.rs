//! The senders of `produce` and `e2e`: SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE with Java's
//! batch body layout) to the writable queues of every master, round robin.

use super::stats::{Recorder, Side};
use super::{wall_ns, Mode, MqArgs, Target};
use ferromq::broker::batch::BatchEntry;
use ferromq::client::message::property;
use ferromq::client::msg_id::create_uniq_id;
use ferromq::remoting::client::{ClientError, RemotingClient};
use ferromq::remoting::headers::SendMessageRequestHeaderV2;
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode};
use ferromq::store::message::{NAME_VALUE_SEPARATOR, PROPERTY_SEPARATOR};
use futures::stream::{FuturesUnordered, StreamExt};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Properties of every message: `WAIT=true`, as Java's `Message` sets by default (and a
/// `UNIQ_KEY` of its own, see [`properties`]).
const PROPERTIES: &str = "WAIT\u{1}true\u{2}";
/// The producer group named in the requests.
const PRODUCER_GROUP: &str = "BenchmarkProducer";

/// Runs `args.threads` senders until `deadline` or until `--messages` were handed out.
pub async fn run(
    targets: Arc<Vec<Target>>,
    args: &MqArgs,
    side: Arc<Side>,
    start: Instant,
    deadline: Instant,
) {
    let queues: Vec<(usize, i32)> = targets
        .iter()
        .enumerate()
        .flat_map(|(index, t)| (0..t.broker.write_queues).map(move |q| (index, q)))
        .collect();
    if queues.is_empty() {
        side.error("no writable queue in the route".to_owned());
        return;
    }
    let shared = Arc::new(Shared {
        targets,
        queues,
        remaining: args.messages.map(AtomicU64::new),
        args: args.clone(),
        side,
        deadline,
    });
    // Open loop: the intended send times come from a thread of their own (see `pace`).
    let (pacer, schedules) = match args.rate {
        Some(rate) => match super::pace::start(rate, args.batch, args.threads, start, deadline) {
            Ok((pacer, schedules)) => (Some(pacer), schedules),
            Err(error) => {
                shared
                    .side
                    .error(format!("starting the pacer thread: {error}"));
                return;
            }
        },
        None => (None, Vec::new()),
    };
    let mut schedules = schedules.into_iter();
    let mut senders = Vec::new();
    for index in 0..args.threads {
        senders.push(tokio::spawn(sender(
            shared.clone(),
            index,
            schedules.next(),
        )));
    }
    for sender in senders {
        if let Err(error) = sender.await {
            tracing::error!(%error, "sender task failed");
        }
    }
    if let Some(pacer) = pacer {
        // Every sender is gone, so it ends at its next request at the latest.
        let joined = tokio::task::spawn_blocking(move || pacer.join()).await;
        if !matches!(joined, Ok(Ok(()))) {
            tracing::error!("the pacer thread failed");
        }
    }
}

struct Shared {
    targets: Arc<Vec<Target>>,
    queues: Vec<(usize, i32)>,
    remaining: Option<AtomicU64>,
    args: MqArgs,
    side: Arc<Side>,
    deadline: Instant,
}

impl Shared {
    /// Takes up to one batch of the message budget; 0 when it is spent.
    fn take(&self) -> u64 {
        let want = self.args.batch as u64;
        let Some(remaining) = &self.remaining else {
            return want;
        };
        let mut current = remaining.load(Ordering::Relaxed);
        loop {
            let take = current.min(want);
            if take == 0 {
                return 0;
            }
            match remaining.compare_exchange_weak(
                current,
                current - take,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return take,
                Err(actual) => current = actual,
            }
        }
    }
}

/// The outcome of one request: the answer (or failure), its stamp, messages and bytes.
type Done = (Result<RemotingCommand, ClientError>, Instant, u64, u64);

/// One sender: closed loop, or with `schedule` (`--rate`) a request at each intended time it
/// receives, stamped with that time.
async fn sender(
    shared: Arc<Shared>,
    index: usize,
    mut schedule: Option<tokio::sync::mpsc::Receiver<Instant>>,
) {
    let args = &shared.args;
    let timeout = Duration::from_millis(args.timeout_ms);
    let slots = match args.mode {
        Mode::Sync => 1,
        Mode::Async => args.in_flight,
        Mode::Oneway => 0,
    };
    let mut next_queue = index;
    let mut in_flight = FuturesUnordered::new();
    let mut recorder = shared.side.recorder();
    loop {
        while in_flight.len() >= slots.max(1) && args.mode != Mode::Oneway {
            match in_flight.next().await {
                Some(done) => settle(&mut recorder, done),
                None => break,
            }
        }
        let intended = match &mut schedule {
            // Pace; answers keep arriving meanwhile.
            Some(schedule) => loop {
                tokio::select! {
                    due = schedule.recv() => break due,
                    Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                        settle(&mut recorder, done);
                    }
                }
            },
            None => None,
        };
        if schedule.is_some() && intended.is_none() {
            break; // The schedule ended.
        }
        let now = Instant::now();
        if now >= shared.deadline {
            break;
        }
        let count = shared.take();
        if count == 0 {
            break;
        }
        let stamp = intended.unwrap_or(now);
        let (target_index, queue_id) = shared.queues[next_queue % shared.queues.len()];
        next_queue = next_queue.wrapping_add(1);
        let target = &shared.targets[target_index];
        let client = target.connections[index % target.connections.len()].clone();
        let request = request(args, queue_id, count, stamp);
        let bytes = count * args.size as u64;
        shared.side.sent(count);
        if args.mode == Mode::Oneway {
            match client.oneway(request).await {
                Ok(()) => recorder.record(Instant::now(), count, bytes, None),
                Err(error) => shared.side.error(format!("connection: {error}")),
            }
            continue;
        }
        in_flight.push(send(client, request, timeout, stamp, count, bytes));
    }
    while let Some(done) = in_flight.next().await {
        settle(&mut recorder, done);
    }
}

async fn send(
    client: RemotingClient,
    request: RemotingCommand,
    timeout: Duration,
    stamp: Instant,
    count: u64,
    bytes: u64,
) -> Done {
    (
        client.request_timeout(request, timeout).await,
        stamp,
        count,
        bytes,
    )
}

/// Counts one answer: acknowledged (SUCCESS, or stored with a flush/slave warning, as Java's
/// `SendStatus` reports them) or an error by kind.
fn settle(recorder: &mut Recorder, (outcome, stamp, count, bytes): Done) {
    let now = Instant::now();
    match outcome {
        Ok(response) => {
            let code = response.response_code();
            let stored_with_warning = [
                ResponseCode::FLUSH_DISK_TIMEOUT,
                ResponseCode::SLAVE_NOT_AVAILABLE,
                ResponseCode::FLUSH_SLAVE_TIMEOUT,
            ]
            .contains(&code);
            if code == ResponseCode::SUCCESS || stored_with_warning {
                recorder.record(
                    now,
                    count,
                    bytes,
                    Some(now.saturating_duration_since(stamp)),
                );
            }
            if code != ResponseCode::SUCCESS {
                let remark = response.remark.unwrap_or_default();
                let remark: String = remark.chars().take(80).collect();
                let prefix = if stored_with_warning {
                    "stored, but "
                } else {
                    ""
                };
                recorder.side().error(format!("{prefix}{code}: {remark}"));
            }
        }
        Err(ClientError::Timeout(_)) => recorder.side().error("timeout".to_owned()),
        Err(error) => recorder.side().error(format!("connection: {error}")),
    }
}

/// Messages made so far, for `--hit-one-in`.
static MESSAGE_NUMBER: AtomicU64 = AtomicU64::new(0);

/// One message's properties: `WAIT`, the tag and property of `--hit-one-in`, and a new
/// `UNIQ_KEY` as a RocketMQ client sets on each message (Java's `MessageClientIDSetter`)
/// unless `--no-uniq-key`.
fn properties(args: &MqArgs) -> String {
    let mut properties = String::with_capacity(PROPERTIES.len() + 80);
    properties.push_str(PROPERTIES);
    if let Some(one_in) = args.hit_one_in {
        let hit = MESSAGE_NUMBER
            .fetch_add(1, Ordering::Relaxed)
            .is_multiple_of(one_in.max(1));
        let (tag, value) = if hit { ("hit", "1") } else { ("miss", "0") };
        for (name, value) in [("TAGS", tag), ("hit", value)] {
            properties.push_str(name);
            properties.push(NAME_VALUE_SEPARATOR);
            properties.push_str(value);
            properties.push(PROPERTY_SEPARATOR);
        }
    }
    if args.no_uniq_key {
        return properties;
    }
    properties.push_str(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX);
    properties.push(NAME_VALUE_SEPARATOR);
    properties.push_str(&create_uniq_id());
    properties.push(PROPERTY_SEPARATOR);
    properties
}

/// Timer messages made so far, for `--deliver-window`.
static TIMER_NUMBER: AtomicU64 = AtomicU64::new(0);

/// `--deliver-after`: a single send's `TIMER_DELIVER_MS`, `born_ms` plus the delay plus its
/// place in `--deliver-window` (consecutive messages a prime's steps apart, so every part of
/// the window fills at the same pace).
fn with_timer(args: &MqArgs, mut properties: String, born_ms: i64) -> String {
    let Some(after) = args.deliver_after.filter(|_| args.batch <= 1) else {
        return properties;
    };
    let n = TIMER_NUMBER.fetch_add(1, Ordering::Relaxed);
    let spread = match args.deliver_window {
        0 => 0,
        window => n.wrapping_mul(7919) % window,
    };
    let at = born_ms.saturating_add(i64::try_from(after + spread).unwrap_or(i64::MAX));
    properties.push_str(property::TIMER_DELIVER_MS);
    properties.push(NAME_VALUE_SEPARATOR);
    properties.push_str(&at.to_string());
    properties.push(PROPERTY_SEPARATOR);
    properties
}

/// One message body: the stamp's wall-clock nanoseconds in the first 8 bytes, then filler.
fn body(size: usize, stamp: Instant) -> Vec<u8> {
    let mut body: Vec<u8> = (0..size).map(|i| b'a' + (i % 26) as u8).collect();
    if size >= 8 {
        body[..8].copy_from_slice(&wall_ns(stamp).to_be_bytes());
    }
    body
}

fn request(args: &MqArgs, queue_id: i32, count: u64, stamp: Instant) -> RemotingCommand {
    let batch = args.batch > 1;
    let born_ms = i64::try_from(wall_ns(stamp) / 1_000_000).unwrap_or(i64::MAX);
    let header = SendMessageRequestHeaderV2 {
        a: PRODUCER_GROUP.to_owned(),
        b: args.topic.clone(),
        c: "TBW102".to_owned(),
        d: 4,
        e: queue_id,
        f: 0,
        g: born_ms,
        h: 0,
        i: Some(with_timer(args, properties(args), born_ms)),
        j: Some(0),
        k: Some(false),
        l: None,
        m: Some(batch),
        n: None,
    };
    let code = if batch {
        RequestCode::SEND_BATCH_MESSAGE
    } else {
        RequestCode::SEND_MESSAGE_V2
    };
    let mut request = RemotingCommand::request_with_header(code, &header);
    request.body = if batch {
        // Java's MessageDecoder.encodeMessages: the encoded messages back to back.
        let mut out = Vec::with_capacity(count as usize * (args.size + 40));
        for _ in 0..count {
            BatchEntry {
                flag: 0,
                body: body(args.size, stamp),
                properties: properties(args).into_bytes(),
            }
            .encode(&mut out);
        }
        out
    } else {
        body(args.size, stamp)
    };
    request
}
