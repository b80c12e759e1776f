//! `ferromq admin top`: a live view of a cluster, refreshed every second: each broker's
//! rates, put latency, disk and replication, each topic's message rate, and each consumer
//! group's rate and lag. On a terminal it draws a full-screen view (ratatui) until `q`,
//! Esc or Ctrl-C; otherwise (a pipe, a file) it prints the same tables as text at each
//! refresh, as `top -b` does.
//!
//! Every figure comes from the admin requests mqadmin uses, so `top` watches any RocketMQ
//! broker: GET_BROKER_RUNTIME_INFO (through `clusterList`), and on each master
//! GET_ALL_TOPIC_CONFIG, GET_TOPIC_STATS_INFO per topic (sent together, one round trip) and
//! GET_ALL_CONSUMER_OFFSET. Rates are the change of offsets between two refreshes; a
//! group's lag is the sum over the queues it committed in of the queue's end minus its
//! committed offset.
//!
//! Tested through a pseudo-terminal by `tests/admin_top.rs`.

use super::cluster::{self, ClusterListArgs};
use super::output::{int, text, Table};
use super::{AdminClient, AdminError};
use crate::config::fastjson::{parse_lenient, queue_keyed_map};
use crate::remoting::headers::GetTopicStatsInfoRequestHeader;
use crate::remoting::{RemotingCommand, RequestCode};
use ferromq_protocol::names::{REPLY_TOPIC_POSTFIX, SYSTEM_TOPICS, SYSTEM_TOPIC_PREFIX};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// Flags of `top`.
#[derive(Debug, clap::Args)]
pub struct TopArgs {
    /// Time between refreshes, in milliseconds.
    #[arg(
        short = 'i',
        long = "interval",
        default_value_t = 1000,
        value_name = "MS"
    )]
    pub interval_ms: u64,
    /// Stop after this many refreshes (default: until `q`, Esc or Ctrl-C).
    #[arg(long = "iterations", value_name = "N")]
    pub iterations: Option<u64>,
    /// Only this cluster.
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
    /// Most topics read per broker at each refresh (the rest are not shown), bounding the
    /// requests a refresh makes on a broker with many topics.
    #[arg(long = "maxTopics", default_value_t = 200, value_name = "N")]
    pub max_topics: usize,
}

/// One broker's figures at a refresh.
#[derive(Clone, Debug)]
struct BrokerFigures {
    cluster: String,
    name: String,
    id: i64,
    addr: String,
    role: String,
    in_tps: f64,
    out_tps: f64,
    /// `putLatency99`, in ms.
    put_p99_ms: Option<f64>,
    /// `commitLogDiskRatio`, 0..1.
    disk_ratio: Option<f64>,
    max_offset: Option<i64>,
    ha_lag: Option<i64>,
}

/// A group's figures in one topic at a refresh.
#[derive(Clone, Copy, Debug, Default)]
struct GroupFigures {
    /// Sum of its committed offsets.
    committed: i64,
    /// Sum over its queues of the queue's end minus its committed offset.
    lag: i64,
}

/// What one refresh read.
#[derive(Debug)]
struct Sample {
    at: Instant,
    brokers: Vec<BrokerFigures>,
    /// Per topic, the sum of its queues' ends over the masters.
    topics: BTreeMap<String, i64>,
    /// Per (group, topic).
    groups: BTreeMap<(String, String), GroupFigures>,
    /// Requests that failed, one line each.
    problems: Vec<String>,
}

/// A titled table of the view.
#[derive(Debug)]
struct Panel {
    title: String,
    headers: &'static [&'static str],
    rows: Vec<Vec<String>>,
}

/// Runs `top` until its iterations are done or the user quits.
///
/// # Errors
/// A terminal that cannot be set up, or the name server's refusal at the first refresh.
pub fn run(client: &mut AdminClient, args: &TopArgs) -> Result<(), AdminError> {
    let interval = Duration::from_millis(args.interval_ms.max(100));
    if std::io::stdout().is_terminal() {
        screen::run(client, args, interval)
    } else {
        run_batch(client, args, interval)
    }
}

/// The text form: the panels of each refresh, separated by a blank line.
fn run_batch(
    client: &mut AdminClient,
    args: &TopArgs,
    interval: Duration,
) -> Result<(), AdminError> {
    use std::io::Write;
    let mut previous: Option<Sample> = None;
    let mut done = 0;
    loop {
        let sample = take_sample(client, args)?;
        let mut out = String::new();
        for panel in panels(previous.as_ref(), &sample) {
            out.push_str(&format!("== {}\n", panel.title));
            let mut table = Table::new(panel.headers);
            for row in panel.rows {
                table.row(row);
            }
            out.push_str(&table.render());
        }
        out.push('\n');
        let mut stdout = std::io::stdout().lock();
        // A closed pipe ends the run (`top | head`).
        if stdout
            .write_all(out.as_bytes())
            .and_then(|()| stdout.flush())
            .is_err()
        {
            return Ok(());
        }
        done += 1;
        if args.iterations.is_some_and(|n| done >= n) {
            return Ok(());
        }
        previous = Some(sample);
        std::thread::sleep(interval);
    }
}

