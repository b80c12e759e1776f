//! The controller's JSON bodies, as Java's fastjson writes and reads them (classes of
//! `remoting/protocol/body/`): `SyncStateSet`, `ElectMasterResponseBody` with its
//! `BrokerMemberGroup`, `BrokerReplicasInfo`, and the broker-name list of
//! CONTROLLER_GET_SYNC_STATE_DATA.
//!
//! Integer-keyed maps (`brokerAddrs`) are written with quoted keys, which fastjson reads as
//! it reads its own bare ones; bodies from peers are read with
//! [`crate::protocol::fastjson::parse_lenient`], which takes both.

use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// `SyncStateSet`: `{"syncStateSet":[1,2],"syncStateSetEpoch":3}`.
#[must_use]
pub fn sync_state_set(set: &BTreeSet<i64>, epoch: i32) -> Vec<u8> {
    json!({"syncStateSet": set, "syncStateSetEpoch": epoch})
        .to_string()
        .into_bytes()
}

/// Reads a `SyncStateSet` body.
///
/// # Errors
/// Why it is not one, for the response's remark.
pub fn read_sync_state_set(body: &[u8]) -> Result<(BTreeSet<i64>, i32), String> {
    let value = ferromq_protocol::fastjson::parse_lenient(body)?;
    let ids = value
        .get("syncStateSet")
        .and_then(Value::as_array)
        .ok_or("no syncStateSet array in the body")?
        .iter()
        .map(|id| id.as_i64().ok_or("a syncStateSet member is not an id"))
        .collect::<Result<BTreeSet<i64>, _>>()?;
    let epoch = value
        .get("syncStateSetEpoch")
        .and_then(Value::as_i64)
        .and_then(|epoch| i32::try_from(epoch).ok())
        .ok_or("no syncStateSetEpoch in the body")?;
    Ok((ids, epoch))
}

/// Reads the JSON list of broker names of CONTROLLER_GET_SYNC_STATE_DATA.
///
/// # Errors
/// Why it is not one.
pub fn read_broker_names(body: &[u8]) -> Result<Vec<String>, String> {
    let value = ferromq_protocol::fastjson::parse_lenient(body)?;
    value
        .as_array()
        .ok_or("the body is not a list of broker names")?
        .iter()
        .map(|name| {
            name.as_str()
                .map(str::to_owned)
                .ok_or("a broker name is not a string")
        })
        .collect::<Result<Vec<String>, _>>()
        .map_err(str::to_owned)
}

/// `BrokerMemberGroup`: a group's cluster, name and id-to-address table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerMemberGroup {
    /// `cluster`.
    pub cluster: String,
    /// `brokerName`.
    pub broker_name: String,
    /// `brokerAddrs`.
    pub broker_addrs: BTreeMap<i64, String>,
}

impl BrokerMemberGroup {
    fn to_value(&self) -> Value {
        let addrs: Map<String, Value> = self
            .broker_addrs
            .iter()
            .map(|(id, addr)| (id.to_string(), Value::from(addr.as_str())))
            .collect();
        json!({"brokerAddrs": addrs, "brokerName": self.broker_name, "cluster": self.cluster})
    }
}

/// `ElectMasterResponseBody`.
#[must_use]
pub fn elect_master(group: Option<&BrokerMemberGroup>, set: &BTreeSet<i64>) -> Vec<u8> {
    let mut body = Map::new();
    if let Some(group) = group {
        body.insert("brokerMemberGroup".to_owned(), group.to_value());
    }
    body.insert("syncStateSet".to_owned(), json!(set));
    Value::Object(body).to_string().into_bytes()
}

/// One replica of `BrokerReplicasInfo.ReplicaIdentity`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaIdentity {
    /// `brokerName`.
    pub broker_name: String,
    /// `brokerId`.
    pub broker_id: i64,
    /// `brokerAddress`.
    pub broker_address: String,
    /// `alive`.
    pub alive: bool,
}

/// One group of `BrokerReplicasInfo.ReplicasInfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicasInfo {
    /// `masterBrokerId`.
    pub master_broker_id: Option<i64>,
    /// `masterAddress`.
    pub master_address: Option<String>,
    /// `masterEpoch`.
    pub master_epoch: i32,
    /// `syncStateSetEpoch`.
    pub sync_state_set_epoch: i32,
    /// `inSyncReplicas`.
    pub in_sync_replicas: Vec<ReplicaIdentity>,
    /// `notInSyncReplicas`.
    pub not_in_sync_replicas: Vec<ReplicaIdentity>,
}

/// `BrokerReplicasInfo`: `{"replicasInfoTable":{name: ReplicasInfo}}`.
#[must_use]
pub fn broker_replicas_info(table: &BTreeMap<String, ReplicasInfo>) -> Vec<u8> {
    let replica = |r: &ReplicaIdentity| {
        json!({
            "alive": r.alive,
            "brokerAddress": r.broker_address,
            "brokerId": r.broker_id,
            "brokerName": r.broker_name,
        })
    };
    let groups: Map<String, Value> = table
        .iter()
        .map(|(name, info)| {
            let mut group = Map::new();
            let in_sync: Vec<Value> = info.in_sync_replicas.iter().map(replica).collect();
            let not_in_sync: Vec<Value> = info.not_in_sync_replicas.iter().map(replica).collect();
            group.insert("inSyncReplicas".to_owned(), Value::from(in_sync));
            if let Some(address) = &info.master_address {
                group.insert("masterAddress".to_owned(), Value::from(address.as_str()));
            }
            if let Some(id) = info.master_broker_id {
                group.insert("masterBrokerId".to_owned(), Value::from(id));
            }
            group.insert("masterEpoch".to_owned(), Value::from(info.master_epoch));
            group.insert("notInSyncReplicas".to_owned(), Value::from(not_in_sync));
            group.insert(
                "syncStateSetEpoch".to_owned(),
                Value::from(info.sync_state_set_epoch),
            );
            (name.clone(), Value::Object(group))
        })
        .collect();
    json!({"replicasInfoTable": groups})
        .to_string()
        .into_bytes()
}
