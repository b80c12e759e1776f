// Java5Pop NAMESRV TOPIC COUNT INVISIBLE_MS: POP consumption through the RocketMQ 5.x
// remoting client's own POP calls (MQClientAPIImpl.popMessageAsync, ackMessageAsync,
// batchAckMessageAsync, changeInvisibleTimeAsync), as its POP push consumer makes them.
//
// It sends COUNT messages (tags TagA/TagB by turn) to a 4-queue topic, then:
// - a group popping with the tag expression TagA gets exactly the TagA ones;
// - a group popping all queues (queueId -1) gets each message once, each with a POP_CK handle
//   that names this broker, the message's queue and offset and the invisible time asked;
// - it acks message i with ACK_MESSAGE when i % 4 == 0 and with BATCH_ACK_MESSAGE when
//   i % 4 == 2, moves the invisible time of i % 4 == 3 on by 3 s, and leaves i % 4 == 1;
// - exactly the unacked ones come back (reconsumeTimes 1, 1ST_POP_TIME set), none before its
//   invisible time ends; it acks them (their handles name the retry topic);
// - after one more invisible time nothing comes back.
// It prints one FAIL line per broken expectation and RESULT lines, and exits 0 only when
// nothing failed. Every wait has a deadline.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.AckCallback;
import org.apache.rocketmq.client.consumer.AckResult;
import org.apache.rocketmq.client.consumer.AckStatus;
import org.apache.rocketmq.client.consumer.PopCallback;
import org.apache.rocketmq.client.consumer.PopResult;
import org.apache.rocketmq.client.consumer.PopStatus;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.impl.MQClientManager;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.protocol.header.AckMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ChangeInvisibleTimeRequestHeader;
import org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil;
import org.apache.rocketmq.remoting.protocol.header.PopMessageRequestHeader;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

public class Java5Pop {
    private static final long CHANGE_MS = 3_000;
    /// The timer's precision, by which a checkpoint may come due early.
    private static final long EARLY_MS = 1_100;
    private static MQClientAPIImpl api;
    private static String brokerName;
    private static String addr;

    public static void main(String[] args) {
        Outcome.main(() -> run(args));
    }