/// Reads every figure once. Only the name server's refusal is an error; a broker that does
/// not answer is shown with what it did answer and a line in `problems`.
fn take_sample(client: &mut AdminClient, args: &TopArgs) -> Result<Sample, AdminError> {
    let list = cluster::cluster_list(
        client,
        &ClusterListArgs {
            cluster: args.cluster.clone(),
        },
    )?;
    let brokers: Vec<BrokerFigures> = list
        .json
        .as_array()
        .map(|all| all.iter().map(broker_figures).collect())
        .unwrap_or_default();
    let mut sample = Sample {
        at: Instant::now(),
        brokers,
        topics: BTreeMap::new(),
        groups: BTreeMap::new(),
        problems: Vec::new(),
    };
    let masters: Vec<(String, String)> = sample
        .brokers
        .iter()
        .filter(|b| b.id == 0)
        .map(|b| (b.name.clone(), b.addr.clone()))
        .collect();
    for (name, addr) in masters {
        if let Err(error) = read_master(client, &addr, args.max_topics, &mut sample) {
            sample.problems.push(format!("{name} ({addr}): {error}"));
        }
    }
    Ok(sample)
}

fn broker_figures(entry: &Value) -> BrokerFigures {
    let runtime = &entry["runtime"];
    let get = |key: &str| runtime[key].as_str().map(str::to_owned);
    // TPS values are "10s 1min 10min"; the first is the freshest.
    let tps = |key: &str| {
        get(key)
            .and_then(|v| v.split(' ').next().and_then(|n| n.parse::<f64>().ok()))
            .unwrap_or(0.0)
    };
    let number = |key: &str| get(key).and_then(|v| v.parse::<f64>().ok());
    BrokerFigures {
        cluster: text(entry, "clusterName"),
        name: text(entry, "brokerName"),
        id: int(entry, "brokerId"),
        addr: text(entry, "brokerAddr"),
        role: text(entry, "role"),
        in_tps: tps("putTps"),
        out_tps: tps("getTransferedTps"),
        put_p99_ms: number("putLatency99"),
        disk_ratio: number("commitLogDiskRatio"),
        max_offset: get("commitLogMaxOffset").and_then(|v| v.parse().ok()),
        ha_lag: entry["haLagBytes"].as_i64(),
    }
}

