//! `RouteInfoManager`: the name server's tables of topics, brokers and clusters.
//!
//! Mirrors `NS/routeinfo/RouteInfoManager.java` (`reference/namesrv.md` §2, §4–§7). Plain data
//! with no I/O and no clock of its own: every call that depends on time takes `now_ms`, so
//! liveness is tested without waiting. It is owned by the name server's control shard and
//! mutated only by that shard's pump.
//!
//! Choices where 4.9.x and 5.x differ: a registration is accepted whatever its topic count
//! (4.9.x; 5.x refuses a single-topic registration from an unknown broker, which would make a
//! 4.9.x broker's incremental registration after a name server restart fail until its next
//! full one); a broker's own `heartbeatTimeoutMillis` (5.x) overrides the default expiry.

use crate::remoting::body::{
    BrokerData, ClusterInfo, DataVersion, QueueData, RegisterBrokerBody, TopicRouteData,
};
use crate::remoting::server::ConnectionId;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// `PermName.PERM_WRITE`.
pub const PERM_WRITE: i32 = 2;
/// Master broker id.
pub const MASTER_ID: i64 = 0;

/// A broker's identity within a cluster (`BrokerAddrInfo`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BrokerAddrInfo {
    /// Cluster name.
    pub cluster: String,
    /// `host:port`.
    pub addr: String,
}

/// Liveness of one broker (`BrokerLiveInfo`).
#[derive(Clone, Debug)]
pub struct BrokerLiveInfo {
    /// Last registration or heartbeat, ms since the epoch.
    pub last_update_ms: u64,
    /// Silence after which the broker is dropped.
    pub timeout_ms: u64,
    /// Version of the topic table last registered.
    pub data_version: DataVersion,
    /// Connection the broker registered on.
    pub channel: Option<ConnectionId>,
    /// HA address (`brokerIP2:haListenPort`).
    pub ha_server_addr: String,
    /// Broker name, to undo the registration without another lookup.
    pub broker_name: String,
    /// Broker id.
    pub broker_id: i64,
}

/// Everything REGISTER_BROKER carries.
#[derive(Clone, Debug)]
pub struct Registration {
    /// Cluster name.
    pub cluster: String,
    /// `host:port`.
    pub broker_addr: String,
    /// Broker name.
    pub broker_name: String,
    /// 0 for the master.
    pub broker_id: i64,
    /// HA address.
    pub ha_server_addr: String,
    /// 5.x zone (`__ZONE_NAME`).
    pub zone_name: Option<String>,
    /// 5.x per-broker expiry.
    pub timeout_ms: Option<u64>,
    /// 5.x acting master flag.
    pub enable_acting_master: bool,
    /// Topic configs and filter servers.
    pub body: RegisterBrokerBody,
    /// Connection it arrived on.
    pub channel: Option<ConnectionId>,
}

/// What a registration answers (`RegisterBrokerResult`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RegisterResult {
    /// For a slave: the live master's address.
    pub master_addr: Option<String>,
    /// For a slave: the live master's HA address.
    pub ha_server_addr: Option<String>,
}

/// The route tables.
#[derive(Debug)]
pub struct RouteInfoManager {
    topic_queue_table: HashMap<String, BTreeMap<String, QueueData>>,
    broker_addr_table: BTreeMap<String, BrokerData>,
    cluster_addr_table: BTreeMap<String, BTreeSet<String>>,
    broker_live_table: HashMap<BrokerAddrInfo, BrokerLiveInfo>,
    filter_server_table: HashMap<BrokerAddrInfo, Vec<String>>,
    default_timeout_ms: u64,
}

impl RouteInfoManager {
    /// Empty tables; brokers expire after `default_timeout_ms` of silence.
    #[must_use]
    pub fn new(default_timeout_ms: u64) -> RouteInfoManager {
        RouteInfoManager {
            topic_queue_table: HashMap::new(),
            broker_addr_table: BTreeMap::new(),
            cluster_addr_table: BTreeMap::new(),
            broker_live_table: HashMap::new(),
            filter_server_table: HashMap::new(),
            default_timeout_ms,
        }
    }

