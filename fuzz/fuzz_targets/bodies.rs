//! Fuzz target: the bodies and strings a peer controls, decoded as the broker and the client
//! decode them: batch bodies, registration bodies (JSON, legacy and compressed), heartbeats
//! and routes through the lenient fastjson reader, property strings, stored records, tag
//! expressions and topic names. None may panic; what decodes must re-encode to the same.

#![no_main]

use ferromq_protocol::batch::decode_batch;
use ferromq_protocol::fastjson::parse_lenient;
use ferromq_protocol::message::{decode_record, parse_properties, properties_to_string};
use ferromq_protocol::names::topic_name_problem;
use ferromq_protocol::remoting::body::{RegisterBrokerBody, TopicRouteData};
use ferromq_protocol::remoting::heartbeat::{HeartbeatData, SubscriptionData};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, body)) = data.split_first() else {
        return;
    };
    match selector % 6 {
        0 => {
            let _ = decode_batch(body);
        }
        1 => {
            for compressed in [false, true] {
                let _ = RegisterBrokerBody::decode(body, compressed, 413);
                let _ = RegisterBrokerBody::decode(body, compressed, 0);
            }
        }
        2 => {
            if let Ok(value) = parse_lenient(body) {
                let _ = serde_json::from_value::<HeartbeatData>(value.clone());
                let _ = serde_json::from_value::<TopicRouteData>(value);
            }
        }
        3 => {
            let pairs = parse_properties(body);
            let text = properties_to_string(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            assert_eq!(parse_properties(text.as_bytes()), pairs);
        }
        4 => {
            let _ = decode_record(body, true);
            let _ = decode_record(body, false);
        }
        _ => {
            let text = String::from_utf8_lossy(body);
            let data = SubscriptionData::from_expression("T", &text);
            assert_eq!(data.tags_set.len(), data.code_set.len());
            let _ = topic_name_problem(&text);
        }
    }
});
