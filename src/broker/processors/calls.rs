//! The requests a broker passes on to a consumer and answers with what it said
//! (`AdminBrokerProcessor.callConsumer`, `Broker2Client.getConsumeStatus`):
//! GET_CONSUMER_RUNNING_INFO (mqadmin `consumerStatus`), CONSUME_MESSAGE_DIRECTLY (mqadmin
//! `consumeMessage`) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (mqadmin `getConsumerStatus`).

use super::Context;
use crate::broker::reply::{error, with_body, Response};
use crate::broker::state::ConsumerMember;
use crate::remoting::headers::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
};
use crate::remoting::server::CallError;
use crate::remoting::version::{version_desc, V3_0_7_SNAPSHOT, V3_1_8_SNAPSHOT};
use crate::remoting::{ExtFields, RemotingCommand, RequestCode, ResponseCode};
use std::time::Duration;

/// How long the broker waits for a consumer's answer (`Broker2Client.callClient`'s 10 s;
/// `getConsumeStatus` waits 5 s per client).
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
const STATUS_TIMEOUT: Duration = Duration::from_secs(5);

/// The requests of the module header.
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    match request.request_code() {
        RequestCode::GET_CONSUMER_RUNNING_INFO => running_info(ctx, request).await,
        RequestCode::CONSUME_MESSAGE_DIRECTLY => consume_directly(ctx, request).await,
        _ => consumer_status(ctx, request).await,
    }
}

/// GET_CONSUMER_RUNNING_INFO (307): the consumer's `ConsumerRunningInfo`, as it answers.
async fn running_info(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<GetConsumerRunningInfoRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let fields = request.ext_fields.clone().unwrap_or_default();
    call_consumer(
        ctx,
        request,
        RequestCode::GET_CONSUMER_RUNNING_INFO,
        (&header.consumer_group, &header.client_id),
        fields,
        Vec::new(),
    )
    .await
}

/// CONSUME_MESSAGE_DIRECTLY (309): the message at the id's CommitLog offset goes to the
/// consumer, which consumes it once and answers a `ConsumeMessageDirectlyResult`; the
/// broker's name (and the topic's system flag, as 5.x) go with it.
async fn consume_directly(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<ConsumeMessageDirectlyResultRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let state = &ctx.state;
    let mut fields = request.ext_fields.clone().unwrap_or_default();
    fields.insert("brokerName", state.config.broker_name.clone());
    if let Some(topic) = header.topic.as_deref().and_then(|t| state.topic(t)) {
        fields.insert("topicSysFlag", topic.topic_sys_flag.to_string());
    }
    // Java sends no body when the id does not decode, and the consumer fails on it.
    let body = match crate::store::message::decode_offset_msg_id(&header.msg_id) {
        Some((_, offset)) => match ctx.reader.record_at(offset).await {
            Ok(Some(record)) => record,
            Ok(None) => Vec::new(),
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        },
        None => Vec::new(),
    };
    let client_id = header.client_id.unwrap_or_default();
    call_consumer(
        ctx,
        request,
        RequestCode::CONSUME_MESSAGE_DIRECTLY,
        (&header.consumer_group, &client_id),
        fields,
        body,
    )
    .await
}

/// `callConsumer`: `code` with `fields` and `body` to the group's member `client_id`; its
/// answer is the answer (with the request's opaque).
async fn call_consumer(
    ctx: &Context,
    request: &RemotingCommand,
    code: RequestCode,
    (group, client_id): (&str, &str),
    fields: ExtFields,
    body: Vec<u8>,
) -> Response {
    let member = ctx
        .state
        .consumer_members(group)
        .into_iter()
        .find(|m| m.client_id == client_id);
    let Some(member) = member else {
        let remark = format!("The Consumer <{group}> <{client_id}> not online");
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    };
    if member.version < V3_1_8_SNAPSHOT {
        let remark = format!(
            "The Consumer <{client_id}> Version <{}> too low to finish, please upgrade it to \
             V3_1_8_SNAPSHOT",
            version_desc(member.version)
        );
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let mut call = RemotingCommand::request(code);
    call.ext_fields = Some(fields);
    call.body = body;
    match member.outbound.invoke(call, CALL_TIMEOUT).await {
        Ok(mut answer) => {
            answer.opaque = request.opaque;
            answer.serialize_type = request.serialize_type;
            Some(answer)
        }
        Err(CallError::Timeout(waited)) => {
            let remark = format!(
                "consumer <{group}> <{client_id}> Timeout: no answer within {} ms",
                waited.as_millis()
            );
            error(request, ResponseCode::CONSUME_MSG_TIMEOUT, remark)
        }
        Err(e) => {
            let remark = format!("invoke consumer <{group}> <{client_id}> Exception: {e}");
            error(request, ResponseCode::SYSTEM_ERROR, remark)
        }
    }
}

/// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223), `Broker2Client.getConsumeStatus`: each online
/// member of the group (or only the one `clientAddr` names) is asked for its offsets in the
/// topic (GET_CONSUMER_STATUS_FROM_CLIENT); the answer's `consumerTable` maps each client id
/// that answered to its `messageQueueTable`. A member that fails to answer is left out.
async fn consumer_status(ctx: &Context, request: &RemotingCommand) -> Response {
    let header = match request.decode_header::<GetConsumerStatusRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let members = ctx.state.consumer_members(&header.group);
    if members.is_empty() {
        let remark = format!(
            "No Any Consumer online in the consumer group: [{}]",
            header.group
        );
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let only = header
        .client_addr
        .as_deref()
        .filter(|c| !c.trim().is_empty());
    let mut table = Vec::new();
    for member in members {
        if member.version < V3_0_7_SNAPSHOT {
            let remark = format!(
                "the client does not support this feature. version={}",
                version_desc(member.version)
            );
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        }
        if only.is_some_and(|only| only != member.client_id) {
            continue;
        }
        if let Some(queues) = ask_status(&member, &header).await {
            table.push(format!("{}:{queues}", json_string(&member.client_id)));
        }
        if only.is_some() {
            break;
        }
    }
    let body = format!("{{\"consumerTable\":{{{}}}}}", table.join(","));
    with_body(request, body)
}

/// One member's `messageQueueTable` (raw fastjson, a map keyed by queue objects), or `None`
/// when it did not answer SUCCESS with one.
async fn ask_status(
    member: &ConsumerMember,
    header: &GetConsumerStatusRequestHeader,
) -> Option<String> {
    let call =
        RemotingCommand::request_with_header(RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT, header);
    match member.outbound.invoke(call, STATUS_TIMEOUT).await {
        Ok(answer) if answer.code == ResponseCode::SUCCESS.0 => {
            let body = String::from_utf8_lossy(&answer.body);
            let table = crate::config::fastjson::raw_field(&body, "messageQueueTable");
            if table.is_none() {
                tracing::warn!(client = member.client_id, "consumer status without a table");
            }
            table.map(str::to_owned)
        }
        Ok(answer) => {
            tracing::warn!(
                client = member.client_id,
                code = answer.code,
                remark = answer.remark.as_deref().unwrap_or(""),
                "consumer status refused"
            );
            None
        }
        Err(e) => {
            tracing::warn!(client = member.client_id, error = %e, "consumer status not answered");
            None
        }
    }
}

fn json_string(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}
