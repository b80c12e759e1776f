// Java5Timer NAMESRV TOPIC COUNT WINDOW_MS: timer messages from the RocketMQ 5.x remoting
// client's Message.setDeliverTimeMs, and a recall of one of them (producer.recallMessage
// with the handle its send answered).
//
// It sends COUNT messages with random delivery times over WINDOW_MS (from 1 s on) and one
// more that it recalls at once; a push consumer must get each of the COUNT once, none
// before its time (the broker's store time of the delivered copy against the time asked)
// and none later than the precision (1 s) plus slack, and never the recalled one. It prints
// one FAIL line per broken expectation and RESULT lines, and exits 0 only when nothing
// failed. Every wait has a deadline.

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class Java5Timer {
    private static final long PRECISION_MS = 1_000;
    private static final long SLACK_MS = 1_500;

    public static void main(String[] args) {
        Outcome.main(() -> run(args));
    }

    private static void run(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        long windowMs = Long.parseLong(args[3]);
        long seed = System.nanoTime();
        System.out.println("RESULT seed=" + seed);
        Random random = new Random(seed);

        DefaultMQProducer producer = new DefaultMQProducer("P_" + topic);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(10_000);
        producer.start();
        producer.createTopic("TBW102", topic, 4, new java.util.HashMap<>());

        Map<String, Long> dueAt = new ConcurrentHashMap<>();
        Map<String, Integer> times = new ConcurrentHashMap<>();
        Map<String, Long> lateness = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("C_" + topic);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                String key = m.getKeys();
                times.merge(key, 1, Integer::sum);
                Long due = dueAt.get(key);
                if (due == null) {
                    Outcome.fail("delivered before its send returned, or recalled: " + key);
                    continue;
                }
                long late = m.getStoreTimestamp() - due;
                lateness.putIfAbsent(key, late);
                if (late < 0) {
                    Outcome.fail(key + " delivered " + -late + " ms early");
                }
                if (late > PRECISION_MS + SLACK_MS) {
                    Outcome.fail(key + " delivered " + late + " ms late");
                }
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                if (!body.equals("body-" + key)) {
                    Outcome.fail("body of " + key + ": " + body);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        for (int i = 0; i < count; i++) {
            String key = "key-" + i;
            long at = System.currentTimeMillis() + 1_000
                + (long) (random.nextDouble() * (windowMs - 1_000));
            Message m = new Message(topic, "timer", key, ("body-" + key).getBytes(StandardCharsets.UTF_8));
            m.setDeliverTimeMs(at);
            dueAt.put(key, at);
            SendResult r = producer.send(m);
            if (r.getSendStatus() != SendStatus.SEND_OK) {
                Outcome.fail("send of " + key + ": " + r.getSendStatus());
            }
        }
        // One more, recalled before its time: never delivered.
        Message doomed = new Message(topic, "timer", "recalled",
            "body-recalled".getBytes(StandardCharsets.UTF_8));
        long doomedAt = System.currentTimeMillis() + 4_000;
        doomed.setDeliverTimeMs(doomedAt);
        SendResult sent = producer.send(doomed);
        String handle = sent.getRecallHandle();
        if (handle == null) {
            Outcome.fail("no recall handle in the send result of a timer message");
        } else {
            String id = producer.recallMessage(topic, handle);
            System.out.println("RESULT recalled_id_matches=" + (sent.getMsgId().equals(id) ? 1 : 0));
            if (!sent.getMsgId().equals(id)) {
                Outcome.fail("recall answered " + id + ", the message is " + sent.getMsgId());
            }
        }

        long deadline = System.currentTimeMillis() + windowMs + 30_000;
        while (System.currentTimeMillis() < deadline && lateness.size() < count) {
            Thread.sleep(50);
        }
        // Past the recalled message's time, its slot and the slack.
        Thread.sleep(Math.max(0, doomedAt + PRECISION_MS + SLACK_MS - System.currentTimeMillis()));
        if (lateness.size() != count) {
            Outcome.fail("delivered " + lateness.size() + "/" + count);
        }
        long repeated = times.values().stream().filter(n -> n > 1).count();
        if (repeated > 0) {
            Outcome.fail(repeated + " messages delivered more than once");
        }
        if (times.containsKey("recalled")) {
            Outcome.fail("the recalled message was delivered");
        }
        long[] late = lateness.values().stream().mapToLong(Long::longValue).toArray();
        Arrays.sort(late);
        if (late.length > 0) {
            System.out.println("RESULT late_p50_ms=" + late[late.length / 2]);
            System.out.println("RESULT late_p99_ms=" + late[(int) ((late.length - 1) * 0.99)]);
            System.out.println("RESULT late_max_ms=" + late[late.length - 1]);
        }
        System.out.println("RESULT delivered=" + lateness.size());
        consumer.shutdown();
        producer.shutdown();
    }
}
