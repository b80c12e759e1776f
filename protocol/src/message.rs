//! The CommitLog record: one stored message, byte for byte as the Java broker writes it.
//!
//! Mirrors `CommitLog.MessageExtEncoder` / `DefaultAppendMessageCallback` (4.9.x),
//! `MessageExtEncoder` (5.x) and `MessageDecoder` (`reference/message-format.md` §1–§5). The
//! same bytes are the body of pull, query and view responses, so the read path hands them out
//! as they are.
//!
//! ```text
//! offset  size      field                     (offsets for IPv4 born and store hosts)
//! 0       4         TOTALSIZE                 whole record, this field included
//! 4       4         MAGICCODE                 V1 0xDAA320A7 (1-byte topic length), V2 0xDAA320AB
//! 8       4         BODYCRC                   CRC-32 (IEEE) of the stored body & 0x7FFFFFFF
//! 12      4         QUEUEID
//! 16      4         FLAG                      the producer's flag, opaque
//! 20      8         QUEUEOFFSET               logical offset in the ConsumeQueue
//! 28      8         PHYSICALOFFSET            CommitLog offset of this record
//! 36      4         SYSFLAG                   bit 4: born host IPv6, bit 5: store host IPv6
//! 40      8         BORNTIMESTAMP
//! 48      8 | 20    BORNHOST                  address (4 | 16 bytes) + port (i32)
//! 56      8         STORETIMESTAMP
//! 64      8 | 20    STOREHOST
//! 72      4         RECONSUMETIMES
//! 76      8         PREPARED TRANSACTION OFFSET
//! 84      4         BODYLENGTH
//! 88      B         BODY                      stored as sent (possibly compressed)
//! 88+B    1 | 2     TOPICLENGTH               1 byte in V1, 2 in V2
//! ..      T         TOPIC                     UTF-8
//! ..      2         PROPERTIESLENGTH
//! ..      P         PROPERTIES                name 0x01 value 0x02, repeated
//! ```
//!
//! All integers big-endian. A segment that cannot hold the next record plus 8 bytes ends in a
//! blank record: `remaining:i32, 0xCBD43194`, and the reader moves to the next segment.

use crate::bytes::{ByteReader, Truncated};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Magic code of a V1 record (1-byte topic length).
pub const MAGIC_CODE_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// Magic code of a V2 record (2-byte topic length, 5.x, topics over 127 bytes).
pub const MAGIC_CODE_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// Magic code of the blank record that ends a segment.
pub const BLANK_MAGIC_CODE: i32 = 0xCBD4_3194_u32 as i32;
/// Size of the blank record a segment ends with at least.
pub const BLANK_RECORD_SIZE: usize = 8;

/// SYSFLAG bit: the born host is IPv6.
pub const FLAG_BORN_HOST_V6: i32 = 0x10;
/// SYSFLAG bit: the store host is IPv6.
pub const FLAG_STORE_HOST_V6: i32 = 0x20;
/// SYSFLAG bits of the transaction type.
pub const TRANSACTION_TYPE_MASK: i32 = 0x0C;

/// `sys_flag` with its two host bits set from the addresses themselves: the record's layout
/// (4 or 16 address bytes) follows the addresses, whatever bits a client sent in its header.
#[must_use]
pub fn with_host_flags(sys_flag: i32, born_host: SocketAddr, store_host: SocketAddr) -> i32 {
    let mut flags = sys_flag & !(FLAG_BORN_HOST_V6 | FLAG_STORE_HOST_V6);
    if born_host.is_ipv6() {
        flags |= FLAG_BORN_HOST_V6;
    }
    if store_host.is_ipv6() {
        flags |= FLAG_STORE_HOST_V6;
    }
    flags
}

/// Longest properties string a record holds (its length is an `i16`).
pub const PROPERTIES_SIZE_MAX: usize = 32_767;
/// Longest topic a record holds: 127 bytes in V1, an `i16` length in V2.
pub const TOPIC_SIZE_MAX: usize = 32_767;

/// Whether a record of `sys_flag` gets a ConsumeQueue unit and a queue offset: every one but
/// a transaction's half (prepared, 0x4) and its rollback (0xC), as Java's dispatch decides.
#[must_use]
pub fn enters_consume_queue(sys_flag: i32) -> bool {
    let transaction_type = sys_flag & TRANSACTION_TYPE_MASK;
    transaction_type != 0x4 && transaction_type != 0xC
}

