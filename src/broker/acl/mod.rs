//! RocketMQ 4.x plain ACL on the broker (`aclEnable=true`): Java's `PlainAccessValidator`
//! and `PlainPermissionManager`, with its files, its checks in its order and its remarks.
//!
//! Files: every `*.yml` / `*.yaml` under `<rocketmqHome>/conf/acl/` (any depth, `tools.yml`
//! aside) and `<rocketmqHome>/conf/plain_acl.yml`; an access key in two files keeps the
//! first, global white lists add up. They are read again within [`WATCH_INTERVAL`] of a
//! change (file count or a modification time, as Java's `AclFileWatchService`); a file that
//! no longer parses leaves the previous rules in force, with an error line.
//!
//! A request is checked before anything else serves it: the global white list; the access
//! key (missing, unknown); the account's own white address (which lets the request in
//! without a signature, as Java's does); the signature ([`ferromq_protocol::acl`]); the
//! admin codes; the topics and groups the request names against the account's permissions
//! or its defaults. A refusal is SYSTEM_ERROR with the remark Java's broker sends: the
//! `AclException` and the frame that threw it.

mod addresses;
mod change;

pub use change::AclChange;

use crate::remoting::heartbeat::HeartbeatData;
use crate::remoting::{RemotingCommand, RequestCode};
use addresses::Addresses;
use ferromq_protocol::acl::{signature, signed_content, ACCESS_KEY, SIGNATURE, UNSIGNED};
use std::collections::HashMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use yaml_rust2::{Yaml, YamlLoader};

/// How often the files are looked at for changes (`AclFileWatchService.WATCH_INTERVAL`).
pub const WATCH_INTERVAL: Duration = Duration::from_secs(5);

/// Permission bits (`Permission`).
const DENY: u8 = 1;
const ANY: u8 = 1 << 1;
const PUB: u8 = 1 << 2;
const SUB: u8 = 1 << 3;

/// Prefix groups are checked under (`%RETRY%<group>`).
const RETRY: &str = "%RETRY%";
/// The trace topic: a request that only publishes to it skips the permission checks.
const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";

/// Java's exception class and the frames its messages are thrown from (4.9.8).
const EXCEPTION: &str = "org.apache.rocketmq.acl.common.AclException";
macro_rules! frame {
    ($class:literal, $method:literal, $line:literal) => {
        concat!(
            "org.apache.rocketmq.acl.plain.",
            $class,
            ".",
            $method,
            "(",
            $class,
            ".java:",
            $line,
            ")"
        )
    };
}
const AT_VALIDATE_NO_KEY: &str = frame!("PlainPermissionManager", "validate", 664);
const AT_VALIDATE_UNKNOWN: &str = frame!("PlainPermissionManager", "validate", 668);
const AT_VALIDATE_SIGNATURE: &str = frame!("PlainPermissionManager", "validate", 684);
const AT_CHECK_ADMIN: &str = frame!("PlainPermissionManager", "checkPerm", 581);
const AT_CHECK_DEFAULT: &str = frame!("PlainPermissionManager", "checkPerm", 606);
const AT_CHECK_OWNED: &str = frame!("PlainPermissionManager", "checkPerm", 611);
const AT_PARSE: &str = frame!("PlainAccessValidator", "parse", 134);

/// Why a request is refused: the remark Java's broker sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denied(pub String);

fn denied(message: String, frame: &str) -> Denied {
    Denied(format!("{EXCEPTION}: {message}, {frame}"))
}

/// `Permission.parsePermFromString`: case-sensitive, anything else is DENY.
fn parse_perm(text: Option<&str>) -> u8 {
    match text.map(str::trim) {
        Some("PUB") => PUB,
        Some("SUB") => SUB,
        Some("PUB|SUB" | "SUB|PUB") => PUB | SUB,
        _ => DENY,
    }
}

/// `Permission.checkPermission`.
fn permits(needed: u8, owned: u8) -> bool {
    if owned & DENY != 0 {
        return false;
    }
    if needed & ANY != 0 {
        return owned & (PUB | SUB) != 0;
    }
    needed & owned != 0
}

