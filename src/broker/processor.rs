//! The broker's request processors (`SendMessageProcessor`, `PullMessageProcessor`,
//! `ClientManageProcessor`, `ConsumerManageProcessor`, parts of `AdminBrokerProcessor`): one
//! [`BrokerHandler`] per net shard, answering with Java's response codes and remarks.

use super::admin::{self, error, Response};
use super::batch::{decode_batch, merge_properties, BatchDecodeError};
use super::ha::ReplicaStatus;
use super::long_poll::LongPoll;
use super::schedule::redirect_delayed;
use super::send_back;
use super::state::{
    invalid_topic_remark, BrokerState, ClientChannel, NOT_ALLOWED_SEND_TOPICS, PERM_READ,
    PERM_WRITE, RETRY_GROUP_TOPIC_PREFIX,
};
use super::transaction;
use crate::config::broker::BrokerRole;
use crate::remoting::header::read_strict;
use crate::remoting::headers::{
    CreateTopicRequestHeader, GetConsumerListByGroupRequestHeader,
    GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader, OffsetResponseHeader,
    PullMessageRequestHeader, PullMessageResponseHeader, QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader, SearchOffsetRequestHeader, SendMessageRequestHeader,
    SendMessageRequestHeaderV2, SendMessageResponseHeader, UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
};
use crate::remoting::heartbeat::{HeartbeatData, SubscriptionData};
use crate::remoting::server::{ConnectionInfo, Outbound, RequestHandler};
use crate::remoting::{
    CommandHeader, ExtFields, HeaderError, RemotingCommand, RequestCode, ResponseCode,
};
use crate::store::commit_log::{Appended, PutMessage};
use crate::store::config_files::TopicConfig;
use crate::store::consume_queue::tags_code;
use crate::store::message::{offset_msg_id, rewrite_properties};
use crate::store::message_store::StoreHandle;
use crate::store::put_coalescer::PutCoalescer;
use crate::store::reader::{GetMessageStatus, PullFilter, StoreReader};
use crate::store::segment_writer::StoreError;
use futures::future::select;
use std::borrow::Cow;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

/// `PullSysFlag` bits.
const PULL_COMMIT_OFFSET: i32 = 0x1;
const PULL_SUSPEND: i32 = 0x2;
const PULL_SUBSCRIPTION: i32 = 0x4;

/// `MessageSysFlag.TRANSACTION_*_TYPE` bits: a batch may not be a transaction message.
const TRANSACTION_TYPE_MASK: i32 = 0x3 << 2;
/// `MessageSysFlag.TRANSACTION_COMMIT_TYPE`.
const TRANSACTION_COMMIT_TYPE: i32 = 0x2 << 2;

/// `MessageConst.PROPERTY_CLUSTER`: the cluster of the broker that stored a message.
const PROPERTY_CLUSTER: &str = "CLUSTER";
/// `MessageConst.PROPERTY_WAIT_STORE_MSG_OK`: the client's flush wish, not stored.
const PROPERTY_WAIT_STORE_MSG_OK: &str = "WAIT";

/// Whether a send's properties ask to wait for the store (`isWaitStoreMsgOK`: anything but
/// `WAIT=false`, absent included).
fn waits_for_store(properties: &str) -> bool {
    !crate::store::message::parse_properties(properties.as_bytes())
        .iter()
        .any(|(key, value)| key == PROPERTY_WAIT_STORE_MSG_OK && value == "false")
}

/// Longest wait of a request that reports max offsets for dispatch to publish what was
/// committed when it came (read-your-writes); past it, what is published is answered.
const DISPATCH_WAIT_MAX: Duration = Duration::from_secs(3);

/// Java's pointer to its FAQ, appended to some remarks (`FAQUrl.suggestTodo`).
pub(super) const FAQ: &str = "\nSee http://rocketmq.apache.org/docs/faq/ for further details.";

/// Serves one net shard's connections.
#[derive(Debug)]
pub struct BrokerHandler {
    state: Arc<BrokerState>,
    store: StoreHandle,
    /// This shard's sends, handed to the writer together.
    puts: PutCoalescer,
    reader: StoreReader,
    long_poll: Rc<LongPoll>,
    store_host: SocketAddr,
    /// This shard's index: its slot in the broker's statistics.
    shard: usize,
}

impl BrokerHandler {
    /// A handler of shard `shard` over the shared state, the store, and this shard's
    /// long-poll table; `listen_port` is the port actually bound (it differs from the
    /// config's when that asks for port 0), the one stored messages and their ids name.
    #[must_use]
    pub fn new(
        state: Arc<BrokerState>,
        store: StoreHandle,
        long_poll: Rc<LongPoll>,
        listen_port: u16,
        shard: usize,
    ) -> Self {
        let store_host = SocketAddr::new(state.config.broker_ip1, listen_port);
        BrokerHandler {
            reader: store.reader(),
            puts: store.coalescer(),
            state,
            store,
            long_poll,
            store_host,
            shard,
        }
    }

