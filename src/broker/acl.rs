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

use crate::remoting::heartbeat::HeartbeatData;
use crate::remoting::{RemotingCommand, RequestCode};
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

/// Which client addresses a rule lets in (`RemoteAddressStrategy`).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Addresses {
    /// Blank: none.
    None,
    /// `*`, `*.*.*.*`, `*:*:*:*:*:*:*:*`.
    All,
    /// One address, a comma list or `a.b.c.{x,y}`.
    Set(Vec<IpAddr>),
    /// A wildcard or range in one group, the groups before it equal to `head` and later
    /// ones not looked at (Java's `RangeRemoteAddressStrategy`): IPv4 octets with the range
    /// in octet 1–3; IPv6 groups with `*` last and a range last or before that `*`.
    Range {
        v6: bool,
        head: Vec<u16>,
        low: u16,
        high: u16,
    },
}

impl Addresses {
    fn parse(text: &str) -> Result<Addresses, String> {
        let text = text.trim();
        if text.is_empty() {
            return Ok(Addresses::None);
        }
        if matches!(text, "*" | "*.*.*.*" | "*:*:*:*:*:*:*:*") {
            return Ok(Addresses::All);
        }
        let bad = || format!("Netaddress examine Exception netaddress is {text}");
        let ip = |s: &str| s.trim().parse::<IpAddr>().map_err(|_| bad());
        if let Some(open) = text.strip_suffix('}').and_then(|t| t.rfind('{')) {
            let prefix = &text[..open];
            let items = &text[open + 1..text.len() - 1];
            let set: Result<Vec<IpAddr>, String> = items
                .split(',')
                .map(|item| ip(&format!("{prefix}{}", item.trim())))
                .collect();
            return set.map(Addresses::Set);
        }
        if text.contains(',') {
            return text
                .split(',')
                .map(ip)
                .collect::<Result<_, _>>()
                .map(Addresses::Set);
        }
        if text.contains('*') || text.contains('-') {
            return Self::range(text);
        }
        Ok(Addresses::Set(vec![ip(text)?]))
    }

    fn range(text: &str) -> Result<Addresses, String> {
        if text.contains(':') {
            return Self::range_v6(text);
        }
        let bad =
            || format!("RangeRemoteAddressStrategy netaddress examine scope Exception {text}");
        let octets: Vec<&str> = text.split('.').map(str::trim).collect();
        if octets.len() != 4 {
            return Err(bad());
        }
        let octet = |s: &str| s.parse::<u8>().map(u16::from).map_err(|_| bad());
        for index in 1..4 {
            let (low, high) = match octets[index] {
                "*" => (0, 255),
                part if part.contains('-') => {
                    let (low, high) = part.split_once('-').ok_or_else(bad)?;
                    let (low, high) = (octet(low)?, octet(high)?);
                    if low > high {
                        return Err(bad());
                    }
                    (low, high)
                }
                _ => continue,
            };
            let head = octets[..index]
                .iter()
                .map(|o| octet(o))
                .collect::<Result<Vec<u16>, String>>()?;
            return Ok(Addresses::Range {
                v6: false,
                head,
                low,
                high,
            });
        }
        Err(bad())
    }

    /// An IPv6 range as Java's `AclUtils.IPv6AddressCheck` and `v6ipProcess` read it: `*`
    /// only at the end; a range in the last group, or in the one before a final `*`; the
    /// groups before it, `::` filled out, are the head.
    fn range_v6(text: &str) -> Result<Addresses, String> {
        let bad = || format!("Netaddress examine scope Exception netaddress is {text}");
        let star = text.find('*');
        let colons: Vec<usize> = text.match_indices(':').map(|(i, _)| i).collect();
        let (Some(&last), second_last) = (colons.last(), colons.iter().rev().nth(1)) else {
            return Err(bad());
        };
        if star.is_some_and(|at| at != text.len() - 1) {
            return Err(bad());
        }
        // The group that holds the range or wildcard, and the `::`-filled length of the head.
        let (head_end, groups) = match (star, text.find('-')) {
            (_, Some(minus)) if minus <= last && star.is_none() => return Err(bad()),
            (Some(_), Some(minus)) => match second_last {
                Some(&end) if minus > end => (end, 6),
                _ => return Err(bad()),
            },
            _ => (last, 7),
        };
        let (low, high) = match &text[head_end + 1..] {
            "*" => (0, 0xffff),
            spec => {
                let range = spec.strip_suffix(":*").unwrap_or(spec);
                let (low, high) = range.split_once('-').ok_or_else(bad)?;
                let hex = |s: &str| u16::from_str_radix(s.trim(), 16).map_err(|_| bad());
                let (low, high) = (hex(low)?, hex(high)?);
                if low > high || high == 0 {
                    return Err(bad());
                }
                (low, high)
            }
        };
        let head = Self::v6_head(&text[..head_end], groups).ok_or_else(bad)?;
        if head.len() >= 8 {
            return Err(bad());
        }
        Ok(Addresses::Range {
            v6: true,
            head,
            low,
            high,
        })
    }

