// Delayed messages as a Java application sends them: messages at delay levels 1..L (1 s,
// 5 s, 10 s, ...) sent interleaved, each delivered once to a push consumer no sooner than
// its delay and soon after it, with its properties intact and, as Java's broker delivers
// it, DELAY, REAL_TOPIC and REAL_QID.
//
// args: namesrv topic maxLevel perLevel

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class Delay {
    static final long[] DELAY_MS = {1_000, 5_000, 10_000, 30_000, 60_000};

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int maxLevel = Integer.parseInt(args[2]);
        int perLevel = Integer.parseInt(args[3]);
        int count = maxLevel * perLevel;

        // "consumer-first" starts the consumer before the topic exists, as a measurement
        // (its route comes with the client's 30 s poll, against any broker).
        boolean consumerFirst = args.length > 4 && args[4].equals("consumer-first");
        DefaultMQProducer producer = Support.producer(namesrv, "P_" + topic);
        if (!consumerFirst) {
            producer.createTopic("TBW102", topic, 4);
        }

        Map<Integer, Long> sentAt = new ConcurrentHashMap<>();
        Map<Integer, Integer> levelOf = new ConcurrentHashMap<>();
        Support.Counts got = new Support.Counts(count);
        DefaultMQPushConsumer consumer = Support.pushConsumer(namesrv, "C_" + topic);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                int i = Support.verify(topic, m, false);
                if (i < 0) {
                    continue;
                }
                got.add(i);
                Integer level = levelOf.get(i);
                Long sent = sentAt.get(i);
                if (level == null || sent == null) {
                    Support.check(false, "delivered before its send returned: " + i);
                    continue;
                }
                long late = now - sent - DELAY_MS[level - 1];
                Support.result("late_" + i + "_level" + level, late);
                // When the broker stored the delivered copy, against the send.
                Support.result("stored_late_" + i + "_level" + level,
                    m.getStoreTimestamp() - sent - DELAY_MS[level - 1]);
                Support.check(consumerFirst || late >= -50 && late <= 3_000, "message " + i + " at level " + level
                    + " delivered " + late + " ms after its delay");
                Support.equal(Integer.toString(level), m.getProperty("DELAY"), "DELAY of " + i);
                Support.equal(topic, m.getProperty("REAL_TOPIC"), "REAL_TOPIC of " + i);
                Support.equal(Integer.toString(m.getQueueId()), m.getProperty("REAL_QID"),
                    "REAL_QID of " + i);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        for (int i = 0; i < count; i++) {
            int level = 1 + (i % maxLevel);
            Message m = Support.message(topic, i);
            m.setDelayTimeLevel(level);
            levelOf.put(i, level);
            sentAt.put(i, System.currentTimeMillis());
            SendResult r = producer.send(m);
            Support.equal(SendStatus.SEND_OK, r.getSendStatus(), "send of " + i);
        }
        long wait = DELAY_MS[maxLevel - 1] + 20_000;
        boolean all = Support.await(() -> got.distinct() == count, wait);
        Support.sleep(500);
        Support.check(all, "delivered " + got.distinct() + "/" + count + ", missing "
            + Support.head(got.missing()));
        Support.check(got.repeated().isEmpty(), "repeated: " + Support.head(got.repeated()));
        consumer.shutdown();
        producer.shutdown();
        Support.finish();
    }
}