    async fn process(&self, connection: ConnectionInfo, request: RemotingCommand) -> Response {
        if let Some(acl) = &self.state.acl {
            if let Err(super::acl::Denied(remark)) = acl.check(&request, connection.peer.ip()) {
                let (peer, code) = (connection.peer, request.code);
                tracing::debug!(%peer, code, remark, "ACL refused");
                // Java's answer to any exception in a request hook: SYSTEM_ERROR, no fields.
                let mut refusal = RemotingCommand::response_to(
                    &request,
                    ResponseCode::SYSTEM_ERROR,
                    Some(remark),
                );
                refusal.ext_fields = None;
                return Some(refusal);
            }
        }
        let code = request.request_code();
        let answer = match code {
            RequestCode::SEND_MESSAGE | RequestCode::SEND_MESSAGE_V2 => {
                self.send(&connection, request).await
            }
            RequestCode::SEND_BATCH_MESSAGE => self.send_batch(&connection, &request).await,
            RequestCode::CONSUMER_SEND_MSG_BACK => {
                send_back::consumer_send_msg_back(&self.state, &self.store, &self.reader, &request)
                    .await
            }
            // 5.x's lite pull consumer: the same request under its own code, as in Java.
            RequestCode::PULL_MESSAGE | RequestCode::LITE_PULL_MESSAGE => {
                self.pull(&connection, &request).await
            }
            RequestCode::HEART_BEAT => self.heartbeat(&connection, &request).await,
            RequestCode::UNREGISTER_CLIENT => self.unregister_client(&connection, &request),
            RequestCode::GET_CONSUMER_LIST_BY_GROUP => self.consumer_list(&request),
            RequestCode::QUERY_CONSUMER_OFFSET => self.query_consumer_offset(&request),
            RequestCode::UPDATE_CONSUMER_OFFSET => self.update_consumer_offset(&request),
            RequestCode::GET_MAX_OFFSET => self.max_offset(&request).await,
            RequestCode::GET_MIN_OFFSET => self.min_offset(&request),
            RequestCode::GET_EARLIEST_MSG_STORETIME => self.earliest_time(&request).await,
            RequestCode::SEARCH_OFFSET_BY_TIMESTAMP => self.search_offset(&request).await,
            RequestCode::UPDATE_AND_CREATE_TOPIC => self.create_topic(&request).await,
            RequestCode::GET_ALL_TOPIC_CONFIG => admin::all_topic_config(&self.state, &request),
            RequestCode::DELETE_TOPIC_IN_BROKER => {
                admin::delete_topic(&self.state, &self.store, &request).await
            }
            RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP => {
                admin::update_subscription_group(&self.state, &request).await
            }
            RequestCode::DELETE_SUBSCRIPTIONGROUP => {
                admin::delete_subscription_group(&self.state, &request).await
            }
            RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG => {
                admin::all_subscription_groups(&self.state, &request)
            }
            RequestCode::GET_ALL_CONSUMER_OFFSET => {
                admin::all_consumer_offsets(&self.state, &request)
            }
            RequestCode::GET_ALL_DELAY_OFFSET => admin::all_delay_offsets(&self.state, &request),
            RequestCode::GET_BROKER_CONFIG => admin::broker_config(&self.state, &request),
            RequestCode::UPDATE_AND_CREATE_ACL_CONFIG
            | RequestCode::DELETE_ACL_CONFIG
            | RequestCode::GET_BROKER_CLUSTER_ACL_INFO
            | RequestCode::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG => {
                admin::acl_admin(&self.state, &request)
            }
            RequestCode::UPDATE_BROKER_CONFIG => {
                admin::update_broker_config(&self.state, &request).await
            }
            RequestCode::GET_BROKER_RUNTIME_INFO => {
                admin::runtime_info(&self.state, &self.reader, self.store.shared(), &request).await
            }
            RequestCode::LOCK_BATCH_MQ => admin::lock_batch(&self.state, &request),
            RequestCode::GET_CONSUMER_CONNECTION_LIST => {
                admin::consumer_connections(&self.state, &request)
            }
            RequestCode::GET_PRODUCER_CONNECTION_LIST => {
                admin::producer_connections(&self.state, &request)
            }
            RequestCode::GET_TOPIC_STATS_INFO => {
                self.reader.dispatched_to_committed(DISPATCH_WAIT_MAX).await;
                admin::topic_stats(&self.state, &self.reader, &request).await
            }
            RequestCode::GET_CONSUME_STATS => {
                self.reader.dispatched_to_committed(DISPATCH_WAIT_MAX).await;
                admin::consume_stats(&self.state, &self.reader, &request).await
            }
            RequestCode::INVOKE_BROKER_TO_RESET_OFFSET => {
                admin::reset_offset(&self.state, &self.reader, &request).await
            }
            RequestCode::QUERY_TOPIC_CONSUME_BY_WHO => {
                admin::topic_consumers(&self.state, &request)
            }
            RequestCode::UNLOCK_BATCH_MQ => admin::unlock_batch(&self.state, &request),
            RequestCode::VIEW_MESSAGE_BY_ID => admin::view_message(&self.reader, &request).await,
            RequestCode::END_TRANSACTION => {
                transaction::end_transaction(&self.state, &self.store, &self.reader, &request).await
            }
            RequestCode::QUERY_MESSAGE => {
                admin::query_message(&self.reader, self.store.shared(), &request).await
            }
            _ => error(
                &request,
                ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                format!(" request type {} not supported", code.0),
            ),
        };
        // Refusals at debug level: what a client asked for and what it was told, for
        // finding out what a third-party client needs (`RUST_LOG=ferromq=debug`).
        if let Some(response) = &answer {
            let refused = response.code != ResponseCode::SUCCESS.0
                && response.code != ResponseCode::PULL_NOT_FOUND.0;
            if refused {
                tracing::debug!(
                    request = code.0,
                    response = response.code,
                    remark = response.remark.as_deref().unwrap_or(""),
                    peer = %connection.peer,
                    "request refused"
                );
            }
        }
        answer
    }

