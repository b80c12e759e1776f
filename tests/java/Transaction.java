// Transactional messages as a Java application uses them: a TransactionMQProducer sends
// halves whose local transaction commits, rolls back, or answers UNKNOW and then commits
// when the broker checks back. A consumer must get the committed ones (directly or after
// the check) and never the rolled-back ones; each unknown one is checked back once.
//
// args: namesrv topic count

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class Transaction {
    /** What the local transaction of message i does: commit, roll back, or not say. */
    static LocalTransactionState local(int i) {
        switch (i % 3) {
            case 0:
                return LocalTransactionState.COMMIT_MESSAGE;
            case 1:
                return LocalTransactionState.ROLLBACK_MESSAGE;
            default:
                return LocalTransactionState.UNKNOW;
        }
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);

        Map<Integer, AtomicInteger> checks = new ConcurrentHashMap<>();
        TransactionMQProducer producer = new TransactionMQProducer("P_" + topic);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("P_" + topic + System.nanoTime());
        producer.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return local((Integer) arg);
            }

            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                int i = Integer.parseInt(msg.getUserProperty("seq"));
                checks.computeIfAbsent(i, k -> new AtomicInteger()).incrementAndGet();
                Support.check(i % 3 == 2, "check-back of " + i + ", which said "
                    + local(i));
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        producer.start();
        producer.createTopic("TBW102", topic, 4);
        Support.sleep(200);

        Support.Counts got = new Support.Counts(count);
        DefaultMQPushConsumer consumer = Support.pushConsumer(namesrv, "C_" + topic);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                int i = Support.verify(topic, m, false);
                got.add(i);
                Support.check(i < 0 || i % 3 != 1, "rolled-back message " + i + " delivered");
                Support.equal("true", m.getProperty("TRAN_MSG"), "TRAN_MSG of " + i);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();

        int committed = 0;
        for (int i = 0; i < count; i++) {
            TransactionSendResult r = producer.sendMessageInTransaction(
                Support.message(topic, i), i);
            Support.equal(SendStatus.SEND_OK, r.getSendStatus(), "half " + i);
            Support.equal(local(i), r.getLocalTransactionState(), "local state of " + i);
            if (i % 3 != 1) {
                committed++;
            }
        }
        final int want = committed;
        // Java checks halves older than transactionTimeOut (6 s) every 60 s.
        boolean all = Support.await(() -> got.distinct() == want, 120_000);
        Support.sleep(2_000);
        Support.check(all, "committed delivered: " + got.distinct() + "/" + want);
        Support.check(got.repeated().isEmpty(), "repeated " + Support.head(got.repeated()));
        for (int i = 0; i < count; i++) {
            int n = checks.getOrDefault(i, new AtomicInteger()).get();
            Support.equal(i % 3 == 2 ? 1 : 0, n, "check-backs of " + i);
        }
        consumer.shutdown();
        producer.shutdown();
        Support.finish();
    }
}
