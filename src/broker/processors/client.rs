//! HEART_BEAT, UNREGISTER_CLIENT, CHECK_CLIENT_CONFIG and GET_CONSUMER_LIST_BY_GROUP
//! (`ClientManageProcessor`, part of `ConsumerManageProcessor`): the clients of a broker and
//! their subscriptions.

use super::Context;
use crate::broker::reply::{error, Response};
use crate::broker::state::{
    invalid_topic_remark, ClientChannel, PERM_READ, PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX,
};
use crate::remoting::headers::{
    GetConsumerListByGroupRequestHeader, UnregisterClientRequestHeader,
};
use crate::remoting::heartbeat::HeartbeatData;
use crate::remoting::server::ConnectionInfo;
use crate::remoting::{HeaderError, RemotingCommand, RequestCode, ResponseCode};
use ferromq_protocol::filter::sql92::Selector;
use ferromq_protocol::filter::EXPRESSION_TYPE_SQL92;

/// HEART_BEAT, UNREGISTER_CLIENT and GET_CONSUMER_LIST_BY_GROUP.
pub(super) async fn process(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    match request.request_code() {
        RequestCode::HEART_BEAT => heartbeat(ctx, connection, request).await,
        RequestCode::UNREGISTER_CLIENT => unregister_client(ctx, connection, request),
        RequestCode::CHECK_CLIENT_CONFIG => check_client_config(ctx, request),
        _ => consumer_list(ctx, request),
    }
}

/// CHECK_CLIENT_CONFIG (46), which a consumer sends at start for each subscription that
/// filters by other than tags (`checkClientConfig`): SUCCESS for a tag subscription (or a
/// body without one); without `enablePropertyFilter`, SYSTEM_ERROR; an expression that does
/// not compile, SUBSCRIPTION_PARSE_FAILED with the parse error.
fn check_client_config(ctx: &Context, request: &RemotingCommand) -> Response {
    let body = crate::config::fastjson::parse_lenient(&request.body).unwrap_or_default();
    let serde_json::Value::Object(subscription) = &body["subscriptionData"] else {
        return Some(RemotingCommand::success_to(request));
    };
    let field = |name: &str| subscription.get(name).and_then(serde_json::Value::as_str);
    let expression_type = field("expressionType").unwrap_or("TAG");
    if expression_type.is_empty() || expression_type == "TAG" {
        return Some(RemotingCommand::success_to(request));
    }
    if !ctx.state.runtime().enable_property_filter {
        let remark =
            format!("The broker does not support consumer to filter message by {expression_type}");
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let compiled = if expression_type == EXPRESSION_TYPE_SQL92 {
        Selector::compile(field("subString").unwrap_or_default()).map_err(|e| e.to_string())
    } else {
        Err(format!(
            "The filter type {expression_type} is not supported"
        ))
    };
    match compiled {
        Ok(_) => Some(RemotingCommand::success_to(request)),
        Err(remark) => {
            tracing::warn!(
                group = body["group"].as_str().unwrap_or_default(),
                client = body["clientId"].as_str().unwrap_or_default(),
                remark,
                "a client's filter expression does not compile"
            );
            error(request, ResponseCode::SUBSCRIPTION_PARSE_FAILED, remark)
        }
    }
}

async fn heartbeat(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    // An object only: serde would read a struct from an array too, where Java's fastjson
    // gives null (and its NullPointerException).
    let data: HeartbeatData =
        match crate::config::fastjson::parse_lenient(&request.body).and_then(|v| match v {
            serde_json::Value::Object(_) => serde_json::from_value(v).map_err(|e| e.to_string()),
            _ => Err("not a JSON object".to_owned()),
        }) {
            Ok(data) => data,
            Err(e) => {
                let remark = format!("heartbeat body is not valid: {e}");
                return error(request, ResponseCode::SYSTEM_ERROR, remark);
            }
        };
    for consumer in &data.consumer_data_set {
        let retry = format!("{RETRY_GROUP_TOPIC_PREFIX}{}", consumer.group_name);
        if invalid_topic_remark(&retry).is_some() {
            // No retry topic for a group no Java client may name (see send-back).
            tracing::debug!(group = %consumer.group_name, "no retry topic for the group");
            continue;
        }
        if let Some(group) = ctx.state.group_or_create(&consumer.group_name).await {
            ctx.state
                .ensure_topic(
                    &retry,
                    group.retry_queue_nums.max(1),
                    PERM_READ | PERM_WRITE,
                )
                .await;
        }
    }
    let client = ClientChannel {
        connection: connection.id,
        addr: connection.peer,
        language: request.language.name().unwrap_or("OTHER").to_owned(),
        version: request.version,
    };
    let changed = ctx.state.heartbeat(&client, &data);
    for group in changed {
        tracing::info!(
            group,
            client = data.client_id,
            "consumer group membership changed"
        );
    }
    Some(RemotingCommand::success_to(request))
}

fn unregister_client(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    // The client is its connection, so `clientID` is not needed: Java goes on without
    // it as well (its decoder only logs the missing field).
    let header = match request.decode_header::<UnregisterClientRequestHeader>() {
        Ok(header) => header,
        Err(HeaderError::MissingField { field: "clientID" }) => UnregisterClientRequestHeader {
            producer_group: request.ext("producerGroup").map(str::to_owned),
            consumer_group: request.ext("consumerGroup").map(str::to_owned),
            ..UnregisterClientRequestHeader::default()
        },
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    for group in [&header.consumer_group, &header.producer_group]
        .into_iter()
        .flatten()
    {
        ctx.state.unregister(connection.id, Some(group));
    }
    Some(RemotingCommand::success_to(request))
}

fn consumer_list(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<GetConsumerListByGroupRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let ids = ctx.state.consumer_ids(&header.consumer_group);
    if ids.is_empty() {
        let remark = format!("no consumer for this group, {}", header.consumer_group);
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let mut response = RemotingCommand::success_to(request);
    response.body = serde_json::json!({ "consumerIdList": ids })
        .to_string()
        .into_bytes();
    Some(response)
}
