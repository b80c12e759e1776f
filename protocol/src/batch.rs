//! The body of SEND_BATCH_MESSAGE (320): the producer's `MessageBatch.encode()`, i.e. Java's
//! `MessageDecoder.encodeMessages`, read back as `MessageDecoder.decodeMessages` does.
//!
//! Layout, big-endian, one entry per message, entries back to back:
//!
//! | field | size | note |
//! | --- | --- | --- |
//! | totalSize | i32 | the entry's size; Java's decoder does not use it, nor do we |
//! | magic | i32 | 0 from the clients; ignored |
//! | bodyCRC | i32 | 0 from the clients; the store computes the real one |
//! | flag | i32 | the message's flag |
//! | bodyLen | i32 | then `bodyLen` bytes of body |
//! | propertiesLen | i16 | then `propertiesLen` bytes of properties (`k\u1v\u2…`) |
//!
//! Topic, queue, system flag, born time and reconsume times come from the request header and
//! apply to every message; the header's properties (plus the broker's `CLUSTER`) are appended
//! to each message's own, as Java's `MessageExtBatchEncoder` does.

use crate::bytes::{ByteReader, Truncated};

/// `MessageDecoder.PROPERTY_SEPARATOR`: ends each `name\u1value` pair.
const PROPERTY_SEPARATOR: u8 = 2;

/// One message of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchEntry {
    /// The message's flag.
    pub flag: i32,
    /// The body as sent.
    pub body: Vec<u8>,
    /// The message's own properties as sent.
    pub properties: Vec<u8>,
}

impl BatchEntry {
    /// Appends this message in the batch layout (the producer's side, Java's
    /// `MessageDecoder.encodeMessage`: magic and body CRC left 0).
    ///
    /// # Panics
    /// If the body exceeds `i32::MAX` bytes or the properties `i16::MAX`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let size = 4 + 4 + 4 + 4 + 4 + self.body.len() + 2 + self.properties.len();
        let size = i32::try_from(size).expect("a batch entry below 2 GiB");
        out.extend_from_slice(&size.to_be_bytes());
        out.extend_from_slice(&0_i32.to_be_bytes());
        out.extend_from_slice(&0_i32.to_be_bytes());
        out.extend_from_slice(&self.flag.to_be_bytes());
        let body_len = i32::try_from(self.body.len()).expect("checked with size");
        out.extend_from_slice(&body_len.to_be_bytes());
        out.extend_from_slice(&self.body);
        let properties_len = i16::try_from(self.properties.len()).expect("properties below 32 KiB");
        out.extend_from_slice(&properties_len.to_be_bytes());
        out.extend_from_slice(&self.properties);
    }
}

/// Why a batch body cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BatchDecodeError {
    /// The body has no message.
    #[error("the batch holds no message")]
    Empty,
    /// An entry ends past the end of the body.
    #[error("batch message {index} is truncated: needs {needed} bytes, the body has {available}")]
    Truncated {
        /// Index of the entry, from 0.
        index: usize,
        /// Bytes the entry needed.
        needed: usize,
        /// Bytes in the body.
        available: usize,
    },
    /// A length field is negative.
    #[error("batch message {index} has a negative {field} ({value})")]
    NegativeLength {
        /// Index of the entry, from 0.
        index: usize,
        /// `bodyLen` or `propertiesLen`.
        field: &'static str,
        /// The value read.
        value: i32,
    },
}

/// Reads every message of a batch body.
///
/// # Errors
/// [`BatchDecodeError`] when the body is empty or an entry does not fit.
pub fn decode_batch(body: &[u8]) -> Result<Vec<BatchEntry>, BatchDecodeError> {
    let mut reader = ByteReader::new(body, 0);
    let mut entries = Vec::new();
    while !reader.is_at_end() {
        let index = entries.len();
        let truncated = |t: Truncated| BatchDecodeError::Truncated {
            index,
            needed: t.needed,
            available: t.available,
        };
        let _total_size = reader.i32().map_err(truncated)?;
        let _magic = reader.i32().map_err(truncated)?;
        let _body_crc = reader.i32().map_err(truncated)?;
        let flag = reader.i32().map_err(truncated)?;
        let body_len = reader.i32().map_err(truncated)?;
        let body_len = usize::try_from(body_len).map_err(|_| BatchDecodeError::NegativeLength {
            index,
            field: "bodyLen",
            value: body_len,
        })?;
        let message_body = reader.take(body_len).map_err(truncated)?.to_vec();
        let properties_len = reader.i16().map_err(truncated)?;
        let properties_len =
            usize::try_from(properties_len).map_err(|_| BatchDecodeError::NegativeLength {
                index,
                field: "propertiesLen",
                value: i32::from(properties_len),
            })?;
        let properties = reader.take(properties_len).map_err(truncated)?.to_vec();
        entries.push(BatchEntry {
            flag,
            body: message_body,
            properties,
        });
    }
    if entries.is_empty() {
        return Err(BatchDecodeError::Empty);
    }
    Ok(entries)
}

