//! Rebalance decisions as pure functions: which queues this member should own, and what
//! changes against what it owns now (`RebalanceImpl`'s arithmetic, without the I/O).

use super::allocate::AllocateStrategy;
use super::{MessageModel, MessageQueue};
use std::collections::BTreeSet;

/// The queues of one topic this member should own (`rebalanceByTopic`): every readable queue
/// in broadcasting; in clustering, the strategy's share after sorting both lists as Java does.
#[must_use]
pub fn allocate_topic(
    model: MessageModel,
    strategy: &dyn AllocateStrategy,
    group: &str,
    client_id: &str,
    mut mq_all: Vec<MessageQueue>,
    mut cid_all: Vec<String>,
) -> BTreeSet<MessageQueue> {
    match model {
        MessageModel::Broadcasting => mq_all.into_iter().collect(),
        MessageModel::Clustering => {
            mq_all.sort();
            mq_all.dedup();
            cid_all.sort();
            cid_all.dedup();
            strategy
                .allocate(group, client_id, &mq_all, &cid_all)
                .into_iter()
                .collect()
        }
    }
}

/// What a rebalance changes for one topic.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Diff {
    /// Owned now, not any more: stop pulling, commit, unlock.
    pub removed: Vec<MessageQueue>,
    /// New: compute the start offset, lock if orderly, start pulling.
    pub added: Vec<MessageQueue>,
}

/// Compares the queues of `topic` owned now with the allocated ones
/// (`updateProcessQueueTableInRebalance`).
#[must_use]
pub fn diff<'a>(
    topic: &str,
    owned: impl IntoIterator<Item = &'a MessageQueue>,
    allocated: &BTreeSet<MessageQueue>,
) -> Diff {
    let owned: BTreeSet<&MessageQueue> = owned.into_iter().filter(|q| q.topic == topic).collect();
    Diff {
        removed: owned
            .iter()
            .filter(|q| !allocated.contains(**q))
            .map(|q| (*q).clone())
            .collect(),
        added: allocated
            .iter()
            .filter(|q| !owned.contains(q))
            .cloned()
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::super::allocate::AllocateMessageQueueAveragely;
    use super::*;

    fn mq(topic: &str, id: i32) -> MessageQueue {
        MessageQueue {
            topic: topic.into(),
            broker_name: "b".into(),
            queue_id: id,
        }
    }

    #[test]
    fn clustering_sorts_before_allocating() {
        let mqs = vec![mq("T", 3), mq("T", 1), mq("T", 0), mq("T", 2)];
        let cids = vec!["z@1".to_owned(), "a@1".to_owned()];
        let strategy = AllocateMessageQueueAveragely;
        let mine = allocate_topic(
            MessageModel::Clustering,
            &strategy,
            "g",
            "a@1",
            mqs.clone(),
            cids.clone(),
        );
        assert_eq!(mine, [mq("T", 0), mq("T", 1)].into_iter().collect());
        let all = allocate_topic(MessageModel::Broadcasting, &strategy, "g", "a@1", mqs, cids);
        assert_eq!(all.len(), 4);
    }

    #[test]
    fn diff_only_looks_at_the_topic() {
        let owned = [mq("T", 0), mq("T", 1), mq("U", 0)];
        let allocated = [mq("T", 1), mq("T", 2)].into_iter().collect();
        let d = diff("T", owned.iter(), &allocated);
        assert_eq!(d.removed, vec![mq("T", 0)]);
        assert_eq!(d.added, vec![mq("T", 2)]);
    }
}
