//! Transactional sends (Java `TransactionMQProducer` and the transaction half of
//! `DefaultMQProducerImpl`).
//!
//! [`TransactionProducer::send_message_in_transaction`] sends a *half* message (property
//! `TRAN_MSG=true`, `PGROUP` = the group; the producer sets the prepared sys flag), runs the
//! listener's local transaction, and tells the broker that stored the half how it ended
//! (END_TRANSACTION, oneway): commit delivers the message to its topic, rollback drops it,
//! unknown leaves it to the broker's check. The broker asks about halves left open
//! (CHECK_TRANSACTION_STATE); the producer answers with the listener's
//! [`TransactionListener::check_local_transaction`] in another END_TRANSACTION.
//!
//! ```
//! use ferromq_client::transaction::{
//!     LocalTransactionState, TransactionListener, TransactionProducer,
//! };
//! use ferromq_client::{ClientConfig, Message, MessageExt};
//! use std::sync::Arc;
//!
//! struct Orders;
//! impl TransactionListener for Orders {
//!     fn execute_local_transaction(
//!         &self,
//!         _message: &Message,
//!         _arg: Option<&(dyn std::any::Any + Send + Sync)>,
//!     ) -> LocalTransactionState {
//!         LocalTransactionState::CommitMessage
//!     }
//!     fn check_local_transaction(&self, _message: &MessageExt) -> LocalTransactionState {
//!         LocalTransactionState::CommitMessage
//!     }
//! }
//!
//! # let namesrv = std::env::var("FERROMQ_NAMESRV").expect("a name server address");
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let config = ClientConfig::new(&namesrv);
//! let producer = TransactionProducer::new("order_tx", config, Arc::new(Orders));
//! producer.start().await?;
//! let sent = producer
//!     .send_message_in_transaction(Message::new("Orders", "paid"), None)
//!     .await?;
//! assert_eq!(sent.local_transaction_state, LocalTransactionState::CommitMessage);
//! producer.shutdown().await;
//! # Ok::<(), ferromq_client::ClientError>(())
//! # }).unwrap();
//! ```

use super::config::ClientConfig;
use super::error::{ClientError, Result};
use super::instance::{ClientInstance, RequestHook};
use super::message::{decode_messages, property, Message, MessageExt};
use super::producer::{Producer, SendResult, SendStatus};
use crate::instance::lock;
use ferromq_protocol::message::decode_offset_msg_id;
use ferromq_protocol::remoting::headers::{
    CheckTransactionStateRequestHeader, EndTransactionRequestHeader,
};
use ferromq_protocol::remoting::{RemotingCommand, RequestCode};
use std::any::Any;
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// `MessageSysFlag.TRANSACTION_NOT_TYPE`: the transaction's outcome is not known yet.
const TRANSACTION_NOT_TYPE: i32 = 0;
/// `MessageSysFlag.TRANSACTION_COMMIT_TYPE`.
const TRANSACTION_COMMIT_TYPE: i32 = 0x2 << 2;
/// `MessageSysFlag.TRANSACTION_ROLLBACK_TYPE`.
const TRANSACTION_ROLLBACK_TYPE: i32 = 0x3 << 2;

/// How a local transaction ended (Java `LocalTransactionState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LocalTransactionState {
    /// Deliver the message (`COMMIT_MESSAGE`).
    CommitMessage,
    /// Drop the message (`ROLLBACK_MESSAGE`).
    RollbackMessage,
    /// Not known yet: the broker asks again later (Java's `UNKNOW`).
    #[doc(alias = "Unknow")]
    #[doc(alias = "UNKNOW")]
    Unknown,
}

impl LocalTransactionState {
    /// The `commitOrRollback` value of END_TRANSACTION.
    #[must_use]
    pub fn commit_or_rollback(self) -> i32 {
        match self {
            LocalTransactionState::CommitMessage => TRANSACTION_COMMIT_TYPE,
            LocalTransactionState::RollbackMessage => TRANSACTION_ROLLBACK_TYPE,
            LocalTransactionState::Unknown => TRANSACTION_NOT_TYPE,
        }
    }
}

/// The application's side of a transaction (Java `TransactionListener`).
///
/// Both methods run on the client's tokio threads (the check on a blocking-pool thread);
/// keep them short.
pub trait TransactionListener: Send + Sync {
    /// Runs the local transaction after the half message was stored; `arg` is what the
    /// caller passed to [`TransactionProducer::send_message_in_transaction`].
    fn execute_local_transaction(
        &self,
        message: &Message,
        arg: Option<&(dyn Any + Send + Sync)>,
    ) -> LocalTransactionState;

    /// The broker asks how the transaction of a half message left open ended.
    fn check_local_transaction(&self, message: &MessageExt) -> LocalTransactionState;
}

/// The outcome of a transactional send (Java `TransactionSendResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionSendResult {
    /// The half message's send.
    pub send_result: SendResult,
    /// What the local transaction answered (rollback when the half was stored but not
    /// flushed or replicated as asked).
    pub local_transaction_state: LocalTransactionState,
    /// The transaction id: the message's `UNIQ_KEY`.
    pub transaction_id: Option<String>,
}

