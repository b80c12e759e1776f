//! Fuzz target: typed headers read from ext fields a peer chose, both the lenient reading
//! (`decode_header`, Java's) and the strict fast-codes one (`decode_header_strict`, the
//! RocketMQ serialization's), for the headers of every request a broker serves often. None
//! may panic; a header that reads must write ext fields that read back to it.

#![no_main]

use ferromq_protocol::remoting::headers::*;
use ferromq_protocol::remoting::{CommandHeader, ExtFields, RemotingCommand, RequestCode};
use libfuzzer_sys::fuzz_target;

/// Reads `H` from `command` and, if it reads, checks that it round-trips.
fn check<H: CommandHeader + PartialEq + std::fmt::Debug>(command: &RemotingCommand) {
    if let Ok(header) = command.decode_header::<H>() {
        let again = RemotingCommand::request_with_header(RequestCode(0), &header);
        assert_eq!(again.decode_header::<H>().ok(), Some(header));
    }
}

fuzz_target!(|data: &[u8]| {
    // Key/value pairs split on 0xff and 0xfe; text as the lossy UTF-8 a frame would carry.
    let text = String::from_utf8_lossy(data);
    let mut fields = ExtFields::new();
    for pair in text.split('\u{fffd}') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        fields.insert(key, value);
    }
    let mut command = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2);
    command.ext_fields = Some(fields);
    check::<SendMessageRequestHeaderV2>(&command);
    check::<PullMessageRequestHeader>(&command);
    check::<GetRouteInfoRequestHeader>(&command);
    check::<CreateTopicRequestHeader>(&command);
    check::<CreateAccessConfigRequestHeader>(&command);
    check::<GetMaxOffsetRequestHeader>(&command);
    check::<SearchOffsetRequestHeader>(&command);
    check::<EndTransactionRequestHeader>(&command);
    check::<QueryConsumerOffsetRequestHeader>(&command);
    check::<UpdateConsumerOffsetRequestHeader>(&command);
    let _ = command.decode_header_strict::<SendMessageRequestHeaderV2>();
    let _ = command.decode_header_strict::<PullMessageRequestHeader>();
});
