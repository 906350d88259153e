package throttle

import (
	"container/heap"
	"math"
)

// memShares is lua/share.lua in Go: the (level, tenant) pairs of each
// shared bucket of a memory store. The store's mutex guards it.
type memShares map[string]*memShare

// memShare is one shared bucket's pairs, by their names (pairOf).
type memShare struct {
	tags    map[string]int64 // pair → tag, µs; only tags ahead of the last expiry
	weights map[string]int64
	backs   map[string]int64     // pair → its next come-back place, µs
	sums    [numLevels + 1]int64 // each level's W: the sum of its pairs' weights
	floor   int64                // the floor last used, ppm (0: none yet)
	order   tagHeap              // (tag, pair), stale entries skipped
	till    int64                // when the Redis keys would expire, µs
}

// tagEntry is a tenant's tag as it was pushed; stale once the tenant's tag moved.
type tagEntry struct {
	tag    int64
	tenant string
}

// tagHeap orders tags as ZRANGEBYSCORE does: by tag, then by tenant.
type tagHeap []tagEntry

func (h tagHeap) Len() int { return len(h) }
func (h tagHeap) Less(i, j int) bool {
	if h[i].tag != h[j].tag {
		return h[i].tag < h[j].tag
	}
	return h[i].tenant < h[j].tenant
}
func (h tagHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *tagHeap) Push(x any)   { *h = append(*h, x.(tagEntry)) }
func (h *tagHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// shareCall is one call's view of its shared bucket (share.lua's S).
type shareCall struct {
	ms       *memShare
	sh       *share
	pair     string // the caller's (level, tenant) pair
	tag, old int64  // the pair's tag (at least from); its stored weight, 0 if none
	from     int64  // the shared bucket's time: now, or its cooldown's end
	t        int64  // µs per token the tags move by (sh.t, or the adaptive bucket's slower T)
}

// load is share.lua's shareload: it forgets up to shareExpireBatch tenants
// whose tags have passed and reads the caller's, from the shared bucket's
// time from: now, or the end of its cooldown.
func (s memShares) load(prefix string, sh *share, now, from int64) *shareCall {
	key := prefix + sh.bucket
	ms := s[key]
	if ms != nil && ms.till <= now {
		delete(s, key) // its Redis keys would have expired
		ms = nil
	}
	if ms == nil {
		ms = &memShare{tags: map[string]int64{}, weights: map[string]int64{}, backs: map[string]int64{}}
		s[key] = ms
	}
	for gone := 0; gone < shareExpireBatch && len(ms.order) > 0; {
		e := ms.order[0]
		if tag, ok := ms.tags[e.tenant]; !ok || tag != e.tag {
			heap.Pop(&ms.order) // stale
			continue
		}
		if e.tag > now {
			break
		}
		heap.Pop(&ms.order)
		l, _ := levelOf(e.tenant)
		ms.sums[l] -= ms.weights[e.tenant]
		delete(ms.tags, e.tenant)
		delete(ms.weights, e.tenant)
		delete(ms.backs, e.tenant)
		gone++
	}
	for l := range ms.sums {
		ms.sums[l] = max(ms.sums[l], 0)
	}
	pair := pairOf(sh.level, sh.tenant)
	c := &shareCall{ms: ms, sh: sh, pair: pair, tag: from, from: from, t: sh.t, old: ms.weights[pair]}
	if tag, ok := ms.tags[pair]; ok && tag > from {
		c.tag = tag
	}
	return c
}

func (c *shareCall) keep(till int64) { c.ms.till = max(c.ms.till, till) }

// rate is share.lua's sharerate: taken is the shared bucket's adaptive
// rate for this call (burst 0: it is not adaptive).
func (c *shareCall) rate(taken fixedTB) {
	if taken.burst > 0 && taken.t.us > c.t {
		c.t = taken.t.us
	}
}

// over is share.lua's shareover.
func (c *shareCall) over(now int64) (wait int64, over bool) {
	if c.tag-c.from <= c.sh.horizon {
		return 0, false
	}
	d := max(c.ms.backs[c.pair], c.tag-c.sh.horizon)
	c.ms.backs[c.pair] = d + c.sh.n*c.t
	c.keep(d + c.sh.n*c.t)
	return d - now, true
}

// commit is share.lua's sharecommit.
func (c *shareCall) commit() {
	ms, sh := c.ms, c.sh
	w := ms.sums[sh.level] - c.old + sh.weight
	ms.sums[sh.level] = w
	x := float64(sh.n) * float64(c.t) * float64(w) / float64(sh.weight)
	if s := sharePart(&ms.sums, sh.level, sh.floor); s < 1_000_000 {
		x = x * 1e6 / float64(s)
	}
	c.tag += int64(min(math.Ceil(x), maxShareStep))
	ms.tags[c.pair] = c.tag
	ms.weights[c.pair] = sh.weight
	ms.floor = sh.floor
	heap.Push(&ms.order, tagEntry{c.tag, c.pair})
	c.keep(c.tag)
}

// maxShareStep bounds one move of a tag, µs (as share.lua does).
const maxShareStep = 1e14