/// Separator between a property's name and value.
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Separator after each property.
pub const PROPERTY_SEPARATOR: char = '\u{2}';
/// `MessageConst.PROPERTY_TAGS`: the message's tag.
pub const PROPERTY_TAGS: &str = "TAGS";
/// `MessageConst.PROPERTY_KEYS`: the message's keys, separated by spaces.
pub const PROPERTY_KEYS: &str = "KEYS";
/// `MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`: the message id clients see.
pub const PROPERTY_UNIQ_KEY: &str = "UNIQ_KEY";

/// Which record layout a magic code selects (`MessageVersion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MessageVersion {
    /// 1-byte topic length.
    V1,
    /// 2-byte topic length.
    V2,
}

impl MessageVersion {
    /// The magic code written for this version.
    #[must_use]
    pub fn magic_code(self) -> i32 {
        match self {
            MessageVersion::V1 => MAGIC_CODE_V1,
            MessageVersion::V2 => MAGIC_CODE_V2,
        }
    }

    /// The version Java picks for a topic: V2 only when the name is over 127 bytes.
    #[must_use]
    pub fn for_topic(topic: &str) -> MessageVersion {
        if topic.len() > 127 {
            MessageVersion::V2
        } else {
            MessageVersion::V1
        }
    }
}

/// A stored message, borrowing its variable parts from the record bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MessageRecord<'a> {
    /// Layout version.
    pub version: MessageVersion,
    /// BODYCRC as stored.
    pub body_crc: i32,
    /// Queue id.
    pub queue_id: i32,
    /// Producer flag.
    pub flag: i32,
    /// Logical offset in the ConsumeQueue.
    pub queue_offset: i64,
    /// CommitLog offset of the record.
    pub physical_offset: i64,
    /// System flags (`MessageSysFlag`).
    pub sys_flag: i32,
    /// Producer time, ms.
    pub born_timestamp: i64,
    /// Producer address.
    pub born_host: SocketAddr,
    /// Append time, ms.
    pub store_timestamp: i64,
    /// Broker address (`brokerIP1:listenPort`).
    pub store_host: SocketAddr,
    /// Retry count.
    pub reconsume_times: i32,
    /// Half message offset of a committed transactional message, else 0.
    pub prepared_transaction_offset: i64,
    /// Body as stored.
    pub body: &'a [u8],
    /// Topic.
    pub topic: &'a str,
    /// Properties in their stored form.
    pub properties: &'a [u8],
}

impl<'a> MessageRecord<'a> {
    /// A record of `body` in `topic` with `properties` (stored form), its version and body
    /// CRC as Java computes them, and zero for every other field (hosts `0.0.0.0:0`); set the
    /// rest with struct update syntax.
    #[must_use]
    pub fn new(topic: &'a str, body: &'a [u8], properties: &'a [u8]) -> MessageRecord<'a> {
        let nowhere = SocketAddr::from(([0, 0, 0, 0], 0));
        MessageRecord {
            version: MessageVersion::for_topic(topic),
            body_crc: body_crc32(body),
            queue_id: 0,
            flag: 0,
            queue_offset: 0,
            physical_offset: 0,
            sys_flag: 0,
            born_timestamp: 0,
            born_host: nowhere,
            store_timestamp: 0,
            store_host: nowhere,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body,
            topic,
            properties,
        }
    }

    /// The record's bytes (`encode_record` into a new buffer).
    #[must_use]
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        encode_record(self, &mut out);
        out
    }
}

/// What starts at a position of a segment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record<'a> {
    /// A message, `size` bytes long.
    Message {
        /// The decoded fields.
        record: MessageRecord<'a>,
        /// TOTALSIZE.
        size: usize,
    },
    /// The end-of-segment marker; `remaining` bytes of the segment are left from here.
    Blank {
        /// Bytes from the marker to the end of the segment.
        remaining: usize,
    },
}

