package throttle

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// The semaphore across processes: copies of this test binary, each its own
// process with its own Limiter and RedisStore, share one key on a real
// redis-server. They report through Redis lists under the test's prefix.

const (
	childEnv   = "SLUICE_HOLD_CHILD" // the child's mode: loop, keep or wait
	childMax   = 2
	childLease = time.Second
)

var childConcurrency = Concurrency{Max: childMax, Lease: childLease}

// TestHoldAcrossProcesses checks that three processes never hold more than
// Max slots between them, and that the slot of a process killed while
// holding it goes to a waiter in another process once its lease runs out,
// and not before.
func TestHoldAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	srv := redistest.Shared(t)
	rdb := srv.Client(t)
	ctx := context.Background()

	t.Run("never more than Max", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		var children []*child
		for i := range 3 {
			children = append(children, startChild(t, srv, prefix, "loop", fmt.Sprint("p", i)))
		}
		for _, c := range children {
			c.wait(t, 30*time.Second)
		}
		over, err := rdb.LRange(ctx, prefix+"over", 0, -1).Result()
		require.NoError(t, err)
		assert.Empty(t, over, "holders seen at once beyond Max %d", childMax)
		grants, err := rdb.Get(ctx, prefix+"grants").Int()
		require.NoError(t, err)
		peak, err := rdb.Get(ctx, prefix+"peak").Int()
		require.NoError(t, err)
		holds, err := rdb.Get(ctx, prefix+"holds").Int()
		require.NoError(t, err)
		t.Logf("3 processes × 4 goroutines, Max %d: %d grants, at most %d holders seen at once, %.2f hold scripts per grant",
			childMax, grants, peak, float64(holds)/float64(grants))
		assert.Greater(t, grants, 50, "the processes took turns")
		assert.Equal(t, childMax, peak, "the slots were all in use at times")
	})

	t.Run("a killed holder's slot comes back after its lease", func(t *testing.T) {
		prefix := redistest.Prefix(t)
		key := semKey(prefix, "jobs")
		a := startChild(t, srv, prefix, "keep", "a")
		startChild(t, srv, prefix, "keep", "b")
		ids := map[string]string{}
		for range 2 {
			name, id := popReport(t, rdb, prefix+"held", 30*time.Second)
			ids[name] = id
		}
		require.Contains(t, ids, "a")
		require.Contains(t, ids, "b")
		startChild(t, srv, prefix, "wait", "c")
		popReport(t, rdb, prefix+"waiting", 30*time.Second)
		time.Sleep(100 * time.Millisecond) // c's Hold is blocked by now

		killedAt := serverTime(t, rdb)
		a.kill(t)
		time.Sleep(50 * time.Millisecond) // a renewal sent before the kill has landed
		score, err := rdb.ZScore(ctx, key, ids["a"]).Result()
		require.NoError(t, err, "a's lease still holds its slot")
		expires := int64(score)

		_, v := popReport(t, rdb, prefix+"got", childLease+10*time.Second)
		grantedAt, err := strconv.ParseInt(v, 10, 64)
		require.NoError(t, err)
		afterKill, afterExpiry := micros(grantedAt-killedAt), micros(grantedAt-expires)
		t.Logf("lease %v: the waiter took the killed holder's slot %v after the kill, %v after its lease ran out",
			childLease, afterKill, afterExpiry)
		assert.GreaterOrEqual(t, grantedAt, expires, "not before the killed holder's lease ran out")
		assert.Less(t, afterKill, childLease+500*time.Millisecond, "within the lease of the kill")
		assert.Less(t, afterExpiry, 500*time.Millisecond, "soon after the lease ran out")

		members, err := rdb.ZRange(ctx, key, 0, -1).Result()
		require.NoError(t, err)
		assert.Len(t, members, childMax, "b and c hold the slots")
		assert.Contains(t, members, ids["b"], "b kept its slot, renewing it")
		assert.NotContains(t, members, ids["a"])
	})
}

// serverTime is Redis TIME in µs.
func serverTime(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	now, err := rdb.Time(context.Background()).Result()
	require.NoError(t, err)
	return now.UnixMicro()
}

// child is a copy of the test binary running TestHoldChildProcess.
type child struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

