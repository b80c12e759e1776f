// The Java 4.9.8 client's side of tests/java_store.rs (a store that ferromq writes must open
// in the Java broker, and the other way round). Two modes, one per broker:
//
// "write" (against ferromq): a varied workload. StoreA (4 queues): seq 0..299 and a 4 MiB
// compressible body, sync; StoreL: a 700,000-byte random body; StoreB (8 queues): a batch
// of 30 then 100 async sends; StoreD: seq 0..9 at delay level 1 (delivered by the broker
// before the program ends) and seq 10, 11 at level 18 (still waiting); StoreR: seq 0..11,
// consumed by group StoreRetryGroup, which asks for seq % 4 == 0 again once (%RETRY%);
// StoreT: three transactions, committed, rolled back and left unknown. Groups
// StorePartGroup (all of StoreA so far), StoreDelayGroup and StoreRetryGroup consume what
// they are sent, and commit at shutdown; then StoreA gets seq 300..339, which no group has
// consumed.
//
// "java" (against the Java broker over that store, copied): StorePartGroup must resume
// exactly at seq 300..339; new sends (StoreA 340..359, a new topic StoreJ 0..49, a second
// large body to StoreL, which rolls the CommitLog, StoreD seq 12 at level 1);
// StoreDelayGroup must resume and get seq 12 only (delivered by the Java broker's
// schedule, which must have kept the delay offsets); then a pull consumer reads
// every queue of every workload topic from its minimum to its maximum, and each message
// must be there exactly once, as it was sent.
//
// args: namesrv mode

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

