//! A gRPC client's session (Java `ClientActivity`, `GrpcClientSettingsManager`): its
//! settings from the Telemetry stream, answered at once merged with the server's; its
//! heartbeats, registered with the broker as a remoting client's (HEART_BEAT); its end
//! (NotifyClientTermination, UNREGISTER_CLIENT).
//!
//! A producer is registered under one producer group per topic it publishes, named as the
//! topic (the proxy's choice: the group a transaction check asks). A push consumer
//! registers as `CONSUME_PASSIVELY`, a simple consumer as `CONSUME_ACTIVELY`, both
//! clustering from the last offset, as the proxy registers them.

use super::proto::{
    self, retry_policy, settings::PubSub, telemetry_command, ClientType, Code, CustomizedBackoff,
    ExponentialBackoff, HeartbeatRequest, HeartbeatResponse, Metric,
    NotifyClientTerminationRequest, NotifyClientTerminationResponse, RetryPolicy, Settings,
    TelemetryCommand,
};
use super::{broker_error, group_problem, name_of, ok, status, topic_problem, Caller, Inner};
use crate::protocol::filter::EXPRESSION_TYPE_SQL92;
use crate::remoting::headers::UnregisterClientRequestHeader;
use crate::remoting::heartbeat::{ConsumerData, HeartbeatData, ProducerData, SubscriptionData};
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};
use futures::{SinkExt, Stream, StreamExt};
use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Sessions kept; past this, those idle longest go first.
pub const SESSIONS_MAX: usize = 65_536;
/// A session neither heard from nor heartbeating for this long may be dropped (clients
/// heartbeat every 10 s).
const SESSION_IDLE_MAX: Duration = Duration::from_secs(120);
/// Commands waiting to go out on one Telemetry stream.
const TELEMETRY_OUTBOX_MAX: usize = 16;
/// Java's `SubscriptionGroupConfig.retryMaxTimes` default, for a group the broker lacks.
const RETRY_MAX_TIMES_DEFAULT: i32 = 16;
/// Java's `CustomizedRetryPolicy` default steps, in seconds (1s 5s 10s 30s 1m … 2h).
const CUSTOMIZED_BACKOFF_SECONDS: [i64; 18] = [
    1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
];

/// The stream of commands the server writes on a Telemetry call.
pub(super) type TelemetryStream =
    Pin<Box<dyn Stream<Item = Result<TelemetryCommand, tonic::Status>> + Send>>;

/// The clients the endpoint knows, by `x-mq-client-id`.
#[derive(Debug, Default)]
pub(super) struct Sessions {
    clients: Mutex<HashMap<String, Session>>,
    next_number: AtomicU64,
}

#[derive(Debug)]
struct Session {
    /// The client's number: which shard serves it and its connection id there.
    number: u64,
    /// The settings it last sent (raw, as the proxy keeps them).
    settings: Option<Settings>,
    seen: Instant,
}

impl Sessions {
    /// The number of `client_id`, given on first sight.
    pub(super) fn number_of(&self, client_id: &str) -> u64 {
        let mut clients = self.clients();
        if let Some(session) = clients.get_mut(client_id) {
            session.seen = Instant::now();
            return session.number;
        }
        if clients.len() >= SESSIONS_MAX {
            prune(&mut clients);
        }
        let number = self.next_number.fetch_add(1, Ordering::Relaxed);
        let session = Session {
            number,
            settings: None,
            seen: Instant::now(),
        };
        clients.insert(client_id.to_owned(), session);
        number
    }

    pub(super) fn settings_of(&self, client_id: &str) -> Option<Settings> {
        self.clients().get(client_id)?.settings.clone()
    }

    fn set_settings(&self, client_id: &str, settings: Settings) {
        if let Some(session) = self.clients().get_mut(client_id) {
            session.settings = Some(settings);
        }
    }

    fn remove(&self, client_id: &str) -> Option<Settings> {
        self.clients().remove(client_id)?.settings
    }

