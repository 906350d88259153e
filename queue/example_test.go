package queue_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/hibiken/asynq"

	"github.com/sluicehq/sluice/queue"
)

// A worker reads the throttle metadata that Client.Enqueue put in the task's
// headers.
func ExampleMetaOf() {
	task := asynq.NewTaskWithHeaders("email:send", []byte(`{"to":"a@example.com"}`), map[string]string{
		queue.HeaderKey:        "tenant-42",
		queue.HeaderCost:       "3",
		queue.HeaderEnqueuedAt: "1772366400000000",
		queue.HeaderRequeues:   "2",
	})
	m, err := queue.MetaOf(task)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Key, m.Cost, m.Requeues)
	fmt.Println(m.EnqueuedAt.UTC().Format(time.RFC3339))

	_, err = queue.MetaOf(asynq.NewTaskWithHeaders("email:send", nil, map[string]string{queue.HeaderCost: "lots"}))
	fmt.Println(errors.Is(err, queue.ErrBadHeader))
	// Output:
	// tenant-42 3 2
	// 2026-03-01T12:00:00Z
	// true
}

// The retry adapters give a throttled error its own delay and keep it from
// counting as a failure; other errors keep asynq's defaults.
func ExampleRetryDelayFunc() {
	delay := queue.RetryDelayFunc(nil)
	err := fmt.Errorf("charge card: %w", queue.Throttled(2500*time.Millisecond, "stripe answered 429"))

	fmt.Println(err)
	fmt.Println(delay(0, err, nil), queue.IsFailure(err))
	fmt.Println(delay(0, queue.Throttled(100*time.Millisecond, ""), nil))
	fmt.Println(queue.IsFailure(errors.New("card declined")))
	// Output:
	// charge card: queue: throttled: stripe answered 429: come back in 2.5s
	// 2.5s false
	// 1s
	// true
}

func ExampleClient_Enqueue() {
	c := queue.NewClient(asynq.NewClient(asynq.RedisClientOpt{Addr: "localhost:6379"}))
	info, err := c.Enqueue(context.Background(),
		queue.Task{Type: "email:send", Payload: []byte(`{"to":"a@example.com"}`), Key: "tenant-42"},
		asynq.Queue("email"), asynq.MaxRetry(5), asynq.Timeout(time.Minute))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("enqueued", info.ID)
}

// A handler (in sluice, the worker middleware) sends a job that must wait back
// to its queue instead of returning a throttled error, which asynq would
// archive when the job has no retries left.
func ExampleClient_Requeue() {
	c := queue.NewClient(asynq.NewClient(asynq.RedisClientOpt{Addr: "localhost:6379"}))
	handler := func(ctx context.Context, t *asynq.Task) error {
		wait := 30 * time.Second // say, the bucket's RetryAfter
		if _, err := c.Requeue(ctx, t, wait, time.Time{}); err != nil {
			return err // a real failure: asynq retries the original
		}
		return nil // the copy carries on; asynq drops the original
	}
	srv := asynq.NewServer(asynq.RedisClientOpt{Addr: "localhost:6379"}, asynq.Config{
		Queues:                   map[string]int{"email": 1},
		DelayedTaskCheckInterval: time.Second,
		RetryDelayFunc:           queue.RetryDelayFunc(nil),
		IsFailure:                queue.IsFailure,
	})
	if err := srv.Run(asynq.HandlerFunc(handler)); err != nil {
		log.Fatal(err)
	}
}

// A queue is a family of asynq queues, a member per priority and lane: a
// task with neither goes to the queue itself, as before priorities.
func ExampleMember() {
	fmt.Println(queue.Member("email", 0, 0))
	fmt.Println(queue.Member("email", queue.HighestPriority, 0))
	fmt.Println(queue.Member("email", queue.DefaultPriority, 2))
	base, p, lane, ok := queue.ParseMember("email:p5:l1")
	fmt.Println(base, p, lane, ok)
	fmt.Println(len(queue.Family("email")))
	// Output:
	// email
	// email:p1
	// email:p3:l2
	// email 5 1 true
	// 20
}