/// Why bytes are not a record. Recovery treats any of these as the end of valid data.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Fewer bytes than the record needs (a torn write, or the end of written data).
    #[error("record truncated: needs {needed} bytes, {available} available")]
    Truncated {
        /// Bytes the record claims or needs.
        needed: usize,
        /// Bytes there are.
        available: usize,
    },
    /// The magic code is neither a message nor a blank.
    #[error("bad magic code {0:#010x}")]
    BadMagic(i32),
    /// TOTALSIZE disagrees with the field lengths.
    #[error("TOTALSIZE {total} but fields add up to {computed}")]
    SizeMismatch {
        /// TOTALSIZE.
        total: usize,
        /// Sum of the fields.
        computed: usize,
    },
    /// The body does not match BODYCRC.
    #[error("body CRC {computed:#x} does not match stored {stored:#x}")]
    BadCrc {
        /// Stored value.
        stored: i32,
        /// Computed value.
        computed: i32,
    },
    /// The topic is not UTF-8.
    #[error("topic is not UTF-8")]
    BadTopic,
}

/// Decodes the record at the start of `buf` (`MessageDecoder.decode` /
/// `CommitLog.checkMessageAndReturnSize`), checking the body CRC when `verify_crc`.
///
/// # Errors
/// [`RecordError`] for anything that is not a whole, consistent record.
pub fn decode_record(buf: &[u8], verify_crc: bool) -> Result<Record<'_>, RecordError> {
    let mut reader = ByteReader::new(buf, 0);
    let total = reader.i32()?;
    let magic = reader.i32()?;
    let version = match magic {
        MAGIC_CODE_V1 => MessageVersion::V1,
        MAGIC_CODE_V2 => MessageVersion::V2,
        BLANK_MAGIC_CODE => {
            let remaining = usize::try_from(total).map_err(|_| RecordError::BadMagic(magic))?;
            return Ok(Record::Blank { remaining });
        }
        other => return Err(RecordError::BadMagic(other)),
    };
    let size = usize::try_from(total)
        .ok()
        .filter(|size| *size >= 8)
        .ok_or(RecordError::SizeMismatch {
            total: 0,
            computed: 0,
        })?;
    if size > buf.len() {
        return Err(RecordError::Truncated {
            needed: size,
            available: buf.len(),
        });
    }
    let mut reader = ByteReader::new(&buf[..size], 8);
    let body_crc = reader.i32()?;
    let queue_id = reader.i32()?;
    let flag = reader.i32()?;
    let queue_offset = reader.i64()?;
    let physical_offset = reader.i64()?;
    let sys_flag = reader.i32()?;
    let born_timestamp = reader.i64()?;
    let born_host = read_host(&mut reader, sys_flag & FLAG_BORN_HOST_V6 != 0)?;
    let store_timestamp = reader.i64()?;
    let store_host = read_host(&mut reader, sys_flag & FLAG_STORE_HOST_V6 != 0)?;
    let reconsume_times = reader.i32()?;
    let prepared_transaction_offset = reader.i64()?;
    let body_len = length(reader.i32()?)?;
    let body = reader.take(body_len)?;
    let topic_len = match version {
        MessageVersion::V1 => usize::from(reader.u8()?),
        MessageVersion::V2 => length(i32::from(reader.i16()?))?,
    };
    let topic = std::str::from_utf8(reader.take(topic_len)?).map_err(|_| RecordError::BadTopic)?;
    let properties_len = length(i32::from(reader.i16()?))?;
    let properties = reader.take(properties_len)?;
    if reader.position() != size {
        return Err(RecordError::SizeMismatch {
            total: size,
            computed: reader.position(),
        });
    }
    if verify_crc {
        let computed = body_crc32(body);
        if computed != body_crc {
            return Err(RecordError::BadCrc {
                stored: body_crc,
                computed,
            });
        }
    }
    let record = MessageRecord {
        version,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic,
        properties,
    };
    Ok(Record::Message { record, size })
}

/// The size of the record `record` encodes to.
#[must_use]
pub fn record_size(record: &MessageRecord<'_>) -> usize {
    record_size_of(
        record.version,
        record.sys_flag,
        record.body.len(),
        record.topic.len(),
        record.properties.len(),
    )
}

