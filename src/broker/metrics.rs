//! The broker's metrics (`BrokerMetricsManager`, `DefaultStoreMetricsManager` and
//! `RemotingMetricsManager` of Java 5.x): read at each scrape from the counters the shards
//! keep ([`super::stats`]) and the state they publish, merged here, off the shards.
//!
//! Every series carries Java's common labels: `metricsLabel`'s pairs, `aggregation="delta"`
//! with `metricsInDelta`, `node_type="broker"`, `cluster`, `node_id` (the broker name) and
//! `otel_scope_name="broker-meter"` (what Java's OpenTelemetry exporter adds). What each
//! family means where ferromq differs from Java is said at the family.

use super::stats::items::{GetTotals, PutTotals, MESSAGE_SIZE_BUCKETS};
use super::BrokerState;
use crate::config::broker::BrokerConfig;
use crate::metrics::config::ExporterType;
use crate::metrics::exporter::Exporter;
use crate::metrics::rpc::PROCESSORS;
use crate::metrics::{counter, gauge, histogram, HistogramValue, Labels};
use crate::protocol::names::{is_system_group, RETRY_GROUP_TOPIC_PREFIX};
use crate::status::StatusPage;
use crate::store::config_files::ConsumerOffsetTable;
use crate::store::shared::StoreShared;
use ferromq_shards::Shutdown;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;
use std::borrow::Cow;
use std::sync::Arc;

/// Starts the Prometheus endpoint when `metricsExporterType=PROM`; `None` when metrics are
/// off.
///
/// # Errors
/// An exporter type ferromq does not have, a bad host, or a port that cannot be bound.
pub fn start(
    config: &BrokerConfig,
    addr: std::net::SocketAddr,
    state: &Arc<BrokerState>,
    shared: &Arc<StoreShared>,
    shutdown: Shutdown,
) -> Result<Option<Exporter>, String> {
    config.metrics.check()?;
    let mut registry = Registry::with_labels(common_labels(config).into_iter());
    registry.register_collector(Box::new(BrokerCollector {
        state: Arc::clone(state),
        shared: Arc::clone(shared),
    }));
    match config.metrics.exporter_type {
        ExporterType::Prom => {}
        ExporterType::Log => {
            let every = std::time::Duration::from_millis(config.metrics.logging_interval_ms);
            return Exporter::start_logging(registry, every, shutdown)
                .map(Some)
                .map_err(|error| format!("metrics log: {error}"));
        }
        ExporterType::Disable | ExporterType::OtlpGrpc => return Ok(None),
    }
    let endpoint = config.metrics.prom_addr(config.broker_ip1)?;
    // The page reads the cluster through the name servers; with ACL on, this broker checks
    // a viewer's keys (at the address it registers).
    let page = config.metrics.status_page.then(|| {
        let own = std::net::SocketAddr::new(config.broker_ip1, addr.port()).to_string();
        StatusPage::new(
            (!config.namesrv_addr.is_empty()).then(|| config.namesrv_addr.join(";")),
            config.acl_enable.then_some(own),
            std::time::Duration::from_millis(config.metrics.status_page_interval_ms),
        )
    });
    Exporter::start(endpoint, registry, page, shutdown)
        .map(Some)
        .map_err(|error| format!("metrics endpoint on {endpoint}: {error}"))
}

/// Adds this shard's executor statistics (busy time, tasks run) to the broker's every
/// second, until shutdown; runs on each shard when the metrics are on.
pub async fn sample_shard(state: Arc<BrokerState>, shard: usize, shutdown: Shutdown) {
    use futures::future::{select, Either};
    // The first call hands over what the executor counted before: its start.
    state.stats.busy.sample_here(shard);
    loop {
        let tick = glommio::timer::sleep(std::time::Duration::from_secs(1));
        if let Either::Right(_) = select(Box::pin(tick), shutdown.wait()).await {
            return;
        }
        state.stats.busy.sample_here(shard);
    }
}

/// Java's labels of every series, in its order.
fn common_labels(config: &BrokerConfig) -> Vec<(Cow<'static, str>, Cow<'static, str>)> {
    let mut labels: Vec<(Cow<'static, str>, Cow<'static, str>)> = config
        .metrics
        .labels()
        .into_iter()
        .map(|(key, value)| (Cow::Owned(key), Cow::Owned(value)))
        .collect();
    if config.metrics.in_delta {
        labels.push(("aggregation".into(), "delta".into()));
    }
    labels.push(("node_type".into(), "broker".into()));
    labels.push(("cluster".into(), config.broker_cluster_name.clone().into()));
    labels.push(("node_id".into(), config.broker_name.clone().into()));
    labels.push(("otel_scope_name".into(), "broker-meter".into()));
    labels
}

