//! Timer messages on put (Java 5.x's `HookUtils.handleScheduleMessage`, the put hook that
//! every put of the broker goes through): a message with `TIMER_DELIVER_MS` (absolute),
//! `TIMER_DELAY_SEC` or `TIMER_DELAY_MS` (relative) whose time is in the future is parked
//! in `rmq_sys_wheel_timer` queue 0 with `TIMER_OUT_MS` (the time rounded down to
//! `timerPrecisionMs`), `REAL_TOPIC` and `REAL_QID`; the timer service
//! (`services::timer`) delivers it. A `DELAY` level wins: the timer properties are cleared
//! and the level's delay applies. A time in the past leaves the message where it is, so it
//! is delivered at once. The recall handle of 5.x (`RecallMessageHandle`) lives here too.

use super::delay::{
    encode_properties, park, property, redirect_delayed, set_property, PROPERTY_DELAY,
};
use super::transaction::{TRANSACTION_COMMIT_TYPE, TRANSACTION_NOT_TYPE};
use crate::store::commit_log::PutMessage;
use crate::store::config::StoreConfig;
use crate::store::message::parse_properties;
use crate::store::timer::TIMER_TOPIC;

/// `MessageConst.PROPERTY_TIMER_DELIVER_MS`.
pub const PROPERTY_TIMER_DELIVER_MS: &str = "TIMER_DELIVER_MS";
/// `MessageConst.PROPERTY_TIMER_DELAY_SEC`.
pub const PROPERTY_TIMER_DELAY_SEC: &str = "TIMER_DELAY_SEC";
/// `MessageConst.PROPERTY_TIMER_DELAY_MS`.
pub const PROPERTY_TIMER_DELAY_MS: &str = "TIMER_DELAY_MS";
/// `MessageConst.PROPERTY_TIMER_OUT_MS`: the slot time a parked message waits for.
pub const PROPERTY_TIMER_OUT_MS: &str = "TIMER_OUT_MS";
/// `MessageConst.PROPERTY_TIMER_ENQUEUE_MS`.
pub const PROPERTY_TIMER_ENQUEUE_MS: &str = "TIMER_ENQUEUE_MS";
/// `MessageConst.PROPERTY_TIMER_DEQUEUE_MS`.
pub const PROPERTY_TIMER_DEQUEUE_MS: &str = "TIMER_DEQUEUE_MS";
/// `MessageConst.PROPERTY_TIMER_ROLL_TIMES`.
pub const PROPERTY_TIMER_ROLL_TIMES: &str = "TIMER_ROLL_TIMES";
/// `MessageConst.PROPERTY_TIMER_DEL_UNIQKEY`: `<topic>+<UNIQ_KEY>` of the message a
/// delete (recall) cancels.
pub const PROPERTY_TIMER_DEL_UNIQKEY: &str = "TIMER_DEL_UNIQKEY";

/// `MessageSysFlag` transaction bits.
const TRANSACTION_TYPE_MASK: i32 = 0x3 << 2;

/// Why a put's timer was refused (Java's `PutMessageStatus` of the hook).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerRefusal {
    /// `WHEEL_TIMER_NOT_ENABLE`: `timerWheelEnable=false`.
    NotEnabled,
    /// `WHEEL_TIMER_MSG_ILLEGAL`: a time that does not parse, a delay over
    /// `timerMaxDelaySec`, or a delete whose time is past.
    Illegal,
}

impl TimerRefusal {
    /// The response code and remark Java's `handlePutMessageResult` answers.
    #[must_use]
    pub fn answer(
        self,
        config: &StoreConfig,
    ) -> (ferromq_protocol::remoting::ResponseCode, String) {
        use ferromq_protocol::remoting::ResponseCode;
        match self {
            TimerRefusal::Illegal => (
                ResponseCode::MESSAGE_ILLEGAL,
                format!(
                    "timer message illegal, the delay time should not be bigger than the max \
                     delay {}ms; or if set del msg, the delay time should be bigger than the \
                     current time",
                    config.timer_max_delay_sec.wrapping_mul(1000)
                ),
            ),
            TimerRefusal::NotEnabled => (
                ResponseCode::SYSTEM_ERROR,
                format!(
                    "accurate timer message is not enabled, timerWheelEnable is {}",
                    config.timer_wheel_enable
                ),
            ),
        }
    }
}

