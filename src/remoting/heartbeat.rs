//! The HEART_BEAT body and the queue name shared by the broker and the client library.
//!
//! Clients send [`HeartbeatData`] as JSON every 30 s; the broker reads it leniently (fastjson
//! forms) and the client writes it with Java's field names (`clientID`, `producerDataSet`,
//! `consumerDataSet`, ...), so either side interoperates with Java peers. Building a
//! subscription from a tag expression lives in `client::filter` (it needs Java's string hash,
//! and `remoting` imports neither `store` nor `broker`).

use serde::{Deserialize, Serialize};

/// The subscription expression that matches every tag (`SubscriptionData.SUB_ALL`).
pub const SUB_ALL: &str = "*";
/// The expression type of tag filters (`ExpressionType.TAG`).
pub const EXPRESSION_TYPE_TAG: &str = "TAG";

/// One subscription of a consumer group, from its heartbeat (Java `SubscriptionData`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SubscriptionData {
    /// Legacy class filter mode; always false here.
    pub class_filter_mode: bool,
    /// Topic.
    pub topic: String,
    /// The expression (`*`, `a || b`).
    pub sub_string: String,
    /// Tags of a TAG expression.
    pub tags_set: Vec<String>,
    /// Their hash codes (Java `String.hashCode`).
    pub code_set: Vec<i32>,
    /// Version (time of the subscription, ms).
    pub sub_version: i64,
    /// `TAG` or `SQL92`; absent means TAG.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expression_type: Option<String>,
}

/// One consumer group in a heartbeat (Java `ConsumerData`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ConsumerData {
    /// Group.
    pub group_name: String,
    /// `CONSUME_ACTIVELY` (pull) or `CONSUME_PASSIVELY` (push).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_type: Option<String>,
    /// `CLUSTERING` or `BROADCASTING`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_model: Option<String>,
    /// Where a new consumer starts (`CONSUME_FROM_LAST_OFFSET`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consume_from_where: Option<String>,
    /// Subscriptions.
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit mode; always false here.
    pub unit_mode: bool,
}

/// One producer group in a heartbeat (Java `ProducerData`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    /// Group.
    pub group_name: String,
}

/// The body of HEART_BEAT (Java `HeartbeatData`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct HeartbeatData {
    /// Client id (`ip@instanceName`).
    #[serde(rename = "clientID")]
    pub client_id: String,
    /// Producer groups.
    #[serde(rename = "producerDataSet")]
    pub producer_data_set: Vec<ProducerData>,
    /// Consumer groups.
    #[serde(rename = "consumerDataSet")]
    pub consumer_data_set: Vec<ConsumerData>,
}

impl HeartbeatData {
    /// The JSON body, with Java's field names.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        // Plain structs of strings, numbers and lists always serialize.
        serde_json::to_vec(self).unwrap_or_default()
    }
}

/// A message queue as clients name it (Java `MessageQueue`): topic, broker and queue id.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueue {
    /// Topic.
    pub topic: String,
    /// Broker name.
    pub broker_name: String,
    /// Queue id.
    pub queue_id: i32,
}

impl MessageQueue {
    /// A queue.
    #[must_use]
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: i32) -> Self {
        MessageQueue {
            topic: topic.into(),
            broker_name: broker_name.into(),
            queue_id,
        }
    }
}

impl std::fmt::Display for MessageQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MessageQueue [topic={}, brokerName={}, queueId={}]",
            self.topic, self.broker_name, self.queue_id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_json_uses_java_field_names_and_round_trips() {
        let data = HeartbeatData {
            client_id: "1.2.3.4@DEFAULT".into(),
            producer_data_set: vec![ProducerData {
                group_name: "pg".into(),
            }],
            consumer_data_set: vec![ConsumerData {
                group_name: "cg".into(),
                consume_type: Some("CONSUME_PASSIVELY".into()),
                subscription_data_set: vec![SubscriptionData {
                    topic: "T".into(),
                    sub_string: "x".into(),
                    tags_set: vec!["x".into()],
                    code_set: vec![120],
                    ..SubscriptionData::default()
                }],
                ..ConsumerData::default()
            }],
        };
        let json = String::from_utf8(data.to_json()).unwrap();
        for key in [
            "\"clientID\"",
            "\"producerDataSet\"",
            "\"consumerDataSet\"",
            "\"groupName\"",
            "\"consumeType\"",
            "\"subscriptionDataSet\"",
            "\"subString\"",
            "\"tagsSet\"",
            "\"codeSet\"",
            "\"subVersion\"",
            "\"classFilterMode\"",
            "\"unitMode\"",
        ] {
            assert!(json.contains(key), "{key} missing in {json}");
        }
        let back: HeartbeatData = serde_json::from_slice(json.as_bytes()).unwrap();
        assert_eq!(back, data);
    }
}
