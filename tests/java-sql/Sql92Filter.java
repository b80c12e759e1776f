// SQL92 filters as a Java application uses them, with the 4.9.8 or the 5.x remoting client
// (compiled against each kit): a producer sends messages with user properties, then one push
// consumer (DefaultMQPushConsumer, filtered by the broker with the selector its heartbeat
// registered; its own group, from the first offset) per expression, and a pull consumer
// (DefaultMQPullConsumer, whose pulls carry the selector) reads every queue from its min to
// its max offset with each expression; the program prints which messages each received. It does not judge them: the Rust test compares them with
// its own evaluation and with the Java broker's answer.
//
// args: send namesrv topic count
//       consume namesrv topic run expressions-file   (lines: expected-count TAB expression)
//       refused namesrv topic expression             (a push consumer's start must fail)

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentSkipListSet;

import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

@SuppressWarnings("deprecation")
public class Sql92Filter {
    static final String[] COLORS = {"red", "green", "blue", "\u65e5\u672c\u8a9e", "it's"};
    static final String[] TAGS = {"TagA", "TagB", "TagC"};

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "send":
                send(args[1], args[2], Integer.parseInt(args[3]));
                break;
            case "consume":
                consume(args[1], args[2], args[3], args[4]);
                break;
            case "refused":
                refused(args[1], args[2], args[3]);
                break;
            default:
                throw new IllegalArgumentException(args[0]);
        }
        System.exit(0);
    }

    /** Message i's properties: the table the Rust test evaluates on its own. */
    static Message message(String topic, int i) {
        Message m = new Message(topic, TAGS[i % 3], ("m" + i).getBytes(StandardCharsets.UTF_8));
        m.putUserProperty("idx", Integer.toString(i));
        if (i % 7 != 0) {
            m.putUserProperty("a", Integer.toString(i));
        }
        m.putUserProperty("b", COLORS[i % 5]);
        m.putUserProperty("c", i + ".5");
        if (i % 4 == 0) {
            m.putUserProperty("e", Long.toString(3000000000L + i));
        }
        return m;
    }

    static void send(String namesrv, String topic, int count) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("P_" + topic);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("P_" + topic + System.nanoTime());
        producer.start();
        int ok = 0;
        long deadline = System.currentTimeMillis() + 60_000;
        for (int i = 0; i < count; i++) {
            while (true) {
                try {
                    SendResult r = producer.send(message(topic, i));
                    if (r.getSendStatus() == SendStatus.SEND_OK) {
                        ok++;
                    }
                    break;
                } catch (MQClientException e) {
                    // The topic's route may not be there yet.
                    if (System.currentTimeMillis() > deadline) {
                        throw e;
                    }
                    Thread.sleep(200);
                }
            }
        }
        producer.shutdown();
        System.out.println("RESULT sent=" + ok);
    }

    static void consume(String namesrv, String topic, String run, String file) throws Exception {
        long begun = System.currentTimeMillis();
        List<String> lines = Files.readAllLines(Paths.get(file), StandardCharsets.UTF_8);
        int n = lines.size();
        int[] expected = new int[n];
        List<MessageSelector> selectors = new ArrayList<>();
        List<Set<Integer>> pushed = new ArrayList<>();
        List<Set<Integer>> pulled = new ArrayList<>();
        List<DefaultMQPushConsumer> pushes = new ArrayList<>();
        String instance = "C_" + run + System.nanoTime();
        for (int k = 0; k < n; k++) {
            String[] parts = lines.get(k).split("\t", 2);
            expected[k] = Integer.parseInt(parts[0]);
            MessageSelector selector = MessageSelector.bySql(parts[1]);
            selectors.add(selector);
            Set<Integer> got = new ConcurrentSkipListSet<>();
            pushed.add(got);
            DefaultMQPushConsumer push = new DefaultMQPushConsumer("G_push_" + run + "_" + k);
            push.setNamesrvAddr(namesrv);
            push.setInstanceName(instance);
            push.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            push.setConsumeThreadMin(1);
            push.setConsumeThreadMax(1);
            push.setHeartbeatBrokerInterval(1000);
            push.subscribe(topic, selector);
            push.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                for (MessageExt m : msgs) {
                    got.add(Integer.parseInt(m.getUserProperty("idx")));
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            push.start();
            pushes.add(push);
        }
        long started = System.currentTimeMillis();
        System.out.println("RESULT start_ms=" + (started - begun));

        // The pull consumer: every queue from min to max with each selector.
        DefaultMQPullConsumer pull = new DefaultMQPullConsumer("G_pull_" + run);
        pull.setNamesrvAddr(namesrv);
        // The push consumers' client instance: its heartbeats told it the broker's version,
        // which the client checks before it pulls with SQL92.
        pull.setInstanceName(instance);
        pull.start();
        Set<MessageQueue> queues = pull.fetchSubscribeMessageQueues(topic);
        for (int k = 0; k < n; k++) {
            Set<Integer> got = new TreeSet<>();
            for (MessageQueue q : queues) {
                long offset = pull.minOffset(q);
                long max = pull.maxOffset(q);
                for (int rounds = 0; offset < max && rounds < 1000; rounds++) {
                    PullResult r = pullOnce(pull, q, selectors.get(k), offset);
                    if (r.getPullStatus() == PullStatus.FOUND) {
                        for (MessageExt m : r.getMsgFoundList()) {
                            got.add(Integer.parseInt(m.getUserProperty("idx")));
                        }
                    } else if (r.getPullStatus() != PullStatus.NO_MATCHED_MSG) {
                        throw new IllegalStateException("pull " + q + " at " + offset + ": " + r);
                    }
                    offset = r.getNextBeginOffset();
                }
            }
            pulled.add(got);
        }
        System.out.println("RESULT pull_done_ms=" + (System.currentTimeMillis() - started));
        pull.shutdown();

        long deadline = started + 90_000;
        long settleUntil = Long.MAX_VALUE;
        while (System.currentTimeMillis() < Math.min(deadline, settleUntil)) {
            boolean all = true;
            for (int k = 0; k < n; k++) {
                all &= pushed.get(k).size() >= expected[k];
            }
            // Once every consumer has what it should, a short look for anything more.
            if (all && settleUntil == Long.MAX_VALUE) {
                System.out.println("RESULT reached_ms=" + (System.currentTimeMillis() - started));
                settleUntil = System.currentTimeMillis() + 3_000;
            }
            Thread.sleep(20);
        }
        for (int k = 0; k < n; k++) {
            System.out.println("RESULT push_" + k + "=" + join(pushed.get(k)));
            System.out.println("RESULT pull_" + k + "=" + join(pulled.get(k)));
        }
        for (DefaultMQPushConsumer push : pushes) {
            push.shutdown();
        }
    }

    /**
     * One pull. The client refuses an SQL92 pull until a heartbeat's answer told it the
     * broker's version (its brokerVersionTable), so that refusal is retried until the next
     * heartbeat (every second here).
     */
    static PullResult pullOnce(DefaultMQPullConsumer pull, MessageQueue q, MessageSelector selector,
        long offset) throws Exception {
        long deadline = System.currentTimeMillis() + 60_000;
        while (true) {
            try {
                return pull.pull(q, selector, offset, 32);
            } catch (MQClientException e) {
                if (System.currentTimeMillis() > deadline
                    || e.getMessage() == null || !e.getMessage().contains("does not upgrade")) {
                    throw e;
                }
                Thread.sleep(200);
            }
        }
    }

    static String join(Set<Integer> set) {
        StringBuilder b = new StringBuilder("[");
        for (int i : new TreeSet<>(set)) {
            if (b.length() > 1) {
                b.append(',');
            }
            b.append(i);
        }
        return b.append(']').toString();
    }

    static void refused(String namesrv, String topic, String expression) throws Exception {
        DefaultMQPushConsumer push = new DefaultMQPushConsumer("G_refused_" + System.nanoTime());
        push.setNamesrvAddr(namesrv);
        push.setInstanceName("R_" + System.nanoTime());
        push.subscribe(topic, MessageSelector.bySql(expression));
        push.registerMessageListener((MessageListenerConcurrently) (msgs, context) ->
            ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        try {
            push.start();
            System.out.println("RESULT refused=0");
        } catch (MQClientException e) {
            System.out.println("refusal: " + e.getMessage());
            System.out.println("RESULT refused=1");
        }
        push.shutdown();
    }
}
