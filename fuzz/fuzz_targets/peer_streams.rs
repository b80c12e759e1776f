//! Fuzz target: the long-lived inputs a peer or operator controls — the HA stream a master
//! sends a slave (CommitLog bytes, cut into frames anywhere) and the plain ACL files (YAML
//! written by hand or by the ACL admin requests).
//!
//! The first input byte picks which. For the HA stream, the record cursor takes each frame
//! or refuses it and stays as it was: a refused frame is refused again the same way, and an
//! accepted one moves the end on by its length. For ACL text, whatever the YAML, loading
//! gives rules or an error, and the rules decide a signed request without panicking.

#![no_main]

use ferromq::broker::acl::PlainAcl;
use ferromq::broker::ha_slave::RecordCursor;
use ferromq::remoting::{RemotingCommand, RequestCode};
use ferromq::store::dispatch::DelayLevels;
use libfuzzer_sys::fuzz_target;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Small segments, so that blank records at a segment's end come up.
const SEGMENT: u64 = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, bytes)) = data.split_first() else {
        return;
    };
    if pick % 2 == 0 {
        ha_stream(bytes);
    } else {
        acl_text(bytes);
    }
});

/// Frames of `bytes`: each starts with a byte giving its length (1..=256).
fn ha_stream(mut bytes: &[u8]) {
    let mut cursor = RecordCursor::new(SEGMENT, 2048, DelayLevels::default());
    let mut end = 0u64;
    while let Some((&len, rest)) = bytes.split_first() {
        let take = (usize::from(len) + 1).min(rest.len());
        let (frame, after) = rest.split_at(take);
        bytes = after;
        if frame.is_empty() {
            break;
        }
        match cursor.feed(end, frame) {
            Ok(_) => end += frame.len() as u64,
            Err(first) => {
                let again = cursor.feed(end, frame);
                assert_eq!(
                    again.err(),
                    Some(first),
                    "a refusal leaves the cursor as it was"
                );
                break;
            }
        }
    }
}

fn acl_text(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let mut acl = PlainAcl::default();
    if acl
        .add_file(std::path::Path::new("fuzz.yml"), &text)
        .is_err()
    {
        return;
    }
    let mut request = RemotingCommand::request(RequestCode::SEND_MESSAGE);
    let fields = [
        ("AccessKey", "RocketMQ"),
        ("Signature", "c2lnbmF0dXJl"),
        ("a", "topicA"),
        ("b", "groupA"),
    ];
    request.ext_fields = Some(fields.into_iter().collect());
    let peers = [
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V4(Ipv4Addr::new(10, 10, 103, 7)),
        IpAddr::V6(Ipv6Addr::new(2, 0, 0, 0, 0, 0xac5, 0x78, 0x100)),
    ];
    for peer in peers {
        let _ = acl.check(&request, peer);
    }
}