    /// REGISTER_BROKER (`registerBroker`).
    pub fn register_broker(&mut self, registration: Registration, now_ms: u64) -> RegisterResult {
        let Registration {
            cluster,
            broker_addr,
            broker_name,
            broker_id,
            ha_server_addr,
            zone_name,
            timeout_ms,
            enable_acting_master,
            body,
            channel,
        } = registration;
        self.cluster_addr_table
            .entry(cluster.clone())
            .or_default()
            .insert(broker_name.clone());

        let broker = self
            .broker_addr_table
            .entry(broker_name.clone())
            .or_insert_with(|| BrokerData {
                cluster: cluster.clone(),
                broker_name: broker_name.clone(),
                broker_addrs: BTreeMap::new(),
                enable_acting_master,
                zone_name: zone_name.clone(),
            });
        let mut register_first = broker.broker_addrs.is_empty();
        broker.enable_acting_master = enable_acting_master;
        if zone_name.is_some() {
            broker.zone_name = zone_name;
        }
        // A slave switched to master (or the reverse) keeps its address under a new id.
        broker
            .broker_addrs
            .retain(|id, addr| *addr != broker_addr || *id == broker_id);
        let old_addr = broker.broker_addrs.insert(broker_id, broker_addr.clone());
        register_first |= old_addr.is_none();

        let key = BrokerAddrInfo {
            cluster: cluster.clone(),
            addr: broker_addr.clone(),
        };
        let wrapper = &body.topic_config_serialize_wrapper;
        if broker_id == MASTER_ID {
            let changed = self
                .broker_live_table
                .get(&key)
                .is_none_or(|live| live.data_version != wrapper.data_version);
            if changed || register_first {
                for config in wrapper.topic_config_table.values() {
                    let queue = QueueData {
                        broker_name: broker_name.clone(),
                        read_queue_nums: config.read_queue_nums,
                        write_queue_nums: config.write_queue_nums,
                        perm: config.perm,
                        topic_sys_flag: config.topic_sys_flag,
                    };
                    self.topic_queue_table
                        .entry(config.topic_name.clone())
                        .or_default()
                        .insert(broker_name.clone(), queue);
                }
            }
        }

        let previous = self.broker_live_table.insert(
            key.clone(),
            BrokerLiveInfo {
                last_update_ms: now_ms,
                timeout_ms: timeout_ms.unwrap_or(self.default_timeout_ms),
                data_version: wrapper.data_version,
                channel,
                ha_server_addr,
                broker_name: broker_name.clone(),
                broker_id,
            },
        );
        if previous.is_none() {
            tracing::info!(%cluster, %broker_name, broker_id, addr = %broker_addr,
                "new broker registered");
        }
        if body.filter_server_list.is_empty() {
            self.filter_server_table.remove(&key);
        } else {
            self.filter_server_table
                .insert(key, body.filter_server_list.clone());
        }

        let mut result = RegisterResult::default();
        if broker_id != MASTER_ID {
            let master_addr = self
                .broker_addr_table
                .get(&broker_name)
                .and_then(|broker| broker.broker_addrs.get(&MASTER_ID))
                .cloned();
            if let Some(master_addr) = master_addr {
                let master_key = BrokerAddrInfo {
                    cluster,
                    addr: master_addr.clone(),
                };
                if let Some(master_live) = self.broker_live_table.get(&master_key) {
                    result.ha_server_addr = Some(master_live.ha_server_addr.clone());
                    result.master_addr = Some(master_addr);
                }
            }
        }
        result
    }

    /// UNREGISTER_BROKER (`unregisterBroker`).
    pub fn unregister_broker(
        &mut self,
        cluster: &str,
        broker_addr: &str,
        broker_name: &str,
        broker_id: i64,
    ) {
        let key = BrokerAddrInfo {
            cluster: cluster.to_owned(),
            addr: broker_addr.to_owned(),
        };
        self.broker_live_table.remove(&key);
        self.filter_server_table.remove(&key);
        self.remove_broker_addr(cluster, broker_name, broker_id, broker_addr);
        tracing::info!(%cluster, %broker_name, broker_id, addr = %broker_addr,
            "broker unregistered");
    }

