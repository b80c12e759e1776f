//! Broker configuration: `broker.conf` keys (`BrokerConfig`, `MessageStoreConfig` and
//! `NettyServerConfig` in Java) with Java's defaults. Store keys fill a [`StoreConfig`].

use super::properties::Property;
use super::{bad_value as bad, parse_bool, parse_millis as millis, parse_value, ConfigError};
use crate::limits;
use crate::store::config::StoreConfig;
use crate::store::dispatch::DelayLevels;
use crate::store::flush::FlushDiskType;
use ferromq_shards::Placement;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// `brokerRole`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerRole {
    /// `ASYNC_MASTER` (default).
    AsyncMaster,
    /// `SYNC_MASTER`.
    SyncMaster,
    /// `SLAVE`.
    Slave,
}

impl BrokerRole {
    /// Java's name.
    #[must_use]
    pub fn java_name(self) -> &'static str {
        match self {
            BrokerRole::AsyncMaster => "ASYNC_MASTER",
            BrokerRole::SyncMaster => "SYNC_MASTER",
            BrokerRole::Slave => "SLAVE",
        }
    }
}

/// Broker settings.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// `brokerClusterName` (`DefaultCluster`).
    pub broker_cluster_name: String,
    /// `brokerName` (Java: the host name).
    pub broker_name: String,
    /// `brokerId` (0: master).
    pub broker_id: i64,
    /// `namesrvAddr`: name servers, `;`-separated (default `NAMESRV_ADDR` from the
    /// environment, else none).
    pub namesrv_addr: Vec<String>,
    /// `brokerIP1`: the address the broker tells name servers and clients.
    pub broker_ip1: IpAddr,
    /// `brokerIP2`: the address of the HA port (`listenPort + 1`) the broker tells name
    /// servers (`haServerAddr`), so slaves; unset, `brokerIP1` (Java: the local address, which
    /// is also its `brokerIP1`'s default).
    pub broker_ip2: Option<IpAddr>,
    /// `bindAddress` (ferromq: where to listen; default all interfaces).
    pub bind_address: IpAddr,
    /// `listenPort` (10911); the VIP channel listens on `listenPort - 2`.
    pub listen_port: u16,
    /// `brokerRole`.
    pub broker_role: BrokerRole,
    /// `haSendHeartbeatInterval`, `haHousekeepingInterval`, `haTransferBatchSize`: the HA
    /// link on `listenPort + 1` (4.9's port, whatever `haListenPort` says).
    pub ha: crate::broker::ha::HaConfig,
    /// `haMasterAddress` (none): a slave's master's HA address, `host:port`; without it
    /// the slave takes the one REGISTER_BROKER answers with.
    pub ha_master_address: Option<String>,
    /// `brokerPermission` (6: read and write).
    pub broker_permission: i32,
    /// `slaveReadEnable` (false): pulls are told to go to a slave (the group's
    /// `whichBrokerWhenConsumeSlowly`) when what they read is no longer in memory, and to the
    /// group's `brokerId` otherwise; without it, always to the master.
    pub slave_read_enable: bool,
    /// `enablePropertyFilter` (false): whether consumers may filter by SQL92 over message
    /// properties; without it their subscriptions are refused as Java refuses them.
    pub enable_property_filter: bool,
    /// `filterSupportRetry` (false): whether a group's retry topic is filtered by the SQL92
    /// selector the group registered for each message's original topic
    /// (`ExpressionForRetryMessageFilter`).
    pub filter_support_retry: bool,
    /// `filterDataCleanTimeSpan` (24 h): how long the SQL92 selector of a group that left is
    /// kept before it is dropped.
    pub filter_data_clean_time_span: Duration,
    /// `aclEnable` (false): every request is checked against the plain ACL files under
    /// `rocketmqHome` (see `broker::acl`).
    pub acl_enable: bool,
    /// The `tls.*` keys (Java's `TlsSystemConfig`, there JVM properties): TLS on the
    /// remoting ports and on the broker's connections to name servers.
    pub tls: crate::remoting::tls::TlsSettings,
    /// The `metrics*` keys of Java 5.x (`metricsExporterType`, `metricsPromExporterPort`, …).
    pub metrics: crate::metrics::config::MetricsConfig,
    /// The gRPC endpoint's keys (`grpcServerEnable`, `grpcServerPort`, Java's proxy limits).
    pub grpc: crate::grpc::config::GrpcConfig,
    /// `rocketmqHome` (the `ROCKETMQ_HOME` environment variable, else the working
    /// directory): where `conf/plain_acl.yml` and `conf/acl/` are.
    pub rocketmq_home: PathBuf,
    /// `autoCreateTopicEnable` (true).
    pub auto_create_topic_enable: bool,
    /// `defaultTopicQueueNums` (8): queues of an auto-created topic.
    pub default_topic_queue_nums: i32,
    /// `autoCreateSubscriptionGroup` (true).
    pub auto_create_subscription_group: bool,
    /// `longPollingEnable` (true).
    pub long_polling_enable: bool,
    /// `storeReplyMessageEnable` (true): a request-reply answer is stored in the reply
    /// topic besides being pushed to its requester.
    pub store_reply_message_enable: bool,
    /// `recallMessageEnable` (false, as Java 5.x): whether RECALL_MESSAGE may cancel a
    /// timer message.
    pub recall_message_enable: bool,
    /// The POP keys (`reviveQueueNum`, `popFromRetryProbability`, ...).
    pub pop: super::pop::PopConfig,
    /// The controller-mode keys (`enableControllerMode`, `controllerAddr`, ...).
    pub controller_mode: super::controller_mode::ControllerModeConfig,
    /// `clusterTopicEnable` (true): the cluster's topic is readable and writable.
    pub cluster_topic_enable: bool,
    /// `brokerTopicEnable` (true): the broker's own topic is readable and writable.
    pub broker_topic_enable: bool,
    /// `traceTopicEnable` (false): the broker makes the trace topic at start.
    pub trace_topic_enable: bool,
    /// `msgTraceTopicName` (`RMQ_SYS_TRACE_TOPIC`).
    pub msg_trace_topic_name: String,
    /// `configBlackList` (`configBlackList;brokerConfigPath`): keys UPDATE_BROKER_CONFIG
    /// may not change, `;`-separated (besides those two and `rocketmqHome`).
    pub config_black_list: String,
    /// The config file the broker was started with (`-c`; Java's `brokerConfigPath`, not a
    /// key): UPDATE_BROKER_CONFIG writes the keys it changes there, so that they hold after
    /// a restart.
    pub config_path: Option<PathBuf>,
    /// `shortPollingTimeMills` (1000): how long a pull without suspend flag waits.
    pub short_polling_time: Duration,
    /// `registerNameServerPeriod` (30 s).
    pub register_name_server_period: Duration,
    /// `flushConsumerOffsetInterval` (5 s).
    pub flush_consumer_offset_interval: Duration,
    /// `flushDelayOffsetInterval` (10 s): how often `delayOffset.json` is written.
    pub flush_delay_offset_interval: Duration,
    /// `channelNotActiveInterval`-like expiry of client channels without heartbeat
    /// (`channelExpiredTimeout`, 120 s).
    pub channel_expired_timeout: Duration,
    /// `transactionTimeOut` (6 s): how old a half message must be before its producer is
    /// asked about it.
    pub transaction_timeout: Duration,
    /// `transactionCheckMax` (15): checks of one half message before it is discarded.
    pub transaction_check_max: i32,
    /// `transactionCheckInterval` (60 s): period of the transaction check.
    pub transaction_check_interval: Duration,
    /// `serverChannelMaxIdleTimeSeconds` (120).
    pub channel_idle_timeout: Duration,
    /// How long an orderly consumer's queue lock lasts without renewal (60 s). Java reads it
    /// from the JVM property `rocketmq.broker.rebalance.lockMaxLiveTime`; ferromq takes that
    /// name or `rebalanceLockMaxLiveTime` (milliseconds) as a `broker.conf` key.
    pub rebalance_lock_max_live_time: Duration,
    /// `frameMaxLength` (16 MiB).
    pub frame_size_max: usize,
    /// `serverMaxConnections` per shard.
    pub connections_max: usize,
    /// `shards`: placement of shards on cores.
    pub shards: Option<Placement>,
    /// `flushIntervalCommitLog` (500 ms), kept apart so that it applies whichever of it and
    /// `flushDiskType` comes first in the file.
    pub flush_interval_commit_log: Duration,
    /// The store's settings.
    pub store: StoreConfig,
}

