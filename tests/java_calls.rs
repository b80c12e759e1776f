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

/// The admin API's queries of queues and producers (`tests/java/AdminQueries.java`):
/// GET_ALL_PRODUCER_INFO names the live producer; QUERY_CONSUME_TIME_SPAN gives each queue's
/// first, last and last-consumed store times and the wait of the next message, as the
/// messages sent have them; QUERY_CONSUME_QUEUE gives each queue's bounds and units, whose
/// CommitLog offsets and tags codes are the messages'; QUERY_CORRECTION_OFFSET gives the
/// lowest offset of the groups not filtered out, or `Long.MAX_VALUE` past the compare group's;
/// GET_SYSTEM_TOPIC_LIST_FROM_BROKER lists the broker's system topics.
#[test]
fn java_admin_queries_answer_from_the_queues() {
    let server = Standalone::start("");
    let output = run_java(
        "AdminQueries",
        &[
            &server.namesrv_addr(),
            &server.broker_addr(),
            "AdminQueriesT",
        ],
        Serialize::Json,
        Duration::from_secs(120),
    );
    output.assert_passed("AdminQueries");
    let result = |key: &str| output.results.get(key).cloned().unwrap_or_default();
    assert_eq!(result("producers"), "1", "{}", output.text);
    assert_eq!(result("spans"), "4", "{}", output.text);
    assert_eq!(result("spanChecks"), "4", "{}", output.text);
    assert_eq!(result("cqUnits"), "10", "{}", output.text);
    // aq_g1 alone is left (5 and 3); 5 passes the compare group's 1, 3 does not pass 10.
    assert_eq!(
        result("correction0"),
        i64::MAX.to_string(),
        "{}",
        output.text
    );
    assert_eq!(result("correction1"), "3", "{}", output.text);
    // GET_SYSTEM_TOPIC_LIST_FROM_BROKER: the topics a 4.9.8 broker makes at start (the
    // broker's own and the cluster's included), none of the test's.
    let system = result("systemTopics");
    for topic in [
        "BenchmarkTest",
        "DefaultCluster",
        "DefaultCluster_REPLY_TOPIC",
        "OFFSET_MOVED_EVENT",
        "SCHEDULE_TOPIC_XXXX",
        "TBW102",
    ] {
        assert!(
            system.split(',').any(|t| t == topic),
            "{topic} not in {system}"
        );
    }
    assert!(!system.contains("AdminQueriesT"), "{system}");
}

/// The admin API's `resumeCheckHalfMessage` (RESUME_CHECK_HALF_MESSAGE,
/// `tests/java/ResumeHalf.java`): a committed transaction is never checked; once its half is
/// put back, the broker asks the producer about it within the check's period.
#[test]
fn java_admin_resumes_the_check_of_a_half_message() {
    let server = Standalone::start("transactionTimeOut=2000\ntransactionCheckInterval=1000");
    let output = run_java(
        "ResumeHalf",
        &[&server.namesrv_addr(), "ResumeHalfT"],
        Serialize::Json,
        Duration::from_secs(90),
    );
    output.assert_passed("ResumeHalf");
    let result = |key: &str| output.results.get(key).cloned().unwrap_or_default();
    assert_eq!(result("checksBefore"), "0", "{}", output.text);
    assert_eq!(result("resumed"), "true", "{}", output.text);
    let after: u32 = result("checksAfter").parse().unwrap_or(0);
    assert!(after >= 1, "{}", output.text);
}
