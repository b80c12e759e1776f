// Command ferromq-go-client drives the Apache Go RocketMQ client (rocketmq-client-go/v2, the
// remoting protocol of RocketMQ 4.x) against a name server given as its one argument, and
// prints what it did and saw as JSON lines on stdout, one event a line. It judges nothing:
// tests/go_client.rs reads the lines and makes every assertion. The client's own log goes to
// stderr.
//
// Three parts run side by side, each with its own topic, groups and client instances:
//
//   - plain: sync, async and oneway sends, each with its own tag and a unique key; a push
//     consumer takes the whole topic, a pull consumer only two of the tags (Poll/ACK, then
//     PullFrom every queue from offset 0).
//   - order: a producer whose QueueSelector puts every step of an order on the queue
//     order%queues, sent in step order; an orderly push consumer.
//   - tx: a TransactionProducer whose local transaction commits one message, rolls one back
//     and leaves one UNKNOW, which CheckLocalTransaction commits when the broker asks; a push
//     consumer.
//
// A consumer stops once it has every key its part sent, after a quiet window that would show
// a duplicate or an unexpected message, or at its part's deadline, whichever comes first. The
// whole program exits by itself before its overall deadline.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"
)

const (
	perMode      = 40               // messages per send mode in the plain part
	orders       = 8                // orders in the order part
	steps        = 10               // steps per order
	partDeadline = 90 * time.Second // a consumer gives up waiting after this
	quietWindow  = 2 * time.Second  // after the last expected message, watch for more
	exitDeadline = 150 * time.Second
)

var (
	outMu sync.Mutex
	out   = json.NewEncoder(os.Stdout)
)

// emit prints one event line.
func emit(fields map[string]interface{}) {
	outMu.Lock()
	defer outMu.Unlock()
	if err := out.Encode(fields); err != nil {
		fmt.Fprintln(os.Stderr, "cannot write an event:", err)
		os.Exit(3)
	}
}

func emitError(part, what string, err error) {
	emit(map[string]interface{}{"ev": "error", "part": part, "what": what, "error": err.Error()})
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ferromq-go-client NAMESRV_ADDR")
		os.Exit(2)
	}
	namesrv := primitive.NamesrvAddr{os.Args[1]}
	rlog.SetLogLevel("warn")
	time.AfterFunc(exitDeadline, func() {
		emit(map[string]interface{}{"ev": "timeout", "after_s": exitDeadline.Seconds()})
		os.Exit(4)
	})
	emit(map[string]interface{}{"ev": "start", "per_mode": perMode, "orders": orders,
		"steps": steps})

	var wg sync.WaitGroup
	for _, part := range []func(primitive.NamesrvAddr){plainPart, orderPart, txPart} {
		wg.Add(1)
		go func(run func(primitive.NamesrvAddr)) {
			defer wg.Done()
			run(namesrv)
		}(part)
	}
	wg.Wait()
	emit(map[string]interface{}{"ev": "end"})
	os.Exit(0)
}

// received is one message a consumer got, as an event.
func received(part, consumerName string, m *primitive.MessageExt) map[string]interface{} {
	return map[string]interface{}{
		"ev": "recv", "part": part, "consumer": consumerName,
		"key": m.GetKeys(), "tag": m.GetTags(), "body": string(m.Body), "topic": m.Topic,
		"queue": m.Queue.QueueId, "offset": m.QueueOffset, "msg_id": m.MsgId,
		"reconsume": m.ReconsumeTimes,
	}
}

// tracker counts what a consumer got against the keys it waits for.
type tracker struct {
	mu       sync.Mutex
	expected map[string]bool
	missing  int
	last     time.Time
	complete chan struct{}
}

func newTracker(keys []string) *tracker {
	t := &tracker{expected: map[string]bool{}, complete: make(chan struct{})}
	for _, k := range keys {
		if !t.expected[k] {
			t.expected[k] = true
			t.missing++
		}
	}
	if t.missing == 0 {
		close(t.complete)
	}
	return t
}

// saw notes key; the first time every expected key has been seen closes complete.
func (t *tracker) saw(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.last = time.Now()
	if t.expected[key] {
		t.expected[key] = false
		t.missing--
		if t.missing == 0 {
			close(t.complete)
		}
	}
}

// wait returns once every expected key arrived and then nothing arrived for quietWindow
// (true), or at deadline (false).
func (t *tracker) wait(deadline time.Time) bool {
	select {
	case <-t.complete:
	case <-time.After(time.Until(deadline)):
		return false
	}
	for {
		t.mu.Lock()
		quietUntil := t.last.Add(quietWindow)
		t.mu.Unlock()
		now := time.Now()
		if !now.Before(quietUntil) {
			return true
		}
		if !now.Before(deadline) {
			return true
		}
		time.Sleep(minDuration(quietUntil.Sub(now), deadline.Sub(now)))
	}
}