/// The size of a record of `version` and `sys_flag` with fields of these lengths.
#[must_use]
pub fn record_size_of(
    version: MessageVersion,
    sys_flag: i32,
    body_len: usize,
    topic_len: usize,
    properties_len: usize,
) -> usize {
    let host_size = |v6: bool| if v6 { 20 } else { 8 };
    let topic_length_size = match version {
        MessageVersion::V1 => 1,
        MessageVersion::V2 => 2,
    };
    4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + host_size(sys_flag & FLAG_BORN_HOST_V6 != 0)
        + 8
        + host_size(sys_flag & FLAG_STORE_HOST_V6 != 0)
        + 4
        + 8
        + 4
        + body_len
        + topic_length_size
        + topic_len
        + 2
        + properties_len
}

/// Appends the record bytes of `record` to `out`, fields as given (the caller sets CRC,
/// offsets and timestamps).
///
/// # Panics
/// As [`encode_record_into`].
pub fn encode_record(record: &MessageRecord<'_>, out: &mut Vec<u8>) {
    let start = out.len();
    out.resize(start + record_size(record), 0);
    encode_record_into(record, &mut out[start..]);
}

/// Writes the record bytes of `record` into `out`, which is exactly [`record_size`] long:
/// the CommitLog encodes each record straight into the buffer its write goes out from.
///
/// # Panics
/// If `out` is not [`record_size`] long, the topic or properties exceed what the layout can
/// hold, or a host's address family disagrees with its SYSFLAG bit: callers validate these
/// before encoding.
pub fn encode_record_into(record: &MessageRecord<'_>, out: &mut [u8]) {
    let size = record_size(record);
    assert_eq!(out.len(), size, "the record fills what it is given");
    let mut out = out;
    put(
        &mut out,
        &i32::try_from(size)
            .expect("record below 2 GiB")
            .to_be_bytes(),
    );
    put(&mut out, &record.version.magic_code().to_be_bytes());
    put(&mut out, &record.body_crc.to_be_bytes());
    put(&mut out, &record.queue_id.to_be_bytes());
    put(&mut out, &record.flag.to_be_bytes());
    put(&mut out, &record.queue_offset.to_be_bytes());
    put(&mut out, &record.physical_offset.to_be_bytes());
    put(&mut out, &record.sys_flag.to_be_bytes());
    put(&mut out, &record.born_timestamp.to_be_bytes());
    put_host(
        &mut out,
        record.born_host,
        record.sys_flag & FLAG_BORN_HOST_V6 != 0,
    );
    put(&mut out, &record.store_timestamp.to_be_bytes());
    put_host(
        &mut out,
        record.store_host,
        record.sys_flag & FLAG_STORE_HOST_V6 != 0,
    );
    put(&mut out, &record.reconsume_times.to_be_bytes());
    put(&mut out, &record.prepared_transaction_offset.to_be_bytes());
    let body_len = i32::try_from(record.body.len()).expect("body below 2 GiB");
    put(&mut out, &body_len.to_be_bytes());
    put(&mut out, record.body);
    match record.version {
        MessageVersion::V1 => {
            let len = u8::try_from(record.topic.len()).expect("V1 topic at most 255 bytes");
            put(&mut out, &[len]);
        }
        MessageVersion::V2 => {
            let len = i16::try_from(record.topic.len()).expect("V2 topic below 32 KiB");
            put(&mut out, &len.to_be_bytes());
        }
    }
    put(&mut out, record.topic.as_bytes());
    let properties_len = i16::try_from(record.properties.len()).expect("properties below 32 KiB");
    put(&mut out, &properties_len.to_be_bytes());
    put(&mut out, record.properties);
    assert!(out.is_empty(), "record_size agrees with encode_record_into");
}

/// Copies `bytes` to the front of `out` and moves `out` past them.
fn put(out: &mut &mut [u8], bytes: &[u8]) {
    let (head, rest) = std::mem::take(out).split_at_mut(bytes.len());
    head.copy_from_slice(bytes);
    *out = rest;
}

/// The blank record that ends a segment with `remaining` bytes left: its first 8 bytes
/// (size and magic code); readers skip the rest.
#[must_use]
pub fn blank_record(remaining: usize) -> [u8; BLANK_RECORD_SIZE] {
    assert!(
        remaining >= BLANK_RECORD_SIZE,
        "a blank record needs 8 bytes"
    );
    let mut record = [0; BLANK_RECORD_SIZE];
    let size = i32::try_from(remaining).expect("segment below 2 GiB");
    record[..4].copy_from_slice(&size.to_be_bytes());
    record[4..].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
    record
}

