//! `topics.json` and `subscriptionGroup.json` as the Java 4.9.8 broker writes them.
//!
//! Method: parse every copy the fixture store holds (`clean/` and `crashed/`, current and
//! `.bak`), check the values against what we know the broker had (MANIFEST.json's parsed copy
//! of each file, plus the topics and groups the fixture README describes), and write each one
//! back to exactly the bytes on disk. Then tables built in code round-trip, files in the other
//! shapes Java may leave (quoted or bare keys, missing fields, 5.x fields) parse with Java's
//! defaults, and every malformed input is an error that names the file, never a panic.

mod common;

use ferromq::store::config_files::{
    DataVersion, SubscriptionGroupConfig, SubscriptionGroupTable, TopicConfig, TopicConfigTable,
};
use serde_json::Value;
use std::path::PathBuf;

fn config_dir(store: &str) -> PathBuf {
    common::fixtures_dir()
        .join("store")
        .join(store)
        .join("config")
}

fn read(store: &str, file: &str) -> Vec<u8> {
    let path = config_dir(store).join(file);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// MANIFEST.json's copy of `file` (parsed by the fixture's authors after quoting integer keys).
fn manifest_config(file: &str) -> Value {
    let path = common::fixtures_dir().join("store/MANIFEST.json");
    let manifest: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    manifest["config"][file].clone()
}

/// MANIFEST.json's copy of `file.bak`, the version before the broker's last change.
fn manifest_config_bak(file: &str) -> Value {
    let path = common::fixtures_dir().join("store/MANIFEST.json");
    let manifest: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    manifest["configBak"][format!("{file}.bak")].clone()
}

/// The copies of `file` in the fixture: both stores, current and `.bak` where present.
fn fixture_copies(file: &str) -> Vec<(String, Vec<u8>)> {
    let mut copies = Vec::new();
    for store in ["clean", "crashed"] {
        for name in [file.to_owned(), format!("{file}.bak")] {
            if config_dir(store).join(&name).exists() {
                copies.push((format!("{store}/config/{name}"), read(store, &name)));
            }
        }
    }
    copies
}

const JAVA_TOPICS: [&str; 13] = [
    "SCHEDULE_TOPIC_XXXX",
    "SELF_TEST_TOPIC",
    "FixStoreB",
    "FixStoreC",
    "FixStoreA",
    "DefaultCluster",
    "DefaultCluster_REPLY_TOPIC",
    "%RETRY%fix_store_cg",
    "RMQ_SYS_TRANS_HALF_TOPIC",
    "broker-a",
    "TBW102",
    "BenchmarkTest",
    "OFFSET_MOVED_EVENT",
];

const JAVA_GROUPS: [&str; 8] = [
    "SELF_TEST_C_GROUP",
    "CID_ONSAPI_OWNER",
    "CID_ONSAPI_PERMISSION",
    "TOOLS_CONSUMER",
    "CID_ONS-HTTP-PROXY",
    "fix_store_cg",
    "FILTERSRV_CONSUMER",
    "CID_ONSAPI_PULL",
];

fn topic(name: &str, queues: i32, perm: i32) -> TopicConfig {
    TopicConfig {
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm,
        ..TopicConfig::named(name)
    }
}

#[test]
fn java_topics_json_parses_to_the_broker_topics() {
    let table = TopicConfigTable::parse(&read("clean", "topics.json")).unwrap();
    // The timestamp is the fixture run's wall clock; MANIFEST.json has it from its own parser.
    let timestamp = manifest_config("topics.json")["dataVersion"]["timestamp"]
        .as_i64()
        .unwrap();
    assert_eq!(
        table.data_version,
        DataVersion {
            counter: 5,
            state_version: 0,
            timestamp
        }
    );
    let names: Vec<&str> = table.entries.iter().map(|(key, _)| key.as_str()).collect();
    assert_eq!(names, JAVA_TOPICS, "file order kept");
    for (key, config) in &table.entries {
        assert_eq!(&config.topic_name, key);
        assert_eq!(config.topic_filter_type, "SINGLE_TAG", "{key}");
        assert_eq!((config.topic_sys_flag, config.order), (0, false), "{key}");
        assert!(config.attributes.is_empty(), "{key}: 4.9 has no attributes");
    }
    // Created with mqadmin updateTopic -r 4 -w 4.
    for name in ["FixStoreA", "FixStoreB", "FixStoreC"] {
        assert_eq!(table.get(name), Some(&topic(name, 4, 6)));
    }
    // One queue per delay level; the broker's own topics.
    assert_eq!(
        table.get("SCHEDULE_TOPIC_XXXX"),
        Some(&topic("SCHEDULE_TOPIC_XXXX", 18, 6))
    );
    assert_eq!(table.get("TBW102"), Some(&topic("TBW102", 8, 7)));
    assert_eq!(
        table.get("DefaultCluster"),
        Some(&topic("DefaultCluster", 16, 7))
    );
    assert_eq!(table.get("broker-a"), Some(&topic("broker-a", 1, 7)));
    assert_eq!(
        table.get("BenchmarkTest"),
        Some(&topic("BenchmarkTest", 1024, 6))
    );
    assert_eq!(
        table.get("%RETRY%fix_store_cg"),
        Some(&topic("%RETRY%fix_store_cg", 1, 6))
    );
    assert_eq!(
        table.get("RMQ_SYS_TRANS_HALF_TOPIC"),
        Some(&topic("RMQ_SYS_TRANS_HALF_TOPIC", 1, 6))
    );
    assert_eq!(
        table.get("RMQ_SYS_TRANS_OP_HALF_TOPIC"),
        None,
        "Java 4.9.8 writes op messages without registering the op topic"
    );
}

#[test]
fn java_topics_json_agrees_with_the_manifest_field_by_field() {
    let table = TopicConfigTable::parse(&read("clean", "topics.json")).unwrap();
    let expected = manifest_config("topics.json");
    let version = &expected["dataVersion"];
    assert_eq!(
        Some(table.data_version.counter),
        version["counter"].as_i64()
    );
    assert_eq!(
        Some(table.data_version.timestamp),
        version["timestamp"].as_i64()
    );
    let topics = expected["topicConfigTable"].as_object().unwrap();
    assert_eq!(topics.len(), table.entries.len());
    for ((key, config), (expected_key, fields)) in table.entries.iter().zip(topics) {
        assert_eq!(key, expected_key, "same order");
        let int = |name: &str| fields[name].as_i64().unwrap();
        assert_eq!(config.topic_name, fields["topicName"].as_str().unwrap());
        assert_eq!(
            i64::from(config.read_queue_nums),
            int("readQueueNums"),
            "{key}"
        );
        assert_eq!(
            i64::from(config.write_queue_nums),
            int("writeQueueNums"),
            "{key}"
        );
        assert_eq!(i64::from(config.perm), int("perm"), "{key}");
        assert_eq!(
            i64::from(config.topic_sys_flag),
            int("topicSysFlag"),
            "{key}"
        );
        assert_eq!(Some(config.order), fields["order"].as_bool(), "{key}");
        assert_eq!(
            config.topic_filter_type,
            fields["topicFilterType"].as_str().unwrap()
        );
    }
}

#[test]
fn java_topics_bak_is_the_version_before_the_half_topic() {
    let previous = TopicConfigTable::parse(&read("clean", "topics.json.bak")).unwrap();
    let current = TopicConfigTable::parse(&read("clean", "topics.json")).unwrap();
    assert_eq!(previous.data_version.counter, 4);
    assert_eq!(
        Some(previous.data_version.timestamp),
        manifest_config_bak("topics.json")["dataVersion"]["timestamp"].as_i64()
    );
    assert_eq!(previous.get("RMQ_SYS_TRANS_HALF_TOPIC"), None);
    assert_eq!(previous.entries.len(), 12);

    // Replaying the change here gives Java's content with the new topic appended, where
    // Java's hash order put it in the middle: parse order is kept, Java's order is not made.
    let mut replayed = previous.clone();
    let half = current.get("RMQ_SYS_TRANS_HALF_TOPIC").unwrap().clone();
    assert_eq!(replayed.insert(half.clone()), None);
    replayed.data_version = current.data_version;
    assert_eq!(
        replayed.entries.last(),
        Some(&(half.topic_name.clone(), half))
    );
    let mut sorted_replayed = replayed.entries.clone();
    let mut sorted_current = current.entries.clone();
    sorted_replayed.sort_by(|a, b| a.0.cmp(&b.0));
    sorted_current.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(sorted_replayed, sorted_current);
    assert_ne!(replayed.to_json(), current.to_json());
}

#[test]
fn java_topics_files_rewrite_byte_for_byte() {
    let copies = fixture_copies("topics.json");
    assert_eq!(copies.len(), 4, "clean and crashed, each with a .bak");
    for (name, bytes) in copies {
        let table = TopicConfigTable::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            table.to_json().as_bytes() == bytes,
            "{name} differs from Java:\n{}",
            table.to_json()
        );
    }
}