    fn remove_broker_addr(&mut self, cluster: &str, broker_name: &str, id: i64, addr: &str) {
        let Some(broker) = self.broker_addr_table.get_mut(broker_name) else {
            return;
        };
        if broker
            .broker_addrs
            .get(&id)
            .is_some_and(|known| known == addr)
        {
            broker.broker_addrs.remove(&id);
        }
        if !broker.broker_addrs.is_empty() {
            return;
        }
        self.broker_addr_table.remove(broker_name);
        if let Some(names) = self.cluster_addr_table.get_mut(cluster) {
            names.remove(broker_name);
            if names.is_empty() {
                self.cluster_addr_table.remove(cluster);
            }
        }
        self.topic_queue_table.retain(|_, queues| {
            queues.remove(broker_name);
            !queues.is_empty()
        });
    }

    /// Drops every broker that registered on `channel` (its connection closed).
    ///
    /// Returns how many brokers were dropped.
    pub fn on_channel_destroy(&mut self, channel: ConnectionId) -> usize {
        let gone: Vec<BrokerAddrInfo> = self
            .broker_live_table
            .iter()
            .filter(|(_, live)| live.channel == Some(channel))
            .map(|(key, _)| key.clone())
            .collect();
        for key in &gone {
            tracing::info!(cluster = %key.cluster, addr = %key.addr,
                "broker connection closed; removing its routes");
            self.drop_live(key);
        }
        gone.len()
    }

    /// Drops brokers silent past their timeout (`scanNotActiveBroker`).
    ///
    /// Returns the channels of the dropped brokers, which the caller should close.
    pub fn scan_not_active_broker(&mut self, now_ms: u64) -> Vec<ConnectionId> {
        let expired: Vec<BrokerAddrInfo> = self
            .broker_live_table
            .iter()
            .filter(|(_, live)| live.last_update_ms.saturating_add(live.timeout_ms) < now_ms)
            .map(|(key, _)| key.clone())
            .collect();
        let mut channels = Vec::new();
        for key in &expired {
            tracing::warn!(cluster = %key.cluster, addr = %key.addr, "broker expired; removing");
            if let Some(channel) = self.drop_live(key) {
                channels.push(channel);
            }
        }
        channels
    }

    fn drop_live(&mut self, key: &BrokerAddrInfo) -> Option<ConnectionId> {
        let live = self.broker_live_table.remove(key)?;
        self.filter_server_table.remove(key);
        self.remove_broker_addr(&key.cluster, &live.broker_name, live.broker_id, &key.addr);
        live.channel
    }

    /// Refreshes a broker's liveness (QUERY_DATA_VERSION, BROKER_HEARTBEAT).
    pub fn refresh(&mut self, cluster: &str, broker_addr: &str, now_ms: u64) {
        let key = BrokerAddrInfo {
            cluster: cluster.to_owned(),
            addr: broker_addr.to_owned(),
        };
        if let Some(live) = self.broker_live_table.get_mut(&key) {
            live.last_update_ms = now_ms;
        }
    }

    /// The DataVersion last registered by a broker.
    #[must_use]
    pub fn data_version(&self, cluster: &str, broker_addr: &str) -> Option<DataVersion> {
        let key = BrokerAddrInfo {
            cluster: cluster.to_owned(),
            addr: broker_addr.to_owned(),
        };
        self.broker_live_table
            .get(&key)
            .map(|live| live.data_version)
    }

    /// The route of `topic` (`pickupTopicRouteData`), `None` when no broker serves it.
    #[must_use]
    pub fn pickup_topic_route_data(&self, topic: &str) -> Option<TopicRouteData> {
        let queues = self.topic_queue_table.get(topic)?;
        let mut route = TopicRouteData::default();
        for (broker_name, queue) in queues {
            route.queue_datas.push(queue.clone());
            let Some(broker) = self.broker_addr_table.get(broker_name) else {
                continue;
            };
            route.broker_datas.push(broker.clone());
            for addr in broker.broker_addrs.values() {
                let key = BrokerAddrInfo {
                    cluster: broker.cluster.clone(),
                    addr: addr.clone(),
                };
                if let Some(servers) = self.filter_server_table.get(&key) {
                    route
                        .filter_server_table
                        .insert(addr.clone(), servers.clone());
                }
            }
        }
        (!route.broker_datas.is_empty()).then_some(route)
    }

