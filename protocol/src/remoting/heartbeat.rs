//! The HEART_BEAT body and the queue name shared by the broker and the client library.
//!
//! Clients send [`HeartbeatData`] as JSON every 30 s; the broker reads it leniently, as
//! fastjson binds it (a number or boolean as a string, `"7"` for a number, `null` for a
//! default), and the client writes it with Java's field names (`clientID`, `producerDataSet`,
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
    #[serde(deserialize_with = "lenient::boolean")]
    pub class_filter_mode: bool,
    /// Topic.
    #[serde(deserialize_with = "lenient::text")]
    pub topic: String,
    /// The expression (`*`, `a || b`).
    #[serde(deserialize_with = "lenient::text")]
    pub sub_string: String,
    /// Tags of a TAG expression.
    pub tags_set: Vec<String>,
    /// Their hash codes (Java `String.hashCode`).
    #[serde(deserialize_with = "lenient::ints")]
    pub code_set: Vec<i32>,
    /// Version (time of the subscription, ms).
    #[serde(deserialize_with = "lenient::long")]
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
    #[serde(deserialize_with = "lenient::text")]
    pub group_name: String,
    /// `CONSUME_ACTIVELY` (pull) or `CONSUME_PASSIVELY` (push).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::consume_type"
    )]
    pub consume_type: Option<String>,
    /// `CLUSTERING` or `BROADCASTING`.
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::message_model"
    )]
    pub message_model: Option<String>,
    /// Where a new consumer starts (`CONSUME_FROM_LAST_OFFSET`, ...).
    #[serde(
        skip_serializing_if = "Option::is_none",
        deserialize_with = "lenient::consume_from_where"
    )]
    pub consume_from_where: Option<String>,
    /// Subscriptions.
    pub subscription_data_set: Vec<SubscriptionData>,
    /// Unit mode; always false here.
    #[serde(deserialize_with = "lenient::boolean")]
    pub unit_mode: bool,
}

/// One producer group in a heartbeat (Java `ProducerData`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ProducerData {
    /// Group.
    #[serde(deserialize_with = "lenient::text")]
    pub group_name: String,
}

/// The body of HEART_BEAT (Java `HeartbeatData`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(default)]
pub struct HeartbeatData {
    /// Client id (`ip@instanceName`).
    #[serde(rename = "clientID", deserialize_with = "lenient::text")]
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

/// Scalars as fastjson binds them to a Java field: a string for a number or boolean and
/// the other way round, `null` as the type's default, an enum by name or by ordinal.
mod lenient {
    use serde::de::{self, Deserializer, Visitor};
    use std::fmt;

    /// Java `ConsumeType`, in declaration order.
    const CONSUME_TYPE: &[&str] = &["CONSUME_ACTIVELY", "CONSUME_PASSIVELY"];
    /// Java `MessageModel`, in declaration order.
    const MESSAGE_MODEL: &[&str] = &["BROADCASTING", "CLUSTERING"];
    /// Java `ConsumeFromWhere` (4.9), in declaration order, the deprecated ones included.
    const CONSUME_FROM_WHERE: &[&str] = &[
        "CONSUME_FROM_LAST_OFFSET",
        "CONSUME_FROM_LAST_OFFSET_AND_FROM_MIN_WHEN_BOOT_FIRST",
        "CONSUME_FROM_MIN_OFFSET",
        "CONSUME_FROM_MAX_OFFSET",
        "CONSUME_FROM_FIRST_OFFSET",
        "CONSUME_FROM_TIMESTAMP",
    ];

    /// A `ConsumeType`; see [`java_enum`].
    pub fn consume_type<'de, D>(deserializer: D) -> Result<Option<String>, D::Error>
    where
        D: Deserializer<'de>,
    {
        java_enum(deserializer, "ConsumeType", CONSUME_TYPE)
    }

    /// A `MessageModel`; see [`java_enum`].
    pub fn message_model<'de, D>(deserializer: D) -> Result<Option<String>, D::Error>
    where
        D: Deserializer<'de>,
    {
        java_enum(deserializer, "MessageModel", MESSAGE_MODEL)
    }

    /// A `ConsumeFromWhere`; see [`java_enum`].
    pub fn consume_from_where<'de, D>(deserializer: D) -> Result<Option<String>, D::Error>
    where
        D: Deserializer<'de>,
    {
        java_enum(deserializer, "ConsumeFromWhere", CONSUME_FROM_WHERE)
    }

