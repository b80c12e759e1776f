//! ferromq-protocol: what a RocketMQ broker and its clients agree on, as bytes and types.
//!
//! No runtime and no I/O: every function here turns bytes into values or values into bytes,
//! so the broker (glommio shards), the client library (tokio), the admin CLI and the bench
//! share one definition of each layout. Module map:
//! - [`remoting`]: frames, both header serializations, request and response codes, typed
//!   headers, JSON bodies, heartbeats.
//! - [`message`]: the stored message record (CommitLog layout), message ids, property strings.
//! - [`acl`]: plain ACL signatures (the ext fields a signed request carries, HMAC-SHA1).
//! - [`batch`]: the body of a batch send.
//! - [`names`]: system topics, retry and dead-letter prefixes, permissions, name rules.
//! - [`filter`]: tag subscriptions as Java's `FilterAPI` builds and matches them; SQL92
//!   selectors compiled and evaluated as Java's filter module does.
//! - [`topic`]: `TopicConfig` and `DataVersion`, shared by the broker's files and the wire.
//! - [`fastjson`]: reading the JSON Java's fastjson writes (numeric keys, lenient syntax).
//! - [`calendar`], [`bytes`]: dates without a time-zone library; a checked big-endian reader
//!   and RocketMQ's CRC-32.
//! - [`limits`]: every maximum, with Java's defaults.
//!
//! ```
//! use ferromq_protocol::limits::FRAME_SIZE_MAX;
//! use ferromq_protocol::remoting::codec::encode_to_vec;
//! use ferromq_protocol::remoting::headers::GetRouteInfoRequestHeader;
//! use ferromq_protocol::remoting::{FrameDecoder, RemotingCommand, RequestCode};
//!
//! let header = GetRouteInfoRequestHeader {
//!     topic: "TopicTest".to_owned(),
//!     accept_standard_json_only: None,
//! };
//! let code = RequestCode::GET_ROUTEINFO_BY_TOPIC;
//! let request = RemotingCommand::request_with_header(code, &header);
//! let frame = encode_to_vec(&request);
//!
//! // Bytes arrive in pieces; whole commands come out.
//! let mut decoder = FrameDecoder::new(FRAME_SIZE_MAX);
//! decoder.extend(&frame[..7]);
//! assert!(decoder.next_command().unwrap().is_none());
//! decoder.extend(&frame[7..]);
//! let decoded = decoder.next_command().unwrap().unwrap();
//! assert_eq!(decoded.request_code(), RequestCode::GET_ROUTEINFO_BY_TOPIC);
//! let back: GetRouteInfoRequestHeader = decoded.decode_header().unwrap();
//! assert_eq!(back.topic, "TopicTest");
//! ```

pub mod acl;
pub mod batch;
pub mod bytes;
pub mod calendar;
pub mod fastjson;
pub mod filter;
pub mod limits;
pub mod message;
pub mod names;
pub mod remoting;
pub mod topic;
