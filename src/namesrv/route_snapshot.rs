//! `RouteSnapshot`: every topic's route, already encoded, published by the owner shard so that
//! each net shard answers GET_ROUTEINFO_BY_TOPIC without a cross-shard hop.
//!
//! The owner of the route tables rebuilds the snapshot after every change and swaps it in
//! (`arc_swap`) before it answers the request that made the change, so a client that learns of
//! a registration can never read an older route afterwards, whichever shard serves it. Readers
//! take no lock; a snapshot is immutable once published.
//!
//! Each route is encoded in both JSON flavours at build time (`reference/remoting.md` §10.3):
//! lookups outnumber registrations by orders of magnitude.

use super::kv_config::{KvConfigManager, NAMESPACE_ORDER_TOPIC_CONFIG};
use super::processor::route_flavour;
use super::route_info::RouteInfoManager;
use crate::remoting::body::JsonFlavour;
use crate::remoting::headers::GetRouteInfoRequestHeader;
use crate::remoting::{RemotingCommand, ResponseCode};
use std::collections::HashMap;
use std::sync::Arc;

/// The snapshot shared by the owner (writer) and every net shard (readers).
pub type SharedRouteSnapshot = Arc<arc_swap::ArcSwap<RouteSnapshot>>;

/// Encoded routes of every topic.
#[derive(Debug, Default)]
pub struct RouteSnapshot {
    routes: HashMap<String, EncodedRoute>,
    /// Live brokers when it was built (for the metrics).
    brokers: usize,
}

#[derive(Debug)]
struct EncodedRoute {
    standard: Vec<u8>,
    fastjson: Vec<u8>,
}

impl RouteSnapshot {
    /// Encodes every route in `routes`; with `order_message_enable`, each carries its
    /// `ORDER_TOPIC_CONFIG` entry from `kv`.
    #[must_use]
    pub fn build(
        routes: &RouteInfoManager,
        kv: &KvConfigManager,
        order_message_enable: bool,
    ) -> RouteSnapshot {
        let mut encoded = HashMap::new();
        for topic in routes.all_topics() {
            let Some(mut route) = routes.pickup_topic_route_data(&topic) else {
                continue;
            };
            if order_message_enable {
                route.order_topic_conf = kv
                    .get(NAMESPACE_ORDER_TOPIC_CONFIG, &topic)
                    .map(str::to_owned);
            }
            let standard = route.to_json(JsonFlavour::Standard);
            let fastjson = route.to_json(JsonFlavour::Fastjson);
            encoded.insert(topic, EncodedRoute { standard, fastjson });
        }
        RouteSnapshot {
            routes: encoded,
            brokers: routes.live_broker_count(),
        }
    }

    /// Topics with a route.
    #[must_use]
    pub fn topic_count(&self) -> usize {
        self.routes.len()
    }

    /// Live brokers (registered, not expired).
    #[must_use]
    pub fn broker_count(&self) -> usize {
        self.brokers
    }

    /// A new shared cell holding an empty snapshot.
    #[must_use]
    pub fn shared() -> SharedRouteSnapshot {
        Arc::new(arc_swap::ArcSwap::from_pointee(RouteSnapshot::default()))
    }

    /// The response to GET_ROUTEINFO_BY_TOPIC, as the Java name server gives it.
    #[must_use]
    pub fn answer(&self, request: &RemotingCommand) -> RemotingCommand {
        let header: GetRouteInfoRequestHeader = match request.decode_header() {
            Ok(header) => header,
            Err(error) => {
                return RemotingCommand::response_to(
                    request,
                    ResponseCode::SYSTEM_ERROR,
                    Some(error.to_string()),
                )
            }
        };
        let Some(route) = self.routes.get(&header.topic) else {
            let remark = format!(
                "No topic route info in name server for the topic: {}\n\
                 See http://rocketmq.apache.org/docs/faq/ for further details.",
                header.topic
            );
            return RemotingCommand::response_to(
                request,
                ResponseCode::TOPIC_NOT_EXIST,
                Some(remark),
            );
        };
        let body = match route_flavour(request.version, header.accept_standard_json_only) {
            JsonFlavour::Standard => route.standard.clone(),
            JsonFlavour::Fastjson => route.fastjson.clone(),
        };
        RemotingCommand::success_to(request).with_body(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::namesrv::route_info::Registration;
    use crate::remoting::body::{RegisterBrokerBody, TopicConfig};
    use crate::remoting::RequestCode;

    fn request(topic: &str, version: i32) -> RemotingCommand {
        let header = GetRouteInfoRequestHeader {
            topic: topic.into(),
            accept_standard_json_only: None,
        };
        let mut request =
            RemotingCommand::request_with_header(RequestCode::GET_ROUTEINFO_BY_TOPIC, &header);
        request.version = version;
        request
    }

    #[test]
    fn snapshot_answers_each_flavour_and_missing_topics() {
        let mut routes = RouteInfoManager::new(120_000);
        let mut body = RegisterBrokerBody::default();
        body.topic_config_serialize_wrapper
            .insert(TopicConfig::named("T"));
        let registration = Registration {
            cluster: "c".into(),
            broker_addr: "h:1".into(),
            broker_name: "b".into(),
            broker_id: 0,
            ha_server_addr: "h:2".into(),
            zone_name: None,
            timeout_ms: None,
            enable_acting_master: false,
            body,
            channel: None,
        };
        routes.register_broker(registration, 0);
        let mut kv = KvConfigManager::default();
        kv.put(NAMESPACE_ORDER_TOPIC_CONFIG, "T", "b:16");
        let snapshot = RouteSnapshot::build(&routes, &kv, true);
        let standard = String::from_utf8(snapshot.answer(&request("T", 409)).body).unwrap();
        assert!(
            standard.contains(r#""brokerAddrs":{"0":"h:1"}"#),
            "{standard}"
        );
        assert!(
            standard.contains(r#""orderTopicConf":"b:16""#),
            "{standard}"
        );
        let legacy = String::from_utf8(snapshot.answer(&request("T", 317)).body).unwrap();
        assert!(legacy.contains(r#""brokerAddrs":{0:"h:1"}"#), "{legacy}");
        let missing = snapshot.answer(&request("U", 409));
        assert_eq!(missing.response_code(), ResponseCode::TOPIC_NOT_EXIST);
        let no_header = snapshot.answer(&RemotingCommand::request(
            RequestCode::GET_ROUTEINFO_BY_TOPIC,
        ));
        assert_eq!(no_header.response_code(), ResponseCode::SYSTEM_ERROR);
    }
}