impl Default for BrokerConfig {
    fn default() -> Self {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
        let broker_name = std::fs::read_to_string("/etc/hostname")
            .ok()
            .map(|h| h.trim().to_owned())
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| "broker-a".to_owned());
        let namesrv_addr = std::env::var("NAMESRV_ADDR")
            .map(|value| split_addresses(&value))
            .unwrap_or_default();
        BrokerConfig {
            broker_cluster_name: "DefaultCluster".to_owned(),
            broker_name,
            broker_id: 0,
            namesrv_addr,
            broker_ip1: IpAddr::V4(Ipv4Addr::LOCALHOST),
            broker_ip2: None,
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            listen_port: 10911,
            broker_role: BrokerRole::AsyncMaster,
            ha_master_address: None,
            ha: crate::broker::ha::HaConfig::default(),
            broker_permission: 6,
            slave_read_enable: false,
            enable_property_filter: false,
            filter_support_retry: false,
            filter_data_clean_time_span: Duration::from_secs(24 * 3600),
            acl_enable: false,
            tls: crate::remoting::tls::TlsSettings::default(),
            metrics: crate::metrics::config::MetricsConfig::default(),
            grpc: crate::grpc::config::GrpcConfig::default(),
            rocketmq_home: std::env::var_os("ROCKETMQ_HOME")
                .map_or_else(|| PathBuf::from("."), PathBuf::from),
            auto_create_topic_enable: true,
            default_topic_queue_nums: 8,
            auto_create_subscription_group: true,
            long_polling_enable: true,
            store_reply_message_enable: true,
            recall_message_enable: false,
            pop: super::pop::PopConfig::default(),
            controller_mode: super::controller_mode::ControllerModeConfig::default(),
            cluster_topic_enable: true,
            broker_topic_enable: true,
            trace_topic_enable: false,
            msg_trace_topic_name: "RMQ_SYS_TRACE_TOPIC".to_owned(),
            config_black_list: "configBlackList;brokerConfigPath".to_owned(),
            config_path: None,
            short_polling_time: Duration::from_millis(1000),
            register_name_server_period: Duration::from_secs(30),
            flush_consumer_offset_interval: Duration::from_secs(5),
            flush_delay_offset_interval: Duration::from_secs(10),
            channel_expired_timeout: Duration::from_secs(120),
            transaction_timeout: Duration::from_secs(6),
            transaction_check_max: 15,
            transaction_check_interval: Duration::from_secs(60),
            channel_idle_timeout: limits::CHANNEL_IDLE_TIMEOUT,
            rebalance_lock_max_live_time: Duration::from_secs(60),
            frame_size_max: limits::FRAME_SIZE_MAX,
            connections_max: limits::CONNECTIONS_MAX,
            shards: None,
            flush_interval_commit_log: Duration::from_millis(500),
            store: StoreConfig::new(home.join("store")),
        }
    }
}

