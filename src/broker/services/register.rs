//! Registration with the name servers (`registerBrokerAll`): on Java's schedule (at start,
//! 10 s later, then every `registerNameServerPeriod`; see [`Schedule`]) and at once after a
//! topic change, the broker sends REGISTER_BROKER with its topic configs to every name server
//! in `namesrvAddr`; at shutdown, UNREGISTER_BROKER.
//!
//! The connection to each name server stays open between registrations, as Java's does: a
//! name server drops a broker's routes when the connection it registered on closes.
//!
//! Runs on its own thread with a small tokio runtime: the remoting client is tokio's, and
//! registration is slow, rare network work that has no place on a shard.

use crate::broker::state::{BrokerState, PERM_READ, PERM_WRITE};
use crate::remoting::body::{DataVersion, TopicConfigSerializeWrapper};
use crate::remoting::client::{connect_tokio, ClientConfig, RemotingClient};
use crate::remoting::headers::{
    RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnregisterBrokerRequestHeader,
};
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use ferromq_shards::Shutdown;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long one registration may take.
const REGISTER_TIMEOUT: Duration = Duration::from_secs(6);

/// Starts the registration thread; it unregisters and ends after `shutdown`.
#[must_use]
pub fn spawn(
    state: Arc<BrokerState>,
    addr: SocketAddr,
    shutdown: Shutdown,
) -> std::thread::JoinHandle<()> {
    crate::serve::spawn_on_runtime("register", move || async move {
        run(&state, addr, &shutdown).await;
    })
    .unwrap_or_else(|error| panic!("cannot start the registration thread: {error}"))
}

async fn run(state: &BrokerState, addr: SocketAddr, shutdown: &Shutdown) {
    if state.config.namesrv_addr.is_empty() {
        tracing::warn!("no namesrvAddr: clients cannot find this broker through a name server");
        return;
    }
    let announced = SocketAddr::new(state.config.broker_ip1, addr.port());
    let mut schedule = Schedule::new(Instant::now(), state.config.register_name_server_period);
    let mut connections = Connections::new(state, REGISTER_TIMEOUT);
    let mut next_sync = Instant::now() + SLAVE_SYNC_DELAY;
    loop {
        let changes = state.topic_changes();
        state.role.announced();
        for namesrv in &state.config.namesrv_addr {
            if let Err(error) = register(state, announced, namesrv, &mut connections).await {
                tracing::warn!(namesrv, %error, "registration failed");
            }
        }
        state.announced(changes);
        loop {
            if schedule.due(Instant::now()) {
                break;
            }
            if shutdown.is_triggered() {
                for namesrv in &state.config.namesrv_addr {
                    let _ = unregister(state, announced, namesrv, &mut connections).await;
                }
                return;
            }
            if state.registration_due() || state.role.announce_due() {
                break;
            }
            if state.role.is_slave() && Instant::now() >= next_sync {
                next_sync = Instant::now() + SLAVE_SYNC_PERIOD;
                sync_from_master(state, &mut connections).await;
            }
            // Woken at once by a topic change; the timeout looks at shutdown and slave sync.
            let _ = tokio::time::timeout(
                Duration::from_millis(50),
                state.registration_wanted.notified(),
            )
            .await;
        }
    }
}

/// When the periodic registrations fall due, as Java's `BrokerController.start` schedules
/// `registerBrokerAll`: one at start, the next [`SECOND_REGISTRATION_DELAY`] later, then one
/// every `registerNameServerPeriod` (at most 60 s, as Java caps it) at a fixed rate; a
/// registration after a topic change does not move them. Java also raises a period below
/// 10 s to 10 s; ferromq keeps it (tests register every 200 ms), and so the second
/// registration comes after the period when that is shorter than 10 s.
#[derive(Debug)]
struct Schedule {
    next: Instant,
    period: Duration,
}

/// Java's initial delay of the periodic registration: a slave that started before its master
/// learns the master's address this soon, not a whole period later.
const SECOND_REGISTRATION_DELAY: Duration = Duration::from_secs(10);
/// Java's cap on `registerNameServerPeriod`.
const REGISTRATION_PERIOD_MAX: Duration = Duration::from_secs(60);

impl Schedule {
    /// The schedule of a broker whose first registration is at `start`.
    fn new(start: Instant, period: Duration) -> Schedule {
        let period = period
            .min(REGISTRATION_PERIOD_MAX)
            .max(Duration::from_millis(1));
        Schedule {
            next: start + SECOND_REGISTRATION_DELAY.min(period),
            period,
        }
    }

