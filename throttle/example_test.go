package throttle_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

func ExampleLimiter_Acquire() {
	// A memory store for the example; a fleet shares throttle.NewRedisStore(rdb).
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	limit := throttle.Limit{Rate: 100, Period: time.Second, Burst: 2}
	ctx := context.Background()

	start := time.Now()
	for range 4 {
		if err := lim.Acquire(ctx, "api", limit, 1); err != nil {
			fmt.Println("error:", err)
			return
		}
	}
	// Two tokens at once, then one every 10 ms: the last call slept ~20 ms.
	fmt.Println(time.Since(start) >= 19*time.Millisecond)
	// Output: true
}

func ExampleLimiter_TryAcquire() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	limit := throttle.Limit{Rate: 1, Period: time.Minute, Burst: 1}
	ctx := context.Background()

	res, _ := lim.TryAcquire(ctx, "report", limit, 1)
	fmt.Println(res.Allowed, res.Remaining)
	res, _ = lim.TryAcquire(ctx, "report", limit, 1)
	fmt.Println(res.Allowed, res.RetryAfter.Round(time.Second))
	// Output:
	// true 0
	// false 1m0s
}

func ExampleLimiter_Acquire_deadline() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	limit := throttle.Limit{Rate: 1, Period: time.Hour, Burst: 1}
	_ = lim.Acquire(context.Background(), "nightly", limit, 1)

	// The next token is an hour away: with a 5 s deadline, Acquire fails at once.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := lim.Acquire(ctx, "nightly", limit, 1)
	var le *throttle.LimitedError
	if errors.As(err, &le) {
		fmt.Println("limited, retry after", le.RetryAfter.Round(time.Minute))
	}
	// Output: limited, retry after 1h0m0s
}

func ExampleLimiter_AcquireAll() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	// A tenant's own limit and a global one, taken together. The shared hash tag
	// {email} keeps both keys in one Redis Cluster slot.
	buckets := []throttle.Bucket{
		{Key: "{email}:tenant:42", Limit: throttle.Limit{Rate: 10, Burst: 1}},
		{Key: "{email}:global", Limit: throttle.Limit{Rate: 1000, Burst: 100}},
	}
	err := lim.AcquireAll(context.Background(), buckets)
	fmt.Println(err)

	// Keys without a shared tag are refused before any I/O.
	err = lim.AcquireAll(context.Background(), []throttle.Bucket{
		{Key: "tenant:42", Limit: throttle.Limit{Rate: 10, Burst: 1}},
		{Key: "global", Limit: throttle.Limit{Rate: 1000, Burst: 100}},
	})
	fmt.Println(errors.Is(err, throttle.ErrCrossSlot))
	// Output:
	// <nil>
	// true
}

func ExampleLimiter_Reserve() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	limit := throttle.Limit{Rate: 1, Period: time.Second, Burst: 1}
	ctx := context.Background()
	_ = lim.Acquire(ctx, "export", limit, 1)

	// Book the next token; decide later whether to wait for it.
	r, err := lim.Reserve(ctx, "export", limit, 1, 10*time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(r.Delay() > 900*time.Millisecond)
	_ = r.Cancel(ctx) // not needed after all: the token goes back
	res, _ := lim.TryAcquire(ctx, "export", limit, 1)
	fmt.Println(res.RetryAfter <= time.Second)
	// Output:
	// true
	// true
}

// An LLM call is limited in requests and in tokens; it books its
// max_tokens and settles the token bucket at what the answer says it used.
func ExampleReservation_Settle() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	requests := throttle.Limit{Rate: 3000, Period: time.Minute, Burst: 50}
	tokens := throttle.Limit{Rate: 1_000_000, Period: 24 * time.Hour, Burst: 8000}
	ctx := context.Background()

	r, err := lim.ReserveAll(ctx, []throttle.Bucket{
		{Key: "{llm}:requests", Limit: requests, N: 1},
		{Key: "{llm}:tokens", Limit: tokens, N: 4000}, // max_tokens
	}, time.Second)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = r.Wait(ctx)
	// ... the call; its answer says usage.output_tokens: 700
	_ = r.Settle(ctx, "{llm}:tokens", 700) // 3300 back for the next calls

	s, _ := lim.Peek(ctx, "{llm}:tokens", tokens)
	fmt.Println(s.Remaining)
	// Output:
	// 7300
}

func ExampleLimiter_Cooldown() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	limit := throttle.Limit{Rate: 50, Burst: 5}
	ctx := context.Background()

	// An upstream answered 429 with Retry-After: 30. Every caller of this bucket,
	// on every host, waits; then they resume one token at a time.
	next, _ := lim.Cooldown(ctx, "crm", limit, 30*time.Second)
	fmt.Println(next)
	res, _ := lim.TryAcquire(ctx, "crm", limit, 1)
	fmt.Println(res.Allowed)
	// Output:
	// 30s
	// false
}

