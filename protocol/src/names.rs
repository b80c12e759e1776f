//! Names every RocketMQ party agrees on: the system topics, the retry and dead-letter
//! prefixes, permission bits, and the rules a topic name must follow (Java's
//! `TopicValidator`, `MixAll`, `PermName` and the client's `Validators`).

/// The topic every broker has so that producers can auto-create topics (`TBW102`).
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
/// System topics no producer may send to (`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`): the
/// broker alone writes them.
pub const NOT_ALLOWED_SEND_TOPICS: [&str; 6] = [
    "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];
/// Topics every broker has or makes itself (`TopicValidator.SYSTEM_TOPIC_SET`); with
/// the cluster's, the broker's, the reply and the trace topic, and any name starting
/// with [`SYSTEM_TOPIC_PREFIX`], no admin request may create or delete them.
pub const SYSTEM_TOPICS: [&str; 9] = [
    AUTO_CREATE_TOPIC_KEY_TOPIC,
    "SCHEDULE_TOPIC_XXXX",
    "BenchmarkTest",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRACE_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "SELF_TEST_TOPIC",
    "OFFSET_MOVED_EVENT",
];
/// Prefix of system topic names (`TopicValidator.SYSTEM_TOPIC_PREFIX`).
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";
/// Suffix of the cluster's request-reply topic, `<cluster>_REPLY_TOPIC`.
pub const REPLY_TOPIC_POSTFIX: &str = "REPLY_TOPIC";
/// Prefix of a consumer group's retry topic.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// Prefix of a consumer group's dead-letter topic.
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// Longest topic name (`TOPIC_MAX_LENGTH`).
pub const TOPIC_MAX_LENGTH: usize = 127;
/// Longest group name (`Validators.CHARACTER_MAX_LENGTH`).
pub const GROUP_MAX_LENGTH: usize = 255;
/// Prefix of the broker's own consumer groups (`MixAll.CID_RMQ_SYS_PREFIX`), in any case.
pub const SYSTEM_GROUP_PREFIX: &str = "CID_RMQ_SYS_";
/// Permission bits (`PermName`).
pub const PERM_READ: i32 = 4;
/// Write permission.
pub const PERM_WRITE: i32 = 2;
/// Inherit permission (templates such as `TBW102`).
pub const PERM_INHERIT: i32 = 1;

/// Why a client refuses a topic name (`Validators.checkTopic` of the Java client), with its
/// message.
#[must_use]
pub fn topic_name_problem(topic: &str) -> Option<String> {
    if topic.trim().is_empty() {
        return Some("The specified topic is blank.".to_owned());
    }
    if topic.len() > TOPIC_MAX_LENGTH {
        return Some(format!(
            "The specified topic is longer than topic max length {TOPIC_MAX_LENGTH}."
        ));
    }
    if !is_legal_name(topic) {
        return Some(format!(
            "The specified topic[{topic}] contains illegal characters, allowing only \
             ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    None
}

/// Why a client refuses a group name (`Validators.checkGroup` of the Java client), with its
/// message.
#[must_use]
pub fn group_name_problem(group: &str) -> Option<String> {
    if group.trim().is_empty() {
        return Some("the specified group is blank".to_owned());
    }
    if group.len() > GROUP_MAX_LENGTH {
        return Some(format!(
            "the specified group is longer than group max length {GROUP_MAX_LENGTH}."
        ));
    }
    if !is_legal_name(group) {
        return Some(format!(
            "the specified group[{group}] contains illegal characters, allowing only \
             ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    None
}

/// Whether `group` is one of the broker's own consumer groups ([`SYSTEM_GROUP_PREFIX`],
/// ignoring case).
#[must_use]
pub fn is_system_group(group: &str) -> bool {
    group
        .get(..SYSTEM_GROUP_PREFIX.len())
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case(SYSTEM_GROUP_PREFIX))
}

/// Why the broker refuses a topic name (`TopicValidator.validateTopic`), with its remark as
/// 5.x words it (naming the topic; 4.9.8 did not); a missing topic is blank, as Java reads
/// the null it decodes.
#[must_use]
pub fn invalid_topic_remark(topic: &str) -> Option<String> {
    if topic.trim().is_empty() {
        return Some("The specified topic is blank.".to_owned());
    }
    if !is_legal_name(topic) {
        return Some(format!(
            "The specified topic: {topic}, contains illegal characters, allowing only \
             ^[%|a-zA-Z0-9_-]+$"
        ));
    }
    if topic.len() > TOPIC_MAX_LENGTH {
        return Some(format!(
            "The specified topic: {topic}, is longer than topic max length: {TOPIC_MAX_LENGTH}"
        ));
    }
    None
}

/// `^[%|a-zA-Z0-9_-]+$`, the characters of topic and group names.
fn is_legal_name(name: &str) -> bool {
    name.bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'%' || b == b'|' || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_names_are_refused_with_the_java_client_messages() {
        assert!(group_name_problem("ok_group-1").is_none());
        assert_eq!(
            group_name_problem(" ").as_deref(),
            Some("the specified group is blank")
        );
        assert_eq!(
            group_name_problem(&"g".repeat(256)).as_deref(),
            Some("the specified group is longer than group max length 255.")
        );
        assert_eq!(
            group_name_problem("no spaces").as_deref(),
            Some(
                "the specified group[no spaces] contains illegal characters, allowing only \
                 ^[%|a-zA-Z0-9_-]+$"
            )
        );
        assert!(is_system_group("cid_rmq_sys_trans"));
        assert!(!is_system_group("CID_RMQ"));
        assert!(!is_system_group("é"));
    }
}