    /// GET_BROKER_CLUSTER_INFO body.
    #[must_use]
    pub fn cluster_info(&self) -> ClusterInfo {
        ClusterInfo {
            broker_addr_table: self.broker_addr_table.clone(),
            cluster_addr_table: self
                .cluster_addr_table
                .iter()
                .map(|(cluster, names)| (cluster.clone(), names.iter().cloned().collect()))
                .collect(),
        }
    }

    /// Every topic with queue data, sorted.
    #[must_use]
    pub fn all_topics(&self) -> Vec<String> {
        let mut topics: Vec<String> = self.topic_queue_table.keys().cloned().collect();
        topics.sort();
        topics
    }

    /// Topics with queue data on any broker of `cluster`.
    #[must_use]
    pub fn topics_by_cluster(&self, cluster: &str) -> Vec<String> {
        let Some(names) = self.cluster_addr_table.get(cluster) else {
            return Vec::new();
        };
        let mut topics: Vec<String> = self
            .topic_queue_table
            .iter()
            .filter(|(_, queues)| queues.keys().any(|name| names.contains(name)))
            .map(|(topic, _)| topic.clone())
            .collect();
        topics.sort();
        topics
    }

    /// GET_SYSTEM_TOPIC_LIST_FROM_NS: cluster and broker names, and some broker's address.
    #[must_use]
    pub fn system_topic_list(&self) -> (Vec<String>, Option<String>) {
        let mut topics = Vec::new();
        for (cluster, names) in &self.cluster_addr_table {
            topics.push(cluster.clone());
            topics.extend(names.iter().cloned());
        }
        let addr = self
            .broker_addr_table
            .values()
            .find_map(|b| b.broker_addrs.values().next());
        (topics, addr.cloned())
    }

    /// Topics whose queue data has all of the given `topicSysFlag` bits (unit topics).
    #[must_use]
    pub fn topics_with_sys_flag(&self, flag: i32, without: i32) -> Vec<String> {
        let mut topics: Vec<String> = self
            .topic_queue_table
            .iter()
            .filter(|(_, queues)| {
                queues.values().next().is_some_and(|q| {
                    q.topic_sys_flag & flag == flag && q.topic_sys_flag & without == 0
                })
            })
            .map(|(topic, _)| topic.clone())
            .collect();
        topics.sort();
        topics
    }

    /// DELETE_TOPIC_IN_NAMESRV: the whole topic, or only the given cluster's brokers.
    pub fn delete_topic(&mut self, topic: &str, cluster: Option<&str>) {
        let names = cluster.and_then(|cluster| self.cluster_addr_table.get(cluster));
        match (cluster, names) {
            (None, _) => {
                self.topic_queue_table.remove(topic);
            }
            (Some(_), None) => {}
            (Some(_), Some(names)) => {
                if let Some(queues) = self.topic_queue_table.get_mut(topic) {
                    queues.retain(|name, _| !names.contains(name));
                    if queues.is_empty() {
                        self.topic_queue_table.remove(topic);
                    }
                }
            }
        }
    }

    /// REGISTER_TOPIC_IN_NAMESRV (5.x): add or replace queue data of brokers that exist.
    pub fn register_topic(&mut self, topic: &str, queue_datas: Vec<QueueData>) {
        for queue in queue_datas {
            if self.broker_addr_table.contains_key(&queue.broker_name) {
                self.topic_queue_table
                    .entry(topic.to_owned())
                    .or_default()
                    .insert(queue.broker_name.clone(), queue);
            }
        }
    }

    /// WIPE_WRITE_PERM_OF_BROKER (`wipe`) or ADD_WRITE_PERM_OF_BROKER (`!wipe`): returns how
    /// many topics changed.
    pub fn set_write_perm(&mut self, broker_name: &str, wipe: bool) -> i32 {
        let mut count = 0;
        for queues in self.topic_queue_table.values_mut() {
            if let Some(queue) = queues.get_mut(broker_name) {
                queue.perm = if wipe {
                    queue.perm & !PERM_WRITE
                } else {
                    queue.perm | PERM_WRITE
                };
                count += 1;
            }
        }
        count
    }

