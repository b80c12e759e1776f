"""Drives the C++ RocketMQ client against a name server and reports what it did and saw.

The client is the PyPI package `rocketmq` 0.4.4 (apache/rocketmq-client-python): ctypes
bindings over the C API of the C++ core librocketmq, which the wheel bundles. Usage:

    python client.py NAMESRV_ADDR

It prints one JSON event a line on stdout and judges nothing: tests/cpp_client.rs reads the
lines and makes every assertion. librocketmq logs under $HOME/logs/rocketmq-cpp/.

Three parts run side by side, each with its own topic and groups:

  - plain: sync, async and oneway sends, each mode with its own tag and every message with a
    unique key and a user property; a push consumer takes the whole topic, a second push
    consumer and the pull consumer only two of the tags.
  - order: send_orderly with a queue selector that puts every step of an order on the queue
    order % queues, sent in step order, and one more order by send_oneway_orderly; an orderly
    push consumer.
  - batch: send_batch, which librocketmq sends as SEND_MESSAGE with the header field
    batch="1", a value Java's header decoding (Boolean.parseBoolean) reads as false; a push
    consumer reports what arrives.

A consumer stops once it has every key its part sent and a quiet window passed without
another message (which would show a duplicate or an unexpected one), or at its deadline. The
program exits by itself before its overall deadline. The 0.4.4 API has no transaction
producer, so there is no transaction part.
"""

import ctypes
import json
import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer
from rocketmq.exceptions import ffi_check
from rocketmq.ffi import dll

PER_MODE = 40  # messages per send mode in the plain part
BATCHES = 2  # send_batch calls in the batch part
BATCH_SIZE = 3  # messages per send_batch call
ORDERS = 8  # orders sent by send_orderly
STEPS = 10  # steps per order
ONEWAY_ORDER = ORDERS  # the number of the order sent by send_oneway_orderly
PART_DEADLINE_S = 90  # a consumer gives up waiting after this
QUIET_WINDOW_S = 2  # after the last expected message, watch for more
SHUTDOWN_S = 15  # a client's shutdown must return within this
EXIT_DEADLINE_S = 150

PLAIN_TOPIC = "CppPlain"
ORDER_TOPIC = "CppOrder"
BATCH_TOPIC = "CppBatch"
TAGGED = "TagSync || TagOneway"

_out_lock = threading.Lock()


def emit(**fields):
    """Prints one event line."""
    line = json.dumps(fields, sort_keys=True)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def emit_error(part, what, error):
    emit(ev="error", part=part, what=what, error="%s: %s" % (type(error).__name__, error))


def text(value):
    if value is None:
        return None
    return value.decode("utf-8", errors="replace")


def received(part, consumer, msg):
    """A message a consumer got, as an event."""
    emit(
        ev="recv",
        part=part,
        consumer=consumer,
        key=text(msg.keys),
        tag=text(msg.tags),
        body=text(msg.body),
        topic=msg.topic,
        queue=msg.queue_id,
        offset=msg.queue_offset,
        msg_id=msg.id,
        reconsume=msg.reconsume_times,
        store_size=msg.store_size,
        order=text(msg.get_property("order")),
        step=text(msg.get_property("step")),
        prop=text(msg.get_property("sent_by")),
    )


class Tracker:
    """Counts what a consumer got against the keys it waits for."""

    def __init__(self, keys, count=0):
        self.lock = threading.Lock()
        self.missing = set(keys)
        self.count = count  # messages to wait for, whatever their keys
        self.last = time.monotonic()
        self.got = 0

    def saw(self, key):
        with self.lock:
            self.got += 1
            self.last = time.monotonic()
            self.missing.discard(key)

    def complete(self):
        return not self.missing and self.got >= self.count

    def wait(self, part, name, expected):
        """Waits until every key is in and the quiet window passed, or the deadline."""
        deadline = time.monotonic() + PART_DEADLINE_S
        while time.monotonic() < deadline:
            with self.lock:
                quiet = time.monotonic() - self.last >= QUIET_WINDOW_S
                if self.complete() and quiet:
                    break
            time.sleep(0.05)
        with self.lock:
            emit(
                ev="consumer_done",
                part=part,
                consumer=name,
                complete=self.complete(),
                got=self.got,
                expected=expected,
                missing=sorted(self.missing)[:20],
            )


def bounded(part, what, call):
    """Runs call (a client's shutdown) on a thread, reporting an error or a hang."""
    errors = []

    def run():
        try:
            call()
        except Exception as e:  # noqa: BLE001 - reported, never swallowed
            errors.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(SHUTDOWN_S)
    if thread.is_alive():
        emit(ev="error", part=part, what=what, error="did not return in %d s" % SHUTDOWN_S)
    elif errors:
        emit_error(part, what, errors[0])


def message(topic, key, tag, body, **properties):
    msg = Message(topic)
    msg.set_keys(key)
    msg.set_tags(tag)
    msg.set_body(body)
    for name, value in properties.items():
        msg.set_property(name, value)
    return msg


