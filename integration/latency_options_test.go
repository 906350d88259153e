package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// in-flight=auto with every other option on, through the built binaries:
// a key per tenant (a bound per tenant), a global bucket shared fairly, an
// adaptive rate, an upstream 429 with Retry-After (a cooldown for the
// fleet, and an overload answer for the bound), and a runtime limit set
// with `sluice set` that lowers the ceiling to 2. Every job is answered 200
// once, none archived; each tenant's bound moved from cold; after the set,
// no tenant has more than 2 requests in the upstream at once.
func TestInFlightAutoWithEveryOption(t *testing.T) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	const spec = "http:request=300/s,burst=30,key=tenant:{header.sluice-key},global=400/s:40,in-flight=auto:1-40,max-wait=3s"
	fleet := startFleet(t, srv, insp, 2, "--concurrency", "20", "--limit", spec)
	up := newKneeUpstream(t, 6, 20*time.Millisecond)
	up.refuse = 1
	rdb := srv.Client(t)
	qc := queue.NewClient(asynq.NewClientFromRedisClient(rdb))
	tenants := []string{"a", "b"}
	send := func(n int, prefix string) {
		for i := range n {
			for _, tn := range tenants {
				payload := `{"url": "` + up.srv.URL + "/q?b=" + tn + `", "method": "GET"}`
				_, err := qc.Enqueue(context.Background(), queue.Task{Type: "http:request", Key: tn, Payload: []byte(payload)},
					asynq.MaxRetry(3), asynq.TaskID(prefix+tn+"-"+string(rune('a'+i/26))+string(rune('a'+i%26))))
				require.NoError(t, err)
			}
		}
	}
	send(150, "one-")
	waitDrained(t, insp, drainTimeout)

	lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(keyPrefix))
	for _, tn := range tenants {
		st, err := lim.InFlight(context.Background(), "{http:request}:tenant:"+tn+":inflight", throttle.Concurrency{Max: 40, Floor: 1, Auto: true})
		require.NoError(t, err)
		assert.NotEqual(t, "cold", st.Reason, "tenant %s's bound moved: %+v", tn, st)
		assert.Positive(t, st.Baseline, "tenant %s", tn)
		t.Logf("tenant %s after the first batch: %+v", tn, st)
	}
	assert.Equal(t, 1, up.count(http.StatusTooManyRequests), "the upstream refused once")

	code, out := runCommand(t, 10*time.Second, bin.sluice, "set", strings.Replace(spec, "auto:1-40", "auto:1-2", 1),
		"--redis", srv.URL(), "--key-prefix", keyPrefix)
	require.Equal(t, 0, code, out)
	require.Eventually(t, func() bool {
		for _, w := range fleet {
			if _, ok := findLog(w, func(e logEntry) bool { return e.Msg == "limit changed at runtime" }); !ok {
				return false
			}
		}
		return true
	}, 10*time.Second, 10*time.Millisecond, "both workers apply the runtime limit")
	up.mostAndClear()
	send(60, "two-")
	waitDrained(t, insp, drainTimeout)
	for tn, most := range up.mostAndClear() {
		assert.LessOrEqual(t, most, 2, "tenant %s: at most the new ceiling in the upstream at once", tn)
	}

	st := stopFleet(t, fleet, stopTimeout)
	assert.Zero(t, st.Archived, "none archived")
	assert.Positive(t, st.Cooldowns, "the 429 cooled the bucket down")
	assert.Equal(t, 2*(150+60), up.count(http.StatusOK), "every job answered 200 once")
}
