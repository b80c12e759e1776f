// The Java 4.9.8 admin API's queries of a broker's queues and producers:
// getAllProducerInfo (GET_ALL_PRODUCER_INFO), queryConsumeTimeSpan (QUERY_CONSUME_TIME_SPAN)
// and queryConsumeQueue (QUERY_CONSUME_QUEUE), checked against the messages this program sent
// (their store times and CommitLog offsets, read back by id).
//
// args: namesrv brokerAddr topic
// Prints RESULT producers=<members of group aq_pg>, spans=<queues in the time span answer>,
// spanChecks=<queues whose times matched>, cqUnits=<units checked against offsets>.

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Set;
import java.util.List;
import java.util.Map;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.body.ConsumeQueueData;
import org.apache.rocketmq.common.protocol.body.ProducerInfo;
import org.apache.rocketmq.common.protocol.body.ProducerTableInfo;
import org.apache.rocketmq.common.protocol.body.QueryConsumeQueueResponseBody;
import org.apache.rocketmq.common.protocol.body.QueueTimeSpan;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class AdminQueries {
    public static void main(String[] args) {
        try {
            run(args[0], args[1], args[2]);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            Support.check(false, "threw " + e);
        }
        Support.finish();
    }

    static void run(String namesrv, String broker, String topic) throws Exception {
        DefaultMQProducer producer = Support.producer(namesrv, "aq_pg");
        // Per queue, what was sent there in order.
        Map<Integer, List<SendResult>> byQueue = new HashMap<>();
        for (int i = 0; i < 10; i++) {
            Message message = new Message(topic, "TagA", ("q" + i).getBytes());
            SendResult sent = producer.send(message);
            byQueue.computeIfAbsent(sent.getMessageQueue().getQueueId(), k -> new ArrayList<>()).add(sent);
        }
        producer.getDefaultMQProducerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();
        String clientId = producer.getDefaultMQProducerImpl().getmQClientFactory().getClientId();

        DefaultMQAdminExt admin = Support.admin(namesrv, "aq_admin");

        ProducerTableInfo table = admin.getAllProducerInfo(broker);
        List<ProducerInfo> members = table.getData().get("aq_pg");
        Support.result("producers", members == null ? 0 : members.size());
        if (members != null && !members.isEmpty()) {
            Support.equal(clientId, members.get(0).getClientId(), "producer client id");
            Support.check(members.get(0).getLastUpdateTimestamp() > System.currentTimeMillis() - 60000,
                "producer seen within a minute: " + members.get(0).getLastUpdateTimestamp());
        }

        // Group aq_cg consumed the first message of queue 0 only.
        admin.updateConsumeOffset(broker, "aq_cg", new MessageQueue(topic, "broker-a", 0), 1);
        long asked = System.currentTimeMillis();
        List<QueueTimeSpan> spans = admin.queryConsumeTimeSpan(topic, "aq_cg");
        Support.result("spans", spans.size());
        int spanChecks = 0;
        for (QueueTimeSpan span : spans) {
            int queue = span.getMessageQueue().getQueueId();
            List<SendResult> sent = byQueue.get(queue);
            if (sent == null) {
                continue;
            }
            long first = admin.viewMessage(sent.get(0).getOffsetMsgId()).getStoreTimestamp();
            long last = admin.viewMessage(sent.get(sent.size() - 1).getOffsetMsgId()).getStoreTimestamp();
            boolean ok = Support.equal(first, span.getMinTimeStamp(), "min time of queue " + queue)
                & Support.equal(last, span.getMaxTimeStamp(), "max time of queue " + queue)
                & Support.equal(first, span.getConsumeTimeStamp(), "consume time of queue " + queue);
            if (queue == 0) {
                long next = admin.viewMessage(sent.get(Math.min(1, sent.size() - 1)).getOffsetMsgId()).getStoreTimestamp();
                long waited = System.currentTimeMillis() - next;
                ok &= Support.check(span.getDelayTime() > 0 && span.getDelayTime() <= waited,
                    "delay of queue 0: " + span.getDelayTime() + " (waited " + waited + ")");
            } else {
                // No offset committed: Java reads the store time at offset -1, which is -1,
                // so the delay is the time now plus one.
                ok &= Support.check(span.getDelayTime() >= asked + 1,
                    "delay of queue " + queue + ": " + span.getDelayTime() + " (asked at " + asked + ")");
            }
            if (ok) {
                spanChecks++;
            }
        }
        Support.result("spanChecks", spanChecks);

        int cqUnits = 0;
        for (Map.Entry<Integer, List<SendResult>> entry : byQueue.entrySet()) {
            int queue = entry.getKey();
            List<SendResult> sent = entry.getValue();
            QueryConsumeQueueResponseBody body = admin.queryConsumeQueue(broker, topic, queue, 0, 32, "aq_cg");
            Support.equal((long) sent.size(), body.getMaxQueueIndex(), "max index of queue " + queue);
            Support.equal(0L, body.getMinQueueIndex(), "min index of queue " + queue);
            Support.equal("aq_cg@" + topic + " is not online!", body.getFilterData(), "filter data");
            List<ConsumeQueueData> units = body.getQueueData();
            Support.equal(sent.size(), units.size(), "units of queue " + queue);
            for (int i = 0; i < Math.min(sent.size(), units.size()); i++) {
                long offset = MessageDecoder.decodeMessageId(sent.get(i).getOffsetMsgId()).getOffset();
                long tagsCode = "TagA".hashCode();
                if (Support.equal(offset, units.get(i).getPhysicOffset(), "unit offset")
                    & Support.equal(tagsCode, units.get(i).getTagsCode(), "unit tags code")
                    & Support.check(units.get(i).getPhysicSize() > 0, "unit size")) {
                    cqUnits++;
                }
            }
        }
        Support.result("cqUnits", cqUnits);

        // Correction offsets: the lowest offset per queue over the groups not filtered out,
        // Long.MAX_VALUE where that passes the compare group's.
        String[][] commits = {{"aq_g1", "5", "3"}, {"aq_g2", "2", "7"}, {"aq_gc", "1", "10"}};
        for (String[] commit : commits) {
            for (int q = 0; q < 2; q++) {
                admin.updateConsumeOffset(broker, commit[0], new MessageQueue(topic, "broker-a", q),
                    Long.parseLong(commit[1 + q]));
            }
        }
        Set<String> filter = new HashSet<>();
        filter.add("aq_g2");
        filter.add("aq_gc");
        filter.add("aq_cg");
        Map<Integer, Long> corrections = producer.getDefaultMQProducerImpl().getmQClientFactory()
            .getMQClientAPIImpl().queryCorrectionOffset(broker, topic, "aq_gc", filter, 5000);
        Support.result("correction0", corrections.get(0));
        List<String> system = new ArrayList<>(producer.getDefaultMQProducerImpl().getmQClientFactory()
            .getMQClientAPIImpl().getSystemTopicListFromBroker(broker, 5000).getTopicList());
        system.sort(null);
        Support.result("systemTopics", String.join(",", system));
        Support.result("correction1", corrections.get(1));
        admin.shutdown();
        producer.shutdown();
    }
}