/// Java's put hook for delayed puts (`handleScheduleMessage`): the timer first, then the
/// delay level ([`redirect_delayed`]). Transaction prepared and rolled-back records are
/// left alone, and so are puts to the timer topic itself (the timer's rolls).
///
/// # Errors
/// [`TimerRefusal`] when the timer refuses the message; it is left unchanged then.
pub fn handle_schedule(
    message: &mut PutMessage,
    config: &StoreConfig,
    now_ms: i64,
) -> Result<(), TimerRefusal> {
    let transaction = message.sys_flag & TRANSACTION_TYPE_MASK;
    if transaction != TRANSACTION_NOT_TYPE && transaction != TRANSACTION_COMMIT_TYPE {
        return Ok(());
    }
    if message.topic != TIMER_TOPIC {
        transform_timer(message, config, now_ms)?;
    }
    redirect_delayed(message, &config.message_delay_level);
    Ok(())
}

/// Whether properties ask for a timer (any of the three timer properties).
#[must_use]
pub fn asks_for_timer(properties: &[(String, String)]) -> bool {
    [
        PROPERTY_TIMER_DELIVER_MS,
        PROPERTY_TIMER_DELAY_MS,
        PROPERTY_TIMER_DELAY_SEC,
    ]
    .iter()
    .any(|name| property(properties, name).is_some())
}

/// `checkIfTimerMessage` and `transformTimerMessage`.
fn transform_timer(
    message: &mut PutMessage,
    config: &StoreConfig,
    now_ms: i64,
) -> Result<(), TimerRefusal> {
    let mut properties = parse_properties(&message.properties);
    let level = property(&properties, PROPERTY_DELAY)
        .and_then(|level| level.parse::<i32>().ok())
        .unwrap_or(0);
    if level > 0 {
        // A level wins: the timer properties go, the level's delay applies.
        if asks_for_timer(&properties) {
            properties.retain(|(key, _)| {
                ![
                    PROPERTY_TIMER_DELIVER_MS,
                    PROPERTY_TIMER_DELAY_SEC,
                    PROPERTY_TIMER_DELAY_MS,
                ]
                .contains(&key.as_str())
            });
            message.properties = encode_properties(&properties);
        }
        return Ok(());
    }
    if property(&properties, PROPERTY_TIMER_OUT_MS).is_some() || !asks_for_timer(&properties) {
        return Ok(());
    }
    if !config.timer_wheel_enable {
        return Err(TimerRefusal::NotEnabled);
    }
    // Java's `Long.parseLong` and its long arithmetic, overflow wrapping as Java's does.
    let parse = |name| property(&properties, name).map(str::parse::<i64>);
    let deliver_ms = if let Some(seconds) = parse(PROPERTY_TIMER_DELAY_SEC) {
        now_ms.wrapping_add(
            seconds
                .map_err(|_| TimerRefusal::Illegal)?
                .wrapping_mul(1000),
        )
    } else if let Some(ms) = parse(PROPERTY_TIMER_DELAY_MS) {
        now_ms.wrapping_add(ms.map_err(|_| TimerRefusal::Illegal)?)
    } else {
        match parse(PROPERTY_TIMER_DELIVER_MS) {
            Some(Ok(at)) => at,
            _ => return Err(TimerRefusal::Illegal),
        }
    };
    if deliver_ms <= now_ms {
        if property(&properties, PROPERTY_TIMER_DEL_UNIQKEY).is_some() {
            return Err(TimerRefusal::Illegal);
        }
        return Ok(());
    }
    if deliver_ms - now_ms > config.timer_max_delay_sec.wrapping_mul(1000) {
        return Err(TimerRefusal::Illegal);
    }
    let precision = config.timer_precision_ms;
    // An exact multiple goes one precision earlier, as Java rounds it: the slot of `t` is
    // delivered once the wheel's write time passes it, a precision after `t`.
    let deliver_ms = if deliver_ms % precision == 0 {
        deliver_ms - precision
    } else {
        deliver_ms / precision * precision
    };
    set_property(
        &mut properties,
        PROPERTY_TIMER_OUT_MS,
        deliver_ms.to_string(),
    );
    park(message, properties, TIMER_TOPIC, 0);
    Ok(())
}

