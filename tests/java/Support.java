// Shared by the Java programs of ferromq's Java-client suite (tests/java/, run by
// tests/java_*.rs through the 4.9.8 kit): checks that record failures instead of throwing,
// bounded waits, and the messages the programs send and then expect back byte for byte.
//
// A program prints "FAIL <what>" for each broken expectation, "RESULT key=value" for its
// figures, and ends with Support.finish(), which exits 0 only when nothing failed.

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BooleanSupplier;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

final class Support {
    private static final AtomicInteger failures = new AtomicInteger();
    private static final long START = System.currentTimeMillis();

    private Support() {}

    /** Records a failure unless ok (at most 50 lines are printed). */
    static boolean check(boolean ok, String what) {
        if (!ok) {
            int n = failures.incrementAndGet();
            if (n <= 50) {
                System.out.println("FAIL " + what);
            } else if (n == 51) {
                System.out.println("FAIL (further failures not printed)");
            }
        }
        return ok;
    }

    static boolean equal(Object expected, Object actual, String what) {
        boolean same = expected == null ? actual == null : expected.equals(actual);
        return check(same, what + ": expected <" + expected + "> got <" + actual + ">");
    }

    static int failureCount() {
        return failures.get();
    }

    static void result(String key, Object value) {
        System.out.println("RESULT " + key + "=" + value);
    }

    static void log(String text) {
        System.out.println("[" + (System.currentTimeMillis() - START) + " ms] " + text);
    }

    /** Exits 0 if nothing failed, else 1. */
    static void finish() {
        int n = failures.get();
        System.out.println(n == 0 ? "PASS" : "FAILED " + n);
        System.out.flush();
        // The client's threads (and a producer never shut down after a failure) must not
        // keep the JVM alive.
        Runtime.getRuntime().halt(n == 0 ? 0 : 1);
    }

    /** Polls until cond holds or timeoutMs passes; says which. */
    static boolean await(BooleanSupplier cond, long timeoutMs) {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (System.currentTimeMillis() < deadline) {
            if (cond.getAsBoolean()) {
                return true;
            }
            sleep(20);
        }
        return cond.getAsBoolean();
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static DefaultMQProducer producer(String namesrv, String group) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(group + "-" + System.nanoTime());
        producer.setSendMsgTimeout(10_000);
        producer.start();
        return producer;
    }

