//! END_TRANSACTION (`EndTransactionProcessor`): a producer commits or rolls back the half
//! message of its transaction; and RESUME_CHECK_HALF_MESSAGE (`AdminBrokerProcessor`,
//! mqadmin `resumeCheckHalfMessage`): a half is checked again from scratch.

use super::Context;
use crate::broker::reply::{error, Response};
use crate::broker::state::BrokerState;
use crate::broker::state::{PERM_READ, PERM_WRITE};
use crate::broker::timer::handle_schedule;
use crate::broker::transaction::CHECK_TIMES;
use crate::broker::transaction::{
    put_op, Stored, HALF_TOPIC, PGROUP, PREPARED_QUEUE_OFFSET, REAL_TOPIC, TRANSACTION_COMMIT_TYPE,
    TRANSACTION_NOT_TYPE, TRANSACTION_ROLLBACK_TYPE, TRANSACTION_TYPE_MASK,
};
use crate::config::broker::BrokerRole;
use crate::remoting::headers::{EndTransactionRequestHeader, ResumeCheckHalfMessageRequestHeader};
use crate::remoting::{RemotingCommand, ResponseCode};
use crate::store::commit_log::PutMessage;
use crate::store::message::MessageRecord;
use crate::store::message::{decode_record, rewrite_properties, Record};
use crate::store::message_store::StoreHandle;
use crate::store::reader::StoreReader;

/// Java's remark when END_TRANSACTION names no half message.
const NOT_FOUND: &str = "Find prepared transaction message failed";

/// END_TRANSACTION (`EndTransactionProcessor`): commit or roll back the half at
/// `commitLogOffset`. "Unknown" (type 0) is not answered, as in Java; a type that is none of
/// Java's is refused (Java leaves it unanswered).
/// Refusals are logged: the request is oneway, so the producer never sees the answer.
pub(super) async fn process(ctx: &Context, request: &RemotingCommand) -> Response {
    if request.request_code() == crate::remoting::RequestCode::RESUME_CHECK_HALF_MESSAGE {
        return resume_check(ctx, request).await;
    }
    // A slave stores nothing of its own: SLAVE_NOT_AVAILABLE without a remark, as Java's
    // processor answers before it looks at the request.
    if ctx.state.role.get() == BrokerRole::Slave {
        tracing::warn!("a slave takes no END_TRANSACTION; its master does");
        let refusal = ResponseCode::SLAVE_NOT_AVAILABLE;
        return Some(RemotingCommand::response_to(request, refusal, None));
    }
    let answer = end(&ctx.state, &ctx.store, &ctx.reader, request).await;
    if let Some(refused) = answer
        .as_ref()
        .filter(|a| a.code != ResponseCode::SUCCESS.0)
    {
        tracing::warn!(
            remark = refused.remark.as_deref().unwrap_or(""),
            "END_TRANSACTION refused"
        );
    }
    answer
}