    /// Whether a registration is due at `now`; if so, the next one is scheduled.
    fn due(&mut self, now: Instant) -> bool {
        if now < self.next {
            return false;
        }
        self.next += self.period;
        // A registration that took longer than a period skips the rounds it missed.
        while self.next <= now {
            self.next += self.period;
        }
        true
    }
}

/// A slave first takes its master's tables this long after start (4.9: 3 s)...
const SLAVE_SYNC_DELAY: Duration = Duration::from_secs(3);
/// ...and again this often (4.9's `syncAll` every 10 s).
const SLAVE_SYNC_PERIOD: Duration = Duration::from_secs(10);

/// A slave's `SlaveSynchronize.syncAll`: the master's topics, consumer offsets, delay
/// offsets and subscription groups (`reference/ha.md` §4), from the master the name server
/// named. A failure is logged and waits for the next round.
async fn sync_from_master(state: &BrokerState, connections: &mut Connections) {
    let Some(master) = state.master.master() else {
        return;
    };
    let mut bodies = Vec::new();
    for code in [
        RequestCode::GET_ALL_TOPIC_CONFIG,
        RequestCode::GET_ALL_CONSUMER_OFFSET,
        RequestCode::GET_ALL_DELAY_OFFSET,
        RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
    ] {
        match connections
            .request(&master, RemotingCommand::request(code))
            .await
        {
            Ok(response) if response.code == ResponseCode::SUCCESS.0 => bodies.push(response.body),
            Ok(response) => {
                let remark = response.remark.unwrap_or_default();
                tracing::warn!(
                    master,
                    code = code.0,
                    answer = response.code,
                    remark,
                    "slave sync"
                );
                return;
            }
            Err(error) => {
                tracing::warn!(master, code = code.0, %error, "slave sync failed");
                return;
            }
        }
    }
    let [topics, offsets, delay, groups] = <[Vec<u8>; 4]>::try_from(bodies).expect("four bodies");
    match state.take_masters_tables(&topics, &offsets, &groups) {
        Ok(changed) if !changed.is_empty() => {
            tracing::info!(master, ?changed, "slave: took the master's tables");
        }
        Ok(_) => {}
        Err(problem) => tracing::warn!(master, problem, "slave sync: bad table"),
    }
    // Kept for the day this broker is a master again; the scheduler does not run on a slave.
    if crate::store::config_files::DelayOffsetTable::parse(&delay).is_ok() {
        let path = state.config.store.config_dir().join("delayOffset.json");
        let version = crate::config::persist::next_snapshot_version();
        if let Err(error) = crate::config::persist::write_snapshot(&path, version, &delay) {
            tracing::warn!(%error, "slave sync: cannot write delayOffset.json");
        }
    }
}

/// One open connection per name server (or master, or controller), all made with the
/// broker's own TLS settings; a request that fails closes its connection.
pub(super) struct Connections {
    open: HashMap<String, RemotingClient>,
    config: ClientConfig,
    timeout: Duration,
}

impl Connections {
    /// No connection yet; each request may take `timeout`.
    pub(super) fn new(state: &BrokerState, timeout: Duration) -> Connections {
        Connections {
            open: HashMap::new(),
            config: ClientConfig {
                tls: state.own_tls.clone(),
                ..ClientConfig::default()
            },
            timeout,
        }
    }

    pub(super) async fn request(
        &mut self,
        namesrv: &str,
        command: RemotingCommand,
    ) -> Result<RemotingCommand, String> {
        let client = self.client(namesrv).await?;
        let answer = client.request_timeout(command, self.timeout).await;
        if answer.is_err() {
            self.open.remove(namesrv);
        }
        answer.map_err(|e| e.to_string())
    }

    /// Sends `command` one-way (no answer is waited for).
    pub(super) async fn oneway(
        &mut self,
        peer: &str,
        command: RemotingCommand,
    ) -> Result<(), String> {
        let client = self.client(peer).await?;
        let sent = tokio::time::timeout(self.timeout, client.oneway(command)).await;
        match sent {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => {
                self.open.remove(peer);
                Err(error.to_string())
            }
            Err(_) => {
                self.open.remove(peer);
                Err("timed out".to_owned())
            }
        }
    }

    /// The open connection to `namesrv`, made if there is none.
    async fn client(&mut self, namesrv: &str) -> Result<RemotingClient, String> {
        let client = match self.open.get(namesrv).filter(|c| !c.is_closed()) {
            Some(client) => client.clone(),
            None => {
                let addr: SocketAddr = tokio::net::lookup_host(namesrv)
                    .await
                    .map_err(|e| e.to_string())?
                    .next()
                    .ok_or_else(|| format!("{namesrv} resolves to nothing"))?;
                let connecting = connect_tokio(addr, self.config.clone());
                let (client, _inbound) = tokio::time::timeout(self.timeout, connecting)
                    .await
                    .map_err(|_| format!("connecting to {namesrv} timed out"))?
                    .map_err(|e| e.to_string())?;
                self.open.insert(namesrv.to_owned(), client.clone());
                client
            }
        };
        Ok(client)
    }
}

