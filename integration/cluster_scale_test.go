package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/throttle"
)

const (
	// scaleKeys is how many buckets the scale test spreads its calls over.
	scaleKeys = 300
	// scaleRun is how long each cluster is driven.
	scaleRun = 1500 * time.Millisecond
	// scaleCallers is how many goroutines call TryAcquire at once.
	scaleCallers = 32
)

// TestClusterSplitsBucketLoad drives TryAcquire over 300 random buckets
// against a Redis Cluster of one master and one of three, and reads from each
// master's INFO how much of the work it did: its script calls and the time it
// spent in them (INFO commandstats), and its CPU time (INFO cpu).
//
// It checks one thing: on three masters each does about a third of the calls
// (from 20% to 46% each). That split is what lets throughput grow with
// masters when each has a core of its own. Speed is not checked, only logged:
// on a small machine the test's client and every redis-server share a few
// cores, and more masters need not mean more calls per second.
func TestClusterSplitsBucketLoad(t *testing.T) {
	names := randomNames(t, scaleKeys)
	var lines []string
	for _, masters := range []int{1, 3} {
		c := redistest.StartCluster(t, masters, 0)
		r := driveCluster(t, c, names)
		lines = append(lines, r.String())
		if masters == 1 {
			continue
		}
		require.Len(t, r.masters, 3)
		for _, m := range r.masters {
			share := float64(m.calls) / float64(r.totalCalls())
			assert.True(t, share >= 0.20 && share <= 0.46,
				"master %s ran %d of %d script calls (%.0f%%), want 20%% to 46%%", m.addr, m.calls, r.totalCalls(), 100*share)
		}
	}
	t.Logf("TryAcquire over %d random buckets, %d goroutines, %v per cluster, %d CPUs:\n%s",
		scaleKeys, scaleCallers, scaleRun, runtime.NumCPU(), strings.Join(lines, "\n"))
}

// scaleResult is what one cluster did in a run.
type scaleResult struct {
	masters   []masterLoad
	calls     int64         // TryAcquire calls that returned
	elapsed   time.Duration // of the run
	clientCPU time.Duration // of this whole test process during the run
}

// masterLoad is one master's share of a run, from its INFO.
type masterLoad struct {
	addr  string
	calls int64         // EVALSHA and EVAL calls
	usec  int64         // time spent in them
	cpu   time.Duration // the process's user and system CPU time
}

func (r scaleResult) totalCalls() int64 {
	var n int64
	for _, m := range r.masters {
		n += m.calls
	}
	return n
}

func (r scaleResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "  %d master(s): %.0f calls/s; client CPU %.0f%% of one core", len(r.masters),
		float64(r.calls)/r.elapsed.Seconds(), 100*r.clientCPU.Seconds()/r.elapsed.Seconds())
	for _, m := range r.masters {
		fmt.Fprintf(&b, "; %s %.1f%% of calls, %d µs in scripts (%.1f µs/call), CPU %.0f%% of one core",
			m.addr, 100*float64(m.calls)/float64(r.totalCalls()), m.usec, float64(m.usec)/float64(max(m.calls, 1)),
			100*m.cpu.Seconds()/r.elapsed.Seconds())
	}
	return b.String()
}

// driveCluster runs TryAcquire over names against c for scaleRun and returns
// what each master did meanwhile.
func driveCluster(t *testing.T, c *redistest.Cluster, names []string) scaleResult {
	t.Helper()
	ctx := context.Background()
	rdb := c.Client(t)
	lim := throttle.NewLimiter(throttle.NewRedisStore(rdb), throttle.WithKeyPrefix(redistest.Prefix(t)))
	l := throttle.Limit{Rate: 1e6, Burst: 1e6} // never denies: every call is one script run
	// A first call on each bucket loads the script on its master and the slot map in the client.
	for _, n := range names {
		_, err := lim.TryAcquire(ctx, n, l, 1)
		require.NoError(t, err)
	}
	nodes := c.Nodes()
	cpu0 := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		require.NoError(t, n.Client(t).ConfigResetStat(ctx).Err())
		cpu0[i] = redisCPU(t, n.Client(t))
	}

	var calls, errs atomic.Int64
	var firstErr atomic.Value
	rctx, cancel := context.WithTimeout(ctx, scaleRun)
	defer cancel()
	self0 := selfCPU(t)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range scaleCallers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; rctx.Err() == nil; i += scaleCallers {
				_, err := lim.TryAcquire(rctx, names[i%len(names)], l, 1)
				switch {
				case err == nil:
					calls.Add(1)
				case rctx.Err() == nil:
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	r := scaleResult{calls: calls.Load(), elapsed: time.Since(start), clientCPU: selfCPU(t) - self0}
	require.Zero(t, errs.Load(), "errors, the first: %v", firstErr.Load())

	for i, n := range nodes {
		info, err := n.Client(t).Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		m := masterLoad{addr: n.Addr(), cpu: redisCPU(t, n.Client(t)) - cpu0[i]}
		for _, cmd := range []string{"evalsha", "eval"} {
			calls, usec := commandStat(info, cmd)
			m.calls += calls
			m.usec += usec
		}
		r.masters = append(r.masters, m)
	}
	return r
}

// commandStat reads "cmdstat_NAME:calls=N,usec=U,..." from INFO commandstats.
func commandStat(info, name string) (calls, usec int64) {
	for line := range strings.SplitSeq(info, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+name+":")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(rest, ",") {
			k, v, _ := strings.Cut(field, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls = n
			case "usec":
				usec = n
			}
		}
	}
	return calls, usec
}

// redisCPU is the user and system CPU time a redis-server has used (INFO cpu).
func redisCPU(t *testing.T, rdb *redis.Client) time.Duration {
	t.Helper()
	info, err := rdb.Info(context.Background(), "cpu").Result()
	require.NoError(t, err)
	var total float64
	for line := range strings.SplitSeq(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, err := strconv.ParseFloat(v, 64)
			require.NoError(t, err, "INFO cpu %s", k)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// selfCPU is the user and system CPU time this process has used.
func selfCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// randomNames returns n random bucket names.
func randomNames(t *testing.T, n int) []string {
	t.Helper()
	names := make([]string, n)
	for i := range names {
		b := make([]byte, 6)
		_, err := rand.Read(b)
		require.NoError(t, err)
		names[i] = "k-" + hex.EncodeToString(b)
	}
	return names
}