    /** A started admin client, its instance named after name (unique per call). */
    static DefaultMQAdminExt admin(String namesrv, String name) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName(name + "-" + System.nanoTime());
        admin.start();
        return admin;
    }

    /** A push consumer of group, from the first offset, not yet started. */
    static DefaultMQPushConsumer pushConsumer(String namesrv, String group) {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(group + "-" + System.nanoTime());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        return consumer;
    }

    static String sha(byte[] bytes) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(bytes);
            StringBuilder sb = new StringBuilder();
            for (int i = 0; i < 8; i++) {
                sb.append(String.format("%02x", d[i]));
            }
            return sb.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /**
     * The user properties a message carries: every shape a Java application uses.
     * seq always; then by i: unicode names and values, a long value, many properties,
     * separators' neighbours (=, ;, spaces), and the last one a number so that a value
     * glued to what the broker appends shows.
     */
    static Map<String, String> userProperties(int i) {
        Map<String, String> p = new HashMap<>();
        switch (i % 6) {
            case 0:
                break;
            case 1:
                p.put("名前", "値-" + i + "-✓ ünïcödé 😀");
                p.put("emoji😀", "🎉");
                break;
            case 2:
                p.put("long", repeat("0123456789abcdef", 256) + i);
                break;
            case 3:
                for (int k = 0; k < 60; k++) {
                    p.put("p" + k, "v" + k + "-" + i);
                }
                break;
            case 4:
                p.put("a=b", "x;y z");
                p.put(" spaced ", " padded ");
                p.put("json", "{\"k\":[1,2,\"3\"]}");
                break;
            default:
                p.put("single", "1");
                break;
        }
        p.put("seq", Integer.toString(i));
        return p;
    }

    static String repeat(String s, int n) {
        StringBuilder sb = new StringBuilder(s.length() * n);
        for (int i = 0; i < n; i++) {
            sb.append(s);
        }
        return sb.toString();
    }

    /** Seq of the message whose body is 4 MiB of text (the client's limit, compressed). */
    static final int BIG_TEXT = 1_000_000;
    /** Seq of the message whose body is 4,000,000 random bytes (compressed, no smaller). */
    static final int BIG_RANDOM = 1_000_001;

    /** Body of message i: mostly small; some over 4 KiB (compressed by the client). */
    static byte[] body(int i) {
        if (i == BIG_TEXT) {
            byte[] b = new byte[4 * 1024 * 1024];
            for (int k = 0; k < b.length; k++) {
                b[k] = (byte) ('a' + (k % 26));
            }
            return b;
        }
        if (i == BIG_RANDOM) {
            byte[] b = new byte[4_000_000];
            new Random(i).nextBytes(b);
            return b;
        }
        if (i % 25 == 7) {
            // Compressible, over the 4 KiB compression threshold.
            return (repeat("body-" + i + " compressible ", 600)).getBytes(StandardCharsets.UTF_8);
        }
        if (i % 25 == 13) {
            // Incompressible, over the threshold: compressed but does not shrink.
            byte[] b = new byte[64 * 1024 + i];
            new Random(i).nextBytes(b);
            return b;
        }
        return ("body-" + i + "-" + repeat("x", i % 50)).getBytes(StandardCharsets.UTF_8);
    }

    static String tag(int i) {
        return new String[] {"TagA", "TagB", "TagC"}[i % 3];
    }

    /** Message i of a test set, with its tag, key and user properties. */
    static Message message(String topic, int i) {
        Message m = new Message(topic, tag(i), "key-" + i, body(i));
        for (Map.Entry<String, String> e : userProperties(i).entrySet()) {
            m.putUserProperty(e.getKey(), e.getValue());
        }
        if (i % 6 == 5) {
            // An empty value (putUserProperty refuses one; the accessor does not): sent as
            // "empty\u0001", dropped by the broker's parse, as Java's string2messageProperties.
            MessageAccessor.putProperty(m, "empty", "");
        }
        return m;
    }

    /**
     * What a consumer must see of message i, as Java's broker delivers it: checks and
     * returns i, or -1.
     */
    static int verify(String topic, MessageExt m, boolean batched) {
        String seqText = m.getUserProperty("seq");
        int i;
        try {
            i = Integer.parseInt(seqText);
        } catch (NumberFormatException e) {
            check(false, "seq of " + m.getMsgId() + " is not a number: <" + seqText
                + "> properties " + m.getProperties());
            return -1;
        }
        equal(topic, m.getTopic(), "topic of " + i);
        equal(tag(i), m.getTags(), "tags of " + i);
        equal("key-" + i, m.getKeys(), "keys of " + i);
        equal(sha(body(i)), sha(m.getBody()), "body of " + i);
        equal("DefaultCluster", m.getProperty("CLUSTER"), "CLUSTER of " + i);
        // WAIT as Java's broker stores it: dropped from a send, kept in a batch, a delayed
        // message and a transaction's (its CommitLog and half store write the properties
        // again with it), false in a retry copy (send-back stores it so).
        String wantWait = null;
        if (m.getReconsumeTimes() > 0) {
            wantWait = "false";
        } else if (batched || m.getProperty("DELAY") != null
                || m.getProperty("TRAN_MSG") != null) {
            wantWait = "true";
        }
        equal(wantWait, m.getProperty("WAIT"), "WAIT of " + i);
        equal(null, m.getProperty("empty"), "the empty property of " + i);
        Map<String, String> want = userProperties(i);
        for (Map.Entry<String, String> e : want.entrySet()) {
            equal(e.getValue(), m.getUserProperty(e.getKey()),
                "property " + e.getKey() + " of " + i);
        }
        // The unique id leads with the client's address: 32 digits for IPv4, 56 for IPv6.
        check(m.getMsgId() != null && m.getMsgId().length() >= 32, "msgId of " + i);
        String offsetId = m instanceof MessageClientExt
            ? ((MessageClientExt) m).getOffsetMsgId() : null;
        check(offsetId != null && offsetId.length() == 32, "offsetMsgId of " + i);
        return i;
    }

    /** Counts per seq, thread-safe. */
    static final class Counts {
        private final int[] counts;

        Counts(int n) {
            counts = new int[n];
        }

        synchronized void add(int i) {
            if (i >= 0 && i < counts.length) {
                counts[i]++;
            } else {
                check(false, "seq out of range: " + i);
            }
        }

        synchronized int distinct() {
            int d = 0;
            for (int c : counts) {
                if (c > 0) {
                    d++;
                }
            }
            return d;
        }

        synchronized int total() {
            return Arrays.stream(counts).sum();
        }

        synchronized List<Integer> missing() {
            List<Integer> m = new ArrayList<>();
            for (int i = 0; i < counts.length; i++) {
                if (counts[i] == 0) {
                    m.add(i);
                }
            }
            return m;
        }

        synchronized List<Integer> repeated() {
            List<Integer> m = new ArrayList<>();
            for (int i = 0; i < counts.length; i++) {
                if (counts[i] > 1) {
                    m.add(i);
                }
            }
            return m;
        }
    }

    static String head(List<Integer> list) {
        return list.size() <= 20 ? list.toString() : list.subList(0, 20) + "... (" + list.size() + ")";
    }
}
