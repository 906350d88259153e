package throttle

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"
)

// An automatic in-flight bound's state in the store: one hash beside the
// semaphore (flightKey), written by lua/flight.lua (samples, claims) and
// lua/flight_commit.lua (the law's result), read by lua/hold.lua (the
// bound); a memory store keeps the same in memFlight.

var (
	//go:embed lua/flight.lua
	flightLua string
	//go:embed lua/flight_commit.lua
	flightCommitLua string

	flightScript       = newScript(flightLua)
	flightCommitScript = newScript(flightCommitLua)
)

// flightKey is the Redis key of semaphore name's automatic bound: beside
// the semaphore, in its Cluster slot.
func flightKey(prefix, name string) string { return semKey(prefix, name) + ":auto" }

// flightStore is what an automatic bound needs of a store, beside holdStore.
type flightStore interface {
	// flight adds o's samples to the fleet's window, claims the window if o
	// has a token and it is due, and reads the state (flight.lua).
	flight(ctx context.Context, prefix, key string, o flightOp) (flightReply, error)
	// flightCommit writes st if token's claim stands (flight_commit.lua).
	flightCommit(ctx context.Context, prefix, key, token string, st flightState, ttlMillis int64) (bool, error)
}

// flightOp is one report: samples, and what closes and claims a window.
type flightOp struct {
	n, sum, over int64
	hist         map[int]int64 // the samples by latency bucket
	interval     int64         // µs
	minSamples   int64         // that close a due window
	token        string        // "": do not claim
	claimTTL     int64         // µs
	ttlMillis    int64
}

// flightReply is a store's answer to flight.
type flightReply struct {
	claimed bool
	held    int
	now     int64
	st      flightState
	known   bool         // st was stored; else the bound is cold
	win     flightWindow // claimed: the window taken
}

// flightFields are the state's hash fields, in flight.lua's order.
var flightFields = [...]string{"limit", "bound", "base", "recent", "why", "at", "slow", "probeat", "probing", "saved", "high"}

// values are s's fields' values, in flightFields' order.
func (s flightState) values() []string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	return []string{f(s.limit), strconv.Itoa(s.bound), f(s.base), f(s.recent), s.why,
		strconv.FormatInt(s.at, 10), b(s.slow), strconv.FormatInt(s.probeAt, 10), strconv.Itoa(s.probing), f(s.saved), strconv.Itoa(s.high)}
}

// parseFlight reads a state from its fields' values; known is false if it
// has none stored.
func parseFlight(vs []any) (st flightState, known bool, err error) {
	if len(vs) != len(flightFields) {
		return st, false, fmt.Errorf("%d state fields, want %d", len(vs), len(flightFields))
	}
	if vs[0] == nil {
		return st, false, nil
	}
	s := make([]string, len(vs))
	for i, v := range vs {
		x, ok := v.(string)
		if !ok {
			return st, false, fmt.Errorf("state field %s: %v", flightFields[i], v)
		}
		s[i] = x
	}
	var errs [10]error
	st.limit, errs[0] = strconv.ParseFloat(s[0], 64)
	st.bound, errs[1] = strconv.Atoi(s[1])
	st.base, errs[2] = strconv.ParseFloat(s[2], 64)
	st.recent, errs[3] = strconv.ParseFloat(s[3], 64)
	st.why = s[4]
	st.at, errs[4] = strconv.ParseInt(s[5], 10, 64)
	st.slow = s[6] == "1"
	st.probeAt, errs[5] = strconv.ParseInt(s[7], 10, 64)
	st.probing, errs[7] = strconv.Atoi(s[8])
	st.saved, errs[6] = strconv.ParseFloat(s[9], 64)
	st.high, errs[8] = strconv.Atoi(s[10])
	for i, e := range errs {
		if e != nil {
			return st, false, fmt.Errorf("state field %d: %w", i, e)
		}
	}
	return st, true, nil
}

