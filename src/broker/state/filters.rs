//! The SQL92 selectors consumer groups registered by heartbeat, compiled once per change
//! (Java's `ConsumerFilterManager`): a pull of a group without its own subscription uses the
//! selector kept here, and a retry topic's messages are filtered with the selector of their
//! original topic (`filterSupportRetry`).
//!
//! Invariant: an entry's selector is the compiled form of its expression, and an entry is
//! replaced only by a heartbeat with a higher `subVersion` (its `clientVersion`), as Java's.
//! A group that leaves marks its entries dead; dead entries still answer pulls (as Java's
//! do) and are dropped `filterDataCleanTimeSpan` after they died.

use crate::remoting::heartbeat::SubscriptionData;
use dashmap::DashMap;
use ferromq_protocol::filter::sql92::Selector;
use ferromq_protocol::filter::EXPRESSION_TYPE_SQL92;
use std::collections::HashMap;
use std::sync::Arc;

/// One group's selector for one topic (`ConsumerFilterData`).
#[derive(Clone, Debug)]
pub struct ConsumerFilterData {
    /// The expression as the client sent it.
    pub expression: String,
    /// Its `expressionType` (`SQL92`).
    pub expression_type: String,
    /// The `subVersion` of the heartbeat that registered it.
    pub client_version: i64,
    /// The compiled expression.
    pub selector: Arc<Selector>,
    /// When the group left (0 while it is there), ms since the epoch.
    pub dead_time_ms: i64,
}

impl ConsumerFilterData {
    /// Compiles a subscription's expression (`ConsumerFilterManager.build`); `None` for a
    /// tag subscription or one that does not compile (logged, as Java logs it).
    fn build(topic: &str, group: &str, subscription: &SubscriptionData) -> Option<Self> {
        if subscription.expression_type() != EXPRESSION_TYPE_SQL92 {
            return None;
        }
        match Selector::compile(&subscription.sub_string) {
            Ok(selector) => Some(ConsumerFilterData {
                expression: subscription.sub_string.clone(),
                expression_type: EXPRESSION_TYPE_SQL92.to_owned(),
                client_version: subscription.sub_version,
                selector: Arc::new(selector),
                dead_time_ms: 0,
            }),
            Err(e) => {
                tracing::error!(
                    topic,
                    group,
                    expression = %subscription.sub_string,
                    error = %e,
                    "filter expression does not parse"
                );
                None
            }
        }
    }
}

/// The registered selectors by topic, then group.
#[derive(Debug, Default)]
pub(super) struct ConsumerFilters {
    by_topic: DashMap<String, HashMap<String, Arc<ConsumerFilterData>>>,
}

impl ConsumerFilters {
    /// Registers a heartbeat's subscriptions of `group` (`register(group, subList)`): each
    /// SQL92 one is compiled if new or changed, and the group's selectors of topics it no
    /// longer subscribes to are marked dead.
    pub(super) fn register(&self, group: &str, subscriptions: &[SubscriptionData], now_ms: i64) {
        for subscription in subscriptions {
            self.register_one(group, subscription);
        }
        for mut topic in self.by_topic.iter_mut() {
            let subscribed = subscriptions.iter().any(|s| s.topic == *topic.key());
            if let Some(data) = topic.value_mut().get_mut(group) {
                if !subscribed && data.dead_time_ms == 0 {
                    Arc::make_mut(data).dead_time_ms = now_ms;
                }
            }
        }
    }

