//! The clients that sent heartbeats: each consumer group's members and subscriptions, each
//! producer group's members, and how to reach a connection with the broker's own requests
//! (Java's `ConsumerManager`, `ProducerManager` and the channels of `ClientHousekeepingService`).
//!
//! Heartbeats, pulls (which read a group's subscription) and sends that look up a producer
//! all come here, so each table is a [`DashMap`] sharded by its key (group name, connection):
//! an operation locks only its key's shard, and no lock covers all clients. No operation
//! holds a reference into one table while it takes another, so no lock order exists.
//!
//! Invariants: a consumer group in the table has at least one member (a group's last member
//! leaving removes the group, its subscriptions and settings under the same shard lock, so
//! a heartbeat never joins a group left behind with a departed member's subscriptions); a
//! producer group in the table has at least one member; a subscription is replaced only by
//! one with a higher `subVersion`.

use crate::remoting::headers::NotifyConsumerIdsChangedRequestHeader;
use crate::remoting::heartbeat::{HeartbeatData, SubscriptionData};
use crate::remoting::server::{ConnectionId, Outbound};
use crate::remoting::{RemotingCommand, RequestCode};
use dashmap::DashMap;
use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

/// Where a client connects from and what it runs (`ClientChannelInfo`).
#[doc(alias = "ClientChannelInfo")]
#[derive(Clone, Debug)]
pub struct ClientChannel {
    /// The connection.
    pub connection: ConnectionId,
    /// The peer's address.
    pub addr: std::net::SocketAddr,
    /// Its language name (`JAVA`, `RUST`, …).
    pub language: String,
    /// Its `MQVersion` ordinal.
    pub version: i32,
}

/// A consumer group member as the broker's calls to it need it.
#[derive(Clone, Debug)]
pub struct ConsumerMember {
    /// Its client id.
    pub client_id: String,
    /// How to reach it.
    pub outbound: Outbound,
    /// Its `MQVersion` ordinal.
    pub version: i32,
}

/// The heartbeat clients and their connections' outbound halves.
#[derive(Debug, Default)]
pub(super) struct Clients {
    consumers: DashMap<String, ConsumerGroup>,
    producers: DashMap<String, HashMap<ConnectionId, Member>>,
    outbounds: DashMap<ConnectionId, Outbound>,
}

/// A client connection of a group.
#[derive(Clone, Debug)]
struct Member {
    client_id: String,
    client: ClientChannel,
    last_seen: Instant,
}

/// A consumer group's members and subscriptions (`ConsumerGroupInfo`).
#[derive(Clone, Debug, Default)]
struct ConsumerGroup {
    members: HashMap<ConnectionId, Member>,
    subscriptions: HashMap<String, SubscriptionData>,
    consume_type: Option<String>,
    message_model: Option<String>,
    consume_from_where: Option<String>,
}

impl Clients {
    /// Remembers how to reach `connection` with requests of the broker's own.
    pub(super) fn connection_opened(&self, connection: ConnectionId, outbound: Outbound) {
        self.outbounds.insert(connection, outbound);
    }

    /// Records a heartbeat; returns the consumer groups `client` joined.
    pub(super) fn heartbeat(&self, client: &ClientChannel, data: &HeartbeatData) -> Vec<String> {
        let connection = client.connection;
        let now = Instant::now();
        let member = Member {
            client_id: data.client_id.clone(),
            client: client.clone(),
            last_seen: now,
        };
        let mut joined = Vec::new();
        for consumer in &data.consumer_data_set {
            let mut group = self
                .consumers
                .entry(consumer.group_name.clone())
                .or_default();
            group.consume_type.clone_from(&consumer.consume_type);
            group.message_model.clone_from(&consumer.message_model);
            group
                .consume_from_where
                .clone_from(&consumer.consume_from_where);
            if group.members.insert(connection, member.clone()).is_none() {
                joined.push(consumer.group_name.clone());
            }
            for subscription in &consumer.subscription_data_set {
                let replace = group
                    .subscriptions
                    .get(&subscription.topic)
                    .is_none_or(|old| old.sub_version < subscription.sub_version);
                if replace {
                    group
                        .subscriptions
                        .insert(subscription.topic.clone(), subscription.clone());
                }
            }
        }
        for producer in &data.producer_data_set {
            self.producers
                .entry(producer.group_name.clone())
                .or_default()
                .insert(connection, member.clone());
        }
        joined
    }

