//! `ferromq admin`: the operator commands of Java's `mqadmin` (`tools/.../command/**`,
//! `MQAdminStartup`), with its command names and short flags, talking to the name server and
//! brokers over the remoting protocol.
//!
//! Every command returns a [`Report`]: a table like mqadmin prints, or with `--json` a
//! stable JSON value for scripts. A name server or broker that answers with a code other
//! than SUCCESS ends the command with [`AdminError::Remote`], which names the code and the
//! remark. One file per command family: [`topic`], [`cluster`], [`group`], [`message`].

pub mod cluster;
pub mod group;
pub mod message;
pub mod output;
pub mod snapshot;
pub mod top;
pub mod topic;

pub use ferromq_client::admin as client;
pub use ferromq_client::admin::{AdminClient, AdminError};
pub use output::Report;

use ferromq_protocol::acl::Credentials;
use std::time::Duration;

/// Flags shared by every admin command, and the command.
#[derive(Debug, clap::Args)]
pub struct AdminArgs {
    /// Name servers, `;`-separated `host:port`; the `NAMESRV_ADDR` variable when absent.
    #[arg(short = 'n', long = "namesrvAddr", global = true, value_name = "ADDRS")]
    pub namesrv: Option<String>,

    /// Print stable JSON for scripts instead of tables.
    #[arg(long, global = true)]
    pub json: bool,

    /// Time limit of each request, in milliseconds.
    #[arg(
        long = "timeoutMillis",
        global = true,
        default_value_t = 5000,
        value_name = "MS"
    )]
    pub timeout_ms: u64,

    /// Access key that signs every request, for brokers with `aclEnable=true` (mqadmin's
    /// `conf/tools.yml` `accessKey`).
    #[arg(
        long = "accessKey",
        global = true,
        value_name = "KEY",
        requires = "secret_key"
    )]
    pub access_key: Option<String>,

    /// Secret key of `--accessKey` (mqadmin's `conf/tools.yml` `secretKey`).
    #[arg(
        long = "secretKey",
        global = true,
        value_name = "KEY",
        requires = "access_key"
    )]
    pub secret_key: Option<String>,

    /// Speaks TLS to name servers and brokers (mqadmin's `-Dtls.enable=true`), checking no
    /// certificate as Java's tools do by default.
    #[arg(long, global = true)]
    pub tls: bool,

    /// The command.
    #[command(subcommand)]
    pub command: AdminCommand,
}

/// The commands, named as mqadmin names them.
#[derive(Debug, clap::Subcommand)]
#[command(rename_all = "camelCase")]
pub enum AdminCommand {
    /// Update or create a topic on one broker (-b) or every master of a cluster (-c).
    UpdateTopic(topic::UpdateTopicArgs),
    /// Delete a topic from the masters of a cluster and from the name servers.
    DeleteTopic(topic::DeleteTopicArgs),
    /// Every topic the name servers know.
    TopicList(topic::TopicListArgs),
    /// The brokers and queue counts serving a topic.
    TopicRoute(topic::TopicRouteArgs),
    /// Min and max offsets of every queue of a topic.
    TopicStatus(topic::TopicStatusArgs),
    /// The brokers of every cluster, with version and load.
    ClusterList(cluster::ClusterListArgs),
    /// Runtime figures of a broker (-b) or of every master of a cluster (-c).
    BrokerStatus(cluster::BrokerTargetArgs),
    /// The configuration of a broker (-b) or of every master of a cluster (-c).
    GetBrokerConfig(cluster::BrokerTargetArgs),
    /// Update or create a subscription (consumer) group.
    UpdateSubGroup(group::UpdateSubGroupArgs),
    /// Delete a subscription group.
    DeleteSubGroup(group::DeleteSubGroupArgs),
    /// Per queue: the broker's max offset, the group's committed offset and the difference.
    ConsumerProgress(group::ConsumerProgressArgs),
    /// The online members of a consumer group and their subscriptions.
    ConsumerConnection(group::ConsumerConnectionArgs),
    /// The connected producers of a producer group.
    ProducerConnection(group::ProducerConnectionArgs),
    /// Reset a group's offsets of a topic to a time (the message stored nearest it), or to
    /// the end with `-s now`.
    ResetOffsetByTime(group::ResetOffsetByTimeArgs),
    /// A message by its id: the UNIQ_KEY id (needs -t) or the offset id.
    QueryMsgById(message::QueryMsgByIdArgs),
    /// Messages of a topic by key.
    QueryMsgByKey(message::QueryMsgByKeyArgs),
    /// The message at a queue offset.
    QueryMsgByOffset(message::QueryMsgByOffsetArgs),
    /// A live view of the cluster, refreshed every second: brokers' rates, latency, disk and
    /// replication, topics' rates, groups' rates and lag (`q` quits).
    Top(top::TopArgs),
}

