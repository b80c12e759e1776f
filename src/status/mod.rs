//! The status page, on the metrics endpoint's port (`/`, beside `/metrics`): the cluster,
//! its brokers with role and replication, topics with their rates, consumer groups with
//! their lag per queue, the last fifteen minutes of rates and latency as charts, message
//! lookup by id and by key, and the admin actions rocketmq-dashboard users use most
//! (create or update a topic, reset a group's offset, resend a dead-lettered message).
//!
//! Everything it shows or does goes through the admin requests mqadmin sends
//! ([`crate::admin`]), to the name servers the broker registers with, so the page shows
//! the whole cluster, Java brokers in it included. A sampler thread takes a
//! [`snapshot`](crate::admin::snapshot) every `statusPageSampleIntervalMs` and keeps fifteen
//! minutes of them; pages are rendered from those (server-side HTML and SVG, no script
//! but a few lines that reload the live part, nothing fetched from the network).
//!
//! With `aclEnable` the page asks for HTTP Basic credentials (an ACL account's access
//! and secret key) and signs every admin request with them, so the broker's ACL decides
//! what the page may read and do; the sampler reads with the last accepted viewer's.
//!
//! Tested in headless Chromium by `tests/status_page.rs`.

mod http;
mod render;

use crate::admin::snapshot::{take_sample, Sample};
use crate::admin::{AdminClient, AdminError};
use ferromq_protocol::acl::Credentials;
use ferromq_protocol::calendar::now_ms;
use ferromq_shards::Shutdown;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

pub use http::answer;

/// How much history the charts show.
const HISTORY: Duration = Duration::from_secs(15 * 60);
/// Most topics a snapshot reads per broker (as `admin top --maxTopics`).
const TOPICS_MAX: usize = 200;
/// How long one admin request may take.
const ADMIN_TIMEOUT: Duration = Duration::from_secs(5);

/// One snapshot and the wall-clock time it was taken, for the charts' axis.
#[derive(Debug)]
struct Snapshot {
    wall_ms: i64,
    sample: Sample,
}

/// The page's state: where it reads the cluster, and the snapshots kept.
#[derive(Debug)]
pub struct StatusPage {
    /// The name servers, `;`-joined as `namesrvAddr`; `None` when the broker has none.
    namesrv: Option<String>,
    /// With ACL on: the broker that checks a viewer's credentials.
    acl_check_addr: Option<String>,
    interval: Duration,
    history: Mutex<VecDeque<Snapshot>>,
    /// With ACL on: the credentials of the last viewer the broker accepted.
    viewer: Mutex<Option<Credentials>>,
    /// With ACL on: per access key, the secret the broker accepted and when.
    trusted: Mutex<HashMap<String, (String, Instant)>>,
    /// The last sampling error, shown on the page.
    problem: Mutex<Option<String>>,
}

impl StatusPage {
    /// A page reading the cluster through `namesrv` every `interval`; with
    /// `acl_check_addr`, viewers sign in and that broker checks their keys.
    #[must_use]
    pub fn new(
        namesrv: Option<String>,
        acl_check_addr: Option<String>,
        interval: Duration,
    ) -> StatusPage {
        StatusPage {
            namesrv,
            acl_check_addr,
            interval: interval.max(Duration::from_millis(100)),
            history: Mutex::new(VecDeque::new()),
            viewer: Mutex::new(None),
            trusted: Mutex::new(HashMap::new()),
            problem: Mutex::new(None),
        }
    }

    /// The cluster of the first broker of the last snapshot.
    fn cluster_name(&self) -> Option<String> {
        lock(&self.history)
            .back()
            .and_then(|last| last.sample.brokers.first())
            .map(|broker| broker.cluster.clone())
    }

    /// Starts the sampler thread; it ends at `shutdown`.
    ///
    /// # Errors
    /// The thread cannot start.
    pub fn start_sampler(self: &Arc<Self>, shutdown: Shutdown) -> std::io::Result<()> {
        let page = Arc::clone(self);
        std::thread::Builder::new()
            .name("status-sampler".to_owned())
            .spawn(move || page.sample_until(&shutdown))
            .map(drop)
    }

    fn sample_until(&self, shutdown: &Shutdown) {
        let mut client: Option<(AdminClient, Option<Credentials>)> = None;
        while !shutdown.is_triggered() {
            let credentials = lock(&self.viewer).clone();
            let stale = client.as_ref().is_none_or(|(_, used)| *used != credentials);
            if stale {
                client = match self.admin_client(credentials.clone()) {
                    Ok(made) => Some((made, credentials)),
                    Err(error) => {
                        *lock(&self.problem) = Some(error.to_string());
                        None
                    }
                };
            }
            if let Some((admin, _)) = client.as_mut() {
                if self.acl_check_addr.is_some() && lock(&self.viewer).is_none() {
                    *lock(&self.problem) = Some("sign in to see the cluster (ACL)".to_owned());
                } else {
                    self.sample_once(admin);
                }
            }
            // Sleep in short steps so that a shutdown ends the thread soon.
            let until = Instant::now() + self.interval;
            while !shutdown.is_triggered() && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(50).min(self.interval));
            }
        }
    }

    fn sample_once(&self, admin: &mut AdminClient) {
        match take_sample(admin, None, TOPICS_MAX) {
            Ok(sample) => {
                *lock(&self.problem) = None;
                let keep = usize::try_from(HISTORY.as_millis() / self.interval.as_millis().max(1))
                    .unwrap_or(usize::MAX)
                    .max(2);
                let mut history = lock(&self.history);
                history.push_back(Snapshot {
                    wall_ms: now_ms(),
                    sample,
                });
                while history.len() > keep {
                    history.pop_front();
                }
            }
            Err(error) => {
                tracing::debug!(%error, "status page: cannot read the cluster");
                *lock(&self.problem) = Some(error.to_string());
            }
        }
    }

    /// An admin client to the name servers, signing with `credentials`.
    fn admin_client(&self, credentials: Option<Credentials>) -> Result<AdminClient, AdminError> {
        let mut client = AdminClient::new(self.namesrv.as_deref(), ADMIN_TIMEOUT)?;
        client.set_credentials(credentials);
        Ok(client)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while a lock was held leaves plain data behind; it is still readable.
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