/// What a scrape reads.
#[derive(Debug)]
struct BrokerCollector {
    state: Arc<BrokerState>,
    shared: Arc<StoreShared>,
}

impl Collector for BrokerCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        self.encode_stats(&mut encoder)?;
        self.encode_traffic(&mut encoder)?;
        self.encode_connections(&mut encoder)?;
        self.encode_lag(&mut encoder)?;
        self.encode_store(&mut encoder)?;
        self.encode_rpc(&mut encoder)?;
        self.encode_own(&mut encoder)
    }
}

fn bool_label(value: bool) -> String {
    value.to_string()
}

/// Java's `message_type` of a put, told from the topic it was stored under: ferromq counts
/// a delayed message under the schedule or timer topic it is parked in and a transaction's
/// half message under the half topic (Java counts both under their real topic), and cannot
/// tell a FIFO message from a normal one here.
fn message_type(stored_topic: &str) -> &'static str {
    match stored_topic {
        "SCHEDULE_TOPIC_XXXX" | "rmq_sys_wheel_timer" => "delay",
        "RMQ_SYS_TRANS_HALF_TOPIC" => "transaction",
        _ => "normal",
    }
}

impl BrokerCollector {
    /// `rocketmq_processor_watermark`, `rocketmq_broker_permission`,
    /// `rocketmq_topic_number`, `rocketmq_consumer_group_number`.
    fn encode_stats(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        // Java: requests queued for a pool's threads. ferromq runs each request on a task of
        // its own at once, so it reports the requests being served.
        let in_flight = self.state.stats.rpc.in_flight();
        gauge(
            encoder,
            "rocketmq_processor_watermark",
            "Requests in flight per processor.",
            PROCESSORS
                .iter()
                .zip(in_flight)
                .map(|(name, count)| (vec![("processor", (*name).to_owned())], count)),
        )?;
        let permission = i64::from(self.state.runtime().broker_permission);
        gauge(
            encoder,
            "rocketmq_broker_permission",
            "Broker permission.",
            [(Labels::new(), permission)],
        )?;
        let topics = i64::try_from(self.state.topics().1.len()).unwrap_or(i64::MAX);
        gauge(
            encoder,
            "rocketmq_topic_number",
            "Active topic number.",
            [(Labels::new(), topics)],
        )?;
        let groups = i64::try_from(self.state.groups().1.len()).unwrap_or(i64::MAX);
        gauge(
            encoder,
            "rocketmq_consumer_group_number",
            "Active subscription group number.",
            [(Labels::new(), groups)],
        )
    }

