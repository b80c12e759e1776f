//! ferromq-client: producers and consumers that talk to RocketMQ name servers and brokers
//! (ferromq's, Java's, any that speaks the remoting protocol), on tokio.
//!
//! It depends on [`ferromq_protocol`] (re-exported as [`protocol`]) and tokio only, never on
//! the broker. `ferromq::client` re-exports this crate.
//!
//! Layers, bottom up:
//! - [`ClientInstance`] (Java `MQClientInstance`): one per process or per `client_id`,
//!   shared through `Arc` by every producer and consumer. It pools connections, fails over
//!   between name servers, caches topic routes, sends heartbeats and answers the requests
//!   brokers send back (NOTIFY_CONSUMER_IDS_CHANGED and friends).
//! - [`Message`] / [`MessageExt`] and [`decode_messages`]: what is sent and what is received.
//! - [`Producer`] (Java `DefaultMQProducer`) and the consumers, built on the instance.
//!
//! Errors are [`ClientError`]; a broker's refusal keeps Java's response code and remark.
//!
//! The examples in this documentation run as tests against a live broker: the name server
//! in `FERROMQ_NAMESRV` (ferromq's `tests/client_docs.rs` starts one and runs them). Each way
//! to produce and consume also has a program in `examples/`.
//!
//! ```
//! use ferromq_client::{ClientConfig, ClientInstance};
//!
//! # let namesrv = std::env::var("FERROMQ_NAMESRV").expect("a name server address");
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let instance = ClientInstance::new(ClientConfig::new(&namesrv));
//! instance.start()?;
//! let route = instance.topic_route("TopicTest").await?;
//! for mq in &route.subscribe_queues {
//!     let max = instance.get_max_offset(mq).await?;
//!     println!("{mq}: {max} messages");
//! }
//! assert!(!route.subscribe_queues.is_empty());
//! instance.shutdown().await;
//! # Ok::<(), ferromq_client::ClientError>(())
//! # }).unwrap();
//! ```

pub mod admin;
pub mod config;
pub mod consumer;
pub mod error;
pub use ferromq_protocol::filter;
pub mod instance;
pub mod latency;
pub mod message;
pub mod msg_id;
pub mod producer;
pub mod query;
pub mod remoting;
pub mod tls;
pub mod transaction;

pub use ferromq_protocol as protocol;

pub use config::ClientConfig;
pub use error::{ClientError, Result};
pub use ferromq_protocol::remoting::heartbeat::{
    ConsumerData, HeartbeatData, ProducerData, SubscriptionData,
};
pub use instance::{
    expect_success, ClientInstance, ConsumerInner, PullResult, PullStatus, RequestHook,
    TopicRouteInfo,
};
pub use message::{decode_messages, property, Message, MessageExt, MessageQueue};
pub use producer::{Producer, ProducerOptions, SendResult, SendStatus};
pub use transaction::{
    LocalTransactionState, TransactionListener, TransactionProducer, TransactionSendResult,
};