#[test]
fn java_subscription_group_json_parses_to_java_defaults() {
    let table = SubscriptionGroupTable::parse(&read("clean", "subscriptionGroup.json")).unwrap();
    assert_eq!(table.data_version.counter, 1);
    assert_eq!(
        Some(table.data_version.timestamp),
        manifest_config("subscriptionGroup.json")["dataVersion"]["timestamp"].as_i64()
    );
    let names: Vec<&str> = table.entries.iter().map(|(key, _)| key.as_str()).collect();
    assert_eq!(names, JAVA_GROUPS, "file order kept");
    // The seven built-in groups and the auto-created `fix_store_cg` all have the defaults.
    for (key, config) in &table.entries {
        assert_eq!(config, &SubscriptionGroupConfig::new(key));
    }
    let fix_store_cg = table.get("fix_store_cg").unwrap();
    assert_eq!(fix_store_cg.retry_max_times, 16);
    assert_eq!(fix_store_cg.retry_queue_nums, 1);
    assert_eq!(fix_store_cg.which_broker_when_consume_slowly, 1);
    assert!(fix_store_cg.consume_broadcast_enable);
    assert_eq!(
        table.get("fix_store_tpg"),
        None,
        "producer groups are not here"
    );

    let expected = manifest_config("subscriptionGroup.json");
    assert_eq!(
        Some(table.data_version.timestamp),
        expected["dataVersion"]["timestamp"].as_i64()
    );
    let groups = expected["subscriptionGroupTable"].as_object().unwrap();
    let expected_names: Vec<&str> = groups.keys().map(String::as_str).collect();
    assert_eq!(names, expected_names);
    for (key, fields) in groups {
        let config = table.get(key).unwrap();
        assert_eq!(Some(config.broker_id), fields["brokerId"].as_i64());
        assert_eq!(
            Some(i64::from(config.retry_max_times)),
            fields["retryMaxTimes"].as_i64()
        );
        assert_eq!(
            Some(config.consume_enable),
            fields["consumeEnable"].as_bool()
        );
    }
}