public class StoreTraffic {
    static final String RETRY = "%RETRY%StoreRetryGroup";
    /** Counts index of the 4 MiB compressible body in StoreA. */
    static final int BIG_INDEX = 360;

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String mode = args[1];
        try {
            switch (mode) {
                case "write":
                    write(namesrv);
                    break;
                case "java":
                    java(namesrv);
                    break;
                default:
                    throw new IllegalArgumentException(mode);
            }
        } catch (Throwable e) {
            // The client's threads would keep the JVM alive until the test's timeout.
            e.printStackTrace(System.out);
            Support.check(false, mode + ": " + e);
        }
        Support.finish();
    }

    /**
     * Time for a name server or admin call (route lookups, heartbeats, offsets): on a
     * starved shared machine the client's 3 s default has run out before the first
     * connection was made.
     */
    static final int API_TIMEOUT_MS = 30_000;

    static DefaultMQProducer producer(String namesrv, String group, int queues)
            throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(group + "-" + System.nanoTime());
        producer.setSendMsgTimeout(10_000);
        producer.setMqClientApiTimeout(API_TIMEOUT_MS);
        producer.setDefaultTopicQueueNums(queues);
        producer.start();
        return producer;
    }

    /** Body of StoreL message seq: 700,000 random bytes (compressed by the client). */
    static byte[] largeBody(int seq) {
        byte[] b = new byte[700_000];
        new Random(42 + seq).nextBytes(b);
        return b;
    }

    static Message large(int seq) {
        Message m = new Message("StoreL", "TagL", "key-large-" + seq, largeBody(seq));
        m.putUserProperty("seq", Integer.toString(seq));
        return m;
    }

    static void sendSync(DefaultMQProducer producer, Message m, String what) throws Exception {
        SendResult r = producer.send(m);
        Support.equal(SendStatus.SEND_OK, r.getSendStatus(), "send status of " + what);
    }

    static void write(String namesrv) throws Exception {
        DefaultMQProducer producer = producer(namesrv, "P_Store", 4);
        for (int i = 0; i < 300; i++) {
            sendSync(producer, Support.message("StoreA", i), "StoreA " + i);
        }
        sendSync(producer, Support.message("StoreA", Support.BIG_TEXT), "StoreA big");
        sendSync(producer, large(0), "StoreL 0");

        DefaultMQProducer wide = producer(namesrv, "P_StoreB", 8);
        List<Message> batch = new ArrayList<>();
        for (int i = 0; i < 30; i++) {
            batch.add(Support.message("StoreB", i));
        }
        SendResult batchResult = wide.send(batch);
        Support.equal(SendStatus.SEND_OK, batchResult.getSendStatus(), "StoreB batch");
        CountDownLatch done = new CountDownLatch(100);
        for (int i = 30; i < 130; i++) {
            final int seq = i;
            wide.send(Support.message("StoreB", i), new SendCallback() {
                public void onSuccess(SendResult r) {
                    Support.equal(SendStatus.SEND_OK, r.getSendStatus(), "StoreB " + seq);
                    done.countDown();
                }

                public void onException(Throwable e) {
                    Support.check(false, "async send of StoreB " + seq + ": " + e);
                    done.countDown();
                }
            });
        }
        Support.check(done.await(60, TimeUnit.SECONDS), "async sends answered");

        for (int i = 0; i < 12; i++) {
            Message m = Support.message("StoreD", i);
            m.setDelayTimeLevel(i < 10 ? 1 : 18);
            sendSync(producer, m, "StoreD " + i);
        }
        for (int i = 0; i < 12; i++) {
            sendSync(producer, Support.message("StoreR", i), "StoreR " + i);
        }
        transactions(namesrv);

        // Three groups consume what they were sent, at once.
        Support.Counts part = new Support.Counts(BIG_INDEX + 1);
        DefaultMQPushConsumer partConsumer = consumer(namesrv, "StorePartGroup", "StoreA", part);
        Support.Counts delayed = new Support.Counts(13);
        DefaultMQPushConsumer delayConsumer = consumer(namesrv, "StoreDelayGroup", "StoreD",
            delayed);
        Support.Counts retried = new Support.Counts(12);
        Support.Counts succeeded = new Support.Counts(12);
        DefaultMQPushConsumer retryConsumer = Support.pushConsumer(namesrv, "StoreRetryGroup");
        retryConsumer.setMqClientApiTimeout(API_TIMEOUT_MS);
        retryConsumer.subscribe("StoreR", "*");
        retryConsumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                int i = Support.verify("StoreR", m, false);
                if (i < 0) {
                    continue;
                }
                if (i % 4 == 0 && m.getReconsumeTimes() == 0) {
                    retried.add(i);
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                succeeded.add(i);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        retryConsumer.start();
        boolean all = Support.await(() -> part.distinct() == BIG_INDEX - 60 + 1
            && delayed.distinct() == 10 && succeeded.distinct() == 12, 90_000);
        Support.check(all, "consumed: StoreA " + part.distinct() + "/301, missing "
            + Support.head(part.missing()) + "; StoreD " + delayed.distinct()
            + "/10; StoreR " + succeeded.distinct() + "/12");
        partConsumer.shutdown();
        delayConsumer.shutdown();
        retryConsumer.shutdown();
        Support.check(part.repeated().isEmpty(),
            "StoreA repeated " + Support.head(part.repeated()));
        Support.check(delayed.missing().containsAll(List.of(10, 11, 12)),
            "StoreD level 18 delivered early: " + delayed.missing());
        Support.equal(3, retried.distinct(), "StoreR asked again");
        Support.result("retried", retried.total());

        for (int i = 300; i < 340; i++) {
            sendSync(producer, Support.message("StoreA", i), "StoreA " + i);
        }
        producer.shutdown();
        wide.shutdown();
    }

    /** Seq 0 committed, 1 rolled back, 2 left unknown (no check answers it). */
    static void transactions(String namesrv) throws Exception {
        TransactionMQProducer producer = new TransactionMQProducer("P_StoreT");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("P_StoreT-" + System.nanoTime());
        producer.setSendMsgTimeout(10_000);
        producer.setMqClientApiTimeout(API_TIMEOUT_MS);
        producer.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                int i = (Integer) arg;
                return i == 0 ? LocalTransactionState.COMMIT_MESSAGE
                    : i == 1 ? LocalTransactionState.ROLLBACK_MESSAGE
                    : LocalTransactionState.UNKNOW;
            }

            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.UNKNOW;
            }
        });
        producer.start();
        for (int i = 0; i < 3; i++) {
            TransactionSendResult r = producer.sendMessageInTransaction(
                Support.message("StoreT", i), i);
            Support.equal(SendStatus.SEND_OK, r.getSendStatus(), "half " + i);
        }
        producer.shutdown();
    }

    /** Whether m was sent in StoreB's batch (seq 0..29), which keeps the client's WAIT. */
    static boolean batched(String topic, MessageExt m) {
        try {
            return topic.equals("StoreB") && Integer.parseInt(m.getUserProperty("seq")) < 30;
        } catch (NumberFormatException e) {
            return false; // verify reports the bad seq
        }
    }

    /** A push consumer of group on topic counting each verified seq (the big one at 360). */
    static DefaultMQPushConsumer consumer(String namesrv, String group, String topic,
            Support.Counts counts) throws Exception {
        DefaultMQPushConsumer consumer = Support.pushConsumer(namesrv, group);
        consumer.setMqClientApiTimeout(API_TIMEOUT_MS);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                int i = Support.verify(topic, m, batched(topic, m));
                counts.add(i == Support.BIG_TEXT ? BIG_INDEX : i);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        return consumer;
    }

    static void java(String namesrv) throws Exception {
        // The group that stopped after seq 299 resumes at 300.
        Support.Counts part = new Support.Counts(BIG_INDEX + 1);
        DefaultMQPushConsumer partConsumer = consumer(namesrv, "StorePartGroup", "StoreA", part);
        boolean resumed = Support.await(() -> part.distinct() == 40, 60_000);
        partConsumer.shutdown();
        List<Integer> got = new ArrayList<>();
        for (int i = 0; i <= BIG_INDEX; i++) {
            if (!part.missing().contains(i)) {
                got.add(i);
            }
        }
        Support.check(resumed && got.size() == 40 && got.get(0) == 300 && got.get(39) == 339,
            "StorePartGroup resumed with " + Support.head(got));
        Support.check(part.repeated().isEmpty(), "StorePartGroup repeated");

        DefaultMQProducer producer = producer(namesrv, "P_StoreJava", 4);
        for (int i = 340; i < 360; i++) {
            sendSync(producer, Support.message("StoreA", i), "StoreA " + i);
        }
        for (int i = 0; i < 50; i++) {
            sendSync(producer, Support.message("StoreJ", i), "StoreJ " + i);
        }
        // It does not fit in what is left of the segment: the Java broker rolls.
        sendSync(producer, large(1), "StoreL 1");
        Message m = Support.message("StoreD", 12);
        m.setDelayTimeLevel(1);
        sendSync(producer, m, "StoreD 12");
        producer.shutdown();

        // Delivered after seq 0..9 (delivered before the take-over, not again) and before
        // 10 and 11 (two hours away).
        Support.Counts delayed = new Support.Counts(13);
        DefaultMQPushConsumer delayConsumer = consumer(namesrv, "StoreDelayGroup", "StoreD",
            delayed);
        boolean delivered = Support.await(() -> delayed.distinct() == 1, 60_000);
        delayConsumer.shutdown();
        Support.check(delivered && delayed.missing().size() == 12
            && !delayed.missing().contains(12), "StoreDelayGroup resumed with "
            + delayed.distinct() + " messages, missing " + Support.head(delayed.missing()));

        readAll(namesrv);
    }

    /** The seqs each topic must hold, once each, after the Java broker's run. */
    static Map<String, Set<Integer>> expected() {
        Map<String, Set<Integer>> want = new TreeMap<>();
        want.put("StoreA", range(0, 360));
        want.get("StoreA").add(Support.BIG_TEXT);
        want.put("StoreB", range(0, 130));
        Set<Integer> d = range(0, 10);
        d.add(12);
        want.put("StoreD", d);
        want.put("StoreR", range(0, 12));
        want.put(RETRY, new HashSet<>(List.of(0, 4, 8)));
        want.put("StoreT", new HashSet<>(List.of(0)));
        want.put("StoreL", new HashSet<>(List.of(0, 1)));
        want.put("StoreJ", range(0, 50));
        return want;
    }

    static Set<Integer> range(int from, int to) {
        Set<Integer> s = new HashSet<>();
        for (int i = from; i < to; i++) {
            s.add(i);
        }
        return s;
    }

    /** Pulls every queue of every workload topic from min to max; each seq once. */
    static void readAll(String namesrv) throws Exception {
        DefaultMQPullConsumer consumer = new DefaultMQPullConsumer("StoreReader");
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("StoreReader-" + System.nanoTime());
        consumer.setMqClientApiTimeout(API_TIMEOUT_MS);
        consumer.start();
        int total = 0;
        for (Map.Entry<String, Set<Integer>> e : expected().entrySet()) {
            String topic = e.getKey();
            Map<Integer, Integer> seen = new HashMap<>();
            Set<MessageQueue> queues = consumer.fetchSubscribeMessageQueues(topic);
            for (MessageQueue mq : queues) {
                long offset = consumer.minOffset(mq);
                long max = consumer.maxOffset(mq);
                int guard = 0;
                while (offset < max && guard++ < 10_000) {
                    PullResult r = consumer.pull(mq, "*", offset, 32);
                    if (!Support.check(r.getPullStatus() == PullStatus.FOUND,
                            topic + "/" + mq.getQueueId() + "@" + offset + ": "
                            + r.getPullStatus())) {
                        break;
                    }
                    for (MessageExt m : r.getMsgFoundList()) {
                        Support.equal(offset, m.getQueueOffset(), "queue offset in " + topic);
                        offset = m.getQueueOffset() + 1;
                        int i;
                        if (topic.equals("StoreL")) {
                            i = Integer.parseInt(m.getUserProperty("seq"));
                            Support.equal(Support.sha(largeBody(i)), Support.sha(m.getBody()),
                                "the large body " + i);
                        } else {
                            i = Support.verify(topic, m, batched(topic, m));
                        }
                        seen.merge(i, 1, Integer::sum);
                        total++;
                    }
                    offset = r.getNextBeginOffset();
                }
            }
            Map<Integer, Integer> repeated = new TreeMap<>();
            seen.forEach((k, v) -> {
                if (v > 1) {
                    repeated.put(k, v);
                }
            });
            Support.check(repeated.isEmpty(), topic + " repeated " + repeated);
            Support.equal(new TreeSet<>(e.getValue()), new TreeSet<>(seen.keySet()),
                "seqs of " + topic);
        }
        Support.result("read", total);
        consumer.shutdown();
    }
}