func ExampleLimiter_Hold() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	// At most two exports at once, across every process sharing the store. A
	// holder that dies gives its slot back when its lease runs out.
	exports := throttle.Concurrency{Max: 2, Lease: 10 * time.Second}
	ctx := context.Background()

	a, _ := lim.Hold(ctx, "exports", exports)
	b, _ := lim.Hold(ctx, "exports", exports)
	_, err := lim.TryHold(ctx, "exports", exports)
	fmt.Println("third slot:", errors.Is(err, throttle.ErrLimited))

	done := make(chan struct{})
	go func() {
		defer close(done)
		lease, err := lim.Hold(ctx, "exports", exports) // waits for a slot
		if err != nil {
			fmt.Println(err)
			return
		}
		defer lease.Release(ctx)
		// Work while the lease is held; stop if it is lost.
		select {
		case <-lease.Lost():
			fmt.Println("lost the slot")
		default:
			fmt.Println("third export running")
		}
	}()
	_ = a.Release(ctx) // wakes the waiting Hold

	<-done
	_ = b.Release(ctx)
	// Output:
	// third slot: true
	// third export running
}

func ExampleFixedWindow() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	// At most 3 reports per calendar hour.
	hourly := throttle.FixedWindow{Max: 3, Window: time.Hour}
	ctx := context.Background()
	for range 4 {
		res, err := lim.TryAcquire(ctx, "report", hourly, 1)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		// RetryAfter: until the next hour starts.
		fmt.Println(res.Allowed, res.Remaining, res.RetryAfter <= time.Hour)
	}
	// Output:
	// true 2 true
	// true 1 true
	// true 0 true
	// false 0 true
}

func ExampleLeakyBucket() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	// One email every 10 ms, never faster; at most 3 in the bucket.
	pace := throttle.LeakyBucket{Rate: 100, Period: time.Second, Capacity: 3}
	ctx := context.Background()

	for range 4 {
		r, err := lim.Reserve(ctx, "smtp", pace, 1, time.Second)
		var le *throttle.LimitedError
		if errors.As(err, &le) {
			fmt.Println("full: retry after", le.RetryAfter.Round(10*time.Millisecond))
			continue
		}
		fmt.Println("turn in", r.Delay().Round(10*time.Millisecond))
	}
	// Output:
	// turn in 0s
	// turn in 10ms
	// turn in 20ms
	// full: retry after 10ms
}

func ExampleSlidingLog() {
	// A memory store for the example; a fleet shares throttle.NewRedisStore(rdb).
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	// At most 2 reports in any minute, not 2 per calendar minute.
	pol := throttle.SlidingLog{Max: 2, Window: time.Minute}
	ctx := context.Background()

	for range 3 {
		res, _ := lim.TryAcquire(ctx, "report", pol, 1)
		fmt.Println(res.Allowed, res.Remaining, res.RetryAfter.Round(time.Second))
	}
	// Output:
	// true 1 0s
	// true 0 0s
	// false 0 1m0s
}

func ExampleSlidingWindow() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	// About 2 calls in any minute, counted in slots of 6 s.
	p := throttle.SlidingWindow{Max: 2, Window: time.Minute, Slots: 10}
	ctx := context.Background()
	for range 3 {
		res, err := lim.TryAcquire(ctx, "crm", p, 1)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		// RetryAfter: about a minute, when the first two calls' slot is half
		// out of the window, so that its weighted count is 1.
		fmt.Println(res.Allowed, res.Remaining, res.RetryAfter < time.Minute+6*time.Second)
	}
	// Output:
	// true 1 true
	// true 0 true
	// false 0 true
}

// Two tenants share one global bucket of 10/s with Share: tenant a, alone,
// books ahead to the horizon; then it is over its share and gets a place in
// its line, while tenant b, arriving, books at once.
func ExampleShare() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	ctx := context.Background()
	global := throttle.Limit{Rate: 10, Burst: 1}
	take := func(tenant string) error {
		_, err := lim.ReserveAll(ctx, []throttle.Bucket{
			{Key: "{acct}:tenant:" + tenant, Limit: throttle.Limit{Rate: 100, Burst: 100}},
			{Key: "{acct}:global", Limit: global, Share: &throttle.Share{Tenant: tenant, Horizon: 250 * time.Millisecond}},
		}, time.Minute)
		return err
	}
	booked := 0
	for take("a") == nil {
		booked++
	}
	fmt.Println("a booked", booked, "turns ahead, then:", errors.Is(take("a"), throttle.ErrOverShare))
	fmt.Println("b books:", take("b") == nil)
	// Output:
	// a booked 3 turns ahead, then: true
	// b books: true
}

// A Share with a Priority on a bucket of its own: a backlog of priority 5
// books only its horizon ahead, and a caller of priority 1 books next,
// behind those turns, never behind the backlog.
func ExampleShare_priority() {
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	limit := throttle.Limit{Rate: 10, Period: time.Second, Burst: 1} // a turn every 100 ms
	ctx := context.Background()
	take := func(priority int) (*throttle.Reservation, error) {
		return lim.ReserveAll(ctx, []throttle.Bucket{{Key: "email", Limit: limit,
			Share: &throttle.Share{Tenant: "email", Priority: priority, Horizon: 250 * time.Millisecond}}}, time.Minute)
	}
	booked := 0
	for {
		if _, err := take(5); errors.Is(err, throttle.ErrOverShare) {
			break // the rest of the backlog goes away, to come back at its places
		}
		booked++
	}
	r, err := take(1)
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println("priority 5 booked", booked, "turns; priority 1 waits", r.Delay().Round(100*time.Millisecond))
	// Output: priority 5 booked 3 turns; priority 1 waits 300ms
}
