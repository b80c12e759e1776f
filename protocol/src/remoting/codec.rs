//! Frames: splitting a byte stream into commands and writing commands as bytes.
//!
//! ```text
//! +--------------+--------------------------+---------------+-------------+
//! | total length | serialize type | hdr len | header bytes  | body bytes  |
//! | i32          | u8 (bits 31..24) | u24   | hdr len bytes | the rest    |
//! +--------------+--------------------------+---------------+-------------+
//! total length = 4 + hdr len + body len (the bytes after the first word)
//! ```
//!
//! Mirrors `RemotingCommand.encode` / `decode` and Netty's `NettyDecoder` in Java
//! (`reference/remoting.md` §2). A frame whose `total length + 4` exceeds the frame limit
//! (16 MiB by default, `frameMaxLength`) is refused before a byte of it is buffered, so a peer
//! cannot make the decoder allocate more than the limit. "Not enough bytes yet" is `Ok(None)`,
//! never an error.

use super::command::{RemotingCommand, SerializeType};
use super::{serialize_json, serialize_rocketmq};

/// Why bytes could not be decoded as a frame. Any of these closes the connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The length prefix announces a frame above the limit.
    #[error(
        "frame of {len} bytes exceeds the limit of {max} bytes \
         (raise frameMaxLength if the peer is legitimate)"
    )]
    FrameTooLarge {
        /// Announced frame size including the 4-byte prefix.
        len: u64,
        /// The configured limit.
        max: usize,
    },
    /// The length prefix is too small to hold the header-length word.
    #[error("frame length {len} is too small to hold a header-length word")]
    FrameTooSmall {
        /// The announced length.
        len: i32,
    },
    /// The header length does not fit in the frame.
    #[error("decode error, bad header length: {header_len} (frame body is {frame_len} bytes)")]
    BadHeaderLength {
        /// Header length from the header-length word.
        header_len: usize,
        /// Bytes after the length prefix.
        frame_len: usize,
    },
    /// The serialize-type byte is neither JSON (0) nor ROCKETMQ (1).
    #[error("unknown header serialize type {0} (expected 0 JSON or 1 ROCKETMQ)")]
    UnknownSerializeType(u8),
    /// The JSON header did not parse.
    #[error("bad JSON header: {0}")]
    BadJsonHeader(String),
    /// The binary header is malformed.
    #[error("bad ROCKETMQ header: {0}")]
    BadBinaryHeader(&'static str),
}

/// If `buf` starts with a whole frame, its size in bytes (prefix included).
///
/// # Errors
/// [`DecodeError::FrameTooLarge`] / [`DecodeError::FrameTooSmall`] as soon as the 4-byte prefix
/// is readable and out of range.
pub fn check_frame(buf: &[u8], frame_size_max: usize) -> Result<Option<usize>, DecodeError> {
    let Some(prefix) = buf.get(..4) else {
        return Ok(None);
    };
    let len = i32::from_be_bytes(prefix.try_into().expect("4 bytes"));
    if len < 4 {
        return Err(DecodeError::FrameTooSmall { len });
    }
    let frame_size = u64::try_from(len).expect("positive") + 4;
    if frame_size > frame_size_max as u64 {
        return Err(DecodeError::FrameTooLarge {
            len: frame_size,
            max: frame_size_max,
        });
    }
    let frame_size = usize::try_from(frame_size).expect("below the limit");
    Ok((buf.len() >= frame_size).then_some(frame_size))
}

