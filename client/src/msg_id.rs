//! Client-side unique message ids, the `UNIQ_KEY` property (Java `MessageClientIDSetter`).
//!
//! Layout of the 16 bytes, written as 32 uppercase hex digits:
//!
//! | bytes | content |
//! | --- | --- |
//! | 0..4 | the client's IPv4 address |
//! | 4..6 | the low 16 bits of the process id |
//! | 6..10 | Java's class loader hash; here a fixed per-process value |
//! | 10..14 | milliseconds since the start of the current month (unsigned, wrapping) |
//! | 14..16 | a counter, wrapping |
//!
//! Java takes the month start in the JVM's time zone; ferromq takes it in UTC, so ids made by
//! a client east or west of UTC differ in the time part by the zone offset (the id's own
//! parser, [`nearly_time_from_id`], uses the same rule, so it round-trips).

use ferromq_protocol::calendar::now_ms;
use ferromq_protocol::calendar::{civil_from_days, days_from_civil, MS_PER_DAY};
use ferromq_protocol::message::{unhex, upper_hex};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};

/// The generator behind [`create_uniq_id`].
#[derive(Debug)]
pub struct UniqIdGenerator {
    fixed: String,
    counter: AtomicU32,
    month: Mutex<(i64, i64)>,
}

impl UniqIdGenerator {
    /// A generator for `ip`, `pid` and a stable `loader_hash`.
    #[must_use]
    pub fn new(ip: [u8; 4], pid: u32, loader_hash: i32) -> UniqIdGenerator {
        let mut fixed = Vec::with_capacity(10);
        fixed.extend_from_slice(&ip);
        // Java writes `(short) pid`: the low 16 bits.
        fixed.extend_from_slice(&(pid as u16).to_be_bytes());
        fixed.extend_from_slice(&loader_hash.to_be_bytes());
        UniqIdGenerator {
            fixed: upper_hex(&fixed),
            counter: AtomicU32::new(0),
            month: Mutex::new((i64::MIN, i64::MIN)),
        }
    }

    /// An id for a message created at `now_ms` (ms since the epoch).
    #[must_use]
    pub fn create_at(&self, now_ms: i64) -> String {
        let start = {
            let mut month = self
                .month
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if now_ms >= month.1 || now_ms < month.0 {
                *month = month_bounds(now_ms);
            }
            month.0
        };
        // Java's `(int) (current - startTime)` written as 8 hex digits: the low 32 bits.
        let diff = (now_ms - start) as u32;
        let count = self.counter.fetch_add(1, Ordering::Relaxed) as u16;
        let mut id = String::with_capacity(32);
        id.push_str(&self.fixed);
        id.push_str(&upper_hex(&diff.to_be_bytes()));
        id.push_str(&upper_hex(&count.to_be_bytes()));
        id
    }
}

/// A new `UNIQ_KEY` for this process.
#[must_use]
pub fn create_uniq_id() -> String {
    static GENERATOR: OnceLock<UniqIdGenerator> = OnceLock::new();
    GENERATOR
        .get_or_init(|| {
            let ip = super::config::local_ipv4()
                .parse::<std::net::Ipv4Addr>()
                .map_or([127, 0, 0, 1], |ip| ip.octets());
            let loader_hash = ferromq_protocol::message::java_string_hash("ferromq.client");
            UniqIdGenerator::new(ip, std::process::id(), loader_hash)
        })
        .create_at(now_ms())
}

/// The IP address bytes at the start of an id (4 for IPv4 ids, 16 for 56-digit IPv6 ids).
#[must_use]
pub fn ip_from_id(id: &str) -> Option<Vec<u8>> {
    let bytes = unhex(id)?;
    let ip_len = if bytes.len() == 28 { 16 } else { 4 };
    bytes.get(..ip_len).map(<[u8]>::to_vec)
}

/// The creation time an id encodes, in ms since the epoch, judged from `now_ms` (Java
/// `getNearlyTimeFromID`): the current month's start plus the id's offset, or the previous
/// month's if that would not be in the past.
#[must_use]
pub fn nearly_time_from_id(id: &str, now_ms: i64) -> Option<i64> {
    let bytes = unhex(id)?;
    let ip_len = if bytes.len() == 28 { 16 } else { 4 };
    let at = ip_len + 2 + 4;
    let span: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    let span = i64::from(u32::from_be_bytes(span));
    let (mut start, _) = month_bounds(now_ms);
    if start + span >= now_ms {
        start = month_bounds(start - 1).0;
    }
    Some(start + span)
}

/// Start of the UTC month holding `ms` and of the next one.
fn month_bounds(ms: i64) -> (i64, i64) {
    let days = ms.div_euclid(MS_PER_DAY);
    let (year, month, _) = civil_from_days(days);
    let (next_year, next_month) = if month == 12 {
        (year + 1, 1)
    } else {
        (year, month + 1)
    };
    (
        days_from_civil(year, month, 1) * MS_PER_DAY,
        days_from_civil(next_year, next_month, 1) * MS_PER_DAY,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calendar_helpers_agree_with_known_dates() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        // 2024-02-15T12:00Z: February of a leap year.
        let (start, next) = month_bounds(1_707_998_400_000);
        assert_eq!(start, 1_706_745_600_000); // 2024-02-01
        assert_eq!(next, 1_709_251_200_000); // 2024-03-01
        let (start, next) = month_bounds(1_735_603_200_000); // 2024-12-31
        assert_eq!(civil_from_days(start / MS_PER_DAY), (2024, 12, 1));
        assert_eq!(civil_from_days(next / MS_PER_DAY), (2025, 1, 1));
    }

    #[test]
    fn ids_have_java_layout_and_the_time_part_round_trips() {
        let generator = UniqIdGenerator::new([10, 1, 2, 3], 0x1_2345, -2);
        let created = 1_707_998_400_123; // mid-month
        let first = generator.create_at(created);
        let second = generator.create_at(created);
        assert_eq!(first.len(), 32);
        assert!(first.starts_with("0A010203" /* ip */));
        assert_eq!(&first[8..12], "2345", "low 16 bits of the pid");
        assert_eq!(&first[12..20], "FFFFFFFE", "the loader hash");
        assert_eq!(&first[28..], "0000");
        assert_eq!(&second[28..], "0001");
        assert_eq!(ip_from_id(&first), Some(vec![10, 1, 2, 3]));
        assert_eq!(nearly_time_from_id(&first, created + 5_000), Some(created));
        // Read early next month, the id still dates from the previous month.
        let next_month = month_bounds(created).1 + 1_000;
        assert_eq!(nearly_time_from_id(&first, next_month), Some(created));
        // Late in a 31-day month the offset passes i32::MAX; it is kept as unsigned.
        let late = month_bounds(1_735_603_200_000).0 + 30 * MS_PER_DAY + 5;
        let id = generator.create_at(late);
        assert_eq!(nearly_time_from_id(&id, late + 1), Some(late));
        assert!(create_uniq_id().chars().all(|c| c.is_ascii_hexdigit()));
    }
}