    /// Removes `connection` from a group, or from every group and the outbounds when `group`
    /// is `None` (connection closed); returns the consumer groups it left.
    pub(super) fn unregister(&self, connection: ConnectionId, group: Option<&str>) -> Vec<String> {
        let mut left = Vec::new();
        match group {
            Some(group) => {
                let mut removed = false;
                self.consumers.remove_if_mut(group, |_, consumers| {
                    removed = consumers.members.remove(&connection).is_some();
                    consumers.members.is_empty()
                });
                if removed {
                    left.push(group.to_owned());
                }
                self.producers.remove_if_mut(group, |_, producers| {
                    producers.remove(&connection);
                    producers.is_empty()
                });
            }
            None => {
                self.outbounds.remove(&connection);
                self.consumers.retain(|name, consumers| {
                    if consumers.members.remove(&connection).is_some() {
                        left.push(name.clone());
                    }
                    !consumers.members.is_empty()
                });
                self.producers.retain(|_, producers| {
                    producers.remove(&connection);
                    !producers.is_empty()
                });
            }
        }
        left
    }

    /// Drops consumers silent for `timeout`; returns the groups that lost members.
    pub(super) fn expire(&self, timeout: Duration) -> Vec<String> {
        let mut changed = Vec::new();
        self.consumers.retain(|name, group| {
            let before = group.members.len();
            group.members.retain(|_, m| m.last_seen.elapsed() < timeout);
            if group.members.len() != before {
                changed.push(name.clone());
            }
            !group.members.is_empty()
        });
        changed
    }

    /// Sends NOTIFY_CONSUMER_IDS_CHANGED (oneway) to every member of `group`.
    pub(super) fn notify_consumer_ids_changed(&self, group: &str) {
        let header = NotifyConsumerIdsChangedRequestHeader {
            consumer_group: group.to_owned(),
        };
        for member in self.consumer_connections(group) {
            let Some(outbound) = self.outbound(member) else {
                continue;
            };
            let request = RemotingCommand::request_with_header(
                RequestCode::NOTIFY_CONSUMER_IDS_CHANGED,
                &header,
            );
            outbound.send_oneway(request);
        }
    }

    /// A way to reach one live producer of `group`: the one heard from last.
    pub(super) fn producer_outbound(&self, group: &str) -> Option<Outbound> {
        let mut members: Vec<(ConnectionId, Instant)> = self
            .producers
            .get(group)?
            .iter()
            .map(|(connection, member)| (*connection, member.last_seen))
            .collect();
        members.sort_by_key(|(_, last_seen)| std::cmp::Reverse(*last_seen));
        members
            .into_iter()
            .find_map(|(connection, _)| self.outbound(connection))
    }

    /// Client ids of a consumer group, sorted, each once.
    pub(super) fn consumer_ids(&self, group: &str) -> Vec<String> {
        let mut ids: Vec<String> = self
            .consumers
            .get(group)
            .map(|g| g.members.values().map(|m| m.client_id.clone()).collect())
            .unwrap_or_default();
        ids.sort();
        ids.dedup();
        ids
    }

    /// The consumer group's connections and settings as JSON (`ConsumerConnection`), `None`
    /// when no member is online.
    pub(super) fn consumer_connection_json(&self, group: &str) -> Option<serde_json::Value> {
        let group = self
            .consumers
            .get(group)
            .filter(|g| !g.members.is_empty())?;
        let connections: Vec<serde_json::Value> =
            group.members.values().map(connection_json).collect();
        let subscriptions: serde_json::Map<String, serde_json::Value> = group
            .subscriptions
            .iter()
            .map(|(topic, s)| {
                let value = serde_json::json!({
                    "classFilterMode": s.class_filter_mode,
                    "topic": s.topic, "subString": s.sub_string, "tagsSet": s.tags_set,
                    "codeSet": s.code_set, "subVersion": s.sub_version,
                    "expressionType": s.expression_type.as_deref().unwrap_or("TAG"),
                });
                (topic.clone(), value)
            })
            .collect();
        Some(serde_json::json!({
            "connectionSet": connections,
            "consumeFromWhere": group.consume_from_where,
            "consumeType": group.consume_type,
            "messageModel": group.message_model,
            "subscriptionTable": subscriptions,
        }))
    }

    /// The producer group's connections as JSON (`ProducerConnection`), `None` when none.
    pub(super) fn producer_connection_json(&self, group: &str) -> Option<serde_json::Value> {
        let members = self.producers.get(group).filter(|m| !m.is_empty())?;
        let connections: Vec<serde_json::Value> = members.values().map(connection_json).collect();
        Some(serde_json::json!({ "connectionSet": connections }))
    }

    /// The online consumer groups that subscribe to `topic`.
    pub(super) fn groups_subscribed_to(&self, topic: &str) -> BTreeSet<String> {
        self.consumers
            .iter()
            .filter(|entry| entry.value().subscriptions.contains_key(topic))
            .map(|entry| entry.key().clone())
            .collect()
    }

