//! `ferromq admin top`: a live view of a cluster, refreshed every second: each broker's
//! rates, put latency, disk and replication, each topic's message rate, and each consumer
//! group's rate and lag. On a terminal it draws a full-screen view (ratatui) until `q`,
//! Esc or Ctrl-C; otherwise (a pipe, a file) it prints the same tables as text at each
//! refresh, as `top -b` does.
//!
//! Every figure comes from a [`snapshot`](super::snapshot) of the admin requests mqadmin
//! uses, so `top` watches any RocketMQ broker.
//!
//! Tested through a pseudo-terminal by `tests/admin_top.rs`.

use super::output::Table;
use super::snapshot::{rate, take_sample, Sample};
use super::{AdminClient, AdminError};
use std::io::IsTerminal;
use std::time::Duration;

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
        let sample = take_sample(client, args.cluster.as_deref(), args.max_topics)?;
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

/// The view of `sample`, with rates against `previous`.
fn panels(previous: Option<&Sample>, sample: &Sample) -> Vec<Panel> {
    let seconds = previous.map_or(0.0, |p| sample.at.duration_since(p.at).as_secs_f64());
    let brokers = sample.brokers.iter().map(|b| b.cells().to_vec()).collect();
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
        let first = take_sample(client, args.cluster.as_deref(), args.max_topics)?;
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
            match take_sample(client, args.cluster.as_deref(), args.max_topics) {
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
