package throttle

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisStore keeps buckets in Redis, shared by every process that talks to the
// same server or cluster. Each operation is one Lua script call (EVALSHA, falling
// back to EVAL when the server's script cache is empty), atomic on the server and
// timed by Redis TIME. It is safe for concurrent use.
//
// Buckets acquired together must live in one hash slot on Redis Cluster; see
// Limiter.AcquireAll.
//
// From the first Limiter.Hold that has to wait, the store keeps one pub/sub
// connection, and a goroutine that hands its messages to the waiting Holds
// (and, while the keys it listens to change, one that changes them), until
// Close: call Close when done with a store that served Hold.
type RedisStore struct {
	rdb   redis.UniversalClient
	owned bool // rdb is a copy this store made and must close
	clock Clock
	wake  wakeHub // the pub/sub subscription that wakes blocked Holds (redis_hold.go)
}

// NewRedisStore returns a store over rdb: a *redis.Client, *redis.ClusterClient,
// a failover client, or any redis.UniversalClient.
//
// A store call must never outlive its context's deadline, but go-redis ignores
// context deadlines on the socket unless ContextTimeoutEnabled is set. If rdb is
// a *redis.Client or *redis.ClusterClient without it, the store makes its own
// client from a copy of rdb's options with ContextTimeoutEnabled set (its own
// connection pool, released by Close). Other clients are used as they are, and
// so is a Sentinel failover client (redis.NewFailoverClient): a copy would not
// follow its master switches, so build that one with ContextTimeoutEnabled.
func NewRedisStore(rdb redis.UniversalClient, opts ...StoreOption) *RedisStore {
	c := newStoreConfig(opts)
	s := &RedisStore{rdb: rdb, clock: c.clock}
	switch cl := rdb.(type) {
	case *redis.Client:
		// A failover client's options name no address; it dials through its sentinels.
		if o := cl.Options(); !o.ContextTimeoutEnabled && o.Addr != failoverAddr {
			cp := *o
			cp.ContextTimeoutEnabled = true
			cp.PushNotificationProcessor = nil // the original's, bound to its connections
			s.rdb, s.owned = redis.NewClient(&cp), true
		}
	case *redis.ClusterClient:
		if o := cl.Options(); !o.ContextTimeoutEnabled {
			cp := *o
			cp.ContextTimeoutEnabled = true
			cp.PushNotificationProcessor = nil
			s.rdb, s.owned = redis.NewClusterClient(&cp), true
		}
	}
	return s
}

// failoverAddr is the address go-redis gives a Sentinel failover client's options.
const failoverAddr = "FailoverClient"

// Close ends the store's pub/sub subscription, if a blocked Hold made one
// (Holds still waiting then wake only when the earliest lease runs out), and
// releases the client the store made for itself, if any. The client passed to
// NewRedisStore stays open: it belongs to the caller.
func (s *RedisStore) Close() error {
	s.wake.close()
	if s.owned {
		return s.rdb.Close()
	}
	return nil
}

func (s *RedisStore) now() string {
	if s.clock == nil {
		return ""
	}
	return strconv.FormatInt(s.clock.Now().UnixMicro(), 10)
}

func (s *RedisStore) reserve(ctx context.Context, req request) (decision, error) {
	if req.pol != nil {
		return s.reserveAlgo(ctx, req)
	}
	n := req.len()
	keys := make([]string, n)
	args := make([]any, 2, 2+3*n)
	args[0], args[1] = s.now(), strconv.FormatInt(req.maxWait, 10)
	for i := 0; i < n; i++ {
		b := req.at(i)
		keys[i] = redisKey(req.prefix, b.Key)
		args = append(args, b.t, b.Limit.Burst, b.N)
	}
	v, err := reserveScript.Run(ctx, s.rdb, keys, args...).Result()
	if err != nil {
		return decision{}, s.fail("reserve", err)
	}
	d, err := parseDecision(v, n)
	if err != nil {
		return decision{}, storeErr("reserve", err)
	}
	return d, nil
}

