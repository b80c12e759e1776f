// The traffic the metrics tests scrape after: sends COUNT messages of SIZE body bytes, one
// a send, then a push consumer of GROUP reads them all; prints "ONLINE" and waits (both
// clients still connected) for the stop file, then stops the consumer (its offsets go to
// the broker) and sends EXTRA more, which stay unconsumed: the group's lag. The first
// message delivered is consumed "later" with no reconsume allowed, so the broker puts it
// into the group's %DLQ% topic.
//
// args: namesrv topic group count size extra

import java.io.File;
import java.util.Arrays;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

public class Metrics {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        int count = Integer.parseInt(args[3]);
        int size = Integer.parseInt(args[4]);
        int extra = Integer.parseInt(args[5]);
        byte[] body = new byte[size];
        Arrays.fill(body, (byte) 'm');

        DefaultMQProducer producer = Support.producer(namesrv, "P_" + topic);
        int sent = send(producer, topic, body, count);
        Support.equal(count, sent, "sent before consuming");

        AtomicInteger received = new AtomicInteger();
        AtomicBoolean refused = new AtomicBoolean();
        DefaultMQPushConsumer consumer = Support.pushConsumer(namesrv, group);
        consumer.subscribe(topic, "*");
        consumer.setMaxReconsumeTimes(0);
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            received.addAndGet(messages.size());
            if (refused.compareAndSet(false, true)) {
                return ConsumeConcurrentlyStatus.RECONSUME_LATER;
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        Support.check(Support.await(() -> received.get() >= count, 120_000),
            "received " + received.get() + " of " + count);
        System.out.println("ONLINE received=" + received.get());
        System.out.flush();

        File stop = new File(System.getProperty("user.home"), "stop");
        Support.check(Support.await(stop::exists, 300_000), "the stop file came");
        consumer.shutdown();
        Support.equal(extra, send(producer, topic, body, extra), "sent after the consumer stopped");
        producer.shutdown();
        Support.result("received", received.get());
        Support.finish();
    }

    static int send(DefaultMQProducer producer, String topic, byte[] body, int n) throws Exception {
        int ok = 0;
        for (int i = 0; i < n; i++) {
            SendResult result = producer.send(new Message(topic, "TagA", body));
            if (result.getSendStatus() == SendStatus.SEND_OK) {
                ok++;
            }
        }
        return ok;
    }
}
