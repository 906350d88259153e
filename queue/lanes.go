package queue

import (
	"context"
	_ "embed"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// This file gives each key (a tenant) its lane of a queue: the key family
// sluice:lane:{QUEUE}:KEY, a string holding the lane, written here only.
//
// A key seen for the first time is given the least-loaded lane of the queue
// then (the fewest jobs pending or scheduled in the lane, over all
// priorities; on a tie, lane 0 if it is one of them, so that a key alone
// goes where it went before lanes, else one of the tied lanes drawn from a
// hash of the key, so that keys first seen together behind a backlog spread
// over the free lanes), and keeps it while it is used: each
// look-up renews the entry for laneTTL. Two clients giving a new key a lane
// at once agree (the first write wins: lua/lane.lua). The Client keeps what it
// read for laneCache, so a batch of one key's jobs costs one look-up.
//
// A key first seen behind another's backlog gets a free lane while there is
// one, so its jobs are not behind that backlog at dequeue. Keys first seen
// while the lanes are empty share lane 0, their jobs interleaved as they
// were enqueued. More busy keys than lanes share lanes: the fair shares
// still hold (the pool sends a key's jobs over its share back to their
// place), but a key's first job may then be behind the backlog of another
// key in its lane.

const (
	// laneTTL is how long a key keeps its lane after its last look-up.
	laneTTL = 24 * time.Hour
	// laneCache is how long a Client trusts a lane it read.
	laneCache = time.Minute
	// laneCacheMax bounds the keys a Client remembers; past it, it forgets them all.
	laneCacheMax = 10_000
	// laneTimeout bounds a look-up.
	laneTimeout = 3 * time.Second
)

// laneKey is the Redis key holding key's lane of queue base.
func laneKey(base, key string) string { return "sluice:lane:{" + base + "}:" + key }

//go:embed lua/lane.lua
var laneLua string

var laneScript = redis.NewScript(laneLua)

// lanes is a Client's look-up of keys' lanes.
type lanes struct {
	rdb redis.UniversalClient // nil: every job in lane 0
	now func() time.Time

	mu   sync.Mutex
	seen map[[2]string]laneEntry // by queue and key
}

type laneEntry struct {
	lane  int
	until time.Time
}

// of is key's lane of queue base: 0 for no key or no Redis to keep lanes in.
func (l *lanes) of(ctx context.Context, base, key string) (int, error) {
	if key == "" || l.rdb == nil {
		return 0, nil
	}
	now := l.now()
	l.mu.Lock()
	e, ok := l.seen[[2]string{base, key}]
	l.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.lane, nil
	}
	ctx, cancel := context.WithTimeout(ctx, laneTimeout)
	defer cancel()
	least, err := l.leastLoaded(ctx, base, key)
	if err != nil {
		return 0, err
	}
	v, err := laneScript.Run(ctx, l.rdb, []string{laneKey(base, key)}, least, laneTTL.Milliseconds()).Text()
	if err != nil {
		return 0, fmt.Errorf("queue: lane of key %q: %w", key, err)
	}
	lane, err := strconv.Atoi(v)
	if err != nil || lane < 0 || lane >= Lanes {
		lane = least // a value written by hand or by another version: not ours to trust
	}
	l.mu.Lock()
	if l.seen == nil || len(l.seen) >= laneCacheMax {
		l.seen = make(map[[2]string]laneEntry)
	}
	l.seen[[2]string{base, key}] = laneEntry{lane: lane, until: now.Add(laneCache)}
	l.mu.Unlock()
	return lane, nil
}

// leastLoaded is the lane of queue base with the fewest jobs pending or
// scheduled over all priorities; on a tie, lane 0 if it is one, else one of
// the tied lanes by a hash of key: one pipelined round trip.
func (l *lanes) leastLoaded(ctx context.Context, base, key string) (int, error) {
	type count struct {
		lane       int
		pend, schd *redis.IntCmd
	}
	var cs []count
	_, err := l.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for p := HighestPriority; p <= LowestPriority; p++ {
			for lane := range Lanes {
				prefix := "asynq:{" + Member(base, p, lane) + "}:"
				cs = append(cs, count{lane, pipe.LLen(ctx, prefix+"pending"), pipe.ZCard(ctx, prefix+"scheduled")})
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("queue: load of the lanes of queue %s: %w", base, err)
	}
	var load [Lanes]int64
	for _, c := range cs {
		load[c.lane] += c.pend.Val() + c.schd.Val()
	}
	least := slices.Min(load[:])
	if load[0] == least {
		return 0, nil
	}
	var tied []int
	for lane, n := range load {
		if n == least {
			tied = append(tied, lane)
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return tied[int(h.Sum32()%uint32(len(tied)))], nil
}
