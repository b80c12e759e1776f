// The Java 4.9.8 admin API's cloneGroupOffset (CLONE_GROUP_OFFSET, 314): a source group's
// committed offsets in a topic become another group's, read back through the broker.
//
// args: namesrv brokerAddr topic
// Commits offset q + 1 for group clone_src in each of the topic's first four queues, clones
// clone_src to clone_dest, and prints RESULT q<N>=<src>/<dest> for every queue, with
// clone_dest's offsets as the broker answers QUERY_CONSUMER_OFFSET for them.

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class CloneOffsets {
    static DefaultMQPullConsumer reader(String namesrv, String group) throws Exception {
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(group + "-" + System.nanoTime());
        consumer.start();
        return consumer;
    }

    public static void main(String[] args) {
        try {
            run(args);
        } catch (Exception e) {
            e.printStackTrace(System.out);
            Support.check(false, "threw " + e);
        }
        Support.finish();
    }

    static void run(String[] args) throws Exception {
        String namesrv = args[0];
        String broker = args[1];
        String topic = args[2];
        DefaultMQProducer producer = new DefaultMQProducer("clone_pg");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("clone_pg-" + System.nanoTime());
        producer.start();
        for (int i = 0; i < 32; i++) {
            Support.check(producer.send(new Message(topic, ("m" + i).getBytes())) != null, "send");
        }
        producer.shutdown();

        DefaultMQAdminExt admin = Support.admin(namesrv, "clone_admin");
        DefaultMQPullConsumer src = reader(namesrv, "clone_src");
        List<MessageQueue> queues = new ArrayList<>(src.fetchSubscribeMessageQueues(topic));
        queues.sort(Comparator.comparingInt(MessageQueue::getQueueId));
        for (MessageQueue mq : queues) {
            if (mq.getQueueId() < 4) {
                admin.updateConsumeOffset(broker, "clone_src", mq, mq.getQueueId() + 1);
            }
        }
        // The API finds the source group's brokers through its retry topic's route, which a
        // consumer's first heartbeat makes; this group has no consumer, so it is made here.
        TopicConfig retry = new TopicConfig("%RETRY%clone_src", 1, 1, 6);
        admin.createAndUpdateTopicConfig(broker, retry);
        admin.cloneGroupOffset("clone_src", "clone_dest", topic, true);
        DefaultMQPullConsumer dest = reader(namesrv, "clone_dest");
        for (MessageQueue mq : queues) {
            long from = src.fetchConsumeOffset(mq, true);
            long to = dest.fetchConsumeOffset(mq, true);
            Support.result("q" + mq.getQueueId(), from + "/" + to);
        }
        src.shutdown();
        dest.shutdown();
        admin.shutdown();
    }
}