    /// Java's `AclUtils.expandIP(prefix, groups)`: `::` widened so that the prefix has
    /// `groups` groups (when it has fewer colons), every group hex, empty ones zero.
    fn v6_head(prefix: &str, groups: usize) -> Option<Vec<u16>> {
        let pad = groups.saturating_sub(prefix.matches(':').count());
        let filled = if pad > 0 {
            prefix.replace("::", &":".repeat(pad + 1))
        } else {
            prefix.to_owned()
        };
        filled
            .split(':')
            .map(|group| match group.trim() {
                "" => Some(0),
                group if group.len() <= 4 => u16::from_str_radix(group, 16).ok(),
                _ => None,
            })
            .collect()
    }

    fn matches(&self, ip: Option<IpAddr>) -> bool {
        let Some(ip) = ip else {
            return false;
        };
        match self {
            Addresses::None => false,
            Addresses::All => true,
            Addresses::Set(set) => set.contains(&ip),
            Addresses::Range {
                v6,
                head,
                low,
                high,
            } => {
                let groups: Vec<u16> = match ip {
                    IpAddr::V4(v4) if !v6 => v4.octets().map(u16::from).to_vec(),
                    IpAddr::V6(v6_ip) if *v6 => v6_ip.segments().to_vec(),
                    _ => return false,
                };
                groups.starts_with(head)
                    && groups
                        .get(head.len())
                        .is_some_and(|group| (*low..=*high).contains(group))
            }
        }
    }
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

/// One change an admin request makes to the files (UPDATE_AND_CREATE_ACL_CONFIG and
/// friends), applied by [`AclRules::change`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AclChange {
    /// Creates the account or updates the fields given (`updateAccessConfig`).
    Upsert {
        /// `accessKey`.
        access_key: String,
        /// `secretKey`: required, as Java checks it on every update.
        secret_key: Option<String>,
        /// `whiteRemoteAddress`.
        white_remote_address: Option<String>,
        /// `admin`.
        admin: bool,
        /// `defaultTopicPerm`.
        default_topic_perm: Option<String>,
        /// `defaultGroupPerm`.
        default_group_perm: Option<String>,
        /// `topicPerms`, `name=PERM` each.
        topic_perms: Option<Vec<String>>,
        /// `groupPerms`.
        group_perms: Option<Vec<String>>,
    },
    /// Deletes the account (`deleteAccessConfig`).
    Delete {
        /// `accessKey`.
        access_key: String,
    },
    /// Replaces the global white list of one file (`updateGlobalWhiteAddrsConfig`).
    GlobalWhite {
        /// The addresses.
        addresses: Vec<String>,
        /// The file, absolute; `None` for the default file.
        file: Option<PathBuf>,
    },
}

/// `Permission.checkResourcePerms`: what an admin request may set.
fn check_resource_perms(entries: &[String]) -> Result<(), String> {
    for entry in entries {
        let parts: Vec<&str> = entry.split('=').collect();
        let [_, perm] = parts[..] else {
            return Err(format!(
                "Parse Resource format error for {entry}.\nThe expected resource format is \
                 'Res=Perm'. For example: topicA=SUB"
            ));
        };
        if !matches!(perm.trim(), "SUB" | "PUB" | "SUB|PUB" | "PUB|SUB") {
            return Err(format!(
                "Parse resource permission error for {entry}.\nThe expected permissions are \
                 'SUB' or 'PUB' or 'SUB|PUB' or 'PUB|SUB'."
            ));
        }
    }
    Ok(())
}

fn key(name: &str) -> Yaml {
    Yaml::String(name.to_owned())
}

fn strings(items: &[String]) -> Yaml {
    Yaml::Array(items.iter().map(|i| Yaml::String(i.clone())).collect())
}

/// A file's `dataVersion` (`[{counter, timestamp}]`), `(0, 0)` when it has none.
fn file_version(doc: &Yaml) -> (i64, i64) {
    let version = &doc["dataVersion"][0];
    (
        version["counter"].as_i64().unwrap_or(0),
        version["timestamp"].as_i64().unwrap_or(0),
    )
}

impl AclRules {
    fn default_file(&self) -> PathBuf {
        self.home.join("conf/plain_acl.yml")
    }

    /// The file that holds `access_key`'s account, if any, with its document as read.
    fn file_of(&self, access_key: &str) -> Option<(PathBuf, Yaml)> {
        acl_files(&self.home).into_iter().find_map(|file| {
            let doc = read_yaml(&file).ok()?;
            let holds = doc["accounts"].as_vec().is_some_and(|a| {
                a.iter()
                    .any(|x| text(&x["accessKey"]).as_deref() == Some(access_key))
            });
            holds.then_some((file, doc))
        })
    }