/// A producer of transactional messages (Java `TransactionMQProducer`). It is a
/// [`Producer`] too, for plain sends of the same group.
#[doc(alias = "TransactionMQProducer")]
#[derive(Clone)]
pub struct TransactionProducer {
    producer: Producer,
    listener: Arc<dyn TransactionListener>,
    running: Arc<AtomicBool>,
    /// Brokers sent a heartbeat after a half message.
    introduced: Arc<Mutex<HashSet<String>>>,
}

impl std::fmt::Debug for TransactionProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionProducer")
            .field("producer", &self.producer)
            .finish_non_exhaustive()
    }
}

impl TransactionProducer {
    /// A producer of `group` on its own client instance.
    #[must_use]
    pub fn new(
        group: &str,
        config: ClientConfig,
        listener: Arc<dyn TransactionListener>,
    ) -> TransactionProducer {
        TransactionProducer::with_producer(Producer::new(group, config), listener)
    }

    /// Transactional sends over `producer` (not started yet).
    #[must_use]
    pub fn with_producer(
        producer: Producer,
        listener: Arc<dyn TransactionListener>,
    ) -> TransactionProducer {
        TransactionProducer {
            producer,
            listener,
            running: Arc::new(AtomicBool::new(false)),
            introduced: Arc::new(Mutex::new(HashSet::new())),
        }
    }

    /// The underlying producer.
    #[must_use]
    pub fn producer(&self) -> &Producer {
        &self.producer
    }

    /// The client instance.
    #[must_use]
    pub fn instance(&self) -> &Arc<ClientInstance> {
        self.producer.instance()
    }

    /// Starts the producer and answers the broker's CHECK_TRANSACTION_STATE for this group
    /// (chained before any request hook already set on the instance).
    ///
    /// # Errors
    /// As [`Producer::start`].
    pub async fn start(&self) -> Result<()> {
        let instance = self.producer.instance();
        let hook = check_hook(
            self.producer.group().to_owned(),
            Arc::clone(&self.listener),
            Arc::downgrade(instance),
            Arc::clone(&self.running),
            instance.request_hook(),
        );
        instance.set_request_hook(hook);
        self.running.store(true, Ordering::Release);
        let started = self.producer.start().await;
        if started.is_err() {
            self.running.store(false, Ordering::Release);
        }
        started
    }

    /// Stops answering checks and shuts the producer down.
    pub async fn shutdown(&self) {
        self.running.store(false, Ordering::Release);
        self.producer.shutdown().await;
    }

    /// Sends `message` as a half message, runs the local transaction, and ends it on the
    /// broker (`sendMessageInTransaction`). A delay level is ignored, as in Java. Failing to
    /// tell the broker the outcome is logged, not returned: the broker's check asks again.
    ///
    /// # Errors
    /// The half message's send failed (nothing was stored, no local transaction ran).
    pub async fn send_message_in_transaction(
        &self,
        mut message: Message,
        arg: Option<&(dyn Any + Send + Sync)>,
    ) -> Result<TransactionSendResult> {
        message.properties.remove(property::DELAY_TIME_LEVEL);
        message.put_property(property::TRANSACTION_PREPARED, "true");
        message.put_property(property::PRODUCER_GROUP, self.producer.group());
        if message
            .property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
            .is_none()
        {
            let id = super::msg_id::create_uniq_id();
            message.put_property(property::UNIQ_CLIENT_MESSAGE_ID_KEYIDX, &id);
        }
        let send_result = self.producer.send(message.clone()).await?;
        self.introduce_to(&send_result).await;
        let mut remark = None;
        let state = match send_result.send_status {
            SendStatus::SendOk => {
                let listener = &self.listener;
                let run = std::panic::AssertUnwindSafe(|| {
                    blocking(|| listener.execute_local_transaction(&message, arg))
                });
                match std::panic::catch_unwind(run) {
                    Ok(state) => state,
                    Err(_) => {
                        remark = Some("executeLocalTransactionBranch exception: panic".to_owned());
                        LocalTransactionState::Unknown
                    }
                }
            }
            _ => LocalTransactionState::RollbackMessage,
        };
        if let Err(error) = self.end_transaction(&send_result, state, remark).await {
            tracing::warn!(%error, msg_id = %send_result.msg_id, "end transaction failed");
        }
        Ok(TransactionSendResult {
            transaction_id: Some(send_result.msg_id.clone()),
            send_result,
            local_transaction_state: state,
        })
    }

    /// Sends a heartbeat the first time a half went to a broker, so that the broker knows
    /// whom to ask should the transaction stay open (Java waits for its 30 s heartbeat).
    async fn introduce_to(&self, sent: &SendResult) {
        let broker = &sent.message_queue.broker_name;
        let first = lock(&self.introduced).insert(broker.clone());
        if first {
            if let Err(error) = self
                .producer
                .instance()
                .send_heartbeat_to_all_brokers()
                .await
            {
                tracing::debug!(%error, "heartbeat after the first half message failed");
                lock(&self.introduced).remove(broker);
            }
        }
    }

