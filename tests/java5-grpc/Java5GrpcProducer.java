// Java5GrpcProducer ENDPOINT TOPIC: the RocketMQ 5.x gRPC client's producer
// (rocketmq-client-java) against the gRPC endpoint at ENDPOINT (host:port, plain text).
//
// TOPIC must exist and accept every message type (message.type=MIXED). It sends one message
// of each kind: plain, tagged, keyed with a user property, delayed (delivery timestamp 2 s
// ahead), one delayed a minute and recalled at once (RECALLED <id>), FIFO (message group),
// and two transactional ones, the first committed and the
// second rolled back. For each it prints "SENT <name> <message id> <offset>" once the
// receipt came with a message id; the test reads the messages back through the broker's
// remoting side and checks what they carry. It prints one FAIL line per broken
// expectation and exits 0 only when nothing failed. The client's own start-up and request
// timeouts bound every wait.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.RecallReceipt;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

public class Java5GrpcProducer {
    private static final List<String> failures = new ArrayList<>();
    private static String lastRecallHandle;

    public static void main(String[] args) {
        // The clients' threads keep a JVM alive: every way out of the program exits.
        try {
            run(args);
        } catch (Throwable error) {
            error.printStackTrace(System.out);
            failures.add("threw " + error);
        }
        for (String failure : failures) {
            System.out.println("FAIL " + failure);
        }
        System.exit(failures.isEmpty() ? 0 : 1);
    }

    private static void run(String[] args) throws Exception {
        String endpoint = args[0];
        String topic = args[1];
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder()
            .setEndpoints(endpoint)
            .enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(10))
            .build();
        Producer producer = provider.newProducerBuilder()
            .setClientConfiguration(config)
            .setTopics(topic)
            // Checks come only for prepared messages left unresolved: none here.
            .setTransactionChecker(view -> TransactionResolution.COMMIT)
            .build();

        send(producer, "plain", provider.newMessageBuilder()
            .setTopic(topic)
            .setBody(bytes("plain"))
            .build());
        send(producer, "tagged", provider.newMessageBuilder()
            .setTopic(topic)
            .setTag("TagA")
            .setBody(bytes("tagged"))
            .build());
        send(producer, "keyed", provider.newMessageBuilder()
            .setTopic(topic)
            .setKeys("k1", "k2")
            .addProperty("color", "red")
            .setBody(bytes("keyed"))
            .build());
        send(producer, "delayed", provider.newMessageBuilder()
            .setTopic(topic)
            .setTag("Later")
            .setDeliveryTimestamp(System.currentTimeMillis() + 2_000)
            .setBody(bytes("delayed"))
            .build());
        send(producer, "recalled", provider.newMessageBuilder()
            .setTopic(topic)
            .setDeliveryTimestamp(System.currentTimeMillis() + 60_000)
            .setBody(bytes("recalled"))
            .build());
        if (lastRecallHandle == null || lastRecallHandle.isEmpty()) {
            failures.add("recalled: no recall handle");
        } else {
            RecallReceipt recalled = producer.recallMessage(topic, lastRecallHandle);
            System.out.println("RECALLED " + recalled.getMessageId());
        }
        send(producer, "fifo", provider.newMessageBuilder()
            .setTopic(topic)
            .setMessageGroup("group-1")
            .setBody(bytes("fifo"))
            .build());

        Transaction commit = producer.beginTransaction();
        send(producer, commit, "tx-commit", provider.newMessageBuilder()
            .setTopic(topic)
            .setBody(bytes("tx-commit"))
            .build());
        commit.commit();
        Transaction rollback = producer.beginTransaction();
        send(producer, rollback, "tx-rollback", provider.newMessageBuilder()
            .setTopic(topic)
            .setBody(bytes("tx-rollback"))
            .build());
        rollback.rollback();
        producer.close();
    }

    private static void send(Producer producer, String name, Message message) {
        try {
            report(name, producer.send(message));
        } catch (Throwable error) {
            failures.add(name + ": " + error);
        }
    }

    private static void send(Producer producer, Transaction transaction, String name,
        Message message) {
        try {
            report(name, producer.send(message, transaction));
        } catch (Throwable error) {
            failures.add(name + ": " + error);
        }
    }

    private static void report(String name, SendReceipt receipt) {
        if (receipt.getMessageId() == null) {
            failures.add(name + ": no message id");
            return;
        }
        System.out.println("SENT " + name + " " + receipt.getMessageId());
        lastRecallHandle = receipt.getRecallHandle();
    }

    private static byte[] bytes(String text) {
        return text.getBytes(StandardCharsets.UTF_8);
    }
}