/// One account of a file.
#[derive(Debug, Clone)]
struct Account {
    secret_key: String,
    white: Addresses,
    admin: bool,
    default_topic_perm: u8,
    default_group_perm: u8,
    /// Topics by name, groups as `%RETRY%<group>`.
    perms: HashMap<String, u8>,
}

/// The rules of every file, merged.
#[derive(Debug, Default, Clone)]
pub struct PlainAcl {
    global_white: Vec<Addresses>,
    accounts: HashMap<String, Account>,
}

/// A YAML scalar as fastjson reads it into a string: numbers and booleans too.
fn text(yaml: &Yaml) -> Option<String> {
    match yaml {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn list(yaml: &Yaml) -> Vec<String> {
    yaml.as_vec()
        .map(|items| items.iter().filter_map(text).collect())
        .unwrap_or_default()
}

impl PlainAcl {
    /// Adds the rules of one file's text; `origin` names it in errors.
    ///
    /// # Errors
    /// Text that is not YAML, or rules that are not valid, named by `origin`.
    pub fn add_file(&mut self, origin: &Path, yaml_text: &str) -> Result<(), String> {
        let docs = YamlLoader::load_from_str(yaml_text)
            .map_err(|e| format!("{}: not YAML: {e}", origin.display()))?;
        let Some(doc) = docs.first() else {
            return Ok(());
        };
        for address in list(&doc["globalWhiteRemoteAddresses"]) {
            self.global_white.push(Addresses::parse(&address)?);
        }
        for account in doc["accounts"].as_vec().into_iter().flatten() {
            let access_key = text(&account["accessKey"]).unwrap_or_default();
            let secret_key = text(&account["secretKey"]).unwrap_or_default();
            if access_key.chars().count() <= 6 || secret_key.chars().count() <= 6 {
                return Err(format!(
                    "The accessKey={access_key} and secretKey={secret_key} cannot be null and \
                     length should longer than 6"
                ));
            }
            if self.accounts.contains_key(&access_key) {
                let file = origin.display();
                tracing::warn!(access_key, %file, "access key defined twice; the first is kept");
                continue;
            }
            let mut perms = HashMap::new();
            for (kind, key, prefix) in [("topic", "topicPerms", ""), ("group", "groupPerms", RETRY)]
            {
                for entry in list(&account[key]) {
                    let parts: Vec<&str> = entry.split('=').filter(|p| !p.is_empty()).collect();
                    let [name, perm] = parts[..] else {
                        return Err(format!(
                            "Parse resource permission failed for {kind}:{entry}"
                        ));
                    };
                    perms.insert(format!("{prefix}{}", name.trim()), parse_perm(Some(perm)));
                }
            }
            let admin = match &account["admin"] {
                Yaml::Boolean(b) => *b,
                Yaml::String(s) => s.eq_ignore_ascii_case("true"),
                _ => false,
            };
            let white = text(&account["whiteRemoteAddress"]).unwrap_or_default();
            self.accounts.insert(
                access_key,
                Account {
                    secret_key,
                    white: Addresses::parse(&white)?,
                    admin,
                    default_topic_perm: parse_perm(text(&account["defaultTopicPerm"]).as_deref()),
                    default_group_perm: parse_perm(text(&account["defaultGroupPerm"]).as_deref()),
                    perms,
                },
            );
        }
        Ok(())
    }

    /// Checks `request` from `peer` (`PlainAccessValidator.parse` then `validate`).
    ///
    /// # Errors
    /// The remark of the refusal.
    pub fn check(&self, request: &RemotingCommand, peer: IpAddr) -> Result<(), Denied> {
        let peer = Some(peer);
        // Java parses the request before it validates: a request it cannot parse is refused
        // even from a white-listed address; one without ext fields names no resource.
        let needed = match request.ext_fields {
            Some(_) => resources(request).map_err(|e| denied(e, AT_PARSE))?,
            None => Vec::new(),
        };
        if self.global_white.iter().any(|w| w.matches(peer)) {
            return Ok(());
        }
        let no_key = || denied("No accessKey is configured".into(), AT_VALIDATE_NO_KEY);
        let fields = request.ext_fields.as_ref().ok_or_else(no_key)?;
        let access_key = fields.get(ACCESS_KEY).ok_or_else(no_key)?;
        let Some(account) = self.accounts.get(access_key) else {
            return Err(denied(
                format!("No acl config for {access_key}"),
                AT_VALIDATE_UNKNOWN,
            ));
        };
        if account.white.matches(peer) {
            return Ok(());
        }
        let expected = signature(&signed_content(request, &UNSIGNED), &account.secret_key);
        if fields.get(SIGNATURE) != Some(expected.as_str()) {
            return Err(denied(
                format!("Check signature failed for accessKey={access_key}"),
                AT_VALIDATE_SIGNATURE,
            ));
        }
        if needed.iter().any(|(r, p)| r == TRACE_TOPIC && *p == PUB) {
            return Ok(());
        }
        let code = request.request_code();
        // Only an admin account may send these (`Permission.ADMIN_CODE`).
        let admin_only = super::codes::route_of(code).is_some_and(|route| route.admin_only);
        if admin_only && !account.admin {
            return Err(denied(
                format!(
                    "Need admin permission for request code={}, but accessKey={access_key} is not",
                    code.0
                ),
                AT_CHECK_ADMIN,
            ));
        }
        if needed.is_empty() || (account.perms.is_empty() && account.admin) {
            return Ok(());
        }
        for (resource, perm) in &needed {
            let group = resource.strip_prefix(RETRY);
            let shown = group.map_or_else(|| format!("topic:{resource}"), |g| format!("group:{g}"));
            let (owned, frame) = match account.perms.get(resource) {
                Some(owned) => (*owned, AT_CHECK_OWNED),
                None if group.is_some() => (account.default_group_perm, AT_CHECK_DEFAULT),
                None => (account.default_topic_perm, AT_CHECK_DEFAULT),
            };
            if !permits(*perm, owned) {
                return Err(denied(format!("No default permission for {shown}"), frame));
            }
        }
        Ok(())
    }
}

/// The topics and groups a request needs, with the permission for each (Java's `parse`
/// switch); a later need of the same resource replaces an earlier one, as Java's map does.
fn resources(request: &RemotingCommand) -> Result<Vec<(String, u8)>, String> {
    let ext = |key: &str| request.ext(key).map(str::to_owned);
    let retry = |group: Option<String>| group.map(|g| format!("{RETRY}{g}"));
    let mut needed: Vec<(String, u8)> = Vec::new();
    let mut add = |resource: Option<String>, perm: u8| {
        if let Some(resource) = resource {
            needed.retain(|(r, _)| *r != resource);
            needed.push((resource, perm));
        }
    };
    let send = |topic: Option<String>, group: Option<String>| match topic {
        Some(topic) if topic.starts_with(RETRY) => (retry(group), SUB),
        topic => (topic, PUB),
    };
    match request.request_code() {
        RequestCode::SEND_MESSAGE => {
            let (resource, perm) = send(ext("topic"), ext("group"));
            add(resource, perm);
        }
        RequestCode::SEND_MESSAGE_V2 => {
            let (resource, perm) = send(ext("b"), ext("a"));
            add(resource, perm);
        }
        RequestCode::CONSUMER_SEND_MSG_BACK => add(retry(ext("group")), SUB),
        RequestCode::PULL_MESSAGE => {
            add(ext("topic"), SUB);
            add(retry(ext("consumerGroup")), SUB);
        }
        RequestCode::QUERY_MESSAGE => add(ext("topic"), SUB),
        RequestCode::HEART_BEAT => {
            // Decoded again by the processor, as Java's validator and processor each do: a
            // heartbeat comes every 30 s per client, and the check must not hand a decoded
            // body to a processor that may be on another code path (a refused request).
            let value = ferromq_protocol::fastjson::parse_lenient(&request.body)?;
            let heartbeat: HeartbeatData =
                serde_json::from_value(value).map_err(|e| e.to_string())?;
            for consumer in heartbeat.consumer_data_set {
                add(retry(Some(consumer.group_name)), SUB);
                for subscription in consumer.subscription_data_set {
                    add(Some(subscription.topic), SUB);
                }
            }
        }
        RequestCode::UNREGISTER_CLIENT | RequestCode::GET_CONSUMER_LIST_BY_GROUP => {
            add(retry(ext("consumerGroup")), SUB);
        }
        RequestCode::UPDATE_CONSUMER_OFFSET => {
            add(retry(ext("consumerGroup")), SUB);
            add(ext("topic"), SUB);
        }
        _ => {}
    }
    Ok(needed)
}

/// The ACL files under `home`, sorted, `conf/plain_acl.yml` last when it is not listed.
fn acl_files(home: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![home.join("conf/acl")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "yml" || e == "yaml")
                && path.file_name().is_some_and(|n| n != "tools.yml")
            {
                files.push(path);
            }
        }
    }
    files.sort();
    let default = home.join("conf/plain_acl.yml");
    if default.is_file() && !files.contains(&default) {
        files.push(default);
    }
    files
}

