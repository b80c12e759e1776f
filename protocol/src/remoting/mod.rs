//! The RocketMQ remoting protocol: frames, headers, codes and bodies.
//!
//! Bytes and types only, no connections: the broker's serving half and the client's
//! requesting half both build on this. Byte layouts are documented in the module that
//! encodes them: [`codec`] (frames), [`serialize_json`] and [`serialize_rocketmq`] (headers),
//! [`body`] (JSON bodies). Facts come from `reference/remoting.md`.

pub mod body;
pub mod codec;
mod codes;
pub mod command;
pub mod header;
pub mod headers;
pub mod heartbeat;
pub mod request_code;
pub mod response_code;
pub mod serialize_json;
pub mod serialize_rocketmq;
pub mod version;

pub use codec::{DecodeError, FrameDecoder};
pub use command::{
    ExtFields, LanguageCode, RemotingCommand, SerializeType, CURRENT_VERSION, FLAG_ONEWAY,
    FLAG_RESPONSE,
};
pub use header::{CommandHeader, HeaderError};
pub use request_code::RequestCode;
pub use response_code::ResponseCode;
