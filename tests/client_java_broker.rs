//! The Rust client (`ferromq-client`) against the Java 4.9.8 broker and name server of the
//! kit: what it does must work on the broker most users run, not only on ferromq's.
//! SQL92 selectors (the broker filters, with `enablePropertyFilter=true`) in both consumers,
//! and the instance's admin calls (`create_topic`, `earliest_msg_store_time`).

mod common;

use common::java::JavaServer;
use common::TempDir;
use ferromq::client::consumer::{
    ConsumeConcurrentlyStatus, ConsumeFromWhere, LitePullConsumer, LitePullConsumerConfig,
    MessageSelector, PushConsumer, PushConsumerConfig,
};
use ferromq::client::{ClientConfig, ClientInstance, Message, MessageExt, MessageQueue, Producer};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

/// The kit's name server and a broker with SQL92 filtering on.
struct JavaCluster {
    namesrv: JavaServer,
    broker: JavaServer,
    _dir: TempDir,
}

impl JavaCluster {
    fn start(name: &str) -> JavaCluster {
        let dir = TempDir::on_disk(name);
        let namesrv = JavaServer::namesrv(dir.path());
        // The Java broker reads its disk-full level from a system property only.
        let broker = JavaServer::broker_with_jvm(
            dir.path(),
            namesrv.port,
            &dir.path().join("store"),
            "enablePropertyFilter=true\ndiskMaxUsedSpaceRatio=95",
            "-Drocketmq.broker.diskSpaceWarningLevelRatio=0.999",
        );
        JavaCluster {
            namesrv,
            broker,
            _dir: dir,
        }
    }

    fn client(&self, instance: &str) -> ClientConfig {
        let mut config = ClientConfig::new(&self.namesrv.addr());
        config.instance_name = instance.to_owned();
        config
    }
}

/// Waits (bounded) until the name server has a route for `topic`; its queues.
async fn route_of(instance: &ClientInstance, topic: &str) -> Vec<MessageQueue> {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Ok(route) = instance.refresh_topic_route(topic).await {
            return route.subscribe_queues.clone();
        }
        assert!(Instant::now() < deadline, "no route for {topic}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The `a` property of each message, in the order polled.
fn values(messages: &[MessageExt]) -> Vec<i64> {
    messages
        .iter()
        .filter_map(|m| m.property("a").and_then(|a| a.parse().ok()))
        .collect()
}

#[test]
fn sql92_selectors_and_admin_calls_work_on_the_java_broker() {
    let cluster = JavaCluster::start("client-java-broker");
    common::runtime().block_on(async {
        let instance = ClientInstance::new(cluster.client("admin"));
        instance.start().unwrap();
        let deadline = Instant::now() + WAIT;
        while instance.fetch_route("TBW102").await.is_err() {
            assert!(
                Instant::now() < deadline,
                "the Java broker never registered"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }

        // MQAdmin.createTopic: the Java broker makes the topic and registers it.
        instance.create_topic("TBW102", "SqlT", 2).await.unwrap();
        let queues = route_of(&instance, "SqlT").await;
        assert_eq!(queues.len(), 2);
        let q0 = MessageQueue::new("SqlT", "broker-a", 0);
        assert_eq!(instance.earliest_msg_store_time(&q0).await.unwrap(), -1);

        let producer = Producer::new("sql-producer", cluster.client("producer"));
        producer.start().await.unwrap();
        let before = ferromq::calendar::now_ms();
        for i in 0..20 {
            let mut message = Message::new("SqlT", format!("m{i}"));
            message.put_user_property("a", &i.to_string()).unwrap();
            let queue = &queues[i % 2];
            producer.send_to_queue(message, queue).await.unwrap();
        }
        let after = ferromq::calendar::now_ms();
        producer.shutdown().await;
        let earliest = instance.earliest_msg_store_time(&q0).await.unwrap();
        assert!(
            (before..=after).contains(&earliest),
            "{before} <= {earliest} <= {after}"
        );

        // The lite pull consumer posts its SQL92 subscription with each pull.
        let mut config = LitePullConsumerConfig::new("sql-lite");
        config.consume_from_where = ConsumeFromWhere::FirstOffset;
        let lite = LitePullConsumer::new(cluster.client("lite"), config);
        lite.subscribe_with_selector("SqlT", &MessageSelector::by_sql("a < 5"))
            .unwrap();
        lite.start().await.unwrap();
        let mut polled = Vec::new();
        let deadline = Instant::now() + WAIT;
        while polled.len() < 5 && Instant::now() < deadline {
            polled.extend(lite.poll(Duration::from_millis(500)).await);
        }
        let quiet = Instant::now() + Duration::from_secs(3);
        while Instant::now() < quiet {
            polled.extend(lite.poll(Duration::from_millis(300)).await);
        }
        lite.shutdown().await;
        let got: BTreeSet<i64> = values(&polled).into_iter().collect();
        assert_eq!(got, (0..5).collect(), "lite pull, a < 5");
        assert_eq!(
            polled.len(),
            5,
            "lite pull delivered more than the selector matches"
        );

        // The push consumer's subscription reaches the broker in its heartbeat.
        let mut config = PushConsumerConfig::new("sql-push");
        config.consume_from_where = ConsumeFromWhere::FirstOffset;
        let push = PushConsumer::new(cluster.client("push"), config);
        let selector = MessageSelector::by_sql("a >= 10 AND a < 15");
        push.subscribe_with_selector("SqlT", &selector).unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        push.register_message_listener_concurrently(move |messages: &[MessageExt]| {
            sink.lock().unwrap().extend(values(messages));
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
        push.start().await.unwrap();
        let deadline = Instant::now() + WAIT;
        while seen.lock().unwrap().len() < 5 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        push.shutdown().await;
        let mut got = seen.lock().unwrap().clone();
        got.sort_unstable();
        assert_eq!(got, (10..15).collect::<Vec<i64>>(), "push, 10 <= a < 15");
    });
    drop(cluster.broker);
}
