//! The final report of a `produce` / `consume` / `e2e` run: text on stdout, JSON with run
//! metadata, and the SVG of the latency percentile curves and the latency over time.

use super::stats::Summary;
use super::{Mode, MqArgs, Outcome, Workload};
use crate::workloads::plot::Document;
use std::fmt::Write as _;
use std::time::{SystemTime, UNIX_EPOCH};

fn target_label(args: &MqArgs) -> String {
    match (args.namesrv, args.broker) {
        (Some(namesrv), _) => format!("name server {namesrv}"),
        (None, Some(broker)) => format!("broker {broker}"),
        (None, None) => "nothing".to_owned(),
    }
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Sync => "sync",
        Mode::Async => "async",
        Mode::Oneway => "oneway",
    }
}

/// Whether the brokers stored exactly what the producer had acknowledged (sent, for oneway).
fn verified(args: &MqArgs, outcome: &Outcome) -> Option<(u64, i64, bool)> {
    let produce = outcome.produce.as_ref()?;
    let stored = outcome.stored?;
    let expected = if args.mode == Mode::Oneway {
        produce.sent_total
    } else {
        produce.messages_total
    };
    Some((
        expected,
        stored,
        u64::try_from(stored).is_ok_and(|s| s == expected),
    ))
}

/// The report text.
pub fn text(workload: Workload, args: &MqArgs, outcome: &Outcome) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "ferromq-bench {} against {}, topic {}",
        workload.name(),
        target_label(args),
        args.topic
    );
    for (broker, info) in &outcome.targets {
        let _ = writeln!(
            out,
            "  broker {} at {}: {} write / {} read queues, flushDiskType {}, version code {}",
            broker.name,
            broker.addr,
            broker.write_queues,
            broker.read_queues,
            info.flush_disk_type.as_deref().unwrap_or("unknown"),
            info.version_code
                .map_or_else(|| "unknown".to_owned(), |v| v.to_string()),
        );
    }
    if workload != Workload::Consume {
        let _ = writeln!(
            out,
            "  {} sender(s) over {} connection(s) per broker, mode {}{}, {} B bodies, batch {}, {}",
            args.threads,
            args.connections,
            mode_name(args.mode),
            if args.mode == Mode::Async {
                format!(" ({} in flight each)", args.in_flight)
            } else {
                String::new()
            },
            args.size,
            args.batch,
            match args.rate {
                Some(rate) => format!("open loop at {rate} msg/s (latency from intended send)"),
                None => "closed loop".to_owned(),
            }
        );
    }
    if let Some(flush) = args.flush {
        let _ = writeln!(out, "  flush expected: {flush:?}");
    }
    let _ = writeln!(
        out,
        "  duration {} s (warm-up {} s){}",
        args.duration,
        args.warmup,
        args.messages
            .map_or_else(String::new, |n| format!(", at most {n} messages"))
    );
    for warning in &outcome.warnings {
        let _ = writeln!(out, "  WARNING: {warning}");
    }
    for side in outcome.produce.iter().chain(&outcome.consume) {
        side.text(&mut out);
    }
    if let Some(idle) = &outcome.idle {
        let _ = writeln!(
            out,
            "idle connections: {} opened in {:.1} s, {} answering at the end",
            idle.opened, idle.open_secs, idle.answering_at_end
        );
        if let (Some([before, open, end]), Some(per)) = (idle.rss_kib, idle.kib_per_connection()) {
            let mib = |kib: u64| kib as f64 / 1024.0;
            let _ = writeln!(
                out,
                "  server RssAnon {:.1} MiB before, {:.1} MiB with them open, {:.1} MiB at the \
                 end: {per:.1} KiB per idle connection",
                mib(before),
                mib(open),
                mib(end)
            );
        }
    }
    if let Some((expected, stored, ok)) = verified(args, outcome) {
        let what = if args.mode == Mode::Oneway {
            "sent"
        } else {
            "acknowledged"
        };
        let _ = writeln!(
            out,
            "verify: {what} {expected}, brokers stored {stored} (max offset sums) -> {}",
            if ok { "match" } else { "MISMATCH" }
        );
    }
    if let (Workload::E2e, Some(p), Some(c)) = (workload, &outcome.produce, &outcome.consume) {
        let produced = if args.mode == Mode::Oneway {
            p.sent_total
        } else {
            p.messages_total
        };
        let _ = writeln!(
            out,
            "e2e: produced {produced}, consumed {} -> {}",
            c.messages_total,
            if produced == c.messages_total {
                "match"
            } else {
                "MISMATCH"
            }
        );
    }
    out
}

