package queue_test

import (
	"context"
	"log"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
)

// On a Redis Cluster (or behind Sentinel, with redis.NewFailoverClient), the
// client that enqueues rides out a failover within its context's deadline.
func ExampleFollowFailover() {
	rdb := queue.FollowFailover(redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"},
		ContextTimeoutEnabled: true,
	}))
	defer rdb.Close()
	qc := queue.NewClient(asynq.NewClientFromRedisClient(rdb)) // shares rdb

	// While a master fails over, the enqueue waits for its replica, up to 10 s.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	task := queue.Task{Type: "email:send", Payload: []byte(`{"to":"a@example.com"}`), Key: "tenant-42"}
	if _, err := qc.Enqueue(ctx, task, asynq.Queue("mail")); err != nil {
		log.Print(err)
	}
}
