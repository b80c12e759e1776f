//! The broker's own settings and figures (`AdminBrokerProcessor`): GET_BROKER_CONFIG,
//! UPDATE_BROKER_CONFIG and GET_BROKER_RUNTIME_INFO.

use super::Context;
use crate::broker::reply::{error, with_body, Response};
use crate::broker::state::{now_ms, BrokerState};
use crate::config::properties::parse as parse_properties_text;
use crate::remoting::command::CURRENT_VERSION;
use crate::remoting::headers::GetBrokerConfigResponseHeader;
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use crate::store::message::{decode_record, Record};
use crate::store::reader::StoreReader;
use crate::store::shared::StoreShared;

/// GET_BROKER_CONFIG, UPDATE_BROKER_CONFIG and GET_BROKER_RUNTIME_INFO.
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    match request.request_code() {
        RequestCode::GET_BROKER_CONFIG => broker_config(&ctx.state, request),
        RequestCode::UPDATE_BROKER_CONFIG => update_broker_config(&ctx.state, request).await,
        RequestCode::NOTIFY_BROKER_ROLE_CHANGED => {
            // The controller elected a master: the controller-mode thread asks for the
            // group's replicas now and takes its role from the answer.
            if ctx.state.config.controller_mode.enable {
                ctx.state.controller_poke.notify_one();
            }
            Some(RemotingCommand::success_to(request))
        }
        _ => runtime_info(&ctx.state, &ctx.reader, ctx.store.shared(), request).await,
    }
}

/// GET_BROKER_CONFIG (26): the settings as properties text (the runtime configuration,
/// [`BrokerConfig::java_properties`](crate::config::broker::BrokerConfig::java_properties)),
/// with the configuration's version in the header.
#[must_use]
pub fn broker_config(state: &BrokerState, request: &RemotingCommand) -> Response {
    let text: String = state
        .runtime()
        .java_properties(state.listen_port())
        .iter()
        .map(|(key, value)| format!("{key}={value}\n"))
        .collect();
    let mut response = RemotingCommand::success_to(request);
    response.set_header(&GetBrokerConfigResponseHeader {
        version: state.config_version_json(),
    });
    response.body = text.into_bytes();
    Some(response)
}

/// Keys no UPDATE_BROKER_CONFIG may change, besides those `configBlackList` names
/// (`AdminBrokerProcessor.initConfigBlackList`).
const CONFIG_BLACK_LIST: [&str; 3] = ["brokerConfigPath", "rocketmqHome", "configBlackList"];

/// UPDATE_BROKER_CONFIG (25): the body is properties text; see
/// [`BrokerState::update_config`] for what takes effect when. NO_PERMISSION for a key of
/// the black list, as Java.
pub async fn update_broker_config(state: &BrokerState, request: &RemotingCommand) -> Response {
    if request.body.is_empty() {
        return Some(RemotingCommand::success_to(request));
    }
    let Ok(text) = std::str::from_utf8(&request.body) else {
        return error(
            request,
            ResponseCode::SYSTEM_ERROR,
            "string2Properties error",
        );
    };
    let properties = parse_properties_text(text);
    let black_list = state.runtime().config_black_list.clone();
    let blocked = properties.iter().any(|p| {
        CONFIG_BLACK_LIST.contains(&p.key.as_str())
            || black_list
                .split(';')
                .any(|key| !key.is_empty() && key == p.key)
    });
    if blocked {
        return error(
            request,
            ResponseCode::NO_PERMISSION,
            "Can not update config in black list.",
        );
    }
    state.update_config(&properties).await;
    Some(RemotingCommand::success_to(request))
}

/// Java's default capacities of the request queues its thread pools take from
/// (`sendThreadPoolQueueCapacity` and the like). ferromq runs a request where its connection
/// is read, in no queue: the runtime info reports each queue's size as always 0 (there is no
/// such queue to fill), with Java's capacity, so that tools reading these keys find them.
const JAVA_QUEUE_CAPACITIES: [(&str, &str, u32); 4] = [
    (
        "sendThreadPoolQueueSize",
        "sendThreadPoolQueueCapacity",
        10_000,
    ),
    (
        "pullThreadPoolQueueSize",
        "pullThreadPoolQueueCapacity",
        100_000,
    ),
    (
        "queryThreadPoolQueueSize",
        "queryThreadPoolQueueCapacity",
        20_000,
    ),
    (
        "EndTransactionQueueSize",
        "EndTransactionThreadPoolQueueCapacity",
        100_000,
    ),
];

