// Sends N messages in one mode (sync, async, oneway or batch) with tags, keys and user
// properties of every shape, then reads them back with two push consumers: one subscribed
// to "*" that must see each message once, exactly as sent, and one subscribed to
// "TagA || TagC" that must see those and no other. In sync and async mode two bodies at the
// client's 4 MiB limit go too (one compressible, one random).
//
// args: namesrv topic mode count

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class SendConsume {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String mode = args[2];
        int count = Integer.parseInt(args[3]);
        boolean batched = mode.equals("batch");

        DefaultMQProducer producer = Support.producer(namesrv, "P_" + topic);
        Map<Integer, String> sentIds = new ConcurrentHashMap<>();
        List<Integer> seqs = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            seqs.add(i);
        }
        if (mode.equals("sync") || mode.equals("async")) {
            seqs.add(Support.BIG_TEXT);
            seqs.add(Support.BIG_RANDOM);
        }
        long t0 = System.nanoTime();
        switch (mode) {
            case "sync":
                for (int i : seqs) {
                    SendResult r = producer.send(Support.message(topic, i));
                    Support.equal(SendStatus.SEND_OK, r.getSendStatus(), "send status of " + i);
                    sentIds.put(i, r.getMsgId());
                }
                break;
            case "async": {
                CountDownLatch done = new CountDownLatch(seqs.size());
                for (int i : seqs) {
                    final int seq = i;
                    producer.send(Support.message(topic, i), new SendCallback() {
                        public void onSuccess(SendResult r) {
                            Support.equal(SendStatus.SEND_OK, r.getSendStatus(),
                                "send status of " + seq);
                            sentIds.put(seq, r.getMsgId());
                            done.countDown();
                        }

                        public void onException(Throwable e) {
                            Support.check(false, "async send of " + seq + ": " + e);
                            done.countDown();
                        }
                    });
                }
                Support.check(done.await(60, TimeUnit.SECONDS), "async sends answered");
                break;
            }
            case "oneway":
                for (int i : seqs) {
                    producer.sendOneway(Support.message(topic, i));
                }
                break;
            case "batch":
                for (int start = 0; start < count; start += 10) {
                    List<Message> batch = new ArrayList<>();
                    for (int i = start; i < Math.min(count, start + 10); i++) {
                        batch.add(Support.message(topic, i));
                    }
                    SendResult r = producer.send(batch);
                    Support.equal(SendStatus.SEND_OK, r.getSendStatus(), "batch at " + start);
                    String[] ids = r.getMsgId().split(",");
                    Support.equal(batch.size(), ids.length, "ids of batch at " + start);
                    for (int k = 0; k < ids.length && k < batch.size(); k++) {
                        sentIds.put(start + k, ids[k]);
                    }
                }
                break;
            default:
                throw new IllegalArgumentException(mode);
        }
        Support.result("send_ms", (System.nanoTime() - t0) / 1_000_000);

        // Every message, once, as sent.
        Support.Counts all = new Support.Counts(count);
        AtomicInteger bigs = new AtomicInteger();
        DefaultMQPushConsumer everything = Support.pushConsumer(namesrv, "C_" + topic + "_all");
        everything.subscribe(topic, "*");
        everything.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                int i = Support.verify(topic, m, batched);
                if (i == Support.BIG_TEXT || i == Support.BIG_RANDOM) {
                    bigs.incrementAndGet();
                } else {
                    all.add(i);
                }
                String id = i >= 0 ? sentIds.get(i) : null;
                if (id != null) {
                    Support.equal(id, m.getMsgId(), "msgId of " + i);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        everything.start();

        // Tag filtering: TagA and TagC only.
        Support.Counts filtered = new Support.Counts(count);
        DefaultMQPushConsumer tagged = Support.pushConsumer(namesrv, "C_" + topic + "_AC");
        tagged.subscribe(topic, "TagA || TagC");
        tagged.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                int i = Support.verify(topic, m, batched);
                Support.check(i < 0 || !"TagB".equals(Support.tag(i)), "TagB delivered: " + i);
                if (i >= 0 && i < count) {
                    filtered.add(i);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        tagged.start();

        int expectFiltered = 0;
        for (int i = 0; i < count; i++) {
            if (!Support.tag(i).equals("TagB")) {
                expectFiltered++;
            }
        }
        final int wantFiltered = expectFiltered;
        final int wantBigs = seqs.size() - count;
        boolean got = Support.await(() -> all.distinct() == count && bigs.get() >= wantBigs
            && filtered.distinct() == wantFiltered, 90_000);
        // A little longer, for repeats or stray TagB messages to show.
        Support.sleep(1_000);
        Support.check(got, "all delivered: " + all.distinct() + "/" + count + ", missing "
            + Support.head(all.missing()) + "; big " + bigs.get() + "/" + wantBigs
            + "; filtered " + filtered.distinct() + "/" + wantFiltered);
        Support.check(all.repeated().isEmpty(), "repeated: " + Support.head(all.repeated()));
        Support.equal(wantBigs, bigs.get(), "big bodies delivered");
        Support.check(filtered.repeated().isEmpty(),
            "filtered repeated: " + Support.head(filtered.repeated()));
        Support.result("delivered", all.total());
        Support.result("filtered", filtered.total());

        everything.shutdown();
        tagged.shutdown();
        producer.shutdown();
        Support.finish();
    }
}
