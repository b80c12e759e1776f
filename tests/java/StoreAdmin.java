// The Java 4.9.8 admin API's store cleaning requests to one broker: deleteExpiredCommitLogByAddr
// (DELETE_EXPIRED_COMMITLOG), cleanExpiredConsumerQueueByAddr (CLEAN_EXPIRED_CONSUMEQUEUE) and
// cleanUnusedTopicByAddr (CLEAN_UNUSED_TOPIC). What they did is checked by the Rust test.
//
// args: namesrv brokerAddr deleteExpiredCommitLog|cleanExpiredCQ|cleanUnusedTopic
// Prints RESULT ok=<what the API returned: whether the broker answered SUCCESS>.

import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

public class StoreAdmin {
    public static void main(String[] args) {
        try {
            DefaultMQAdminExt admin = Support.admin(args[0], "store_admin");
            boolean ok;
            switch (args[2]) {
                case "deleteExpiredCommitLog":
                    ok = admin.deleteExpiredCommitLogByAddr(args[1]);
                    break;
                case "cleanExpiredCQ":
                    ok = admin.cleanExpiredConsumerQueueByAddr(args[1]);
                    break;
                case "cleanUnusedTopic":
                    ok = admin.cleanUnusedTopicByAddr(args[1]);
                    break;
                default:
                    throw new IllegalArgumentException(args[2]);
            }
            Support.result("ok", ok);
            admin.shutdown();
        } catch (Throwable e) {
            e.printStackTrace(System.out);
            Support.check(false, "threw " + e);
        }
        Support.finish();
    }
}