/// A master's topics' ends and its groups' offsets, added into `sample`.
fn read_master(
    client: &mut AdminClient,
    addr: &str,
    max_topics: usize,
    sample: &mut Sample,
) -> Result<(), AdminError> {
    let offsets = body_json(client, addr, RequestCode::GET_ALL_CONSUMER_OFFSET)?;
    let configs = body_json(client, addr, RequestCode::GET_ALL_TOPIC_CONFIG)?;
    let own_names: Vec<&str> = sample
        .brokers
        .iter()
        .flat_map(|b| [b.name.as_str(), b.cluster.as_str()])
        .collect();
    let mut topics: Vec<String> = configs["topicConfigTable"]
        .as_object()
        .map(|table| table.keys().cloned().collect())
        .unwrap_or_default();
    topics.retain(|topic| !is_system(topic, &own_names));
    topics.sort();
    topics.truncate(max_topics);
    // Per (topic, queue), the queue's end on this master.
    let mut ends: BTreeMap<(String, i64), i64> = BTreeMap::new();
    // One round trip for all the topics: the requests go out together on one connection.
    let requests = topics
        .iter()
        .map(|topic| {
            let header = GetTopicStatsInfoRequestHeader {
                topic: topic.clone(),
            };
            RemotingCommand::request_with_header(RequestCode::GET_TOPIC_STATS_INFO, &header)
        })
        .collect();
    let answers = client.call_ok_all(addr, requests)?;
    for (topic, response) in topics.iter().zip(answers) {
        let queues = queue_keyed_map(&response.body, "offsetTable")
            .map_err(|reason| super::client::bad_body(addr, reason))?;
        let mut total = 0;
        for (queue, offsets) in queues {
            let end = int(&offsets, "maxOffset");
            total += end;
            ends.insert((topic.clone(), int(&queue, "queueId")), end);
        }
        *sample.topics.entry(topic.clone()).or_default() += total;
    }
    let table = offsets["offsetTable"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (key, queues) in table {
        let Some((topic, group)) = key.split_once('@') else {
            continue;
        };
        if !sample.topics.contains_key(topic) {
            continue;
        }
        let figures = sample
            .groups
            .entry((group.to_owned(), topic.to_owned()))
            .or_default();
        for (queue, committed) in queues.as_object().into_iter().flatten() {
            let (Ok(queue), Some(committed)) = (queue.parse::<i64>(), committed.as_i64()) else {
                continue;
            };
            figures.committed += committed;
            if let Some(end) = ends.get(&(topic.to_owned(), queue)) {
                figures.lag += (end - committed).max(0);
            }
        }
    }
    Ok(())
}

/// A broker's answer to `code` (no header) as JSON.
fn body_json(client: &mut AdminClient, addr: &str, code: RequestCode) -> Result<Value, AdminError> {
    let response = client.call_ok(addr, RemotingCommand::request(code))?;
    parse_lenient(&response.body).map_err(|reason| super::client::bad_body(addr, reason))
}

/// Whether `topic` is one the brokers keep for themselves (not shown): the fixed system
/// topics, `rmq_sys_*`, retry and dead-letter topics, and the topics named after a broker or
/// cluster (`own_names`), with a cluster's reply topic.
fn is_system(topic: &str, own_names: &[&str]) -> bool {
    let reply_of_own = topic
        .strip_suffix(REPLY_TOPIC_POSTFIX)
        .and_then(|rest| rest.strip_suffix('_'))
        .is_some_and(|cluster| own_names.contains(&cluster));
    SYSTEM_TOPICS.contains(&topic)
        || topic.starts_with(SYSTEM_TOPIC_PREFIX)
        || topic.starts_with("%RETRY%")
        || topic.starts_with("%DLQ%")
        || own_names.contains(&topic)
        || reply_of_own
}

/// The change of `now` against `before` per second over `seconds`.
fn rate(now: i64, before: Option<i64>, seconds: f64) -> String {
    match before {
        #[allow(clippy::cast_precision_loss)] // offsets far below 2^52
        Some(before) if seconds > 0.0 => format!("{:.1}", (now - before) as f64 / seconds),
        _ => "-".to_owned(),
    }
}

fn or_dash<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// The view of `sample`, with rates against `previous`.
fn panels(previous: Option<&Sample>, sample: &Sample) -> Vec<Panel> {
    let seconds = previous.map_or(0.0, |p| sample.at.duration_since(p.at).as_secs_f64());
    let brokers = sample
        .brokers
        .iter()
        .map(|b| {
            vec![
                b.name.clone(),
                b.id.to_string(),
                b.addr.clone(),
                b.role.clone(),
                format!("{:.1}", b.in_tps),
                format!("{:.1}", b.out_tps),
                or_dash(b.put_p99_ms.map(|ms| format!("{ms:.2}"))),
                or_dash(b.disk_ratio.map(|r| format!("{:.1}%", r * 100.0))),
                or_dash(b.max_offset),
                or_dash(b.ha_lag),
            ]
        })
        .collect();
    let mut topics: Vec<(f64, Vec<String>)> = sample
        .topics
        .iter()
        .map(|(topic, end)| {
            let before = previous.and_then(|p| p.topics.get(topic).copied());
            let per_second = rate(*end, before, seconds);
            let order = per_second.parse::<f64>().unwrap_or(0.0);
            (order, vec![topic.clone(), per_second, end.to_string()])
        })
        .collect();
    // Busiest first, then by name.
    topics.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1[0].cmp(&b.1[0])));
    let mut groups: Vec<(i64, Vec<String>)> = sample
        .groups
        .iter()
        .map(|((group, topic), figures)| {
            let before = previous
                .and_then(|p| p.groups.get(&(group.clone(), topic.clone())))
                .map(|f| f.committed);
            let row = vec![
                group.clone(),
                topic.clone(),
                rate(figures.committed, before, seconds),
                figures.lag.to_string(),
            ];
            (figures.lag, row)
        })
        .collect();
    // Most behind first.
    groups.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let mut all = vec![
        Panel {
            title: format!("Brokers ({})", sample.brokers.len()),
            headers: &[
                "#Broker",
                "#BID",
                "#Addr",
                "#Role",
                "#InTPS",
                "#OutTPS",
                "#PutP99ms",
                "#Disk",
                "#MaxOffset",
                "#HALag",
            ],
            rows: brokers,
        },
        Panel {
            title: format!("Topics ({})", sample.topics.len()),
            headers: &["#Topic", "#In/s", "#Messages"],
            rows: topics.into_iter().map(|(_, row)| row).collect(),
        },
        Panel {
            title: format!("Consumer groups ({})", sample.groups.len()),
            headers: &["#Group", "#Topic", "#Out/s", "#Lag"],
            rows: groups.into_iter().map(|(_, row)| row).collect(),
        },
    ];
    if !sample.problems.is_empty() {
        all.push(Panel {
            title: "Not answering".to_owned(),
            headers: &["#Problem"],
            rows: sample.problems.iter().map(|p| vec![p.clone()]).collect(),
        });
    }
    all
}

