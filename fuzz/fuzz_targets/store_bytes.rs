//! Fuzz target: bytes read from disk or from a message body — CommitLog records, properties,
//! batch bodies, pulled message lists, message ids. Whatever the bytes, each decoder returns
//! a value or an error, never panics, and a record it accepts is as long as it says.
//!
//! The first input byte picks the decoder; the rest is its input.

#![no_main]

use ferromq::store::message::{
    decode_offset_msg_id, decode_record, parse_properties, record_size, Record,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    match pick % 6 {
        0 | 1 => {
            if let Ok(Record::Message { record, size }) = decode_record(bytes, pick % 2 == 0) {
                assert_eq!(record_size(&record), size, "a record is as long as it says");
                assert!(size <= bytes.len());
                let _ = parse_properties(record.properties);
            }
        }
        2 => {
            let _ = parse_properties(bytes);
        }
        3 => {
            let _ = ferromq::broker::batch::decode_batch(bytes);
        }
        4 => {
            let _ = ferromq::client::message::decode_messages(bytes);
        }
        _ => {
            if let Ok(id) = std::str::from_utf8(bytes) {
                let _ = decode_offset_msg_id(id);
            }
        }
    }
});
