//! Every maximum in one place, with Java's defaults.
//!
//! Each limit here is the default of a configuration key; the key is named in the doc line so
//! an operator can find it. Compile-time assertions keep the limits consistent with each other
//! and with the wire format.

use std::time::Duration;

/// Largest frame, 4-byte length prefix included (`com.rocketmq.remoting.frameMaxLength` in
/// Java; config key `frameMaxLength`).
pub const FRAME_SIZE_MAX: usize = 16 * 1024 * 1024;

/// A connection with no read for this long is closed (`serverChannelMaxIdleTimeSeconds`).
pub const CHANNEL_IDLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Name server: a broker silent this long is dropped (`brokerExpiredTimeoutMillis`; Java's
/// fixed `BROKER_CHANNEL_EXPIRED_TIME`).
pub const BROKER_EXPIRED_TIMEOUT: Duration = Duration::from_secs(120);

/// Name server: how often brokers are checked for expiry (`scanNotActiveBrokerInterval`).
pub const SCAN_NOT_ACTIVE_BROKER_INTERVAL: Duration = Duration::from_secs(10);

/// Most connections one server accepts at once (`serverMaxConnections`); beyond it new
/// connections are closed at accept.
pub const CONNECTIONS_MAX: usize = 65_536;

/// Largest message body a producer may send (`maxMessageSize`, 4 MiB; for a compressed body,
/// its compressed size).
pub const MESSAGE_SIZE_MAX: usize = 4 * 1024 * 1024;

/// Largest body a consumer inflates from a compressed one: 16 × `maxMessageSize`. A stored
/// zlib stream that inflates past it (a zlib bomb: 4 MiB of zeros compress to 4 KiB) is
/// refused, instead of every consumer of the queue allocating without bound.
pub const INFLATED_BODY_MAX: usize = 16 * MESSAGE_SIZE_MAX;

/// Bytes read from a socket per read call.
pub const READ_CHUNK_SIZE: usize = 64 * 1024;

/// Most parentheses and prefix operators (`NOT`, `-`, `+`) an SQL92 selector may have, and
/// most binary operators (`AND`, `OR`, comparisons, `IS`, `IN`, `BETWEEN`, the string tests).
/// Compiling and evaluating a selector recurse once per level of either, so these bound the
/// stack a client's expression can take on a shard; Java has no such limit (its thread's
/// stack is one: a `StackOverflowError` there refuses the expression as a parse error, as
/// going over these does).
pub const SQL92_NESTING_MAX: usize = 64;
/// See [`SQL92_NESTING_MAX`].
pub const SQL92_OPERATORS_MAX: usize = 256;

// The frame length travels as an i32 and the header length in 24 bits.
const _: () = assert!(FRAME_SIZE_MAX <= i32::MAX as usize);
const _: () = assert!(READ_CHUNK_SIZE <= FRAME_SIZE_MAX);
const _: () = assert!(MESSAGE_SIZE_MAX < FRAME_SIZE_MAX);
const _: () =
    assert!(SCAN_NOT_ACTIVE_BROKER_INTERVAL.as_millis() < BROKER_EXPIRED_TIMEOUT.as_millis());