func minDuration(a, b time.Duration) time.Duration {
	if a < b {
		return a
	}
	return b
}

// done reports how a consumer's wait ended.
func done(part, consumerName string, complete bool, started time.Time) {
	emit(map[string]interface{}{"ev": "consumer_done", "part": part, "consumer": consumerName,
		"complete": complete, "waited_ms": time.Since(started).Milliseconds()})
}

// shutdown stops a client, bounded: a Shutdown that hangs is reported, not waited for.
func shutdown(part, what string, stop func() error) {
	result := make(chan error, 1)
	go func() { result <- stop() }()
	select {
	case err := <-result:
		if err != nil {
			emitError(part, what+" shutdown", err)
		}
	case <-time.After(15 * time.Second):
		emitError(part, what+" shutdown", fmt.Errorf("did not return in 15 s"))
	}
}

// plainPart: sync, async and oneway sends with tags and keys; a push consumer of everything
// and a pull consumer of two tags.
func plainPart(namesrv primitive.NamesrvAddr) {
	const part, topic = "plain", "GoPlain"
	p, err := rocketmq.NewProducer(
		producer.WithNameServer(namesrv),
		producer.WithGroupName("GoPlainProducer"),
		producer.WithInstanceName("plain-producer"),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second),
	)
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		emitError(part, "producer start", err)
		return
	}
	var keys []string
	var asyncWg sync.WaitGroup
	var queuesMu sync.Mutex
	queues := map[int]*primitive.MessageQueue{} // as the sends report them
	noteQueue := func(r *primitive.SendResult) {
		if r != nil && r.MessageQueue != nil {
			queuesMu.Lock()
			queues[r.MessageQueue.QueueId] = r.MessageQueue
			queuesMu.Unlock()
		}
	}
	for _, mode := range []string{"sync", "async", "oneway"} {
		tag := "Tag" + strings.ToUpper(mode[:1]) + mode[1:]
		for i := 0; i < perMode; i++ {
			key := fmt.Sprintf("plain-%s-%03d", mode, i)
			body := fmt.Sprintf("body of %s", key)
			msg := primitive.NewMessage(topic, []byte(body)).WithTag(tag).WithKeys([]string{key})
			sent := map[string]interface{}{"ev": "sent", "part": part, "mode": mode,
				"key": key, "tag": tag, "body": body}
			keys = append(keys, key)
			switch mode {
			case "sync":
				r, err := p.SendSync(context.Background(), msg)
				noteQueue(r)
				reportSend(sent, r, err)
			case "async":
				asyncWg.Add(1)
				err := p.SendAsync(context.Background(),
					func(_ context.Context, r *primitive.SendResult, err error) {
						defer asyncWg.Done()
						noteQueue(r)
						reportSend(sent, r, err)
					}, msg)
				if err != nil {
					asyncWg.Done()
					reportSend(sent, nil, err)
				}
			case "oneway":
				err := p.SendOneWay(context.Background(), msg)
				reportSend(sent, nil, err)
			}
		}
	}
	asyncWg.Wait()

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		plainPush(namesrv, topic, keys)
	}()
	go func() {
		defer wg.Done()
		var pullKeys []string
		for _, k := range keys {
			if !strings.HasPrefix(k, "plain-async-") {
				pullKeys = append(pullKeys, k)
			}
		}
		plainPull(namesrv, topic, pullKeys, queues)
	}()
	wg.Wait()
	shutdown(part, "producer", p.Shutdown)
}

// reportSend prints a send's outcome: its result, or its error.
func reportSend(sent map[string]interface{}, r *primitive.SendResult, err error) {
	if err != nil {
		sent["ev"] = "send_error"
		sent["error"] = err.Error()
	} else if r != nil {
		sent["status"] = int(r.Status)
		sent["msg_id"] = r.MsgID
		sent["queue"] = r.MessageQueue.QueueId
		sent["offset"] = r.QueueOffset
	}
	emit(sent)
}

func plainPush(namesrv primitive.NamesrvAddr, topic string, keys []string) {
	const part, name = "plain", "push"
	t := newTracker(keys)
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNameServer(namesrv),
		consumer.WithGroupName("GoPlainPush"),
		consumer.WithInstance("plain-push"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err == nil {
		err = c.Subscribe(topic, consumer.MessageSelector{},
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for _, m := range msgs {
					emit(received(part, name, m))
					t.saw(m.GetKeys())
				}
				return consumer.ConsumeSuccess, nil
			})
	}
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		emitError(part, "push consumer start", err)
		return
	}
	started := time.Now()
	done(part, name, t.wait(started.Add(partDeadline)), started)
	shutdown(part, "push consumer", c.Shutdown)
}

