// round_trip.js ENDPOINT TOPIC GROUP: the RocketMQ 5.x Node.js client (npm
// rocketmq-client-nodejs, unchanged) against a gRPC endpoint at ENDPOINT (host:port, plain
// text). The story of tests/go5/main.go, told by tests/grpc_node.rs:
//
// A simple consumer of GROUP receives once (so the group exists before anything is sent),
// then a producer sends NORMAL normal messages (tag "normal"), FIFO messages of one message
// group (tag "fifo"), one delay message (tag "delay", delivery timestamp 3 s ahead) and two
// transactional ones (tag "tx"): "tx-commit" committed, "tx-rollback" rolled back (the
// producer has a checker, which reports any check it gets: none is expected). The consumer
// receives until every key but "tx-rollback" is acked or 90 s went by: it
// acks each message, except "normal-0" on its first delivery, whose invisible duration it
// changes to 2 s so that it comes back (delivery attempt 2) and is acked then. The program
// only reports, one JSON object per line (`ev`: sent, recv, changed, acked, checked, error,
// consumer_done, end); the Rust test accounts for every message by key and message id.
'use strict';

const { Producer, SimpleConsumer } = require('rocketmq-client-nodejs');
const { TransactionResolution } =
  require('rocketmq-client-nodejs/proto/apache/rocketmq/v2/definition_pb');

const NORMAL = 8;
const FIFO = 5;
const DELAY_MS = 3000;
const DEADLINE_MS = 90000;

function emit(event) {
  process.stdout.write(JSON.stringify(event) + '\n');
}

// The client logs to files under $HOME/logs; only our JSON goes to stdout.
const quiet = { info() {}, warn() {}, error() {}, debug() {} };

async function main() {
  const [endpoints, topic, group] = process.argv.slice(2);
  const consumer = new SimpleConsumer({
    endpoints, consumerGroup: group, subscriptions: new Map([[topic, '*']]),
    awaitDuration: 3000, logger: quiet,
  });
  await consumer.startup();
  await consumer.receive(16, 20000);

  const checker = {
    async check(message) {
      emit({ ev: 'checked', key: message.keys.join(','), msg_id: message.messageId });
      return TransactionResolution.COMMIT;
    },
  };
  const producer = new Producer({ endpoints, topics: [topic], logger: quiet, checker });
  await producer.startup();
  const wanted = new Set();
  async function send(part, seq, extra, end) {
    const key = `${part}-${seq}`;
    const body = `body-${key}`;
    try {
      const transaction = end ? producer.beginTransaction() : undefined;
      const receipt = await producer.send({
        topic, tag: part, keys: [key], body: Buffer.from(body), ...extra,
      }, transaction);
      if (end) await end(transaction);
      const event = { ev: 'sent', part, key, tag: part, body, msg_id: receipt.messageId, seq };
      if (extra.deliveryTimestamp) event.deliver_at_ms = extra.deliveryTimestamp.getTime();
      emit(event);
      if (key !== 'tx-rollback') wanted.add(key);
    } catch (error) {
      emit({ ev: 'send_error', part, key, error: String(error) });
    }
  }
  for (let i = 0; i < NORMAL; i++) await send('normal', i, {});
  for (let i = 0; i < FIFO; i++) await send('fifo', i, { messageGroup: 'fifo-group' });
  await send('delay', 0, { deliveryTimestamp: new Date(Date.now() + DELAY_MS) });
  await send('tx', 'commit', {}, (transaction) => transaction.commit());
  await send('tx', 'rollback', {}, (transaction) => transaction.rollback());

  const acked = new Set();
  const deadline = Date.now() + DEADLINE_MS;
  while (acked.size < wanted.size && Date.now() < deadline) {
    let messages;
    try {
      messages = await consumer.receive(16, 20000);
    } catch (error) {
      emit({ ev: 'receive_error', error: String(error) });
      continue;
    }
    for (const m of messages) {
      const key = m.keys.join(',');
      const attempt = m.deliveryAttempt;
      emit({
        ev: 'recv', part: m.tag, consumer: 'simple', key, tag: m.tag,
        body: m.body.toString('utf8'), msg_id: m.messageId, group: m.messageGroup ?? null,
        attempt, at_ms: Date.now(),
      });
      try {
        if (key === 'normal-0' && attempt === 1) {
          await consumer.changeInvisibleDuration(m, 2000);
          emit({ ev: 'changed', key, msg_id: m.messageId });
        } else {
          await consumer.ack(m);
          acked.add(key);
          emit({ ev: 'acked', key, msg_id: m.messageId });
        }
      } catch (error) {
        emit({ ev: 'error', what: `ack or change of ${key}`, error: String(error) });
      }
    }
  }
  emit({ ev: 'consumer_done', complete: acked.size === wanted.size });
  // Open until now: a check of a transaction would go to this producer.
  await producer.shutdown();
  await consumer.shutdown();
  emit({ ev: 'end' });
}

main().then(
  () => process.exit(0),
  (error) => {
    emit({ ev: 'error', what: 'threw', error: String(error && error.stack || error) });
    process.exit(1);
  },
);