/// A message's stored properties: its own, then the batch's (`MessageExtBatchEncoder`: a
/// separator goes between them when its own do not end with one).
#[must_use]
pub fn merge_properties(own: &[u8], batch: &[u8]) -> Vec<u8> {
    let mut merged = Vec::with_capacity(own.len() + 1 + batch.len());
    merged.extend_from_slice(own);
    let needs_separator =
        !own.is_empty() && !batch.is_empty() && own.last() != Some(&PROPERTY_SEPARATOR);
    if needs_separator {
        merged.push(PROPERTY_SEPARATOR);
    }
    merged.extend_from_slice(batch);
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One entry in the batch layout.
    fn encode(flag: i32, body: &[u8], properties: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        BatchEntry {
            flag,
            body: body.to_vec(),
            properties: properties.to_vec(),
        }
        .encode(&mut out);
        out
    }

    #[test]
    fn decodes_what_java_encodes() {
        let mut body = encode(
            0,
            b"Hello world 0",
            b"TAGS\x01TagA\x02KEYS\x01OrderID001\x02",
        );
        body.extend(encode(7, b"", b""));
        body.extend(encode(1, b"third", b"UNIQ_KEY\x01AB\x02"));
        let entries = decode_batch(&body).unwrap();
        assert_eq!(
            entries,
            vec![
                BatchEntry {
                    flag: 0,
                    body: b"Hello world 0".to_vec(),
                    properties: b"TAGS\x01TagA\x02KEYS\x01OrderID001\x02".to_vec(),
                },
                BatchEntry {
                    flag: 7,
                    body: Vec::new(),
                    properties: Vec::new(),
                },
                BatchEntry {
                    flag: 1,
                    body: b"third".to_vec(),
                    properties: b"UNIQ_KEY\x01AB\x02".to_vec(),
                },
            ]
        );
    }

    #[test]
    fn refuses_empty_truncated_and_negative() {
        assert_eq!(decode_batch(b""), Err(BatchDecodeError::Empty));
        let whole = encode(0, b"body", b"P\x01V\x02");
        for cut in 1..whole.len() {
            assert!(
                matches!(
                    decode_batch(&whole[..cut]),
                    Err(BatchDecodeError::Truncated { index: 0, .. })
                ),
                "cut at {cut}"
            );
        }
        let mut negative = whole.clone();
        negative[16..20].copy_from_slice(&(-1_i32).to_be_bytes());
        assert_eq!(
            decode_batch(&negative),
            Err(BatchDecodeError::NegativeLength {
                index: 0,
                field: "bodyLen",
                value: -1
            })
        );
        let mut second_cut = whole.clone();
        second_cut.extend_from_slice(&whole[..10]);
        assert!(matches!(
            decode_batch(&second_cut),
            Err(BatchDecodeError::Truncated { index: 1, .. })
        ));
    }

    #[test]
    fn merges_properties_as_java() {
        let batch = b"WAIT\x01true\x02CLUSTER\x01DefaultCluster\x02";
        assert_eq!(
            merge_properties(b"TAGS\x01A\x02", batch),
            b"TAGS\x01A\x02WAIT\x01true\x02CLUSTER\x01DefaultCluster\x02".to_vec()
        );
        assert_eq!(
            merge_properties(b"TAGS\x01A", batch),
            b"TAGS\x01A\x02WAIT\x01true\x02CLUSTER\x01DefaultCluster\x02".to_vec()
        );
        assert_eq!(merge_properties(b"", batch), batch.to_vec());
        assert_eq!(merge_properties(b"TAGS\x01A", b""), b"TAGS\x01A".to_vec());
    }
}
