package throttle

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// adaptKey is the Redis key of bucket name's effective rate: beside the
// bucket, in its Cluster slot.
func adaptKey(prefix, name string) string { return redisKey(prefix, name) + ":adapt" }

func (s *RedisStore) adapt(ctx context.Context, prefix, key string, o adaptOp) (AdaptState, error) {
	v, err := adaptScript.Run(ctx, s.rdb, []string{adaptKey(prefix, key)}, append([]any{s.now()}, o.args()...)...).Slice()
	if err != nil {
		return AdaptState{}, s.fail("adapt", err)
	}
	if len(v) != 3 {
		return AdaptState{}, storeErr("adapt", fmt.Errorf("bad reply %v", v))
	}
	rs, _ := v[0].(string)
	why, _ := v[1].(string)
	age, _ := v[2].(int64)
	rate, err := strconv.ParseFloat(rs, 64)
	if err != nil {
		return AdaptState{}, storeErr("adapt", fmt.Errorf("bad rate %q", rs))
	}
	return AdaptState{Rate: rate, Reason: why, Age: micros(age)}, nil
}

// memAdapt is an adaptive bucket's state in a memory store, with its expiry.
type memAdapt struct {
	st  adaptState
	exp int64 // µs
}

func (m *memShard) adapt(_ context.Context, prefix, key string, o adaptOp) (AdaptState, error) {
	now := m.nowMicros()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memKey{prefix: prefix, name: key}
	e := m.adapts[k]
	if e != nil && e.exp <= now {
		delete(m.adapts, k)
		e = nil
	}
	st := adaptState{}
	if e != nil {
		st = e.st
	}
	if st.apply(o, now) {
		if e == nil {
			e = &memAdapt{}
			m.sweepAdapts(now)
			m.adapts[k] = e
		}
		e.st, e.exp = st, now+o.ttlMillis*1000
	}
	return AdaptState{Rate: st.rate, Reason: st.why, Age: time.Duration(now-st.at) * time.Microsecond}, nil
}

// effective is bucket name's effective rate for a reserve at now, as
// lua/tb.lua reads it: 0 (the ceiling) when none is kept or it is the
// ceiling. m.mu is held.
func (m *memShard) effective(prefix, name string, now int64) float64 {
	e := m.adapts[memKey{prefix: prefix, name: name}]
	if e == nil || e.exp <= now || e.st.why == adaptCeiling {
		return 0
	}
	return e.st.rate
}

// sweepAdapts forgets up to two expired adaptive states: amortised cleanup,
// run when one is added, so that idle keys do not pile up.
func (m *memShard) sweepAdapts(now int64) {
	n := 0
	for k, e := range m.adapts {
		if n == 2 {
			return
		}
		n++
		if e.exp <= now {
			delete(m.adapts, k)
		}
	}
}