/// Runs one admin command and renders its report: JSON with `--json`, else the table.
///
/// # Errors
/// The command's [`AdminError`].
pub fn run(args: AdminArgs) -> Result<String, AdminError> {
    let namesrv = args
        .namesrv
        .clone()
        .or_else(|| std::env::var("NAMESRV_ADDR").ok());
    let mut client = AdminClient::new(namesrv.as_deref(), Duration::from_millis(args.timeout_ms))?;
    if let (Some(access_key), Some(secret_key)) = (&args.access_key, &args.secret_key) {
        client.set_credentials(Some(Credentials::new(access_key, secret_key)));
    }
    if args.tls {
        client.set_tls(Some(ferromq_client::tls::TlsClient::insecure()));
    }
    if let AdminCommand::Top(top) = &args.command {
        top::run(&mut client, top)?;
        return Ok(String::new());
    }
    let report = execute(&mut client, args.command)?;
    if args.json {
        let mut text = serde_json::to_string_pretty(&report.json)
            .map_err(|e| AdminError::Usage(e.to_string()))?;
        text.push('\n');
        Ok(text)
    } else {
        Ok(report.text)
    }
}

/// Runs `command` with `client`.
///
/// # Errors
/// The command's [`AdminError`].
pub fn execute(client: &mut AdminClient, command: AdminCommand) -> Result<Report, AdminError> {
    match command {
        AdminCommand::UpdateTopic(args) => topic::update_topic(client, &args),
        AdminCommand::DeleteTopic(args) => topic::delete_topic(client, &args),
        AdminCommand::TopicList(args) => topic::topic_list(client, &args),
        AdminCommand::TopicRoute(args) => topic::topic_route(client, &args),
        AdminCommand::TopicStatus(args) => topic::topic_status(client, &args),
        AdminCommand::ClusterList(args) => cluster::cluster_list(client, &args),
        AdminCommand::BrokerStatus(args) => cluster::broker_status(client, &args),
        AdminCommand::GetBrokerConfig(args) => cluster::broker_config(client, &args),
        AdminCommand::UpdateSubGroup(args) => group::update_sub_group(client, &args),
        AdminCommand::DeleteSubGroup(args) => group::delete_sub_group(client, &args),
        AdminCommand::ConsumerProgress(args) => group::consumer_progress(client, &args),
        AdminCommand::ConsumerConnection(args) => group::consumer_connection(client, &args),
        AdminCommand::ProducerConnection(args) => group::producer_connection(client, &args),
        AdminCommand::ResetOffsetByTime(args) => group::reset_offset_by_time(client, &args),
        AdminCommand::QueryMsgById(args) => message::query_by_id(client, &args),
        AdminCommand::QueryMsgByKey(args) => message::query_by_key(client, &args),
        AdminCommand::QueryMsgByOffset(args) => message::query_by_offset(client, &args),
        AdminCommand::Top(_) => Err(AdminError::Usage(
            "top is a live view, not a report: run it with `ferromq admin top`".to_owned(),
        )),
    }
}