    /// SEND_MESSAGE and SEND_MESSAGE_V2; the request is taken so that its body moves into
    /// the put without a copy.
    async fn send(&self, connection: &ConnectionInfo, mut request: RemotingCommand) -> Response {
        let request_body = std::mem::take(&mut request.body);
        let request = &request;
        let (header, queue_id) = match self.pre_send(connection, request).await {
            Ok(target) => target,
            Err(refusal) => return refusal,
        };
        let store_config = &self.state.config.store;
        // As Java stores a send (`SendMessageProcessor`): `CLUSTER` added, `WAIT` dropped but
        // from a delayed message and a transaction's half, whose properties Java writes
        // again with it (its CommitLog's delay, `parseHalfMessageInner`).
        let raw_properties = header.properties.as_deref().unwrap_or_default();
        let transaction_type = header.sys_flag & TRANSACTION_TYPE_MASK;
        let delayed = has_delay_level(raw_properties)
            && (transaction_type == 0 || transaction_type == TRANSACTION_COMMIT_TYPE);
        let half = transaction::is_half(raw_properties.as_bytes());
        let cluster = &self.state.config.broker_cluster_name;
        let drop: &[&str] = if delayed || half {
            &[]
        } else {
            &[PROPERTY_WAIT_STORE_MSG_OK]
        };
        let properties = rewrite_properties(
            raw_properties.as_bytes(),
            drop,
            &[(PROPERTY_CLUSTER, cluster)],
        );
        if request_body.len() > store_config.max_message_size || properties.len() > 32_767 {
            return with_region_fields(self.message_illegal(request));
        }
        let (topic, target_queue) = match send_back::retry_or_dlq(
            &self.state,
            request,
            &header.topic,
            queue_id,
            header.reconsume_times,
            header.max_reconsume_times,
        )
        .await
        {
            Ok(target) => target,
            Err(refusal) => return with_region_fields(refusal),
        };
        let mut message = PutMessage {
            topic,
            queue_id: target_queue,
            body: request_body,
            properties,
            ..self.put_message(connection, &header, queue_id)
        };
        if delayed {
            redirect_delayed(&mut message, &store_config.message_delay_level);
        }
        // After the delay: a half keeps its prepared flag until here, so no delay applies
        // to it (the client drops the level of a transactional message anyway).
        if transaction::is_half(&message.properties) {
            message = transaction::into_half(&self.state, message).await;
        }
        let started = std::time::Instant::now();
        let stored = self.puts.put(message).await;
        self.record_put(started, stored.as_ref().map(std::slice::from_ref));
        match stored {
            Ok(appended) => {
                let mut response = self.send_response(
                    request,
                    offset_msg_id(self.store_host, physical_i64(appended.physical_offset)),
                    queue_id,
                    appended.queue_offset,
                );
                let end = physical_i64(appended.physical_offset + appended.size as u64);
                self.replicate(raw_properties, end, &mut response).await;
                Some(response)
            }
            Err(failure) => self.put_failed(request, &failure),
        }
    }

    /// SYNC_MASTER (4.9's `submitReplicaRequest`): a put whose `WAIT` is not `false` is
    /// answered once a slave acknowledged its end; SLAVE_NOT_AVAILABLE without a slave close
    /// enough, FLUSH_SLAVE_TIMEOUT after `slaveTimeout`. The message is stored either way.
    async fn replicate(&self, properties: &str, end: i64, response: &mut RemotingCommand) {
        let config = &self.state.config;
        if config.broker_role != BrokerRole::SyncMaster || !waits_for_store(properties) {
            return;
        }
        let status = self
            .state
            .slaves
            .replicated(
                end,
                config.ha.slave_fall_behind_max,
                config.ha.slave_timeout,
            )
            .await;
        response.code = match status {
            ReplicaStatus::Acked => return,
            ReplicaStatus::NoSlave => ResponseCode::SLAVE_NOT_AVAILABLE.0,
            ReplicaStatus::TimedOut => ResponseCode::FLUSH_SLAVE_TIMEOUT.0,
        };
    }