/// Java keys knowingly accepted without effect and without a warning: they tune Netty's and
/// the Java store's threads, buffers and locks, mechanics ferromq does not have (its shards
/// and io_uring take their place), so there is nothing for them to change.
const IGNORED_JAVA_KEYS: &[&str] = &[
    "serverWorkerThreads",
    "serverCallbackExecutorThreads",
    "serverSelectorThreads",
    "serverOnewaySemaphoreValue",
    "serverAsyncSemaphoreValue",
    "serverSocketSndBufSize",
    "serverSocketRcvBufSize",
    "serverPooledByteBufAllocatorEnable",
    "useEpollNativeSelector",
    "sendMessageThreadPoolNums",
    "pullMessageThreadPoolNums",
    "queryMessageThreadPoolNums",
    "adminBrokerThreadPoolNums",
    "clientManageThreadPoolNums",
    "consumerManageThreadPoolNums",
    "heartbeatThreadPoolNums",
    "endTransactionThreadPoolNums",
    "useReentrantLockWhenPutMessage",
];

/// Java store keys whose feature ferromq does not implement: read, ignored, and named in a
/// warning at start, since a broker.conf that sets one expects a behaviour ferromq lacks.
const UNIMPLEMENTED_JAVA_KEYS: &[&str] = &[
    "transientStorePoolEnable",
    "warmMapedFileEnable",
    "osPageCacheBusyTimeOutMills",
    "flushCommitLogLeastPages",
    "flushConsumeQueueLeastPages",
    "flushCommitLogThoroughInterval",
    "flushConsumeQueueThoroughInterval",
    "commitIntervalCommitLog",
];

/// RocketMQ 3's `MessageStoreConfig` path keys. Java 4.9.8 has no such fields (it derives
/// the paths from `storePathRootDir`, `StorePathConfigHelper`) and drops them silently;
/// ferromq keeps its layout the same and names them in a warning, since a file that sets one
/// expects the path to move.
const RETIRED_JAVA_STORE_KEYS: &[&str] = &[
    "storePathConsumeQueue",
    "storePathIndex",
    "storeCheckpoint",
    "abortFile",
];

