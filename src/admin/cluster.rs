//! Cluster and broker commands: clusterList, brokerStatus, getBrokerConfig
//! (`tools/.../command/cluster/ClusterListSubCommand`, `broker/BrokerStatusSubCommand`,
//! `broker/GetBrokerConfigCommand`).

use super::client::bad_body;
use super::output::{Report, Table};
use super::{AdminClient, AdminError};
use crate::remoting::body::KvTable;
use crate::remoting::{RemotingCommand, RequestCode};
use serde_json::json;
use std::collections::BTreeMap;

/// Flags of `clusterList`.
#[derive(Debug, clap::Args)]
pub struct ClusterListArgs {
    /// Only this cluster.
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
}

/// `-b addr | -c cluster`: the target of the commands aimed at one broker or at every master
/// of a cluster.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["broker", "cluster"])))]
pub struct BrokerTargetArgs {
    /// Broker address (`host:port`).
    #[arg(short = 'b', long = "brokerAddr")]
    pub broker: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    pub cluster: Option<String>,
}

impl BrokerTargetArgs {
    /// The broker's address, or the addresses of every master of the cluster.
    ///
    /// # Errors
    /// As [`AdminClient::targets`].
    pub fn resolve(&self, client: &mut AdminClient) -> Result<Vec<String>, AdminError> {
        client.targets(self.broker.as_deref(), self.cluster.as_deref())
    }
}

/// GET_BROKER_RUNTIME_INFO of `addr`.
///
/// # Errors
/// The broker's refusal or a body that is not a `KVTable`.
pub fn runtime_info(
    client: &mut AdminClient,
    addr: &str,
) -> Result<BTreeMap<String, String>, AdminError> {
    let response = client.call_ok(
        addr,
        RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO),
    )?;
    let table: KvTable =
        serde_json::from_slice(&response.body).map_err(|e| bad_body(addr, e.to_string()))?;
    Ok(table.table)
}

/// `clusterList`: every broker the name server knows, with its runtime figures, and, past
/// mqadmin's columns, its role, CommitLog end and replication lag: on a master the bytes its
/// best slave lacks, on a slave the bytes it lacks behind its group's master (`-` when
/// unknown).
///
/// A broker that does not answer its runtime request is still listed, with empty figures.
///
/// # Errors
/// The name server's refusal.
pub fn cluster_list(
    client: &mut AdminClient,
    args: &ClusterListArgs,
) -> Result<Report, AdminError> {
    let brokers: Vec<_> = client
        .brokers()?
        .into_iter()
        .filter(|b| args.cluster.as_ref().is_none_or(|c| *c == b.cluster))
        .collect();
    let now_ms = crate::broker::state::now_ms();
    let mut table = Table::new(&[
        "#Cluster Name",
        "#Broker Name",
        "#BID",
        "#Addr",
        "#Version",
        "#InTPS",
        "#OutTPS",
        "#Hour",
        "#SPACE",
        "#Role",
        "#MaxOffset",
        "#HALag",
    ]);
    let runtimes: Vec<_> = brokers
        .iter()
        .map(|broker| runtime_info(client, &broker.addr).ok())
        .collect();
    let max_offset = |runtime: &Option<BTreeMap<String, String>>| {
        runtime
            .as_ref()
            .and_then(|t| t.get("commitLogMaxOffset"))
            .and_then(|v| v.parse::<i64>().ok())
    };
    let mut json = Vec::new();
    for (broker, runtime) in brokers.iter().zip(&runtimes) {
        let get = |key: &str| runtime.as_ref().and_then(|t| t.get(key)).cloned();
        let version = get("brokerVersionDesc")
            .or_else(|| get("brokerVersion"))
            .unwrap_or_default();
        let tps = |key: &str| {
            get(key)
                .and_then(|v| v.split(' ').next().and_then(|n| n.parse::<f64>().ok()))
                .unwrap_or(0.0)
        };
        let hours = get("earliestMessageTimeStamp")
            .and_then(|v| v.parse::<i64>().ok())
            .filter(|t| *t > 0)
            .map_or(0.0, |t| (now_ms - t) as f64 / 3_600_000.0);
        let space = get("commitLogDiskRatio")
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0);
        let ours = max_offset(runtime);
        let master = broker.broker_id == 0;
        let role =
            get("brokerRole").unwrap_or_else(|| if master { "MASTER" } else { "SLAVE" }.to_owned());
        let lag = if master {
            get("haSlaveLagBytes")
        } else {
            let group_master = brokers.iter().zip(&runtimes).find(|(other, _)| {
                other.broker_id == 0
                    && other.cluster == broker.cluster
                    && other.broker_name == broker.broker_name
            });
            group_master
                .and_then(|(_, runtime)| max_offset(runtime))
                .zip(ours)
                .map(|(theirs, ours)| (theirs - ours).max(0).to_string())
        };
        table.row(vec![
            broker.cluster.clone(),
            broker.broker_name.clone(),
            broker.broker_id.to_string(),
            broker.addr.clone(),
            version,
            format!("{:.2}", tps("putTps")),
            format!("{:.2}", tps("getTransferedTps")),
            format!("{hours:.2}"),
            format!("{space:.4}"),
            role.clone(),
            ours.map_or_else(|| "-".to_owned(), |o| o.to_string()),
            lag.clone().unwrap_or_else(|| "-".to_owned()),
        ]);
        json.push(json!({
            "clusterName": broker.cluster,
            "brokerName": broker.broker_name,
            "brokerId": broker.broker_id,
            "brokerAddr": broker.addr,
            "role": role,
            "haLagBytes": lag.and_then(|l| l.parse::<i64>().ok()),
            "runtime": runtime,
        }));
    }
    Ok(Report {
        json: json.into(),
        text: table.render(),
    })
}