    /// SEND_BATCH_MESSAGE (`asyncSendBatchMessage`): the header's checks as for one message,
    /// then every message of the body stored in the queue, in order.
    ///
    /// As in Java, the batch is one put: stored whole or not at all, in one CommitLog
    /// segment, with consecutive queue offsets and one store time.
    async fn send_batch(&self, connection: &ConnectionInfo, request: &RemotingCommand) -> Response {
        let (header, queue_id) = match self.pre_send(connection, request).await {
            Ok(target) => target,
            Err(refusal) => return refusal,
        };
        if request.body.len() > self.state.config.store.max_message_size {
            return with_region_fields(self.message_illegal(request));
        }
        if header.sys_flag & TRANSACTION_TYPE_MASK != 0 {
            return with_region_fields(self.message_illegal(request));
        }
        let entries = match decode_batch(&request.body) {
            Ok(entries) => entries,
            // Java hits a NullPointerException on an empty batch (SYSTEM_ERROR, which
            // producers retry); one that holds nothing can never be stored, so it is
            // MESSAGE_ILLEGAL, which they do not retry.
            Err(BatchDecodeError::Empty) => return self.message_illegal(request),
            // Java's remark is the exception its decoder hit, with no region fields.
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        let header_properties = header.properties.as_deref().unwrap_or_default();
        if has_delay_level(header_properties) {
            return with_region_fields(self.message_illegal(request));
        }
        // The batch's own properties as Java keeps them (`WAIT` stays), `CLUSTER` added.
        let cluster = &self.state.config.broker_cluster_name;
        let batch_properties = rewrite_properties(
            header_properties.as_bytes(),
            &[],
            &[(PROPERTY_CLUSTER, cluster)],
        );
        let template = self.put_message(connection, &header, queue_id);
        let mut puts = Vec::with_capacity(entries.len());
        for entry in entries {
            let properties = merge_properties(&entry.properties, &batch_properties);
            if properties.len() > 32_767 {
                return with_region_fields(self.message_illegal(request));
            }
            puts.push(PutMessage {
                flag: entry.flag,
                body: entry.body,
                properties,
                ..template.clone()
            });
        }
        let started = std::time::Instant::now();
        let stored = self.puts.put_batch(puts).await;
        self.record_put(started, stored.as_deref());
        let stored = match stored {
            Ok(stored) => stored,
            Err(failure) => return self.put_failed(request, &failure),
        };
        let first_queue_offset = stored.first().map(|record| record.queue_offset);
        let ids: Vec<String> = stored
            .iter()
            .map(|record| offset_msg_id(self.store_host, physical_i64(record.physical_offset)))
            .collect();
        let mut response = self.send_response(
            request,
            ids.join(","),
            queue_id,
            first_queue_offset.unwrap_or(0),
        );
        if let Some(last) = stored.last() {
            let end = physical_i64(last.physical_offset + last.size as u64);
            self.replicate(header_properties, end, &mut response).await;
        }
        Some(response)
    }

    /// `AbstractSendMessageProcessor.msgCheck` and the queue choice, shared by the single and
    /// the batch send: the V1 view of the header and the queue to store in, or the refusal.
    async fn pre_send(
        &self,
        connection: &ConnectionInfo,
        request: &RemotingCommand,
    ) -> Result<(SendMessageRequestHeader, i32), Response> {
        let header = match decode_send_header(request) {
            Ok(header) => header,
            // Java checks the topic before it reads the fields it found null.
            Err(HeaderError::MissingField { .. }) if send_topic_missing(request) => {
                let remark = "The specified topic is blank.";
                let refusal = error(request, ResponseCode::SYSTEM_ERROR, remark);
                return Err(with_region_fields(refusal));
            }
            Err(e) => return Err(header_refusal(request, &e)),
        };
        self.check_send(connection, request, header)
            .await
            .map_err(with_region_fields)
    }

    /// The checks of [`BrokerHandler::pre_send`] once the header decoded.
    async fn check_send(
        &self,
        connection: &ConnectionInfo,
        request: &RemotingCommand,
        header: SendMessageRequestHeader,
    ) -> Result<(SendMessageRequestHeader, i32), Response> {
        let config = self.state.runtime();
        if config.broker_permission & PERM_WRITE == 0 {
            let remark = format!(
                "the broker[{}] sending message is forbidden",
                config.broker_ip1
            );
            return Err(error(request, ResponseCode::NO_PERMISSION, remark));
        }
        if let Some(problem) = invalid_topic_remark(&header.topic) {
            return Err(error(request, ResponseCode::SYSTEM_ERROR, problem));
        }
        if NOT_ALLOWED_SEND_TOPICS.contains(&header.topic.as_str()) {
            let remark = format!("Sending message to topic[{}] is forbidden.", header.topic);
            return Err(error(request, ResponseCode::NO_PERMISSION, remark));
        }
        let topic_config = self
            .state
            .topic_or_create(
                &header.topic,
                &header.default_topic,
                header.default_topic_queue_nums,
            )
            .await;
        let topic_config = match topic_config {
            Some(topic) => topic,
            None if header.topic.starts_with(RETRY_GROUP_TOPIC_PREFIX) => {
                self.state
                    .ensure_topic(&header.topic, 1, PERM_READ | PERM_WRITE)
                    .await
            }
            None => {
                let remark = format!(
                    "topic[{}] not exist, apply first please!{FAQ}",
                    header.topic
                );
                return Err(error(request, ResponseCode::TOPIC_NOT_EXIST, remark));
            }
        };
        let queue_id = if header.queue_id < 0 {
            queue_for(request.opaque, topic_config.write_queue_nums)
        } else {
            header.queue_id
        };
        let valid = topic_config
            .write_queue_nums
            .max(topic_config.read_queue_nums);
        if queue_id >= valid {
            let remark = format!(
                "request queueId[{queue_id}] is illegal, {} Producer: {}",
                describe_topic(&topic_config),
                connection.peer
            );
            return Err(error(request, ResponseCode::SYSTEM_ERROR, remark));
        }
        Ok((header, queue_id))
    }

    /// The fields of a put that come from the header and the connection; body and
    /// properties empty.
    fn put_message(
        &self,
        connection: &ConnectionInfo,
        header: &SendMessageRequestHeader,
        queue_id: i32,
    ) -> PutMessage {
        PutMessage {
            topic: header.topic.clone(),
            queue_id,
            flag: header.flag,
            sys_flag: header.sys_flag,
            born_timestamp: header.born_timestamp,
            born_host: connection.peer,
            store_host: self.store_host,
            reconsume_times: header.reconsume_times.unwrap_or(0),
            prepared_transaction_offset: 0,
            body: Vec::new(),
            properties: Vec::new(),
        }
    }

    fn send_response(
        &self,
        request: &RemotingCommand,
        msg_id: String,
        queue_id: i32,
        queue_offset: i64,
    ) -> RemotingCommand {
        let mut response = RemotingCommand::success_to(request);
        response.set_header(&SendMessageResponseHeader {
            msg_id,
            queue_id,
            queue_offset,
            transaction_id: None,
            batch_uniq_id: None,
        });
        add_region_fields(&mut response);
        response
    }

    /// Counts a put in this shard's statistics: its records and bytes and how long the
    /// store took, or its failure.
    fn record_put<E>(&self, started: std::time::Instant, stored: Result<&[Appended], E>) {
        let stats = &self.state.stats;
        match stored {
            Ok(records) => {
                let bytes = records.iter().map(|r| r.size as u64).sum();
                let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                stats.record_put(self.shard, records.len() as u64, bytes, elapsed);
            }
            Err(_) => stats.record_put_failed(self.shard),
        }
    }

    /// MESSAGE_ILLEGAL with Java's remark (`handlePutMessageResult`).
    fn message_illegal(&self, request: &RemotingCommand) -> Response {
        let remark = format!(
            "the message is illegal, maybe msg body or properties length not matched. msg body \
             length limit {}B, msg properties length limit 32KB.",
            self.state.config.store.max_message_size
        );
        error(request, ResponseCode::MESSAGE_ILLEGAL, remark)
    }

    fn put_failed(&self, request: &RemotingCommand, failure: &StoreError) -> Response {
        with_region_fields(self.put_refusal(request, failure))
    }

    fn put_refusal(&self, request: &RemotingCommand, failure: &StoreError) -> Response {
        match failure {
            StoreError::TooLarge { .. } | StoreError::Illegal(_) => self.message_illegal(request),
            StoreError::DiskFull { .. }
            | StoreError::NotWritable
            | StoreError::ShuttingDown
            | StoreError::Diverged(_)
            | StoreError::Slave
            | StoreError::Io(_) => {
                let used = f64::from(self.store.shared().disk_used_percent()) / 100.0;
                let remark = format!(
                    "service not available now. It may be caused by one of the following \
                     reasons: the broker's disk is full [CL: {used:5.2} CQ: {used:5.2} INDEX: \
                     {used:5.2}], messages are put to the slave, message store has been shut \
                     down, etc."
                );
                error(request, ResponseCode::SERVICE_NOT_AVAILABLE, remark)
            }
            StoreError::Layout(text) => error(request, ResponseCode::SYSTEM_ERROR, text.clone()),
        }
    }

    async fn pull(&self, connection: &ConnectionInfo, request: &RemotingCommand) -> Response {
        let header = match request.decode_header_strict::<PullMessageRequestHeader>() {
            Ok(header) => header,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        let config = self.state.runtime();
        if config.broker_permission & PERM_READ == 0 {
            let remark = format!(
                "the broker[{}] pulling message is forbidden",
                config.broker_ip1
            );
            return error(request, ResponseCode::NO_PERMISSION, remark);
        }
        let Some(group) = self.state.group_or_create(&header.consumer_group).await else {
            let remark = format!(
                "subscription group [{}] does not exist, {FAQ}",
                header.consumer_group
            );
            return error(request, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, remark);
        };
        if !group.consume_enable {
            let remark = format!(
                "subscription group no permission, {}",
                header.consumer_group
            );
            return error(request, ResponseCode::NO_PERMISSION, remark);
        }
        let Some(topic) = self.state.topic(&header.topic) else {
            let remark = format!(
                "topic[{}] not exist, apply first please! {FAQ}",
                header.topic
            );
            return error(request, ResponseCode::TOPIC_NOT_EXIST, remark);
        };
        if topic.perm & PERM_READ == 0 {
            let remark = format!("the topic[{}] pulling message is forbidden", header.topic);
            return error(request, ResponseCode::NO_PERMISSION, remark);
        }
        if header.queue_id < 0 || header.queue_id >= topic.read_queue_nums {
            let remark = format!(
                "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}] consumer:[/{}]",
                header.queue_id, header.topic, topic.read_queue_nums, connection.peer
            );
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        }
        let codes = if header.sys_flag & PULL_SUBSCRIPTION != 0 {
            let kind = header.expression_type.as_deref();
            if let Some(refusal) = unsupported_filter(request, kind) {
                return Some(refusal);
            }
            tag_codes(header.subscription.as_deref().unwrap_or("*"))
        } else if !self.state.has_consumer_group(&header.consumer_group) {
            let remark = format!("the consumer's group info not exist{FAQ}");
            return error(request, ResponseCode::SUBSCRIPTION_NOT_EXIST, remark);
        } else if !group.consume_broadcast_enable
            && self.state.consumes_by_broadcast(&header.consumer_group)
        {
            let remark = format!(
                "the consumer group[{}] can not consume by broadcast way",
                header.consumer_group
            );
            return error(request, ResponseCode::NO_PERMISSION, remark);
        } else {
            match self
                .state
                .subscription(&header.consumer_group, &header.topic)
            {
                None => {
                    let remark = format!("the consumer's subscription not exist{FAQ}");
                    return error(request, ResponseCode::SUBSCRIPTION_NOT_EXIST, remark);
                }
                Some(subscription) if subscription.sub_version < header.sub_version => {
                    let remark = "the consumer's subscription not latest";
                    return error(request, ResponseCode::SUBSCRIPTION_NOT_LATEST, remark);
                }
                Some(subscription) => {
                    let kind = subscription.expression_type.as_deref();
                    if let Some(refusal) = unsupported_filter(request, kind) {
                        return Some(refusal);
                    }
                    subscription_codes(&subscription)
                }
            }
        };
        if header.sys_flag & PULL_COMMIT_OFFSET != 0 && header.commit_offset >= 0 {
            self.state.commit_offset(
                &header.consumer_group,
                &header.topic,
                header.queue_id,
                header.commit_offset,
            );
        }
        let max = usize::try_from(header.max_msg_nums).unwrap_or(0).max(1);
        let route = (group.broker_id, group.which_broker_when_consume_slowly);
        let mut answer = self
            .pull_once(request, &header, max, codes.as_deref(), route)
            .await;
        let not_found = answer
            .as_ref()
            .is_some_and(|r| r.code == ResponseCode::PULL_NOT_FOUND.0);
        if not_found && header.sys_flag & PULL_SUSPEND != 0 {
            let wait = if config.long_polling_enable {
                Duration::from_millis(u64::try_from(header.suspend_timeout_millis).unwrap_or(0))
            } else {
                config.short_polling_time
            };
            let woken = self.long_poll.wait(
                self.store.shared(),
                &header.topic,
                header.queue_id,
                header.queue_offset,
            );
            let timer = glommio::timer::sleep(wait);
            let _ = select(woken, Box::pin(timer)).await;
            answer = self
                .pull_once(request, &header, max, codes.as_deref(), route)
                .await;
        }
        answer
    }

    /// One pull; `group` is the consumer group's (`brokerId`, `whichBrokerWhenConsumeSlowly`),
    /// for the broker the answer suggests.
    async fn pull_once(
        &self,
        request: &RemotingCommand,
        header: &PullMessageRequestHeader,
        max: usize,
        codes: Option<&[i64]>,
        group: (i64, i64),
    ) -> Response {
        let accepts = |code: i64| codes.is_none_or(|codes| codes.contains(&code));
        let filter = PullFilter {
            tags_codes: codes.map(|_| &accepts as &dyn Fn(i64) -> bool),
        };
        let started = std::time::Instant::now();
        let result = match self
            .reader
            .get_message(
                &header.topic,
                header.queue_id,
                header.queue_offset,
                max,
                &filter,
            )
            .await
        {
            Ok(result) => result,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        let elapsed = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.state
            .stats
            .record_get(self.shard, result.messages.len() as u64, elapsed);
        let code = match result.status {
            GetMessageStatus::Found => ResponseCode::SUCCESS,
            GetMessageStatus::MessageWasRemoving | GetMessageStatus::NoMatchedMessage => {
                ResponseCode::PULL_RETRY_IMMEDIATELY
            }
            GetMessageStatus::NoMatchedLogicQueue | GetMessageStatus::NoMessageInQueue => {
                if header.queue_offset == 0 {
                    ResponseCode::PULL_NOT_FOUND
                } else {
                    ResponseCode::PULL_OFFSET_MOVED
                }
            }
            GetMessageStatus::OffsetFoundNull | GetMessageStatus::OffsetOverflowOne => {
                ResponseCode::PULL_NOT_FOUND
            }
            GetMessageStatus::OffsetOverflowBadly | GetMessageStatus::OffsetTooSmall => {
                ResponseCode::PULL_OFFSET_MOVED
            }
        };
        // Java names the status in every answer, FOUND too.
        let remark = Some(result.status.java_name().to_owned());
        // 4.9's rule, whatever the role: with slaveReadEnable, a pull reading what is no
        // longer in memory goes to the group's slow-consumer broker, others to its broker;
        // without, to the master.
        let suggest_which_broker_id = if !self.state.runtime().slave_read_enable {
            0
        } else if result.suggest_pulling_from_slave {
            group.1
        } else {
            group.0
        };
        let mut response = RemotingCommand::response_to(request, code, remark);
        response.set_header(&PullMessageResponseHeader {
            suggest_which_broker_id,
            next_begin_offset: result.next_begin_offset,
            min_offset: result.min_offset,
            max_offset: result.max_offset,
            offset_delta: None,
            topic_sys_flag: None,
            group_sys_flag: None,
            forbidden_type: None,
        });
        response.body_parts = result.parts;
        Some(response)
    }

    async fn heartbeat(&self, connection: &ConnectionInfo, request: &RemotingCommand) -> Response {
        // An object only: serde would read a struct from an array too, where Java's fastjson
        // gives null (and its NullPointerException).
        let data: HeartbeatData = match crate::config::fastjson::parse_lenient(&request.body)
            .and_then(|v| match v {
                serde_json::Value::Object(_) => {
                    serde_json::from_value(v).map_err(|e| e.to_string())
                }
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
            if let Some(group) = self.state.group_or_create(&consumer.group_name).await {
                self.state
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
        let changed = self.state.heartbeat(&client, &data);
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
        &self,
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
            self.state.unregister(connection.id, Some(group));
        }
        Some(RemotingCommand::success_to(request))
    }

    fn consumer_list(&self, request: &RemotingCommand) -> Response {
        let header = match request.decode_header::<GetConsumerListByGroupRequestHeader>() {
            Ok(header) => header,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        let ids = self.state.consumer_ids(&header.consumer_group);
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

    fn query_consumer_offset(&self, request: &RemotingCommand) -> Response {
        let header = match request.decode_header::<QueryConsumerOffsetRequestHeader>() {
            Ok(header) => header,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        let committed =
            self.state
                .committed_offset(&header.consumer_group, &header.topic, header.queue_id);
        let offset = match committed {
            Some(offset) if offset >= 0 => Some(offset),
            _ => {
                // Never consumed: start from 0 if the queue still begins there (Java also
                // checks that its first message is in memory).
                let min = self
                    .reader
                    .min_offset_in_queue(&header.topic, header.queue_id);
                (min <= 0 || header.set_zero_if_not_found == Some(true)).then_some(0)
            }
        };
        let Some(offset) = offset else {
            return error(
                request,
                ResponseCode::QUERY_NOT_FOUND,
                "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
            );
        };
        let mut response = RemotingCommand::success_to(request);
        response.set_header(&QueryConsumerOffsetResponseHeader {
            offset: Some(offset),
        });
        Some(response)
    }

    fn update_consumer_offset(&self, request: &RemotingCommand) -> Response {
        let header = match request.decode_header::<UpdateConsumerOffsetRequestHeader>() {
            Ok(header) => header,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        self.state.commit_offset(
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            header.commit_offset,
        );
        Some(RemotingCommand::success_to(request))
    }

    async fn max_offset(&self, request: &RemotingCommand) -> Response {
        let header = match request.decode_header::<GetMaxOffsetRequestHeader>() {
            Ok(header) => header,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        // A put answered before this request counts, as against Java's broker.
        self.reader.dispatched_to_committed(DISPATCH_WAIT_MAX).await;
        let offset = self
            .reader
            .max_offset_in_queue(&header.topic, header.queue_id);
        offset_response(request, offset)
    }

    fn min_offset(&self, request: &RemotingCommand) -> Response {
        let header = match request.decode_header::<GetMinOffsetRequestHeader>() {
            Ok(header) => header,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        let offset = self
            .reader
            .min_offset_in_queue(&header.topic, header.queue_id);
        offset_response(request, offset)
    }

    async fn earliest_time(&self, request: &RemotingCommand) -> Response {
        let header = match request.decode_header::<GetEarliestMsgStoretimeRequestHeader>() {
            Ok(header) => header,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        let time = match self
            .reader
            .earliest_message_time(&header.topic, header.queue_id)
            .await
        {
            Ok(time) => time.unwrap_or(-1),
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        let mut response = RemotingCommand::success_to(request);
        response.set_header(&GetEarliestMsgStoretimeResponseHeader { timestamp: time });
        Some(response)
    }

    async fn search_offset(&self, request: &RemotingCommand) -> Response {
        let header = match request.decode_header::<SearchOffsetRequestHeader>() {
            Ok(header) => header,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
        match self
            .reader
            .offset_by_time(&header.topic, header.queue_id, header.timestamp)
            .await
        {
            Ok(offset) => offset_response(request, offset),
            Err(e) => error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        }
    }

    async fn create_topic(&self, request: &RemotingCommand) -> Response {
        // `order` starts false in Java's header and stays so when absent; the template topic
        // is not used (the queues and perm come with the request).
        let defaults = [("order", "false"), ("defaultTopic", "")];
        let header = match CreateTopicRequestHeader::read_from(&with_defaults(request, &defaults)) {
            Ok(header) => header,
            Err(e) => return header_refusal(request, &e),
        };
        if let Some(problem) = invalid_topic_remark(&header.topic) {
            return error(request, ResponseCode::SYSTEM_ERROR, problem);
        }
        // A client may not redefine the broker's own topics (`TBW102` without its inherit
        // bit would end auto-creation; the delay levels live in `SCHEDULE_TOPIC_XXXX`).
        if self.state.is_system_topic(&header.topic) {
            let remark = format!("The topic[{}] is conflict with system topic.", header.topic);
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        }
        self.state
            .put_topic(TopicConfig {
                read_queue_nums: header.read_queue_nums,
                write_queue_nums: header.write_queue_nums,
                perm: header.perm,
                topic_filter_type: header.topic_filter_type.clone(),
                topic_sys_flag: header.topic_sys_flag.unwrap_or(0),
                order: header.order,
                ..TopicConfig::named(&header.topic)
            })
            .await;
        Some(RemotingCommand::success_to(request))
    }
}

impl RequestHandler for BrokerHandler {
    async fn handle(&self, connection: ConnectionInfo, request: RemotingCommand) -> Response {
        self.process(connection, request).await
    }

    fn connection_opened(&self, connection: ConnectionInfo, outbound: Outbound) {
        self.state.connection_opened(connection.id, outbound);
    }

    async fn connection_closed(&self, connection: ConnectionInfo) {
        for group in self.state.unregister(connection.id, None) {
            tracing::info!(group, peer = %connection.peer, "consumer left with its connection");
        }
    }
}

/// Adds what Java's send processors put in every answer once the header decoded: the
/// region and the trace switch (`MSG_REGION`, `TRACE_ON`).
fn add_region_fields(response: &mut RemotingCommand) {
    let fields = response.ext_fields.get_or_insert_with(ExtFields::new);
    fields.insert("MSG_REGION", "DefaultRegion");
    fields.insert("TRACE_ON", "true");
}

/// [`add_region_fields`] on a send's answer.
fn with_region_fields(mut response: Response) -> Response {
    if let Some(response) = response.as_mut() {
        add_region_fields(response);
    }
    response
}

/// The answer to a request whose header did not decode: a missing topic as Java answers the
/// null it decodes and then validates (`The specified topic is blank.`), anything else with
/// the field and what is wrong with it.
pub(super) fn header_refusal(request: &RemotingCommand, e: &HeaderError) -> Response {
    let remark = match e {
        HeaderError::MissingField {
            field: "topic" | "b",
        } => "The specified topic is blank.".into(),
        other => other.to_string(),
    };
    error(request, ResponseCode::SYSTEM_ERROR, remark)
}

/// A request's extFields with `defaults` for the fields it lacks: those Java goes on
/// without (its decoder only logs a missing `@CFNotNull` field) and that ferromq does not
/// need either.
pub(super) fn with_defaults<'a>(
    request: &'a RemotingCommand,
    defaults: &[(&'static str, &'static str)],
) -> Cow<'a, ExtFields> {
    static EMPTY: ExtFields = ExtFields::EMPTY;
    let given = request.ext_fields.as_ref().unwrap_or(&EMPTY);
    if defaults.iter().all(|(key, _)| given.get(key).is_some()) {
        return Cow::Borrowed(given);
    }
    // Rare (no Java client leaves these out): the copy is paid only then.
    let mut fields = given.clone();
    for (key, value) in defaults {
        if fields.get(key).is_none() {
            fields.insert(*key, *value);
        }
    }
    Cow::Owned(fields)
}

/// Whether a send names no topic.
fn send_topic_missing(request: &RemotingCommand) -> bool {
    let key = if request.request_code() == RequestCode::SEND_MESSAGE {
        "topic"
    } else {
        "b"
    };
    request.ext(key).is_none()
}

/// The V1 view of a send's header, decoded as Java decodes it: SEND_MESSAGE_V2 and
/// SEND_BATCH_MESSAGE strictly (`FastCodesHeader`: every number present must parse); a
/// missing producer group or default topic as empty (Java goes on with the null, which it
/// needs only to create a topic); a missing topic as blank, which the topic check refuses.
fn decode_send_header(request: &RemotingCommand) -> Result<SendMessageRequestHeader, HeaderError> {
    if request.request_code() == RequestCode::SEND_MESSAGE {
        let defaults = [("producerGroup", ""), ("topic", ""), ("defaultTopic", "")];
        SendMessageRequestHeader::read_from(&with_defaults(request, &defaults))
    } else {
        let defaults = [("a", ""), ("b", ""), ("c", "")];
        read_strict::<SendMessageRequestHeaderV2>(&with_defaults(request, &defaults)).map(v1_header)
    }
}

/// A CommitLog offset as Java's `long` (offsets stay far below `i64::MAX`).
fn physical_i64(offset: u64) -> i64 {
    i64::try_from(offset).unwrap_or(i64::MAX)
}

/// Whether batch properties ask for a delay level (`DELAY` > 0), which a batch may not.
fn has_delay_level(properties: &str) -> bool {
    properties
        .split('\u{2}')
        .filter_map(|pair| pair.split_once('\u{1}'))
        .any(|(name, value)| name == "DELAY" && value.trim().parse::<i32>().is_ok_and(|l| l > 0))
}

fn offset_response(request: &RemotingCommand, offset: i64) -> Response {
    let mut response = RemotingCommand::success_to(request);
    response.set_header(&OffsetResponseHeader { offset });
    Some(response)
}

/// The V1 header of a V2 one (`SendMessageRequestHeaderV2.createSendMessageRequestHeaderV1`).
fn v1_header(v2: SendMessageRequestHeaderV2) -> SendMessageRequestHeader {
    SendMessageRequestHeader {
        producer_group: v2.a,
        topic: v2.b,
        default_topic: v2.c,
        default_topic_queue_nums: v2.d,
        queue_id: v2.e,
        sys_flag: v2.f,
        born_timestamp: v2.g,
        flag: v2.h,
        properties: v2.i,
        reconsume_times: v2.j,
        unit_mode: v2.k,
        max_reconsume_times: v2.l,
        batch: v2.m,
        broker_name: None,
    }
}

fn describe_topic(topic: &TopicConfig) -> String {
    format!(
        "TopicConfig [topicName={}, readQueueNums={}, writeQueueNums={}, perm={}, \
         topicFilterType={}, topicSysFlag={}, order={}]",
        topic.topic_name,
        topic.read_queue_nums,
        topic.write_queue_nums,
        permission_text(topic.perm),
        topic.topic_filter_type,
        topic.topic_sys_flag,
        topic.order
    )
}

fn permission_text(perm: i32) -> String {
    let bit = |mask: i32, c: char| if perm & mask != 0 { c } else { '-' };
    format!(
        "{}{}{}",
        bit(PERM_READ, 'R'),
        bit(PERM_WRITE, 'W'),
        bit(1, 'X')
    )
}

/// A queue for a send that named none: spread by request id (Java picks at random).
fn queue_for(opaque: i32, queues: i32) -> i32 {
    opaque.rem_euclid(queues.max(1))
}

/// The refusal of a pull whose subscription is not a tag expression (`SQL92`): ferromq
/// filters by tags only, and answers as a Java broker with `enablePropertyFilter=false`
/// (its default) does.
fn unsupported_filter(
    request: &RemotingCommand,
    expression_type: Option<&str>,
) -> Option<RemotingCommand> {
    let kind = expression_type.unwrap_or_default();
    if kind.is_empty() || kind == "TAG" {
        return None;
    }
    let remark = format!("The broker does not support consumer to filter message by {kind}");
    error(request, ResponseCode::SYSTEM_ERROR, remark)
}

/// Tag hash codes of a TAG expression; `None` for "all" (`*` or empty).
fn tag_codes(expression: &str) -> Option<Vec<i64>> {
    let expression = expression.trim();
    if expression.is_empty() || expression == "*" {
        return None;
    }
    Some(
        expression
            .split("||")
            .map(str::trim)
            .filter(|tag| !tag.is_empty())
            .map(|tag| tags_code(Some(tag)))
            .collect(),
    )
}

/// Tag codes of a heartbeat subscription, from its `subString` as Java's `FilterAPI` builds
/// them (each tag trimmed). The `codeSet` the client sent is not used: a Java client sends
/// exactly these codes, while rocketmq-client-rust 1.0.0 hashes the tags untrimmed (for
/// `TagA || TagC`, the codes of `"TagA "` and `" TagC"`), which would match no message.
fn subscription_codes(subscription: &SubscriptionData) -> Option<Vec<i64>> {
    tag_codes(&subscription.sub_string)
}