func startChild(t *testing.T, srv *redistest.Server, prefix, mode, name string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHoldChildProcess$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "SLUICE_HOLD_REDIS="+srv.Addr(), "SLUICE_HOLD_PREFIX="+prefix, "SLUICE_HOLD_NAME="+name)
	c := &child{name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = c.out, c.out
	require.NoError(t, cmd.Start())
	go func() {
		_ = cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-c.done
		if t.Failed() {
			t.Logf("child %s (%s):\n%s", name, mode, c.out.String())
		}
	})
	return c
}

// wait waits for the child to exit, and fails the test unless it passed.
func (c *child) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(timeout):
		t.Fatalf("child %s still running after %v", c.name, timeout)
	}
	if !c.cmd.ProcessState.Success() {
		t.Fatalf("child %s: %v\n%s", c.name, c.cmd.ProcessState, c.out.String())
	}
}

func (c *child) kill(t *testing.T) {
	t.Helper()
	require.NoError(t, c.cmd.Process.Signal(syscall.SIGKILL))
	<-c.done
}

// popReport pops "name value" from a list the children write to.
func popReport(t *testing.T, rdb *redis.Client, list string, timeout time.Duration) (name, value string) {
	t.Helper()
	kv, err := rdb.BLPop(context.Background(), timeout, list).Result()
	require.NoError(t, err, "waiting on %s", list)
	name, value, _ = strings.Cut(kv[1], " ")
	return name, value
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestHoldChildProcess is the body of a child process; without the
// environment of one it does nothing.
func TestHoldChildProcess(t *testing.T) {
	mode := os.Getenv(childEnv)
	if mode == "" {
		t.Skip("only run as a child of TestHoldAcrossProcesses")
	}
	prefix, name := os.Getenv("SLUICE_HOLD_PREFIX"), os.Getenv("SLUICE_HOLD_NAME")
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("SLUICE_HOLD_REDIS"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	scripts := &scriptCounts{}
	rdb.AddHook(scripts)
	store := NewRedisStore(rdb)
	defer store.Close()
	lim := NewLimiter(store, WithKeyPrefix(prefix))
	ctx := context.Background()
	say := func(list, value string) {
		assert.NoError(t, rdb.RPush(ctx, prefix+list, name+" "+value).Err())
		rdb.Expire(ctx, prefix+list, time.Minute)
	}

	switch mode {
	case "loop":
		// Four goroutines take turns for a while, each counting itself in
		// Redis while it holds a slot.
		run, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					l, err := lim.Hold(run, "jobs", childConcurrency)
					if err != nil {
						return
					}
					n, err := rdb.Incr(ctx, prefix+"inflight").Result()
					assert.NoError(t, err)
					if n > childMax {
						say("over", strconv.FormatInt(n, 10))
					}
					setMax(ctx, rdb, prefix+"peak", n)
					time.Sleep(3 * time.Millisecond)
					assert.NoError(t, rdb.Decr(ctx, prefix+"inflight").Err())
					assert.NoError(t, rdb.Incr(ctx, prefix+"grants").Err())
					assert.NoError(t, l.Release(ctx))
				}
			}()
		}
		wg.Wait()
		assert.NoError(t, rdb.IncrBy(ctx, prefix+"holds", scripts.get(holdScript)).Err())
	case "keep":
		l, err := lim.Hold(ctx, "jobs", childConcurrency)
		require.NoError(t, err)
		say("held", l.h.id)
		select {} // until killed
	case "wait":
		_, err := lim.TryHold(ctx, "jobs", childConcurrency)
		require.ErrorIs(t, err, ErrLimited)
		say("waiting", "")
		l, err := lim.Hold(ctx, "jobs", childConcurrency)
		require.NoError(t, err)
		// The grant's server time: the lease's end less the lease, read
		// before the first renewal moves it.
		end, err := rdb.ZScore(ctx, semKey(prefix, "jobs"), l.h.id).Result()
		require.NoError(t, err)
		say("got", strconv.FormatInt(int64(end)-int64(childLease/time.Microsecond), 10))
		select {} // until killed
	}
}

// setMax sets key to n if n is larger.
func setMax(ctx context.Context, rdb *redis.Client, key string, n int64) {
	const script = `local v = tonumber(redis.call("GET", KEYS[1]) or "0")
if tonumber(ARGV[1]) > v then redis.call("SET", KEYS[1], ARGV[1], "EX", 60) end`
	rdb.Eval(ctx, script, []string{key}, n)
}
