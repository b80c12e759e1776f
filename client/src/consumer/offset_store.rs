//! Consumer offsets: remote on the broker for clustering (`RemoteBrokerOffsetStore`), a
//! local file for broadcasting (`LocalFileOffsetStore`).
//!
//! Both keep the latest consumed offset of each owned queue in memory; `persist_all` (every
//! `persist_consumer_offset_interval` and on shutdown) writes them out. The remote store sends
//! UPDATE_CONSUMER_OFFSET oneway as Java does, except [`OffsetStore::persist`] (queue removal,
//! shutdown), which waits for the broker's answer so the next owner reads it.

use super::offset_file;
use super::MessageQueue;
use crate::error::{ClientError, Result};
use crate::instance::{expect_success, ClientInstance};
use ferromq_protocol::remoting::command::RemotingCommand;
use ferromq_protocol::remoting::headers::UpdateConsumerOffsetRequestHeader;
use ferromq_protocol::remoting::request_code::RequestCode;
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

/// Where [`OffsetStore::read`] looks (`ReadOffsetType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadOffsetType {
    /// Memory only (`READ_FROM_MEMORY`).
    Memory,
    /// The broker or file (`READ_FROM_STORE`).
    Store,
    /// Memory, else the store (`MEMORY_FIRST_THEN_STORE`).
    MemoryFirstThenStore,
}

#[derive(Debug)]
enum Kind {
    Remote,
    LocalFile(PathBuf),
}

/// The offsets of one consumer group (`OffsetStore`).
#[doc(alias = "RemoteBrokerOffsetStore")]
#[doc(alias = "LocalFileOffsetStore")]
#[derive(Debug)]
pub struct OffsetStore {
    group: String,
    kind: Kind,
    table: Mutex<HashMap<MessageQueue, i64>>,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl OffsetStore {
    /// The broker-side store of a clustering group.
    #[must_use]
    pub fn remote(group: &str) -> OffsetStore {
        OffsetStore {
            group: group.to_owned(),
            kind: Kind::Remote,
            table: Mutex::new(HashMap::new()),
        }
    }

    /// The file store of a broadcasting member, at `path` (see [`offset_file::offsets_path`]).
    #[must_use]
    pub fn local_file(group: &str, path: PathBuf) -> OffsetStore {
        OffsetStore {
            group: group.to_owned(),
            kind: Kind::LocalFile(path),
            table: Mutex::new(HashMap::new()),
        }
    }

    /// Loads the file of a local store; nothing for a remote one.
    ///
    /// # Errors
    /// [`ClientError::InvalidMessage`] when the file exists but cannot be read.
    pub fn load(&self) -> Result<()> {
        if let Kind::LocalFile(path) = &self.kind {
            let table = offset_file::read(path).map_err(ClientError::InvalidMessage)?;
            lock(&self.table).extend(table);
        }
        Ok(())
    }

    /// Records a consumed offset; with `increase_only` a smaller one is ignored.
    pub fn update(&self, mq: &MessageQueue, offset: i64, increase_only: bool) {
        let mut table = lock(&self.table);
        let entry = table.entry(mq.clone()).or_insert(offset);
        if !increase_only || offset > *entry {
            *entry = offset;
        }
    }

    /// Forgets a queue (it is no longer owned).
    pub fn remove(&self, mq: &MessageQueue) {
        lock(&self.table).remove(mq);
    }

    /// The offset in memory, if any.
    #[must_use]
    pub fn in_memory(&self, mq: &MessageQueue) -> Option<i64> {
        lock(&self.table).get(mq).copied()
    }

    /// Reads the offset of `mq`: -1 when the group has none.
    ///
    /// # Errors
    /// Broker or network errors of a remote read.
    pub async fn read(
        &self,
        instance: &ClientInstance,
        mq: &MessageQueue,
        from: ReadOffsetType,
    ) -> Result<i64> {
        if from != ReadOffsetType::Store {
            if let Some(offset) = self.in_memory(mq) {
                return Ok(offset);
            }
            if from == ReadOffsetType::Memory {
                return Ok(-1);
            }
        }
        let offset = match &self.kind {
            Kind::LocalFile(path) => {
                let table = offset_file::read(path).map_err(ClientError::InvalidMessage)?;
                table.get(mq).copied().unwrap_or(-1)
            }
            Kind::Remote => instance
                .query_consumer_offset(&self.group, mq)
                .await?
                .unwrap_or(-1),
        };
        if offset >= 0 {
            self.update(mq, offset, false);
        }
        Ok(offset)
    }

    fn update_request(&self, mq: &MessageQueue, offset: i64) -> RemotingCommand {
        let header = UpdateConsumerOffsetRequestHeader {
            consumer_group: self.group.clone(),
            topic: mq.topic.clone(),
            queue_id: mq.queue_id,
            commit_offset: offset,
        };
        RemotingCommand::request_with_header(RequestCode::UPDATE_CONSUMER_OFFSET, &header)
    }

    /// Writes the offsets of `mqs` out (`persistAll`): oneway updates to the brokers, or the
    /// file. Failures are logged; the next round retries.
    pub async fn persist_all(&self, instance: &ClientInstance, mqs: &[MessageQueue]) {
        let offsets: Vec<(MessageQueue, i64)> = {
            let table = lock(&self.table);
            mqs.iter()
                .filter_map(|mq| table.get(mq).map(|o| (mq.clone(), *o)))
                .collect()
        };
        match &self.kind {
            Kind::LocalFile(path) => {
                let mut all: BTreeMap<MessageQueue, i64> =
                    offset_file::read(path).unwrap_or_default();
                all.extend(offsets);
                if let Err(error) = offset_file::write_atomically(path, &offset_file::encode(&all))
                {
                    tracing::warn!(%error, path = %path.display(), "cannot persist offsets");
                }
            }
            Kind::Remote => {
                for (mq, offset) in offsets {
                    let sent = instance.update_consumer_offset(&self.group, &mq, offset);
                    if let Err(error) = sent.await {
                        tracing::warn!(%error, %mq, offset, "cannot persist consumer offset");
                    }
                }
            }
        }
    }

    /// Writes the offset of one queue and, for the broker, waits for its answer.
    ///
    /// # Errors
    /// Broker or network errors.
    pub async fn persist(&self, instance: &ClientInstance, mq: &MessageQueue) -> Result<()> {
        let Some(offset) = self.in_memory(mq) else {
            return Ok(());
        };
        match &self.kind {
            Kind::LocalFile(_) => {
                self.persist_all(instance, std::slice::from_ref(mq)).await;
                Ok(())
            }
            Kind::Remote => {
                let addr = instance.master_addr_of(mq).await?;
                let request = self.update_request(mq, offset);
                let timeout = instance.config().request_timeout;
                expect_success(instance.invoke_broker(&addr, request, timeout).await?)?;
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn update_increase_only_never_goes_back() {
        let store = OffsetStore::remote("g");
        let mq = MessageQueue::new("T", "b", 0);
        store.update(&mq, 5, true);
        store.update(&mq, 3, true);
        assert_eq!(store.in_memory(&mq), Some(5));
        store.update(&mq, 3, false);
        assert_eq!(store.in_memory(&mq), Some(3));
        store.remove(&mq);
        assert_eq!(store.in_memory(&mq), None);
    }
}
