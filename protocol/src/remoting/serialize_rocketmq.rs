//! The binary "ROCKETMQ" header serialization (type 1), `RocketMQSerializable` in Java.
//!
//! ```text
//! offset  size       field
//! 0       2          code       i16 (Java truncates the int)
//! 2       1          language   LanguageCode byte
//! 3       2          version    i16
//! 5       4          opaque     i32
//! 9       4          flag       i32
//! 13      4          remarkLen  i32, 0 when the remark is null or empty
//! 17      remarkLen  remark     UTF-8
//! 17+r    4          extLen     i32, total bytes of the map, 0 when none
//! 21+r    extLen     entries    { keyLen i16, key UTF-8, valLen i32, value UTF-8 }*
//! ```
//!
//! All integers big-endian. Quirks mirrored from Java (`reference/remoting.md` §4.2): a
//! zero-length string reads as null, so an empty remark or value is absent after decoding;
//! the writer skips entries with an empty key or value; `remarkLen` and `extLen` must not
//! exceed the header length; strings that are not UTF-8 read with U+FFFD in place of the bad
//! bytes (Java's `new String(bytes, UTF_8)`).

use super::command::{ExtFields, LanguageCode, RemotingCommand, SerializeType};
use super::DecodeError;
use crate::bytes::{ByteReader, Truncated};

/// The smallest binary header: the fixed fields and two zero lengths.
pub const HEADER_SIZE_MIN: usize = 21;

/// Appends the binary header of `command` to `out`.
pub fn encode_header(command: &RemotingCommand, out: &mut Vec<u8>) {
    // Java writes the low 16 bits of the int fields that are shorts on the wire.
    #[allow(clippy::cast_possible_truncation)]
    {
        out.extend_from_slice(&(command.code as i16).to_be_bytes());
        out.push(command.language.0);
        out.extend_from_slice(&(command.version as i16).to_be_bytes());
    }
    out.extend_from_slice(&command.opaque.to_be_bytes());
    out.extend_from_slice(&command.flag.to_be_bytes());
    match command.remark.as_deref() {
        Some(remark) if !remark.is_empty() => {
            out.extend_from_slice(&length_i32(remark.len()).to_be_bytes());
            out.extend_from_slice(remark.as_bytes());
        }
        _ => out.extend_from_slice(&0i32.to_be_bytes()),
    }
    let length_at = out.len();
    out.extend_from_slice(&0i32.to_be_bytes());
    if let Some(fields) = &command.ext_fields {
        for (key, value) in fields.iter() {
            // A key over an i16 cannot be written (Java would write a wrong length).
            let Ok(key_len) = i16::try_from(key.len()) else {
                continue;
            };
            if key.is_empty() || value.is_empty() {
                continue;
            }
            out.extend_from_slice(&key_len.to_be_bytes());
            out.extend_from_slice(key.as_bytes());
            out.extend_from_slice(&length_i32(value.len()).to_be_bytes());
            out.extend_from_slice(value.as_bytes());
        }
    }
    let ext_len = length_i32(out.len() - length_at - 4);
    out[length_at..length_at + 4].copy_from_slice(&ext_len.to_be_bytes());
}

/// Decodes a binary header; the body is filled in by the caller.
///
/// # Errors
/// [`DecodeError::BadBinaryHeader`] when a length field points outside the header.
pub fn decode_header(bytes: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let mut reader = Reader(ByteReader::new(bytes, 0));
    let code = i32::from(reader.i16()?);
    let language = LanguageCode(reader.u8()?);
    let version = i32::from(reader.i16()?);
    let opaque = reader.i32()?;
    let flag = reader.i32()?;
    let remark_len = reader.length(bytes.len(), "remark length")?;
    let remark = reader.string(remark_len)?;
    let ext_len = reader.length(bytes.len(), "extFields length")?;
    let ext_fields = if ext_len > 0 {
        let map_bytes = reader.take(ext_len)?;
        Some(decode_map(map_bytes)?)
    } else {
        None
    };
    Ok(RemotingCommand {
        code,
        language,
        version,
        opaque,
        flag,
        remark,
        ext_fields,
        serialize_type: SerializeType::RocketMq,
        body: Vec::new(),
        body_parts: Vec::new(),
    })
}