    /// Each member of a consumer group: its client id, how to reach it and its `MQVersion`
    /// ordinal, by client id.
    pub(super) fn consumer_members(&self, group: &str) -> Vec<ConsumerMember> {
        let members: Vec<(ConnectionId, String, i32)> = match self.consumers.get(group) {
            Some(group) => group
                .members
                .iter()
                .map(|(connection, m)| (*connection, m.client_id.clone(), m.client.version))
                .collect(),
            None => return Vec::new(),
        };
        let mut members: Vec<ConsumerMember> = members
            .into_iter()
            .filter_map(|(connection, client_id, version)| {
                Some(ConsumerMember {
                    outbound: self.outbound(connection)?,
                    client_id,
                    version,
                })
            })
            .collect();
        members.sort_by(|a, b| a.client_id.cmp(&b.client_id));
        members
    }

    /// How to reach the producer whose client id is `client_id`, in any group
    /// (`ProducerManager.findChannel`).
    pub(super) fn producer_by_client_id(&self, client_id: &str) -> Option<Outbound> {
        let connection = self.producers.iter().find_map(|group| {
            group
                .value()
                .iter()
                .find(|(_, member)| member.client_id == client_id)
                .map(|(connection, _)| *connection)
        })?;
        self.outbound(connection)
    }

    /// Every producer group's members (`ProducerTableInfo`): group name, then per member
    /// its client id, address, language, version and last heartbeat as epoch milliseconds.
    pub(super) fn producer_table_json(&self) -> serde_json::Value {
        let now = Instant::now();
        let epoch_now = super::now_ms();
        let mut table = serde_json::Map::new();
        let mut groups: Vec<(String, Vec<serde_json::Value>)> = self
            .producers
            .iter()
            .map(|group| {
                let members = group
                    .value()
                    .values()
                    .map(|m| {
                        let ago = now.saturating_duration_since(m.last_seen).as_millis();
                        let ago = i64::try_from(ago).unwrap_or(i64::MAX);
                        serde_json::json!({
                            "clientId": m.client_id,
                            "remoteIP": m.client.addr.to_string(),
                            "language": m.client.language,
                            "version": m.client.version,
                            "lastUpdateTimestamp": epoch_now.saturating_sub(ago),
                        })
                    })
                    .collect();
                (group.key().clone(), members)
            })
            .collect();
        groups.sort_by(|a, b| a.0.cmp(&b.0));
        for (group, members) in groups {
            table.insert(group, serde_json::Value::Array(members));
        }
        serde_json::json!({ "data": table })
    }

    /// Connections of a consumer group.
    pub(super) fn consumer_connections(&self, group: &str) -> Vec<ConnectionId> {
        self.consumers
            .get(group)
            .map(|g| g.members.keys().copied().collect())
            .unwrap_or_default()
    }

    /// How many topics the online members of a consumer group subscribe to.
    pub(super) fn subscription_count(&self, group: &str) -> usize {
        self.consumers
            .get(group)
            .map_or(0, |g| g.subscriptions.len())
    }

    /// The subscription a consumer group registered for `topic`.
    pub(super) fn subscription(&self, group: &str, topic: &str) -> Option<SubscriptionData> {
        self.consumers.get(group)?.subscriptions.get(topic).cloned()
    }

    /// Whether any member of `group` is online.
    pub(super) fn has_consumer_group(&self, group: &str) -> bool {
        self.consumers.contains_key(group)
    }

    /// Whether the members of `group` said they consume by broadcast (`BROADCASTING`).
    pub(super) fn consumes_by_broadcast(&self, group: &str) -> bool {
        self.consumers
            .get(group)
            .is_some_and(|g| g.message_model.as_deref() == Some("BROADCASTING"))
    }

    fn outbound(&self, connection: ConnectionId) -> Option<Outbound> {
        self.outbounds.get(&connection).map(|o| o.value().clone())
    }
}