#[test]
fn java_subscription_group_files_rewrite_byte_for_byte() {
    let copies = fixture_copies("subscriptionGroup.json");
    // Java persisted the groups once (counter 1), so there was no older file to keep as .bak.
    assert!(copies.len() >= 2, "clean and crashed");
    for (name, bytes) in copies {
        let table = SubscriptionGroupTable::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            table.to_json().as_bytes() == bytes,
            "{name} differs from Java:\n{}",
            table.to_json()
        );
    }
}

#[test]
fn topic_table_built_in_code_writes_java_shape_and_round_trips() {
    let mut table = TopicConfigTable {
        data_version: DataVersion {
            counter: 2,
            state_version: 0,
            timestamp: 1_700_000_000_000,
        },
        ..TopicConfigTable::default()
    };
    assert_eq!(table.insert(topic("b", 4, 6)), None);
    let ordered = TopicConfig {
        order: true,
        topic_sys_flag: 1,
        topic_filter_type: "MULTI_TAG".into(),
        ..TopicConfig::named("a \"quoted\" é")
    };
    assert_eq!(table.insert(ordered.clone()), None);
    assert_eq!(
        table.insert(topic("b", 8, 4)),
        Some(topic("b", 4, 6)),
        "replaced in place"
    );
    let json = table.to_json();
    let expected = concat!(
        "{\n",
        "\t\"dataVersion\":{\n",
        "\t\t\"counter\":2,\n",
        "\t\t\"timestamp\":1700000000000\n",
        "\t},\n",
        "\t\"topicConfigTable\":{\n",
        "\t\t\"b\":{\n",
        "\t\t\t\"order\":false,\n",
        "\t\t\t\"perm\":4,\n",
        "\t\t\t\"readQueueNums\":8,\n",
        "\t\t\t\"topicFilterType\":\"SINGLE_TAG\",\n",
        "\t\t\t\"topicName\":\"b\",\n",
        "\t\t\t\"topicSysFlag\":0,\n",
        "\t\t\t\"writeQueueNums\":8\n",
        "\t\t},\n",
        "\t\t\"a \\\"quoted\\\" é\":{\n",
        "\t\t\t\"order\":true,\n",
        "\t\t\t\"perm\":6,\n",
        "\t\t\t\"readQueueNums\":16,\n",
        "\t\t\t\"topicFilterType\":\"MULTI_TAG\",\n",
        "\t\t\t\"topicName\":\"a \\\"quoted\\\" é\",\n",
        "\t\t\t\"topicSysFlag\":1,\n",
        "\t\t\t\"writeQueueNums\":16\n",
        "\t\t}\n",
        "\t}\n",
        "}"
    );
    assert_eq!(json, expected);
    let parsed = TopicConfigTable::parse(json.as_bytes()).unwrap();
    assert_eq!(parsed, table);
    assert_eq!(parsed.get("a \"quoted\" é"), Some(&ordered));
    assert_eq!(parsed.to_json(), json);
}

