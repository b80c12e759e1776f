// Retry and dead letter as a Java application sees them: a push consumer answers
// RECONSUME_LATER to every delivery with maxReconsumeTimes 2, so each message comes back at
// delay level 3 (10 s) and 4 (30 s) and then goes to %DLQ%<group>, which a pull consumer
// reads. Checks every delivery's reconsume times, message id, topic, properties and timing,
// and the dead letter's fields.
//
// args: namesrv topic count

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public class RetryDlq {
    /** One delivery: when, and what it said. */
    static final class Delivery {
        final long at;
        final int reconsumeTimes;

        Delivery(long at, int reconsumeTimes) {
            this.at = at;
            this.reconsumeTimes = reconsumeTimes;
        }
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        String group = "C_" + topic;

        // The topic exists before the consumer starts, as in an application: a consumer
        // started first knows no broker until its route poll (30 s), so its heartbeat, and
        // with it the retry topic, come late (the Java broker behaves the same).
        DefaultMQProducer producer = Support.producer(namesrv, "P_" + topic);
        producer.createTopic("TBW102", topic, 4);
        Support.sleep(200);

        Map<Integer, List<Delivery>> deliveries = new ConcurrentHashMap<>();
        Map<Integer, String> ids = new ConcurrentHashMap<>();
        Map<Integer, String> offsetIds = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = Support.pushConsumer(namesrv, group);
        consumer.setMaxReconsumeTimes(2);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                int i = Support.verify(topic, m, false);
                if (i < 0) {
                    continue;
                }
                deliveries.computeIfAbsent(i, k -> Collections.synchronizedList(new ArrayList<>()))
                    .add(new Delivery(now, m.getReconsumeTimes()));
                String id = ids.get(i);
                if (id != null) {
                    Support.equal(id, m.getMsgId(), "msgId of delivery " + m.getReconsumeTimes()
                        + " of " + i);
                }
                Support.log("delivery " + i + " reconsumeTimes " + m.getReconsumeTimes());
            }
            return ConsumeConcurrentlyStatus.RECONSUME_LATER;
        });
        consumer.start();
        // The consumer pulls its retry queue once a rebalance finds the retry topic's route.
        // The broker makes that topic at the consumer's first heartbeat, which comes after the
        // consumer's first route lookup; the rebalance that heartbeat triggers can run before
        // the route is fetched again, and the next one is 20 s later. That is the client's
        // race with any broker, so the messages go once the retry queue is being pulled: a
        // retry then late by a pull not woken still shows.
        String retryTopic = "%RETRY%" + group;
        boolean pulling = Support.await(() -> consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl()
            .getProcessQueueTable().keySet().stream().anyMatch(mq -> mq.getTopic().equals(retryTopic)), 40_000);
        Support.check(pulling, "the retry queue is pulled within 40 s of the consumer's start");

        for (int i = 0; i < count; i++) {
            SendResult r = producer.send(Support.message(topic, i));
            ids.put(i, r.getMsgId());
            offsetIds.put(i, r.getOffsetMsgId());
            Support.sleep(200);
        }

        // Three deliveries each: the first, then 10 s and 30 s later.
        boolean all = Support.await(() -> {
            for (int i = 0; i < count; i++) {
                List<Delivery> d = deliveries.get(i);
                if (d == null || d.size() < 3) {
                    return false;
                }
            }
            return true;
        }, 90_000);
        Support.check(all, "three deliveries of each message");
        long[] expectedGapMs = {10_000, 30_000};
        for (int i = 0; i < count; i++) {
            List<Delivery> d = deliveries.getOrDefault(i, Collections.emptyList());
            synchronized (d) {
                for (int k = 0; k < d.size() && k < 3; k++) {
                    Support.equal(k, d.get(k).reconsumeTimes, "reconsumeTimes of delivery "
                        + k + " of " + i);
                }
                for (int k = 1; k < d.size() && k < 3; k++) {
                    long gap = d.get(k).at - d.get(k - 1).at;
                    long want = expectedGapMs[k - 1];
                    Support.result("gap_" + i + "_" + k, gap);
                    // Java's broker delivers 12-100 ms after the due time; a client's pull
                    // and consume add a little.
                    Support.check(gap >= want - 300 && gap <= want + 2_500,
                        "gap before delivery " + k + " of " + i + ": " + gap + " ms, want "
                            + want);
                }
            }
        }
        // No fourth delivery: the third failure sends it to the dead-letter queue.
        Support.sleep(1_000);

        // The dead letters, read with a pull consumer.
        String dlq = "%DLQ%" + group;
        DefaultLitePullConsumer reader = new DefaultLitePullConsumer("R_" + topic);
        reader.setNamesrvAddr(namesrv);
        reader.setInstanceName("R_" + topic + System.nanoTime());
        reader.setAutoCommit(false);
        reader.start();
        Set<Integer> dead = ConcurrentHashMap.newKeySet();
        long deadline = System.currentTimeMillis() + 30_000;
        List<MessageQueue> queues = new ArrayList<>();
        while (queues.isEmpty() && System.currentTimeMillis() < deadline) {
            try {
                queues.addAll(reader.fetchMessageQueues(dlq));
            } catch (Exception e) {
                Support.sleep(500);
            }
        }
        Support.equal(1, queues.size(), "queues of " + dlq);
        reader.assign(queues);
        for (MessageQueue q : queues) {
            reader.seek(q, 0);
        }
        while (dead.size() < count && System.currentTimeMillis() < deadline) {
            for (MessageExt m : reader.poll(1_000)) {
                Support.equal(dlq, m.getTopic(), "dead letter topic");
                String seqText = m.getUserProperty("seq");
                int i = seqText == null ? -1 : Integer.parseInt(seqText);
                Support.check(dead.add(i), "dead letter " + i + " once");
                Support.equal(3, m.getReconsumeTimes(), "reconsumeTimes of dead letter " + i);
                Support.equal(ids.get(i), m.getMsgId(), "msgId of dead letter " + i);
                Support.equal(topic, m.getProperty("RETRY_TOPIC"), "RETRY_TOPIC of " + i);
                Support.equal(offsetIds.get(i), m.getProperty("ORIGIN_MESSAGE_ID"),
                    "ORIGIN_MESSAGE_ID of " + i);
                Support.equal(Support.tag(i), m.getTags(), "tags of dead letter " + i);
                Support.equal("key-" + i, m.getKeys(), "keys of dead letter " + i);
                for (Map.Entry<String, String> e : Support.userProperties(i).entrySet()) {
                    Support.equal(e.getValue(), m.getUserProperty(e.getKey()),
                        "property " + e.getKey() + " of dead letter " + i);
                }
                Support.equal(Support.sha(Support.body(i)), Support.sha(m.getBody()),
                    "body of dead letter " + i);
            }
        }
        Support.equal(count, dead.size(), "dead letters");
        for (int i = 0; i < count; i++) {
            List<Delivery> d = deliveries.getOrDefault(i, Collections.emptyList());
            Support.equal(3, d.size(), "deliveries of " + i);
        }
        reader.shutdown();
        consumer.shutdown();
        producer.shutdown();
        Support.finish();
    }
}
