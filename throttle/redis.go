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
// same server or cluster. Each operation is one Lua script call (EVALSHA,
// falling back to EVAL when the server's script cache is empty), atomic on
// the server and timed by Redis TIME; calls that coalesce share one
// (coalesce.go), and a reserve on a bucket with holes takes two (the lean
// script hands it to the general one; holes last only until the turns given
// back are taken or their span ends). It is safe for concurrent use.
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
	err   error // a client that cannot keep to deadlines (NewRedisStore)
	clock clock
	wake  wakeHub // the pub/sub subscription that wakes blocked Holds (redis_hold.go)
}

// NewRedisStore returns a store over rdb: a *redis.Client, *redis.ClusterClient,
// a failover client, or any redis.UniversalClient. The store uses rdb as it
// is, its connection pool and its hooks (redisotel tracing and metrics, say)
// included.
//
// A store call must never outlive its context's deadline, and go-redis keeps
// to a context's deadline on the socket only when the client was built with
// ContextTimeoutEnabled: true (otherwise a call waits up to its ReadTimeout,
// 3 s by default, whatever the deadline). So a *redis.Client (a Sentinel
// failover client too) or *redis.ClusterClient built without it makes every
// call of a Limiter over the store fail with ErrInvalid, before any I/O, and
// Limiter.Err says how to fix it. Other clients cannot be checked: their
// calls are bounded by their own timeouts.
func NewRedisStore(rdb redis.UniversalClient, opts ...StoreOption) *RedisStore {
	c := newStoreConfig(opts)
	s := &RedisStore{rdb: rdb, clock: c.clock}
	switch cl := rdb.(type) {
	case nil:
		s.err = invalidf("NewRedisStore: the client is nil")
	case *redis.Client:
		if !cl.Options().ContextTimeoutEnabled {
			s.err = noDeadlines
		}
	case *redis.ClusterClient:
		if !cl.Options().ContextTimeoutEnabled {
			s.err = noDeadlines
		}
	}
	return s
}

var noDeadlines = invalidf("the Redis client was built without ContextTimeoutEnabled: true, so a limiter call could outlive its context's deadline by up to the client's ReadTimeout; set it in redis.Options (or ClusterOptions, FailoverOptions)")

// Close ends the store's pub/sub subscription, if a blocked Hold made one
// (Holds still waiting then wake only when the earliest lease runs out). The
// client passed to NewRedisStore stays open: it belongs to the caller.
func (s *RedisStore) Close() error {
	s.wake.close()
	return nil
}

func (s *RedisStore) configErr() error { return s.err }

func (s *RedisStore) now() string {
	if s.clock == nil {
		return ""
	}
	return strconv.FormatInt(s.clock.Now().UnixMicro(), 10)
}

// bucketKeys appends bucket b's four keys (lua/prelude.lua): its state,
// its holes, its cooldown marker, and its effective rate if it is Adaptive
// (else its state again, which costs no string).
func bucketKeys(keys []string, prefix string, b *Bucket) []string {
	a := b.algo()
	st := stateKey(prefix, b.Key, a)
	ak := st
	if _, ok := a.(Adaptive); ok {
		ak = adaptKey(prefix, b.Key)
	}
	return append(keys, st, st+":holes", cooldownMarker(prefix, b.Key), ak)
}

// bucketArgs appends bucket b's six arguments: kind, n, a1, a2, a3, a4; a
// calendar window's for a call at clock's time (nil: the real clock).
func bucketArgs(args []any, b *Bucket, clk clock) []any {
	a := b.algo()
	p := argsOf(a, clk)
	return append(args, a.kind().String(), b.N, p[0], p[1], p[2], p[3])
}

func (s *RedisStore) reserve(ctx context.Context, req request) (decision, error) {
	if lean(&req) {
		switch ds, err := s.reserveLean(ctx, []request{req}); {
		case err != nil:
			return decision{}, err
		case ds != nil:
			return ds[0], nil
		} // the bucket has holes: the general script serves it
	}
	n := req.len()
	keys := make([]string, 0, 4*n)
	args := make([]any, 2, 2+6*n)
	args[0], args[1] = s.now(), strconv.FormatInt(req.maxWait, 10)
	for i := 0; i < n; i++ {
		keys = bucketKeys(keys, req.prefix, req.at(i))
		args = bucketArgs(args, req.at(i), s.clock)
	}
	keys, args = shareArgs(keys, args, &req)
	v, err := runInts(ctx, s.rdb, bucketScripts[scriptReserve][req.kind()], keys, args)
	if err != nil {
		return decision{}, s.fail("reserve", err)
	}
	ds, err := decisions(v, n, 1, req.adapts)
	if err != nil {
		return decision{}, storeErr("reserve", err)
	}
	return ds[0], nil
}