    /// Brokers of `broker_name` in `cluster` (GET_BROKER_MEMBER_GROUP).
    #[must_use]
    pub fn broker_member_group(&self, cluster: &str, broker_name: &str) -> BTreeMap<i64, String> {
        self.broker_addr_table
            .get(broker_name)
            .filter(|broker| broker.cluster == cluster)
            .map(|broker| broker.broker_addrs.clone())
            .unwrap_or_default()
    }

    /// Number of live brokers (for logs and tests).
    #[must_use]
    pub fn live_broker_count(&self) -> usize {
        self.broker_live_table.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::body::TopicConfig;
    use ferromq_shards::ShardId;

    fn registration(
        name: &str,
        addr: &str,
        id: i64,
        topics: &[&str],
        counter: i64,
    ) -> Registration {
        let mut body = RegisterBrokerBody::default();
        for topic in topics {
            body.topic_config_serialize_wrapper
                .insert(TopicConfig::named(topic));
        }
        body.topic_config_serialize_wrapper.data_version.counter = counter;
        Registration {
            cluster: "c".into(),
            broker_addr: addr.into(),
            broker_name: name.into(),
            broker_id: id,
            ha_server_addr: format!("{addr}-ha"),
            zone_name: None,
            timeout_ms: None,
            enable_acting_master: false,
            body,
            channel: Some(ConnectionId {
                shard: ShardId(0),
                seq: addr.rsplit(':').next().unwrap().parse().unwrap(),
            }),
        }
    }

    #[test]
    fn register_two_brokers_route_lists_both() {
        let mut routes = RouteInfoManager::new(120_000);
        routes.register_broker(registration("a", "h:1", 0, &["T"], 1), 0);
        routes.register_broker(registration("b", "h:2", 0, &["T"], 1), 0);
        let route = routes.pickup_topic_route_data("T").unwrap();
        assert_eq!(route.broker_datas.len(), 2);
        assert_eq!(route.queue_datas.len(), 2);
        assert!(routes.pickup_topic_route_data("missing").is_none());
    }

    #[test]
    fn register_slave_returns_master_addresses() {
        let mut routes = RouteInfoManager::new(120_000);
        routes.register_broker(registration("a", "h:1", 0, &["T"], 1), 0);
        let result = routes.register_broker(registration("a", "h:9", 1, &["T"], 1), 0);
        assert_eq!(result.master_addr.as_deref(), Some("h:1"));
        assert_eq!(result.ha_server_addr.as_deref(), Some("h:1-ha"));
    }

    #[test]
    fn scan_expired_broker_removes_its_routes() {
        let mut routes = RouteInfoManager::new(1_000);
        routes.register_broker(registration("a", "h:1", 0, &["T"], 1), 0);
        assert!(routes.scan_not_active_broker(1_000).is_empty());
        assert_eq!(routes.scan_not_active_broker(1_001).len(), 1);
        assert!(routes.pickup_topic_route_data("T").is_none());
        assert!(routes.cluster_info().cluster_addr_table.is_empty());
    }

    #[test]
    fn channel_destroy_removes_only_that_broker() {
        let mut routes = RouteInfoManager::new(120_000);
        routes.register_broker(registration("a", "h:1", 0, &["T"], 1), 0);
        routes.register_broker(registration("b", "h:2", 0, &["T"], 1), 0);
        let gone = routes.on_channel_destroy(ConnectionId {
            shard: ShardId(0),
            seq: 1,
        });
        assert_eq!(gone, 1);
        let route = routes.pickup_topic_route_data("T").unwrap();
        assert_eq!(route.broker_datas.len(), 1);
        assert_eq!(route.broker_datas[0].broker_name, "b");
    }

    #[test]
    fn unchanged_data_version_keeps_queue_data() {
        let mut routes = RouteInfoManager::new(120_000);
        routes.register_broker(registration("a", "h:1", 0, &["T"], 1), 0);
        routes.set_write_perm("a", true);
        // Same data version: queue data is not rewritten, so the wiped perm stays.
        routes.register_broker(registration("a", "h:1", 0, &["T"], 1), 0);
        assert_eq!(
            routes.pickup_topic_route_data("T").unwrap().queue_datas[0].perm,
            4
        );
        routes.register_broker(registration("a", "h:1", 0, &["T"], 2), 0);
        assert_eq!(
            routes.pickup_topic_route_data("T").unwrap().queue_datas[0].perm,
            6
        );
    }
}