    /// Applies `change` to the files, as Java's `PlainPermissionManager` does (the owning
    /// file, else the default one; `dataVersion` bumped; the file rewritten whole), and puts
    /// the new rules in force at once.
    ///
    /// # Errors
    /// Java's message when the change is refused, or the I/O error.
    pub fn change(&self, change: &AclChange) -> Result<(), String> {
        let _one_at_a_time = self
            .changing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (file, mut doc) = match change {
            AclChange::Upsert {
                access_key,
                secret_key,
                topic_perms,
                group_perms,
                ..
            } => {
                let secret = secret_key.as_deref().unwrap_or_default();
                if access_key.chars().count() <= 6 || secret.chars().count() <= 6 {
                    return Err(format!(
                        "The accessKey={access_key} and secretKey={secret} cannot be null and \
                         length should longer than 6"
                    ));
                }
                check_resource_perms(topic_perms.as_deref().unwrap_or_default())?;
                check_resource_perms(group_perms.as_deref().unwrap_or_default())?;
                self.file_of(access_key).unwrap_or_else(|| {
                    let file = self.default_file();
                    let doc = read_yaml(&file).unwrap_or(Yaml::Hash(Default::default()));
                    (file, doc)
                })
            }
            AclChange::Delete { access_key } => self.file_of(access_key).ok_or_else(|| {
                format!(
                    "The accesskey[{access_key}] corresponding to accessConfig has been \
                         deleted failed."
                )
            })?,
            AclChange::GlobalWhite { file, .. } => {
                let file = file.clone().unwrap_or_else(|| self.default_file());
                if !file.starts_with(&self.home) || !file.is_file() {
                    return Err(format!(
                        "{} is not an ACL file of this broker",
                        file.display()
                    ));
                }
                let doc = read_yaml(&file)?;
                (file, doc)
            }
        };
        let Yaml::Hash(map) = &mut doc else {
            return Err(format!("{}: not a YAML map", file.display()));
        };
        let accounts = match map.remove(&key("accounts")) {
            Some(Yaml::Array(accounts)) => accounts,
            _ => Vec::new(),
        };
        let named = |account: &Yaml, access_key: &str| {
            text(&account["accessKey"]).as_deref() == Some(access_key)
        };
        let accounts = match change {
            AclChange::Upsert {
                access_key,
                secret_key,
                white_remote_address,
                admin,
                default_topic_perm,
                default_group_perm,
                topic_perms,
                group_perms,
            } => {
                let mut accounts = accounts;
                let at = accounts.iter().position(|a| named(a, access_key));
                let mut account = match at {
                    Some(at) => match accounts.remove(at) {
                        Yaml::Hash(account) => account,
                        _ => Default::default(),
                    },
                    None => Default::default(),
                };
                let mut set = |name: &str, value: Option<Yaml>| {
                    if let Some(value) = value {
                        account.insert(key(name), value);
                    }
                };
                set("accessKey", Some(Yaml::String(access_key.clone())));
                set("secretKey", secret_key.clone().map(Yaml::String));
                set(
                    "whiteRemoteAddress",
                    white_remote_address.clone().map(Yaml::String),
                );
                set("admin", Some(Yaml::Boolean(*admin)));
                set(
                    "defaultTopicPerm",
                    default_topic_perm.clone().map(Yaml::String),
                );
                set(
                    "defaultGroupPerm",
                    default_group_perm.clone().map(Yaml::String),
                );
                set("topicPerms", topic_perms.as_deref().map(strings));
                set("groupPerms", group_perms.as_deref().map(strings));
                accounts.push(Yaml::Hash(account));
                accounts
            }
            AclChange::Delete { access_key } => accounts
                .into_iter()
                .filter(|a| !named(a, access_key))
                .collect(),
            AclChange::GlobalWhite { addresses, .. } => {
                map.insert(key("globalWhiteRemoteAddresses"), strings(addresses));
                accounts
            }
        };
        map.insert(key("accounts"), Yaml::Array(accounts));
        let (counter, _) = file_version(&doc);
        let Yaml::Hash(map) = &mut doc else {
            unreachable!("matched as a map above");
        };
        let mut version = yaml_rust2::yaml::Hash::new();
        version.insert(key("counter"), Yaml::Integer(counter + 1));
        version.insert(key("timestamp"), Yaml::Integer(crate::calendar::now_ms()));
        map.insert(key("dataVersion"), Yaml::Array(vec![Yaml::Hash(version)]));
        write_yaml(&file, &doc)?;
        self.force_reload()
    }

