//! Errors of the client library.

use crate::remoting::ClientError as RemotingError;

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
#[doc(alias = "MQClientException")]
#[doc(alias = "MQBrokerException")]
pub enum ClientError {
    /// The name servers know no route for the topic (or it has no usable queue).
    #[error("no route info of topic {topic}")]
    NoRoute {
        /// The topic.
        topic: String,
    },
    /// Every name server failed; the text says how the last one did.
    #[error("all name servers failed: {0}")]
    NameServer(String),
    /// A broker answered with a response code other than SUCCESS.
    #[error("broker answered code {code}: {remark}")]
    Broker {
        /// The response code.
        code: i32,
        /// The broker's remark, empty if it sent none.
        remark: String,
    },
    /// The connection failed, closed or timed out.
    #[error(transparent)]
    Remoting(#[from] RemotingError),
    /// An address that does not resolve.
    #[error("bad address {0}")]
    BadAddress(String),
    /// A response whose header or body cannot be decoded.
    #[error("bad response: {0}")]
    BadResponse(String),
    /// The message breaks a rule (empty topic or body, too large, ...); nothing was sent.
    #[error("invalid message: {0}")]
    InvalidMessage(String),
    /// The producer, consumer or client instance is not running.
    #[error("the client is shut down or not started")]
    Shutdown,
}

/// Result of a client operation.
pub type Result<T> = std::result::Result<T, ClientError>;
