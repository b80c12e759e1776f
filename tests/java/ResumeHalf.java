// The Java 4.9.8 admin API's resumeCheckHalfMessage (RESUME_CHECK_HALF_MESSAGE): a committed
// transaction's half message is put back to be checked, and the broker then asks the producer
// about it (CHECK_TRANSACTION_STATE), which it never did while the transaction was ended.
//
// args: namesrv topic
// Prints RESULT checksBefore=<checks of the transaction in the 4 s after its commit>,
// resumed=<what the API returned>, checksAfter=<checks within 20 s of the resume>.

import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class ResumeHalf {
    public static void main(String[] args) {
        try {
            run(args[0], args[1]);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            Support.check(false, "threw " + e);
        }
        Support.finish();
    }

    static void run(String namesrv, String topic) throws Exception {
        Map<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        TransactionMQProducer producer = new TransactionMQProducer("resume_half_pg");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("resume_half-" + System.nanoTime());
        producer.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return LocalTransactionState.COMMIT_MESSAGE;
            }

            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checks.computeIfAbsent(msg.getKeys(), k -> new AtomicInteger()).incrementAndGet();
                return LocalTransactionState.COMMIT_MESSAGE;
            }
        });
        producer.start();
        Message message = new Message(topic, "TagT", "resume-1", "half".getBytes());
        SendResult sent = producer.sendMessageInTransaction(message, null);
        Support.equal(SendStatus.SEND_OK, sent.getSendStatus(), "half sent");
        Support.sleep(4000);
        Support.result("checksBefore", checks.containsKey("resume-1") ? checks.get("resume-1").get() : 0);

        DefaultMQAdminExt admin = Support.admin(namesrv, "resume_admin");
        // A transaction's SendResult has no offset id (4.9.8 leaves it null): the half is
        // found by its key in the half topic, as an operator would.
        QueryResult halves = admin.queryMessage("RMQ_SYS_TRANS_HALF_TOPIC", "resume-1", 32, 0, Long.MAX_VALUE);
        Support.equal(1, halves.getMessageList().size(), "halves found by key");
        MessageExt half = halves.getMessageList().get(0);
        String halfId = half instanceof MessageClientExt ? ((MessageClientExt) half).getOffsetMsgId() : half.getMsgId();
        Support.result("resumed", admin.resumeCheckHalfMessage(halfId));
        Support.check(Support.await(() -> checks.containsKey("resume-1"), 20000), "checked after the resume");
        Support.result("checksAfter", checks.containsKey("resume-1") ? checks.get("resume-1").get() : 0);
        admin.shutdown();
        producer.shutdown();
    }
}
