//! Plain ACL (`aclEnable=true`) against the Java 4.9.8 client with `AclClientRPCHook` and
//! the kit's `mqadmin` with keys in `conf/tools.yml`, run against the kit's Java broker and
//! against ferromq with the same `plain_acl.yml`: every send, consume and admin outcome,
//! refusals with their code and remark, must be the same.
//! Then ferromq alone: the Rust client signing with the same keys, and a change to the file
//! taking effect without a restart.

mod common;

use common::java::{run_java, JavaOutput, JavaServer, Serialize, Standalone};
use common::TempDir;
use ferromq::client::{ClientConfig, ClientError, Message, Producer, SendStatus};
use ferromq::protocol::acl::Credentials;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

const PLAIN_ACL: &str = "\
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
      - topicC=SUB
    groupPerms:
      - groupA=DENY
      - groupB=PUB|SUB
      - groupC=SUB
  - accessKey: rocketmqAdmin
    secretKey: 12345678
    admin: true
";

/// A `rocketmq.home.dir` at `dir/name` holding a copy of the kit's `conf/` (its logback
/// files, which the Java programs load from there).
fn kit_home(dir: &Path, name: &str) -> std::path::PathBuf {
    let home = dir.join(name);
    let conf = home.join("conf");
    std::fs::create_dir_all(&conf).unwrap();
    let kit_conf = common::java::kit().join("conf");
    for entry in std::fs::read_dir(&kit_conf).unwrap() {
        let path = entry.unwrap().path();
        std::fs::copy(&path, conf.join(path.file_name().unwrap())).unwrap();
    }
    home
}

/// The brokers' home: the kit's `conf/` and `conf/plain_acl.yml`.
fn acl_home(dir: &Path) -> std::path::PathBuf {
    let home = kit_home(dir, "home");
    std::fs::write(home.join("conf/plain_acl.yml"), PLAIN_ACL).unwrap();
    home
}

/// What `mqadmin updateTopic` with each account's keys (`conf/tools.yml`) gets from the
/// broker at `broker`: for the user and for the admin, whether it was refused for want of
/// admin permission, and whether it succeeded.
fn mqadmin_update_topic(dir: &Path, namesrv: &str, broker: &str) -> Vec<(bool, bool)> {
    ["RocketMQ", "rocketmqAdmin"]
        .iter()
        .map(|account| {
            let home = kit_home(dir, &format!("tools-{account}"));
            let tools = format!("accessKey: {account}\nsecretKey: 12345678\n");
            std::fs::write(home.join("conf/tools.yml"), tools).unwrap();
            let output = common::java::run_kit_with(
                "mqadmin",
                &[
                    "updateTopic",
                    "-n",
                    namesrv,
                    "-b",
                    broker,
                    "-t",
                    "mqadminAclTopic",
                ],
                Serialize::Json,
                &format!("-Drocketmq.home.dir={}", home.display()),
                Duration::from_secs(60),
            );
            let refused = output
                .text
                .contains("Need admin permission for request code=17, but accessKey=RocketMQ");
            (refused, output.text.contains("create topic to"))
        })
        .collect()
}

/// mqadmin's ACL commands with the admin account's keys against `broker`, and what a Rust
/// client with the account they make can do after each: (step, outcome) pairs.
fn mqadmin_acl_commands(dir: &Path, namesrv: &str, broker: &str) -> Vec<(String, String)> {
    let home = kit_home(dir, "tools-acl-admin");
    std::fs::write(
        home.join("conf/tools.yml"),
        "accessKey: rocketmqAdmin\nsecretKey: 12345678\n",
    )
    .unwrap();
    let jvm = format!("-Drocketmq.home.dir={}", home.display());
    let mqadmin = |args: &[&str]| {
        let mut all = args.to_vec();
        all.extend(["-n", namesrv, "-b", broker]);
        let output = common::java::run_kit_with(
            "mqadmin",
            &all,
            Serialize::Json,
            &jvm,
            Duration::from_secs(60),
        );
        let outcome = if output.text.contains("success") {
            "success"
        } else {
            "failed"
        };
        (args[0].to_owned(), outcome.to_owned())
    };
    let send_as_new_user = || {
        common::runtime().block_on(async {
            let mut config = ClientConfig::new(namesrv);
            config.credentials = Some(Credentials::new("newUser12", "newSecret12"));
            let producer = Producer::new("acl_new_user", config);
            producer.start().await.unwrap();
            let outcome = match producer.send(Message::new("topicN", "new")).await {
                Ok(sent) => format!("{:?}", sent.send_status),
                Err(ClientError::Broker { code, remark }) => {
                    format!(
                        "{code} {}",
                        remark.split(", org.").next().unwrap_or_default()
                    )
                }
                Err(error) => format!("client {error}"),
            };
            producer.shutdown().await;
            ("send as newUser12".to_owned(), outcome)
        })
    };
    let create = [
        "updateAclConfig",
        "-a",
        "newUser12",
        "-s",
        "newSecret12",
        "-t",
        "topicN=PUB",
    ];
    vec![
        mqadmin(&create),
        send_as_new_user(),
        mqadmin(&["clusterAclConfigVersion"]),
        mqadmin(&["deleteAclConfig", "-a", "newUser12"]),
        send_as_new_user(),
        mqadmin(&["updateGlobalWhiteAddr", "-g", "10.0.0.*"]),
    ]
}

