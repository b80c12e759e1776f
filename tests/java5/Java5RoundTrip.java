// Java5RoundTrip NAMESRV TOPIC COUNT: the RocketMQ 5.x remoting client against a broker.
//
// It sends COUNT messages to TOPIC (a new topic: the broker creates it), each with its own key
// ("key-i"), body ("body-i") and one of three tags ("tag0".."tag2"), synchronously; then one
// push consumer group reads the whole topic and another subscribes to "tag1" only. It checks
// every send was SEND_OK and that each group got exactly the messages it subscribed to, with
// the bodies, tags and keys that were sent. It prints one FAIL line per broken expectation
// and RESULT lines, and exits 0 only when nothing failed. Every wait has a deadline.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class Java5RoundTrip {
    private static final long DEADLINE_MS = 90_000;
    private static final List<String> failures = new ArrayList<>();

    public static void main(String[] args) {
        // The clients' threads keep a JVM alive: every way out of the program exits.
        try {
            run(args);
        } catch (Throwable error) {
            error.printStackTrace(System.out);
            fail("threw " + error);
        }
        for (String failure : failures) {
            System.out.println("FAIL " + failure);
        }
        System.exit(failures.isEmpty() ? 0 : 1);
    }

    private static void run(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);

        // key -> "body|tag", as sent.
        Map<String, String> sent = new TreeMap<>();
        DefaultMQProducer producer = new DefaultMQProducer("java5-roundtrip-producer");
        producer.setNamesrvAddr(namesrv);
        producer.start();
        int sendOk = 0;
        for (int i = 0; i < count; i++) {
            String key = "key-" + i;
            String tag = "tag" + (i % 3);
            String body = "body-" + i;
            Message message = new Message(topic, tag, key, body.getBytes(StandardCharsets.UTF_8));
            SendResult result = producer.send(message, 10_000);
            if (result.getSendStatus() == SendStatus.SEND_OK) {
                sendOk++;
            } else {
                fail("send " + i + ": " + result.getSendStatus());
            }
            if (result.getMsgId() == null || result.getMessageQueue() == null) {
                fail("send " + i + ": no msgId or queue in " + result);
            }
            sent.put(key, body + "|" + tag);
        }
        producer.shutdown();
        System.out.println("RESULT send_ok=" + sendOk);

        Map<String, String> all = consume(namesrv, topic, "java5-roundtrip-all", "*", count);
        Map<String, String> wantTag1 = new TreeMap<>();
        for (Map.Entry<String, String> entry : sent.entrySet()) {
            if (entry.getValue().endsWith("|tag1")) {
                wantTag1.put(entry.getKey(), entry.getValue());
            }
        }
        Map<String, String> tag1 =
            consume(namesrv, topic, "java5-roundtrip-tag1", "tag1", wantTag1.size());
        compare("group all", sent, all);
        compare("group tag1", wantTag1, tag1);
        System.out.println("RESULT received_all=" + all.size());
        System.out.println("RESULT received_tag1=" + tag1.size());

    }

    /** Reads `topic` with a new push consumer group until `expected` distinct keys came. */
    private static Map<String, String> consume(
        String namesrv, String topic, String group, String expression, int expected)
        throws Exception {
        Map<String, String> got = new ConcurrentHashMap<>();
        AtomicInteger deliveries = new AtomicInteger();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, expression);
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt message : messages) {
                String body = new String(message.getBody(), StandardCharsets.UTF_8);
                String previous = got.put(message.getKeys(), body + "|" + message.getTags());
                if (previous != null) {
                    fail(group + ": " + message.getKeys() + " delivered twice");
                }
                deliveries.incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (got.size() < expected && System.currentTimeMillis() < deadline) {
            Thread.sleep(50);
        }
        // A moment more, bounded, to see a message the group must not get.
        long settle = System.currentTimeMillis() + 1_000;
        while (System.currentTimeMillis() < settle) {
            Thread.sleep(50);
        }
        consumer.shutdown();
        System.out.println("RESULT deliveries_" + group + "=" + deliveries.get());
        return new TreeMap<>(got);
    }

    private static void compare(String what, Map<String, String> want, Map<String, String> got) {
        for (Map.Entry<String, String> entry : want.entrySet()) {
            String seen = got.get(entry.getKey());
            if (!entry.getValue().equals(seen)) {
                fail(what + ": " + entry.getKey() + " sent " + entry.getValue() + ", got " + seen);
            }
        }
        for (String key : got.keySet()) {
            if (!want.containsKey(key)) {
                fail(what + ": got " + key + " (" + got.get(key) + "), which it should not");
            }
        }
    }

    private static synchronized void fail(String failure) {
        failures.add(failure);
    }
}
