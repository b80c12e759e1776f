// A producer sending to a SYNC_MASTER broker group, each message to queue 0.
//
// args: namesrv topic count mode
//   mode "ok": every one of count messages (bodies "jsync-<6-digit seq>") must be answered
//     SEND_OK, which a SYNC_MASTER gives once its slave holds the message.
//   mode "noslave": the group's slave is dead; sends (at most count, 30 s) until one is
//     answered SLAVE_NOT_AVAILABLE; none may be SEND_OK, and any other answer may only be
//     FLUSH_SLAVE_TIMEOUT (a put waiting while the master learns the slave is gone).
// Prints RESULT lines with the count of each status.

import java.nio.charset.StandardCharsets;
import java.util.EnumMap;
import java.util.Map;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;

public class SyncSend {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        boolean noSlave = args[3].equals("noslave");
        DefaultMQProducer producer = Support.producer(namesrv, "sync_send_pg");
        Map<SendStatus, Integer> statuses = new EnumMap<>(SendStatus.class);
        long deadline = System.currentTimeMillis() + 30_000;
        for (int i = 0; i < count; i++) {
            String body = String.format("jsync-%06d", i);
            Message message = new Message(topic, body.getBytes(StandardCharsets.UTF_8));
            SendResult result = producer.send(message, (mqs, msg, arg) -> mqs.get(0), null);
            SendStatus status = result.getSendStatus();
            statuses.merge(status, 1, Integer::sum);
            if (noSlave) {
                Support.check(status != SendStatus.SEND_OK, "SEND_OK of " + body + " with no slave");
                Support.check(status == SendStatus.SLAVE_NOT_AVAILABLE
                    || status == SendStatus.FLUSH_SLAVE_TIMEOUT, body + ": " + status);
                if (status == SendStatus.SLAVE_NOT_AVAILABLE) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    Support.check(false, "never SLAVE_NOT_AVAILABLE in 30 s");
                    break;
                }
            } else {
                Support.equal(SendStatus.SEND_OK, status, body);
                Support.equal(0, result.getMessageQueue().getQueueId(), body + " queue");
            }
        }
        for (SendStatus status : SendStatus.values()) {
            Support.result(status.name(), statuses.getOrDefault(status, 0));
        }
        producer.shutdown();
        Support.finish();
    }
}