/// Decodes one whole frame, prefix included (as delimited by [`check_frame`]).
///
/// # Errors
/// [`DecodeError`] when the header is malformed.
pub fn decode_frame(frame: &[u8]) -> Result<RemotingCommand, DecodeError> {
    let Some(word) = frame.get(4..8) else {
        let len = i32::try_from(frame.len()).unwrap_or(i32::MAX);
        return Err(DecodeError::FrameTooSmall { len });
    };
    let word = u32::from_be_bytes(word.try_into().expect("4 bytes"));
    let serialize_byte = u8::try_from(word >> 24).expect("top byte");
    let header_len = usize::try_from(word & 0x00FF_FFFF).expect("24 bits fit");
    let after_prefix = frame.len() - 4;
    if header_len > after_prefix - 4 {
        return Err(DecodeError::BadHeaderLength {
            header_len,
            frame_len: after_prefix,
        });
    }
    let header = &frame[8..8 + header_len];
    let mut command = match SerializeType::from_code(serialize_byte) {
        Some(SerializeType::Json) => serialize_json::decode_header(header)?,
        Some(SerializeType::RocketMq) => serialize_rocketmq::decode_header(header)?,
        None => return Err(DecodeError::UnknownSerializeType(serialize_byte)),
    };
    command.body = frame[8 + header_len..].to_vec();
    Ok(command)
}

/// Largest header a frame can carry: its length is 24 bits.
pub const HEADER_SIZE_MAX: usize = 0x00FF_FFFF;

/// Appends `command` as one frame to `out`, in its own serialization.
///
/// A command whose header would not fit the 24-bit length (a remark or field that echoes a
/// peer's text, grown by JSON escapes) or whose frame would not fit the 32-bit one goes as
/// a stand-in: the same code (SYSTEM_ERROR for a response), opaque and flags, no fields and
/// no body, and a remark that says why.
pub fn encode_frame(command: &RemotingCommand, out: &mut Vec<u8>) {
    if encode_frame_head(command, out) {
        for part in &command.body_parts {
            out.extend_from_slice(part);
        }
    }
}

/// Appends the frame of `command` to `out` but for its [`RemotingCommand::body_parts`],
/// which the caller sends right after, as they are (the frame's length counts them);
/// whether they go (`false`: a stand-in was written, see [`encode_frame`], and the parts
/// are not sent).
pub fn encode_frame_head(command: &RemotingCommand, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    if encode_frame_as_is(command, out) {
        return true;
    }
    out.truncate(start);
    let stand_in = oversized_stand_in(command);
    let encoded = encode_frame_as_is(&stand_in, out);
    assert!(encoded, "a stand-in frame is small");
    false
}

