package throttle

import (
	"context"
	_ "embed"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// TenantShare is one tenant at one priority level of a shared bucket as
// Limiter.Shares reads it.
type TenantShare struct {
	Tenant string
	Weight int
	// Priority is the level the tenant's callers asked at (Share.Priority):
	// a tenant with callers at two levels is listed once for each.
	Priority int
	// Share is the tenant's part of the bucket's rate now: its level's part
	// (all of it, with one level) times its weight over the weights of its
	// level's tenants with turns ahead.
	Share float64
	// Ahead is how far ahead of now the tenant has booked, on its own clock.
	Ahead time.Duration
	// Waiting is how many turns (of one token) the tenant's callers sent
	// away over its share hold places for that lie ahead: roughly its jobs
	// waiting in their queue for their places.
	Waiting int
}

// Shares lists the tenants of the shared bucket key under policy (the
// bucket's Limit, as the callers pass it) that have turns ahead, one entry
// per tenant and priority level: at most most of them, furthest ahead
// first, and how many there are in all. It takes nothing; it is for status
// lines and operators.
func (l *Limiter) Shares(ctx context.Context, key string, policy Policy, most int) ([]TenantShare, int, error) {
	b, err := l.bucketOf(key, policy)
	if err != nil {
		return nil, 0, err
	}
	if most < 1 {
		return nil, 0, invalidf("most %d: want at least 1", most)
	}
	t := perToken(b.Limit)
	v, err := l.seam.shares(ctx, l.cfg.prefix, key, most)
	if err != nil {
		return nil, 0, err
	}
	out := make([]TenantShare, len(v.tenants))
	floor := v.floor
	if floor == 0 {
		floor = defaultFloor
	}
	for i, e := range v.tenants {
		l, tenant := levelOf(e.tenant)
		ts := TenantShare{Tenant: tenant, Weight: int(e.weight), Priority: int(l), Ahead: micros(e.tag - v.now)}
		if v.sums[l] > 0 {
			ts.Share = float64(e.weight) / float64(v.sums[l]) * float64(sharePart(&v.sums, l, floor)) / 1e6
		}
		if e.back > v.now {
			// back is the place the next caller sent away would get: the
			// places handed out lie one turn apart before it.
			ts.Waiting = int(max((e.back-v.now)/t-1, 0))
		}
		out[i] = ts
	}
	return out, v.count, nil
}

// shareView is a store's answer to shares.
type shareView struct {
	now, floor int64
	sums       [numLevels + 1]int64 // each level's sum of weights
	count      int
	tenants    []shareEntry
}

// shareEntry is one pair of a shareView; tenant is the pair's name (pairOf).
type shareEntry struct {
	tenant            string
	tag, weight, back int64
}

// sharesHead is how many fields of shares.lua's reply come before the pairs.
const sharesHead = 2 + numLevels + 1

//go:embed lua/shares.lua
var sharesLua string

var sharesScript = newScript(sharesLua)

func (s *RedisStore) shares(ctx context.Context, prefix, key string, most int) (shareView, error) {
	tags, info := shareKeys(prefix, key)
	v, err := sharesScript.Run(ctx, s.rdb, []string{tags, info}, s.now(), most).Result()
	if err != nil {
		return shareView{}, s.fail("shares", err)
	}
	a, ok := v.([]any)
	if !ok || len(a) < sharesHead || (len(a)-sharesHead)%4 != 0 {
		return shareView{}, storeErr("shares", fmt.Errorf("bad reply %v", v))
	}
	num := func(x any) (int64, error) {
		switch n := x.(type) {
		case int64:
			return n, nil
		case string:
			return strconv.ParseInt(n, 10, 64)
		}
		return 0, fmt.Errorf("bad reply field %v", x)
	}
	var sv shareView
	var c int64
	sv.now, err = num(a[0])
	for l := 1; err == nil && l <= numLevels; l++ {
		sv.sums[l], err = num(a[l])
	}
	if err == nil {
		if sv.floor, err = num(a[numLevels+1]); err == nil {
			c, err = num(a[numLevels+2])
		}
	}
	sv.count = int(c)
	for i := sharesHead; err == nil && i < len(a); i += 4 {
		e := shareEntry{}
		var isStr bool
		if e.tenant, isStr = a[i].(string); !isStr {
			err = fmt.Errorf("bad tenant %v", a[i])
			break
		}
		if e.tag, err = num(a[i+1]); err == nil {
			if e.weight, err = num(a[i+2]); err == nil {
				e.back, err = num(a[i+3])
			}
		}
		sv.tenants = append(sv.tenants, e)
	}
	if err != nil {
		return shareView{}, storeErr("shares", err)
	}
	return sv, nil
}

func (m *memShard) shares(_ context.Context, prefix, key string, most int) (shareView, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.nowMicros()
	v := shareView{now: now}
	ms := m.shared[prefix+key]
	if ms == nil || ms.till <= now {
		return v, nil
	}
	v.sums, v.floor = ms.sums, ms.floor
	for tenant, tag := range ms.tags {
		if tag > now {
			v.tenants = append(v.tenants, shareEntry{tenant: tenant, tag: tag, weight: ms.weights[tenant], back: ms.backs[tenant]})
		}
	}
	v.count = len(v.tenants)
	sort.Slice(v.tenants, func(i, j int) bool {
		a, b := v.tenants[i], v.tenants[j]
		if a.tag != b.tag {
			return a.tag > b.tag
		}
		return a.tenant > b.tenant
	})
	v.tenants = v.tenants[:min(len(v.tenants), most)]
	return v, nil
}
