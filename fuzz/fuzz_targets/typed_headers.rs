//! Fuzz target: typed headers read from ext fields a peer chose, both the lenient reading
//! (`decode_header`, Java's) and the strict fast-codes one (`decode_header_strict`, the
//! RocketMQ serialization's), for every typed header the broker, the name server and the
//! client read (`for_each_header!`). None may panic; a header that reads must write ext
//! fields that read back to it.

#![no_main]

use ferromq_protocol::remoting::headers::{PullMessageRequestHeader, SendMessageRequestHeaderV2};
use ferromq_protocol::remoting::{CommandHeader, ExtFields, RemotingCommand, RequestCode};
use libfuzzer_sys::fuzz_target;

/// Reads `H` from `command` and, if it reads, checks that it round-trips.
fn check<H: CommandHeader + PartialEq + std::fmt::Debug>(command: &RemotingCommand) {
    if let Ok(header) = command.decode_header::<H>() {
        let again = RemotingCommand::request_with_header(RequestCode(0), &header);
        assert_eq!(again.decode_header::<H>().ok(), Some(header));
    }
}

/// Checks every typed header on one command.
macro_rules! check_each {
    ($($header:ty,)*) => {
        fn check_every_header(command: &RemotingCommand) {
            $(check::<$header>(command);)*
        }
    };
}

ferromq_protocol::for_each_header!(check_each);

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
    check_every_header(&command);
    let _ = command.decode_header_strict::<SendMessageRequestHeaderV2>();
    let _ = command.decode_header_strict::<PullMessageRequestHeader>();
});