    /// Reads the files now, whatever their stamp.
    fn force_reload(&self) -> Result<(), String> {
        let stamp = stamp(&self.home);
        let acl = load(&self.home)?;
        self.current.store(std::sync::Arc::new(acl));
        *self
            .stamp
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = stamp;
        Ok(())
    }

    /// The default file's `DataVersion` and every file's, as JSON (GET_BROKER_CLUSTER_ACL_INFO).
    #[must_use]
    pub fn versions(&self) -> (String, String) {
        let json = |(counter, timestamp): (i64, i64)| version_json(counter, timestamp);
        let version_of = |file: &Path| read_yaml(file).map(|d| file_version(&d)).unwrap_or((0, 0));
        let all: serde_json::Map<String, serde_json::Value> = acl_files(&self.home)
            .iter()
            .map(|file| (file.display().to_string(), json(version_of(file))))
            .collect();
        let default = json(version_of(&self.default_file()));
        (
            default.to_string(),
            serde_json::Value::Object(all).to_string(),
        )
    }
}

/// A `DataVersion` as Java's fastjson writes it.
fn version_json(counter: i64, timestamp: i64) -> serde_json::Value {
    serde_json::json!({ "counter": counter, "timestamp": timestamp })
}

fn read_yaml(file: &Path) -> Result<Yaml, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let docs = YamlLoader::load_from_str(&text)
        .map_err(|e| format!("{}: not YAML: {e}", file.display()))?;
    Ok(docs
        .into_iter()
        .next()
        .unwrap_or(Yaml::Hash(Default::default())))
}

/// Writes `doc` to `file` whole: a temporary file renamed over it.
fn write_yaml(file: &Path, doc: &Yaml) -> Result<(), String> {
    let mut text = String::new();
    yaml_rust2::YamlEmitter::new(&mut text)
        .dump(doc)
        .map_err(|e| format!("cannot write YAML: {e}"))?;
    text.push('\n');
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let temp = file.with_extension("yml.tmp");
    std::fs::write(&temp, text).map_err(|e| format!("{}: {e}", temp.display()))?;
    std::fs::rename(&temp, file).map_err(|e| format!("{}: {e}", file.display()))
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

    #[test]
    fn address_rules_parse_as_javas_strategies() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let rule = |s: &str| Addresses::parse(s).unwrap();
        assert!(rule("*").matches(ip("1.2.3.4")) && !rule("").matches(ip("1.2.3.4")));
        assert!(rule("192.168.1.{1,2}").matches(ip("192.168.1.2")));
        assert!(!rule("192.168.1.{1,2}").matches(ip("192.168.1.3")));
        assert!(rule("1.1.1.1,2.2.2.2").matches(ip("2.2.2.2")));
        assert!(rule("10.1.1-100.*").matches(ip("10.1.50.200")));
        assert!(!rule("10.1.1-100.*").matches(ip("10.1.101.1")));
        // Later octets are not looked at, as in Java.
        assert!(rule("192.168.*.5").matches(ip("192.168.7.9")));
        assert!(Addresses::parse("10.1.-5.*").is_err());
        assert!(Addresses::parse("not an address").is_err());
    }

    /// The expectations were read from Java 4.9.8's `RemoteAddressStrategyFactory` run on
    /// the same rules and addresses.
    #[test]
    fn ipv6_ranges_parse_and_match_as_javas() {
        let ip = |s: &str| Some(s.parse::<IpAddr>().unwrap());
        let rule = |s: &str| Addresses::parse(s).unwrap();
        let last = rule("2::ac5:78:1-200");
        assert!(last.matches(ip("2::ac5:78:100")));
        assert!(!last.matches(ip("2::ac5:78:201")) && !last.matches(ip("2::ac5:79:1")));
        let before_star = rule("1:2:3:4:5:6:1-200:*");
        assert!(before_star.matches(ip("1:2:3:4:5:6:1ff:ffff")));
        assert!(!before_star.matches(ip("1:2:3:4:5:6:201:0")));
        // `fe80::*` is fe80:0 then any third group, as Java fills it out.
        assert!(rule("fe80::*").matches(ip("fe80::1")));
        assert!(!rule("fe80::*").matches(ip("fe80:1::1")));
        assert!(rule("1:2:3:*").matches(ip("1:2:3:ffff::")));
        assert!(!rule("1:2:3:*").matches(ip("1:2:4::")));
        // Families do not cross.
        assert!(!rule("10.1.1-100.*").matches(ip("::1")));
        assert!(!rule("0:0:0:*").matches(ip("0.0.0.1")));
        // Java refuses all but the last; the last it takes and never matches.
        for bad in [
            "1:*:3:4",
            "1:2-3:4:5",
            "1:2:3-4:*:*",
            "1:2:5-3",
            "1:2:x-3",
            "1:2:3*",
        ] {
            let error = Addresses::parse(bad).unwrap_err();
            assert!(error.contains(bad), "{bad}: {error}");
        }
    }

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