    /// A Java enum as fastjson binds it: a name as given (`null` is none), or a number as the
    /// constant at that ordinal, out of range an error. The C++ client (librocketmq, as the
    /// `rocketmq` 0.4.4 Python package bundles it) writes `consumeType`, `messageModel` and
    /// `consumeFromWhere` as ordinals.
    fn java_enum<'de, D: Deserializer<'de>>(
        deserializer: D,
        java_name: &'static str,
        names: &'static [&'static str],
    ) -> Result<Option<String>, D::Error> {
        struct JavaEnum {
            java_name: &'static str,
            names: &'static [&'static str],
        }
        impl Visitor<'_> for JavaEnum {
            type Value = Option<String>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a {} name or ordinal", self.java_name)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
                Ok(Some(s.to_owned()))
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Self::Value, E> {
                usize::try_from(n)
                    .ok()
                    .and_then(|i| self.names.get(i))
                    .map(|name| Some((*name).to_owned()))
                    .ok_or_else(|| E::custom(format!("{n} is no {} ordinal", self.java_name)))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Self::Value, E> {
                match u64::try_from(n) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::custom(format!("{n} is no {} ordinal", self.java_name))),
                }
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
        }
        deserializer.deserialize_any(JavaEnum { java_name, names })
    }

    /// A `long`: a number or a numeric string; `null` is 0.
    pub fn long<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
        struct Long;
        impl Visitor<'_> for Long {
            type Value = i64;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a long (a number or a numeric string)")
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<i64, E> {
                Ok(n)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<i64, E> {
                i64::try_from(n).map_err(|_| E::custom(format!("{n} is out of a long's range")))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<i64, E> {
                s.trim()
                    .parse()
                    .map_err(|_| E::custom(format!("{s:?} is not a long")))
            }
            fn visit_unit<E: de::Error>(self) -> Result<i64, E> {
                Ok(0)
            }
        }
        deserializer.deserialize_any(Long)
    }

    /// A `Set<Integer>`: each element an `int` as a number or a numeric string (the Go
    /// client, rocketmq-client-go 2.1, sends the tag hash codes as strings); `null` is empty.
    pub fn ints<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<i32>, D::Error> {
        struct Int(i32);
        impl<'de> serde::Deserialize<'de> for Int {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Int, D::Error> {
                let n = long(deserializer)?;
                i32::try_from(n)
                    .map(Int)
                    .map_err(|_| de::Error::custom(format!("{n} is out of an int's range")))
            }
        }
        let ints: Option<Vec<Int>> = serde::Deserialize::deserialize(deserializer)?;
        Ok(ints
            .unwrap_or_default()
            .into_iter()
            .map(|Int(n)| n)
            .collect())
    }

    /// A `boolean`: a boolean, or a string that is `true` ignoring case (anything else is
    /// false), or a number other than 0; `null` is false.
    pub fn boolean<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
        struct Boolean;
        impl Visitor<'_> for Boolean {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a boolean")
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<bool, E> {
                Ok(b)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<bool, E> {
                Ok(n != 0)
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<bool, E> {
                Ok(n != 0)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<bool, E> {
                Ok(s.trim().eq_ignore_ascii_case("true"))
            }
            fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
                Ok(false)
            }
        }
        deserializer.deserialize_any(Boolean)
    }

    /// A `String`: a string, or a number or boolean as its text; `null` is empty.
    pub fn text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = String;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<String, E> {
                Ok(s.to_owned())
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<String, E> {
                Ok(n.to_string())
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<String, E> {
                Ok(n.to_string())
            }
            fn visit_f64<E: de::Error>(self, n: f64) -> Result<String, E> {
                Ok(n.to_string())
            }
            fn visit_bool<E: de::Error>(self, b: bool) -> Result<String, E> {
                Ok(b.to_string())
            }
            fn visit_unit<E: de::Error>(self) -> Result<String, E> {
                Ok(String::new())
            }
        }
        deserializer.deserialize_any(Text)
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

    #[test]
    fn heartbeat_reads_scalars_as_fastjson_binds_them() {
        let json = br#"{"clientID":null,"consumerDataSet":[{"groupName":7,"unitMode":"TRUE",
            "subscriptionDataSet":[{"topic":"T","subString":"*","subVersion":"17",
            "classFilterMode":null,"codeSet":["-663426333",97]}]}]}"#;
        let data: HeartbeatData = serde_json::from_slice(json).unwrap();
        assert_eq!(data.client_id, "");
        let consumer = &data.consumer_data_set[0];
        assert_eq!(consumer.group_name, "7");
        assert!(consumer.unit_mode);
        assert_eq!(consumer.subscription_data_set[0].sub_version, 17);
        assert_eq!(
            consumer.subscription_data_set[0].code_set,
            [-663_426_333, 97]
        );
        assert!(serde_json::from_slice::<HeartbeatData>(
            br#"{"consumerDataSet":[{"subscriptionDataSet":[{"subVersion":"x"}]}]}"#
        )
        .is_err());
        assert!(serde_json::from_slice::<HeartbeatData>(
            br#"{"consumerDataSet":[{"subscriptionDataSet":[{"codeSet":["3000000000"]}]}]}"#
        )
        .is_err());
    }

    #[test]
    fn heartbeat_reads_enum_ordinals_as_java_names() {
        // As the C++ client (librocketmq under the `rocketmq` 0.4.4 Python package) writes
        // a push consumer's entry.
        let json = br#"{"clientID":"1-127.0.0.1@DEFAULT","consumerDataSet":[{
            "consumeFromWhere":4,"consumeType":1,"groupName":"G","messageModel":0,
            "subscriptionDataSet":[{"subString":"*","subVersion":"1","topic":"T"}]}]}"#;
        let data: HeartbeatData = serde_json::from_slice(json).unwrap();
        let consumer = &data.consumer_data_set[0];
        assert_eq!(
            consumer.consume_from_where.as_deref(),
            Some("CONSUME_FROM_FIRST_OFFSET")
        );
        assert_eq!(consumer.consume_type.as_deref(), Some("CONSUME_PASSIVELY"));
        assert_eq!(consumer.message_model.as_deref(), Some("BROADCASTING"));
        let named: HeartbeatData = serde_json::from_slice(
            br#"{"consumerDataSet":[{"messageModel":"CLUSTERING","consumeType":null}]}"#,
        )
        .unwrap();
        assert_eq!(
            named.consumer_data_set[0].message_model.as_deref(),
            Some("CLUSTERING")
        );
        assert_eq!(named.consumer_data_set[0].consume_type, None);
        for bad in [
            &br#"{"consumerDataSet":[{"messageModel":2}]}"#[..],
            br#"{"consumerDataSet":[{"consumeType":-1}]}"#,
            br#"{"consumerDataSet":[{"consumeFromWhere":6}]}"#,
        ] {
            assert!(serde_json::from_slice::<HeartbeatData>(bad).is_err());
        }
    }
}