func (s *RedisStore) flight(ctx context.Context, prefix, key string, o flightOp) (flightReply, error) {
	args := []any{s.now(), o.n, o.sum, o.over, o.interval, o.token, o.claimTTL, o.ttlMillis, o.minSamples, flightMaxWait}
	for b, c := range o.hist {
		args = append(args, b, c)
	}
	v, err := flightScript.Run(ctx, s.rdb, []string{flightKey(prefix, key), semKey(prefix, key)}, args...).Slice()
	if err != nil {
		return flightReply{}, s.fail("flight", err)
	}
	bad := func(e error) (flightReply, error) { return flightReply{}, storeErr("flight", e) }
	nf := len(flightFields)
	if len(v) != 3+nf && (len(v) < 3+nf+4 || (len(v)-3-nf)%2 != 0) {
		return bad(fmt.Errorf("bad reply %v", v))
	}
	var ints [3]int64
	for i := range ints {
		x, ok := v[i].(int64)
		if !ok {
			return bad(fmt.Errorf("bad reply field %d: %v", i, v[i]))
		}
		ints[i] = x
	}
	r := flightReply{claimed: ints[0] == 1, held: int(ints[1]), now: ints[2]}
	if r.st, r.known, err = parseFlight(v[3 : 3+nf]); err != nil {
		return bad(err)
	}
	if r.claimed {
		if len(v) < 3+nf+4 {
			return bad(fmt.Errorf("claimed without a window: %v", v))
		}
		var w [4]int64
		for i := range w {
			x, _ := v[3+nf+i].(string)
			if w[i], err = strconv.ParseInt(x, 10, 64); err != nil && x != "" {
				return bad(fmt.Errorf("window field %d: %v", i, v[3+nf+i]))
			}
		}
		r.win = flightWindow{n: w[0], sum: w[1], over: w[2], start: w[3], held: int64(r.held), hist: make(map[int]int64)}
		for i := 3 + nf + 4; i+1 < len(v); i += 2 {
			f, _ := v[i].(string)
			c, _ := v[i+1].(string)
			b, err1 := strconv.Atoi(strings.TrimPrefix(f, "h:"))
			n, err2 := strconv.ParseInt(c, 10, 64)
			if err1 != nil || err2 != nil {
				return bad(fmt.Errorf("bad bucket %v: %v", v[i], v[i+1]))
			}
			r.win.hist[b] = n
		}
	}
	return r, nil
}

func (s *RedisStore) flightCommit(ctx context.Context, prefix, key, token string, st flightState, ttlMillis int64) (bool, error) {
	args := []any{s.now(), token, ttlMillis, semKey(prefix, key)}
	for i, v := range st.values() {
		args = append(args, flightFields[i], v)
	}
	n, err := flightCommitScript.Run(ctx, s.rdb, []string{flightKey(prefix, key)}, args...).Int64()
	if err != nil {
		return false, s.fail("flight commit", err)
	}
	return n == 1, nil
}

// memFlight is an automatic bound in a memory store, with its expiry.
type memFlight struct {
	st      flightState
	known   bool
	win     flightWindow
	open    bool // win has a start
	tok     string
	claimAt int64
	exp     int64 // µs
}

// flight is flight.lua in Go; see that file for the contract.
func (m *memoryStore) flight(_ context.Context, prefix, key string, o flightOp) (flightReply, error) {
	name := semKey(prefix, key)
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	f := m.sems.flights[name]
	if f != nil && f.exp <= now {
		delete(m.sems.flights, name)
		f = nil
	}
	if o.n > 0 || o.over > 0 {
		if f == nil {
			m.sweepFlights(now)
			f = &memFlight{}
			m.sems.flights[name] = f
		}
		f.win.n += o.n
		f.win.sum += o.sum
		for b, c := range o.hist {
			if f.win.hist == nil {
				f.win.hist = make(map[int]int64)
			}
			f.win.hist[b] += c
		}
		f.win.over += o.over
		if !f.open {
			f.win.start, f.open = now, true
		}
		f.exp = now + o.ttlMillis*1000
	}
	ls, _ := m.live(name, now)
	r := flightReply{held: len(ls), now: now}
	if f == nil {
		return r, nil
	}
	r.st, r.known = f.st, f.known
	if o.token == "" || !f.open || !f.win.due(now, flightParams{interval: o.interval, minSamples: o.minSamples}) ||
		(f.tok != "" && now-f.claimAt < o.claimTTL) {
		return r, nil
	}
	r.claimed, r.win = true, f.win
	r.win.held = int64(r.held)
	f.tok, f.claimAt = o.token, now
	f.win = flightWindow{start: now}
	return r, nil
}

// flightCommit is flight_commit.lua in Go; see that file for the contract.
func (m *memoryStore) flightCommit(_ context.Context, prefix, key, token string, st flightState, ttlMillis int64) (bool, error) {
	name := semKey(prefix, key)
	m.mu.Lock()
	f := m.sems.flights[name]
	if f == nil || f.tok != token {
		m.mu.Unlock()
		return false, nil
	}
	rose := min(st.bound-f.st.bound, 1000)
	f.st, f.known, f.tok = st, true, ""
	f.exp = m.nowMicros() + ttlMillis*1000
	m.mu.Unlock()
	for range rose {
		m.sems.room.notify(name)
	}
	return true, nil
}

// flightBound is the bound a memory store's Hold of semaphore name takes
// under ceiling, or start if it has none. m.mu is held.
func (m *memoryStore) flightBound(name string, ceiling, start int, now int64) int {
	f := m.sems.flights[name]
	if f == nil || f.exp <= now || !f.known {
		return min(ceiling, start)
	}
	return min(ceiling, f.st.bound)
}

// sweepFlights forgets up to two expired bounds: amortised cleanup. m.mu is held.
func (m *memoryStore) sweepFlights(now int64) {
	n := 0
	for k, f := range m.sems.flights {
		if n == 2 {
			return
		}
		n++
		if f.exp <= now {
			delete(m.sems.flights, k)
		}
	}
}

var (
	_ flightStore = (*RedisStore)(nil)
	_ flightStore = (*memoryStore)(nil)
)