/// BODYCRC: `java.util.zip.CRC32` of the body, masked to 31 bits as Java stores it.
#[must_use]
pub fn body_crc32(body: &[u8]) -> i32 {
    crate::bytes::java_crc32(body)
}

/// Java's `String.hashCode`: 31-polynomial over UTF-16 code units, wrapping. The tag code
/// of a ConsumeQueue unit and the IndexFile key hash are made from it.
#[must_use]
pub fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// Parses stored properties as Java's `string2messageProperties` does: entries split on
/// 0x02, name and value on the first 0x01, entries with an empty name or value dropped.
#[must_use]
pub fn parse_properties(properties: &[u8]) -> Vec<(String, String)> {
    let text = String::from_utf8_lossy(properties);
    text.split(PROPERTY_SEPARATOR)
        .filter(|entry| entry.chars().count() >= 3)
        .filter_map(|entry| entry.split_once(NAME_VALUE_SEPARATOR))
        .filter(|(name, value)| !name.is_empty() && !value.is_empty())
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
}

/// Serializes properties as Java 4.9's `messageProperties2String`: `name 0x01 value`, with
/// 0x02 between entries and none after the last (what the 4.9 client sends and the 4.9
/// broker stores).
#[must_use]
pub fn properties_to_string<'a>(
    properties: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> String {
    let mut text = String::new();
    for (name, value) in properties {
        if !text.is_empty() {
            text.push(PROPERTY_SEPARATOR);
        }
        text.push_str(name);
        text.push(NAME_VALUE_SEPARATOR);
        text.push_str(value);
    }
    text
}

/// Appends `name 0x01 value` to a properties string, with a separator before it unless the
/// string is empty or already ends with one: clients of 4.9 send no trailing separator,
/// older ones (and ours, once) do, and a property glued to the one before it corrupts both.
pub fn append_property(properties: &mut Vec<u8>, name: &str, value: &str) {
    if properties
        .last()
        .is_some_and(|&last| last != PROPERTY_SEPARATOR as u8)
    {
        properties.push(PROPERTY_SEPARATOR as u8);
    }
    properties.extend_from_slice(name.as_bytes());
    properties.push(NAME_VALUE_SEPARATOR as u8);
    properties.extend_from_slice(value.as_bytes());
}

/// A client's properties string as Java's broker stores it after a send (parsed by
/// `string2messageProperties`, changed, written by `messageProperties2String`): malformed
/// entries (no name or no value) and those named in `drop` or `set` left out, then `set`
/// appended, separators between entries only. The entries kept keep their bytes and order.
///
/// Works on bytes: 0x01 and 0x02 never occur inside a UTF-8 sequence, so splitting bytes is
/// splitting characters, and invalid UTF-8 is kept for the reader to replace, as Java's
/// decoder would have on the way in.
#[must_use]
pub fn rewrite_properties(raw: &[u8], drop: &[&str], set: &[(&str, &str)]) -> Vec<u8> {
    let extra: usize = set.iter().map(|(n, v)| n.len() + v.len() + 2).sum();
    let mut out = Vec::with_capacity(raw.len() + extra);
    let dropped = |name: &[u8]| {
        drop.iter().any(|d| d.as_bytes() == name) || set.iter().any(|(n, _)| n.as_bytes() == name)
    };
    for entry in raw.split(|&b| b == PROPERTY_SEPARATOR as u8) {
        let Some(split) = entry.iter().position(|&b| b == NAME_VALUE_SEPARATOR as u8) else {
            continue;
        };
        let (name, value) = (&entry[..split], &entry[split + 1..]);
        if name.is_empty() || value.is_empty() || dropped(name) {
            continue;
        }
        if !out.is_empty() {
            out.push(PROPERTY_SEPARATOR as u8);
        }
        out.extend_from_slice(entry);
    }
    for (name, value) in set {
        append_property(&mut out, name, value);
    }
    out
}