/// The full-screen form.
mod screen {
    use super::{panels, take_sample, AdminClient, AdminError, Panel, Sample, TopArgs};
    use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
    use ratatui::layout::{Constraint, Layout};
    use ratatui::style::{Modifier, Style};
    use ratatui::widgets::{Block, Paragraph, Row, Table};
    use ratatui::{DefaultTerminal, Frame};
    use std::time::{Duration, Instant};

    pub(super) fn run(
        client: &mut AdminClient,
        args: &TopArgs,
        interval: Duration,
    ) -> Result<(), AdminError> {
        let first = take_sample(client, args)?;
        // ratatui::init restores the terminal on a panic too.
        let mut terminal = ratatui::try_init()
            .map_err(|e| AdminError::Usage(format!("cannot set up the terminal: {e}")))?;
        let result = watch(&mut terminal, client, args, interval, first);
        ratatui::restore();
        result
    }

    fn watch(
        terminal: &mut DefaultTerminal,
        client: &mut AdminClient,
        args: &TopArgs,
        interval: Duration,
        first: Sample,
    ) -> Result<(), AdminError> {
        let namesrv = client.namesrvs().join(";");
        let mut previous: Option<Sample> = None;
        let mut sample = first;
        let mut done = 0u64;
        loop {
            let view = panels(previous.as_ref(), &sample);
            let heading = format!(
                "ferromq top  name server {namesrv}  every {} ms  q: quit",
                interval.as_millis()
            );
            terminal
                .draw(|frame| draw(frame, &heading, &view))
                .map_err(|e| AdminError::Usage(format!("cannot draw: {e}")))?;
            done += 1;
            if args.iterations.is_some_and(|n| done >= n) || quit_within(interval)? {
                return Ok(());
            }
            match take_sample(client, args) {
                Ok(next) => previous = Some(std::mem::replace(&mut sample, next)),
                // The name server went away: keep the last figures, say so, and show rates
                // again from the next answer.
                Err(error) => {
                    sample.problems = vec![format!("name server: {error}")];
                    previous = None;
                }
            }
        }
    }

    /// Waits up to `interval` for a key; whether it asks to quit.
    fn quit_within(interval: Duration) -> Result<bool, AdminError> {
        let deadline = Instant::now() + interval;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(false);
            }
            let ready = event::poll(left)
                .map_err(|e| AdminError::Usage(format!("cannot read the terminal: {e}")))?;
            if !ready {
                return Ok(false);
            }
            let read = event::read()
                .map_err(|e| AdminError::Usage(format!("cannot read the terminal: {e}")))?;
            if let Event::Key(key) = read {
                let ctrl_c =
                    key.code == KeyCode::Char('c') && key.modifiers.contains(KeyModifiers::CONTROL);
                let quit = matches!(key.code, KeyCode::Char('q') | KeyCode::Esc) || ctrl_c;
                if key.kind == KeyEventKind::Press && quit {
                    return Ok(true);
                }
            }
        }
    }

    fn draw(frame: &mut Frame, heading: &str, view: &[Panel]) {
        let mut constraints = vec![Constraint::Length(1)];
        constraints.extend(view.iter().map(|panel| {
            // Borders and the header row, then the rows, sharing what is left.
            let rows = u16::try_from(panel.rows.len()).unwrap_or(u16::MAX);
            Constraint::Min(rows.saturating_add(3).min(12))
        }));
        let areas = Layout::vertical(constraints).split(frame.area());
        frame.render_widget(Paragraph::new(heading.to_owned()), areas[0]);
        for (panel, area) in view.iter().zip(areas.iter().skip(1)) {
            let columns = panel.headers.len();
            let widths: Vec<Constraint> = (0..columns)
                .map(|c| {
                    let widest = panel
                        .rows
                        .iter()
                        .filter_map(|row| row.get(c))
                        .map(|cell| cell.chars().count())
                        .chain(std::iter::once(panel.headers[c].len()))
                        .max()
                        .unwrap_or(1);
                    Constraint::Length(u16::try_from(widest).unwrap_or(u16::MAX))
                })
                .collect();
            let header = Row::new(panel.headers.iter().map(|h| h.trim_start_matches('#')))
                .style(Style::default().add_modifier(Modifier::BOLD));
            let rows = panel.rows.iter().map(|row| Row::new(row.clone()));
            let table = Table::new(rows, widths)
                .header(header)
                .column_spacing(2)
                .block(Block::bordered().title(panel.title.clone()));
            frame.render_widget(table, *area);
        }
    }
}