// plainPull takes the topic with the pull consumer of this client version, subscribed to two
// of the three tags: Start, then Poll and ACK until it has every key; then PullFrom each
// queue from offset 0 to the queue's max offset, which reads the same messages again.
func plainPull(namesrv primitive.NamesrvAddr, topic string, keys []string,
	queues map[int]*primitive.MessageQueue) {
	const part, name = "plain", "pull"
	t := newTracker(keys)
	c, err := rocketmq.NewPullConsumer(
		consumer.WithNameServer(namesrv),
		consumer.WithGroupName("GoPlainPull"),
		consumer.WithInstance("plain-pull"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err == nil {
		err = c.Subscribe(topic, consumer.MessageSelector{
			Type: consumer.TAG, Expression: "TagSync || TagOneway"})
	}
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		emitError(part, "pull consumer start", err)
		return
	}
	started := time.Now()
	stop := make(chan struct{})
	polled := make(chan struct{})
	go func() {
		defer close(polled)
		for {
			select {
			case <-stop:
				return
			default:
			}
			cr, err := c.Poll(context.Background(), 500*time.Millisecond)
			if consumer.IsNoNewMsgError(err) {
				continue
			}
			if err != nil {
				emitError(part, "poll", err)
				time.Sleep(200 * time.Millisecond)
				continue
			}
			for _, m := range cr.GetMsgList() {
				emit(received(part, name, m))
				t.saw(m.GetKeys())
			}
			c.ACK(context.Background(), cr, consumer.ConsumeSuccess)
		}
	}()
	complete := t.wait(started.Add(partDeadline))
	close(stop)
	<-polled
	done(part, name, complete, started)

	started = time.Now()
	from := newTracker(keys)
	for _, mq := range queues {
		pullFrom(c, mq, from, started.Add(partDeadline))
	}
	done(part, "pull_from", from.wait(started.Add(partDeadline)), started)
	shutdown(part, "pull consumer", c.Shutdown)
}

// pullFrom reads mq from offset 0 with PullFrom, 16 at a time, until the next offset reaches
// the max offset the broker reports. It asks no more once it is there: this client version
// would have the broker hold the pull (suspend) for longer than the client's request timeout.
func pullFrom(c rocketmq.PullConsumer, mq *primitive.MessageQueue, t *tracker,
	deadline time.Time) {
	const part, name = "plain", "pull_from"
	offset := int64(0)
	for round := 0; round < 100 && time.Now().Before(deadline); round++ {
		r, err := c.PullFrom(context.Background(), mq, offset, 16)
		if err != nil {
			emitError(part, fmt.Sprintf("pull from queue %d offset %d", mq.QueueId, offset), err)
			return
		}
		for _, m := range r.GetMessageExts() {
			emit(received(part, name, m))
			t.saw(m.GetKeys())
		}
		emit(map[string]interface{}{"ev": "pull_result", "part": part, "queue": mq.QueueId,
			"offset": offset, "status": int(r.Status), "next": r.NextBeginOffset,
			"max": r.MaxOffset, "messages": len(r.GetMessageExts())})
		if r.NextBeginOffset <= offset || r.NextBeginOffset >= r.MaxOffset {
			return
		}
		offset = r.NextBeginOffset
	}
}

// orderSelector puts an order's messages on queue order%len(queues): the order id is the
// message's ORDER property.
type orderSelector struct{}

func (orderSelector) Select(m *primitive.Message, mqs []*primitive.MessageQueue,
	_ string) *primitive.MessageQueue {
	var order int
	fmt.Sscan(m.GetProperty("ORDER"), &order)
	return mqs[order%len(mqs)]
}

// orderPart: every step of an order sent, in step order, to its order's queue; an orderly
// push consumer reports each message with its queue and offset, in consumption order.
func orderPart(namesrv primitive.NamesrvAddr) {
	const part, topic, name = "order", "GoOrder", "orderly"
	p, err := rocketmq.NewProducer(
		producer.WithNameServer(namesrv),
		producer.WithGroupName("GoOrderProducer"),
		producer.WithInstanceName("order-producer"),
		producer.WithQueueSelector(orderSelector{}),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second),
	)
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		emitError(part, "producer start", err)
		return
	}
	var keys []string
	for step := 0; step < steps; step++ {
		for order := 0; order < orders; order++ {
			key := fmt.Sprintf("order-%d-step-%02d", order, step)
			body := fmt.Sprintf("order %d step %d", order, step)
			msg := primitive.NewMessage(topic, []byte(body)).WithTag("TagOrder").
				WithKeys([]string{key})
			msg.WithProperty("ORDER", fmt.Sprint(order))
			msg.WithProperty("STEP", fmt.Sprint(step))
			keys = append(keys, key)
			r, err := p.SendSync(context.Background(), msg)
			reportSend(map[string]interface{}{"ev": "sent", "part": part, "mode": "sync",
				"key": key, "tag": "TagOrder", "body": body, "order": order, "step": step}, r, err)
		}
	}

	t := newTracker(keys)
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNameServer(namesrv),
		consumer.WithGroupName("GoOrderConsumer"),
		consumer.WithInstance("order-consumer"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithConsumerOrder(true),
	)
	if err == nil {
		err = c.Subscribe(topic, consumer.MessageSelector{},
			func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				orderly, _ := primitive.GetOrderlyCtx(ctx)
				for _, m := range msgs {
					ev := received(part, name, m)
					ev["order"] = m.GetProperty("ORDER")
					ev["step"] = m.GetProperty("STEP")
					ev["orderly_ctx"] = orderly != nil
					emit(ev)
					t.saw(m.GetKeys())
				}
				return consumer.ConsumeSuccess, nil
			})
	}
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		emitError(part, "orderly consumer start", err)
		shutdown(part, "producer", p.Shutdown)
		return
	}
	started := time.Now()
	done(part, name, t.wait(started.Add(partDeadline)), started)
	shutdown(part, "orderly consumer", c.Shutdown)
	shutdown(part, "producer", p.Shutdown)
}