/// The files' names and modification times: what a change is noticed by.
pub type Stamp = Vec<(PathBuf, Option<SystemTime>)>;

/// The stamp of the ACL files under `home` now.
#[must_use]
pub fn stamp(home: &Path) -> Stamp {
    acl_files(home)
        .into_iter()
        .map(|path| {
            let modified = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
            (path, modified)
        })
        .collect()
}

/// Reads every ACL file under `home`.
///
/// # Errors
/// The first file that cannot be read or does not hold valid rules, named.
pub fn load(home: &Path) -> Result<PlainAcl, String> {
    let mut acl = PlainAcl::default();
    for file in acl_files(home) {
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        acl.add_file(&file, &text)
            .map_err(|e| format!("{}: {e}", file.display()))?;
    }
    Ok(acl)
}

/// The rules in force, read again when the files change.
#[derive(Debug)]
pub struct AclRules {
    home: PathBuf,
    current: arc_swap::ArcSwap<PlainAcl>,
    stamp: std::sync::Mutex<Stamp>,
    /// Admin changes to the files, one at a time.
    changing: std::sync::Mutex<()>,
}

impl AclRules {
    /// The rules of the files under `home` now.
    ///
    /// # Errors
    /// As [`load`]: a broker with rules it cannot read does not start, as Java's.
    pub fn load(home: &Path) -> Result<AclRules, String> {
        let stamp = stamp(home);
        let acl = load(home)?;
        tracing::info!(
            home = %home.display(),
            files = stamp.len(),
            accounts = acl.accounts.len(),
            "plain ACL loaded"
        );
        Ok(AclRules {
            home: home.to_owned(),
            current: arc_swap::ArcSwap::from_pointee(acl),
            stamp: std::sync::Mutex::new(stamp),
            changing: std::sync::Mutex::new(()),
        })
    }

