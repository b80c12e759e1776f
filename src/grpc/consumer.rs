//! ReceiveMessage, AckMessage, ChangeInvisibleDuration and ForwardMessageToDeadLetterQueue
//! (Java `ReceiveMessageActivity`, `AckMessageActivity`, `ChangeInvisibleDurationActivity`,
//! `ForwardMessageToDLQActivity`).
//!
//! These ride on the broker's POP requests (POP_MESSAGE, ACK_MESSAGE,
//! CHANGE_MESSAGE_INVISIBLETIME); until the broker serves them, each answers UNSUPPORTED in
//! its status (a receive: one status frame), so a client learns at once rather than
//! waiting on a stream.

use super::proto::{
    receive_message_response, AckMessageRequest, AckMessageResponse,
    ChangeInvisibleDurationRequest, ChangeInvisibleDurationResponse, Code,
    ForwardMessageToDeadLetterQueueRequest, ForwardMessageToDeadLetterQueueResponse,
    ReceiveMessageRequest, ReceiveMessageResponse,
};
use super::{status, Caller, Inner};
use futures::Stream;
use std::pin::Pin;

/// The frames of a ReceiveMessage call.
pub(super) type ReceiveStream =
    Pin<Box<dyn Stream<Item = Result<ReceiveMessageResponse, tonic::Status>> + Send>>;

const NOT_YET: &str = "POP consumption is not served by this broker yet";

/// ReceiveMessage.
pub(super) fn receive_message(
    _inner: &Inner,
    _caller: Caller,
    _request: ReceiveMessageRequest,
) -> ReceiveStream {
    let frame = ReceiveMessageResponse {
        content: Some(receive_message_response::Content::Status(status(
            Code::Unsupported,
            NOT_YET,
        ))),
    };
    Box::pin(futures::stream::iter([Ok(frame)]))
}

/// AckMessage.
pub(super) async fn ack_message(
    _inner: &Inner,
    _caller: &Caller,
    _request: &AckMessageRequest,
) -> AckMessageResponse {
    AckMessageResponse {
        status: Some(status(Code::Unsupported, NOT_YET)),
        entries: Vec::new(),
    }
}

/// ChangeInvisibleDuration.
pub(super) async fn change_invisible(
    _inner: &Inner,
    _caller: &Caller,
    _request: &ChangeInvisibleDurationRequest,
) -> ChangeInvisibleDurationResponse {
    ChangeInvisibleDurationResponse {
        status: Some(status(Code::Unsupported, NOT_YET)),
        receipt_handle: String::new(),
    }
}

/// ForwardMessageToDeadLetterQueue.
pub(super) async fn forward_to_dlq(
    _inner: &Inner,
    _caller: &Caller,
    _request: &ForwardMessageToDeadLetterQueueRequest,
) -> ForwardMessageToDeadLetterQueueResponse {
    ForwardMessageToDeadLetterQueueResponse {
        status: Some(status(Code::Unsupported, NOT_YET)),
    }
}
