//! The delay levels of a put (4.x's `DELAY` property): which level a message asks for, and
//! its redirection into `SCHEDULE_TOPIC_XXXX` with its real topic and queue kept
//! (the delay part of Java's `CommitLog.putMessage`). The send and end-transaction
//! processors and the scheduler service share it.

use super::transaction::{TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE};
use crate::store::commit_log::PutMessage;
use crate::store::dispatch::{DelayLevels, SCHEDULE_TOPIC};
use crate::store::message::{parse_properties, properties_to_string};

/// `MessageConst.PROPERTY_DELAY_TIME_LEVEL`.
pub const PROPERTY_DELAY: &str = "DELAY";

/// `MessageConst.PROPERTY_REAL_TOPIC`.
pub const PROPERTY_REAL_TOPIC: &str = "REAL_TOPIC";

/// `MessageConst.PROPERTY_REAL_QUEUE_ID`.
pub const PROPERTY_REAL_QUEUE_ID: &str = "REAL_QID";

/// `MessageSysFlag` transaction bits.
const TRANSACTION_TYPE_MASK: i32 = 0x3 << 2;

/// A property's value in a properties list.
pub(crate) fn property<'a>(properties: &'a [(String, String)], name: &str) -> Option<&'a str> {
    properties
        .iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value.as_str())
}

/// Sets `name` to `value`, in place if present, else at the end.
pub(crate) fn set_property(properties: &mut Vec<(String, String)>, name: &str, value: String) {
    match properties.iter_mut().find(|(key, _)| key == name) {
        Some(entry) => entry.1 = value,
        None => properties.push((name.to_owned(), value)),
    }
}

/// The properties in their stored form.
pub(crate) fn encode_properties(properties: &[(String, String)]) -> Vec<u8> {
    properties_to_string(properties.iter().map(|(k, v)| (k.as_str(), v.as_str()))).into_bytes()
}

/// The delay level a put asks for (`getDelayTimeLevel`): `DELAY` as a number, else 0.
fn delay_level(properties: &[(String, String)]) -> i32 {
    property(properties, PROPERTY_DELAY)
        .and_then(|level| level.trim().parse().ok())
        .unwrap_or(0)
}

/// Redirects a put with a delay level to `SCHEDULE_TOPIC_XXXX` (the delay part of Java's
/// `CommitLog.putMessage`): the level clamped to the highest, the real topic and queue kept
/// in `REAL_TOPIC`/`REAL_QID`. Puts without a level, and transaction prepared or rollback
/// records, are left alone.
pub fn redirect_delayed(message: &mut PutMessage, levels: &DelayLevels) {
    let transaction = message.sys_flag & TRANSACTION_TYPE_MASK;
    if transaction != TRANSACTION_NOT_TYPE && transaction != TRANSACTION_COMMIT_TYPE {
        return;
    }
    let mut properties = parse_properties(&message.properties);
    let level = delay_level(&properties);
    if level <= 0 {
        return;
    }
    let max = i32::try_from(levels.len()).unwrap_or(i32::MAX);
    let level = level.min(max);
    set_property(&mut properties, PROPERTY_DELAY, level.to_string());
    park(message, properties, SCHEDULE_TOPIC, level - 1);
}

/// Moves a put to `topic`/`queue_id` where it waits, its real topic and queue kept in
/// `REAL_TOPIC`/`REAL_QID` beside `properties` (the delay's and the timer's backup of the
/// real topic, `transformDelayLevelMessage` and `transformTimerMessage`).
pub(crate) fn park(
    message: &mut PutMessage,
    mut properties: Vec<(String, String)>,
    topic: &str,
    queue_id: i32,
) {
    set_property(&mut properties, PROPERTY_REAL_TOPIC, message.topic.clone());
    set_property(
        &mut properties,
        PROPERTY_REAL_QUEUE_ID,
        message.queue_id.to_string(),
    );
    message.properties = encode_properties(&properties);
    message.topic = topic.to_owned();
    message.queue_id = queue_id;
}