    fn clients(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A panic while the lock was held leaves whole entries: take the map.
        self.clients.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Drops idle sessions, or the one idle longest when none is idle enough.
fn prune(clients: &mut HashMap<String, Session>) {
    clients.retain(|_, session| session.seen.elapsed() < SESSION_IDLE_MAX);
    if clients.len() >= SESSIONS_MAX {
        let oldest = clients
            .iter()
            .min_by_key(|(_, session)| session.seen)
            .map(|(id, _)| id.clone());
        if let Some(oldest) = oldest {
            clients.remove(&oldest);
        }
    }
}

/// Telemetry: every settings command the client writes is recorded, registered and answered
/// with the merged settings and OK. The response headers go out when this returns, before
/// any command is read (clients that wait for them to start).
pub(super) fn telemetry(
    inner: &Arc<Inner>,
    caller: Caller,
    mut inbound: tonic::Streaming<TelemetryCommand>,
) -> TelemetryStream {
    let (mut outbox, commands) = futures::channel::mpsc::channel(TELEMETRY_OUTBOX_MAX);
    let inner = Arc::clone(inner);
    tokio::spawn(async move {
        while let Some(command) = inbound.next().await {
            let command = match command {
                Ok(command) => command,
                Err(error) => {
                    tracing::debug!(client = caller.client_id, %error, "telemetry stream ended");
                    return;
                }
            };
            let Some(telemetry_command::Command::Settings(settings)) = command.command else {
                // Thread stacks, verify results and the like: nothing asked for them yet.
                continue;
            };
            let answer = settings_command(&inner, &caller, settings).await;
            if outbox.send(answer).await.is_err() {
                return;
            }
        }
    });
    Box::pin(commands)
}

/// The answer to one settings command (`processAndWriteClientSettings`).
async fn settings_command(
    inner: &Inner,
    caller: &Caller,
    settings: Settings,
) -> Result<TelemetryCommand, tonic::Status> {
    let refused = |status| {
        Ok(TelemetryCommand {
            status: Some(status),
            command: None,
        })
    };
    match &settings.pub_sub {
        Some(PubSub::Publishing(publishing)) => {
            for topic in &publishing.topics {
                if let Some(problem) = topic_problem(&inner.state, &topic.name) {
                    return refused(problem);
                }
            }
        }
        Some(PubSub::Subscription(subscription)) => {
            if let Some(problem) = group_problem(name_of(subscription.group.as_ref())) {
                return refused(problem);
            }
        }
        None => {
            return Err(tonic::Status::invalid_argument(
                "there is no publishing or subscription data in settings",
            ));
        }
    }
    inner
        .sessions
        .set_settings(&caller.client_id, settings.clone());
    let group = match &settings.pub_sub {
        Some(PubSub::Subscription(subscription)) => subscription.group.clone(),
        _ => None,
    };
    let registered = register(inner, caller, &settings, name_of(group.as_ref())).await;
    if registered.code != Code::Ok as i32 {
        return refused(registered);
    }
    Ok(TelemetryCommand {
        status: Some(ok()),
        command: Some(telemetry_command::Command::Settings(merged(
            inner, settings,
        ))),
    })
}

/// Heartbeat: the client's registration renewed, as its settings say what it is.
pub(super) async fn heartbeat(
    inner: &Inner,
    caller: &Caller,
    request: &HeartbeatRequest,
) -> HeartbeatResponse {
    let answer = |status| HeartbeatResponse {
        status: Some(status),
    };
    let Some(settings) = inner.sessions.settings_of(&caller.client_id) else {
        return answer(status(
            Code::UnrecognizedClientType,
            "cannot find client settings for this client",
        ));
    };
    let group = name_of(request.group.as_ref());
    let client_type = settings.client_type();
    if matches!(
        client_type,
        ClientType::PushConsumer | ClientType::SimpleConsumer
    ) {
        if let Some(problem) = group_problem(group) {
            return answer(problem);
        }
    } else if client_type != ClientType::Producer {
        return answer(status(
            Code::UnrecognizedClientType,
            client_type.as_str_name(),
        ));
    }
    answer(register(inner, caller, &settings, group).await)
}

/// NotifyClientTermination: the client's registrations and settings dropped.
pub(super) async fn notify_termination(
    inner: &Inner,
    caller: &Caller,
    request: &NotifyClientTerminationRequest,
) -> NotifyClientTerminationResponse {
    let settings = inner.sessions.remove(&caller.client_id);
    // A producer is registered under each topic it publishes to (its group), a consumer
    // under its group.
    let unregistrations: Vec<UnregisterClientRequestHeader> =
        match settings.as_ref().map(|settings| &settings.pub_sub) {
            Some(Some(PubSub::Publishing(publishing))) => publishing
                .topics
                .iter()
                .map(|topic| UnregisterClientRequestHeader {
                    client_id: caller.client_id.clone(),
                    producer_group: Some(topic.name.clone()),
                    consumer_group: None,
                })
                .collect(),
            Some(Some(PubSub::Subscription(_)) | None) | None => {
                let group = name_of(request.group.as_ref());
                (!group.is_empty())
                    .then(|| UnregisterClientRequestHeader {
                        client_id: caller.client_id.clone(),
                        producer_group: None,
                        consumer_group: Some(group.to_owned()),
                    })
                    .into_iter()
                    .collect()
            }
        };
    for header in &unregistrations {
        let unregister =
            RemotingCommand::request_with_header(RequestCode::UNREGISTER_CLIENT, header);
        // A failure leaves a registration that expires with its heartbeats.
        let _ = inner.call(caller, unregister).await;
    }
    NotifyClientTerminationResponse { status: Some(ok()) }
}

/// Registers the client with the broker as its settings describe it (a HEART_BEAT).
async fn register(
    inner: &Inner,
    caller: &Caller,
    settings: &Settings,
    group: &str,
) -> proto::Status {
    let mut data = HeartbeatData {
        client_id: caller.client_id.clone(),
        ..HeartbeatData::default()
    };
    match &settings.pub_sub {
        Some(PubSub::Publishing(publishing)) => {
            data.producer_data_set = publishing
                .topics
                .iter()
                .map(|topic| ProducerData {
                    group_name: topic.name.clone(),
                })
                .collect();
        }
        Some(PubSub::Subscription(subscription)) => {
            let consume_type = if settings.client_type() == ClientType::PushConsumer {
                "CONSUME_PASSIVELY"
            } else {
                "CONSUME_ACTIVELY"
            };
            let subscriptions = subscription
                .subscriptions
                .iter()
                .map(|entry| {
                    let topic = name_of(entry.topic.as_ref());
                    let expression = entry.expression.clone().unwrap_or_default();
                    subscription_data(topic, &expression)
                })
                .collect();
            let group = if group.is_empty() {
                name_of(subscription.group.as_ref())
            } else {
                group
            };
            data.consumer_data_set = vec![ConsumerData {
                group_name: group.to_owned(),
                consume_type: Some(consume_type.to_owned()),
                message_model: Some("CLUSTERING".to_owned()),
                consume_from_where: Some("CONSUME_FROM_LAST_OFFSET".to_owned()),
                subscription_data_set: subscriptions,
                unit_mode: false,
            }];
        }
        None => return ok(),
    }
    let mut request = RemotingCommand::request(RequestCode::HEART_BEAT).with_body(data.to_json());
    request.language = crate::remoting::LanguageCode::from_name(&caller.language)
        .unwrap_or(crate::remoting::LanguageCode::JAVA);
    match inner.call(caller, request).await {
        Ok(response) if response.response_code() == ResponseCode::SUCCESS => ok(),
        Ok(response) => broker_error(&response),
        Err(problem) => problem,
    }
}

/// A subscription as the remoting heartbeat carries it (`FilterAPI.build`).
fn subscription_data(topic: &str, expression: &proto::FilterExpression) -> SubscriptionData {
    if expression.r#type() == proto::FilterType::Sql {
        SubscriptionData {
            topic: topic.to_owned(),
            sub_string: expression.expression.clone(),
            sub_version: crate::calendar::now_ms(),
            expression_type: Some(EXPRESSION_TYPE_SQL92.to_owned()),
            ..SubscriptionData::default()
        }
    } else {
        SubscriptionData::from_expression(topic, &expression.expression)
    }
}

/// The settings a client is told: its own, with the server's retry policy, limits and
/// metric switch (`GrpcClientSettingsManager.getClientSettings`).
fn merged(inner: &Inner, mut settings: Settings) -> Settings {
    let config = &inner.state.config.grpc;
    let duration = |duration: Duration| prost_types::Duration {
        seconds: i64::try_from(duration.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(duration.subsec_nanos()).unwrap_or(0),
    };
    match &mut settings.pub_sub {
        Some(PubSub::Publishing(publishing)) => {
            publishing.validate_message_type = config.enable_topic_message_type_check;
            publishing.max_body_size =
                i32::try_from(inner.state.config.store.max_message_size).unwrap_or(i32::MAX);
            #[allow(clippy::cast_precision_loss)]
            let multiplier = config.producer_backoff_multiplier as f32;
            settings.backoff_policy = Some(RetryPolicy {
                max_attempts: config.producer_max_attempts,
                strategy: Some(retry_policy::Strategy::ExponentialBackoff(
                    ExponentialBackoff {
                        initial: Some(duration(config.producer_backoff_initial)),
                        max: Some(duration(config.producer_backoff_max)),
                        multiplier,
                    },
                )),
            });
        }
        Some(PubSub::Subscription(subscription)) => {
            let group_config = inner.state.group(name_of(subscription.group.as_ref()));
            // TODO(grpc): `fifo` from the group's `consumeMessageOrderly`, once the group
            // table keeps it.
            let (retry_max_times, fifo) = group_config
                .map_or((RETRY_MAX_TIMES_DEFAULT, false), |g| {
                    (g.retry_max_times, false)
                });
            subscription.receive_batch_size = Some(config.consumer_long_polling_batch_size);
            subscription.long_polling_timeout =
                Some(duration(config.consumer_max_long_polling_timeout));
            subscription.fifo = Some(fifo);
            let next = CUSTOMIZED_BACKOFF_SECONDS
                .iter()
                .map(|seconds| prost_types::Duration {
                    seconds: *seconds,
                    nanos: 0,
                })
                .collect();
            settings.backoff_policy = Some(RetryPolicy {
                max_attempts: retry_max_times.saturating_add(1),
                strategy: Some(retry_policy::Strategy::CustomizedBackoff(
                    CustomizedBackoff { next },
                )),
            });
        }
        None => {}
    }
    settings.metric = Some(Metric {
        on: false,
        endpoints: None,
    });
    settings
}
