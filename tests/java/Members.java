// Push consumers of one group in one JVM (distinct instance names, so each is a member):
// clustering shares the queues so that each message reaches exactly one member and every
// member gets some; broadcasting gives every message to every member.
//
// args: namesrv topic members clustering|broadcasting count

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

public class Members {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int members = Integer.parseInt(args[2]);
        boolean broadcasting = args[3].equals("broadcasting");
        int count = Integer.parseInt(args[4]);
        String group = "C_" + topic;

        DefaultMQProducer producer = Support.producer(namesrv, "P_" + topic);
        producer.createTopic("TBW102", topic, 8);
        Support.sleep(200);

        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        List<Support.Counts> counts = new ArrayList<>();
        Support.Counts all = new Support.Counts(count);
        for (int k = 0; k < members; k++) {
            Support.Counts mine = new Support.Counts(count);
            counts.add(mine);
            DefaultMQPushConsumer c = Support.pushConsumer(namesrv, group);
            if (broadcasting) {
                c.setMessageModel(MessageModel.BROADCASTING);
            }
            c.subscribe(topic, "*");
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    int i = Support.verify(topic, m, false);
                    mine.add(i);
                    all.add(i);
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            c.start();
            consumers.add(c);
        }

        if (!broadcasting) {
            // Rebalance settles before the sends: every queue held by exactly one member (a
            // queue moving between members while in use is redelivered, by design).
            boolean settled = Support.await(() -> {
                Set<MessageQueue> held = new HashSet<>();
                int total = 0;
                for (DefaultMQPushConsumer c : consumers) {
                    Set<MessageQueue> mine = c.getDefaultMQPushConsumerImpl().getRebalanceImpl()
                        .getProcessQueueTable().keySet();
                    for (MessageQueue q : mine) {
                        if (q.getTopic().equals(topic)) {
                            held.add(q);
                            total++;
                        }
                    }
                }
                return held.size() == 8 && total == 8;
            }, 60_000);
            Support.check(settled, "the " + members + " members share the 8 queues");
        }

        for (int i = 0; i < count; i++) {
            producer.send(Support.message(topic, i));
        }
        boolean done = Support.await(() -> {
            if (broadcasting) {
                for (Support.Counts c : counts) {
                    if (c.distinct() < count) {
                        return false;
                    }
                }
                return true;
            }
            return all.distinct() == count;
        }, 60_000);
        Support.sleep(1_000);
        Support.check(done, "delivered: " + all.distinct() + "/" + count);
        for (int k = 0; k < members; k++) {
            Support.Counts c = counts.get(k);
            Support.result("member_" + k, c.total());
            Support.check(c.repeated().isEmpty(), "member " + k + " repeated "
                + Support.head(c.repeated()));
            if (broadcasting) {
                Support.equal(count, c.distinct(), "messages of member " + k);
            } else {
                Support.check(c.total() > 0, "member " + k + " got nothing");
            }
        }
        if (!broadcasting) {
            Support.check(all.repeated().isEmpty(), "delivered twice: "
                + Support.head(all.repeated()));
            Support.equal(count, all.total(), "deliveries");
        } else {
            Support.equal(count * members, all.total(), "deliveries");
        }
        for (DefaultMQPushConsumer c : consumers) {
            c.shutdown();
        }
        producer.shutdown();
        Support.finish();
    }
}