/// Appends `command` as one frame but for its body parts; `false` (and `out` partly
/// written) when its header or frame is over what the length fields hold.
fn encode_frame_as_is(command: &RemotingCommand, out: &mut Vec<u8>) -> bool {
    let start = out.len();
    out.extend_from_slice(&[0; 8]);
    match command.serialize_type {
        SerializeType::Json => serialize_json::encode_header(command, out),
        SerializeType::RocketMq => serialize_rocketmq::encode_header(command, out),
    }
    let header_len = out.len() - start - 8;
    let parts_len: usize = command.body_parts.iter().map(bytes::Bytes::len).sum();
    let Some(total) = (header_len <= HEADER_SIZE_MAX)
        .then(|| u32::try_from(header_len + 4 + command.body.len() + parts_len).ok())
        .flatten()
    else {
        return false;
    };
    out.extend_from_slice(&command.body);
    let word = (u32::from(command.serialize_type.code()) << 24)
        | u32::try_from(header_len).expect("header at most 24 bits long");
    out[start..start + 4].copy_from_slice(&total.to_be_bytes());
    out[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
    true
}

/// What goes in place of a command too big for a frame.
fn oversized_stand_in(command: &RemotingCommand) -> RemotingCommand {
    let code = if command.is_response() {
        super::ResponseCode::SYSTEM_ERROR.0
    } else {
        command.code
    };
    RemotingCommand {
        code,
        remark: Some(format!(
            "the command (code {}) does not fit a frame: its header is over {HEADER_SIZE_MAX} \
             bytes or the frame over 4 GiB",
            command.code
        )),
        ext_fields: None,
        body: Vec::new(),
        body_parts: Vec::new(),
        ..command.clone()
    }
}

/// The frame of `command` as a new buffer.
#[must_use]
pub fn encode_to_vec(command: &RemotingCommand) -> Vec<u8> {
    let mut out = Vec::new();
    encode_frame(command, &mut out);
    out
}

/// Bytes of buffer a [`FrameDecoder`] keeps once it has decoded everything it was given.
pub const DECODER_RETAINED: usize = 4096;

/// A streaming decoder: feed it bytes as they arrive, take whole commands out.
///
/// It buffers at most one frame (bounded by the frame limit) plus whatever extra bytes the last
/// read delivered.
#[derive(Debug)]
pub struct FrameDecoder {
    buf: Vec<u8>,
    start: usize,
    frame_size_max: usize,
}

impl FrameDecoder {
    /// A decoder that refuses frames above `frame_size_max` bytes.
    #[must_use]
    pub fn new(frame_size_max: usize) -> FrameDecoder {
        FrameDecoder {
            buf: Vec::new(),
            start: 0,
            frame_size_max,
        }
    }

    /// Appends bytes read from the peer.
    pub fn extend(&mut self, bytes: &[u8]) {
        self.compact();
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole command, `Ok(None)` when more bytes are needed.
    ///
    /// # Errors
    /// [`DecodeError`]; after one, the stream cannot be resynchronised and must be closed.
    pub fn next_command(&mut self) -> Result<Option<RemotingCommand>, DecodeError> {
        let pending = &self.buf[self.start..];
        let Some(size) = check_frame(pending, self.frame_size_max)? else {
            if pending.is_empty() {
                self.release();
            }
            return Ok(None);
        };
        let command = decode_frame(&pending[..size])?;
        self.start += size;
        Ok(Some(command))
    }

    /// Bytes buffered but not yet decoded.
    #[must_use]
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// How many more bytes the current partial frame needs, when its prefix is known; lets a
    /// reader size its next read without over-allocating.
    #[must_use]
    pub fn missing(&self) -> Option<usize> {
        let pending = &self.buf[self.start..];
        let prefix = pending.get(..4)?;
        let len = i32::from_be_bytes(prefix.try_into().expect("4 bytes"));
        let size = usize::try_from(len).ok()?.checked_add(4)?;
        size.checked_sub(pending.len())
    }

    /// Everything read was decoded: the buffer goes back to empty, and its memory too when
    /// it grew past [`DECODER_RETAINED`] for a large frame, so that a connection that once
    /// sent a 4 MiB message and then idles holds none of it.
    fn release(&mut self) {
        self.start = 0;
        if self.buf.capacity() > DECODER_RETAINED {
            self.buf = Vec::new();
        } else {
            self.buf.clear();
        }
    }

    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::{RemotingCommand, RequestCode};

    fn sample(serialize_type: SerializeType) -> RemotingCommand {
        let mut command = RemotingCommand::request(RequestCode::GET_ROUTEINFO_BY_TOPIC);
        command.serialize_type = serialize_type;
        command.opaque = 9;
        command.ext_fields = Some([("topic", "T")].into_iter().collect());
        command.body = b"body".to_vec();
        command
    }

    #[test]
    fn body_parts_are_framed_as_body_bytes() {
        for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
            let whole = sample(serialize_type);
            let mut split = whole.clone();
            split.body = b"bo".to_vec();
            split.body_parts = vec![
                bytes::Bytes::from_static(b"d"),
                bytes::Bytes::new(),
                bytes::Bytes::from_static(b"y"),
            ];
            // The head counts the parts in the frame's length and leaves them out.
            let mut head = Vec::new();
            assert!(encode_frame_head(&split, &mut head));
            let whole_frame = encode_to_vec(&whole);
            assert_eq!(head.len() + 2, whole_frame.len());
            assert_eq!(&head[..], &whole_frame[..head.len()]);
            assert_eq!(encode_to_vec(&split), whole_frame);
            assert_eq!(decode_frame(&whole_frame).unwrap(), whole);
        }
    }

    #[test]
    fn decode_truncated_frame_is_incomplete() {
        for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
            let frame = encode_to_vec(&sample(serialize_type));
            for cut in 0..frame.len() {
                assert_eq!(
                    check_frame(&frame[..cut], 1 << 24),
                    Ok(None),
                    "cut at {cut}"
                );
            }
            assert_eq!(check_frame(&frame, 1 << 24), Ok(Some(frame.len())));
            assert_eq!(decode_frame(&frame).unwrap(), sample(serialize_type));
        }
    }

    #[test]
    fn decoder_splits_many_frames_in_one_read() {
        let mut bytes = Vec::new();
        for opaque in 0..3 {
            let mut command = sample(SerializeType::Json);
            command.opaque = opaque;
            encode_frame(&command, &mut bytes);
        }
        let mut decoder = FrameDecoder::new(1 << 24);
        decoder.extend(&bytes);
        for opaque in 0..3 {
            assert_eq!(decoder.next_command().unwrap().unwrap().opaque, opaque);
        }
        assert_eq!(decoder.next_command(), Ok(None));
        assert_eq!(decoder.buffered(), 0);
    }

    #[test]
    fn check_oversized_prefix_is_error_before_buffering() {
        let prefix = (1i32 << 24).to_be_bytes();
        assert_eq!(
            check_frame(&prefix, 1 << 24),
            Err(DecodeError::FrameTooLarge {
                len: (1 << 24) + 4,
                max: 1 << 24
            })
        );
        assert_eq!(
            check_frame(&2i32.to_be_bytes(), 1 << 24),
            Err(DecodeError::FrameTooSmall { len: 2 })
        );
    }

    #[test]
    fn decode_header_longer_than_frame_is_error() {
        let mut frame = Vec::new();
        frame.extend_from_slice(&6i32.to_be_bytes());
        frame.extend_from_slice(&100u32.to_be_bytes());
        frame.extend_from_slice(b"{}");
        assert!(matches!(
            decode_frame(&frame),
            Err(DecodeError::BadHeaderLength { .. })
        ));
    }

    #[test]
    fn encode_header_over_24_bits_sends_a_stand_in() {
        let mut response = sample(SerializeType::Json);
        response.flag = crate::remoting::FLAG_RESPONSE;
        // Each control character is six bytes once JSON-escaped.
        response.remark = Some("\u{1}".repeat(3 << 20));
        let frame = encode_to_vec(&response);
        let decoded = decode_frame(&frame).unwrap();
        assert_eq!(decoded.code, 1, "SYSTEM_ERROR");
        assert_eq!(decoded.opaque, response.opaque);
        assert!(decoded.is_response());
        assert!(decoded.body.is_empty());
        assert!(decoded.remark.unwrap().contains("does not fit a frame"));
        let mut binary = sample(SerializeType::RocketMq);
        binary.ext_fields = Some([("k", "v".repeat(HEADER_SIZE_MAX))].into_iter().collect());
        let decoded = decode_frame(&encode_to_vec(&binary)).unwrap();
        assert_eq!(decoded.code, binary.code, "a request keeps its code");
        assert_eq!(decoded.ext_fields, None);
    }

    #[test]
    fn decode_frame_shorter_than_its_words_is_error() {
        assert_eq!(
            decode_frame(&[0, 0, 0, 4, 0]),
            Err(DecodeError::FrameTooSmall { len: 5 })
        );
    }

    #[test]
    fn decode_unknown_serialize_type_is_error() {
        let mut frame = Vec::new();
        frame.extend_from_slice(&6i32.to_be_bytes());
        frame.extend_from_slice(&(0x0200_0002u32).to_be_bytes());
        frame.extend_from_slice(b"{}");
        assert_eq!(
            decode_frame(&frame),
            Err(DecodeError::UnknownSerializeType(2))
        );
    }
}
