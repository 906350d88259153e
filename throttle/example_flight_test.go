package throttle_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// An in-flight bound that follows the upstream's latency: it starts at its
// floor, and each released lease's latency (and whether the upstream said
// it was overloaded) moves it, for every process that shares the store.
func ExampleLimiter_InFlight() {
	ctx := context.Background()
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	db := throttle.Concurrency{Auto: true, Floor: 2, Max: 50}

	lease, err := lim.Hold(ctx, "db", db)
	if err != nil {
		fmt.Println(err)
		return
	}
	st, _ := lim.InFlight(ctx, "db", db)
	fmt.Printf("bound %d, held %d, %s\n", st.Bound, st.Held, st.Reason)

	began := time.Now()
	// ... call the database ...
	lease.Observe(time.Since(began), false)
	_ = lease.Release(ctx)
	// Output: bound 2, held 1, cold
}
