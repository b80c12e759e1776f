// The RocketMQ 5.x Go client (github.com/apache/rocketmq-clients/golang/v5, unchanged)
// against a gRPC endpoint: `ferromq-go5-client ENDPOINT TOPIC GROUP` (host:port, plain text).
// The story of tests/node5/round_trip.js, told by tests/grpc_go.rs:
//
// A simple consumer of GROUP receives once (so the group exists before anything is sent),
// then a producer sends normal messages (tag "normal"), FIFO messages of one message group
// (tag "fifo"), one delay message (tag "delay", delivery timestamp 3 s ahead) and two
// transactional ones (tag "tx"): "tx-commit" committed, "tx-rollback" rolled back (the
// producer has a checker, which reports any check it gets: none is expected). The consumer
// receives until every key but "tx-rollback" is acked or 90 s went by: it
// acks each message, except "normal-0" on its first delivery, whose invisible duration it
// changes to 2 s so that it comes back (delivery attempt 2) and is acked then. The program
// only reports, one JSON object per line (`ev`: sent, recv, changed, acked, checked, error,
// consumer_done, end); the Rust test accounts for every message by key and message id.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	rmq "github.com/apache/rocketmq-clients/golang/v5"
	"github.com/apache/rocketmq-clients/golang/v5/credentials"
)

const (
	normalCount = 8
	fifoCount   = 5
	delay       = 3 * time.Second
	deadline    = 90 * time.Second
	invisible   = 20 * time.Second
)

func emit(event map[string]any) {
	line, _ := json.Marshal(event)
	fmt.Println(string(line))
}

func fail(what string, err error) {
	emit(map[string]any{"ev": "error", "what": what, "error": err.Error()})
	os.Exit(1)
}

func main() {
	endpoint, topic, group := os.Args[1], os.Args[2], os.Args[3]
	rmq.EnableSsl = false
	config := func(group string) *rmq.Config {
		return &rmq.Config{
			Endpoint:      endpoint,
			ConsumerGroup: group,
			Credentials:   &credentials.SessionCredentials{},
		}
	}
	consumer, err := rmq.NewSimpleConsumer(config(group),
		rmq.WithSimpleAwaitDuration(3*time.Second),
		rmq.WithSimpleSubscriptionExpressions(map[string]*rmq.FilterExpression{
			topic: rmq.SUB_ALL,
		}),
	)
	if err != nil {
		fail("new simple consumer", err)
	}
	if err := consumer.Start(); err != nil {
		fail("start simple consumer", err)
	}
	// The first receive finds nothing (the group starts at the queues' ends) and may say so
	// with an error; it only makes the group known.
	_, _ = consumer.Receive(context.Background(), 16, invisible)

	checker := &rmq.TransactionChecker{
		Check: func(view *rmq.MessageView) rmq.TransactionResolution {
			emit(map[string]any{"ev": "checked", "key": strings.Join(view.GetKeys(), ","),
				"msg_id": view.GetMessageId()})
			return rmq.COMMIT
		},
	}
	producer, err := rmq.NewProducer(config(""), rmq.WithTopics(topic),
		rmq.WithTransactionChecker(checker))
	if err != nil {
		fail("new producer", err)
	}
	if err := producer.Start(); err != nil {
		fail("start producer", err)
	}
	wanted := map[string]bool{}
	send := func(part string, seq any, shape func(*rmq.Message) map[string]any,
		end func(rmq.Transaction) error) {
		key := fmt.Sprintf("%s-%v", part, seq)
		body := "body-" + key
		message := &rmq.Message{Topic: topic, Body: []byte(body)}
		message.SetTag(part)
		message.SetKeys(key)
		event := shape(message)
		var receipts []*rmq.SendReceipt
		if end == nil {
			receipts, err = producer.Send(context.Background(), message)
		} else {
			transaction := producer.BeginTransaction()
			receipts, err = producer.SendWithTransaction(context.Background(), message,
				transaction)
			if err == nil {
				err = end(transaction)
			}
		}
		if err != nil || len(receipts) != 1 {
			emit(map[string]any{"ev": "send_error", "part": part, "key": key,
				"error": fmt.Sprint(err)})
			return
		}
		event["ev"], event["part"], event["key"], event["tag"] = "sent", part, key, part
		event["body"], event["msg_id"], event["seq"] = body, receipts[0].MessageID, seq
		emit(event)
		if key != "tx-rollback" {
			wanted[key] = true
		}
	}
	plain := func(*rmq.Message) map[string]any { return map[string]any{} }
	for i := 0; i < normalCount; i++ {
		send("normal", i, plain, nil)
	}
	for i := 0; i < fifoCount; i++ {
		send("fifo", i, func(m *rmq.Message) map[string]any {
			m.SetMessageGroup("fifo-group")
			return map[string]any{}
		}, nil)
	}
	send("delay", 0, func(m *rmq.Message) map[string]any {
		at := time.Now().Add(delay)
		m.SetDelayTimestamp(at)
		return map[string]any{"deliver_at_ms": at.UnixMilli()}
	}, nil)
	send("tx", "commit", plain, rmq.Transaction.Commit)
	send("tx", "rollback", plain, rmq.Transaction.RollBack)

	acked := map[string]bool{}
	end := time.Now().Add(deadline)
	for len(acked) < len(wanted) && time.Now().Before(end) {
		views, err := consumer.Receive(context.Background(), 16, invisible)
		if err != nil {
			// No message in the await duration is an error to this client.
			if !strings.Contains(err.Error(), "MESSAGE_NOT_FOUND") {
				emit(map[string]any{"ev": "receive_error", "error": err.Error()})
				time.Sleep(200 * time.Millisecond)
			}
			continue
		}
		for _, view := range views {
			key := strings.Join(view.GetKeys(), ",")
			attempt := view.GetDeliveryAttempt()
			var messageGroup any
			if g := view.GetMessageGroup(); g != nil {
				messageGroup = *g
			}
			tag := ""
			if t := view.GetTag(); t != nil {
				tag = *t
			}
			emit(map[string]any{"ev": "recv", "part": tag, "consumer": "simple", "key": key,
				"tag": tag, "body": string(view.GetBody()), "msg_id": view.GetMessageId(),
				"group": messageGroup, "attempt": attempt, "at_ms": time.Now().UnixMilli()})
			if key == "normal-0" && attempt == 1 {
				if err := consumer.ChangeInvisibleDuration(view, 2*time.Second); err != nil {
					emit(map[string]any{"ev": "error", "what": "change " + key,
						"error": err.Error()})
				} else {
					emit(map[string]any{"ev": "changed", "key": key,
						"msg_id": view.GetMessageId()})
				}
				continue
			}
			if err := consumer.Ack(context.Background(), view); err != nil {
				emit(map[string]any{"ev": "error", "what": "ack " + key, "error": err.Error()})
				continue
			}
			acked[key] = true
			emit(map[string]any{"ev": "acked", "key": key, "msg_id": view.GetMessageId()})
		}
	}
	emit(map[string]any{"ev": "consumer_done", "complete": len(acked) == len(wanted)})
	// Open until now: a check of a transaction would go to this producer.
	_ = producer.GracefulStop()
	_ = consumer.GracefulStop()
	emit(map[string]any{"ev": "end"})
	os.Exit(0)
}