fn connection_json(member: &Member) -> serde_json::Value {
    serde_json::json!({
        "clientAddr": member.client.addr.to_string(),
        "clientId": member.client_id,
        "language": member.client.language,
        "version": member.client.version,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::heartbeat::{ConsumerData, ProducerData};
    use ferromq_shards::ShardId;

    fn channel(seq: u64) -> ClientChannel {
        ClientChannel {
            connection: ConnectionId {
                shard: ShardId(0),
                seq,
            },
            addr: std::net::SocketAddr::from(([127, 0, 0, 1], 10_000)),
            language: "JAVA".to_owned(),
            version: 373,
        }
    }

    fn subscription(topic: &str, sub_version: i64) -> SubscriptionData {
        SubscriptionData {
            topic: topic.to_owned(),
            sub_string: "*".to_owned(),
            sub_version,
            ..SubscriptionData::default()
        }
    }

    fn heartbeat(
        client_id: &str,
        group: &str,
        subscriptions: Vec<SubscriptionData>,
    ) -> HeartbeatData {
        HeartbeatData {
            client_id: client_id.to_owned(),
            producer_data_set: vec![ProducerData {
                group_name: format!("{group}-producer"),
            }],
            consumer_data_set: vec![ConsumerData {
                group_name: group.to_owned(),
                message_model: Some("CLUSTERING".to_owned()),
                subscription_data_set: subscriptions,
                ..ConsumerData::default()
            }],
        }
    }

    #[test]
    fn heartbeat_reports_a_group_only_when_a_connection_joins_it() {
        let clients = Clients::default();
        let data = heartbeat("b@1", "g", vec![subscription("t", 1)]);
        assert_eq!(clients.heartbeat(&channel(1), &data), vec!["g"]);
        assert_eq!(clients.heartbeat(&channel(1), &data), Vec::<String>::new());
        assert_eq!(
            clients.heartbeat(&channel(2), &heartbeat("a@1", "g", vec![])),
            vec!["g"]
        );
        assert_eq!(clients.heartbeat(&channel(3), &data), vec!["g"]);
        assert_eq!(clients.consumer_ids("g"), vec!["a@1", "b@1"]);
        assert!(clients.has_consumer_group("g"));
        assert!(!clients.consumes_by_broadcast("g"));
        assert_eq!(clients.subscription_count("g"), 1);
        let json = clients.producer_connection_json("g-producer").unwrap();
        assert_eq!(json["connectionSet"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn subscription_is_replaced_only_by_a_newer_version() {
        let clients = Clients::default();
        let _ = clients.heartbeat(
            &channel(1),
            &heartbeat("c", "g", vec![subscription("t", 5)]),
        );
        let _ = clients.heartbeat(
            &channel(1),
            &heartbeat("c", "g", vec![subscription("t", 4)]),
        );
        assert_eq!(clients.subscription("g", "t").unwrap().sub_version, 5);
        let _ = clients.heartbeat(
            &channel(1),
            &heartbeat("c", "g", vec![subscription("t", 6)]),
        );
        assert_eq!(clients.subscription("g", "t").unwrap().sub_version, 6);
        assert!(clients.subscription("g", "u").is_none());
        assert!(clients.groups_subscribed_to("t").contains("g"));
    }

    #[test]
    fn unregister_of_the_last_member_forgets_the_group_and_its_subscriptions() {
        let clients = Clients::default();
        let _ = clients.heartbeat(
            &channel(1),
            &heartbeat("c", "g", vec![subscription("t", 1)]),
        );
        let _ = clients.heartbeat(&channel(2), &heartbeat("d", "h", vec![]));
        assert_eq!(
            clients.unregister(channel(1).connection, Some("h")),
            Vec::<String>::new()
        );
        assert_eq!(
            clients.unregister(channel(1).connection, Some("g")),
            vec!["g"]
        );
        assert!(!clients.has_consumer_group("g"));
        assert!(clients.consumer_connection_json("g").is_none());
        // A name is a consumer group's or a producer group's, each unregistered by its own.
        assert!(clients.producer_connection_json("g-producer").is_some());
        let left = clients.unregister(channel(1).connection, Some("g-producer"));
        assert_eq!(left, Vec::<String>::new());
        assert!(clients.producer_connection_json("g-producer").is_none());
        let _ = clients.heartbeat(&channel(3), &heartbeat("e", "g", vec![]));
        assert_eq!(clients.subscription_count("g"), 0);
        assert_eq!(clients.unregister(channel(2).connection, None), vec!["h"]);
        assert!(!clients.has_consumer_group("h"));
        assert_eq!(
            clients.consumer_connections("g"),
            vec![channel(3).connection]
        );
    }

    #[test]
    fn expire_drops_members_silent_for_the_timeout() {
        let clients = Clients::default();
        let _ = clients.heartbeat(&channel(1), &heartbeat("c", "g", vec![]));
        assert_eq!(
            clients.expire(Duration::from_secs(3600)),
            Vec::<String>::new()
        );
        assert_eq!(clients.expire(Duration::ZERO), vec!["g"]);
        assert!(!clients.has_consumer_group("g"));
        assert!(clients.consumer_ids("g").is_empty());
    }
}
