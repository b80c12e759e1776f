//! QueryRoute and QueryAssignment (Java `RouteActivity`): the topic's queues as this broker
//! has them, with this endpoint as the broker's endpoint.
//!
//! The broker's endpoints in an answer are the hosts the client asked with (the request's
//! `endpoints`) on this endpoint's port, as the proxy's cluster mode answers (its local mode
//! names the broker's IP instead, which a client behind NAT or on loopback may not reach);
//! a request without endpoints gets `brokerIP1` on this port, as the local mode answers.
//! Queues are listed as the proxy lists them: read-only ones first, then write-only, then
//! read-write, then, for a topic with no permission, `NONE` queues.

use super::proto::{
    Address, AddressScheme, Assignment, Broker, Code, Endpoints, MessageQueue, MessageType,
    Permission, QueryAssignmentRequest, QueryAssignmentResponse, QueryRouteRequest,
    QueryRouteResponse, Resource,
};
use super::{
    existing_topic, group_problem, name_of, ok, status, topic_config, topic_problem, Inner,
};
use crate::protocol::names::{PERM_READ, PERM_WRITE};
use crate::protocol::topic::TopicConfig;

/// Java's `MixAll.MASTER_ID`.
const MASTER_ID: i32 = 0;

/// QueryRoute.
pub(super) fn query_route(inner: &Inner, request: &QueryRouteRequest) -> QueryRouteResponse {
    let refused = |status| QueryRouteResponse {
        status: Some(status),
        message_queues: Vec::new(),
    };
    let config = match existing_topic(&inner.state, request.topic.as_ref()) {
        Ok(config) => config,
        Err(problem) => return refused(problem),
    };
    let topic = request.topic.clone().unwrap_or_default();
    let endpoints = request.endpoints.clone().unwrap_or_default();
    let broker = broker_of(inner, &endpoints);
    QueryRouteResponse {
        status: Some(ok()),
        message_queues: queues_of(&config, &topic, &broker),
    }
}

/// QueryAssignment: one assignment of queue -1 for this broker (the POP of any queue), or
/// one per readable queue for an ordered (FIFO) group.
pub(super) fn query_assignment(
    inner: &Inner,
    request: &QueryAssignmentRequest,
) -> QueryAssignmentResponse {
    let refused = |status| QueryAssignmentResponse {
        status: Some(status),
        assignments: Vec::new(),
    };
    // The proxy's order: the topic's name, the group's, then the route.
    if let Some(problem) = topic_problem(&inner.state, name_of(request.topic.as_ref())) {
        return refused(problem);
    }
    if let Some(problem) = group_problem(name_of(request.group.as_ref())) {
        return refused(problem);
    }
    let config = match topic_config(&inner.state, name_of(request.topic.as_ref())) {
        Ok(config) => config,
        Err(problem) => return refused(problem),
    };
    let topic = request.topic.clone().unwrap_or_default();
    let endpoints = request.endpoints.clone().unwrap_or_default();
    // TODO(grpc): a FIFO group (`consumeMessageOrderly`) gets one assignment per queue;
    // the broker's group table does not keep that key yet, so every group is concurrent.
    let fifo = false;
    let broker = broker_of(inner, &endpoints);
    let mut assignments = Vec::new();
    if config.perm & PERM_READ != 0 && config.read_queue_nums > 0 {
        let permission = permission_of(config.perm) as i32;
        let queue = |id| Assignment {
            message_queue: Some(MessageQueue {
                topic: Some(topic.clone()),
                id,
                permission,
                broker: Some(broker.clone()),
                accept_message_types: Vec::new(),
            }),
        };
        if fifo {
            assignments.extend((0..config.read_queue_nums).map(queue));
        } else {
            assignments.push(queue(-1));
        }
    }
    if assignments.is_empty() {
        return refused(status(Code::Forbidden, "no readable queue"));
    }
    QueryAssignmentResponse {
        status: Some(ok()),
        assignments,
    }
}

