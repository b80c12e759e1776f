// Queue offsets and times as a Java application asks for them: maxOffset right after each
// SEND_OK counts that message (read-your-writes, asked many times), minOffset,
// earliestMsgStoreTime, and searchOffset by store time (before, between and after the
// messages).
//
// args: namesrv topic rounds

import java.util.ArrayList;
import java.util.List;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public class Offsets {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int rounds = Integer.parseInt(args[2]);

        DefaultMQProducer producer = Support.producer(namesrv, "P_" + topic);
        producer.createTopic("TBW102", topic, 2);
        List<MessageQueue> queues = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 30_000;
        while (queues.size() < 2 && System.currentTimeMillis() < deadline) {
            try {
                queues = producer.fetchPublishMessageQueues(topic);
            } catch (Exception e) {
                Support.sleep(200);
            }
        }
        Support.equal(2, queues.size(), "queues of " + topic);
        MessageQueue q = queues.get(0);
        Support.equal(0L, producer.maxOffset(q), "maxOffset of an empty queue");
        Support.equal(0L, producer.minOffset(q), "minOffset of an empty queue");

        // Read-your-writes: a maxOffset asked after SEND_OK counts the message.
        int lagging = 0;
        List<String> offsetIds = new ArrayList<>();
        for (int i = 0; i < rounds; i++) {
            SendResult r = producer.send(Support.message(topic, i), q);
            Support.equal(SendStatus.SEND_OK, r.getSendStatus(), "send " + i);
            Support.equal((long) i, r.getQueueOffset(), "queue offset of " + i);
            offsetIds.add(r.getOffsetMsgId());
            long max = producer.maxOffset(q);
            if (max != r.getQueueOffset() + 1) {
                lagging++;
                Support.check(false, "maxOffset after send " + i + ": " + max + ", want "
                    + (r.getQueueOffset() + 1));
            }
            if (i % 10 == 9) {
                // Spread store times, for the search by time below.
                Support.sleep(20);
            }
        }
        Support.result("max_offset_lagging", lagging);
        Support.equal(0L, producer.minOffset(q), "minOffset");

        MessageExt first = producer.viewMessage(offsetIds.get(0));
        MessageExt last = producer.viewMessage(offsetIds.get(rounds - 1));
        Support.equal(first.getStoreTimestamp(), producer.earliestMsgStoreTime(q),
            "earliestMsgStoreTime");
        // searchOffset: Java 4.9.8 answers the offset of the message stored closest to the
        // time; before the first, 0; after the last, the last one's offset.
        Support.equal(0L, producer.searchOffset(q, 0), "searchOffset(0)");
        Support.equal(0L, producer.searchOffset(q, first.getStoreTimestamp()),
            "searchOffset(first store time)");
        Support.equal((long) rounds - 1, producer.searchOffset(q, last.getStoreTimestamp()),
            "searchOffset(last store time)");
        long future = System.currentTimeMillis() + 3_600_000;
        Support.result("search_future", producer.searchOffset(q, future));
        int middle = rounds / 2;
        MessageExt mid = producer.viewMessage(offsetIds.get(middle));
        long found = producer.searchOffset(q, mid.getStoreTimestamp());
        MessageExt at = producer.viewMessage(offsetIds.get((int) found));
        Support.equal(mid.getStoreTimestamp(), at.getStoreTimestamp(),
            "store time at searchOffset(middle)");
        Support.result("search_middle", found);
        producer.shutdown();
        Support.finish();
    }
}