    /// Checks `request` from `peer` against the rules in force.
    ///
    /// # Errors
    /// The remark of the refusal.
    pub fn check(&self, request: &RemotingCommand, peer: IpAddr) -> Result<(), Denied> {
        self.current.load().check(request, peer)
    }

    /// Reads the files again if their count or a modification time changed; whether the
    /// rules in force changed.
    pub fn reload_if_changed(&self) -> bool {
        let now = stamp(&self.home);
        let mut seen = self
            .stamp
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if *seen == now {
            return false;
        }
        *seen = now;
        match load(&self.home) {
            Ok(acl) => {
                tracing::info!(accounts = acl.accounts.len(), "plain ACL reloaded");
                self.current.store(std::sync::Arc::new(acl));
                true
            }
            Err(error) => {
                tracing::error!(%error, "plain ACL not reloaded; the previous rules stay");
                false
            }
        }
    }

    /// Looks at the files every [`WATCH_INTERVAL`] on a thread of its own, until the rules
    /// are dropped.
    pub fn watch(rules: &std::sync::Arc<AclRules>) {
        let rules = std::sync::Arc::downgrade(rules);
        let spawned = std::thread::Builder::new()
            .name("acl-watch".into())
            .spawn(move || loop {
                std::thread::sleep(WATCH_INTERVAL);
                let Some(rules) = rules.upgrade() else {
                    return;
                };
                rules.reload_if_changed();
            });
        if let Err(error) = spawned {
            tracing::error!(%error, "cannot start the ACL file watcher; changes need a restart");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferromq_protocol::acl::Credentials;
    use ferromq_protocol::remoting::ExtFields;

    const FILE: &str = "
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
    groupPerms:
      - groupA=DENY
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
    admin: true
";

    fn acl() -> PlainAcl {
        let mut acl = PlainAcl::default();
        acl.add_file(Path::new("plain_acl.yml"), FILE).unwrap();
        acl
    }

    fn send(topic: &str, credentials: Option<&Credentials>) -> RemotingCommand {
        let mut request = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2);
        let mut fields = ExtFields::new();
        fields.insert("a", "producer");
        fields.insert("b", topic);
        request.ext_fields = Some(fields);
        request.body = b"hello".to_vec();
        if let Some(credentials) = credentials {
            credentials.sign(&mut request);
        }
        request
    }

    fn local() -> IpAddr {
        "127.0.0.1".parse().unwrap()
    }

    #[test]
    fn each_refusal_has_javas_message_in_javas_order() {
        let acl = acl();
        let rocketmq = Credentials::new("RocketMQ", "12345678");
        assert!(acl.check(&send("topicB", Some(&rocketmq)), local()).is_ok());
        let refused = |request: &RemotingCommand| acl.check(request, local()).unwrap_err().0;
        assert!(
            refused(&send("topicB", None)).contains("AclException: No accessKey is configured, ")
        );
        let stranger = Credentials::new("stranger", "12345678");
        assert!(
            refused(&send("topicB", Some(&stranger))).contains(": No acl config for stranger, ")
        );
        let wrong = Credentials::new("RocketMQ", "87654321");
        assert!(refused(&send("topicB", Some(&wrong)))
            .contains(": Check signature failed for accessKey=RocketMQ, "));
        let mut tampered = send("topicB", Some(&rocketmq));
        tampered.body = b"other".to_vec();
        assert!(refused(&tampered).contains("Check signature failed"));
        assert!(
            refused(&send("topicA", Some(&rocketmq))).ends_with(&format!(
                "No default permission for topic:topicA, {AT_CHECK_OWNED}"
            ))
        );
        assert!(refused(&send("other", Some(&rocketmq)))
            .contains("No default permission for topic:other"));
        let mut create = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC);
        rocketmq.sign(&mut create);
        assert!(refused(&create)
            .contains("Need admin permission for request code=17, but accessKey=RocketMQ is not"));
    }

    #[test]
    fn white_addresses_let_requests_in_without_a_signature() {
        let acl = acl();
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        // The global white list: no key at all.
        assert!(acl.check(&send("topicA", None), ip("10.10.103.7")).is_ok());
        // The admin account's own white address: any signature.
        let wrong = Credentials::new("rocketmq2", "wrongwrong");
        assert!(acl
            .check(&send("x", Some(&wrong)), ip("192.168.1.9"))
            .is_ok());
        assert!(acl
            .check(&send("x", Some(&wrong)), ip("192.168.2.9"))
            .is_err());
    }

    /// The expectations were read from Java 4.9.8's `RemoteAddressStrategyFactory` run on
    /// the same rules and addresses.
    #[test]
    fn keys_of_six_characters_or_fewer_are_refused() {
        let mut acl = PlainAcl::default();
        let error = acl
            .add_file(
                Path::new("f"),
                "accounts:\n  - accessKey: short\n    secretKey: 12345678\n",
            )
            .unwrap_err();
        assert!(
            error.contains("cannot be null and length should longer than 6"),
            "{error}"
        );
    }
}