    /// Messages and bytes in and out, and the sizes of messages put.
    fn encode_traffic(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let (puts, gets) = self.state.stats.items.metric_totals();
        let put_labels = |topic: &str| -> Labels {
            vec![
                ("topic", topic.to_owned()),
                ("message_type", message_type(topic).to_owned()),
                ("is_system", bool_label(self.state.is_system_topic(topic))),
            ]
        };
        let series = |value: fn(&PutTotals) -> u64| {
            puts.iter()
                .map(|(topic, totals)| (put_labels(topic), value(totals)))
                .collect::<Vec<_>>()
        };
        counter(
            encoder,
            "rocketmq_messages_in",
            "Total number of incoming messages.",
            series(|t| t.messages),
        )?;
        counter(
            encoder,
            "rocketmq_throughput_in",
            "Total traffic of incoming messages (bytes as stored).",
            series(|t| t.bytes),
        )?;
        let sizes = puts.iter().map(|(topic, totals)| {
            let bounds = MESSAGE_SIZE_BUCKETS
                .iter()
                .map(|bound| *bound as f64)
                .chain([f64::INFINITY]);
            let value = HistogramValue {
                // The sum Java keeps is of each put's bytes per message; ferromq keeps the
                // puts' bytes, the same when each put carries one message.
                sum: totals.bytes as f64,
                count: totals.sizes.iter().sum(),
                buckets: bounds.zip(totals.sizes).collect(),
            };
            (put_labels(topic), value)
        });
        histogram(
            encoder,
            "rocketmq_message_size",
            "Incoming messages size",
            sizes.collect::<Vec<_>>(),
        )?;
        let get_labels = |topic: &str, group: &str| -> Labels {
            let system = self.state.is_system_topic(topic) || is_system_group(group);
            vec![
                ("topic", topic.to_owned()),
                ("consumer_group", group.to_owned()),
                ("is_system", bool_label(system)),
            ]
        };
        let series = |value: fn(&GetTotals) -> u64| {
            gets.iter()
                .map(|((topic, group), totals)| (get_labels(topic, group), value(totals)))
                .collect::<Vec<_>>()
        };
        let dlq = self.state.stats.items.dlq_totals();
        counter(
            encoder,
            "rocketmq_send_to_dlq_messages",
            "Consumer send to DLQ messages",
            dlq.iter().map(|((group, topic), count)| {
                let system = self.state.is_system_topic(topic) || is_system_group(group);
                let labels = vec![
                    ("consumer_group", group.clone()),
                    ("topic", topic.clone()),
                    ("is_system", bool_label(system)),
                ];
                (labels, *count)
            }),
        )?;
        counter(
            encoder,
            "rocketmq_messages_out",
            "Total number of outgoing messages.",
            series(|t| t.messages),
        )?;
        counter(
            encoder,
            "rocketmq_throughput_out",
            "Total traffic of outgoing messages (bytes as stored).",
            series(|t| t.bytes),
        )
    }

    /// `rocketmq_producer_connections`, `rocketmq_consumer_connections`.
    fn encode_connections(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let version = |value: &serde_json::Value| {
            let ordinal = value["version"]
                .as_i64()
                .and_then(|v| i32::try_from(v).ok());
            ordinal.map_or_else(String::new, |v| {
                crate::protocol::remoting::version::version_desc(v).to_ascii_lowercase()
            })
        };
        let language = |value: &serde_json::Value| {
            value["language"]
                .as_str()
                .unwrap_or("")
                .to_ascii_lowercase()
        };
        let mut producers = std::collections::BTreeMap::<Labels, i64>::new();
        let table = self.state.producer_table_json();
        if let Some(groups) = table["data"].as_object() {
            for member in groups.values().filter_map(|m| m.as_array()).flatten() {
                let labels = vec![
                    ("language", language(member)),
                    ("version", version(member)),
                    ("protocol_type", "remoting".to_owned()),
                ];
                *producers.entry(labels).or_default() += 1;
            }
        }
        gauge(
            encoder,
            "rocketmq_producer_connections",
            "Producer connections",
            producers,
        )?;
        let mut consumers = std::collections::BTreeMap::<Labels, i64>::new();
        for (group, _) in self.state.groups().1 {
            let Some(connection) = self.state.consumer_connection_json(&group) else {
                continue;
            };
            // `ConsumeType.getTypeCN`: PULL for CONSUME_ACTIVELY, PUSH for CONSUME_PASSIVELY.
            let mode = match connection["consumeType"].as_str() {
                Some("CONSUME_ACTIVELY") => "pull",
                Some("CONSUME_POP") => "pop",
                _ => "push",
            };
            let members = connection["connectionSet"].as_array().cloned();
            for member in members.unwrap_or_default() {
                let labels = vec![
                    ("consumer_group", group.clone()),
                    ("language", language(&member)),
                    ("version", version(&member)),
                    ("consume_mode", mode.to_owned()),
                    ("protocol_type", "remoting".to_owned()),
                    ("is_system", bool_label(is_system_group(&group))),
                ];
                *consumers.entry(labels).or_default() += 1;
            }
        }
        gauge(
            encoder,
            "rocketmq_consumer_connections",
            "Consumer connections",
            consumers,
        )
    }

