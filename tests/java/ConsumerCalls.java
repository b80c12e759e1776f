// The requests a broker passes on to a client, from the Java 4.9.8 client and admin API:
// request-reply (SEND_REPLY_MESSAGE_V2 and PUSH_REPLY_MESSAGE_TO_CLIENT), a consumer's running
// info (GET_CONSUMER_RUNNING_INFO), consuming one message directly (CONSUME_MESSAGE_DIRECTLY),
// each consumer's offsets (INVOKE_BROKER_TO_GET_CONSUMER_STATUS), and a SQL92 subscription
// checked at consumer start (CHECK_CLIENT_CONFIG).
//
// args: namesrv topic
// Prints RESULT lines: replies=<count of requests answered with their own reply>,
// asyncReplies=<same for the callback form>, clientId, runningTopics, consumeType,
// runningQueues, direct=<ConsumeMessageDirectlyResult.consumeResult>, directSeen=<times the
// listener saw the message consumed directly>, statusQueues=<queues in the client's
// getConsumeStatus entry>, statusSum=<sum of their offsets>, sql=<the start failure's text>.

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.body.ConsumeMessageDirectlyResult;
import org.apache.rocketmq.common.protocol.body.ConsumerRunningInfo;
import org.apache.rocketmq.common.protocol.body.Connection;
import org.apache.rocketmq.common.protocol.heartbeat.SubscriptionData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class ConsumerCalls {
    static final int REQUESTS = 10;

    public static void main(String[] args) {
        try {
            run(args[0], args[1]);
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            Support.check(false, "threw " + e);
        }
        Support.finish();
    }

    static String text(byte[] body) {
        return new String(body, StandardCharsets.UTF_8);
    }

    static void run(String namesrv, String topic) throws Exception {
        String requestTopic = topic + "Req";
        DefaultMQProducer producer = new DefaultMQProducer("calls_pg");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("calls_pg-" + System.nanoTime());
        producer.start();

        // The replier: answers each request with "re:" and its body.
        DefaultMQProducer replyProducer = new DefaultMQProducer("calls_reply_pg");
        replyProducer.setNamesrvAddr(namesrv);
        replyProducer.setInstanceName("calls_reply_pg-" + System.nanoTime());
        replyProducer.start();
        DefaultMQPushConsumer replier = new DefaultMQPushConsumer("calls_replier_cg");
        replier.setNamesrvAddr(namesrv);
        replier.setInstanceName("calls_replier-" + System.nanoTime());
        replier.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        replier.subscribe(requestTopic, "*");
        replier.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                if (msg.getProperty("CORRELATION_ID") == null) {
                    continue; // not a request
                }
                try {
                    byte[] answer = ("re:" + text(msg.getBody())).getBytes(StandardCharsets.UTF_8);
                    Message reply = MessageUtil.createReplyMessage(msg, answer);
                    replyProducer.send(reply, 5000);
                } catch (Exception e) {
                    Support.check(false, "reply failed: " + e);
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        // The request topic exists before the first request (sync sends create it).
        Support.check(producer.send(new Message(requestTopic, "warm".getBytes())) != null, "warm send");
        replier.start();
        // The broker pushes a reply on the connection the requester heartbeats on; its first
        // heartbeat is due a second after start, so it is sent now (as request() does itself
        // for a topic it has no route to yet).
        producer.getDefaultMQProducerImpl().getmQClientFactory().sendHeartbeatToAllBrokerWithLock();

        int replies = 0;
        for (int i = 0; i < REQUESTS; i++) {
            String body = "ask-" + i;
            Message answer = producer.request(new Message(requestTopic, body.getBytes()), 15000);
            if (Support.equal("re:" + body, answer == null ? null : text(answer.getBody()), "reply " + i)) {
                replies++;
            }
        }
        Support.result("replies", replies);
        CountDownLatch asyncDone = new CountDownLatch(REQUESTS);
        AtomicInteger asyncReplies = new AtomicInteger();
        for (int i = 0; i < REQUESTS; i++) {
            String body = "async-" + i;
            producer.request(new Message(requestTopic, body.getBytes()), new RequestCallback() {
                public void onSuccess(Message message) {
                    if (Support.equal("re:" + body, text(message.getBody()), "async reply")) {
                        asyncReplies.incrementAndGet();
                    }
                    asyncDone.countDown();
                }

                public void onException(Throwable e) {
                    Support.check(false, "async request failed: " + e);
                    asyncDone.countDown();
                }
            }, 15000);
        }
        Support.check(asyncDone.await(30, TimeUnit.SECONDS), "async requests answered in 30 s");
        Support.result("asyncReplies", asyncReplies.get());

        // A consumer to ask about: it consumes the topic and counts what it sees by body.
        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("calls_cg");
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("calls_cg-" + System.nanoTime());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                seen.computeIfAbsent(text(msg.getBody()), k -> new AtomicInteger()).incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        List<SendResult> sent = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            sent.add(producer.send(new Message(topic, ("m" + i).getBytes())));
        }
        consumer.start();
        Support.check(Support.await(() -> seen.size() == 8, 30000), "8 messages consumed: " + seen.keySet());

        DefaultMQAdminExt admin = Support.admin(namesrv, "calls_admin");
        String clientId = null;
        for (Connection c : admin.examineConsumerConnectionInfo("calls_cg").getConnectionSet()) {
            clientId = c.getClientId();
        }
        Support.result("clientId", clientId);

        ConsumerRunningInfo info = admin.getConsumerRunningInfo("calls_cg", clientId, false);
        List<String> topics = new ArrayList<>();
        for (SubscriptionData sub : info.getSubscriptionSet()) {
            topics.add(sub.getTopic());
        }
        topics.sort(null);
        Support.result("runningTopics", String.join(",", topics));
        Support.result("consumeType", info.getProperties().getProperty(ConsumerRunningInfo.PROP_CONSUME_TYPE));
        int running = 0;
        for (MessageQueue mq : info.getMqTable().keySet()) {
            if (mq.getTopic().equals(topic)) {
                running++;
            }
        }
        Support.result("runningQueues", running);

        SendResult target = sent.get(3);
        ConsumeMessageDirectlyResult direct =
            admin.consumeMessageDirectly("calls_cg", clientId, target.getOffsetMsgId());
        Support.result("direct", direct.getConsumeResult());
        Support.result("directSeen", seen.get("m3").get());

        // Offsets are reported once the consumer has them (it commits as it consumes).
        Map<String, Map<MessageQueue, Long>> status = null;
        long sum = -1;
        long deadline = System.currentTimeMillis() + 20000;
        while (System.currentTimeMillis() < deadline) {
            status = admin.getConsumeStatus(topic, "calls_cg", "");
            Map<MessageQueue, Long> mine = status.get(clientId);
            sum = 0;
            if (mine != null) {
                for (long offset : mine.values()) {
                    sum += offset;
                }
            }
            if (sum == 8) {
                break;
            }
            Support.sleep(200);
        }
        Map<MessageQueue, Long> mine = status == null ? null : status.get(clientId);
        Support.result("statusClients", status == null ? 0 : status.size());
        Support.result("statusQueues", mine == null ? 0 : mine.size());
        Support.result("statusSum", sum);

        DefaultMQPushConsumer sql = new DefaultMQPushConsumer("calls_sql_cg");
        sql.setNamesrvAddr(namesrv);
        sql.setInstanceName("calls_sql-" + System.nanoTime());
        sql.subscribe(topic, MessageSelector.bySql("a > 1"));
        sql.registerMessageListener((MessageListenerConcurrently) (msgs, context) ->
            ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        String failure = "started";
        try {
            sql.start();
        } catch (Exception e) {
            failure = e.getMessage() == null ? e.toString() : e.getMessage().split("\n")[0];
        }
        Support.result("sql", failure);
        sql.shutdown();

        admin.shutdown();
        consumer.shutdown();
        replier.shutdown();
        replyProducer.shutdown();
        producer.shutdown();
    }
}