/// 5.x's timer keys of GET_BROKER_RUNTIME_INFO: how far the wheel's read time is behind
/// now (s), the timer queue's messages not yet enqueued, the messages in the wheel, and the
/// enqueue and delivery rates; Java's zeros where no timer runs (`timerWheelEnable=false`,
/// or a slave, whose timer ferromq does not run).
fn timer_runtime_info(state: &BrokerState, reader: &StoreReader) -> Vec<(String, String)> {
    use crate::store::timer::TIMER_TOPIC;
    let figures = match state.timer.report() {
        Some(report) => [
            ((now_ms() - report.read_time_ms) / 1000).to_string(),
            (reader.max_offset_in_queue(TIMER_TOPIC, 0) - report.queue_offset).to_string(),
            report.pending.to_string(),
            java_float(report.enqueue_tps),
            java_float(report.dequeue_tps),
        ],
        None => ["0", "0", "0", "0.0", "0.0"].map(str::to_owned),
    };
    let keys = [
        "timerReadBehind",
        "timerOffsetBehind",
        "timerCongestNum",
        "timerEnqueueTps",
        "timerDequeueTps",
    ];
    keys.into_iter().map(str::to_owned).zip(figures).collect()
}

/// A `float` as Java's `String.valueOf` writes it for the rates here: at least one decimal.
fn java_float(value: f32) -> String {
    if value.fract() == 0.0 {
        format!("{value:.1}")
    } else {
        value.to_string()
    }
}

/// GET_BROKER_RUNTIME_INFO (28): Java's runtime keys as a `KVTable`
/// (`AdminBrokerProcessor.prepareRuntimeInfo` and `DefaultMessageStore.getRuntimeInfo`),
/// read by `mqadmin clusterList` and `brokerStatus`.
pub async fn runtime_info(
    state: &BrokerState,
    reader: &StoreReader,
    shared: &StoreShared,
    request: &RemotingCommand,
) -> Response {
    use crate::broker::stats::{format_runtime, human_bytes, java_double};
    let stats = &state.stats;
    let totals = stats.totals();
    let (put_max, get_max) = stats.time_max_ms();
    let ((put_yesterday, get_yesterday), (put_today, get_today)) = stats.mornings();
    let config = &shared.config;
    let commit_log_dir = config.commit_log_dir();
    let disk_ratio = |path: &std::path::Path| {
        ferromq_uring::disk::used_ratio(path).map_or_else(|_| "-1.0".to_owned(), java_double)
    };
    let commit_log_ratio = disk_ratio(&commit_log_dir);
    // The oldest message's store time. Java 4.9.8 reads it through a window of twice
    // `maxMessageSize` from the CommitLog's start, which fails (-1) until the CommitLog
    // holds 8 MiB, so its clusterList shows a 56-year-old broker; ferromq reads the record
    // itself, on purpose.
    let earliest = match reader
        .record_at(i64::try_from(shared.min_physical_offset()).unwrap_or(i64::MAX))
        .await
    {
        Ok(Some(bytes)) => match decode_record(&bytes, false) {
            Ok(Record::Message { record, .. }) => record.store_timestamp,
            _ => -1,
        },
        _ => -1,
    };
    // Java never reports fewer than one put (`getRuntimeInfo`), so that its average divides.
    let put_times = totals.put_times.max(1);
    #[allow(clippy::cast_precision_loss)] // an average
    let average_size = totals.put_size as f64 / put_times as f64;
    let mut table: Vec<(String, String)> = vec![
        ("bootTimestamp".into(), stats.boot_ms.to_string()),
        ("runtime".into(), format_runtime(now_ms() - stats.boot_ms)),
        ("putMessageEntireTimeMax".into(), put_max.to_string()),
        ("putMessageTimesTotal".into(), put_times.to_string()),
        (
            "putMessageFailedTimes".into(),
            totals.put_failed.to_string(),
        ),
        ("putMessageSizeTotal".into(), totals.put_size.to_string()),
        ("putMessageDistributeTime".into(), stats.put_distribution()),
        ("putMessageAverageSize".into(), java_double(average_size)),
        // ferromq hands records to dispatch as they are committed, never buffering them.
        ("dispatchMaxBuffer".into(), "0".into()),
        ("getMessageEntireTimeMax".into(), get_max.to_string()),
        ("putTps".into(), stats.tps(|t| t.put_times)),
        ("getFoundTps".into(), stats.tps(|t| t.get_found)),
        ("getMissTps".into(), stats.tps(|t| t.get_miss)),
        ("getTotalTps".into(), stats.get_total_tps()),
        ("getTransferedTps".into(), stats.tps(|t| t.get_transferred)),
        (
            "putLatency99".into(),
            format!("{:.2}", stats.put_latency(0.99)),
        ),
        (
            "putLatency999".into(),
            format!("{:.2}", stats.put_latency(0.999)),
        ),
        (
            format!("commitLogDiskRatio_{}", commit_log_dir.display()),
            commit_log_ratio.clone(),
        ),
        ("commitLogDiskRatio".into(), commit_log_ratio),
        (
            "consumeQueueDiskRatio".into(),
            disk_ratio(&config.consume_queue_dir()),
        ),
        (
            "commitLogMinOffset".into(),
            shared.min_physical_offset().to_string(),
        ),
        (
            "commitLogMaxOffset".into(),
            shared.committed_end().to_string(),
        ),
        (
            "brokerVersionDesc".into(),
            crate::remoting::version::version_desc(CURRENT_VERSION),
        ),
        ("brokerVersion".into(), CURRENT_VERSION.to_string()),
        (
            "msgPutTotalYesterdayMorning".into(),
            put_yesterday.to_string(),
        ),
        ("msgPutTotalTodayMorning".into(), put_today.to_string()),
        ("msgPutTotalTodayNow".into(), totals.put_times.to_string()),
        (
            "msgGetTotalYesterdayMorning".into(),
            get_yesterday.to_string(),
        ),
        ("msgGetTotalTodayMorning".into(), get_today.to_string()),
        (
            "msgGetTotalTodayNow".into(),
            totals.get_transferred.to_string(),
        ),
        // Committed CommitLog bytes not dispatched into ConsumeQueues yet.
        (
            "dispatchBehindBytes".into(),
            shared.dispatch_behind_bytes().to_string(),
        ),
        // Always 0: no lock guards the CommitLog's memory (Java's `lockTimeMills`).
        ("pageCacheLockTimeMills".into(), "0".into()),
        // Always 0: a request runs where its connection is read, never waiting in a
        // thread pool's queue (see `JAVA_QUEUE_CAPACITIES`).
        ("sendThreadPoolQueueHeadWaitTimeMills".into(), "0".into()),
        ("pullThreadPoolQueueHeadWaitTimeMills".into(), "0".into()),
        ("queryThreadPoolQueueHeadWaitTimeMills".into(), "0".into()),
        ("earliestMessageTimeStamp".into(), earliest.to_string()),
        ("startAcceptSendRequestTimeStamp".into(), "0".into()),
        // Java's value without `transientStorePoolEnable`: no pool to run out of.
        (
            "remainTransientStoreBufferNumbs".into(),
            i32::MAX.to_string(),
        ),
        // Committed CommitLog bytes not yet synced to the device.
        (
            "remainHowManyDataToFlush".into(),
            human_bytes(shared.remain_to_flush_bytes()),
        ),
    ];
    table.extend(timer_runtime_info(state, reader));
    for (size, capacity, value) in JAVA_QUEUE_CAPACITIES {
        table.push((size.into(), "0".into()));
        table.push((capacity.into(), value.to_string()));
    }
    table.extend(ha_runtime_info(state, shared.committed_end()));
    if let Ok(space) = ferromq_uring::disk::space(&config.store_path_root_dir) {
        table.push((
            "commitLogDirCapacity".into(),
            format!(
                "Total : {}, Free : {}.",
                human_bytes(space.total),
                human_bytes(space.usable)
            ),
        ));
    }
    let table: serde_json::Map<String, serde_json::Value> = table
        .into_iter()
        .map(|(key, value)| (key, serde_json::Value::String(value)))
        .collect();
    with_body(request, serde_json::json!({ "table": table }).to_string())
}