    /// END_TRANSACTION for a half just sent (`endTransaction`).
    async fn end_transaction(
        &self,
        sent: &SendResult,
        state: LocalTransactionState,
        remark: Option<String>,
    ) -> Result<()> {
        let Some((_, commit_log_offset)) = decode_offset_msg_id(&sent.offset_msg_id) else {
            return Err(ClientError::BadResponse(format!(
                "offset message id {} does not decode",
                sent.offset_msg_id
            )));
        };
        let instance = self.producer.instance();
        let addr = instance.master_addr_of(&sent.message_queue).await?;
        let header = EndTransactionRequestHeader {
            producer_group: self.producer.group().to_owned(),
            tran_state_table_offset: sent.queue_offset,
            commit_log_offset,
            commit_or_rollback: state.commit_or_rollback(),
            from_transaction_check: Some(false),
            msg_id: sent.msg_id.clone(),
            transaction_id: sent.transaction_id.clone(),
            topic: None,
        };
        let mut request =
            RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &header);
        request.remark = remark;
        instance.invoke_broker_oneway(&addr, request).await
    }
}

/// Runs `work`, which may block (a local transaction often waits on a database), without
/// holding up the other tasks of the worker thread it runs on: on a multi-thread runtime the
/// worker hands its queue to another thread first (`block_in_place`); elsewhere it runs
/// inline.
fn blocking<T>(work: impl FnOnce() -> T) -> T {
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        tokio::task::block_in_place(work)
    } else {
        work()
    }
}

/// The request hook answering CHECK_TRANSACTION_STATE for `group`
/// (`ClientRemotingProcessor.checkTransactionState`, `DefaultMQProducerImpl
/// .checkTransactionState`); other requests go to `next`.
fn check_hook(
    group: String,
    listener: Arc<dyn TransactionListener>,
    instance: Weak<ClientInstance>,
    running: Arc<AtomicBool>,
    next: Option<RequestHook>,
) -> RequestHook {
    Arc::new(move |addr: &str, request: RemotingCommand| {
        let delegate =
            |request: RemotingCommand| next.as_ref().and_then(|hook| hook(addr, request));
        if request.request_code() != RequestCode::CHECK_TRANSACTION_STATE {
            return delegate(request);
        }
        let header = match request.decode_header::<CheckTransactionStateRequestHeader>() {
            Ok(header) => header,
            Err(error) => {
                tracing::warn!(%error, "bad CHECK_TRANSACTION_STATE header");
                return None;
            }
        };
        let message = match decode_messages(&request.body).map(|m| m.into_iter().next()) {
            Ok(Some(message)) => message,
            Ok(None) | Err(_) => {
                tracing::warn!(addr, "CHECK_TRANSACTION_STATE without a message");
                return None;
            }
        };
        if message.property(property::PRODUCER_GROUP) != Some(group.as_str()) {
            return delegate(request);
        }
        if !running.load(Ordering::Acquire) {
            return None;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("transaction check outside a tokio runtime, not answered");
            return None;
        };
        let end = CheckAnswer {
            group: group.clone(),
            listener: Arc::clone(&listener),
            instance: instance.clone(),
            addr: addr.to_owned(),
            header,
            message,
        };
        runtime.spawn(end.run());
        None
    })
}

/// One check being answered.
struct CheckAnswer {
    group: String,
    listener: Arc<dyn TransactionListener>,
    instance: Weak<ClientInstance>,
    addr: String,
    header: CheckTransactionStateRequestHeader,
    message: MessageExt,
}

impl CheckAnswer {
    async fn run(self) {
        let CheckAnswer {
            group,
            listener,
            instance,
            addr,
            header,
            message,
        } = self;
        let msg_id = message.msg_id();
        let checked =
            tokio::task::spawn_blocking(move || listener.check_local_transaction(&message));
        let (state, remark) = match checked.await {
            Ok(state) => (state, None),
            Err(error) => (
                LocalTransactionState::Unknown,
                Some(format!("checkLocalTransactionState exception: {error}")),
            ),
        };
        let end = EndTransactionRequestHeader {
            producer_group: group,
            tran_state_table_offset: header.tran_state_table_offset,
            commit_log_offset: header.commit_log_offset,
            commit_or_rollback: state.commit_or_rollback(),
            from_transaction_check: Some(true),
            msg_id,
            transaction_id: header.transaction_id,
            topic: None,
        };
        let mut request = RemotingCommand::request_with_header(RequestCode::END_TRANSACTION, &end);
        request.remark = remark;
        let Some(instance) = instance.upgrade() else {
            return;
        };
        if let Err(error) = instance.invoke_broker_oneway(&addr, request).await {
            tracing::warn!(%error, addr, "cannot answer the transaction check");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_map_to_javas_end_transaction_types() {
        assert_eq!(
            LocalTransactionState::CommitMessage.commit_or_rollback(),
            0x8
        );
        assert_eq!(
            LocalTransactionState::RollbackMessage.commit_or_rollback(),
            0xC
        );
        assert_eq!(LocalTransactionState::Unknown.commit_or_rollback(), 0);
    }
}
