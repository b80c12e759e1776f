//! The one table of the request codes a broker serves: for each, the processor that owns it
//! and what the rest of the broker must know of it (does a slave refuse it, may only an
//! admin account send it, do clients send it oneway).
//!
//! Architecture Invariant: a code is served exactly when it is in [`ROUTES`]; every other
//! code is answered REQUEST_CODE_NOT_SUPPORTED. The dispatch (`processors`), the ACL check
//! and the tests read this table instead of lists of their own.

use crate::remoting::RequestCode;

/// The request families, one module of `processors/` each (Java's processor classes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Processor {
    /// Single and batch sends (`SendMessageProcessor`).
    Send,
    /// A consumer's send-back of a message it failed to consume (`SendMessageProcessor`).
    SendBack,
    /// Pulls (`PullMessageProcessor`).
    Pull,
    /// Heartbeats and client lists (`ClientManageProcessor`).
    Client,
    /// Consumer offsets and queue bounds (`ConsumerManageProcessor`).
    Offsets,
    /// Message lookups by key and by id (`QueryMessageProcessor`).
    Query,
    /// The end of a transaction (`EndTransactionProcessor`).
    EndTransaction,
    /// Recalling a timer message (`RecallMessageProcessor`, 5.x).
    Recall,
    /// Topic administration (`AdminBrokerProcessor`).
    Topics,
    /// Subscription groups, their offsets, connections and queue locks
    /// (`AdminBrokerProcessor`).
    Groups,
    /// The broker's settings and runtime figures (`AdminBrokerProcessor`).
    BrokerAdmin,
    /// The plain ACL's admin requests (`AdminBrokerProcessor`).
    AclAdmin,
    /// A consume queue's units and a group's time behind in it (`AdminBrokerProcessor`).
    Queues,
    /// The store's cleaning on request (`AdminBrokerProcessor`).
    StoreAdmin,
    /// The per-topic and per-group statistics (`AdminBrokerProcessor`).
    StatsAdmin,
    /// Requests passed on to a consumer, answered with what it says
    /// (`AdminBrokerProcessor.callConsumer`).
    Calls,
    /// POP consumption's pops (`PopMessageProcessor`, 5.x).
    Pop,
    /// POP consumption's acks and changes of invisible time (`AckMessageProcessor`,
    /// `ChangeInvisibleTimeProcessor`, 5.x).
    Ack,
    /// Whether a pop would find messages, and the pops waiting (`NotificationProcessor`,
    /// `PollingInfoProcessor`, 5.x).
    Notification,
    /// A look at what a pop would take (`PeekMessageProcessor`, 5.x).
    Peek,
    /// Server-side load balancing and the groups' PULL or POP modes
    /// (`QueryAssignmentProcessor`, 5.x).
    Assignment,
}

/// One served request code.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    /// The request code.
    pub code: RequestCode,
    /// Who serves it.
    pub processor: Processor,
    /// A slave refuses it: it would write the CommitLog, which only the master does (Java's
    /// slave answers SERVICE_NOT_AVAILABLE to a put, SLAVE_NOT_AVAILABLE to a transaction's
    /// end).
    pub slave_refuses: bool,
    /// With `aclEnable`, only an admin account may send it (`Permission.ADMIN_CODE`).
    pub admin_only: bool,
    /// Java clients send it oneway (`sendOneway`, `updateConsumerOffsetOneway`,
    /// `endTransactionOneway`): it takes effect without an answer to read.
    pub oneway: bool,
}

const fn route(code: RequestCode, processor: Processor) -> Route {
    Route {
        code,
        processor,
        slave_refuses: false,
        admin_only: false,
        oneway: false,
    }
}

const fn put(code: RequestCode, processor: Processor, oneway: bool) -> Route {
    Route {
        slave_refuses: true,
        oneway,
        ..route(code, processor)
    }
}

const fn admin(code: RequestCode, processor: Processor) -> Route {
    Route {
        admin_only: true,
        ..route(code, processor)
    }
}

const fn oneway(code: RequestCode, processor: Processor) -> Route {
    Route {
        oneway: true,
        ..route(code, processor)
    }
}

use Processor::{
    AclAdmin, BrokerAdmin, Calls, Client, EndTransaction, Groups, Offsets, Pull, Query, Queues,
    Send, SendBack, StoreAdmin, Topics,
};
use RequestCode as C;