/// `TimerMessageStore.buildDeleteKey`: what a delete's `TIMER_DEL_UNIQKEY` holds.
#[must_use]
pub fn delete_key(real_topic: &str, uniq_key: &str) -> String {
    format!("{real_topic}+{uniq_key}")
}

/// A 5.x recall handle (`RecallMessageHandle.HandleV1`): `v1 <topic> <brokerName>
/// <timestamp> <messageId>`, URL-safe base64 with padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecallHandle {
    /// The real topic.
    pub topic: String,
    /// The broker that holds the message.
    pub broker_name: String,
    /// Its delivery time (`TIMER_OUT_MS` + 1), as text.
    pub timestamp: String,
    /// Its `UNIQ_KEY`.
    pub message_id: String,
}

impl RecallHandle {
    /// `HandleV1.buildHandle`.
    #[must_use]
    pub fn build(&self) -> String {
        let raw = format!(
            "v1 {} {} {} {}",
            self.topic, self.broker_name, self.timestamp, self.message_id
        );
        base64_url_encode(raw.as_bytes())
    }

    /// `decodeHandle`: `None` for what Java refuses as "recall handle is invalid".
    #[must_use]
    pub fn decode(handle: &str) -> Option<RecallHandle> {
        if handle.is_empty() {
            return None;
        }
        let raw = String::from_utf8_lossy(&base64_url_decode(handle)?).into_owned();
        // Java's `split(" ")`: trailing empty items dropped.
        let mut items: Vec<&str> = raw.split(' ').collect();
        while items.last() == Some(&"") {
            items.pop();
        }
        if items.first() != Some(&"v1") || items.len() < 5 {
            return None;
        }
        Some(RecallHandle {
            topic: items[1].to_owned(),
            broker_name: items[2].to_owned(),
            timestamp: items[3].to_owned(),
            message_id: items[4].to_owned(),
        })
    }
}

