// Live clients for mqadmin to look at (tests/java_mqadmin.rs): a producer and three consumer
// groups of one topic, left in a known state while the test runs mqadmin against the broker.
//
//   producer group P   sends `first` messages, then `total - first` more (tag TagA, key
//                      "key-<i>", body "body-<i>"), and stays online;
//   consumer group C   consumes the first `first` and commits them, then blocks in its
//                      listener on every later message, so that its committed offsets stay
//                      at `first` of `total` (consumerProgress must show a diff of
//                      total - first) while it stays online;
//   consumer group R   consumes all `total` and stays online; once it has consumed
//                      `2 * total` (after a resetOffsetByTime to before the first message),
//                      it prints "RECONSUMED <count>";
//   consumer group O   consumes all `total`, commits and shuts down (an offline group).
//
// The offsets a group committed are read back from the broker (QUERY_CONSUMER_OFFSET) before
// the state is announced with a "READY" line. Then it stays alive until the file
// <user.home>/stop appears or `aliveSeconds` pass, and exits 0 if every check held.
//
// args: namesrv topic groupSuffix first total aliveSeconds

import java.nio.charset.StandardCharsets;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.header.QueryConsumerOffsetRequestHeader;

public class AdminClients {
    static String namesrv;
    static String topic;
    static DefaultMQProducer producer;

    public static void main(String[] args) throws Exception {
        namesrv = args[0];
        topic = args[1];
        String suffix = args[2];
        int first = Integer.parseInt(args[3]);
        int total = Integer.parseInt(args[4]);
        long aliveMs = Long.parseLong(args[5]) * 1000;
        java.io.File stop = new java.io.File(System.getProperty("user.home"), "stop");

        producer = Support.producer(namesrv, "P_" + suffix);
        Support.result("born_before", System.currentTimeMillis());
        send(0, first);

        // C: the first `first`, then blocked in its listener.
        AtomicBoolean block = new AtomicBoolean(false);
        AtomicInteger cDone = new AtomicInteger();
        AtomicInteger cBlocked = new AtomicInteger();
        DefaultMQPushConsumer c = consumer("C_" + suffix);
        c.setConsumeThreadMin(total);
        c.setConsumeThreadMax(total);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            if (block.get()) {
                cBlocked.addAndGet(msgs.size());
                Support.await(() -> stop.exists(), aliveMs);
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            }
            cDone.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        // R: everything, online; O: everything, then offline.
        AtomicInteger rCount = new AtomicInteger();
        DefaultMQPushConsumer r = counting("R_" + suffix, rCount);
        AtomicInteger oCount = new AtomicInteger();
        DefaultMQPushConsumer o = counting("O_" + suffix, oCount);
        c.start();
        r.start();
        o.start();
        Support.check(Support.await(() -> cDone.get() >= first, 60_000),
            "C consumed " + cDone.get() + " of " + first);
        Support.equal(first, cDone.get(), "C consumed");
        waitCommitted(c, "C_" + suffix, first);
        block.set(true);
        send(first, total);
        Support.check(Support.await(() -> cBlocked.get() >= total - first
            && rCount.get() >= total && oCount.get() >= total, 60_000),
            "C holds " + cBlocked.get() + " of " + (total - first) + ", R consumed "
            + rCount.get() + ", O consumed " + oCount.get() + " of " + total);
        waitCommitted(r, "R_" + suffix, total);
        waitCommitted(o, "O_" + suffix, total);
        o.shutdown();
        Support.equal(total, rCount.get(), "R consumed");

        System.out.println(Support.failureCount() == 0 ? "READY" : "NOT READY");
        System.out.flush();

        boolean reported = false;
        long deadline = System.currentTimeMillis() + aliveMs;
        while (!stop.exists() && System.currentTimeMillis() < deadline) {
            if (!reported && rCount.get() >= 2 * total) {
                System.out.println("RECONSUMED " + rCount.get());
                System.out.flush();
                reported = true;
            }
            Support.sleep(50);
        }
        Support.check(stop.exists(), "no stop file within " + aliveMs + " ms");
        r.shutdown();
        c.shutdown();
        producer.shutdown();
        Support.finish();
    }

    /** A consumer of group that counts what it consumes, not started. */
    static DefaultMQPushConsumer counting(String group, AtomicInteger count) throws Exception {
        DefaultMQPushConsumer consumer = consumer(group);
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            count.addAndGet(msgs.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        return consumer;
    }

    static DefaultMQPushConsumer consumer(String group) throws Exception {
        DefaultMQPushConsumer consumer = Support.pushConsumer(namesrv, group);
        consumer.subscribe(topic, "*");
        consumer.setPersistConsumerOffsetInterval(500);
        return consumer;
    }

    /** Sends messages [from, to), each to the queue i % queues, checking the result. */
    static void send(int from, int to) throws Exception {
        for (int i = from; i < to; i++) {
            Message m = new Message(topic, "TagA", "key-" + i,
                ("body-" + i).getBytes(StandardCharsets.UTF_8));
            SendResult result = producer.send(m);
            Support.equal(SendStatus.SEND_OK, result.getSendStatus(), "send " + i);
            System.out.println("SENT " + i + " " + result.getMessageQueue().getQueueId() + " "
                + result.getQueueOffset() + " " + result.getOffsetMsgId() + " "
                + result.getMsgId());
        }
    }

    /** Waits (bounded) until the broker holds `want` committed messages of the group in all. */
    static void waitCommitted(DefaultMQPushConsumer consumer, String group, int want) {
        MQClientAPIImpl api = consumer.getDefaultMQPushConsumerImpl().getmQClientFactory()
            .getMQClientAPIImpl();
        long[] seen = {-1};
        boolean ok = Support.await(() -> {
            try {
                Set<MessageQueue> queues = consumer.fetchSubscribeMessageQueues(topic);
                long sum = 0;
                for (MessageQueue mq : queues) {
                    String addr = consumer.getDefaultMQPushConsumerImpl().getmQClientFactory()
                        .findBrokerAddressInPublish(mq.getBrokerName());
                    QueryConsumerOffsetRequestHeader h = new QueryConsumerOffsetRequestHeader();
                    h.setConsumerGroup(group);
                    h.setTopic(topic);
                    h.setQueueId(mq.getQueueId());
                    try {
                        sum += Math.max(0, api.queryConsumerOffset(addr, h, 3_000));
                    } catch (Exception e) {
                        // Not committed in this queue yet.
                    }
                }
                seen[0] = sum;
                return sum == want;
            } catch (Exception e) {
                return false;
            }
        }, 30_000);
        Support.check(ok, group + " committed " + seen[0] + " of " + want);
    }
}
