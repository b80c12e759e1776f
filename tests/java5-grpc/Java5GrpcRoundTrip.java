// Java5GrpcRoundTrip ENDPOINT TOPIC GROUP COUNT: the RocketMQ 5.x gRPC client
// (rocketmq-client-java) against a proxy at ENDPOINT (host:port, plain text).
//
// TOPIC must exist (a NORMAL topic). A simple consumer of GROUP polls once first, so that its
// group's offsets exist before anything is sent; then a producer sends COUNT messages, each
// with its own key ("key-i"), body ("body-i") and one of three tags ("tag0".."tag2"); then
// the consumer receives and acknowledges until it has seen every key. It checks that each
// message came back with the key, tag and body it was sent with and that no other message
// came. It prints one FAIL line per broken expectation and RESULT lines, and exits 0 only
// when nothing failed. Every wait has a deadline.

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

public class Java5GrpcRoundTrip {
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
        String endpoint = args[0];
        String topic = args[1];
        String group = args[2];
        int count = Integer.parseInt(args[3]);
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10))
            .build();

        SimpleConsumer consumer = provider.newSimpleConsumerBuilder()
            .setClientConfiguration(config)
            .setConsumerGroup(group)
            .setAwaitDuration(Duration.ofSeconds(2))
            .setSubscriptionExpressions(Collections.singletonMap(
                topic, new FilterExpression("*", FilterExpressionType.TAG)))
            .build();
        Map<String, String> got = new TreeMap<>();
        receive(consumer, got);

        Map<String, String> sent = new TreeMap<>();
        Producer producer = provider.newProducerBuilder()
            .setClientConfiguration(config)
            .setTopics(topic)
            .build();
        int sendOk = 0;
        for (int i = 0; i < count; i++) {
            String key = "key-" + i;
            String tag = "tag" + (i % 3);
            String body = "body-" + i;
            Message message = provider.newMessageBuilder()
                .setTopic(topic)
                .setTag(tag)
                .setKeys(key)
                .setBody(body.getBytes(StandardCharsets.UTF_8))
                .build();
            SendReceipt receipt = producer.send(message);
            if (receipt.getMessageId() == null) {
                fail("send " + i + ": no message id");
            } else {
                sendOk++;
            }
            sent.put(key, body + "|" + tag);
        }
        producer.close();
        System.out.println("RESULT send_ok=" + sendOk);

        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        while (got.size() < count && System.currentTimeMillis() < deadline) {
            receive(consumer, got);
        }
        consumer.close();
        for (Map.Entry<String, String> entry : sent.entrySet()) {
            String seen = got.get(entry.getKey());
            if (!entry.getValue().equals(seen)) {
                fail(entry.getKey() + " sent " + entry.getValue() + ", got " + seen);
            }
        }
        for (String key : got.keySet()) {
            if (!sent.containsKey(key)) {
                fail("got " + key + " (" + got.get(key) + "), which was not sent");
            }
        }
        System.out.println("RESULT received=" + got.size());
    }

    /** One receive (long-polls up to the await duration), each message recorded and acked. */
    private static void receive(SimpleConsumer consumer, Map<String, String> got)
        throws Exception {
        List<MessageView> views = consumer.receive(16, Duration.ofSeconds(30));
        for (MessageView view : views) {
            ByteBuffer buffer = view.getBody();
            byte[] bytes = new byte[buffer.remaining()];
            buffer.get(bytes);
            String body = new String(bytes, StandardCharsets.UTF_8);
            String key = String.join(",", view.getKeys());
            String previous = got.put(key, body + "|" + view.getTag().orElse(""));
            if (previous != null) {
                fail(key + " delivered twice");
            }
            consumer.ack(view);
        }
    }

    private static void fail(String failure) {
        failures.add(failure);
    }
}