#[test]
fn subscription_group_table_built_in_code_round_trips() {
    let mut table = SubscriptionGroupTable::default();
    table.data_version.counter = 7;
    table.data_version.timestamp = 1_700_000_000_001;
    table.insert(SubscriptionGroupConfig::new("g1"));
    table.insert(SubscriptionGroupConfig {
        consume_enable: false,
        retry_max_times: 3,
        retry_queue_nums: 2,
        broker_id: 1,
        which_broker_when_consume_slowly: 2,
        ..SubscriptionGroupConfig::new("g0")
    });
    let json = table.to_json();
    assert!(json.starts_with("{\n\t\"dataVersion\":{\n\t\t\"counter\":7,\n"));
    let g0 = concat!(
        "\t\t\"g0\":{\n",
        "\t\t\t\"brokerId\":1,\n",
        "\t\t\t\"consumeBroadcastEnable\":true,\n",
        "\t\t\t\"consumeEnable\":false,\n",
        "\t\t\t\"consumeFromMinEnable\":true,\n",
        "\t\t\t\"groupName\":\"g0\",\n",
        "\t\t\t\"notifyConsumerIdsChangedEnable\":true,\n",
        "\t\t\t\"retryMaxTimes\":3,\n",
        "\t\t\t\"retryQueueNums\":2,\n",
        "\t\t\t\"whichBrokerWhenConsumeSlowly\":2\n",
        "\t\t}\n",
        "\t}\n",
        "}"
    );
    assert!(json.ends_with(g0), "{json}");
    let parsed = SubscriptionGroupTable::parse(json.as_bytes()).unwrap();
    assert_eq!(parsed, table);
    assert_eq!(parsed.to_json(), json);
}