/// This broker as routes name it: its name, the master id, the asked hosts on our port.
fn broker_of(inner: &Inner, asked: &Endpoints) -> Broker {
    let port = i32::from(inner.port);
    let mut addresses: Vec<Address> = asked
        .addresses
        .iter()
        .map(|address| Address {
            host: address.host.clone(),
            port,
        })
        .collect();
    if addresses.is_empty() {
        // The proxy's local mode: the broker's own address on the gRPC port.
        addresses.push(Address {
            host: inner.state.config.broker_ip1.to_string(),
            port,
        });
    }
    let scheme = if asked.scheme == AddressScheme::Unspecified as i32 {
        AddressScheme::IPv4 as i32
    } else {
        asked.scheme
    };
    Broker {
        name: inner.state.config.broker_name.clone(),
        id: MASTER_ID,
        endpoints: Some(Endpoints { scheme, addresses }),
    }
}

/// The queues of `config` (`genMessageQueueFromQueueData`).
fn queues_of(config: &TopicConfig, topic: &Resource, broker: &Broker) -> Vec<MessageQueue> {
    let (reads, writes) = (
        config.read_queue_nums.max(0),
        config.write_queue_nums.max(0),
    );
    let readable = config.perm & PERM_READ != 0;
    let writable = config.perm & PERM_WRITE != 0;
    let (read_only, write_only, read_write, none) = match (readable, writable) {
        (true, true) => {
            let both = reads.min(writes);
            (reads - both, writes - both, both, 0)
        }
        (false, true) => (0, writes, 0, 0),
        (true, false) => (reads, 0, 0, 0),
        (false, false) => (0, 0, 0, reads.max(writes).max(1)),
    };
    let types = accept_message_types(config);
    let kinds = [
        (read_only, Permission::Read),
        (write_only, Permission::Write),
        (read_write, Permission::ReadWrite),
        (none, Permission::None),
    ];
    let mut queues = Vec::new();
    let mut id = 0;
    for (count, permission) in kinds {
        for _ in 0..count {
            queues.push(MessageQueue {
                topic: Some(topic.clone()),
                id,
                permission: permission as i32,
                broker: Some(broker.clone()),
                accept_message_types: types.clone(),
            });
            id += 1;
        }
    }
    queues
}

/// The message types a topic accepts, from its `message.type` attribute
/// (`TopicMessageType`): absent means NORMAL, as the proxy's metadata reads it; MIXED
/// accepts the four kinds; an unknown name UNSPECIFIED.
pub(super) fn accept_message_types(config: &TopicConfig) -> Vec<i32> {
    let kind = config
        .attributes
        .get("message.type")
        .map_or("NORMAL", String::as_str);
    let types: &[MessageType] = match kind {
        "NORMAL" => &[MessageType::Normal],
        "FIFO" => &[MessageType::Fifo],
        "DELAY" => &[MessageType::Delay],
        "TRANSACTION" => &[MessageType::Transaction],
        "MIXED" => &[
            MessageType::Normal,
            MessageType::Fifo,
            MessageType::Delay,
            MessageType::Transaction,
        ],
        _ => &[MessageType::Unspecified],
    };
    types.iter().map(|kind| *kind as i32).collect()
}

/// The permission of a topic's `perm` bits (`convertToPermission`).
fn permission_of(perm: i32) -> Permission {
    match (perm & PERM_READ != 0, perm & PERM_WRITE != 0) {
        (true, true) => Permission::ReadWrite,
        (true, false) => Permission::Read,
        (false, true) => Permission::Write,
        (false, false) => Permission::None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn broker() -> Broker {
        Broker {
            name: "b".to_owned(),
            id: 0,
            endpoints: None,
        }
    }

    #[test]
    fn queues_of_more_reads_than_writes_lists_read_only_first() {
        let config = TopicConfig {
            read_queue_nums: 4,
            write_queue_nums: 2,
            ..TopicConfig::default()
        };
        let topic = Resource {
            resource_namespace: String::new(),
            name: "t".to_owned(),
        };
        let queues = queues_of(&config, &topic, &broker());
        let shape: Vec<(i32, i32)> = queues.iter().map(|q| (q.id, q.permission)).collect();
        let (r, rw) = (Permission::Read as i32, Permission::ReadWrite as i32);
        assert_eq!(shape, [(0, r), (1, r), (2, rw), (3, rw)]);
        assert_eq!(queues[0].accept_message_types, [MessageType::Normal as i32]);
    }

    #[test]
    fn accept_message_types_mixed_is_the_four_kinds() {
        let mut config = TopicConfig::default();
        config
            .attributes
            .insert("message.type".to_owned(), "MIXED".to_owned());
        assert_eq!(accept_message_types(&config), [1, 2, 3, 4]);
    }
}