// shareArgs appends the keys and arguments of req's Share, if it has one
// (lua/share.lua).
func shareArgs(keys []string, args []any, req *request) ([]string, []any) {
	if sh := req.share; sh != nil {
		tags, info := shareKeys(req.prefix, sh.bucket)
		keys = append(keys, tags, info)
		args = append(args, sh.tenant, sh.weight, sh.horizon, sh.t, sh.n, sh.level, sh.floor, sh.at)
	}
	return keys, args
}

// reserveBatch is reserve for calls of one shape: the buckets (and so the
// keys and arguments) of reqs[0] and its Share, each call's own longest
// wait, one script call (lua/reserve_batch.lua).
func (s *RedisStore) reserveBatch(ctx context.Context, reqs []request) ([]decision, error) {
	req := reqs[0]
	if lean(&req) {
		if ds, err := s.reserveLean(ctx, reqs); err != nil || ds != nil {
			return ds, err
		}
	}
	n, m := req.len(), len(reqs)
	keys := make([]string, 0, 4*n)
	args := make([]any, 2+m, 2+m+6*n)
	args[0], args[1] = s.now(), m
	for i := range reqs {
		args[2+i] = reqs[i].maxWait
	}
	for i := 0; i < n; i++ {
		keys = bucketKeys(keys, req.prefix, req.at(i))
		args = bucketArgs(args, req.at(i), s.clock)
	}
	keys, args = shareArgs(keys, args, &req)
	v, err := runInts(ctx, s.rdb, bucketScripts[scriptBatch][req.kind()], keys, args)
	if err != nil {
		return nil, s.fail("reserve", err)
	}
	ds, err := decisions(v, n, m, req.adapts)
	if err != nil {
		return nil, storeErr("reserve", err)
	}
	return ds, nil
}

// lean reports whether req is one of the commonest calls, which a script of
// their own serves: one token or leaky bucket (lua/reserve_tat.lua), one
// fixed window (lua/reserve_fw.lua), one sliding log (lua/reserve_sl.lua) or
// sliding window (lua/reserve_sw.lua), no Share.
func lean(req *request) bool {
	if len(req.more) > 0 || req.share != nil {
		return false
	}
	k := req.one.algo().kind() // not a calendar window (kindCW): the general script serves it
	return k == kindTB || k == kindLB || k == kindFW || k == kindSL || k == kindSW
}

// reserveLean is reserveBatch for calls that lean accepts, by their script;
// nil decisions and no error if the bucket has holes, which the general
// script must serve.
func (s *RedisStore) reserveLean(ctx context.Context, reqs []request) ([]decision, error) {
	b := &reqs[0].one
	a := b.algo()
	prefix := reqs[0].prefix
	m := len(reqs)
	// now, n, a1, a2, a3 (for a token or leaky bucket a4, T's picoseconds,
	// in place of a3, and a3 after it only if the bucket is adaptive), then
	// each call's longest wait (the lean scripts know their kind, and count
	// the calls by the arguments: every argument costs the server time)
	p := a.args()
	args := make([]any, 0, 6+m)
	args = append(args, s.now(), b.N, p[0], p[1])
	switch k := a.kind(); {
	case k != kindTB && k != kindLB:
		args = append(args, p[2])
	case reqs[0].adapts != 0:
		args = append(args, p[3], p[2])
	default:
		args = append(args, p[3])
	}
	for i := range reqs {
		args = append(args, reqs[i].maxWait)
	}
	// the keys each script reads, no more (a key costs the server 0.1 µs)
	script, keys := reserveTBScript, []string{stateKey(prefix, b.Key, a)}
	switch {
	case reqs[0].adapts != 0:
		script, keys = reserveATScript, append(keys, adaptKey(prefix, b.Key)) // and the effective rate
	case a.kind() == kindLB:
		script = reserveLBScript
	case a.kind() == kindFW:
		script = reserveFWScript
	case a.kind() == kindSL:
		script, keys = reserveSLScript, bucketKeys(make([]string, 0, 4), prefix, b)[:3] // state, holes, cooldown marker
	case a.kind() == kindSW:
		script = reserveSWScript
	}
	v, err := runInts(ctx, s.rdb, script, keys, args)
	if err != nil {
		return nil, s.fail("reserve", err)
	}
	if len(v) == 1 && v[0] == 3 {
		return nil, nil // holes
	}
	var ds []decision
	if tat := script == reserveTBScript || script == reserveLBScript || script == reserveATScript; tat && m > 1 {
		ds, err = atOnce(v, int64(b.N), m, reqs[0].adapts != 0) // lua/reserve_tat.lua's batch reply
	} else {
		ds, err = decisions(v, 1, m, reqs[0].adapts)
	}
	if err != nil {
		return nil, storeErr("reserve", err)
	}
	return ds, nil
}