/// Every request code the broker serves.
pub const ROUTES: &[Route] = &[
    put(C::SEND_MESSAGE, Send, true),
    put(C::SEND_MESSAGE_V2, Send, true),
    put(C::SEND_BATCH_MESSAGE, Send, true),
    put(C::SEND_REPLY_MESSAGE, Send, false),
    put(C::SEND_REPLY_MESSAGE_V2, Send, false),
    put(C::CONSUMER_SEND_MSG_BACK, SendBack, false),
    put(C::END_TRANSACTION, EndTransaction, true),
    put(C::RESUME_CHECK_HALF_MESSAGE, EndTransaction, false),
    route(C::RECALL_MESSAGE, Processor::Recall),
    route(C::PULL_MESSAGE, Pull),
    // 5.x's lite pull consumer: the same request under its own code, as in Java.
    route(C::LITE_PULL_MESSAGE, Pull),
    route(C::POP_MESSAGE, Processor::Pop),
    route(C::PEEK_MESSAGE, Processor::Peek),
    // Acks and checkpoints are puts on the revive topic: only a master writes them.
    put(C::ACK_MESSAGE, Processor::Ack, false),
    put(C::BATCH_ACK_MESSAGE, Processor::Ack, false),
    put(C::CHANGE_MESSAGE_INVISIBLETIME, Processor::Ack, false),
    route(C::NOTIFICATION, Processor::Notification),
    route(C::POLLING_INFO, Processor::Notification),
    route(C::QUERY_ASSIGNMENT, Processor::Assignment),
    route(C::SET_MESSAGE_REQUEST_MODE, Processor::Assignment),
    route(C::GET_ALL_MESSAGE_REQUEST_MODE, Processor::Assignment),
    route(C::HEART_BEAT, Client),
    route(C::UNREGISTER_CLIENT, Client),
    route(C::CHECK_CLIENT_CONFIG, Client),
    route(C::GET_CONSUMER_LIST_BY_GROUP, Client),
    route(C::QUERY_CONSUMER_OFFSET, Offsets),
    oneway(C::UPDATE_CONSUMER_OFFSET, Offsets),
    route(C::GET_MAX_OFFSET, Offsets),
    route(C::GET_MIN_OFFSET, Offsets),
    route(C::GET_EARLIEST_MSG_STORETIME, Offsets),
    route(C::SEARCH_OFFSET_BY_TIMESTAMP, Offsets),
    route(C::QUERY_MESSAGE, Query),
    route(C::VIEW_MESSAGE_BY_ID, Query),
    admin(C::UPDATE_AND_CREATE_TOPIC, Topics),
    admin(C::DELETE_TOPIC_IN_BROKER, Topics),
    route(C::GET_ALL_TOPIC_CONFIG, Topics),
    route(C::GET_TOPIC_STATS_INFO, Topics),
    route(C::QUERY_TOPIC_CONSUME_BY_WHO, Topics),
    route(C::GET_SYSTEM_TOPIC_LIST_FROM_BROKER, Topics),
    admin(C::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, Groups),
    admin(C::DELETE_SUBSCRIPTIONGROUP, Groups),
    route(C::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, Groups),
    route(C::GET_ALL_CONSUMER_OFFSET, Groups),
    route(C::CLONE_GROUP_OFFSET, Groups),
    route(C::GET_ALL_DELAY_OFFSET, Groups),
    route(C::GET_CONSUME_STATS, Groups),
    route(C::INVOKE_BROKER_TO_RESET_OFFSET, Groups),
    route(C::GET_CONSUMER_CONNECTION_LIST, Groups),
    route(C::GET_PRODUCER_CONNECTION_LIST, Groups),
    route(C::GET_ALL_PRODUCER_INFO, Groups),
    route(C::QUERY_CONSUME_QUEUE, Queues),
    route(C::QUERY_CONSUME_TIME_SPAN, Queues),
    route(C::QUERY_CORRECTION_OFFSET, Queues),
    route(C::DELETE_EXPIRED_COMMITLOG, StoreAdmin),
    route(C::CLEAN_EXPIRED_CONSUMEQUEUE, StoreAdmin),
    route(C::CLEAN_UNUSED_TOPIC, StoreAdmin),
    route(C::LOCK_BATCH_MQ, Groups),
    route(C::UNLOCK_BATCH_MQ, Groups),
    route(C::GET_BROKER_CONFIG, BrokerAdmin),
    admin(C::UPDATE_BROKER_CONFIG, BrokerAdmin),
    route(C::GET_BROKER_RUNTIME_INFO, BrokerAdmin),
    route(C::NOTIFY_BROKER_ROLE_CHANGED, BrokerAdmin),
    route(C::VIEW_BROKER_STATS_DATA, Processor::StatsAdmin),
    route(C::GET_BROKER_CONSUME_STATS, Processor::StatsAdmin),
    route(C::GET_CONSUMER_RUNNING_INFO, Calls),
    route(C::CONSUME_MESSAGE_DIRECTLY, Calls),
    route(C::INVOKE_BROKER_TO_GET_CONSUMER_STATUS, Calls),
    route(C::UPDATE_AND_CREATE_ACL_CONFIG, AclAdmin),
    route(C::DELETE_ACL_CONFIG, AclAdmin),
    route(C::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG, AclAdmin),
    route(C::GET_BROKER_CLUSTER_ACL_INFO, AclAdmin),
];

/// The route of `code`, if the broker serves it.
#[must_use]
pub fn route_of(code: RequestCode) -> Option<&'static Route> {
    ROUTES.iter().find(|route| route.code == code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_is_routed_once() {
        for (index, route) in ROUTES.iter().enumerate() {
            let again = ROUTES[index + 1..].iter().any(|r| r.code == route.code);
            assert!(!again, "{:?} is routed twice", route.code);
            assert!(
                C::ALL.iter().any(|(_, code)| *code == route.code),
                "{:?} is no request code",
                route.code
            );
        }
    }

    #[test]
    fn the_admin_codes_are_javas() {
        // `Permission.ADMIN_CODE` of Java 4.9.8's ACL module.
        let mut admin: Vec<i32> = ROUTES
            .iter()
            .filter(|r| r.admin_only)
            .map(|r| r.code.0)
            .collect();
        admin.sort_unstable();
        assert_eq!(admin, [17, 25, 200, 207, 215]);
    }
}