    /// `rocketmq_consumer_lag_messages`: per group and topic with committed offsets, the
    /// messages past them. Java reports the groups online (or recently so); ferromq every
    /// group with offsets, so the lag of a stopped consumer stays visible.
    fn encode_lag(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        // The table as `consumerOffset.json` has it (fastjson's numeric keys, which
        // serde_json does not read).
        let json = self.state.offsets_json();
        let table = ConsumerOffsetTable::parse(json.as_bytes()).unwrap_or_default();
        let mut lag = Vec::new();
        for (key, queues) in &table.offset_table {
            let Some((topic, group)) = key.split_once('@') else {
                continue;
            };
            // Java leaves retry topics out of the lag figures.
            if topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) {
                continue;
            }
            let behind: i64 = queues
                .iter()
                .map(|(queue, committed)| {
                    let max = self
                        .shared
                        .queue(topic, *queue)
                        .map_or(0, |q| q.max_offset());
                    (max - committed).max(0)
                })
                .sum();
            let system = self.state.is_system_topic(topic) || is_system_group(group);
            let labels = vec![
                ("consumer_group", group.to_owned()),
                ("topic", topic.to_owned()),
                ("is_retry", "false".to_owned()),
                ("is_system", bool_label(system)),
            ];
            lag.push((labels, behind));
        }
        gauge(
            encoder,
            "rocketmq_consumer_lag_messages",
            "Consumer lag messages",
            lag,
        )
    }

    /// `rocketmq_storage_*`.
    fn encode_store(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let labels = || -> Labels {
            vec![
                ("storage_type", "local".to_owned()),
                ("storage_medium", "disk".to_owned()),
            ]
        };
        // Java: the used bytes of the store root's filesystem.
        let used = ferromq_uring::disk::space(&self.shared.config.store_path_root_dir)
            .ok()
            .map(|space| space.total.saturating_sub(space.free));
        gauge(
            encoder,
            "rocketmq_storage_size_bytes",
            "Broker storage size",
            used.map(|used| (labels(), used)),
        )?;
        gauge(
            encoder,
            "rocketmq_storage_flush_behind_bytes",
            "Broker flush behind bytes",
            [(labels(), self.shared.remain_to_flush_bytes())],
        )?;
        gauge(
            encoder,
            "rocketmq_storage_dispatch_behind_bytes",
            "Broker dispatch behind bytes",
            [(labels(), self.shared.dispatch_behind_bytes())],
        )
    }

    /// `rocketmq_rpc_latency_milliseconds`.
    fn encode_rpc(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        crate::metrics::rpc::encode_latency(encoder, &self.state.stats.rpc)
    }

    /// ferromq's own: what Java has no name for.
    fn encode_own(&self, encoder: &mut DescriptorEncoder) -> std::fmt::Result {
        let busy = self.state.stats.busy.totals();
        let shard = |index: usize| vec![("shard", index.to_string())];
        counter(
            encoder,
            "ferromq_shard_busy_seconds",
            "Seconds each shard's executor spent running tasks (not idle, not spinning).",
            busy.iter()
                .enumerate()
                .map(|(index, (seconds, _))| (shard(index), *seconds)),
        )?;
        counter(
            encoder,
            "ferromq_shard_tasks",
            "Tasks each shard's executor ran.",
            busy.iter()
                .enumerate()
                .map(|(index, (_, tasks))| (shard(index), *tasks)),
        )?;
        gauge(
            encoder,
            "ferromq_pull_mapped_window_bytes",
            "Bytes of CommitLog windows mapped for pulls now (at most pullMappedMemoryMax).",
            [(Labels::new(), self.shared.mapped_bytes())],
        )?;
        gauge(
            encoder,
            "ferromq_commitlog_committed_offset_bytes",
            "End of the committed CommitLog (its max physical offset).",
            [(Labels::new(), self.shared.committed_end())],
        )?;
        let committed = i64::try_from(self.shared.committed_end()).unwrap_or(i64::MAX);
        gauge(
            encoder,
            "ferromq_ha_slave_behind_bytes",
            "Per connected slave, committed CommitLog bytes it has not acknowledged.",
            self.state.slaves.links().into_iter().map(|link| {
                let behind = committed.saturating_sub(link.acked.max(0));
                (vec![("slave", link.addr.to_string())], behind)
            }),
        )?;
        counter(
            encoder,
            "ferromq_rpc_latency_dropped",
            "Requests not in rocketmq_rpc_latency: a shard's table of distinct codes was full.",
            [(Labels::new(), self.state.stats.rpc.dropped())],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_kinds_as_java_labels_them() {
        assert_eq!(message_type("SCHEDULE_TOPIC_XXXX"), "delay");
        assert_eq!(message_type("T"), "normal");
        assert!(is_system_group("CID_RMQ_SYS_TRANS"));
        assert!(!is_system_group("G"));
    }
}
