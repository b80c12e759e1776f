//! The requests ferromq passes on to a client, from the Java 4.9.8 client and admin API
//! (`tests/java/ConsumerCalls.java`) against `ferromq standalone`:
//!
//! - request-reply: a producer's `request()`, sync and with a callback, gets the answer a
//!   replier sent with `MessageUtil.createReplyMessage` (SEND_REPLY_MESSAGE_V2, then
//!   PUSH_REPLY_MESSAGE_TO_CLIENT from the broker to the requester);
//! - GET_CONSUMER_RUNNING_INFO (mqadmin `consumerStatus`): the consumer's own report of its
//!   subscriptions, consume type and queues;
//! - CONSUME_MESSAGE_DIRECTLY (mqadmin `consumeMessage`): the consumer consumes the message
//!   the id names once more and says CR_SUCCESS;
//! - INVOKE_BROKER_TO_GET_CONSUMER_STATUS (mqadmin `getConsumerStatus`): the broker asks
//!   each member for its offsets (GET_CONSUMER_STATUS_FROM_CLIENT) and reports them;
//! - CHECK_CLIENT_CONFIG: a SQL92 subscription fails the consumer's start with the Java
//!   broker's remark (ferromq filters by tags only, as Java with `enablePropertyFilter=false`).
//!
//! Also, a reply that names no requester is refused, and one whose requester is gone is
//! still stored in the reply topic.

mod common;

use common::java::{run_java, Serialize, Standalone};
use std::time::Duration;

const TOPIC: &str = "ConsumerCallsT";

#[test]
fn java_requests_reach_consumers_through_the_broker() {
    for serialize in Serialize::BOTH {
        let server = Standalone::start("");
        let output = run_java(
            "ConsumerCalls",
            &[&server.namesrv_addr(), TOPIC],
            serialize,
            Duration::from_secs(180),
        );
        output.assert_passed("ConsumerCalls");
        let result = |key: &str| output.results.get(key).cloned().unwrap_or_default();
        let context = format!("{serialize:?}\n{}", output.text);
        assert_eq!(result("replies"), "10", "{context}");
        assert_eq!(result("asyncReplies"), "10", "{context}");
        assert!(result("clientId").contains('@'), "{context}");
        assert_eq!(
            result("runningTopics"),
            format!("%RETRY%calls_cg,{TOPIC}"),
            "{context}"
        );
        assert_eq!(result("consumeType"), "CONSUME_PASSIVELY", "{context}");
        assert_eq!(result("runningQueues"), "4", "{context}");
        assert_eq!(result("direct"), "CR_SUCCESS", "{context}");
        assert_eq!(result("directSeen"), "2", "{context}");
        assert_eq!(result("statusClients"), "1", "{context}");
        assert_eq!(result("statusQueues"), "4", "{context}");
        assert_eq!(result("statusSum"), "8", "{context}");
        assert!(
            result("sql")
                .contains("The broker does not support consumer to filter message by SQL92"),
            "{context}"
        );
    }
}
