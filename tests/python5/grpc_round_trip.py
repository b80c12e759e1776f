# grpc_round_trip.py ENDPOINT TOPIC GROUP COUNT: the RocketMQ 5.x Python client
# (PyPI rocketmq-python-client) against a gRPC endpoint at ENDPOINT (host:port, plain text).
#
# The same story as tests/java5-grpc/Java5GrpcRoundTrip.java: a simple consumer of GROUP
# (long polling 5 s) receives once first (its group starts at the queues' ends), a producer
# sends COUNT messages, each with its own key ("key-i"), body ("body-i") and one of three
# tags, then the consumer receives and acks until it has seen every key or 60 s went by. It prints one FAIL line per
# broken expectation and RESULT lines, and exits 0 only when nothing failed.
import os
import sys
import time

from rocketmq import (ClientConfiguration, Credentials, FilterExpression, Message, Producer,
                      SimpleConsumer)

DEADLINE_S = 60


def main():
    endpoint, topic, group, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    failures = []
    config = ClientConfiguration(endpoint, Credentials())
    consumer = SimpleConsumer(config, group, {topic: FilterExpression()}, await_duration=5)
    consumer.startup()
    got = {}

    def receive():
        for message in consumer.receive(16, 15) or []:
            key = ",".join(message.keys)
            body = message.body.decode("utf-8")
            if key in got:
                failures.append(f"{key} delivered twice")
            got[key] = f"{body}|{message.tag}"
            consumer.ack(message)

    receive()
    producer = Producer(config, (topic,))
    producer.startup()
    sent = {}
    send_ok = 0
    for i in range(count):
        message = Message()
        message.topic = topic
        message.body = f"body-{i}".encode("utf-8")
        message.tag = f"tag{i % 3}"
        message.keys = f"key-{i}"
        receipt = producer.send(message)
        if receipt.message_id:
            send_ok += 1
        else:
            failures.append(f"send {i}: no message id")
        sent[f"key-{i}"] = f"body-{i}|tag{i % 3}"
    producer.shutdown()
    print(f"RESULT send_ok={send_ok}", flush=True)
    deadline = time.monotonic() + DEADLINE_S
    while len(got) < count and time.monotonic() < deadline:
        receive()
    consumer.shutdown()
    for key, expected in sent.items():
        if got.get(key) != expected:
            failures.append(f"{key} sent {expected}, got {got.get(key)}")
    for key in got:
        if key not in sent:
            failures.append(f"got {key}, which was not sent")
    print(f"RESULT received={len(got)}", flush=True)
    for failure in failures:
        print(f"FAIL {failure}", flush=True)
    # The client's threads may keep the interpreter alive: leave at once.
    os._exit(0 if not failures else 1)


if __name__ == "__main__":
    try:
        main()
    except Exception as error:  # noqa: BLE001 - any failure is reported and fails the run
        print(f"FAIL threw {error!r}", flush=True)
        os._exit(1)
