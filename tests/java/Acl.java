// The Java 4.9.8 client with AclClientRPCHook against a broker with aclEnable=true and the
// plain_acl.yml of tests/java_acl.rs: what each account may and may not do.
//
// args: namesrv
// Prints one RESULT line per case: SEND_OK / consumed counts, or the broker's refusal as
// "<response code>|<remark>", so that the same program run against the Java broker and
// against ferromq can be compared line by line.

import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class Acl {
    static RPCHook hook(String accessKey, String secretKey) {
        return new AclClientRPCHook(new SessionCredentials(accessKey, secretKey));
    }

    static DefaultMQProducer producer(String namesrv, String group, RPCHook hook) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group, hook);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(group + "-" + System.nanoTime());
        producer.setSendMsgTimeout(10_000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        return producer;
    }

    /** The broker's code and remark in a failure, through the causes the client wraps. */
    static String refusal(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof MQBrokerException) {
                MQBrokerException b = (MQBrokerException) t;
                return b.getResponseCode() + "|" + b.getErrorMessage();
            }
        }
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof MQClientException && ((MQClientException) t).getResponseCode() > 0) {
                MQClientException c = (MQClientException) t;
                return c.getResponseCode() + "|" + c.getErrorMessage();
            }
        }
        return "client|" + e.getClass().getSimpleName();
    }

    /** The outcome of one send: its status, or the broker's code and remark. */
    static String send(DefaultMQProducer producer, String topic) {
        try {
            Message message = new Message(topic, "acl".getBytes(StandardCharsets.UTF_8));
            SendResult result = producer.send(message);
            return result.getSendStatus().name();
        } catch (Exception e) {
            return refusal(e);
        }
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        DefaultMQProducer allowed = producer(namesrv, "acl_pg", hook("RocketMQ", "12345678"));
        Support.result("send_topicB", send(allowed, "topicB"));
        Support.result("send_topicB_again", send(allowed, "topicB"));
        Support.result("send_topicA_denied", send(allowed, "topicA"));
        Support.result("send_topicC_sub_only", send(allowed, "topicC"));
        Support.result("send_default_deny", send(allowed, "topicOther"));
        allowed.shutdown();

        DefaultMQProducer unsigned = producer(namesrv, "acl_pg_none", null);
        Support.result("send_unsigned", send(unsigned, "topicB"));
        unsigned.shutdown();

        DefaultMQProducer wrong = producer(namesrv, "acl_pg_wrong", hook("RocketMQ", "wrongsecret"));
        Support.result("send_wrong_secret", send(wrong, "topicB"));
        wrong.shutdown();

        DefaultMQProducer stranger = producer(namesrv, "acl_pg_x", hook("stranger", "12345678"));
        Support.result("send_unknown_key", send(stranger, "topicB"));
        stranger.shutdown();

        // A consumer of groupB (PUB|SUB) on topicB gets the two messages sent above.
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(
            "groupB", hook("RocketMQ", "12345678"), new AllocateMessageQueueAveragely());
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("acl-consumer-" + System.nanoTime());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe("topicB", "*");
        AtomicInteger consumed = new AtomicInteger();
        consumer.registerMessageListener((MessageListenerConcurrently) (messages, context) -> {
            consumed.addAndGet(messages.size());
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        Support.await(() -> consumed.get() >= 2, 30_000);
        Support.sleep(1_000);
        Support.result("consumed_topicB_groupB", consumed.get());
        consumer.shutdown();

        // Admin requests: a non-admin account is refused, the admin account is served.
        String broker = args[1];
        for (String[] account : new String[][] {{"RocketMQ", "user"}, {"rocketmqAdmin", "admin"}}) {
            DefaultMQAdminExt admin = new DefaultMQAdminExt(hook(account[0], "12345678"));
            admin.setNamesrvAddr(namesrv);
            admin.setInstanceName("acl-admin-" + System.nanoTime());
            admin.start();
            String outcome;
            try {
                TopicConfig config = new TopicConfig("aclMadeTopic", 2, 2, 6);
                admin.createAndUpdateTopicConfig(broker, config);
                outcome = "SUCCESS";
            } catch (Exception e) {
                outcome = refusal(e);
            }
            Support.result("create_topic_" + account[1], outcome);
            admin.shutdown();
        }
        Support.finish();
    }
}
