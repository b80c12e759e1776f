//! NOTIFICATION (200054, Java 5.x's `NotificationProcessor`) and POLLING_INFO (200055,
//! `PollingInfoProcessor`): whether a group's pop of a topic (one queue or all, and its
//! retry topic) would find a message, waiting up to `pollTime` for one; and how many pops
//! wait on a queue now.

use super::pop::wait_for_growth;
use super::Context;
use crate::broker::pop::{
    check_pop_target, pop_offset, pop_queue_ends, retry_topic, INIT_MODE_MIN,
};
use crate::broker::reply::{error, header_refusal, Response};
use crate::broker::state::pop::pop_key;
use crate::broker::state::{now_ms, PERM_READ};
use crate::remoting::headers::{
    NotificationRequestHeader, NotificationResponseHeader, PollingInfoRequestHeader,
    PollingInfoResponseHeader,
};
use crate::remoting::server::ConnectionInfo;
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};

/// NOTIFICATION and POLLING_INFO.
pub(super) async fn process(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    if request.request_code() == RequestCode::POLLING_INFO {
        return polling_info(ctx, connection, request).await;
    }
    let mut header = match request.decode_header::<NotificationRequestHeader>() {
        Ok(header) => header,
        Err(e) => return header_refusal(request, &e),
    };
    let started = now_ms();
    if header.born_time == 0 {
        header.born_time = started;
    }
    let (topic, group) = (header.topic.as_str(), header.consumer_group.as_str());
    let queue_id = header.queue_id;
    if let Err((code, remark)) = checks(ctx, connection, topic, queue_id, group).await {
        return error(request, code, remark);
    }
    if header.order == Some(true) {
        let remark = "ordered POP is not supported by this broker yet";
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let deadline = started.saturating_add(header.poll_time.max(0));
    let mut polling = None;
    let mut polling_full = false;
    let has_msg = loop {
        let ends = pop_queue_ends(&ctx.state, &ctx.reader, topic, header.queue_id, group);
        if has_message(ctx, &header, &ends) {
            break true;
        }
        let now = now_ms();
        // As Java: a notification that finds nothing and may not wait answers at once.
        if header.poll_time <= 0 || now >= deadline {
            break false;
        }
        if !wait_for_growth(
            ctx,
            &mut polling,
            (topic, group, queue_id),
            ends,
            (now, deadline),
        )
        .await
        {
            polling_full = true;
            break false;
        }
    };
    let mut response = success(request);
    response.set_header(&NotificationResponseHeader {
        has_msg,
        polling_full,
    });
    Some(response)
}

/// The checks both requests make: the broker readable, then those of a pop's target.
async fn checks(
    ctx: &Context,
    connection: &ConnectionInfo,
    topic: &str,
    queue_id: i32,
    group: &str,
) -> Result<(), (ResponseCode, String)> {
    let config = ctx.state.runtime();
    if config.broker_permission & PERM_READ == 0 {
        let ip = config.broker_ip1;
        let remark = format!("the broker[{ip}] peeking message is forbidden");
        return Err((ResponseCode::NO_PERMISSION, remark));
    }
    check_pop_target(&ctx.state, topic, queue_id, group, connection.peer)
        .await
        .map(|_| ())
}

/// SUCCESS with the remark Java's answer keeps from its creation.
fn success(request: &RemotingCommand) -> RemotingCommand {
    let remark = Some("not set any response code".to_owned());
    RemotingCommand::response_to(request, ResponseCode::SUCCESS, remark)
}

/// Whether a queue of `ends` (a topic's and its retry topic's) has a message past where the
/// group pops it (`hasMsgFromQueue`).
fn has_message(
    ctx: &Context,
    header: &NotificationRequestHeader,
    ends: &[(String, i32, i64)],
) -> bool {
    let retry = retry_topic(&ctx.state, &header.topic, &header.consumer_group);
    ends.iter().any(|(topic, queue_id, end)| {
        if *topic == retry && ctx.state.topic(&retry).is_none() {
            return false;
        }
        let (offset, _) = pop_offset(
            &ctx.state,
            &ctx.reader,
            (topic, *queue_id),
            &header.consumer_group,
            INIT_MODE_MIN,
        );
        end - offset > 0
    })
}

/// POLLING_INFO: the pops waiting on `topic@group@queueId`.
async fn polling_info(
    ctx: &Context,
    connection: &ConnectionInfo,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<PollingInfoRequestHeader>() {
        Ok(header) => header,
        Err(e) => return header_refusal(request, &e),
    };
    let (topic, group) = (header.topic.as_str(), header.consumer_group.as_str());
    let queue_id = header.queue_id;
    if let Err((code, remark)) = checks(ctx, connection, topic, queue_id, group).await {
        return error(request, code, remark);
    }
    let waiting = ctx
        .state
        .pop
        .polling(&pop_key(topic, group, header.queue_id));
    let mut response = success(request);
    response.set_header(&PollingInfoResponseHeader {
        polling_num: i32::try_from(waiting).unwrap_or(i32::MAX),
    });
    Some(response)
}