impl BrokerConfig {
    /// Where the main channel listens.
    #[must_use]
    pub fn listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.listen_port)
    }

    /// `brokerIP2`, else `brokerIP1`: the host of the HA address told to name servers.
    #[must_use]
    pub fn broker_ip2(&self) -> IpAddr {
        self.broker_ip2.unwrap_or(self.broker_ip1)
    }

    /// Applies properties read from `origin` on top of `self`; returns the unknown keys.
    ///
    /// # Errors
    /// [`ConfigError::BadValue`] for the first value that does not parse, or for keys whose
    /// values cannot hold together (the gRPC long polling minimum above its maximum).
    #[allow(clippy::too_many_lines)] // one arm per key reads best as one table
    pub fn apply(
        &mut self,
        origin: &str,
        properties: &[Property],
    ) -> Result<Vec<String>, ConfigError> {
        let mut unknown = Vec::new();
        for property in properties {
            let at = format!("{origin} line {}", property.line);
            let (key, value) = (property.key.as_str(), property.value.trim());
            let store = &mut self.store;
            match key {
                "brokerClusterName" => self.broker_cluster_name = value.to_owned(),
                "brokerName" => self.broker_name = value.to_owned(),
                "brokerId" => self.broker_id = parse_value(&at, key, value, "an integer")?,
                "namesrvAddr" => self.namesrv_addr = split_addresses(value),
                "brokerIP1" => {
                    self.broker_ip1 = parse_value(&at, key, value, "an IP address")?;
                }
                "haMasterAddress" => {
                    // Java takes an address of at least 6 characters and ignores the rest.
                    let value = value.trim();
                    self.ha_master_address = (value.len() >= 6).then(|| value.to_owned());
                }
                "brokerIP2" => {
                    self.broker_ip2 = Some(parse_value(&at, key, value, "an IP address")?);
                }
                "haListenPort" => {
                    // Java 4.9's BrokerStartup sets it to `listenPort + 1` after reading the
                    // file, whatever the file says; so does ferromq.
                    tracing::debug!(key, "haListenPort is listenPort + 1, as in Java 4.9");
                }
                "haSendHeartbeatInterval" => {
                    self.ha.heartbeat_interval = millis(&at, key, value)?;
                }
                "haHousekeepingInterval" => {
                    self.ha.housekeeping_interval = millis(&at, key, value)?;
                }
                "slaveTimeout" => self.ha.slave_timeout = millis(&at, key, value)?,
                "haSlaveFallbehindMax" => {
                    self.ha.slave_fall_behind_max = parse_value(&at, key, value, "a byte count")?;
                }
                "haTransferBatchSize" => {
                    self.ha.transfer_batch_size =
                        parse_value(&at, key, value, "a byte count from 1 to 2^31 - 1")?;
                    if self.ha.transfer_batch_size == 0
                        || i32::try_from(self.ha.transfer_batch_size).is_err()
                    {
                        return Err(bad(&at, key, value, "a byte count from 1 to 2^31 - 1"));
                    }
                }
                "bindAddress" => {
                    self.bind_address = parse_value(&at, key, value, "an IP address")?;
                }
                "listenPort" => {
                    let port: u16 = parse_value(&at, key, value, "a port 3..=65535")?;
                    if port < 3 && port != 0 {
                        return Err(bad(&at, key, value, "a port 3..=65535 (VIP is port - 2)"));
                    }
                    self.listen_port = port;
                }
                "brokerRole" => {
                    self.broker_role = match value {
                        "ASYNC_MASTER" => BrokerRole::AsyncMaster,
                        "SYNC_MASTER" => BrokerRole::SyncMaster,
                        "SLAVE" => BrokerRole::Slave,
                        _ => {
                            return Err(bad(&at, key, value, "ASYNC_MASTER, SYNC_MASTER or SLAVE"))
                        }
                    };
                    self.store.slave = self.broker_role == BrokerRole::Slave;
                }
                "brokerPermission" => {
                    self.broker_permission = parse_value(&at, key, value, "permission bits")?;
                }
                "slaveReadEnable" => self.slave_read_enable = parse_bool(&at, key, value)?,
                "enablePropertyFilter" => {
                    self.enable_property_filter = parse_bool(&at, key, value)?;
                }
                "filterSupportRetry" => self.filter_support_retry = parse_bool(&at, key, value)?,
                "filterDataCleanTimeSpan" => {
                    self.filter_data_clean_time_span = millis(&at, key, value)?;
                }
                "aclEnable" => self.acl_enable = parse_bool(&at, key, value)?,
                "rocketmqHome" => self.rocketmq_home = PathBuf::from(value),
                "autoCreateTopicEnable" => {
                    self.auto_create_topic_enable = parse_bool(&at, key, value)?;
                }
                "defaultTopicQueueNums" => {
                    self.default_topic_queue_nums = parse_value(&at, key, value, "a queue count")?;
                }
                "autoCreateSubscriptionGroup" => {
                    self.auto_create_subscription_group = parse_bool(&at, key, value)?;
                }
                "longPollingEnable" => self.long_polling_enable = parse_bool(&at, key, value)?,
                "storeReplyMessageEnable" => {
                    self.store_reply_message_enable = parse_bool(&at, key, value)?;
                }
                "clusterTopicEnable" => self.cluster_topic_enable = parse_bool(&at, key, value)?,
                "brokerTopicEnable" => self.broker_topic_enable = parse_bool(&at, key, value)?,
                "traceTopicEnable" => self.trace_topic_enable = parse_bool(&at, key, value)?,
                "msgTraceTopicName" => self.msg_trace_topic_name = value.to_owned(),
                "configBlackList" => self.config_black_list = value.to_owned(),
                "shortPollingTimeMills" => self.short_polling_time = millis(&at, key, value)?,
                "registerNameServerPeriod" => {
                    self.register_name_server_period = millis(&at, key, value)?;
                }
                "flushConsumerOffsetInterval" => {
                    self.flush_consumer_offset_interval = millis(&at, key, value)?;
                }
                "transactionTimeOut" => self.transaction_timeout = millis(&at, key, value)?,
                "transactionCheckMax" => {
                    self.transaction_check_max = parse_value(&at, key, value, "a count")?;
                }
                "transactionCheckInterval" => {
                    self.transaction_check_interval = millis(&at, key, value)?;
                }
                "flushDelayOffsetInterval" => {
                    self.flush_delay_offset_interval = millis(&at, key, value)?;
                }
                "serverChannelMaxIdleTimeSeconds" => {
                    let seconds: u64 = parse_value(&at, key, value, "seconds, at least 1")?;
                    self.channel_idle_timeout = Duration::from_secs(seconds.max(1));
                }
                "rebalanceLockMaxLiveTime" | "rocketmq.broker.rebalance.lockMaxLiveTime" => {
                    self.rebalance_lock_max_live_time = millis(&at, key, value)?;
                }
                "frameMaxLength" => {
                    self.frame_size_max = parse_value(&at, key, value, "bytes")?;
                }
                "serverMaxConnections" => {
                    self.connections_max = parse_value(&at, key, value, "a connection count")?;
                }
                "shards" => {
                    let placement: Placement = value
                        .parse()
                        .map_err(|e| bad(&at, key, value, &format!("a shard placement ({e})")))?;
                    self.shards = Some(placement);
                }
                "storePathRootDir" => store.store_path_root_dir = PathBuf::from(value),
                "storePathCommitLog" => store.store_path_commit_log = Some(PathBuf::from(value)),
                "mappedFileSizeCommitLog" => {
                    store.mapped_file_size_commit_log =
                        parse_value(&at, key, value, "bytes, at least 4096")?;
                    if store.mapped_file_size_commit_log < 4096 {
                        return Err(bad(&at, key, value, "bytes, at least 4096"));
                    }
                }
                "mappedFileSizeConsumeQueue" => {
                    let expected = "bytes, at least 1 (rounded up to whole 20-byte units)";
                    let bytes: usize = parse_value(&at, key, value, expected)?;
                    if bytes == 0 {
                        return Err(bad(&at, key, value, expected));
                    }
                    // Java's getter rounds up to whole units: its ConsumeQueue files of 6010
                    // are 6020 bytes, and it refuses to load files of any other size.
                    store.consume_queue_units_per_file = bytes.div_ceil(20);
                }
                "flushDiskType" => {
                    store.flush_disk_type = match value {
                        "SYNC_FLUSH" => FlushDiskType::SyncFlush,
                        "ASYNC_FLUSH" => FlushDiskType::AsyncFlush {
                            interval: self.flush_interval_commit_log,
                        },
                        _ => return Err(bad(&at, key, value, "SYNC_FLUSH or ASYNC_FLUSH")),
                    };
                }
                "flushIntervalCommitLog" => {
                    self.flush_interval_commit_log = millis(&at, key, value)?;
                    if let FlushDiskType::AsyncFlush { interval } = &mut store.flush_disk_type {
                        *interval = self.flush_interval_commit_log;
                    }
                }
                "flushIntervalConsumeQueue" => {
                    store.flush_interval_consume_queue = millis(&at, key, value)?;
                }
                "checkCRCOnRecover" => store.check_crc_on_recover = parse_bool(&at, key, value)?,
                "maxMessageSize" => store.max_message_size = parse_value(&at, key, value, "bytes")?,
                "maxTransferBytesOnMessageInMemory" => {
                    store.max_transfer_bytes_on_message_in_memory =
                        parse_value(&at, key, value, "bytes")?;
                }
                "maxTransferCountOnMessageInMemory" => {
                    store.max_transfer_count_on_message_in_memory =
                        parse_value(&at, key, value, "a count")?;
                }
                "maxTransferBytesOnMessageInDisk" => {
                    store.max_transfer_bytes_on_message_in_disk =
                        parse_value(&at, key, value, "bytes")?;
                }
                "maxTransferCountOnMessageInDisk" => {
                    store.max_transfer_count_on_message_in_disk =
                        parse_value(&at, key, value, "a count")?;
                }
                "accessMessageInMemoryMaxRatio" => {
                    store.access_message_in_memory_max_ratio =
                        parse_value(&at, key, value, "a percentage")?;
                }
                "messageIndexEnable" => store.message_index_enable = parse_bool(&at, key, value)?,
                "maxHashSlotNum" => {
                    store.max_hash_slot_num = parse_value(&at, key, value, "a slot count")?;
                }
                "maxIndexNum" => {
                    store.max_index_num = parse_value(&at, key, value, "an item count")?;
                }
                "defaultQueryMaxNum" => {
                    store.default_query_max_num = parse_value(&at, key, value, "a count")?;
                }
                "messageDelayLevel" => {
                    store.message_delay_level = DelayLevels::parse(value).map_err(|entry| {
                        bad(
                            &at,
                            key,
                            value,
                            &format!("levels like '1s 5m 2h' ({entry})"),
                        )
                    })?;
                }
                "fileReservedTime" => {
                    store.file_reserved_time_hours = parse_value(&at, key, value, "hours")?;
                }
                "deleteWhen" => store.delete_when = value.to_owned(),
                "cleanResourceInterval" => {
                    store.clean_resource_interval = millis(&at, key, value)?;
                }
                "diskMaxUsedSpaceRatio" => {
                    let percent: u32 = parse_value(&at, key, value, "a percentage 10..=95")?;
                    store.disk_max_used_space_ratio = f64::from(percent.clamp(10, 95)) / 100.0;
                }
                "diskSpaceWarningLevelRatio" => {
                    store.disk_space_warning_level_ratio = ratio(&at, key, value)?;
                }
                "diskSpaceCleanForciblyRatio" => {
                    store.disk_space_clean_forcibly_ratio = ratio(&at, key, value)?;
                }
                "cleanFileForciblyEnable" => {
                    store.clean_file_forcibly_enable = parse_bool(&at, key, value)?;
                }
                "commitLogPageCacheWrites" => {
                    store.commit_log_page_cache_writes = parse_bool(&at, key, value)?;
                }
                "pullMappedMemoryMax" => {
                    store.pull_mapped_memory_max = parse_value(&at, key, value, "a byte count")?;
                }
                "mappedFileSizeTimerLog" => {
                    store.mapped_file_size_timer_log =
                        parse_value(&at, key, value, "a byte count")?;
                }
                "timerPrecisionMs" => {
                    let ms: i64 = parse_value(&at, key, value, "milliseconds")?;
                    if ms <= 0 {
                        return Err(bad(&at, key, value, "a positive number of milliseconds"));
                    }
                    store.timer_precision_ms = ms;
                }
                "timerRollWindowSlot" => {
                    store.timer_roll_window_slot = parse_value(&at, key, value, "a slot count")?;
                }
                "timerFlushIntervalMs" => store.timer_flush_interval = millis(&at, key, value)?,
                "timerMaxDelaySec" => {
                    store.timer_max_delay_sec = parse_value(&at, key, value, "seconds")?;
                }
                "timerWheelEnable" => store.timer_wheel_enable = parse_bool(&at, key, value)?,
                "timerStopEnqueue" => store.timer_stop_enqueue = parse_bool(&at, key, value)?,
                "timerStopDequeue" => store.timer_stop_dequeue = parse_bool(&at, key, value)?,
                "timerSkipUnknownError" => {
                    store.timer_skip_unknown_error = parse_bool(&at, key, value)?;
                }
                "timerEnableRetryUntilSuccess" => {
                    store.timer_enable_retry_until_success = parse_bool(&at, key, value)?;
                }
                "timerProgressLogIntervalMs" => {
                    store.timer_progress_log_interval = millis(&at, key, value)?;
                }
                "recallMessageEnable" => self.recall_message_enable = parse_bool(&at, key, value)?,
                _ if self.pop.apply(&at, key, value).transpose()?.is_some() => {}
                _ if self
                    .controller_mode
                    .apply(&at, key, value)
                    .transpose()?
                    .is_some() => {}
                _ if self.grpc.apply(&at, key, value).transpose()?.is_some() => {}
                "deleteCommitLogFilesInterval" => {
                    let ms: u64 = parse_value(&at, key, value, "milliseconds")?;
                    store.delete_commit_log_files_interval = Duration::from_millis(ms);
                }
                _ if IGNORED_JAVA_KEYS.contains(&key) => {
                    tracing::debug!(key, "Java broker key has no effect in ferromq");
                }
                _ if RETIRED_JAVA_STORE_KEYS.contains(&key) => {
                    tracing::warn!(
                        origin,
                        %key,
                        "not a RocketMQ 4.9 key, ignored: the path stays under storePathRootDir, \
                         as in Java 4.9"
                    );
                }
                _ if UNIMPLEMENTED_JAVA_KEYS.contains(&key) => {
                    tracing::warn!(
                        origin,
                        %key,
                        "Java broker key not implemented by ferromq, ignored"
                    );
                }
                _ if key.starts_with("metric") || key.starts_with("statusPage") => {
                    match self.metrics.set(key, value) {
                        Ok(true) => {}
                        Ok(false) => unknown.push(key.to_owned()),
                        Err(expected) => return Err(bad(&at, key, value, &expected)),
                    }
                }
                _ if key.starts_with("tls.") => match self.tls.set(key, value) {
                    Ok(true) => {}
                    Ok(false) => unknown.push(key.to_owned()),
                    Err(expected) => return Err(bad(&at, key, value, &expected)),
                },
                _ => unknown.push(key.to_owned()),
            }
        }
        self.grpc.check(origin)?;
        Ok(unknown)
    }
}

