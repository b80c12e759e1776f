//! Fuzz target: frame splitting, header decoding (both serializations) and typed headers.
//!
//! The first input byte picks a chunk size; the rest is fed to the streaming decoder in chunks
//! of that size. Every command that decodes is decoded again into a few typed headers and
//! re-encoded; a re-encoded frame must decode to the same command.

#![no_main]

use ferromq::remoting::codec::{decode_frame, encode_to_vec, FrameDecoder};
use ferromq::remoting::headers::{
    PullMessageRequestHeader, RegisterBrokerRequestHeader, SendMessageRequestHeaderV2,
};
use ferromq::remoting::{ExtFields, RemotingCommand};
use libfuzzer_sys::fuzz_target;

const FRAME_SIZE_MAX: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let Some((&chunk, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(chunk).max(1);
    let mut decoder = FrameDecoder::new(FRAME_SIZE_MAX);
    for piece in stream.chunks(chunk) {
        decoder.extend(piece);
        assert!(decoder.buffered() < FRAME_SIZE_MAX + chunk);
        loop {
            match decoder.next_command() {
                Ok(Some(command)) => check(&command),
                Ok(None) => break,
                Err(_) => return,
            }
        }
    }
});

fn check(command: &RemotingCommand) {
    let _ = command.decode_header::<SendMessageRequestHeaderV2>();
    let _ = command.decode_header::<PullMessageRequestHeader>();
    let _ = command.decode_header::<RegisterBrokerRequestHeader>();
    let frame = encode_to_vec(command);
    let mut again = decode_frame(&frame).expect("a re-encoded frame decodes");
    let mut original = command.clone();
    // Binary headers read empty strings and empty maps as null; normalise before comparing.
    for c in [&mut again, &mut original] {
        if c.remark.as_deref() == Some("") {
            c.remark = None;
        }
        let fields: ExtFields = c
            .ext_fields
            .take()
            .unwrap_or_default()
            .iter()
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .collect();
        c.ext_fields = (!fields.is_empty()).then_some(fields);
    }
    assert_eq!(again.code as i16, original.code as i16);
    assert_eq!(again.opaque, original.opaque);
    assert_eq!(again.ext_fields, original.ext_fields);
    assert_eq!(again.body, original.body);
}