// txListener decides each transaction by its key: commit, rollback, or UNKNOW until the
// broker checks back, then commit.
type txListener struct{}

func (txListener) ExecuteLocalTransaction(m *primitive.Message) primitive.LocalTransactionState {
	key := m.GetKeys()
	state := primitive.UnknowState
	switch key {
	case "tx-commit":
		state = primitive.CommitMessageState
	case "tx-rollback":
		state = primitive.RollbackMessageState
	}
	emit(map[string]interface{}{"ev": "tx_local", "part": "tx", "key": key,
		"state": stateName(state)})
	return state
}

func (txListener) CheckLocalTransaction(m *primitive.MessageExt) primitive.LocalTransactionState {
	key := m.GetKeys()
	state := primitive.RollbackMessageState
	if key == "tx-unknown" {
		state = primitive.CommitMessageState
	}
	emit(map[string]interface{}{"ev": "tx_check", "part": "tx", "key": key,
		"msg_id": m.MsgId, "answer": stateName(state)})
	return state
}

func stateName(s primitive.LocalTransactionState) string {
	switch s {
	case primitive.CommitMessageState:
		return "commit"
	case primitive.RollbackMessageState:
		return "rollback"
	default:
		return "unknown"
	}
}

// txPart: three transactional messages; the committed and the checked-then-committed ones
// are waited for, and the rolled-back one is watched for during the quiet window.
func txPart(namesrv primitive.NamesrvAddr) {
	const part, topic, name = "tx", "GoTx", "push"
	p, err := rocketmq.NewTransactionProducer(txListener{},
		producer.WithNameServer(namesrv),
		producer.WithGroupName("GoTxProducer"),
		producer.WithInstanceName("tx-producer"),
		producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second),
	)
	if err == nil {
		err = p.Start()
	}
	if err != nil {
		emitError(part, "transaction producer start", err)
		return
	}
	var keys []string
	for _, key := range []string{"tx-commit", "tx-rollback", "tx-unknown"} {
		body := "body of " + key
		msg := primitive.NewMessage(topic, []byte(body)).WithTag("TagTx").
			WithKeys([]string{key})
		r, err := p.SendMessageInTransaction(context.Background(), msg)
		sent := map[string]interface{}{"ev": "sent", "part": part, "mode": "transaction",
			"key": key, "tag": "TagTx", "body": body}
		if err != nil {
			sent["ev"] = "send_error"
			sent["error"] = err.Error()
		} else {
			sent["status"] = int(r.Status)
			sent["msg_id"] = r.MsgID
			sent["queue"] = r.MessageQueue.QueueId
			sent["local_state"] = stateName(r.State)
		}
		emit(sent)
		if key != "tx-rollback" {
			keys = append(keys, key)
		}
	}

	t := newTracker(keys)
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNameServer(namesrv),
		consumer.WithGroupName("GoTxConsumer"),
		consumer.WithInstance("tx-consumer"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	)
	if err == nil {
		err = c.Subscribe(topic, consumer.MessageSelector{},
			func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
				for _, m := range msgs {
					emit(received(part, name, m))
					t.saw(m.GetKeys())
				}
				return consumer.ConsumeSuccess, nil
			})
	}
	if err == nil {
		err = c.Start()
	}
	if err != nil {
		emitError(part, "push consumer start", err)
		shutdown(part, "transaction producer", p.Shutdown)
		return
	}
	started := time.Now()
	done(part, name, t.wait(started.Add(partDeadline)), started)
	shutdown(part, "push consumer", c.Shutdown)
	shutdown(part, "transaction producer", p.Shutdown)
}
