//! The ACL admin requests applied to the files (`PlainPermissionManager` in Java):
//! UPDATE_AND_CREATE_ACL_CONFIG and DELETE_ACL_CONFIG rewrite the owning file (else the
//! default one) with its `dataVersion` bumped, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG replaces a
//! file's global white list, and GET_BROKER_CLUSTER_ACL_INFO reads the versions.

use super::*;

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
