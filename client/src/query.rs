//! Looking messages up (Java `MQAdminImpl.viewMessage` / `queryMessage`): by offset message
//! id (VIEW_MESSAGE_BY_ID to the broker the id names) and by key or `UNIQ_KEY`
//! (QUERY_MESSAGE to every master of the topic, answers merged).

use super::error::{ClientError, Result};
use super::instance::{expect_success, ClientInstance};
use super::message::{decode_messages, MessageExt};
use ferromq_protocol::message::decode_offset_msg_id;
use ferromq_protocol::remoting::headers::{QueryMessageRequestHeader, ViewMessageRequestHeader};
use ferromq_protocol::remoting::{RemotingCommand, RequestCode, ResponseCode};

/// The extFields flag of a QUERY_MESSAGE by `UNIQ_KEY` (`MixAll.UNIQUE_MSG_QUERY_FLAG`).
pub const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";

impl ClientInstance {
    /// The message an offset message id points at (its store host and CommitLog offset).
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] for an id that is not an offset id; the broker's
    /// error when nothing is stored there.
    pub async fn view_message(&self, offset_msg_id: &str) -> Result<MessageExt> {
        let (host, offset) = decode_offset_msg_id(offset_msg_id).ok_or_else(|| {
            ClientError::InvalidMessage(format!("{offset_msg_id} is not an offset message id"))
        })?;
        let header = ViewMessageRequestHeader {
            offset,
            topic: None,
        };
        let request =
            RemotingCommand::request_with_header(RequestCode::VIEW_MESSAGE_BY_ID, &header);
        let response = expect_success(
            self.invoke_broker(&host.to_string(), request, self.config().request_timeout)
                .await?,
        )?;
        decode_messages(&response.body)?
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::BadResponse("VIEW_MESSAGE_BY_ID without a message".into()))
    }

    /// Messages of `topic` whose key (a `KEYS` token) is `key`, stored between `begin_ms`
    /// and `end_ms`, at most `max_num` per broker, from every master of the topic.
    ///
    /// # Errors
    /// No route; connection failures. Brokers that find nothing add nothing.
    pub async fn query_message(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<MessageExt>> {
        self.query(topic, key, max_num, begin_ms, end_ms, false)
            .await
    }

    /// The messages whose `UNIQ_KEY` is `msg_id` (what `queryMsgById` does with a client id);
    /// a message retried or stored twice may appear more than once.
    ///
    /// # Errors
    /// No route; connection failures.
    pub async fn query_message_by_uniq_key(
        &self,
        topic: &str,
        msg_id: &str,
    ) -> Result<Vec<MessageExt>> {
        let found = self.query(topic, msg_id, 32, 0, i64::MAX, true).await?;
        Ok(found.into_iter().filter(|m| m.msg_id() == msg_id).collect())
    }

    async fn query(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin_ms: i64,
        end_ms: i64,
        unique: bool,
    ) -> Result<Vec<MessageExt>> {
        let route = self.topic_route(topic).await?;
        let mut found = Vec::new();
        for broker in &route.data.broker_datas {
            let Some(addr) = self.any_broker_addr(&broker.broker_name) else {
                continue;
            };
            let header = QueryMessageRequestHeader {
                topic: topic.to_owned(),
                key: key.to_owned(),
                max_num,
                begin_timestamp: begin_ms,
                end_timestamp: end_ms,
            };
            let mut request =
                RemotingCommand::request_with_header(RequestCode::QUERY_MESSAGE, &header);
            if unique {
                if let Some(fields) = request.ext_fields.as_mut() {
                    fields.insert(UNIQUE_MSG_QUERY_FLAG, "true");
                }
            }
            // Java gives an index query three request timeouts.
            let timeout = self.config().request_timeout * 3;
            let response = self.invoke_broker(&addr, request, timeout).await?;
            if response.code == ResponseCode::QUERY_NOT_FOUND.0 {
                continue;
            }
            let response = expect_success(response)?;
            found.extend(decode_messages(&response.body)?);
        }
        Ok(found)
    }
}