def producer(namesrv, group):
    """A started producer with an instance name of its own.

    librocketmq shares one client factory among the clients of an instance name, and a
    client's shutdown shuts the factory down under the others (their own shutdowns then hang
    or abort), so every client here gets its own. The 0.4.4 Producer does not wrap the C
    API's SetProducerInstanceName; its ffi module declares it."""
    p = Producer(group, timeout=5000)
    ffi_check(dll.SetProducerInstanceName(p._handle, group.encode()))
    p.set_namesrv_addr(namesrv)
    p.start()
    return p


def push_consumer(namesrv, group, topic, expression, callback, orderly=False):
    """A started push consumer with an instance name of its own (see producer)."""
    c = PushConsumer(group, orderly=orderly)
    c.set_namesrv_addr(namesrv)
    c.set_instance_name(group)
    c.subscribe(topic, callback, expression)
    c.start()
    return c


def sent_event(part, mode, key, tag, body, result=None, **extra):
    event = dict(ev="sent", part=part, mode=mode, key=key, tag=tag, body=body, **extra)
    if result is not None:
        event.update(status=int(result.status), msg_id=result.msg_id, offset=result.offset)
    return event


def plain_part(namesrv):
    """Sync, async, oneway and batch sends; two push consumers and the pull consumer."""
    part = "plain"
    try:
        p = producer(namesrv, "CppPlainProducer")
    except Exception as e:  # noqa: BLE001
        emit_error(part, "producer start", e)
        return
    keys = []
    async_left = threading.Semaphore(0)
    async_count = 0
    for mode in ["sync", "async", "oneway"]:
        tag = "Tag" + mode.capitalize()
        for i in range(PER_MODE):
            key = "plain-%s-%03d" % (mode, i)
            body = "body of %s (ü)" % key
            keys.append(key)
            msg = message(PLAIN_TOPIC, key, tag, body, sent_by=mode)
            try:
                if mode == "sync":
                    emit(**sent_event(part, mode, key, tag, body, p.send_sync(msg)))
                elif mode == "async":
                    def on_success(result, key=key, tag=tag, body=body):
                        emit(**sent_event(part, "async", key, tag, body, result))
                        async_left.release()

                    def on_exception(error, key=key, tag=tag, body=body):
                        event = sent_event(part, "async", key, tag, body)
                        emit(**{**event, "ev": "send_error", "error": str(error)})
                        async_left.release()

                    async_count += 1
                    p.send_async(msg, on_success, on_exception)
                else:
                    p.send_oneway(msg)
                    emit(**sent_event(part, mode, key, tag, body))
            except Exception as e:  # noqa: BLE001
                emit(**{**sent_event(part, mode, key, tag, body), "ev": "send_error",
                        "error": str(e)})
    for _ in range(async_count):
        if not async_left.acquire(timeout=30):
            emit(ev="error", part=part, what="async sends", error="no callback in 30 s")
            break

    tagged_keys = [k for k in keys if k.startswith(("plain-sync-", "plain-oneway-"))]
    threads = [
        threading.Thread(target=plain_push, args=(namesrv, "push", "*", keys)),
        threading.Thread(target=plain_push, args=(namesrv, "push_tagged", TAGGED, tagged_keys)),
        threading.Thread(target=plain_pull, args=(namesrv, tagged_keys)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bounded(part, "producer shutdown", p.shutdown)


def plain_push(namesrv, name, expression, keys):
    part = "plain"
    tracker = Tracker(keys)

    def on_message(msg):
        received(part, name, msg)
        tracker.saw(text(msg.keys))

    group = "CppPlain_" + name
    try:
        c = push_consumer(namesrv, group, PLAIN_TOPIC, expression, on_message)
    except Exception as e:  # noqa: BLE001
        emit_error(part, name + " start", e)
        return
    tracker.wait(part, name, len(keys))
    bounded(part, name + " shutdown", c.shutdown)


def plain_pull(namesrv, keys):
    """The 0.4.4 pull consumer: every queue from offset 0 until NO_NEW_MSG, in rounds. It has
    no instance name setter and so is the only client of the default instance."""
    part, name = "plain", "pull"
    tracker = Tracker(keys)
    try:
        c = PullConsumer("CppPlainPull")
        c.set_namesrv_addr(namesrv)
        c.start()
    except Exception as e:  # noqa: BLE001
        emit_error(part, name + " start", e)
        return
    deadline = time.monotonic() + PART_DEADLINE_S
    rounds = 0
    # A round that finds nothing new after every key is in is the pull's quiet window.
    while time.monotonic() < deadline:
        rounds += 1
        found = 0
        try:
            for msg in c.pull(PLAIN_TOPIC, TAGGED):
                found += 1
                received(part, name, msg)
                tracker.saw(text(msg.keys))
        except Exception as e:  # noqa: BLE001
            emit_error(part, name, e)
            break
        with tracker.lock:
            done = not tracker.missing
        if done and found == 0:
            break
        if found == 0:
            time.sleep(0.2)
    emit(ev="pull_rounds", part=part, rounds=rounds)
    tracker.last = 0
    tracker.wait(part, name, len(keys))
    bounded(part, name + " shutdown", c.shutdown)


def order_part(namesrv):
    """send_orderly (and one send_oneway_orderly order) onto order % queues; an orderly
    push consumer."""
    part = "order"
    try:
        p = producer(namesrv, "CppOrderProducer")
    except Exception as e:  # noqa: BLE001
        emit_error(part, "producer start", e)
        return
    keys = []
    for order in range(ORDERS + 1):
        mode = "oneway_orderly" if order == ONEWAY_ORDER else "orderly"
        for step in range(STEPS):
            key = "order-%02d-%02d" % (order, step)
            body = "order %d step %d" % (order, step)
            keys.append(key)
            chosen = []

            def select(queue_count, _msg, arg, chosen=chosen, key=key):
                # An exception here would be printed by ctypes and select queue 0.
                try:
                    queue = ctypes.cast(arg, ctypes.POINTER(ctypes.c_int))[0] % queue_count
                except Exception as e:  # noqa: BLE001
                    emit(ev="error", part=part, what="select", key=key,
                         queue_count=queue_count, error="%s: %s" % (type(e).__name__, e))
                    return 0
                chosen.append(queue)
                return queue

            msg = message(ORDER_TOPIC, key, "TagOrder", body, order=str(order),
                          step=str(step), sent_by=mode)
            extra = dict(order=order, step=step)
            try:
                if mode == "orderly":
                    result = p.send_orderly(msg, order, queue_selector=select)
                else:
                    result = None
                    p.send_oneway_orderly(msg, order, queue_selector=select)
                extra["queue"] = chosen[-1] if chosen else None
                extra["selections"] = len(chosen)
                emit(**sent_event(part, mode, key, "TagOrder", body, result, **extra))
            except Exception as e:  # noqa: BLE001
                emit(**{**sent_event(part, mode, key, "TagOrder", body, **extra),
                        "ev": "send_error", "error": str(e)})
    tracker = Tracker(keys)

    def on_message(msg):
        received(part, "orderly", msg)
        tracker.saw(text(msg.keys))

    try:
        c = push_consumer(namesrv, "CppOrderly", ORDER_TOPIC, "*", on_message, orderly=True)
    except Exception as e:  # noqa: BLE001
        emit_error(part, "orderly start", e)
        bounded(part, "producer shutdown", p.shutdown)
        return
    tracker.wait(part, "orderly", len(keys))
    bounded(part, "orderly shutdown", c.shutdown)
    bounded(part, "producer shutdown", p.shutdown)


def batch_part(namesrv):
    """send_batch of BATCHES batches; a push consumer of the topic."""
    part, tag = "batch", "TagBatch"
    try:
        p = producer(namesrv, "CppBatchProducer")
    except Exception as e:  # noqa: BLE001
        emit_error(part, "producer start", e)
        return
    for batch in range(BATCHES):
        sent = []
        for i in range(BATCH_SIZE):
            key = "batch-%d-%02d" % (batch, i)
            body = "body of %s" % key
            sent.append((key, body, message(BATCH_TOPIC, key, tag, body, sent_by="batch")))
        try:
            result = p.send_batch([msg for _, _, msg in sent])
            for key, body, _ in sent:
                emit(**sent_event(part, "batch", key, tag, body, result, batch=batch))
        except Exception as e:  # noqa: BLE001
            for key, body, _ in sent:
                emit(**{**sent_event(part, "batch", key, tag, body, batch=batch),
                        "ev": "send_error", "error": str(e)})
    # What arrives is counted, not keyed: a batch stored as one message has no keys.
    tracker = Tracker([], count=BATCHES)

    def on_message(msg):
        received(part, "push", msg)
        tracker.saw(text(msg.keys))

    try:
        c = push_consumer(namesrv, "CppBatchPush", BATCH_TOPIC, "*", on_message)
    except Exception as e:  # noqa: BLE001
        emit_error(part, "push start", e)
        bounded(part, "producer shutdown", p.shutdown)
        return
    tracker.wait(part, "push", BATCHES)
    bounded(part, "push shutdown", c.shutdown)
    bounded(part, "producer shutdown", p.shutdown)


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: client.py NAMESRV_ADDR\n")
        sys.exit(2)
    namesrv = sys.argv[1]

    def overall_deadline():
        emit(ev="timeout", after_s=EXIT_DEADLINE_S)
        os._exit(4)

    timer = threading.Timer(EXIT_DEADLINE_S, overall_deadline)
    timer.daemon = True
    timer.start()
    emit(ev="start", per_mode=PER_MODE, orders=ORDERS, steps=STEPS, batches=BATCHES,
         batch_size=BATCH_SIZE)
    runs = (plain_part, order_part, batch_part)
    parts = [threading.Thread(target=run, args=(namesrv,)) for run in runs]
    for t in parts:
        t.start()
    for t in parts:
        t.join()
    emit(ev="end")
    # librocketmq's threads and the clients' destructors need not run at exit.
    os._exit(0)


if __name__ == "__main__":
    main()
