// A consumer group resumes where it stopped: a push consumer (from the first offset)
// consumes a first set and shuts down, which commits its offsets; a second set is sent;
// a new consumer of the same group gets exactly the second set.
//
// args: namesrv topic count

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageExt;

public class Resume {
    static DefaultMQPushConsumer start(String namesrv, String topic, Support.Counts counts)
            throws Exception {
        DefaultMQPushConsumer c = Support.pushConsumer(namesrv, "C_" + topic);
        c.subscribe(topic, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                counts.add(Support.verify(topic, m, false));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        return c;
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);

        DefaultMQProducer producer = Support.producer(namesrv, "P_" + topic);
        producer.createTopic("TBW102", topic, 4);
        Support.sleep(200);
        for (int i = 0; i < count; i++) {
            producer.send(Support.message(topic, i));
        }
        Support.Counts first = new Support.Counts(2 * count);
        DefaultMQPushConsumer c1 = start(namesrv, topic, first);
        Support.check(Support.await(() -> first.distinct() == count, 60_000),
            "first set consumed: " + first.distinct() + "/" + count);
        Support.sleep(500);
        c1.shutdown();
        Support.check(first.repeated().isEmpty(), "first set repeated "
            + Support.head(first.repeated()));

        for (int i = count; i < 2 * count; i++) {
            producer.send(Support.message(topic, i));
        }
        Support.Counts second = new Support.Counts(2 * count);
        DefaultMQPushConsumer c2 = start(namesrv, topic, second);
        Support.check(Support.await(() -> second.distinct() >= count, 60_000),
            "second set consumed: " + second.distinct() + "/" + count);
        Support.sleep(1_000);
        int old = 0;
        for (int i = 0; i < count; i++) {
            if (!second.missing().contains(i)) {
                old++;
            }
        }
        Support.equal(0, old, "messages of the first set delivered again after the restart");
        Support.equal(count, second.distinct(), "second set delivered");
        Support.check(second.repeated().isEmpty(), "second set repeated "
            + Support.head(second.repeated()));
        c2.shutdown();
        producer.shutdown();
        Support.finish();
    }
}