#[test]
fn topics_in_other_shapes_parse_with_java_defaults() {
    // Quoted and bare keys, fields missing, 5.x fields (stateVersion, attributes), unknown
    // fields, compact rather than pretty.
    let text = concat!(
        "{\"topicConfigTable\":{",
        "\"Full\":{\"topicName\":\"Full\",\"readQueueNums\":2,\"writeQueueNums\":3,",
        "\"perm\":2,\"topicFilterType\":\"MULTI_TAG\",\"topicSysFlag\":2,\"order\":true,",
        "\"attributes\":{\"+message.type\":\"FIFO\"},\"futureField\":[1,{2:3}]},",
        "\"Bare\":{},\n\t\t42:{\"perm\":4}},",
        "\"dataVersion\":{\"counter\":9,\"stateVersion\":2,\"timestamp\":5},",
        "\"mappingDataVersion\":{\"counter\":1},\"topicQueueMappingInfoMap\":{}}"
    );
    let table = TopicConfigTable::parse(text.as_bytes()).unwrap();
    assert_eq!(
        table.data_version,
        DataVersion {
            counter: 9,
            state_version: 2,
            timestamp: 5
        }
    );
    let full = table.get("Full").unwrap();
    assert_eq!(
        (full.read_queue_nums, full.write_queue_nums, full.perm),
        (2, 3, 2)
    );
    assert_eq!(
        (
            full.topic_filter_type.as_str(),
            full.topic_sys_flag,
            full.order
        ),
        ("MULTI_TAG", 2, true)
    );
    assert_eq!(full.attributes["+message.type"], "FIFO");
    assert_eq!(table.get("Bare"), Some(&TopicConfig::named("Bare")));
    assert_eq!(
        table.get("42"),
        Some(&topic("42", 16, 4)),
        "bare key, name from it"
    );

    // A 5.x file with every field at its default is the 4.9 file plus `"attributes":{}` and
    // `"stateVersion":0`; writing it back gives the 4.9 file.
    let five_x = concat!(
        "{\n\t\"dataVersion\":{\n\t\t\"counter\":1,\n\t\t\"stateVersion\":0,\n",
        "\t\t\"timestamp\":2\n\t},\n\t\"topicConfigTable\":{\n\t\t\"T\":{\n",
        "\t\t\t\"attributes\":{},\n\t\t\t\"order\":false,\n\t\t\t\"perm\":6,\n",
        "\t\t\t\"readQueueNums\":4,\n\t\t\t\"topicFilterType\":\"SINGLE_TAG\",\n",
        "\t\t\t\"topicName\":\"T\",\n\t\t\t\"topicSysFlag\":0,\n\t\t\t\"writeQueueNums\":4\n",
        "\t\t}\n\t}\n}"
    );
    let table = TopicConfigTable::parse(five_x.as_bytes()).unwrap();
    assert_eq!(table.get("T"), Some(&topic("T", 4, 6)));
    let four_nine = five_x
        .replace("\t\t\"stateVersion\":0,\n", "")
        .replace("\t\t\t\"attributes\":{},\n", "");
    assert_eq!(table.to_json(), four_nine);

    // No table and no version: an empty table, as Java's wrapper starts out.
    assert_eq!(
        TopicConfigTable::parse(b"{}").unwrap(),
        TopicConfigTable::default()
    );
}

