//! The pullers of `consume` and `e2e`: one long-polling PULL_MESSAGE loop per readable queue
//! of every master, decoding the returned records to count them.

use super::stats::{Recorder, Side};
use super::target;
use super::{wall_ns, From, MqArgs, Target, Workload};
use ferromq::remoting::client::{ClientError, RemotingClient};
use ferromq::remoting::headers::{PullMessageRequestHeader, PullMessageResponseHeader};
use ferromq::remoting::{RemotingCommand, RequestCode, ResponseCode};
use ferromq::store::message::{decode_record, Record};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long the broker may hold a pull that finds nothing (`suspendTimeoutMillis`).
const SUSPEND_MS: i64 = 5_000;
/// `PullSysFlag`: commit-offset, suspend (long polling) and subscription-in-request bits.
const FLAG_COMMIT_OFFSET: i32 = 0x1;
const FLAG_SUSPEND: i32 = 0x2;
const FLAG_SUBSCRIPTION: i32 = 0x4;
/// Wall-clock nanoseconds below this are not send stamps (before 2001): fall back to the
/// born timestamp.
const STAMP_MIN_NS: u64 = 1_000_000_000_000_000_000;

/// One queue to read: target index, queue id, first offset, and the end for `--drain`.
#[derive(Debug, Clone, Copy)]
pub struct QueuePlan {
    target: usize,
    queue_id: i32,
    from: i64,
    end: Option<i64>,
}

/// Where each queue starts (and ends, with `--drain`).
///
/// # Errors
/// An offset query failed.
pub async fn plan(
    targets: &[Target],
    args: &MqArgs,
    workload: Workload,
) -> anyhow::Result<Vec<QueuePlan>> {
    let mut plans = Vec::new();
    for (index, t) in targets.iter().enumerate() {
        for queue_id in 0..t.broker.read_queues {
            let max = target::max_offset(&t.admin, &args.topic, queue_id).await?;
            // e2e reads what this run produces, so it starts at the end.
            let from = if args.from == From::Last || workload == Workload::E2e {
                max
            } else {
                target::min_offset(&t.admin, &args.topic, queue_id).await?
            };
            let end = (args.drain && workload == Workload::Consume).then_some(max);
            plans.push(QueuePlan {
                target: index,
                queue_id,
                from,
                end,
            });
        }
    }
    Ok(plans)
}

/// Pulls every planned queue until `deadline`, `stop`, `--messages` or (with `--drain`)
/// the planned end.
pub async fn run(
    targets: Arc<Vec<Target>>,
    args: MqArgs,
    plans: Vec<QueuePlan>,
    side: Arc<Side>,
    deadline: Instant,
    stop: tokio::sync::watch::Receiver<bool>,
    end_to_end: bool,
) {
    let ctx = Arc::new(Ctx {
        args,
        side,
        consumed: AtomicU64::new(0),
        deadline,
        end_to_end,
    });
    let mut tasks = Vec::new();
    for (index, plan) in plans.into_iter().enumerate() {
        let t = &targets[plan.target];
        let client = t.connections[index % t.connections.len()].clone();
        tasks.push(tokio::spawn(pull_queue(
            client,
            ctx.clone(),
            plan,
            stop.clone(),
        )));
    }
    for task in tasks {
        if let Err(error) = task.await {
            tracing::error!(%error, "pull task failed");
        }
    }
}

/// What every pull task of a run shares.
struct Ctx {
    args: MqArgs,
    side: Arc<Side>,
    consumed: AtomicU64,
    deadline: Instant,
    end_to_end: bool,
}