/// `brokerStatus`: GET_BROKER_RUNTIME_INFO of each target, `key: value` per line.
///
/// # Errors
/// The first refusal.
pub fn broker_status(
    client: &mut AdminClient,
    args: &BrokerTargetArgs,
) -> Result<Report, AdminError> {
    let targets = args.resolve(client)?;
    let several = targets.len() > 1;
    let mut text = String::new();
    let mut json = Vec::new();
    for addr in targets {
        let table = runtime_info(client, &addr)?;
        let width = table.keys().map(String::len).max().unwrap_or(0);
        for (key, value) in &table {
            if several {
                text.push_str(&format!("{addr:<24} "));
            }
            text.push_str(&format!("{key:<width$}: {value}\n"));
        }
        json.push(json!({ "brokerAddr": addr, "table": table }));
    }
    Ok(Report {
        json: json.into(),
        text,
    })
}

/// `getBrokerConfig`: GET_BROKER_CONFIG of each target, `key = value` per line under a
/// `====addr====` heading.
///
/// # Errors
/// The first refusal.
pub fn broker_config(
    client: &mut AdminClient,
    args: &BrokerTargetArgs,
) -> Result<Report, AdminError> {
    let targets = args.resolve(client)?;
    let mut text = String::new();
    let mut json = Vec::new();
    for addr in targets {
        let response = client.call_ok(
            &addr,
            RemotingCommand::request(RequestCode::GET_BROKER_CONFIG),
        )?;
        let body = String::from_utf8_lossy(&response.body);
        let config: BTreeMap<String, String> = body
            .lines()
            .filter(|line| !line.trim_start().starts_with('#'))
            .filter_map(|line| line.split_once('='))
            .map(|(key, value)| (key.trim().to_owned(), value.trim().to_owned()))
            .collect();
        text.push_str(&format!("============{addr}============\n"));
        let width = config.keys().map(String::len).max().unwrap_or(0);
        for (key, value) in &config {
            text.push_str(&format!("{key:<width$} = {value}\n"));
        }
        json.push(json!({ "brokerAddr": addr, "config": config }));
    }
    Ok(Report {
        json: json.into(),
        text,
    })
}