    private static void run(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        long invisibleMs = Long.parseLong(args[3]);

        DefaultMQProducer producer = new DefaultMQProducer("P_" + topic);
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(10_000);
        producer.start();
        producer.createTopic("TBW102", topic, 4, new HashMap<>());
        for (int i = 0; i < count; i++) {
            Message message = new Message(topic, i % 2 == 0 ? "TagA" : "TagB", "k" + i,
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

        ClientConfig config = new ClientConfig();
        config.setNamesrvAddr(namesrv);
        config.setInstanceName("pop-" + System.nanoTime());
        MQClientInstance instance = MQClientManager.getInstance().getOrCreateMQClientInstance(config);
        instance.start();
        api = instance.getMQClientAPIImpl();
        TopicRouteData route = api.getTopicRouteInfoFromNameServer(topic, 10_000);
        BrokerData broker = route.getBrokerDatas().get(0);
        brokerName = broker.getBrokerName();
        addr = broker.getBrokerAddrs().get(0L);

        // A tag expression: only TagA.
        String tagGroup = "G_tag_" + topic;
        Map<String, MessageExt> tagged = popUntil(tagGroup, topic, "TagA", invisibleMs,
            (count + 1) / 2, 30_000);
        for (MessageExt message : tagged.values()) {
            if (!"TagA".equals(message.getTags())) {
                Outcome.fail("tag filter let " + message.getKeys() + " with " + message.getTags());
            }
        }
        Outcome.result("tag_found", tagged.size());
        List<String> tagHandles = new ArrayList<>();
        for (MessageExt message : tagged.values()) {
            tagHandles.add(message.getProperty(MessageConst.PROPERTY_POP_CK));
        }
        if (!tagHandles.isEmpty()) {
            AckResult acked = batchAck(topic, tagGroup, tagHandles);
            Outcome.result("tag_batch_ack", acked.getStatus());
        }

        // Every message once, with its handle.
        String group = "G_" + topic;
        long popStarted = System.currentTimeMillis();
        Map<String, MessageExt> first = popUntil(group, topic, null, invisibleMs, count, 30_000);
        Outcome.result("first_pass", first.size());
        int handlesOk = 0;
        java.util.Set<Integer> queueIds = new java.util.HashSet<>();
        for (MessageExt message : first.values()) {
            String handle = message.getProperty(MessageConst.PROPERTY_POP_CK);
            if (handle == null) {
                Outcome.fail("no POP_CK on " + message.getKeys());
                continue;
            }
            String[] info = ExtraInfoUtil.split(handle);
            boolean ok = info.length == 8
                && ExtraInfoUtil.getBrokerName(info).equals(brokerName)
                && ExtraInfoUtil.getQueueId(info) == message.getQueueId()
                && ExtraInfoUtil.getQueueOffset(info) == message.getQueueOffset()
                && ExtraInfoUtil.getInvisibleTime(info) == invisibleMs
                && ExtraInfoUtil.getReviveQid(info) >= 0 && ExtraInfoUtil.getReviveQid(info) < 8
                && "0".equals(ExtraInfoUtil.getRetry(info))
                && ExtraInfoUtil.getCkQueueOffset(info) <= message.getQueueOffset()
                && message.getReconsumeTimes() == 0
                && topic.equals(message.getTopic());
            if (ok) {
                handlesOk++;
            } else {
                Outcome.fail("handle " + handle + " of " + message.getKeys() + " q" + message.getQueueId()
                    + "@" + message.getQueueOffset());
            }
            queueIds.add(message.getQueueId());
        }
        Outcome.result("handles_ok", handlesOk);
        Outcome.result("queues_popped", queueIds.size());

        // Nothing more: the pop waits its poll time and answers POLLING_NOT_FOUND.
        long polled = System.currentTimeMillis();
        PopResult empty = pop(group, topic, null, invisibleMs, 1_000);
        Outcome.result("empty_status", empty.getPopStatus());
        Outcome.result("empty_waited", System.currentTimeMillis() - polled >= 900 ? 1 : 0);

        // Ack, batch ack, change, leave.
        List<String> batch = new ArrayList<>();
        Map<String, Long> dueAt = new HashMap<>();
        int changed = 0;
        for (Map.Entry<String, MessageExt> entry : first.entrySet()) {
            int i = Integer.parseInt(entry.getKey().substring(1));
            MessageExt message = entry.getValue();
            String handle = message.getProperty(MessageConst.PROPERTY_POP_CK);
            String[] info = ExtraInfoUtil.split(handle);
            switch (i % 4) {
                case 0:
                    AckResult acked = ack(group, topic, handle);
                    if (acked.getStatus() != AckStatus.OK) {
                        Outcome.fail("ack of " + entry.getKey() + ": " + acked.getStatus());
                    }
                    break;
                case 2:
                    batch.add(handle);
                    break;
                case 3:
                    long before = System.currentTimeMillis();
                    AckResult moved = change(group, topic, handle, invisibleMs + CHANGE_MS);
                    if (moved.getStatus() != AckStatus.OK || moved.getPopTime() < before
                        || !moved.getExtraInfo().endsWith(" " + message.getQueueOffset())) {
                        Outcome.fail("change of " + entry.getKey() + ": " + moved.getStatus() + " "
                            + moved.getExtraInfo());
                    } else {
                        changed++;
                    }
                    dueAt.put(entry.getKey(), moved.getPopTime() + invisibleMs + CHANGE_MS);
                    break;
                default:
                    dueAt.put(entry.getKey(), ExtraInfoUtil.getPopTime(info) + invisibleMs);
                    break;
            }
        }
        Outcome.result("changed", changed);
        AckResult batched = batchAck(topic, group, batch);
        if (batched.getStatus() != AckStatus.OK) {
            Outcome.fail("batch ack: " + batched.getStatus());
        }

        // Exactly the unacked come back, once, not early.
        Map<String, MessageExt> back = new HashMap<>();
        int reconsumeOne = 0;
        int early = 0;
        int withFirstPopTime = 0;
        long deadline = System.currentTimeMillis() + invisibleMs + CHANGE_MS + 25_000;
        while (back.size() < dueAt.size() && System.currentTimeMillis() < deadline) {
            PopResult result = pop(group, topic, null, invisibleMs, 2_000);
            if (result.getPopStatus() != PopStatus.FOUND) {
                continue;
            }
            long now = System.currentTimeMillis();
            for (MessageExt message : result.getMsgFoundList()) {
                String key = message.getKeys();
                if (!dueAt.containsKey(key)) {
                    Outcome.fail("acked " + key + " came back");
                    continue;
                }
                if (back.put(key, message) != null) {
                    Outcome.fail(key + " came back twice");
                }
                if (message.getReconsumeTimes() == 1) {
                    reconsumeOne++;
                }
                if (message.getProperty(MessageConst.PROPERTY_FIRST_POP_TIME) != null) {
                    withFirstPopTime++;
                }
                if (now < dueAt.get(key) - EARLY_MS) {
                    early++;
                    Outcome.fail(key + " came back " + (dueAt.get(key) - now) + " ms early");
                }
                AckResult acked = ack(group, topic,
                    message.getProperty(MessageConst.PROPERTY_POP_CK));
                if (acked.getStatus() != AckStatus.OK) {
                    Outcome.fail("ack of returned " + key + ": " + acked.getStatus());
                }
            }
        }
        for (String key : dueAt.keySet()) {
            if (!back.containsKey(key)) {
                Outcome.fail(key + " did not come back");
            }
        }
        Outcome.result("expected_back", dueAt.size());
        Outcome.result("came_back", back.size());
        Outcome.result("reconsume_one", reconsumeOne);
        Outcome.result("first_pop_time_set", withFirstPopTime);
        Outcome.result("early", early);
        Outcome.result("back_after_ms", System.currentTimeMillis() - popStarted);

        // The acked retries stay acked.
        Thread.sleep(invisibleMs + 4_000);
        int again = 0;
        for (int round = 0; round < 2; round++) {
            PopResult result = pop(group, topic, null, invisibleMs, 1_000);
            if (result.getPopStatus() == PopStatus.FOUND) {
                again += result.getMsgFoundList().size();
                for (MessageExt message : result.getMsgFoundList()) {
                    Outcome.fail(message.getKeys() + " came back after its ack");
                }
            }
        }
        Outcome.result("after_ack_returned", again);
        producer.shutdown();
        instance.shutdown();
    }

    /// Pops GROUP until WANT distinct keys arrived or WITHIN_MS passed; a key twice fails.
    private static Map<String, MessageExt> popUntil(String group, String topic, String exp,
        long invisibleMs, int want, long withinMs) throws Exception {
        Map<String, MessageExt> seen = new HashMap<>();
        long deadline = System.currentTimeMillis() + withinMs;
        while (seen.size() < want && System.currentTimeMillis() < deadline) {
            PopResult result = pop(group, topic, exp, invisibleMs, 1_000);
            if (result.getPopStatus() != PopStatus.FOUND) {
                continue;
            }
            for (MessageExt message : result.getMsgFoundList()) {
                if (seen.put(message.getKeys(), message) != null) {
                    Outcome.fail(group + " popped " + message.getKeys() + " twice");
                }
            }
        }
        return seen;
    }

    private static PopResult pop(String group, String topic, String exp, long invisibleMs,
        long pollMs) throws Exception {
        PopMessageRequestHeader header = new PopMessageRequestHeader();
        header.setConsumerGroup(group);
        header.setTopic(topic);
        header.setQueueId(-1);
        header.setMaxMsgNums(8);
        header.setInvisibleTime(invisibleMs);
        header.setPollTime(pollMs);
        header.setBornTime(System.currentTimeMillis());
        header.setInitMode(1);
        if (exp != null) {
            header.setExpType("TAG");
            header.setExp(exp);
        }
        CompletableFuture<PopResult> future = new CompletableFuture<>();
        api.popMessageAsync(brokerName, addr, header, pollMs + 5_000, new PopCallback() {
            @Override
            public void onSuccess(PopResult popResult) {
                future.complete(popResult);
            }

            @Override
            public void onException(Throwable e) {
                future.completeExceptionally(e);
            }
        });
        return future.get(pollMs + 10_000, TimeUnit.MILLISECONDS);
    }

    private static AckCallback into(CompletableFuture<AckResult> future) {
        return new AckCallback() {
            @Override
            public void onSuccess(AckResult ackResult) {
                future.complete(ackResult);
            }

            @Override
            public void onException(Throwable e) {
                future.completeExceptionally(e);
            }
        };
    }

    private static AckResult ack(String group, String topic, String handle) throws Exception {
        String[] info = ExtraInfoUtil.split(handle);
        AckMessageRequestHeader header = new AckMessageRequestHeader();
        header.setConsumerGroup(group);
        header.setTopic(ExtraInfoUtil.getRealTopic(info, topic, group));
        header.setQueueId(ExtraInfoUtil.getQueueId(info));
        header.setExtraInfo(handle);
        header.setOffset(ExtraInfoUtil.getQueueOffset(info));
        CompletableFuture<AckResult> future = new CompletableFuture<>();
        api.ackMessageAsync(addr, 10_000, into(future), header);
        return future.get(15, TimeUnit.SECONDS);
    }

    private static AckResult batchAck(String topic, String group, List<String> handles)
        throws Exception {
        CompletableFuture<AckResult> future = new CompletableFuture<>();
        api.batchAckMessageAsync(addr, 10_000, into(future), topic, group, handles);
        return future.get(15, TimeUnit.SECONDS);
    }

    private static AckResult change(String group, String topic, String handle, long invisibleMs)
        throws Exception {
        String[] info = ExtraInfoUtil.split(handle);
        ChangeInvisibleTimeRequestHeader header = new ChangeInvisibleTimeRequestHeader();
        header.setConsumerGroup(group);
        header.setTopic(ExtraInfoUtil.getRealTopic(info, topic, group));
        header.setQueueId(ExtraInfoUtil.getQueueId(info));
        header.setExtraInfo(handle);
        header.setOffset(ExtraInfoUtil.getQueueOffset(info));
        header.setInvisibleTime(invisibleMs);
        CompletableFuture<AckResult> future = new CompletableFuture<>();
        api.changeInvisibleTimeAsync(brokerName, addr, header, 10_000, into(future));
        return future.get(15, TimeUnit.SECONDS);
    }
}
