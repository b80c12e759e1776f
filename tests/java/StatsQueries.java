// The Java 4.9.8 admin API's statistics of a broker, checked against the traffic this
// program makes: viewBrokerStatsData (VIEW_BROKER_STATS_DATA, mqadmin statsAll),
// fetchConsumeStatsInBroker (GET_BROKER_CONSUME_STATS, mqadmin brokerConsumeStats) and the
// consumeTps of examineConsumeStats (GET_CONSUME_STATS, mqadmin consumerProgress).
//
// It sends SENT messages, waits for TOPIC_PUT_NUMS to show them, then pulls one message at a
// time every 100 ms for PULL_RUN_MS with a pull consumer of group sq_cg (a steady, known
// rate), commits what it pulled, and reads the figures.
//
// args: namesrv brokerAddr topic
// Prints RESULT putSum, putSizeSum, putSizeAvg, getSum, getSizeSum, pulled, pullRate,
// consumeTps, brokerConsumeTps, groupDiff, expectedDiff, unknown (the error's text).

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.admin.ConsumeStats;
import org.apache.rocketmq.common.admin.OffsetWrapper;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.body.BrokerStatsData;
import org.apache.rocketmq.common.protocol.body.ConsumeStatsList;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class StatsQueries {
    static final int SENT = 400;
    static final long PULL_RUN_MS = 30_000;
    static final String GROUP = "sq_cg";

    public static void main(String[] args) {
        try {
            run(args[0], args[1], args[2]);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            Support.check(false, "threw " + e);
        }
        Support.finish();
    }

    /** The item's minute sum, or -1 while it does not exist. */
    static long minuteSum(DefaultMQAdminExt admin, String broker, String name, String key) {
        try {
            return admin.viewBrokerStatsData(broker, name, key).getStatsMinute().getSum();
        } catch (Exception e) {
            return -1;
        }
    }

    static void run(String namesrv, String broker, String topic) throws Exception {
        DefaultMQProducer producer = Support.producer(namesrv, "sq_pg");
        for (int i = 0; i < SENT; i++) {
            producer.send(new Message(topic, "TagS", ("stats-" + i).getBytes()));
        }
        DefaultMQAdminExt admin = Support.admin(namesrv, "sq_admin");

        // The minute window shows the puts once sampled (every 10 s).
        Support.check(Support.await(() -> minuteSum(admin, broker, "TOPIC_PUT_NUMS", topic) == SENT, 30_000),
            "TOPIC_PUT_NUMS reached " + SENT);
        BrokerStatsData puts = admin.viewBrokerStatsData(broker, "TOPIC_PUT_NUMS", topic);
        Support.result("putSum", puts.getStatsMinute().getSum());
        BrokerStatsData putSize = admin.viewBrokerStatsData(broker, "TOPIC_PUT_SIZE", topic);
        Support.result("putSizeSum", putSize.getStatsMinute().getSum());
        Support.result("putSizeAvg", putSize.getStatsMinute().getAvgpt());

        try {
            admin.viewBrokerStatsData(broker, "TOPIC_PUT_NUMS", "NoSuchTopicSq");
            Support.result("unknown", "answered");
        } catch (Exception e) {
            Support.result("unknown", String.valueOf(e.getMessage()).split("\n")[0].replace(' ', '_'));
        }

        // A steady pull: one message every 100 ms, over the queues in turn.
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer(GROUP);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(GROUP + "-" + System.nanoTime());
        consumer.start();
        Set<MessageQueue> queues = consumer.fetchSubscribeMessageQueues(topic);
        MessageQueue[] ring = queues.toArray(new MessageQueue[0]);
        Map<MessageQueue, Long> next = new HashMap<>();
        long pulled = 0;
        long started = System.currentTimeMillis();
        long tick = started;
        int turn = 0;
        while (System.currentTimeMillis() - started < PULL_RUN_MS) {
            MessageQueue queue = ring[turn++ % ring.length];
            long offset = next.getOrDefault(queue, 0L);
            PullResult result = consumer.pull(queue, "*", offset, 1);
            if (result.getPullStatus() == PullStatus.FOUND) {
                pulled += result.getMsgFoundList().size();
                next.put(queue, result.getNextBeginOffset());
            }
            tick += 100;
            Support.sleep(Math.max(0, tick - System.currentTimeMillis()));
        }
        double seconds = (System.currentTimeMillis() - started) / 1000.0;
        Support.result("pulled", pulled);
        Support.result("pullRate", pulled / seconds);
        // Committed at once (examineConsumeStats needs offsets), then the rate over the last
        // minute, read while the run's pulls are its last.
        for (Map.Entry<MessageQueue, Long> entry : next.entrySet()) {
            admin.updateConsumeOffset(broker, GROUP, entry.getKey(), entry.getValue());
        }
        Support.result("consumeTps", admin.examineConsumeStats(GROUP).getConsumeTps());
        final long all = pulled;
        Support.check(Support.await(() -> minuteSum(admin, broker, "GROUP_GET_NUMS", topic + "@" + GROUP) == all, 30_000),
            "GROUP_GET_NUMS reached " + all);
        Support.result("getSum", minuteSum(admin, broker, "GROUP_GET_NUMS", topic + "@" + GROUP));
        Support.result("getSizeSum", minuteSum(admin, broker, "GROUP_GET_SIZE", topic + "@" + GROUP));

        ConsumeStatsList list = admin.fetchConsumeStatsInBroker(broker, false, 10_000);
        long groupDiff = -1;
        double brokerTps = -1;
        for (Map<String, List<ConsumeStats>> entry : list.getConsumeStatsList()) {
            List<ConsumeStats> stats = entry.get(GROUP);
            if (stats == null) {
                continue;
            }
            groupDiff = 0;
            brokerTps = 0;
            for (ConsumeStats one : stats) {
                brokerTps += one.getConsumeTps();
                for (Map.Entry<MessageQueue, OffsetWrapper> queue : one.getOffsetTable().entrySet()) {
                    if (queue.getKey().getTopic().equals(topic)) {
                        groupDiff += queue.getValue().getBrokerOffset() - queue.getValue().getConsumerOffset();
                    }
                }
            }
        }
        Support.result("groupDiff", groupDiff);
        Support.result("expectedDiff", SENT - pulled);
        Support.result("totalDiff", list.getTotalDiff());
        Support.result("brokerConsumeTps", brokerTps);
        Support.check(list.getBrokerAddr() != null && list.getBrokerAddr().endsWith(broker.substring(broker.indexOf(':'))),
            "broker address " + list.getBrokerAddr());
        consumer.shutdown();
        admin.shutdown();
        producer.shutdown();
    }
}