/// The RESULT lines of a run, by key.
fn results(output: &JavaOutput) -> BTreeMap<String, String> {
    output
        .text
        .lines()
        .filter_map(|line| line.strip_prefix("RESULT "))
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

#[test]
fn the_java_acl_client_gets_from_ferromq_what_it_gets_from_the_java_broker() {
    let dir = TempDir::on_disk("java-acl");
    let home = acl_home(dir.path());

    let java_namesrv = JavaServer::namesrv(dir.path());
    let jvm = format!(
        "-Drocketmq.home.dir={} -Drocketmq.broker.diskSpaceWarningLevelRatio=0.999",
        home.display()
    );
    let java_broker = JavaServer::broker_with_jvm(
        dir.path(),
        java_namesrv.port,
        &dir.path().join("java-store"),
        "aclEnable=true\ndiskMaxUsedSpaceRatio=95",
        &jvm,
    );
    let java_ns = format!("127.0.0.1:{}", java_namesrv.port);
    let java = run_java(
        "Acl",
        &[&java_ns, &java_broker.addr()],
        Serialize::Json,
        Duration::from_secs(240),
    );
    java.assert_passed("Acl against the Java broker");
    // The Rust client's signature is one the Java broker accepts, and only that.
    common::runtime().block_on(async {
        for (secret, ok) in [("12345678", true), ("wrongsecret", false)] {
            let mut config = ClientConfig::new(&java_ns);
            config.credentials = Some(Credentials::new("RocketMQ", secret));
            let producer = Producer::new("acl_rust_on_java", config);
            producer.start().await.unwrap();
            let sent = producer.send(Message::new("topicB", "rust")).await;
            assert_eq!(sent.is_ok(), ok, "{secret}: {sent:?}");
            producer.shutdown().await;
        }
    });
    let java_mqadmin = mqadmin_update_topic(dir.path(), &java_ns, &java_broker.addr());
    assert_eq!(
        java_mqadmin,
        [(true, false), (false, true)],
        "mqadmin on the Java broker"
    );
    let java_acl_commands = mqadmin_acl_commands(dir.path(), &java_ns, &java_broker.addr());
    assert_eq!(java_acl_commands[1].1, "SendOk", "{java_acl_commands:#?}");
    java_broker.stop();
    java_namesrv.stop();
    let java = results(&java);

    let ours = Standalone::start(&format!(
        "aclEnable=true\nrocketmqHome={}\ndiskSpaceWarningLevelRatio=0.999",
        home.display()
    ));
    let output = run_java(
        "Acl",
        &[&ours.namesrv_addr(), &ours.broker_addr()],
        Serialize::Json,
        Duration::from_secs(240),
    );
    output.assert_passed("Acl against ferromq");
    let ferromq = results(&output);
    let ours_mqadmin = mqadmin_update_topic(dir.path(), &ours.namesrv_addr(), &ours.broker_addr());
    assert_eq!(ours_mqadmin, java_mqadmin, "mqadmin on ferromq");
    let ours_acl_commands =
        mqadmin_acl_commands(dir.path(), &ours.namesrv_addr(), &ours.broker_addr());
    assert_eq!(
        ours_acl_commands, java_acl_commands,
        "mqadmin's ACL commands on ferromq"
    );

    // The Java broker's answers are what the file says.
    assert_eq!(java["send_topicB"], "SEND_OK", "{java:#?}");
    assert!(java["send_topicA_denied"].contains("No default permission for topic:topicA"));
    assert_eq!(java["consumed_topicB_groupB"], "2", "{java:#?}");
    assert!(java["send_wrong_secret"].contains("Check signature failed for accessKey=RocketMQ"));
    assert_eq!(java["create_topic_admin"], "SUCCESS", "{java:#?}");
    assert_eq!(java.len(), 11, "{java:#?}");
    for (key, java_value) in &java {
        assert_eq!(
            ferromq.get(key),
            Some(java_value),
            "{key}: ferromq {ferromq:#?}"
        );
    }
}

/// The Rust client signs with the same keys; a change to the file (topicA from DENY to
/// PUB) takes effect within the watch interval, with no restart, and a file that no longer
/// parses leaves the rules in force. `ferromq admin` signs when given keys.
#[test]
fn the_rust_client_signs_and_file_changes_take_effect_without_a_restart() {
    let dir = TempDir::on_disk("acl-reload");
    let home = acl_home(dir.path());
    let ours = Standalone::start(&format!("aclEnable=true\nrocketmqHome={}", home.display()));
    let namesrv = ours.namesrv_addr();
    common::runtime().block_on(async {
        let mut config = ClientConfig::new(&namesrv);
        config.credentials = Some(Credentials::new("RocketMQ", "12345678"));
        let producer = Producer::new("acl_rust_pg", config);
        producer.start().await.unwrap();
        let send = |topic: &'static str| {
            let producer = producer.clone();
            async move { producer.send(Message::new(topic, "rust")).await }
        };
        let sent = send("topicB").await.unwrap();
        assert_eq!(sent.send_status, SendStatus::SendOk);
        let refused = send("topicA").await;
        assert!(
            matches!(&refused, Err(ClientError::Broker { code: 1, remark })
                if remark.contains("No default permission for topic:topicA")),
            "{refused:?}"
        );

        // A file that is not YAML: the rules in force stay.
        let file = home.join("conf/plain_acl.yml");
        std::fs::write(&file, "accounts: [ {").unwrap();
        tokio::time::sleep(Duration::from_secs(7)).await;
        assert!(
            send("topicB").await.is_ok(),
            "a broken file dropped the rules"
        );

        std::fs::write(&file, PLAIN_ACL.replace("topicA=DENY", "topicA=PUB")).unwrap();
        let written = Instant::now();
        let deadline = written + Duration::from_secs(30);
        loop {
            match send("topicA").await {
                Ok(sent) => {
                    assert_eq!(sent.send_status, SendStatus::SendOk);
                    // Within the watch interval (Java's 5 s), with 3 s for the sends and
                    // pauses of this loop on a loaded machine.
                    let took = written.elapsed();
                    let bound = ferromq::broker::acl::WATCH_INTERVAL + Duration::from_secs(3);
                    assert!(took <= bound, "the change took effect after {took:?}");
                    break;
                }
                Err(error) => {
                    assert!(
                        Instant::now() < deadline,
                        "the change never took effect: {error}"
                    );
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        }
        producer.shutdown().await;
    });

    // `ferromq admin` signs with --accessKey/--secretKey: refused without keys or without
    // the admin flag, served with the admin account.
    let broker = ours.broker_addr();
    let admin = |keys: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_ferromq"))
            .args([
                "admin",
                "-n",
                &namesrv,
                "updateTopic",
                "-b",
                &broker,
                "-t",
                "adminMade",
            ])
            .args(keys)
            .output()
            .expect("run ferromq admin");
        let text = String::from_utf8_lossy(&output.stderr).into_owned();
        (output.status.success(), text)
    };
    let (ok, text) = admin(&[]);
    assert!(!ok && text.contains("No accessKey is configured"), "{text}");
    let (ok, text) = admin(&["--accessKey", "RocketMQ", "--secretKey", "12345678"]);
    assert!(
        !ok && text.contains("Need admin permission for request code=17"),
        "{text}"
    );
    let (ok, text) = admin(&["--accessKey", "rocketmqAdmin", "--secretKey", "12345678"]);
    assert!(ok, "{text}");
}
