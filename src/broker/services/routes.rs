//! The route lookup service (Java 5.x's `TopicRouteInfoManager`): answers the shards'
//! [`RouteLookups`](crate::broker::state::routes::RouteLookups) from the name servers in
//! `namesrvAddr`, first that answers, keeping each route for [`ROUTE_KEPT`] as Java
//! refreshes its table every 30 s.
//!
//! Runs on a thread of its own with the blocking admin client: lookups are rare (a
//! consumer's rebalance asks every 20 s) and may wait on a dead name server, which no
//! shard should.

use crate::broker::state::routes::RouteLookup;
use crate::broker::state::BrokerState;
use crate::remoting::body::TopicRouteData;
use ferromq_client::admin::AdminClient;
use ferromq_shards::Shutdown;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a route is answered from memory before the name servers are asked again.
pub const ROUTE_KEPT: Duration = Duration::from_secs(30);
/// How long one name server may take to answer.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(3);
/// How often the thread looks at the shutdown signal while idle.
const IDLE_LOOK: Duration = Duration::from_millis(100);

/// Starts the service when the broker has name servers; it ends after `shutdown`.
#[must_use]
pub fn spawn(state: &Arc<BrokerState>, shutdown: Shutdown) -> Option<std::thread::JoinHandle<()>> {
    if state.config.namesrv_addr.is_empty() {
        return None;
    }
    let requests = state.routes.take_requests()?;
    let namesrvs = state.config.namesrv_addr.join(";");
    let tls = state.own_tls.clone();
    let thread = std::thread::Builder::new()
        .name("routes".to_owned())
        .spawn(move || {
            let mut admin = match AdminClient::new(Some(&namesrvs), LOOKUP_TIMEOUT) {
                Ok(admin) => admin,
                Err(error) => {
                    tracing::error!(%error, "route lookups: no name server client");
                    return;
                }
            };
            admin.set_tls(tls);
            let mut kept: HashMap<String, (Instant, TopicRouteData)> = HashMap::new();
            while !shutdown.is_triggered() {
                let Ok(lookup) = requests.recv_timeout(IDLE_LOOK) else {
                    continue;
                };
                let route = lookup_route(&mut admin, &mut kept, &lookup);
                let _ = lookup.answer.send(route);
            }
        });
    match thread {
        Ok(thread) => Some(thread),
        Err(error) => {
            tracing::error!(%error, "cannot start the route lookup thread");
            None
        }
    }
}

/// The route of the lookup's topic, from memory while fresh, else from a name server.
fn lookup_route(
    admin: &mut AdminClient,
    kept: &mut HashMap<String, (Instant, TopicRouteData)>,
    lookup: &RouteLookup,
) -> Option<TopicRouteData> {
    let now = Instant::now();
    if let Some((at, route)) = kept.get(&lookup.topic) {
        if now.duration_since(*at) < ROUTE_KEPT {
            return Some(route.clone());
        }
    }
    match admin.topic_route(&lookup.topic) {
        Ok(route) => {
            kept.insert(lookup.topic.clone(), (now, route.clone()));
            Some(route)
        }
        Err(error) => {
            tracing::debug!(topic = lookup.topic, %error, "no route from the name servers");
            kept.remove(&lookup.topic);
            None
        }
    }
}
