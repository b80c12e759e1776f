//! `KVConfigManager`: the name server's small persistent key-value store.
//!
//! Mirrors `NS/kvconfig/KVConfigManager.java`. Namespaces of key → value, persisted as
//! `{"configTable":{namespace:{key:value}}}` (Java's `KVConfigSerializeWrapper`) to
//! `kvConfigPath` after each change, written to a temporary file and renamed into place so a
//! crash never leaves a half-written file; the previous file is kept as `.bak`, as Java does.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Namespace of the per-topic order configuration (`NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
pub const NAMESPACE_ORDER_TOPIC_CONFIG: &str = "ORDER_TOPIC_CONFIG";

/// The KV tables.
#[doc(alias = "KVConfigManager")]
#[derive(Debug, Default)]
pub struct KvConfigManager {
    table: BTreeMap<String, BTreeMap<String, String>>,
    path: Option<PathBuf>,
}

#[derive(Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct KvConfigSerializeWrapper {
    #[serde(default)]
    config_table: BTreeMap<String, BTreeMap<String, String>>,
}

impl KvConfigManager {
    /// Loads `path` if it exists (an unreadable or corrupt file is an error, not an empty
    /// store: silently dropping an operator's configuration is worse than refusing to start).
    ///
    /// # Errors
    /// The I/O or JSON error, with the path.
    pub fn load(path: &Path) -> Result<KvConfigManager, String> {
        let table = match std::fs::read(path) {
            Ok(bytes) => {
                let wrapper: KvConfigSerializeWrapper = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("{} is not a KV config file: {e}", path.display()))?;
                wrapper.config_table
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(error) => return Err(format!("cannot read {}: {error}", path.display())),
        };
        Ok(KvConfigManager {
            table,
            path: Some(path.to_owned()),
        })
    }

    /// Sets a value; returns whether anything changed.
    pub fn put(&mut self, namespace: &str, key: &str, value: &str) -> bool {
        let entries = self.table.entry(namespace.to_owned()).or_default();
        entries.insert(key.to_owned(), value.to_owned()).as_deref() != Some(value)
    }

    /// A value.
    #[must_use]
    pub fn get(&self, namespace: &str, key: &str) -> Option<&str> {
        self.table.get(namespace)?.get(key).map(String::as_str)
    }

    /// Removes a value; returns whether it existed.
    pub fn delete(&mut self, namespace: &str, key: &str) -> bool {
        let Some(entries) = self.table.get_mut(namespace) else {
            return false;
        };
        let removed = entries.remove(key).is_some();
        if entries.is_empty() {
            self.table.remove(namespace);
        }
        removed
    }

    /// All entries of a namespace, `None` when it has none.
    #[must_use]
    pub fn list(&self, namespace: &str) -> Option<&BTreeMap<String, String>> {
        self.table
            .get(namespace)
            .filter(|entries| !entries.is_empty())
    }

    /// The bytes to persist and where, or `None` for an in-memory store.
    #[must_use]
    pub fn snapshot(&self) -> Option<(PathBuf, Vec<u8>)> {
        let path = self.path.clone()?;
        let wrapper = KvConfigSerializeWrapper {
            config_table: self.table.clone(),
        };
        let bytes = serde_json::to_vec_pretty(&wrapper).expect("string maps serialize");
        Some((path, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn put_get_delete_list() {
        let mut kv = KvConfigManager::default();
        assert!(kv.put("ns", "k", "v"));
        assert!(!kv.put("ns", "k", "v"));
        assert_eq!(kv.get("ns", "k"), Some("v"));
        assert_eq!(kv.list("ns").unwrap().len(), 1);
        assert!(kv.delete("ns", "k"));
        assert!(kv.list("ns").is_none());
    }

    #[test]
    fn persisted_file_loads_back() {
        let dir = std::env::temp_dir().join(format!("ferromq-kv-{}", std::process::id()));
        let path = dir.join("kvConfig.json");
        let mut kv = KvConfigManager::load(&path).unwrap();
        kv.put("ORDER_TOPIC_CONFIG", "T", "broker-a:4");
        let (target, bytes) = kv.snapshot().unwrap();
        crate::config::persist::write_atomically(&target, &bytes).unwrap();
        let loaded = KvConfigManager::load(&path).unwrap();
        assert_eq!(loaded.get("ORDER_TOPIC_CONFIG", "T"), Some("broker-a:4"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