async fn register(
    state: &BrokerState,
    announced: SocketAddr,
    namesrv: &str,
    connections: &mut Connections,
) -> Result<(), String> {
    let config = &state.config;
    let (version, topics) = state.topics();
    let mut wrapper = TopicConfigSerializeWrapper {
        data_version: DataVersion {
            counter: version.counter,
            state_version: 0,
            timestamp: version.timestamp,
        },
        ..TopicConfigSerializeWrapper::default()
    };
    // A broker that may not be read or written registers every topic with its own
    // permission, so that clients route around it (`registerBrokerAll`).
    let permission = state.runtime().broker_permission;
    let read_write = PERM_READ | PERM_WRITE;
    for (_, mut topic) in topics {
        if permission & read_write != read_write {
            topic.perm = permission;
        }
        wrapper.insert(topic);
    }
    let body = serde_json::json!({
        "topicConfigSerializeWrapper": wrapper,
        "filterServerList": [],
    })
    .to_string()
    .into_bytes();
    let header = RegisterBrokerRequestHeader {
        broker_name: config.broker_name.clone(),
        broker_addr: announced.to_string(),
        cluster_name: config.broker_cluster_name.clone(),
        ha_server_addr: SocketAddr::new(config.broker_ip2(), announced.port() + 1).to_string(),
        broker_id: state.role.broker_id(),
        heartbeat_timeout_millis: None,
        enable_acting_master: None,
        compressed: Some(false),
        body_crc32: Some(crate::bytes::java_crc32(&body)),
    };
    let mut command = RemotingCommand::request_with_header(RequestCode::REGISTER_BROKER, &header);
    command.body = body;
    let response = connections.request(namesrv, command).await?;
    if response.code != ResponseCode::SUCCESS.0 {
        return Err(format!(
            "code {} {}",
            response.code,
            response.remark.unwrap_or_default()
        ));
    }
    // In controller mode the controller names the master, not the name server.
    if state.role.is_slave() && !config.controller_mode.enable {
        if let Ok(answer) = response.decode_header::<RegisterBrokerResponseHeader>() {
            state
                .master
                .learned(answer.master_addr, answer.ha_server_addr);
        }
    }
    tracing::debug!(namesrv, "registered");
    Ok(())
}

async fn unregister(
    state: &BrokerState,
    announced: SocketAddr,
    namesrv: &str,
    connections: &mut Connections,
) -> Result<(), String> {
    let config = &state.config;
    let header = UnregisterBrokerRequestHeader {
        broker_name: config.broker_name.clone(),
        broker_addr: announced.to_string(),
        cluster_name: config.broker_cluster_name.clone(),
        broker_id: state.role.broker_id(),
    };
    let command = RemotingCommand::request_with_header(RequestCode::UNREGISTER_BROKER, &header);
    connections.request(namesrv, command).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The times, in seconds after the first registration, at which `Schedule` registers
    /// again, looked at every 50 ms for `seconds`.
    fn registrations(period: Duration, seconds: u64) -> Vec<f64> {
        let start = Instant::now();
        let mut schedule = Schedule::new(start, period);
        let mut times = Vec::new();
        for tick in 0..=seconds * 20 {
            let now = start + Duration::from_millis(tick * 50);
            if schedule.due(now) {
                times.push((now - start).as_secs_f64());
            }
        }
        times
    }

    #[test]
    fn schedule_registers_10_s_after_start_then_every_period() {
        assert_eq!(
            registrations(Duration::from_secs(30), 100),
            vec![10.0, 40.0, 70.0, 100.0]
        );
        assert_eq!(
            registrations(Duration::from_secs(600), 200),
            vec![10.0, 70.0, 130.0, 190.0]
        );
        assert_eq!(
            registrations(Duration::from_secs(2), 6),
            vec![2.0, 4.0, 6.0]
        );
    }

    #[test]
    fn schedule_skips_rounds_missed_by_a_slow_registration() {
        let start = Instant::now();
        let mut schedule = Schedule::new(start, Duration::from_secs(30));
        assert!(schedule.due(start + Duration::from_secs(75)));
        assert!(!schedule.due(start + Duration::from_secs(99)));
        assert!(schedule.due(start + Duration::from_secs(100)));
    }
}