fn decode_map(bytes: &[u8]) -> Result<ExtFields, DecodeError> {
    let mut reader = Reader(ByteReader::new(bytes, 0));
    let mut fields = ExtFields::new();
    while !reader.is_at_end() {
        let key_len = usize::try_from(reader.i16()?)
            .map_err(|_| DecodeError::BadBinaryHeader("negative extFields key length"))?;
        let key = reader.string(key_len)?;
        let value_len = reader.length(bytes.len(), "extFields value length")?;
        let value = reader.string(value_len)?;
        // Java maps zero-length strings to null and a null key or value is no entry.
        if let (Some(key), Some(value)) = (key, value) {
            fields.push(key, value);
        }
    }
    Ok(fields)
}

fn length_i32(len: usize) -> i32 {
    i32::try_from(len).expect("header parts are bounded by the frame limit")
}

/// Reads the binary header's fields; lengths and strings follow Java's `readStr` rules.
struct Reader<'a>(ByteReader<'a>);

impl From<Truncated> for DecodeError {
    fn from(_: Truncated) -> Self {
        DecodeError::BadBinaryHeader("field runs past the end of the header")
    }
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], DecodeError> {
        Ok(self.0.take(len)?)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.0.u8()?)
    }

    fn i16(&mut self) -> Result<i16, DecodeError> {
        Ok(self.0.i16()?)
    }

    fn i32(&mut self) -> Result<i32, DecodeError> {
        Ok(self.0.i32()?)
    }

    fn is_at_end(&self) -> bool {
        self.0.is_at_end()
    }

    /// An i32 length that Java checks against the header length.
    fn length(&mut self, limit: usize, what: &'static str) -> Result<usize, DecodeError> {
        let len = self.i32()?;
        usize::try_from(len)
            .ok()
            .filter(|len| *len <= limit)
            .ok_or(DecodeError::BadBinaryHeader(what))
    }

    fn string(&mut self, len: usize) -> Result<Option<String>, DecodeError> {
        if len == 0 {
            return Ok(None);
        }
        let bytes = self.take(len)?;
        Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encode_then_decode_keeps_every_field() {
        let mut command = RemotingCommand::request(super::super::RequestCode(310));
        command.opaque = -5;
        command.remark = Some("héllo".into());
        command.ext_fields = Some([("b", "Topic"), ("a", "pg")].into_iter().collect());
        command.serialize_type = SerializeType::RocketMq;
        let mut out = Vec::new();
        encode_header(&command, &mut out);
        assert_eq!(&out[..2], &[0x01, 0x36]);
        let decoded = decode_header(&out).unwrap();
        assert_eq!(decoded, command);
    }

    #[test]
    fn empty_remark_and_value_read_back_as_null() {
        let mut command = RemotingCommand::request(super::super::RequestCode(1));
        command.remark = Some(String::new());
        command.ext_fields = Some([("k", "")].into_iter().collect());
        let mut out = Vec::new();
        encode_header(&command, &mut out);
        assert_eq!(out.len(), HEADER_SIZE_MIN);
        let decoded = decode_header(&out).unwrap();
        assert_eq!(decoded.remark, None);
        assert_eq!(decoded.ext_fields, None);
    }

    #[test]
    fn decode_reads_strings_that_are_not_utf8_as_replacement_characters() {
        let mut command = RemotingCommand::request(super::super::RequestCode(30));
        command.remark = Some("ab".into());
        command.ext_fields = Some([("topic", "Tx")].into_iter().collect());
        command.serialize_type = SerializeType::RocketMq;
        let mut out = Vec::new();
        encode_header(&command, &mut out);
        // The remark's 'b' and the value's 'x' become bytes that start no UTF-8 sequence.
        let remark_at = 17 + 1;
        out[remark_at] = 0xFF;
        let last = out.len() - 1;
        out[last] = 0xFE;
        let decoded = decode_header(&out).unwrap();
        assert_eq!(decoded.remark.as_deref(), Some("a\u{fffd}"));
        assert_eq!(decoded.ext_fields.unwrap().get("topic"), Some("T\u{fffd}"));
    }

    #[test]
    fn decode_length_past_header_is_error() {
        let mut bytes = vec![0u8; HEADER_SIZE_MIN];
        bytes[13..17].copy_from_slice(&100i32.to_be_bytes());
        assert!(matches!(
            decode_header(&bytes),
            Err(DecodeError::BadBinaryHeader(_))
        ));
        assert!(matches!(
            decode_header(&bytes[..5]),
            Err(DecodeError::BadBinaryHeader(_))
        ));
    }
}