func parseDecision(v any, n int) (decision, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 5+n {
		return decision{}, fmt.Errorf("bad reply %v", v)
	}
	ints := make([]int64, len(a))
	for i := range a {
		x, ok := a[i].(int64)
		if !ok || x < 0 {
			return decision{}, fmt.Errorf("bad reply field %d: %v", i, a[i])
		}
		ints[i] = x
	}
	d := decision{granted: ints[0] == 1, wait: ints[1], remaining: int(ints[2]), reset: ints[3], now: ints[4]}
	if d.granted {
		d.tat = ints[5]
		if n > 1 {
			d.tats = ints[6:]
		}
	}
	return d, nil
}

func (s *RedisStore) refund(ctx context.Context, req request, d decision, id string) (bool, error) {
	if req.pol != nil {
		return s.refundAlgo(ctx, req, d, id)
	}
	n := req.len()
	keys := make([]string, n+1)
	args := make([]any, 2, 2+3*n)
	args[0], args[1] = s.now(), strconv.FormatInt(d.slot(), 10)
	for i := 0; i < n; i++ {
		b := req.at(i)
		keys[i] = redisKey(req.prefix, b.Key)
		args = append(args, d.tatAt(i), b.t, b.N)
	}
	keys[n] = keys[0] + ":refund:" + id
	v, err := refundScript.Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return false, s.fail("refund", err)
	}
	return v == 1, nil
}

func cooldownMarker(prefix, name string) string { return redisKey(prefix, name) + ":cooldown" }

func (s *RedisStore) cooldown(ctx context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error) {
	keys := []string{redisKey(prefix, b.Key), cooldownMarker(prefix, b.Key)}
	v, err := cooldownScript.Run(ctx, s.rdb, keys, s.now(), int64(d/time.Microsecond),
		b.Limit.interval(), b.Limit.Burst).Int64()
	if err != nil {
		return 0, s.fail("cooldown", err)
	}
	if v < 0 {
		return 0, storeErr("cooldown", fmt.Errorf("bad reply %d", v))
	}
	return micros(v), nil
}

func (s *RedisStore) cooldownLeft(ctx context.Context, prefix, key string) (time.Duration, error) {
	v, err := cooldownLeftScript.Run(ctx, s.rdb, []string{cooldownMarker(prefix, key)}, s.now()).Int64()
	if err != nil {
		return 0, s.fail("cooldown", err)
	}
	if v < 0 {
		return 0, storeErr("cooldown", fmt.Errorf("bad reply %d", v))
	}
	return micros(v), nil
}

// fail turns a failed store call into the error callers see. A network
// failure on a cluster also asks go-redis to reload the slot map: a master that
// died sends no MOVED, and without a reload the client keeps calling it until
// its next periodic refresh (a minute by default), long after the replica took over.
func (s *RedisStore) fail(op string, err error) error {
	var rerr redis.Error
	if cc, ok := s.rdb.(*redis.ClusterClient); ok && !errors.As(err, &rerr) {
		cc.ReloadState(context.Background())
	}
	return storeErr(op, err)
}

func storeErr(op string, err error) error {
	if redis.HasErrorPrefix(err, "CROSSSLOT") {
		return &InvalidError{Reason: "buckets acquired together are in different Redis Cluster slots: " + err.Error(), crossSlot: true}
	}
	var se *StoreError
	if errors.As(err, &se) {
		return err
	}
	return &StoreError{Op: op, Err: err, refused: refusal(err)}
}

// refusal reports a server that answered but will not let this client act:
// a wrong password, or an ACL that denies a key or a command (also one called
// inside a script). That is a misconfiguration, not an outage.
func refusal(err error) bool {
	for _, p := range []string{"NOPERM", "WRONGPASS", "NOAUTH", "The user executing the script can't run this command"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}
