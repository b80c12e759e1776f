// Java5PopPush NAMESRV TOPIC GROUP COUNT: the RocketMQ 5.x remoting push consumer consuming by
// POP, as it does once `mqadmin setConsumeMode -m POP` set its group's mode on the topic and
// it asks the broker for its queues (clientRebalance off: QUERY_ASSIGNMENT).
//
// It sends COUNT messages (keys k0..), then a push consumer of GROUP consumes them. Every
// message must come with a POP_CK handle (it was popped, not pulled); the consumer answers
// RECONSUME_LATER to the first delivery of every fifth message, which must come back with
// reconsumeTimes 1 and then be consumed. It prints RESULT lines (counts only, so that two
// brokers' outcomes compare) and FAIL lines, and exits 0 only when nothing failed. Every wait
// has a deadline.

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;

public class Java5PopPush {
    public static void main(String[] args) {
        Outcome.main(() -> run(args));
    }

    private static void run(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        int count = Integer.parseInt(args[3]);

        DefaultMQProducer producer = new DefaultMQProducer("P_" + topic);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(10_000);
        producer.start();
        for (int i = 0; i < count; i++) {
            Message message = new Message(topic, "TagA", "k" + i,
                ("body-" + i).getBytes(StandardCharsets.UTF_8));
            SendResult sent = null;
            long deadline = System.currentTimeMillis() + 30_000;
            while (sent == null) {
                try {
                    sent = producer.send(message);
                } catch (Exception e) {
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                    Thread.sleep(200);
                }
            }
            if (sent.getSendStatus() != SendStatus.SEND_OK) {
                Outcome.fail("send " + i + ": " + sent.getSendStatus());
            }
        }
        producer.shutdown();

        Map<String, Integer> consumed = new ConcurrentHashMap<>();
        Map<String, Integer> refused = new ConcurrentHashMap<>();
        AtomicInteger deliveries = new AtomicInteger();
        AtomicInteger withHandle = new AtomicInteger();
        AtomicInteger retriedOk = new AtomicInteger();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("pop-push-" + System.nanoTime());
        // Ask the broker for the queues and their mode (QUERY_ASSIGNMENT).
        consumer.setClientRebalance(false);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            for (MessageExt message : messages) {
                deliveries.incrementAndGet();
                if (message.getProperty(MessageConst.PROPERTY_POP_CK) != null) {
                    withHandle.incrementAndGet();
                }
                String key = message.getKeys();
                int index = Integer.parseInt(key.substring(1));
                if (index % 5 == 0 && message.getReconsumeTimes() == 0) {
                    refused.merge(key, 1, Integer::sum);
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                if (index % 5 == 0 && message.getReconsumeTimes() == 1) {
                    retriedOk.incrementAndGet();
                }
                consumed.merge(key, 1, Integer::sum);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long deadline = System.currentTimeMillis() + 150_000;
        while (consumed.size() < count && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        consumer.shutdown();
        int duplicates = 0;
        for (int times : consumed.values()) {
            duplicates += times - 1;
        }
        int expectedRetries = (count + 4) / 5;
        Outcome.result("consumed", consumed.size());
        Outcome.result("all_popped", withHandle.get() == deliveries.get());
        Outcome.result("refused_once", refused.size());
        Outcome.result("retried_ok", retriedOk.get() >= expectedRetries);
        Outcome.result("duplicates", duplicates);
        if (consumed.size() != count) {
            Outcome.fail("consumed " + consumed.size() + " of " + count);
        }
        if (withHandle.get() != deliveries.get()) {
            Outcome.fail((deliveries.get() - withHandle.get()) + " deliveries without POP_CK (pulled)");
        }
        if (refused.size() != expectedRetries) {
            Outcome.fail("refused " + refused.size() + " messages once, expected " + expectedRetries);
        }
        if (retriedOk.get() < expectedRetries) {
            Outcome.fail("only " + retriedOk.get() + " retries came back with reconsumeTimes 1");
        }
    }
}