/// The offset message id (`MessageDecoder.createMessageId`): store host address, port and
/// physical offset as uppercase hex — 32 digits for IPv4, 56 for IPv6.
#[must_use]
pub fn offset_msg_id(store_host: SocketAddr, physical_offset: i64) -> String {
    let mut bytes = Vec::with_capacity(28);
    match store_host.ip() {
        IpAddr::V4(ip) => bytes.extend_from_slice(&ip.octets()),
        IpAddr::V6(ip) => bytes.extend_from_slice(&ip.octets()),
    }
    bytes.extend_from_slice(&i32::from(store_host.port()).to_be_bytes());
    bytes.extend_from_slice(&physical_offset.to_be_bytes());
    upper_hex(&bytes)
}

/// Upper-case hex, two digits a byte, as Java's `UtilAll.bytes2string` (message ids).
#[must_use]
pub fn upper_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0xF)]));
    }
    text
}

/// The bytes of hex text (either case), `None` if it has an odd length or a non-hex digit
/// (`UtilAll.string2bytes`).
#[must_use]
pub fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

/// Decodes an offset message id into its store host and physical offset.
#[must_use]
pub fn decode_offset_msg_id(id: &str) -> Option<(SocketAddr, i64)> {
    let bytes = unhex(id)?;
    let (ip, rest): (IpAddr, &[u8]) = match bytes.len() {
        16 => (
            IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(&bytes[..4]).ok()?)),
            &bytes[4..],
        ),
        28 => (
            IpAddr::V6(Ipv6Addr::from(<[u8; 16]>::try_from(&bytes[..16]).ok()?)),
            &bytes[16..],
        ),
        _ => return None,
    };
    let port = u16::try_from(i32::from_be_bytes(rest[..4].try_into().ok()?)).ok()?;
    let offset = i64::from_be_bytes(rest[4..12].try_into().ok()?);
    Some((SocketAddr::new(ip, port), offset))
}

fn put_host(out: &mut &mut [u8], host: SocketAddr, v6: bool) {
    match (host.ip(), v6) {
        (IpAddr::V4(ip), false) => put(out, &ip.octets()),
        (IpAddr::V6(ip), true) => put(out, &ip.octets()),
        _ => panic!("host {host} disagrees with its SYSFLAG IPv6 bit ({v6})"),
    }
    put(out, &i32::from(host.port()).to_be_bytes());
}

fn length(value: i32) -> Result<usize, RecordError> {
    usize::try_from(value).map_err(|_| RecordError::SizeMismatch {
        total: 0,
        computed: 0,
    })
}

impl From<Truncated> for RecordError {
    fn from(truncated: Truncated) -> Self {
        RecordError::Truncated {
            needed: truncated.needed,
            available: truncated.available,
        }
    }
}

