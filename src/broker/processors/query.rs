//! Message lookups (`QueryMessageProcessor`, part of `AdminBrokerProcessor`):
//! VIEW_MESSAGE_BY_ID by offset id and QUERY_MESSAGE by key through the IndexFile.

use super::Context;
use crate::broker::reply::{error, with_body, Response};
use crate::remoting::headers::{
    QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader,
};
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use crate::store::reader::StoreReader;
use crate::store::shared::StoreShared;

/// VIEW_MESSAGE_BY_ID and QUERY_MESSAGE.
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    if request.request_code() == RequestCode::VIEW_MESSAGE_BY_ID {
        view_message(&ctx.reader, request).await
    } else {
        query_message(&ctx.reader, ctx.store.shared(), request).await
    }
}

/// VIEW_MESSAGE_BY_ID (33): the record at a CommitLog offset (from an offset message id).
pub async fn view_message(reader: &StoreReader, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<ViewMessageRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    match reader.record_at(header.offset).await {
        Ok(Some(bytes)) => with_body(request, bytes),
        Ok(None) => {
            let remark = format!("can not find message by the offset, {}", header.offset);
            error(request, ResponseCode::SYSTEM_ERROR, remark)
        }
        Err(e) => error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}

/// QUERY_MESSAGE (12): records of a topic by key within a time range, newest first.
pub async fn query_message(
    reader: &StoreReader,
    shared: &StoreShared,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<QueryMessageRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let max = usize::try_from(header.max_num)
        .unwrap_or(0)
        .clamp(1, shared.config.default_query_max_num.max(1) * 64);
    let found = match reader
        .query_by_key(
            &header.topic,
            &header.key,
            max,
            header.begin_timestamp,
            header.end_timestamp,
        )
        .await
    {
        Ok(found) => found,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    // The index's progress goes with "not found" too, as in Java.
    let mut response = if found.is_empty() {
        RemotingCommand::response_to(
            request,
            ResponseCode::QUERY_NOT_FOUND,
            Some("can not find message, maybe time range not correct".to_owned()),
        )
    } else {
        RemotingCommand::success_to(request)
    };
    response.set_header(&QueryMessageResponseHeader {
        index_last_update_timestamp: shared.synced_store_timestamp(),
        index_last_update_phyoffset: i64::try_from(shared.committed_end()).unwrap_or(i64::MAX),
    });
    response.body = found.concat();
    Some(response)
}