/// Java `BrokerConfig` keys that ferromq shows at Java's defaults, which are what ferromq
/// does (`mqadmin exportConfigs` reads them): no filter servers, trace info on send
/// responses.
const JAVA_CONSTANT_KEYS: [(&str, &str); 2] = [("filterServerNums", "0"), ("traceOn", "true")];

impl BrokerConfig {
    /// Every setting as `broker.conf` keys and values, in Java's forms (GET_BROKER_CONFIG,
    /// Java's `getAllConfigsFormatString`): the keys [`BrokerConfig::apply`] reads with an
    /// effect, `storePathCommitLog` only when set (as Java, whose field is null until then),
    /// and the few Java keys of [`JAVA_CONSTANT_KEYS`]. `listen_port` is the port bound
    /// (the config may ask for 0).
    #[must_use]
    pub fn java_properties(&self, listen_port: u16) -> Vec<(&'static str, String)> {
        let store = &self.store;
        let ms = |d: Duration| d.as_millis().to_string();
        let (flush, flush_interval) = match store.flush_disk_type {
            FlushDiskType::SyncFlush => ("SYNC_FLUSH", self.flush_interval_commit_log),
            FlushDiskType::AsyncFlush { interval } => ("ASYNC_FLUSH", interval),
        };
        let ratio = |r: f64| crate::broker::stats::java_double(r);
        let mut all: Vec<(&'static str, String)> = vec![
            ("brokerClusterName", self.broker_cluster_name.clone()),
            ("brokerName", self.broker_name.clone()),
            ("brokerId", self.broker_id.to_string()),
            ("namesrvAddr", self.namesrv_addr.join(";")),
            ("brokerIP1", self.broker_ip1.to_string()),
            ("brokerIP2", self.broker_ip2().to_string()),
            ("rocketmqHome", self.rocketmq_home.display().to_string()),
            // Java's `useTLS` defaults to `tls.enable`: TLS on the broker's own connections.
            ("useTLS", self.tls.enable.to_string()),
            ("bindAddress", self.bind_address.to_string()),
            ("listenPort", listen_port.to_string()),
            ("brokerRole", self.broker_role.java_name().to_owned()),
            ("haListenPort", listen_port.saturating_add(1).to_string()),
            ("haSendHeartbeatInterval", ms(self.ha.heartbeat_interval)),
            ("haHousekeepingInterval", ms(self.ha.housekeeping_interval)),
            (
                "haTransferBatchSize",
                self.ha.transfer_batch_size.to_string(),
            ),
            ("slaveTimeout", ms(self.ha.slave_timeout)),
            (
                "haSlaveFallbehindMax",
                self.ha.slave_fall_behind_max.to_string(),
            ),
            ("brokerPermission", self.broker_permission.to_string()),
            ("slaveReadEnable", self.slave_read_enable.to_string()),
            (
                "enablePropertyFilter",
                self.enable_property_filter.to_string(),
            ),
            ("filterSupportRetry", self.filter_support_retry.to_string()),
            (
                "filterDataCleanTimeSpan",
                self.filter_data_clean_time_span.as_millis().to_string(),
            ),
            ("aclEnable", self.acl_enable.to_string()),
            (
                "autoCreateTopicEnable",
                self.auto_create_topic_enable.to_string(),
            ),
            (
                "defaultTopicQueueNums",
                self.default_topic_queue_nums.to_string(),
            ),
            (
                "autoCreateSubscriptionGroup",
                self.auto_create_subscription_group.to_string(),
            ),
            ("longPollingEnable", self.long_polling_enable.to_string()),
            (
                "storeReplyMessageEnable",
                self.store_reply_message_enable.to_string(),
            ),
            ("clusterTopicEnable", self.cluster_topic_enable.to_string()),
            ("brokerTopicEnable", self.broker_topic_enable.to_string()),
            ("traceTopicEnable", self.trace_topic_enable.to_string()),
            ("msgTraceTopicName", self.msg_trace_topic_name.clone()),
            ("configBlackList", self.config_black_list.clone()),
            ("shortPollingTimeMills", ms(self.short_polling_time)),
            (
                "registerNameServerPeriod",
                ms(self.register_name_server_period),
            ),
            (
                "flushConsumerOffsetInterval",
                ms(self.flush_consumer_offset_interval),
            ),
            (
                "flushDelayOffsetInterval",
                ms(self.flush_delay_offset_interval),
            ),
            ("transactionTimeOut", ms(self.transaction_timeout)),
            (
                "transactionCheckMax",
                self.transaction_check_max.to_string(),
            ),
            (
                "transactionCheckInterval",
                ms(self.transaction_check_interval),
            ),
            (
                "serverChannelMaxIdleTimeSeconds",
                self.channel_idle_timeout.as_secs().to_string(),
            ),
            (
                "rebalanceLockMaxLiveTime",
                ms(self.rebalance_lock_max_live_time),
            ),
            ("frameMaxLength", self.frame_size_max.to_string()),
            ("serverMaxConnections", self.connections_max.to_string()),
            (
                "storePathRootDir",
                store.store_path_root_dir.display().to_string(),
            ),
            (
                "mappedFileSizeCommitLog",
                store.mapped_file_size_commit_log.to_string(),
            ),
            (
                "mappedFileSizeConsumeQueue",
                (store.consume_queue_units_per_file * 20).to_string(),
            ),
            ("flushDiskType", flush.to_owned()),
            ("flushIntervalCommitLog", ms(flush_interval)),
            (
                "commitLogPageCacheWrites",
                store.commit_log_page_cache_writes.to_string(),
            ),
            (
                "pullMappedMemoryMax",
                store.pull_mapped_memory_max.to_string(),
            ),
            (
                "flushIntervalConsumeQueue",
                ms(store.flush_interval_consume_queue),
            ),
            ("checkCRCOnRecover", store.check_crc_on_recover.to_string()),
            ("maxMessageSize", store.max_message_size.to_string()),
            (
                "maxTransferBytesOnMessageInMemory",
                store.max_transfer_bytes_on_message_in_memory.to_string(),
            ),
            (
                "maxTransferCountOnMessageInMemory",
                store.max_transfer_count_on_message_in_memory.to_string(),
            ),
            (
                "maxTransferBytesOnMessageInDisk",
                store.max_transfer_bytes_on_message_in_disk.to_string(),
            ),
            (
                "maxTransferCountOnMessageInDisk",
                store.max_transfer_count_on_message_in_disk.to_string(),
            ),
            (
                "accessMessageInMemoryMaxRatio",
                store.access_message_in_memory_max_ratio.to_string(),
            ),
            ("messageIndexEnable", store.message_index_enable.to_string()),
            ("maxHashSlotNum", store.max_hash_slot_num.to_string()),
            ("maxIndexNum", store.max_index_num.to_string()),
            (
                "defaultQueryMaxNum",
                store.default_query_max_num.to_string(),
            ),
            ("messageDelayLevel", store.message_delay_level.java_text()),
            (
                "fileReservedTime",
                store.file_reserved_time_hours.to_string(),
            ),
            ("deleteWhen", store.delete_when.clone()),
            ("cleanResourceInterval", ms(store.clean_resource_interval)),
            (
                "diskMaxUsedSpaceRatio",
                format!("{:.0}", store.disk_max_used_space_ratio * 100.0),
            ),
            (
                "diskSpaceWarningLevelRatio",
                ratio(store.disk_space_warning_level_ratio),
            ),
            (
                "diskSpaceCleanForciblyRatio",
                ratio(store.disk_space_clean_forcibly_ratio),
            ),
            (
                "cleanFileForciblyEnable",
                store.clean_file_forcibly_enable.to_string(),
            ),
            (
                "deleteCommitLogFilesInterval",
                ms(store.delete_commit_log_files_interval),
            ),
        ];
        if let Some(path) = &store.store_path_commit_log {
            all.push(("storePathCommitLog", path.display().to_string()));
        }
        if let Some(address) = &self.ha_master_address {
            all.push(("haMasterAddress", address.clone()));
        }
        if let Some(placement) = &self.shards {
            all.push(("shards", placement.to_string()));
        }
        // 5.x keys, shown when in use: a 4.9 broker has none of them.
        if self.controller_mode.enable {
            all.extend(self.controller_mode.java_properties());
        }
        all.extend(
            JAVA_CONSTANT_KEYS
                .iter()
                .map(|(key, value)| (*key, (*value).to_owned())),
        );
        all
    }
}