/// ferromq's own runtime keys on replication (4.9.8 reports none): the role; on a master,
/// each connected slave's last acknowledged offset, how many bytes it lags behind `end`, and
/// how many frames went to it and reports came back; on a slave, the master it follows,
/// whether the link is up, and how many frames it took and reports it sent.
fn ha_runtime_info(state: &BrokerState, end: u64) -> Vec<(String, String)> {
    use crate::broker::state::LinkState;
    use crate::config::broker::BrokerRole;
    let role = state.role.get();
    let mut table = vec![("brokerRole".to_owned(), role.java_name().to_owned())];
    let end = i64::try_from(end).unwrap_or(i64::MAX);
    if role == BrokerRole::Slave {
        let master = &state.master;
        let ha = master.ha_target(state.config.ha_master_address.as_deref());
        table.push(("haMasterAddress".into(), ha.unwrap_or_default()));
        table.push(("masterAddr".into(), master.master().unwrap_or_default()));
        let link = match master.link() {
            LinkState::Down(None) => "DOWN".to_owned(),
            LinkState::Down(Some(reason)) => format!("DOWN {reason}"),
            LinkState::Up(addr) => format!("UP {addr}"),
            LinkState::Stopped(reason) => format!("STOPPED {reason}"),
        };
        table.push(("haConnection".into(), link));
        table.push(("haFramesTaken".into(), master.frames_taken().to_string()));
        table.push(("haReportsSent".into(), master.reports_sent().to_string()));
        return table;
    }
    let links = state.slaves.links();
    table.push(("haConnectedSlaves".into(), links.len().to_string()));
    table.push(("haSlaveAckOffset".into(), state.slaves.acked().to_string()));
    if let Some(best) = links.iter().map(|link| link.acked).max() {
        table.push(("haSlaveLagBytes".into(), (end - best.max(0)).to_string()));
    }
    for link in links {
        let addr = link.addr;
        table.push((format!("haSlaveAckOffset_{addr}"), link.acked.to_string()));
        table.push((
            format!("haSlaveLagBytes_{addr}"),
            (end - link.acked.max(0)).to_string(),
        ));
        table.push((
            format!("haSlaveFramesSent_{addr}"),
            link.frames_sent.to_string(),
        ));
        table.push((format!("haSlaveReports_{addr}"), link.reports.to_string()));
    }
    table
}
