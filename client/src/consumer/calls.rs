//! The broker requests consumers make beyond pulling: start offsets, queue locks for orderly
//! consumption, and sending a failed message back.

use super::offset_store::{OffsetStore, ReadOffsetType};
use super::{start_from, ConsumeFromWhere, MessageQueue, StartFrom};
use crate::error::{ClientError, Result};
use crate::instance::{expect_success, ClientInstance};
use crate::message::MessageExt;
use ferromq_protocol::remoting::command::RemotingCommand;
use ferromq_protocol::remoting::headers::ConsumerSendMsgBackRequestHeader;
use ferromq_protocol::remoting::request_code::RequestCode;
use std::collections::BTreeSet;
use std::time::Duration;

/// How long a LOCK_BATCH_MQ / UNLOCK_BATCH_MQ may take (Java's 1 s).
const LOCK_TIMEOUT: Duration = Duration::from_secs(1);

/// The offset to start pulling `mq` from (`computePullFromWhereWithException`).
///
/// # Errors
/// Broker or network errors; the caller retries at the next rebalance.
pub async fn start_offset(
    instance: &ClientInstance,
    offsets: &OffsetStore,
    from: ConsumeFromWhere,
    mq: &MessageQueue,
) -> Result<i64> {
    let committed = offsets.read(instance, mq, ReadOffsetType::Store).await?;
    match start_from(from, &mq.topic, committed) {
        StartFrom::Offset(offset) => Ok(offset),
        StartFrom::MaxOffset => instance.get_max_offset(mq).await,
        StartFrom::Timestamp(ms) => instance.search_offset(mq, ms).await,
    }
}

fn lock_body(group: &str, client_id: &str, mqs: &[MessageQueue]) -> Vec<u8> {
    serde_json::json!({
        "consumerGroup": group,
        "clientId": client_id,
        "mqSet": mqs,
    })
    .to_string()
    .into_bytes()
}

/// Locks `mqs` (all of one broker) for this client (LOCK_BATCH_MQ); returns those held.
///
/// # Errors
/// Broker or network errors, or an unreadable answer.
pub async fn lock_batch(
    instance: &ClientInstance,
    group: &str,
    mqs: &[MessageQueue],
) -> Result<BTreeSet<MessageQueue>> {
    let Some(first) = mqs.first() else {
        return Ok(BTreeSet::new());
    };
    let addr = instance.master_addr_of(first).await?;
    let request = RemotingCommand::request(RequestCode::LOCK_BATCH_MQ).with_body(lock_body(
        group,
        instance.client_id(),
        mqs,
    ));
    let response = expect_success(instance.invoke_broker(&addr, request, LOCK_TIMEOUT).await?)?;
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Answer {
        #[serde(rename = "lockOKMQSet", default)]
        lock_ok_mq_set: Vec<MessageQueue>,
    }
    let answer: Answer = serde_json::from_slice(&response.body)
        .map_err(|e| ClientError::BadResponse(format!("LOCK_BATCH_MQ answer: {e}")))?;
    Ok(answer.lock_ok_mq_set.into_iter().collect())
}

/// Releases `mqs` (all of one broker), waiting for the broker's answer (UNLOCK_BATCH_MQ).
///
/// # Errors
/// Broker or network errors.
pub async fn unlock_batch(
    instance: &ClientInstance,
    group: &str,
    mqs: &[MessageQueue],
) -> Result<()> {
    let Some(first) = mqs.first() else {
        return Ok(());
    };
    let addr = instance.master_addr_of(first).await?;
    let request = RemotingCommand::request(RequestCode::UNLOCK_BATCH_MQ).with_body(lock_body(
        group,
        instance.client_id(),
        mqs,
    ));
    expect_success(instance.invoke_broker(&addr, request, LOCK_TIMEOUT).await?)?;
    Ok(())
}

/// Hands a message the listener failed back to the broker for a later retry
/// (CONSUMER_SEND_MSG_BACK; delay level 0 lets the broker choose).
///
/// # Errors
/// Broker or network errors (the caller then consumes it again locally).
pub async fn send_back(
    instance: &ClientInstance,
    group: &str,
    mq: &MessageQueue,
    message: &MessageExt,
    max_reconsume_times: i32,
) -> Result<()> {
    let addr = instance.master_addr_of(mq).await?;
    let header = ConsumerSendMsgBackRequestHeader {
        offset: message.commit_log_offset,
        group: group.to_owned(),
        delay_level: 0,
        origin_msg_id: Some(message.msg_id()),
        origin_topic: Some(message.topic.clone()),
        unit_mode: Some(false),
        max_reconsume_times: Some(max_reconsume_times),
    };
    let request =
        RemotingCommand::request_with_header(RequestCode::CONSUMER_SEND_MSG_BACK, &header);
    let timeout = instance.config().request_timeout;
    expect_success(instance.invoke_broker(&addr, request, timeout).await?)?;
    Ok(())
}