/// Splits `namesrvAddr`: `;`-separated `host:port` entries.
#[must_use]
pub fn split_addresses(value: &str) -> Vec<String> {
    value
        .split(';')
        .map(str::trim)
        .filter(|a| !a.is_empty())
        .map(str::to_owned)
        .collect()
}

fn ratio(origin: &str, key: &str, value: &str) -> Result<f64, ConfigError> {
    let ratio: f64 = parse_value(origin, key, value, "a fraction 0.0..=1.0")?;
    if !(0.0..=1.0).contains(&ratio) {
        return Err(bad(origin, key, value, "a fraction 0.0..=1.0"));
    }
    Ok(ratio)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::properties::parse;

    #[test]
    fn java_broker_conf_keys_apply() {
        let mut config = BrokerConfig::default();
        let text = "brokerClusterName=C\nbrokerName=b\nbrokerId=0\n\
                    namesrvAddr=127.0.0.1:9876;10.0.0.1:9876\nbrokerIP1=127.0.0.1\n\
                    listenPort=10921\nstorePathRootDir=/data/s\nflushIntervalCommitLog=200\n\
                    flushDiskType=ASYNC_FLUSH\nfileReservedTime=48\n\
                    mappedFileSizeConsumeQueue=6000\nautoCreateTopicEnable=false\n\
                    sendMessageThreadPoolNums=4\nmystery=1\nrebalanceLockMaxLiveTime=3000\n";
        let unknown = config.apply("broker.conf", &parse(text)).unwrap();
        assert_eq!(unknown, vec!["mystery".to_owned()]);
        assert_eq!(config.namesrv_addr, vec!["127.0.0.1:9876", "10.0.0.1:9876"]);
        assert_eq!(config.listen_port, 10921);
        assert_eq!(config.store.store_path_root_dir, PathBuf::from("/data/s"));
        assert_eq!(config.store.consume_queue_units_per_file, 300);
        assert_eq!(config.store.file_reserved_time_hours, 48);
        // Rounded up to whole units, as Java's getter rounds it.
        for (bytes, units) in [("6010", 301), ("5990", 300), ("1", 1)] {
            let mut rounded = BrokerConfig::default();
            let text = format!("mappedFileSizeConsumeQueue={bytes}\n");
            rounded.apply("broker.conf", &parse(&text)).unwrap();
            assert_eq!(rounded.store.consume_queue_units_per_file, units, "{bytes}");
        }
        let mut zero = BrokerConfig::default();
        let refused = zero.apply("broker.conf", &parse("mappedFileSizeConsumeQueue=0\n"));
        assert!(refused.is_err());
        assert!(!config.auto_create_topic_enable);
        assert_eq!(config.rebalance_lock_max_live_time, Duration::from_secs(3));
        assert_eq!(
            config.store.flush_disk_type,
            FlushDiskType::AsyncFlush {
                interval: Duration::from_millis(200)
            }
        );
    }

    #[test]
    fn bad_values_name_file_line_key_and_what_is_valid() {
        let mut config = BrokerConfig::default();
        let error = config
            .apply("broker.conf", &parse("flushDiskType=SOMETIMES\n"))
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "broker.conf line 1: flushDiskType = 'SOMETIMES' is invalid: SYNC_FLUSH or ASYNC_FLUSH"
        );
        let error = config
            .apply("broker.conf", &parse("\nbrokerRole=BOSS\n"))
            .unwrap_err();
        assert!(error
            .to_string()
            .starts_with("broker.conf line 2: brokerRole"));
    }
}
