// Orderly consumption per key: messages of 8 orders, 40 steps each, sent through a queue
// selector (one queue per order); a MessageListenerOrderly consumer (which locks its
// queues at the broker) must see each order's steps in sequence, each once.
//
// args: namesrv topic

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class Orderly {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int orders = 8;
        int steps = 40;
        int count = orders * steps;

        DefaultMQProducer producer = Support.producer(namesrv, "P_" + topic);
        producer.createTopic("TBW102", topic, 4);
        Support.sleep(200);

        Map<String, Integer> lastStep = new ConcurrentHashMap<>();
        Support.Counts counts = new Support.Counts(count);
        DefaultMQPushConsumer consumer = Support.pushConsumer(namesrv, "C_" + topic);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                counts.add(Support.verify(topic, m, false));
                String order = m.getUserProperty("order");
                int step = Integer.parseInt(m.getUserProperty("step"));
                int before = lastStep.getOrDefault(order, -1);
                Support.equal(before + 1, step, "step after " + before + " of " + order);
                lastStep.put(order, step);
            }
            return ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();

        int i = 0;
        for (int s = 0; s < steps; s++) {
            for (int o = 0; o < orders; o++) {
                Message m = Support.message(topic, i++);
                String order = "order-" + o;
                m.putUserProperty("order", order);
                m.putUserProperty("step", Integer.toString(s));
                SendResult r = producer.send(m, (mqs, msg, arg) -> {
                    int at = Math.abs(arg.hashCode()) % mqs.size();
                    return mqs.get(at);
                }, order);
                Support.check(r != null, "send " + order + " step " + s);
            }
        }
        Support.check(Support.await(() -> counts.distinct() == count, 60_000),
            "delivered " + counts.distinct() + "/" + count);
        Support.sleep(500);
        Support.check(counts.repeated().isEmpty(), "repeated " + Support.head(counts.repeated()));
        for (int o = 0; o < orders; o++) {
            Support.equal(steps - 1, lastStep.get("order-" + o), "last step of order-" + o);
        }
        consumer.shutdown();
        producer.shutdown();
        Support.finish();
    }
}