/// Reads a host: an IPv4 (4 bytes) or IPv6 (16 bytes) address and an i32 port.
fn read_host(reader: &mut ByteReader<'_>, v6: bool) -> Result<SocketAddr, Truncated> {
    let ip = if v6 {
        IpAddr::V6(Ipv6Addr::from(reader.array::<16>()?))
    } else {
        IpAddr::V4(Ipv4Addr::from(reader.array::<4>()?))
    };
    // Java writes the port as an int; only the low 16 bits are a port.
    let port = u16::try_from(reader.i32()? & 0xFFFF).expect("masked to 16 bits");
    Ok(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(topic: &str) -> MessageRecord<'_> {
        MessageRecord {
            version: MessageVersion::for_topic(topic),
            body_crc: body_crc32(b"hello"),
            queue_id: 3,
            flag: 0,
            queue_offset: 7,
            physical_offset: 4096,
            sys_flag: FLAG_BORN_HOST_V6,
            born_timestamp: 1,
            born_host: "[fd00::2]:5000".parse().unwrap(),
            store_timestamp: 2,
            store_host: "127.0.0.1:10911".parse().unwrap(),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body: b"hello",
            topic,
            properties: b"TAGS\x01a\x02",
        }
    }

    #[test]
    fn encode_then_decode_gives_the_record_back() {
        let long_topic = "%RETRY%".to_owned() + &"g".repeat(150);
        for topic in ["T", long_topic.as_str()] {
            let record = sample(topic);
            let mut bytes = Vec::new();
            encode_record(&record, &mut bytes);
            assert_eq!(bytes.len(), record_size(&record));
            let decoded = decode_record(&bytes, true).unwrap();
            assert_eq!(
                decoded,
                Record::Message {
                    record,
                    size: bytes.len()
                }
            );
        }
    }

    #[test]
    fn decode_rejects_torn_and_corrupt_records() {
        let mut bytes = Vec::new();
        encode_record(&sample("T"), &mut bytes);
        for cut in [4, 20, bytes.len() - 1] {
            assert!(decode_record(&bytes[..cut], true).is_err(), "cut at {cut}");
        }
        let mut flipped = bytes.clone();
        let body_at = bytes.windows(5).position(|w| w == b"hello").unwrap();
        flipped[body_at] ^= 1;
        assert!(matches!(
            decode_record(&flipped, true),
            Err(RecordError::BadCrc { .. })
        ));
        let mut bad_magic = bytes;
        bad_magic[4] = 0;
        assert!(matches!(
            decode_record(&bad_magic, true),
            Err(RecordError::BadMagic(_))
        ));
    }

    #[test]
    fn blank_record_round_trips() {
        let bytes = blank_record(440);
        assert_eq!(
            decode_record(&bytes, true),
            Ok(Record::Blank { remaining: 440 })
        );
    }

    #[test]
    fn java_string_hash_matches_java() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash("é"), 233);
    }

    #[test]
    fn properties_parse_like_java() {
        let parsed = parse_properties(b"KEYS\x01k1 k2\x02TAGS\x01a\x02x\x01\x02\x01v\x02ab\x02");
        let expected = [("KEYS", "k1 k2"), ("TAGS", "a")];
        let expected: Vec<(String, String)> = expected
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(parsed, expected);
        assert_eq!(properties_to_string([("A", "1")]), "A\u{1}1");
        assert_eq!(
            properties_to_string([("A", "1"), ("B", "2")]),
            "A\u{1}1\u{2}B\u{1}2"
        );
    }

    #[test]
    fn append_property_separates_from_the_last_entry() {
        for (before, after) in [
            (&b""[..], &b"CLUSTER\x01c"[..]),
            (b"seq\x01979", b"seq\x01979\x02CLUSTER\x01c"),
            (b"seq\x01979\x02", b"seq\x01979\x02CLUSTER\x01c"),
        ] {
            let mut properties = before.to_vec();
            append_property(&mut properties, "CLUSTER", "c");
            assert_eq!(properties, after);
        }
    }

    #[test]
    fn rewrite_properties_stores_what_java_stores() {
        // The 4.9 client's form (no trailing separator), ours (a trailing one), malformed
        // entries, a dropped and a replaced name: each comes out well formed.
        let cases: [(&[u8], &[u8]); 5] = [
            (b"seq\x01979", b"seq\x01979\x02CLUSTER\x01c"),
            (
                b"seq\x01979\x02WAIT\x01true\x02",
                b"seq\x01979\x02CLUSTER\x01c",
            ),
            (b"WAIT\x01true\x02TAGS\x01A", b"TAGS\x01A\x02CLUSTER\x01c"),
            (
                b"\x01v\x02k\x01\x02junk\x02\x02a\x01\x01b\x02CLUSTER\x01old",
                b"a\x01\x01b\x02CLUSTER\x01c",
            ),
            (b"", b"CLUSTER\x01c"),
        ];
        for (raw, stored) in cases {
            let rewritten = rewrite_properties(raw, &["WAIT"], &[("CLUSTER", "c")]);
            assert_eq!(rewritten, stored, "{:?}", String::from_utf8_lossy(raw));
            let parsed = parse_properties(&rewritten);
            assert_eq!(
                parsed.last().unwrap(),
                &("CLUSTER".to_owned(), "c".to_owned())
            );
        }
    }

    #[test]
    fn offset_msg_id_round_trips() {
        let host: SocketAddr = "127.0.0.1:10911".parse().unwrap();
        let id = offset_msg_id(host, 1883);
        assert_eq!(id, "7F00000100002A9F000000000000075B");
        assert_eq!(decode_offset_msg_id(&id), Some((host, 1883)));
        let v6: SocketAddr = "[fd00::2]:10911".parse().unwrap();
        assert_eq!(decode_offset_msg_id(&offset_msg_id(v6, 9)), Some((v6, 9)));
        assert_eq!(decode_offset_msg_id("zz"), None);
    }
}