#[test]
fn subscription_groups_in_other_shapes_parse_with_java_defaults() {
    // A 5.x file: forbiddenTable, stateVersion, and the 5.x group fields next to the 4.9 ones;
    // one entry quoted and complete, one with most fields missing, one bare-keyed and empty.
    let text = concat!(
        "{\n\t\"dataVersion\":{\n\t\t\"counter\":3,\n\t\t\"stateVersion\":1,\n",
        "\t\t\"timestamp\":4\n\t},\n",
        "\t\"forbiddenTable\":{\"cg\":{\"TopicA\":1}},\n",
        "\t\"subscriptionGroupTable\":{\n",
        "\t\t\"cg\":{\"attributes\":{},\"brokerId\":1,\"consumeBroadcastEnable\":false,",
        "\"consumeEnable\":false,\"consumeFromMinEnable\":false,",
        "\"consumeMessageOrderly\":true,\"consumeTimeoutMinute\":15,\"groupName\":\"cg\",",
        "\"groupRetryPolicy\":{\"type\":\"CUSTOMIZED\",\"customizedRetryPolicy\":",
        "{\"next\":[1000,5000]}},\"groupSysFlag\":0,",
        "\"notifyConsumerIdsChangedEnable\":false,\"retryMaxTimes\":2,",
        "\"retryQueueNums\":3,\"subscriptionDataSet\":[{\"topic\":\"TopicA\"}],",
        "\"whichBrokerWhenConsumeSlowly\":4},\n",
        "\t\t\"partial\":{\"retryMaxTimes\":5},\n",
        "\t\t7:{}\n",
        "\t}\n}"
    );
    let table = SubscriptionGroupTable::parse(text.as_bytes()).unwrap();
    assert_eq!(
        table.data_version,
        DataVersion {
            counter: 3,
            state_version: 1,
            timestamp: 4
        }
    );
    assert_eq!(
        table.get("cg"),
        Some(&SubscriptionGroupConfig {
            group_name: "cg".into(),
            consume_enable: false,
            consume_from_min_enable: false,
            consume_broadcast_enable: false,
            retry_queue_nums: 3,
            retry_max_times: 2,
            broker_id: 1,
            which_broker_when_consume_slowly: 4,
            notify_consumer_ids_changed_enable: false,
        })
    );
    assert_eq!(
        table.get("partial"),
        Some(&SubscriptionGroupConfig {
            retry_max_times: 5,
            ..SubscriptionGroupConfig::new("partial")
        })
    );
    assert_eq!(table.get("7"), Some(&SubscriptionGroupConfig::new("7")));
    let json = table.to_json();
    assert!(!json.contains("forbiddenTable") && !json.contains("groupRetryPolicy"));
    assert_eq!(
        SubscriptionGroupTable::parse(json.as_bytes()).unwrap(),
        table
    );
}

#[test]
fn malformed_files_are_errors_naming_the_file_and_the_problem() {
    let cases: [(&[u8], &str); 9] = [
        (b"", "EOF"),
        (b"{\"topicConfigTable\":{\"T\":{\"perm\":6,}}}", "line 1"),
        (b"[]", "not an object"),
        (b"\xff\xfe", "utf-8"),
        (
            b"{\"topicConfigTable\":[]}",
            "`topicConfigTable` is not an object",
        ),
        (b"{\"topicConfigTable\":{\"T\":5}}", "`T`"),
        (
            b"{\"topicConfigTable\":{\"T\":{\"perm\":\"6\"}}}",
            "invalid type",
        ),
        (
            b"{\"topicConfigTable\":{\"T\":{\"readQueueNums\":1e99}}}",
            "`T`",
        ),
        (b"{\"dataVersion\":{\"counter\":true}}", "`dataVersion`"),
    ];
    for (bytes, problem) in cases {
        let error = TopicConfigTable::parse(bytes).unwrap_err().to_string();
        let input = String::from_utf8_lossy(bytes);
        assert!(error.contains("topics.json"), "{input}: {error}");
        assert!(
            error.to_lowercase().contains(&problem.to_lowercase()),
            "{input}: {error} should mention {problem}"
        );
    }
    let error =
        SubscriptionGroupTable::parse(b"{\"subscriptionGroupTable\":{\"g\":{\"brokerId\":[]}}}")
            .unwrap_err()
            .to_string();
    assert!(
        error.contains("subscriptionGroup.json") && error.contains("`g`"),
        "{error}"
    );

    // A file cut short anywhere (a torn write Java's .tmp-and-rename should prevent) is an
    // error, never a panic and never a shorter table.
    for (file, bytes) in [
        ("topics.json", read("clean", "topics.json")),
        (
            "subscriptionGroup.json",
            read("clean", "subscriptionGroup.json"),
        ),
    ] {
        for end in 0..bytes.len() {
            let prefix = &bytes[..end];
            let error = if file == "topics.json" {
                TopicConfigTable::parse(prefix).err().map(|e| e.to_string())
            } else {
                SubscriptionGroupTable::parse(prefix)
                    .err()
                    .map(|e| e.to_string())
            };
            let error = error.unwrap_or_else(|| panic!("{file} cut at {end} parsed"));
            assert!(error.contains(file), "{error}");
        }
    }
}