// atOnce reads lua/reserve_tat.lua's reply to a batch of m calls of n
// tokens: its head (k, now, the TAT before the batch as µs and
// picoseconds, T as µs and picoseconds, and the burst), then the replies of
// the calls after the first k, which were granted at once, one n·T after
// the other; it writes those k out as the loop of the script would have,
// with the token bucket's own functions (tatAfter, tatFigures).
func atOnce(v []int64, n int64, m int, adaptive bool) ([]decision, error) {
	const head = 7
	if len(v) < head {
		return nil, fmt.Errorf("bad batch reply of %d fields", len(v))
	}
	k, now, tat, T, burst := v[0], v[1], pico{v[2], v[3]}, pico{v[4], v[5]}, v[6]
	if k < 0 || k > int64(m) || now < 0 || tat.less(whole(now)) || !okPS(tat.ps) || !okPS(T.ps) ||
		!whole(0).less(T) || burst < 1 {
		return nil, fmt.Errorf("bad batch reply head %v", v[:head])
	}
	adapts := 0
	if adaptive {
		adapts = 1
	}
	rest, err := decisions(v[head:], 1, m-int(k), adapts)
	if err != nil {
		return nil, err
	}
	ds := make([]decision, m)
	for j := range k {
		d := decision{granted: true, now: now, handle: tat} // tatModule.commit at now
		tat = tatAfter(tat, T, now, int(n))
		d.remaining, d.reset = tatFigures(tat, T, burst, now)
		if adaptive {
			d.taken = []fixedTB{{t: T, burst: burst}}
		}
		ds[j] = d
	}
	copy(ds[k:], rest)
	return ds, nil
}

// okPS reports that ps is a pico's picoseconds, from 0 to 10⁶ − 1.
func okPS(ps int64) bool { return ps >= 0 && ps < psPerUs }

// counts checks that a script's reply v is want non-negative integers.
func counts(v []int64, want int) error {
	if len(v) != want {
		return fmt.Errorf("bad reply of %d fields, want %d", len(v), want)
	}
	for i, x := range v {
		if x < 0 {
			return fmt.Errorf("bad reply field %d: %d", i, x)
		}
	}
	return nil
}

// decisions reads the replies of m calls of n buckets each, one after the
// other: granted (1, or 2 for a tenant over its share), wait, remaining,
// reset, now, then a handle for each bucket (two integers: µs, or a
// window's index, and picoseconds), and for each of the adapts adaptive
// buckets, in order, the T (µs and picoseconds) and burst it was taken at
// (lua/reserve.lua). Every field is a non-negative integer.
func decisions(v []int64, n, m, adapts int) ([]decision, error) {
	per := 5 + 2*n + 3*adapts
	if err := counts(v, per*m); err != nil {
		return nil, err
	}
	ds := make([]decision, m)
	for i := range ds {
		f := v[i*per : (i+1)*per : (i+1)*per]
		d := decision{granted: f[0] == 1, overShare: f[0] == 2, wait: f[1], remaining: int(f[2]), reset: f[3], now: f[4]}
		for j := range n {
			if !okPS(f[6+2*j]) {
				return nil, fmt.Errorf("bad reply field %d: %d", i*per+6+2*j, f[6+2*j])
			}
		}
		if d.granted {
			d.handle = pico{f[5], f[6]}
			if n > 1 {
				d.handles = make([]pico, n-1)
				for j := range d.handles {
					d.handles[j] = pico{f[7+2*j], f[8+2*j]}
				}
			}
		}
		for a := range adapts {
			at := 5 + 2*n + 3*a
			t := pico{f[at], f[at+1]}
			if !okPS(t.ps) {
				return nil, fmt.Errorf("bad reply field %d: %d", i*per+at+1, t.ps)
			}
			d.taken = append(d.taken, fixedTB{t: t, burst: f[at+2]})
		}
		ds[i] = d
	}
	return ds, nil
}

