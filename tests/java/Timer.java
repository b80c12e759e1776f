// Timer messages as a 4.9.8 application sends them, by user property (the 4.9.8 client has
// no setDeliverTimeMs): COUNT messages with random times over WINDOW ms through
// TIMER_DELIVER_MS and TIMER_DELAY_SEC in turn, each delivered once to a push consumer,
// none before its time and within the precision (1 s) plus slack; a time in the past
// delivered at once; a delay over timerMaxDelaySec refused with MESSAGE_ILLEGAL (13).
//
// args: namesrv topic count windowMs

import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class Timer {
    static final long PRECISION_MS = 1_000;
    static final long SLACK_MS = 1_500;

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        long windowMs = Long.parseLong(args[3]);
        long seed = System.nanoTime();
        Support.result("seed", seed);
        Random random = new Random(seed);

        DefaultMQProducer producer = Support.producer(namesrv, "P_" + topic);
        producer.createTopic("TBW102", topic, 4);
        // Message i may be delivered from dueAt[i] on (the broker's clock is this one).
        Map<Integer, Long> dueAt = new ConcurrentHashMap<>();
        Map<Integer, Long> lateness = new ConcurrentHashMap<>();
        int past = 3;
        int total = count + past;
        Support.Counts got = new Support.Counts(total);
        DefaultMQPushConsumer consumer = Support.pushConsumer(namesrv, "C_" + topic);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                // Support.verify's WAIT rule is 4.9.8's for plain sends; a timer message keeps
                // WAIT as 5.x stores every send, so the checks are made here.
                int i;
                try {
                    i = Integer.parseInt(m.getUserProperty("seq"));
                } catch (NumberFormatException e) {
                    Support.check(false, "no seq in " + m.getProperties());
                    continue;
                }
                Support.equal(topic, m.getTopic(), "topic of " + i);
                Support.equal("key-" + i, m.getKeys(), "keys of " + i);
                Support.equal(Support.sha(Support.body(i)), Support.sha(m.getBody()),
                    "body of " + i);
                got.add(i);
                Long due = dueAt.get(i);
                if (due == null) {
                    Support.check(false, "delivered before its send returned: " + i);
                    continue;
                }
                // The broker's store time of the delivered copy: when the timer put it.
                long late = m.getStoreTimestamp() - due;
                lateness.putIfAbsent(i, late);
                Support.check(late >= 0, "message " + i + " delivered " + -late + " ms early");
                Support.check(late <= PRECISION_MS + SLACK_MS,
                    "message " + i + " delivered " + late + " ms late");
                if (i < count) {
                    Support.check(m.getProperty("TIMER_DEQUEUE_MS") != null,
                        "TIMER_DEQUEUE_MS of " + i);
                    Support.equal(null, m.getProperty("REAL_TOPIC"), "REAL_TOPIC of " + i);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        for (int i = 0; i < count; i++) {
            Message m = Support.message(topic, i);
            long delay = 1_000 + (long) (random.nextDouble() * (windowMs - 1_000));
            long now = System.currentTimeMillis();
            if (i % 2 == 0) {
                m.putUserProperty("TIMER_DELIVER_MS", Long.toString(now + delay));
                dueAt.put(i, now + delay);
            } else {
                long seconds = delay / 1_000;
                m.putUserProperty("TIMER_DELAY_SEC", Long.toString(seconds));
                dueAt.put(i, now + seconds * 1_000);
            }
            SendResult r = producer.send(m);
            Support.equal(SendStatus.SEND_OK, r.getSendStatus(), "send of " + i);
        }
        for (int i = count; i < total; i++) {
            Message m = Support.message(topic, i);
            long now = System.currentTimeMillis();
            m.putUserProperty("TIMER_DELIVER_MS", Long.toString(now - 60_000));
            dueAt.put(i, now - 60_000 + 60_000);
            SendResult r = producer.send(m);
            Support.equal(SendStatus.SEND_OK, r.getSendStatus(), "send of past " + i);
        }
        // Over timerMaxDelaySec (3 days): refused, as Java refuses it.
        Message tooFar = Support.message(topic, total);
        tooFar.putUserProperty("TIMER_DELAY_SEC", Long.toString(3 * 86_400 + 60));
        try {
            producer.send(tooFar);
            Support.check(false, "a delay over timerMaxDelaySec was accepted");
        } catch (MQBrokerException e) {
            Support.equal(13, e.getResponseCode(), "code of the over-max refusal");
            Support.result("over_max_code", e.getResponseCode());
        }

        boolean all = Support.await(() -> got.distinct() == total, windowMs + 30_000);
        Support.sleep(1_000);
        Support.check(all, "delivered " + got.distinct() + "/" + total + ", missing "
            + Support.head(got.missing()));
        Support.check(got.repeated().isEmpty(), "repeated: " + Support.head(got.repeated()));
        long[] late = lateness.values().stream().mapToLong(Long::longValue).sorted().toArray();
        if (late.length > 0) {
            Support.result("late_p50_ms", late[late.length / 2]);
            Support.result("late_p99_ms", late[(int) ((late.length - 1) * 0.99)]);
            Support.result("late_max_ms", late[late.length - 1]);
        }
        Support.result("delivered", got.distinct());
        consumer.shutdown();
        producer.shutdown();
        Support.finish();
    }
}
