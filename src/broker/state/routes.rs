//! Topic routes the broker asks the name servers for (the lookups of Java 5.x's
//! `TopicRouteInfoManager`): QUERY_ASSIGNMENT divides a topic's queues of the whole
//! cluster, which only the name servers know.
//!
//! A shard asks with [`RouteLookups::route`]; the lookup service (`services::routes`), on a
//! thread of its own with a blocking name-server client, takes the requests from
//! [`RouteLookups::take_requests`] and answers each. Without that service (no name
//! server configured) every lookup answers `None` at once.

use crate::remoting::body::TopicRouteData;
use std::sync::mpsc::{Receiver, Sender};
use std::sync::Mutex;

/// One lookup: the topic, and where its route (or `None`: no such topic, no name server
/// answered) goes.
#[derive(Debug)]
pub struct RouteLookup {
    /// The topic.
    pub topic: String,
    /// The answer.
    pub answer: futures::channel::oneshot::Sender<Option<TopicRouteData>>,
}

/// The queue of lookups, from the shards to the lookup service.
#[derive(Debug)]
pub struct RouteLookups {
    requests: Sender<RouteLookup>,
    /// Taken once, by the lookup service.
    receiver: Mutex<Option<Receiver<RouteLookup>>>,
    /// Whether a service takes the lookups (set when it takes them).
    served: std::sync::atomic::AtomicBool,
}

impl Default for RouteLookups {
    fn default() -> Self {
        let (requests, receiver) = std::sync::mpsc::channel();
        RouteLookups {
            requests,
            receiver: Mutex::new(Some(receiver)),
            served: std::sync::atomic::AtomicBool::new(false),
        }
    }
}

impl RouteLookups {
    /// The route of `topic` as the name servers know it; `None` when no service looks
    /// routes up, no name server answered or none knows the topic.
    pub async fn route(&self, topic: &str) -> Option<TopicRouteData> {
        if !self.served.load(std::sync::atomic::Ordering::Acquire) {
            return None;
        }
        let (answer, answered) = futures::channel::oneshot::channel();
        let lookup = RouteLookup {
            topic: topic.to_owned(),
            answer,
        };
        self.requests.send(lookup).ok()?;
        answered.await.ok().flatten()
    }

    /// The lookups, for the one service that answers them (`None` once taken).
    pub fn take_requests(&self) -> Option<Receiver<RouteLookup>> {
        let receiver = super::lock(&self.receiver).take();
        if receiver.is_some() {
            self.served
                .store(true, std::sync::atomic::Ordering::Release);
        }
        receiver
    }
}
