//! Queue allocation strategies: which queues of a topic one member of a consumer group takes.
//!
//! Both strategies are Java's, to the index: every member sorts the queue list and the member
//! id list the same way (the caller does it, as `RebalanceImpl` does), finds its own index and
//! takes a deterministic share, so members that see the same lists never overlap and together
//! cover every queue.

use super::MessageQueue;

/// A strategy that picks this member's queues (`AllocateMessageQueueStrategy`).
#[doc(alias = "AllocateMessageQueueStrategy")]
pub trait AllocateStrategy: Send + Sync + std::fmt::Debug {
    /// Java's strategy name (`AVG`, `AVG_BY_CIRCLE`).
    fn name(&self) -> &'static str;

    /// The queues of `mq_all` that `current_cid` consumes; `mq_all` and `cid_all` must be
    /// sorted. Empty when `current_cid` is not in `cid_all` or either list is empty.
    fn allocate(
        &self,
        group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue>;
}

fn index_of(
    group: &str,
    current_cid: &str,
    mq_all: &[MessageQueue],
    cid_all: &[String],
) -> Option<usize> {
    if current_cid.is_empty() || mq_all.is_empty() || cid_all.is_empty() {
        return None;
    }
    let index = cid_all.iter().position(|cid| cid == current_cid);
    if index.is_none() {
        tracing::info!(
            group,
            current_cid,
            ?cid_all,
            "this client is not in the member list yet"
        );
    }
    index
}

/// Contiguous blocks, the first `queues % members` members taking one extra
/// (`AllocateMessageQueueAveragely`, the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct AllocateMessageQueueAveragely;

impl AllocateStrategy for AllocateMessageQueueAveragely {
    fn name(&self) -> &'static str {
        "AVG"
    }

    fn allocate(
        &self,
        group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        let Some(index) = index_of(group, current_cid, mq_all, cid_all) else {
            return Vec::new();
        };
        let (queues, members) = (mq_all.len(), cid_all.len());
        let rest = queues % members;
        let average = if queues <= members {
            1
        } else if rest > 0 && index < rest {
            queues / members + 1
        } else {
            queues / members
        };
        let start = if rest > 0 && index < rest {
            index * average
        } else {
            index * average + rest
        };
        let range = average.min(queues.saturating_sub(start));
        mq_all.iter().skip(start).take(range).cloned().collect()
    }
}

/// Round robin: member `i` takes queues `i`, `i + n`, `i + 2n`...
/// (`AllocateMessageQueueAveragelyByCircle`).
#[derive(Clone, Copy, Debug, Default)]
pub struct AllocateMessageQueueAveragelyByCircle;

impl AllocateStrategy for AllocateMessageQueueAveragelyByCircle {
    fn name(&self) -> &'static str {
        "AVG_BY_CIRCLE"
    }

    fn allocate(
        &self,
        group: &str,
        current_cid: &str,
        mq_all: &[MessageQueue],
        cid_all: &[String],
    ) -> Vec<MessageQueue> {
        let Some(index) = index_of(group, current_cid, mq_all, cid_all) else {
            return Vec::new();
        };
        mq_all
            .iter()
            .enumerate()
            .skip(index)
            .filter(|(i, _)| i % cid_all.len() == index)
            .map(|(_, mq)| mq.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(n: i32) -> Vec<MessageQueue> {
        let mut all: Vec<MessageQueue> = (0..n)
            .map(|i| MessageQueue {
                topic: "T".into(),
                broker_name: if i % 2 == 0 { "a".into() } else { "b".into() },
                queue_id: i / 2,
            })
            .collect();
        all.sort();
        all
    }

    fn cids(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("10.0.0.1@{i}")).collect()
    }

    fn ids(
        strategy: &dyn AllocateStrategy,
        mqs: &[MessageQueue],
        cids: &[String],
        me: usize,
    ) -> Vec<usize> {
        strategy
            .allocate("g", &cids[me], mqs, cids)
            .iter()
            .map(|q| mqs.iter().position(|m| m == q).unwrap())
            .collect()
    }

    #[test]
    fn averagely_matches_java_blocks() {
        let s = AllocateMessageQueueAveragely;
        let mqs = queues(8);
        let three = cids(3);
        assert_eq!(ids(&s, &mqs, &three, 0), vec![0, 1, 2]);
        assert_eq!(ids(&s, &mqs, &three, 1), vec![3, 4, 5]);
        assert_eq!(ids(&s, &mqs, &three, 2), vec![6, 7]);
        let five = cids(5);
        let small = queues(3);
        assert_eq!(ids(&s, &small, &five, 2), vec![2]);
        assert!(ids(&s, &small, &five, 3).is_empty());
    }

    #[test]
    fn by_circle_matches_java_round_robin() {
        let s = AllocateMessageQueueAveragelyByCircle;
        let mqs = queues(8);
        let three = cids(3);
        assert_eq!(ids(&s, &mqs, &three, 0), vec![0, 3, 6]);
        assert_eq!(ids(&s, &mqs, &three, 1), vec![1, 4, 7]);
        assert_eq!(ids(&s, &mqs, &three, 2), vec![2, 5]);
    }

    #[test]
    fn every_queue_owned_exactly_once_for_any_sizes() {
        let strategies: [&dyn AllocateStrategy; 2] = [
            &AllocateMessageQueueAveragely,
            &AllocateMessageQueueAveragelyByCircle,
        ];
        for strategy in strategies {
            for queue_count in 1..20 {
                for member_count in 1..8 {
                    let mqs = queues(queue_count);
                    let members = cids(member_count);
                    let mut owned = vec![0; mqs.len()];
                    for me in 0..member_count {
                        for i in ids(strategy, &mqs, &members, me) {
                            owned[i] += 1;
                        }
                    }
                    assert!(
                        owned.iter().all(|&n| n == 1),
                        "{} {queue_count} {member_count}",
                        strategy.name()
                    );
                }
            }
        }
    }

    #[test]
    fn a_stranger_gets_nothing() {
        let mqs = queues(4);
        assert!(AllocateMessageQueueAveragely
            .allocate("g", "x@y", &mqs, &cids(2))
            .is_empty());
        assert!(AllocateMessageQueueAveragelyByCircle
            .allocate("g", "x@y", &mqs, &[])
            .is_empty());
    }
}
