package history_test

import (
	"context"
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/history"
)

// Two workers write their points of one step; a reader sees one point,
// their sum.
func Example() {
	m, err := miniredis.Run()
	if err != nil {
		panic(err)
	}
	defer m.Close()
	rdb := redis.NewClient(&redis.Options{Addr: m.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	ring := history.NewRing(rdb, "sluice:", history.DefaultStep)
	step := time.Date(2026, 11, 27, 14, 0, 0, 0, time.UTC)
	for _, grants := range []float64{600, 590} {
		p := history.Point{At: step, Grants: grants, Done: grants, Limit: 40, Workers: 1}
		if err := ring.Add(ctx, "http:request", p); err != nil {
			panic(err)
		}
	}
	_, pts, err := history.Read(ctx, rdb, "sluice:", "http:request", step.Add(time.Minute))
	if err != nil {
		panic(err)
	}
	for _, p := range pts {
		fmt.Printf("%s: %.0f grants (%.1f/s of %g/s) by %d workers\n",
			p.At.Format("15:04:05"), p.Grants, p.Grants/history.DefaultStep.Seconds(), p.Limit, p.Workers)
	}
	// Output: 14:00:00: 1190 grants (39.7/s of 40/s) by 2 workers
}