/// The report and run metadata as JSON.
pub fn json(
    workload: Workload,
    args: &MqArgs,
    outcome: &Outcome,
    started: SystemTime,
) -> serde_json::Value {
    let brokers: Vec<_> = outcome
        .targets
        .iter()
        .map(|(broker, info)| {
            serde_json::json!({
                "name": broker.name,
                "addr": broker.addr.to_string(),
                "write_queues": broker.write_queues,
                "read_queues": broker.read_queues,
                "flush_disk_type": info.flush_disk_type,
                "version_code": info.version_code,
            })
        })
        .collect();
    let verification = verified(args, outcome).map(|(expected, stored, ok)| {
        serde_json::json!({ "expected": expected, "broker_stored": stored, "match": ok })
    });
    serde_json::json!({
        "workload": workload.name(),
        "target": target_label(args),
        "brokers": brokers,
        "broker_version": outcome.targets.first().and_then(|(_, info)| info.version_code),
        "produce": outcome.produce.as_ref().map(Summary::json),
        "consume": outcome.consume.as_ref().map(Summary::json),
        "verification": verification,
        "warnings": outcome.warnings,
        "idle": outcome.idle.as_ref().map(|idle| serde_json::json!({
            "opened": idle.opened,
            "open_secs": idle.open_secs,
            "answering_at_end": idle.answering_at_end,
            "server_rss_kib": idle.rss_kib,
            "kib_per_connection": idle.kib_per_connection(),
        })),
        "options": options_json(args),
        "metadata": metadata(started),
    })
}

fn options_json(args: &MqArgs) -> serde_json::Value {
    serde_json::json!({
        "namesrv": args.namesrv.map(|a| a.to_string()),
        "broker": args.broker.map(|a| a.to_string()),
        "topic": args.topic,
        "queues": args.queues,
        "create_topic": args.create_topic,
        "connections": args.connections,
        "threads": args.threads,
        "workers": args.workers,
        "size": args.size,
        "batch": args.batch,
        "mode": mode_name(args.mode),
        "in_flight": args.in_flight,
        "flush": args.flush.map(|f| format!("{f:?}").to_lowercase()),
        "duration": args.duration,
        "messages": args.messages,
        "rate": args.rate,
        "warmup": args.warmup,
        "from": format!("{:?}", args.from).to_lowercase(),
        "group": args.group,
        "drain": args.drain,
        "pull_batch": args.pull_batch,
        "catch_up": args.catch_up,
        "timeout_ms": args.timeout_ms,
        "serialize": args.serialize,
        "argv": std::env::args().collect::<Vec<_>>(),
    })
}

fn metadata(started: SystemTime) -> serde_json::Value {
    let git_commit = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "unknown".to_owned());
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned());
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".to_owned())
    };
    let cores = std::thread::available_parallelism().map_or(0, std::num::NonZero::get);
    let secs = started
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    serde_json::json!({
        "git_commit": git_commit,
        "cpu_model": cpu_model,
        "cores": cores,
        "kernel": read("/proc/sys/kernel/osrelease"),
        "kernel_version": read("/proc/version"),
        "hostname": read("/proc/sys/kernel/hostname"),
        "start_time": rfc3339(secs),
        "start_unix_secs": secs,
        "bench_version": env!("CARGO_PKG_VERSION"),
    })
}

/// `YYYY-MM-DDTHH:MM:SSZ` of Unix seconds (UTC; days to civil date after H. Hinnant).
fn rfc3339(secs: u64) -> String {
    let days = i64::try_from(secs / 86_400).unwrap_or(i64::MAX);
    let rem = secs % 86_400;
    let (year, month, day) = ferromq::calendar::civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// The SVG of the run: the latency percentile curves of both sides, then each side's latency
/// over time.
pub fn plot(workload: Workload, args: &MqArgs, outcome: &Outcome) -> String {
    let sides: Vec<&Summary> = outcome.produce.iter().chain(&outcome.consume).collect();
    let labels: Vec<String> = sides
        .iter()
        .map(|side| format!("{}: {}", side.name, side.latency_of))
        .collect();
    let curves: Vec<(&str, &hdrhistogram::Histogram<u64>)> = sides
        .iter()
        .zip(&labels)
        .map(|(side, label)| (label.as_str(), &side.latency))
        .collect();
    let title = format!(
        "ferromq-bench {} — {} — {} B, {} sender(s), {}",
        workload.name(),
        target_label(args),
        args.size,
        args.threads,
        mode_name(args.mode)
    );
    let mut document = Document::new();
    document.percentiles(&title, &curves);
    for (side, label) in sides.iter().zip(&labels) {
        if let Some(timeline) = &side.timeline {
            document.timeline(&format!("{label} — per 100 ms"), timeline);
        }
    }
    document.finish()
}

#[cfg(test)]
mod tests {
    use super::rfc3339;

    #[test]
    fn formats_utc_dates() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
    }
}