const BASE64_URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// `Base64.getUrlEncoder().encodeToString`: URL alphabet, `=` padding.
fn base64_url_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(BASE64_URL[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// `Base64.getUrlDecoder().decode`: URL alphabet, padding optional, anything else refused.
fn base64_url_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        let value = BASE64_URL.iter().position(|&a| a == c)?;
        acc = (acc << 6) | u32::try_from(value).ok()?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(u8::try_from((acc >> bits) & 0xff).ok()?);
        }
    }
    // A lone last character carries no whole byte: Java refuses it.
    if text.len() % 4 == 1 {
        return None;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::message::parse_properties;

    fn put(properties: &str) -> PutMessage {
        crate::broker::services::schedule::tests::put(properties, 0)
    }

    fn props(message: &PutMessage) -> Vec<(String, String)> {
        parse_properties(&message.properties)
    }

    const NOW: i64 = 1_700_000_000_300;

    #[test]
    fn a_future_time_parks_the_message_rounded_down_to_the_precision() {
        let config = StoreConfig::new("/s");
        for (properties, out) in [
            ("TIMER_DELIVER_MS\u{1}1700000005700\u{2}", "1700000005000"),
            // An exact multiple loses one precision.
            ("TIMER_DELIVER_MS\u{1}1700000005000\u{2}", "1700000004000"),
            ("TIMER_DELAY_SEC\u{1}10\u{2}", "1700000010000"),
            ("TIMER_DELAY_MS\u{1}1500\u{2}", "1700000001000"),
        ] {
            let mut message = put(properties);
            handle_schedule(&mut message, &config, NOW).unwrap();
            assert_eq!((message.topic.as_str(), message.queue_id), (TIMER_TOPIC, 0));
            let p = props(&message);
            assert_eq!(property(&p, "TIMER_OUT_MS"), Some(out), "{properties}");
            assert_eq!(property(&p, "REAL_TOPIC"), Some("T"));
            assert_eq!(property(&p, "REAL_QID"), Some("3"));
        }
    }

    #[test]
    fn past_times_stay_and_bad_ones_are_refused() {
        let config = StoreConfig::new("/s");
        let mut past = put("TIMER_DELIVER_MS\u{1}1000\u{2}");
        handle_schedule(&mut past, &config, NOW).unwrap();
        assert_eq!((past.topic.as_str(), past.queue_id), ("T", 3));
        for refused in [
            "TIMER_DELIVER_MS\u{1}soon\u{2}",
            "TIMER_DELAY_SEC\u{1}259201\u{2}",
            "TIMER_DELAY_SEC\u{1} 5\u{2}",
            "TIMER_DELIVER_MS\u{1}1000\u{2}TIMER_DEL_UNIQKEY\u{1}T+K\u{2}",
        ] {
            let mut message = put(refused);
            assert_eq!(
                handle_schedule(&mut message, &config, NOW),
                Err(TimerRefusal::Illegal),
                "{refused}"
            );
            assert_eq!(message.topic, "T");
        }
        // Exactly the maximum is admitted.
        let mut max = put("TIMER_DELAY_SEC\u{1}259200\u{2}");
        assert_eq!(handle_schedule(&mut max, &config, NOW), Ok(()));
        let (code, remark) = TimerRefusal::Illegal.answer(&config);
        assert_eq!(
            code,
            ferromq_protocol::remoting::ResponseCode::MESSAGE_ILLEGAL
        );
        assert!(remark.contains("max delay 259200000ms"), "{remark}");
    }

    #[test]
    fn a_level_wins_and_a_disabled_wheel_refuses() {
        let mut config = StoreConfig::new("/s");
        let mut level = put("DELAY\u{1}2\u{2}TIMER_DELAY_SEC\u{1}10\u{2}KEYS\u{1}k\u{2}");
        handle_schedule(&mut level, &config, NOW).unwrap();
        assert_eq!(level.topic, "SCHEDULE_TOPIC_XXXX");
        let p = props(&level);
        assert_eq!(property(&p, "TIMER_DELAY_SEC"), None);
        assert_eq!(property(&p, "KEYS"), Some("k"));
        config.timer_wheel_enable = false;
        let mut refused = put("TIMER_DELAY_SEC\u{1}10\u{2}");
        assert_eq!(
            handle_schedule(&mut refused, &config, NOW),
            Err(TimerRefusal::NotEnabled)
        );
        assert_eq!(
            TimerRefusal::NotEnabled.answer(&config).1,
            "accurate timer message is not enabled, timerWheelEnable is false"
        );
        // Prepared halves and the timer's own rolls are left alone.
        let mut half = put("TIMER_DELAY_SEC\u{1}10\u{2}");
        half.sys_flag = 0x4;
        config.timer_wheel_enable = true;
        handle_schedule(&mut half, &config, NOW).unwrap();
        assert_eq!(half.topic, "T");
        let mut roll = put("TIMER_DELAY_SEC\u{1}10\u{2}");
        roll.topic = TIMER_TOPIC.to_owned();
        handle_schedule(&mut roll, &config, NOW).unwrap();
        assert_eq!(props(&roll).len(), 1);
    }

    #[test]
    fn recall_handles_round_trip_as_java_encodes_them() {
        let handle = RecallHandle {
            topic: "TopicTest".into(),
            broker_name: "broker-a".into(),
            timestamp: "1700000005001".into(),
            message_id: "7F0000010001".into(),
        };
        // Base64.getUrlEncoder() of "v1 TopicTest broker-a 1700000005001 7F0000010001".
        let encoded = handle.build();
        assert_eq!(
            encoded,
            "djEgVG9waWNUZXN0IGJyb2tlci1hIDE3MDAwMDAwMDUwMDEgN0YwMDAwMDEwMDAx"
        );
        assert_eq!(RecallHandle::decode(&encoded), Some(handle));
        assert_eq!(RecallHandle::decode(""), None);
        assert_eq!(RecallHandle::decode("!!!"), None);
        assert_eq!(
            RecallHandle::decode(&base64_url_encode(b"v2 a b c d")),
            None
        );
        assert_eq!(RecallHandle::decode(&base64_url_encode(b"v1 a b c")), None);
        assert_eq!(base64_url_encode(b"ab?"), "YWI_");
        assert_eq!(base64_url_encode(b"a"), "YQ==");
        assert_eq!(base64_url_decode("YQ==").unwrap(), b"a");
    }
}