func (s *RedisStore) refund(ctx context.Context, req request, d decision, id string) (bool, error) {
	n := req.len()
	keys := make([]string, 0, 4*n+1)
	args := make([]any, 3, 3+8*n)
	args[0], args[1], args[2] = s.now(), strconv.FormatInt(d.slot(), 10), id
	for i := 0; i < n; i++ {
		keys = bucketKeys(keys, req.prefix, req.at(i))
		args = bucketArgs(args, req.at(i), s.clock)
	}
	for i := 0; i < n; i++ {
		h := d.handleAt(i)
		args = append(args, h.us, h.ps)
	}
	keys = append(keys, keys[0]+":refund:"+id)
	v, err := bucketScripts[scriptRefund][req.kind()].Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return false, s.fail("refund", err)
	}
	return v == 1, nil
}

// charge runs lua/settle.lua on req's one bucket.
func (s *RedisStore) charge(ctx context.Context, req request, d decision, used int, id string) (bool, error) {
	keys := bucketKeys(make([]string, 0, 5), req.prefix, &req.one)
	keys = append(keys, keys[0]+":settle:"+id)
	args := bucketArgs(append(make([]any, 0, 11), s.now(), strconv.FormatInt(d.slot(), 10)), &req.one, s.clock)
	upstream := 0
	if req.one.UpstreamSettle {
		upstream = 1
	}
	args = append(args, d.handle.us, d.handle.ps, used, upstream)
	v, err := bucketScripts[scriptSettle][req.kind()].Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return false, s.fail("settle", err)
	}
	return v == 1, nil
}

// giveBack gives back grants of req's one bucket that were booked ahead and
// never taken (prefetch.go), ds in booking order; how many it gave back
// (lua/giveback.lua).
func (s *RedisStore) giveBack(ctx context.Context, req request, ds []decision, id string) (int, error) {
	keys := bucketKeys(make([]string, 0, 5), req.prefix, &req.one)
	keys = append(keys, keys[0]+":refund:"+id)
	args := bucketArgs(append(make([]any, 0, 7+3*len(ds)), s.now()), &req.one, s.clock)
	for i := len(ds) - 1; i >= 0; i-- {
		h := ds[i].handleAt(0)
		args = append(args, h.us, h.ps, ds[i].slot())
	}
	v, err := bucketScripts[scriptGiveBack][req.kind()].Run(ctx, s.rdb, keys, args...).Int64()
	if err != nil {
		return 0, s.fail("give back", err)
	}
	return int(v), nil
}

func cooldownMarker(prefix, name string) string { return redisKey(prefix, name) + ":cooldown" }

func (s *RedisStore) cooldown(ctx context.Context, prefix string, b Bucket, d time.Duration) (time.Duration, error) {
	keys := bucketKeys(make([]string, 0, 4), prefix, &b)
	args := bucketArgs([]any{s.now(), int64(d / time.Microsecond)}, &b, s.clock)
	v, err := bucketScripts[scriptCooldown][b.algo().kind()].Run(ctx, s.rdb, keys, args...).Int64()
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

func (s *RedisStore) peek(ctx context.Context, prefix string, b Bucket) (State, error) {
	keys := bucketKeys(make([]string, 0, 4), prefix, &b)
	args := bucketArgs([]any{s.now()}, &b, s.clock)
	ints, err := runInts(ctx, s.rdb, bucketScripts[scriptPeek][b.algo().kind()], keys, args)
	if err != nil {
		return State{}, s.fail("peek", err)
	}
	if err := counts(ints, 5); err != nil {
		return State{}, storeErr("peek", err)
	}
	st := State{Remaining: int(ints[0]), NextFree: micros(ints[1]), ResetAfter: micros(ints[2]), Cooldown: micros(ints[3])}
	return withQuota(st, b.algo(), ints[4]), nil
}

func (s *RedisStore) reset(ctx context.Context, prefix string, b Bucket) error {
	keys := bucketKeys(make([]string, 0, 4), prefix, &b)
	if err := s.rdb.Del(ctx, keys...).Err(); err != nil {
		return s.fail("reset", err)
	}
	return nil
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
		return &invalidError{reason: "buckets acquired together are in different Redis Cluster slots: " + err.Error(), crossSlot: true}
	}
	var se *storeError
	if errors.As(err, &se) {
		return err
	}
	return &storeError{op: op, err: err, refused: refusal(err)}
}

// refusal reports a server that answered but will not let this client act:
// a wrong password, or an ACL that denies a key or a command (also one called
// inside a script). That is a misconfiguration, not an outage.
func refusal(err error) bool {
	for _, p := range []string{"NOPERM", "WRONGPASS", "NOAUTH", "Protocol error: unauthenticated", "The user executing the script can't run this command"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	return false
}