    /// `FilterDataMapByTopic.register`: a version not above the kept one changes nothing
    /// (but revives a dead entry of the same version); a higher one with the same expression
    /// takes its version; a changed expression is compiled, and one that does not compile
    /// removes the entry, so that the group's pulls are refused (FILTER_DATA_NOT_EXIST).
    fn register_one(&self, group: &str, subscription: &SubscriptionData) {
        let topic = &subscription.topic;
        if subscription.expression_type() != EXPRESSION_TYPE_SQL92
            || subscription.sub_string.is_empty()
        {
            return;
        }
        let mut groups = self.by_topic.entry(topic.clone()).or_default();
        let version = subscription.sub_version;
        let Some(old) = groups.get_mut(group) else {
            if let Some(data) = ConsumerFilterData::build(topic, group, subscription) {
                let expression = &data.expression;
                tracing::info!(topic, group, %expression, "consumer filter registered");
                groups.insert(group.to_owned(), Arc::new(data));
            }
            return;
        };
        if version <= old.client_version {
            if version == old.client_version && old.dead_time_ms != 0 {
                Arc::make_mut(old).dead_time_ms = 0;
            }
            return;
        }
        if old.expression == subscription.sub_string {
            let data = Arc::make_mut(old);
            data.client_version = version;
            data.dead_time_ms = 0;
            return;
        }
        match ConsumerFilterData::build(topic, group, subscription) {
            Some(data) => {
                let expression = &data.expression;
                tracing::info!(topic, group, %expression, "consumer filter changed");
                *old = Arc::new(data);
            }
            None => {
                groups.remove(group);
            }
        }
    }

    /// The group left the broker (`unRegister`): its selectors are marked dead, and those
    /// dead for `clean_after_ms` or more are dropped (Java's `clean`).
    pub(super) fn unregister(&self, group: &str, now_ms: i64, clean_after_ms: i64) {
        for mut topic in self.by_topic.iter_mut() {
            if let Some(data) = topic.value_mut().get_mut(group) {
                if data.dead_time_ms == 0 {
                    Arc::make_mut(data).dead_time_ms = now_ms;
                }
            }
            topic.value_mut().retain(|_, data| {
                data.dead_time_ms == 0 || now_ms - data.dead_time_ms < clean_after_ms
            });
        }
        self.by_topic.retain(|_, groups| !groups.is_empty());
    }

    /// The selector `group` registered for `topic`.
    pub(super) fn get(&self, topic: &str, group: &str) -> Option<Arc<ConsumerFilterData>> {
        self.by_topic.get(topic)?.get(group).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sql(topic: &str, expression: &str, version: i64) -> SubscriptionData {
        SubscriptionData {
            topic: topic.to_owned(),
            sub_string: expression.to_owned(),
            sub_version: version,
            expression_type: Some(EXPRESSION_TYPE_SQL92.to_owned()),
            ..SubscriptionData::default()
        }
    }

    #[test]
    fn versions_decide_what_a_heartbeat_changes() {
        let filters = ConsumerFilters::default();
        filters.register("g", &[sql("t", "a > 1", 10)], 0);
        assert_eq!(filters.get("t", "g").unwrap().expression, "a > 1");
        // An older or equal version changes nothing.
        filters.register("g", &[sql("t", "a > 2", 10)], 0);
        assert_eq!(filters.get("t", "g").unwrap().expression, "a > 1");
        // A newer one with a new expression replaces it.
        filters.register("g", &[sql("t", "a > 2", 11)], 0);
        let data = filters.get("t", "g").unwrap();
        assert_eq!(
            (data.expression.as_str(), data.client_version),
            ("a > 2", 11)
        );
        // A newer one that does not compile removes it.
        filters.register("g", &[sql("t", "a >", 12)], 0);
        assert!(filters.get("t", "g").is_none());
        // Tag subscriptions are not kept.
        let tag = SubscriptionData::from_expression("u", "*");
        filters.register("g", &[tag], 0);
        assert!(filters.get("u", "g").is_none());
    }

    #[test]
    fn a_group_that_leaves_is_marked_dead_then_cleaned() {
        let filters = ConsumerFilters::default();
        filters.register("g", &[sql("t", "a > 1", 10), sql("u", "b = 'x'", 10)], 0);
        // A heartbeat without `u` marks it dead; it still answers.
        filters.register("g", &[sql("t", "a > 1", 10)], 5);
        assert_eq!(filters.get("u", "g").unwrap().dead_time_ms, 5);
        assert_eq!(filters.get("t", "g").unwrap().dead_time_ms, 0);
        filters.unregister("g", 100, 1000);
        assert_eq!(filters.get("t", "g").unwrap().dead_time_ms, 100);
        filters.unregister("g", 1100, 1000);
        assert!(filters.get("t", "g").is_none() && filters.get("u", "g").is_none());
    }
}
