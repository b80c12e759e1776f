// The two pull consumers a Java application uses: DefaultMQPullConsumer (every queue read
// from min to max, with a tag filter and without; consume offsets stored and fetched; a
// pull past the end; a blocking pull woken by a send) and DefaultLitePullConsumer (subscribe
// mode with commits, then assign mode with seek).
//
// args: namesrv topic count

import java.util.ArrayList;
import java.util.List;
import java.util.Set;

import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

@SuppressWarnings("deprecation")
public class PullConsumers {
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

        // DefaultMQPullConsumer.
        DefaultMQPullConsumer pull = new DefaultMQPullConsumer("PC_" + topic);
        pull.setNamesrvAddr(namesrv);
        pull.setInstanceName("PC_" + topic + System.nanoTime());
        pull.start();
        Set<MessageQueue> queues = pull.fetchSubscribeMessageQueues(topic);
        Support.equal(4, queues.size(), "queues");
        Support.Counts all = new Support.Counts(count);
        Support.Counts tagged = new Support.Counts(count);
        MessageQueue someQueue = null;
        long someMax = 0;
        for (MessageQueue q : queues) {
            long min = pull.minOffset(q);
            long max = pull.maxOffset(q);
            Support.equal(0L, min, "min of " + q);
            if (someQueue == null && max > 0) {
                someQueue = q;
                someMax = max;
            }
            for (String expression : new String[] {"*", "TagA || TagC"}) {
                long offset = min;
                int rounds = 0;
                while (offset < max && rounds++ < 1000) {
                    PullResult r = pull.pull(q, expression, offset, 32);
                    if (r.getPullStatus() != PullStatus.FOUND) {
                        Support.check(r.getPullStatus() == PullStatus.NO_MATCHED_MSG,
                            "pull " + q + " at " + offset + ": " + r.getPullStatus());
                        offset = r.getNextBeginOffset();
                        continue;
                    }
                    for (MessageExt m : r.getMsgFoundList()) {
                        int i = Support.verify(topic, m, false);
                        if (expression.equals("*")) {
                            all.add(i);
                        } else {
                            Support.check(!Support.tag(i).equals("TagB"), "TagB pulled: " + i);
                            tagged.add(i);
                        }
                    }
                    Support.check(r.getNextBeginOffset() > offset, "next begin offset moves");
                    offset = r.getNextBeginOffset();
                }
            }
        }
        Support.equal(count, all.distinct(), "pulled with *");
        Support.check(all.repeated().isEmpty(), "pulled twice " + Support.head(all.repeated()));
        int wantTagged = 0;
        for (int i = 0; i < count; i++) {
            if (!Support.tag(i).equals("TagB")) {
                wantTagged++;
            }
        }
        Support.equal(wantTagged, tagged.distinct(), "pulled with TagA || TagC");

        // Offsets stored at the broker and read back.
        pull.updateConsumeOffset(someQueue, 1);
        pull.getOffsetStore().persist(someQueue);
        Support.sleep(200);
        Support.equal(1L, pull.fetchConsumeOffset(someQueue, true), "consume offset stored");

        // Past the end.
        PullResult beyond = pull.pull(someQueue, "*", someMax + 100, 32);
        Support.check(beyond.getPullStatus() == PullStatus.OFFSET_ILLEGAL
            || beyond.getPullStatus() == PullStatus.NO_NEW_MSG,
            "pull past the end: " + beyond.getPullStatus());
        Support.result("pull_past_end", beyond.getPullStatus());
        PullResult atEnd = pull.pull(someQueue, "*", someMax, 32);
        Support.equal(PullStatus.NO_NEW_MSG, atEnd.getPullStatus(), "pull at the end");

        // A blocking pull at the end is woken by the next message of the queue.
        final MessageQueue target = someQueue;
        Thread sender = new Thread(() -> {
            Support.sleep(1_000);
            try {
                producer.send(Support.message(topic, 0), target);
            } catch (Exception e) {
                Support.check(false, "send to wake the pull: " + e);
            }
        });
        sender.start();
        long t0 = System.currentTimeMillis();
        PullResult woken = pull.pullBlockIfNotFound(someQueue, "*", someMax, 32);
        long waited = System.currentTimeMillis() - t0;
        sender.join();
        Support.equal(PullStatus.FOUND, woken.getPullStatus(), "blocking pull");
        Support.result("blocking_pull_ms", waited);
        Support.check(waited < 10_000, "blocking pull woken by the send, not its timeout: "
            + waited + " ms");
        pull.shutdown();

        // DefaultLitePullConsumer, subscribe mode.
        DefaultLitePullConsumer lite = new DefaultLitePullConsumer("LC_" + topic);
        lite.setNamesrvAddr(namesrv);
        lite.setInstanceName("LC_" + topic + System.nanoTime());
        lite.subscribe(topic, "*");
        lite.setAutoCommit(false);
        lite.start();
        Support.Counts subscribed = new Support.Counts(count);
        long deadline = System.currentTimeMillis() + 60_000;
        while (subscribed.distinct() < count && System.currentTimeMillis() < deadline) {
            for (MessageExt m : lite.poll(1_000)) {
                subscribed.add(Support.verify(topic, m, false));
            }
            lite.commitSync();
        }
        Support.equal(count, subscribed.distinct(), "lite pull, subscribe mode");
        lite.shutdown();

        // Assign mode, from the start of each queue.
        DefaultLitePullConsumer assigned = new DefaultLitePullConsumer("LA_" + topic);
        assigned.setNamesrvAddr(namesrv);
        assigned.setInstanceName("LA_" + topic + System.nanoTime());
        assigned.setAutoCommit(false);
        assigned.start();
        List<MessageQueue> mqs = new ArrayList<>(assigned.fetchMessageQueues(topic));
        assigned.assign(mqs);
        for (MessageQueue q : mqs) {
            assigned.seek(q, 0);
        }
        Support.Counts again = new Support.Counts(count);
        deadline = System.currentTimeMillis() + 60_000;
        while (again.distinct() < count && System.currentTimeMillis() < deadline) {
            for (MessageExt m : assigned.poll(1_000)) {
                again.add(Support.verify(topic, m, false));
            }
        }
        Support.equal(count, again.distinct(), "lite pull, assign mode");
        assigned.shutdown();
        producer.shutdown();
        Support.finish();
    }
}
