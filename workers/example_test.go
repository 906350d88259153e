package workers_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"os/signal"
	"syscall"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

// A pool that sends emails at most 50 a second per tenant and 200 a second in
// all, and honours the email provider's 429s across the fleet.
func ExamplePool() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	lim := throttle.NewLimiter(throttle.NewRedisStore(rdb))

	pool, err := workers.NewPool(workers.Config{
		Redis:   asynq.RedisClientOpt{Addr: "localhost:6379"},
		Limiter: lim,
		Queues:  map[string]int{"email": 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	perTenant, err := workers.KeyTemplate("tenant:{payload.tenant}")
	if err != nil {
		log.Fatal(err)
	}
	global := throttle.Limit{Rate: 200, Burst: 20}
	pool.HandleFunc("email:send", func(ctx context.Context, t *asynq.Task) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://mail.example.com/send", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		// A 429 or 503 cools the tenant's bucket down on every host, and the job
		// comes back after it; it is not a failure.
		if err := workers.FromResponse(resp, time.Now()); err != nil {
			return err
		}
		return nil
	}, &workers.Policy{
		Name:   "email",
		Limit:  throttle.Limit{Rate: 50, Burst: 5},
		Key:    perTenant,
		Global: &global,
	})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := pool.Run(ctx); err != nil {
		log.Fatal(err)
	}
}

func ExampleKeyTemplate() {
	key, err := workers.KeyTemplate("tenant:{payload.tenant}")
	if err != nil {
		log.Fatal(err)
	}
	k, err := key(asynq.NewTask("email:send", []byte(`{"tenant": "acme", "to": "a@example.com"}`)))
	fmt.Println(k, err)

	_, err = key(asynq.NewTask("email:send", []byte(`{"to": "a@example.com"}`)))
	fmt.Println(err)

	_, err = workers.KeyTemplate("tenant:{payload.tenant")
	fmt.Println(err)
	// Output:
	// tenant:acme <nil>
	// key template "tenant:{payload.tenant}": payload field "tenant" is missing or empty
	// workers: key template "tenant:{payload.tenant": unclosed '{' at byte 7
}

// An LLM API limits requests and tokens per minute: each job takes one
// request and the tokens its payload asks for, from both buckets at once.
func ExampleNamedLimit() {
	tokens, err := workers.CostTemplate("{payload.max_tokens}")
	if err != nil {
		log.Fatal(err)
	}
	pol := workers.Policy{Name: "llm", Limits: []workers.NamedLimit{
		{Name: "requests", Limit: throttle.Limit{Rate: 3000, Period: time.Minute, Burst: 50}},
		{Name: "tokens", Limit: throttle.Limit{Rate: 90000, Period: time.Minute, Burst: 20000}, CostFrom: tokens},
	}}
	n, err := tokens(asynq.NewTask("llm", []byte(`{"prompt": "...", "max_tokens": 512}`)))
	fmt.Println(n, err)
	_, err = tokens(asynq.NewTask("llm", []byte(`{"prompt": "..."}`)))
	fmt.Println(err)
	fmt.Println(workers.BucketKey(pol, "llm", "tokens"))
	// Output:
	// 512 <nil>
	// cost template "{payload.max_tokens}": payload field "max_tokens" is missing
	// {llm}{tokens}:llm
}

// The tokens an LLM call books are its max_tokens; its answer says what it
// used. A handler hands the answer to the pool with ObserveUsage, and the
// pool settles the job's turn in the tokens bucket at what SettleFrom reads.
func ExampleSettleTemplate() {
	used, err := workers.SettleTemplate("{answer.usage.total_tokens}")
	if err != nil {
		log.Fatal(err)
	}
	_ = workers.NamedLimit{Name: "tokens", Limit: throttle.Limit{Rate: 90000, Period: time.Minute, Burst: 20000},
		CostFrom: must(workers.CostTemplate("{payload.max_tokens}")), SettleFrom: used}
	fmt.Println(used(nil, []byte(`{"id": "msg_1", "usage": {"prompt_tokens": 40, "completion_tokens": 140, "total_tokens": 180}}`)))
	fmt.Println(used(nil, []byte(`{"id": "msg_1"}`)))

	// In the pool's handler, after the call:
	//	workers.ObserveUsage(ctx, resp.Header, body)
	// Output:
	// 180 <nil>
	// 0 settle template "{answer.usage.total_tokens}": answer field "usage" is missing
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}