async fn end(
    state: &BrokerState,
    store: &StoreHandle,
    reader: &StoreReader,
    request: &RemotingCommand,
) -> Response {
    let header = match request.decode_header::<EndTransactionRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let commit = match header.commit_or_rollback {
        TRANSACTION_COMMIT_TYPE => true,
        TRANSACTION_ROLLBACK_TYPE => false,
        TRANSACTION_NOT_TYPE => {
            let msg_id = &header.msg_id;
            tracing::debug!(msg_id, "transaction state unknown, left to the check");
            return None;
        }
        // Java leaves any other type unanswered too, which hangs a caller that sent the
        // request as a sync one until its timeout; ferromq says what is wrong instead.
        other => {
            let remark = format!("commitOrRollback {other} is not a transaction type");
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        }
    };
    tracing::debug!(
        msg_id = %header.msg_id,
        commit,
        from_check = header.from_transaction_check.unwrap_or(false),
        "end transaction"
    );
    let half = match reader.record_at(header.commit_log_offset).await {
        Ok(Some(bytes)) => Stored::decode(bytes),
        Ok(None) => None,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let Some(record) = half.as_ref().and_then(Stored::record) else {
        return error(request, ResponseCode::SYSTEM_ERROR, NOT_FOUND);
    };
    let Some(half) = half.as_ref() else {
        return error(request, ResponseCode::SYSTEM_ERROR, NOT_FOUND);
    };
    if let Some(remark) = prepared_problem(half, &record, &header) {
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let first = half
        .property(PREPARED_QUEUE_OFFSET)
        .and_then(|offset| offset.parse::<i64>().ok())
        .unwrap_or(record.queue_offset);
    if !state.ended_transactions.end(first) {
        // An answer to a second check of a transaction already ended: its half copy is
        // marked done, nothing is delivered again.
        tracing::info!(
            msg_id = %header.msg_id,
            first_half = first,
            "transaction already ended; the repeated answer is ignored"
        );
        put_op(state, store, record.queue_offset, record.store_host).await;
        return Some(RemotingCommand::success_to(request));
    }
    if commit {
        let real_topic = half.property(REAL_TOPIC).unwrap_or_default().to_owned();
        let mut put = half.put(&record, &real_topic, half.real_queue());
        put.sys_flag = (record.sys_flag & !TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE;
        put.prepared_transaction_offset = header.commit_log_offset;
        // The half's properties as they are, `TRAN_MSG`, `REAL_TOPIC` and `REAL_QID`
        // included: Java's `endMessageTransaction` writes the stored string before it clears
        // them, and its consumers see them.
        put.properties = record.properties.to_vec();
        // As Java's put hook: a committed message with a timer or a delay level waits
        // for it.
        let config = &state.config.store;
        if let Err(refusal) = handle_schedule(&mut put, config, crate::broker::state::now_ms()) {
            state.ended_transactions.forget(first);
            let (code, remark) = refusal.answer(config);
            return error(request, code, remark);
        }
        if let Err(failure) = store.put(put).await {
            state.ended_transactions.forget(first);
            let remark = format!("cannot store the committed message: {failure}");
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        }
    }
    put_op(state, store, record.queue_offset, record.store_host).await;
    Some(RemotingCommand::success_to(request))
}

/// `checkPrepareMessage`: the half must be the one the producer names.
fn prepared_problem(
    half: &Stored,
    record: &MessageRecord<'_>,
    header: &EndTransactionRequestHeader,
) -> Option<&'static str> {
    if record.topic != HALF_TOPIC || half.property(REAL_TOPIC).is_none() {
        return Some(NOT_FOUND);
    }
    if half.property(PGROUP) != Some(header.producer_group.as_str()) {
        return Some("The producer group wrong");
    }
    if record.queue_offset != header.tran_state_table_offset {
        return Some("The transaction state table offset wrong");
    }
    if record.physical_offset != header.commit_log_offset {
        return Some("The commit log offset wrong");
    }
    None
}

/// RESUME_CHECK_HALF_MESSAGE (323): the record the offset message id names is stored again
/// in the half queue with `TRANSACTION_CHECK_TIMES` 0, so that the broker checks its
/// transaction again from the start (`AdminBrokerProcessor.resumeCheckHalfMessage`). Java's
/// remarks: one when the put fails, one for anything else (an id that names no record).
async fn resume_check(ctx: &Context, request: &RemotingCommand) -> Response {
    const PUT_FAILED: &str = "Put message back to RMQ_SYS_TRANS_HALF_TOPIC failed.";
    const THREW: &str =
        "Exception was thrown when putting message back to RMQ_SYS_TRANS_HALF_TOPIC.";
    let header = match request.decode_header::<ResumeCheckHalfMessageRequestHeader>() {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let Some((_, offset)) = crate::store::message::decode_offset_msg_id(&header.msg_id) else {
        return error(request, ResponseCode::SYSTEM_ERROR, THREW);
    };
    let bytes = match ctx.reader.record_at(offset).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) | Err(_) => return error(request, ResponseCode::SYSTEM_ERROR, THREW),
    };
    let Ok(Record::Message { record, .. }) = decode_record(&bytes, false) else {
        return error(request, ResponseCode::SYSTEM_ERROR, THREW);
    };
    ctx.state
        .ensure_topic(HALF_TOPIC, 1, PERM_READ | PERM_WRITE)
        .await;
    let mut message = PutMessage::from_record(&record, HALF_TOPIC.to_owned(), 0);
    message.properties = rewrite_properties(record.properties, &[], &[(CHECK_TIMES, "0")]);
    match ctx.store.put(message).await {
        Ok(_) => {
            let real_topic = crate::store::message::parse_properties(record.properties)
                .into_iter()
                .find(|(name, _)| name == REAL_TOPIC)
                .map(|(_, value)| value)
                .unwrap_or_default();
            tracing::info!(real_topic, "half message put back to be checked again");
            Some(RemotingCommand::success_to(request))
        }
        Err(failure) => {
            tracing::error!(%failure, "{PUT_FAILED}");
            error(request, ResponseCode::SYSTEM_ERROR, PUT_FAILED)
        }
    }
}
