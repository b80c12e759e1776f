// A push consumer that reads a topic whose master dies and comes back: it must get every
// message, first from the slave while the master is away, then the later ones once the
// master is back. Bodies begin "ha-<6-digit seq>"; repeats are counted, not failed.
//
// args: namesrv topic group firstCount totalCount
// Prints "PHASE1 received=<n>" once it has the first firstCount, then waits for the rest.

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.message.MessageExt;

public class SlaveRead {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        int first = Integer.parseInt(args[3]);
        int total = Integer.parseInt(args[4]);
        Map<String, Integer> seen = new ConcurrentHashMap<>();
        Map<String, String> fromBroker = new ConcurrentHashMap<>();
        AtomicInteger deliveries = new AtomicInteger();
        DefaultMQPushConsumer consumer = Support.pushConsumer(namesrv, group);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                String text = new String(m.getBody(), StandardCharsets.UTF_8);
                String body = text.length() >= 9 ? text.substring(0, 9) : text;
                seen.merge(body, 1, Integer::sum);
                fromBroker.put(body, m.getStoreHost().toString());
                deliveries.incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean phase1 = Support.await(() -> countBelow(seen, first) >= first, 120_000);
        Support.check(phase1, "the first " + first + " messages, read while the master is down: "
            + countBelow(seen, first));
        Support.log("PHASE1 received=" + countBelow(seen, first) + " missing=" + missing(seen, first));
        boolean all = Support.await(() -> seen.size() >= total, 120_000);
        Support.check(all, "all " + total + " messages: " + seen.size());
        for (int i = 0; i < total; i++) {
            Support.check(seen.containsKey(body(i)), "message " + i + " never came");
        }
        int repeats = deliveries.get() - seen.size();
        Support.result("distinct", seen.size());
        Support.result("repeats", repeats);
        consumer.shutdown();
        Support.finish();
    }

    static String body(int i) {
        return String.format("ha-%06d", i);
    }

    static String missing(Map<String, Integer> seen, int n) {
        StringBuilder sb = new StringBuilder();
        int shown = 0;
        for (int i = 0; i < n && shown < 40; i++) {
            if (!seen.containsKey(body(i))) {
                sb.append(i).append(' ');
                shown++;
            }
        }
        return sb.toString().trim();
    }

    static int countBelow(Map<String, Integer> seen, int n) {
        int c = 0;
        for (int i = 0; i < n; i++) {
            if (seen.containsKey(body(i))) {
                c++;
            }
        }
        return c;
    }
}
