// Looking messages up as a Java application (and mqadmin) does: queryMessage by key, by
// a key many messages share, viewMessage by offset message id and by unique key.
//
// args: namesrv topic count

import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

public class Query {
    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);

        DefaultMQProducer producer = Support.producer(namesrv, "P_" + topic);
        producer.createTopic("TBW102", topic, 4);
        Support.sleep(200);
        long begin = System.currentTimeMillis() - 60_000;
        String[] ids = new String[count];
        String[] offsetIds = new String[count];
        for (int i = 0; i < count; i++) {
            Message m = Support.message(topic, i);
            m.setKeys("key-" + i + " shared-" + topic);
            SendResult r = producer.send(m);
            ids[i] = r.getMsgId();
            offsetIds[i] = r.getOffsetMsgId();
        }
        long end = System.currentTimeMillis() + 60_000;

        for (int i = 0; i < count; i += 7) {
            MessageExt byOffset = producer.viewMessage(offsetIds[i]);
            Support.equal(Integer.toString(i), byOffset.getUserProperty("seq"),
                "viewMessage(offset id) of " + i);
            Support.equal(Support.sha(Support.body(i)), Support.sha(byOffset.getBody()),
                "body by offset id of " + i);
            MessageExt byUniq = producer.viewMessage(topic, ids[i]);
            Support.equal(Integer.toString(i), byUniq.getUserProperty("seq"),
                "viewMessage(topic, unique key) of " + i);
            Support.equal(ids[i], byUniq.getMsgId(), "msgId by unique key of " + i);

            QueryResult one = producer.queryMessage(topic, "key-" + i, 32, begin, end);
            List<MessageExt> found = one.getMessageList();
            Support.equal(1, found.size(), "queryMessage(key-" + i + ")");
            if (!found.isEmpty()) {
                Support.equal(Integer.toString(i), found.get(0).getUserProperty("seq"),
                    "message of key-" + i);
            }
        }
        QueryResult shared = producer.queryMessage(topic, "shared-" + topic, 64, begin, end);
        Set<String> seqs = new HashSet<>();
        for (MessageExt m : shared.getMessageList()) {
            seqs.add(m.getUserProperty("seq"));
        }
        Support.equal(Math.min(count, 64), seqs.size(), "messages of the shared key");
        QueryResult none = null;
        try {
            none = producer.queryMessage(topic, "no-such-key", 32, begin, end);
        } catch (Exception e) {
            // 4.9.8 answers an empty result with QUERY_NOT_FOUND, which the client throws.
            Support.result("query_none", e.getClass().getSimpleName());
        }
        Support.check(none == null || none.getMessageList().isEmpty(), "no-such-key found");
        producer.shutdown();
        Support.finish();
    }
}