fn pull_request(args: &MqArgs, queue_id: i32, offset: i64) -> RemotingCommand {
    let commit = if args.commit_offsets {
        FLAG_COMMIT_OFFSET
    } else {
        0
    };
    let header = PullMessageRequestHeader {
        consumer_group: args.group.clone(),
        topic: args.topic.clone(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: args.pull_batch,
        sys_flag: commit | FLAG_SUSPEND | FLAG_SUBSCRIPTION,
        commit_offset: if args.commit_offsets { offset } else { 0 },
        suspend_timeout_millis: SUSPEND_MS,
        subscription: Some(
            args.sql
                .clone()
                .unwrap_or_else(|| args.subscription.clone()),
        ),
        sub_version: 0,
        expression_type: Some(if args.sql.is_some() { "SQL92" } else { "TAG" }.to_owned()),
        max_msg_bytes: None,
        request_source: None,
        broker_name: None,
    };
    RemotingCommand::request_with_header(RequestCode::PULL_MESSAGE, &header)
}

async fn pull_queue(
    client: RemotingClient,
    ctx: Arc<Ctx>,
    plan: QueuePlan,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let (args, side, consumed) = (&ctx.args, &*ctx.side, &ctx.consumed);
    let mut recorder = ctx.side.recorder();
    let (deadline, end_to_end) = (ctx.deadline, ctx.end_to_end);
    let timeout = Duration::from_millis(args.timeout_ms) + Duration::from_millis(SUSPEND_MS as u64);
    let mut offset = plan.from;
    loop {
        if *stop.borrow() || Instant::now() >= deadline {
            return;
        }
        if plan.end.is_some_and(|end| offset >= end) {
            return;
        }
        if args
            .messages
            .is_some_and(|limit| consumed.load(Ordering::Relaxed) >= limit)
        {
            return;
        }
        let sent = Instant::now();
        let request = pull_request(args, plan.queue_id, offset);
        let outcome = tokio::select! {
            outcome = client.request_timeout(request, timeout) => outcome,
            () = tokio::time::sleep_until(deadline.into()) => return,
            _ = stop.changed() => return,
        };
        let response = match outcome {
            Ok(response) => response,
            Err(ClientError::Timeout(_)) => {
                side.error("pull: timeout".to_owned());
                continue;
            }
            Err(error) => {
                side.error(format!("pull: connection: {error}"));
                if client.is_closed() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let code = response.response_code();
        let header = response.decode_header::<PullMessageResponseHeader>().ok();
        if code == ResponseCode::SUCCESS {
            let now = Instant::now();
            let (count, bytes) = count_records(&response.body, &mut recorder, now, end_to_end);
            consumed.fetch_add(count, Ordering::Relaxed);
            if !end_to_end {
                recorder.record(now, count, bytes, Some(now - sent));
            }
            match header {
                Some(header) => offset = header.next_begin_offset,
                None => offset += i64::try_from(count).unwrap_or(0),
            }
        } else if code == ResponseCode::PULL_NOT_FOUND
            || code == ResponseCode::PULL_RETRY_IMMEDIATELY
            || code == ResponseCode::PULL_OFFSET_MOVED
        {
            if let Some(header) = header {
                offset = header.next_begin_offset;
            }
        } else {
            let remark: String = response
                .remark
                .unwrap_or_default()
                .chars()
                .take(80)
                .collect();
            side.error(format!("pull: {code}: {remark}"));
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Counts the records of a pull body; in e2e mode also records each one's end-to-end
/// latency. Returns (messages, body bytes).
fn count_records(
    body: &[u8],
    recorder: &mut Recorder,
    now: Instant,
    end_to_end: bool,
) -> (u64, u64) {
    let now_ns = wall_ns(now);
    let mut at = 0;
    let (mut count, mut bytes) = (0u64, 0u64);
    while at < body.len() {
        match decode_record(&body[at..], false) {
            Ok(Record::Message { record, size }) => {
                count += 1;
                bytes += record.body.len() as u64;
                at += size;
                if end_to_end {
                    let stamp_ns = record
                        .body
                        .get(..8)
                        .and_then(|b| <[u8; 8]>::try_from(b).ok())
                        .map(u64::from_be_bytes)
                        .filter(|&ns| ns >= STAMP_MIN_NS && ns <= now_ns.saturating_add(1 << 40))
                        .unwrap_or_else(|| {
                            u64::try_from(record.born_timestamp).unwrap_or(0) * 1_000_000
                        });
                    let latency = Duration::from_nanos(now_ns.saturating_sub(stamp_ns));
                    recorder.record(now, 1, record.body.len() as u64, Some(latency));
                }
            }
            Ok(Record::Blank { .. }) => break,
            Err(error) => {
                recorder
                    .side()
                    .error(format!("pull: undecodable record: {error}"));
                break;
            }
        }
    }
    (count, bytes)
}
