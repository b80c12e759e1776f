//! Idle connections held through a run (`--idle-connections N`): opened before the senders
//! start, spread over the brokers, each answering one GET_MAX_OFFSET then and one again
//! after the run; with `--server-pid`, the server's resident memory before the opening, once
//! they are open, and at the end, and from that its memory per idle connection.

use super::target;
use super::Target;
use ferromq::remoting::client::{ClientConfig, RemotingClient};
use std::time::{Duration, Instant};

/// Connections opened at once while opening.
const OPENING_AT_ONCE: usize = 256;

/// What the idle connections saw.
#[derive(Clone, Debug)]
pub struct IdleReport {
    /// Connections opened (each answered its first request).
    pub opened: usize,
    /// Seconds the opening took.
    pub open_secs: f64,
    /// Of `opened`, those that answered again after the run.
    pub answering_at_end: usize,
    /// The server's anonymous resident memory (RssAnon, KiB) before, once open, and at the
    /// end.
    pub rss_kib: Option<[u64; 3]>,
}

impl IdleReport {
    /// Server memory per idle connection, KiB: growth from before to open, over `opened`.
    #[must_use]
    pub fn kib_per_connection(&self) -> Option<f64> {
        let [before, open, _] = self.rss_kib?;
        (self.opened > 0).then(|| open.saturating_sub(before) as f64 / self.opened as f64)
    }
}

/// The connections, open, and the memory figures known so far.
pub struct Idle {
    connections: Vec<RemotingClient>,
    open_secs: f64,
    rss_before: Option<u64>,
    rss_open: Option<u64>,
    server_pid: Option<u32>,
}

/// RssAnon of `pid` in KiB, from `/proc`: its heap and stacks, not the files it maps
/// (a broker's CommitLog pages come and go with the page cache).
fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("RssAnon:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Whether `client` answers GET_MAX_OFFSET of `topic` queue 0.
async fn answers(client: &RemotingClient, topic: &str) -> bool {
    target::max_offset(client, topic, 0).await.is_ok()
}

/// Opens `count` connections over `targets`, each answering once; progress on stderr.
///
/// # Errors
/// A connection that cannot be made or does not answer.
pub async fn open(
    targets: &[Target],
    count: usize,
    config: &ClientConfig,
    topic: &str,
    server_pid: Option<u32>,
) -> anyhow::Result<Idle> {
    let rss_before = server_pid.and_then(rss_kib);
    let started = Instant::now();
    let mut connections = Vec::with_capacity(count);
    let mut last_report = Instant::now();
    while connections.len() < count {
        let wave = OPENING_AT_ONCE.min(count - connections.len());
        let opening = (0..wave).map(|i| {
            let addr = targets[(connections.len() + i) % targets.len()].broker.addr;
            async move {
                let client = target::connect(addr, config).await?;
                anyhow::ensure!(answers(&client, topic).await, "idle connection to {addr}");
                Ok(client)
            }
        });
        for opened in futures::future::join_all(opening).await {
            connections.push(opened?);
        }
        if last_report.elapsed() > Duration::from_secs(1) {
            eprintln!("[idle] {} of {count} connections open", connections.len());
            last_report = Instant::now();
        }
    }
    // The server's memory once its side of every connection has settled.
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(Idle {
        open_secs: started.elapsed().as_secs_f64(),
        connections,
        rss_before,
        rss_open: server_pid.and_then(rss_kib),
        server_pid,
    })
}

impl Idle {
    /// Asks every connection once more, `OPENING_AT_ONCE` at a time.
    pub async fn check(self, topic: &str) -> IdleReport {
        let mut answering = 0;
        for wave in self.connections.chunks(OPENING_AT_ONCE) {
            let asked = futures::future::join_all(wave.iter().map(|c| answers(c, topic))).await;
            answering += asked.into_iter().filter(|ok| *ok).count();
        }
        let rss_end = self.server_pid.and_then(rss_kib);
        IdleReport {
            opened: self.connections.len(),
            open_secs: self.open_secs,
            answering_at_end: answering,
            rss_kib: match (self.rss_before, self.rss_open, rss_end) {
                (Some(a), Some(b), Some(c)) => Some([a, b, c]),
                _ => None,
            },
        }
    }
}
