package throttle

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// Share divides one bucket of a call among priority levels and, within
// each, among tenants by weight: set it on the shared bucket (say a global
// one) of a ReserveAll, AcquireAll or TryAcquireAll whose other bucket is
// the tenant's own, or on the one bucket of a call for priorities alone.
// See docs/fairness.md and docs/priorities.md.
//
// While several tenants have turns booked on the shared bucket, each may
// book it only as far ahead as its share allows: its own virtual clock, the
// tenant's tag, moves by n·T·W/Weight per booking of n (T the bucket's time
// per token, W the weight of every tenant with a tag still ahead of now), and
// a tenant whose tag is more than Horizon ahead of now is over its share. A
// tenant alone has all of it (W is its own weight): no capacity idles while
// anyone asks.
//
// A call over its share books nothing and fails with a *LimitedError whose
// OverShare is true (errors.Is(err, ErrOverShare)); its RetryAfter is the
// caller's place in its tenant's line: the tenant's come-backs are spread
// one per n·T from when its share has room, so that callers sent away
// together do not come back together.
//
// Priority puts the caller at a level, 1 (first) to 5 (last): the tenants
// above are those of its level, and the levels share the bucket by strict
// priority with a floor. While several levels have turns ahead, the highest
// of them books 1 − Floor of the rate, the m below it Floor/m each; a level
// alone books all of it. So a caller of a level above every other with work
// books at once, behind at most what the others booked within their
// horizons, never behind their backlog. With every caller at one level (the
// default, 3), a Share is exactly the tenants' share above.
type Share struct {
	// Tenant names who asks: bounded like a bucket name (MaxKeyLen).
	Tenant string
	// Weight is the tenant's weight, 1 to MaxShareWeight; 0 means 1.
	Weight int
	// Horizon is how far ahead of now a tenant may book the shared bucket;
	// 0 means 500 ms. At most MaxShareHorizon.
	Horizon time.Duration
	// Priority is the caller's level, 1 (first) to 5 (last); 0 means 3.
	Priority int
	// Floor is the part of the bucket's rate the levels below the highest
	// with work keep while they have work, from 0.001 to 0.5; 0 means 0.05.
	Floor float64
}

const (
	// defaultShareHorizon is a Share's Horizon when it has none.
	defaultShareHorizon = 500 * time.Millisecond
	// MaxShareHorizon bounds a Share's Horizon.
	MaxShareHorizon = time.Hour
	// MaxShareWeight bounds a Share's Weight.
	MaxShareWeight = 1_000_000
	// shareExpireBatch is the most tenants a call forgets (their tags have
	// passed), so that no call's cost grows with the number of tenants.
	shareExpireBatch = 64
	// defaultPriority is a Share's level when it has none; numLevels the
	// levels (1 to numLevels).
	defaultPriority = 3
	numLevels       = 5
	// defaultFloor, minFloor and maxFloor bound a Share's Floor, in ppm of
	// the bucket's rate.
	defaultFloor = 50_000
	minFloor     = 1_000
	maxFloor     = 500_000
	// levelMark begins the name of a (level, tenant) pair of a level other
	// than defaultPriority (pairOf): no tenant contains it.
	levelMark = '\x01'
)

// ErrOverShare matches a *LimitedError from a call whose tenant is over its
// Share of the shared bucket: nothing was booked.
var ErrOverShare = errors.New("throttle: over its share")

// share is a checked Share, in the units the stores use.
type share struct {
	tenant  string
	at      int64 // the shared bucket's index among the call's buckets, from 1
	level   int64 // 1..numLevels
	floor   int64 // ppm
	weight  int64
	horizon int64  // µs
	t       int64  // µs per token of the shared bucket
	n       int64  // tokens the call takes from it
	bucket  string // the shared bucket's name
}

// checkShare checks the Share of bucket b (which has one) and returns it in
// store units.
func checkShare(b *Bucket) (share, error) {
	sh := *b.Share
	if err := checkName(sh.Tenant); err != nil {
		return share{}, invalidf("share of %q: tenant: %s", b.Key, err.(*invalidError).reason)
	}
	if strings.IndexByte(sh.Tenant, levelMark) >= 0 {
		return share{}, invalidf("share of %q: tenant %q contains the byte 0x01", b.Key, sh.Tenant)
	}
	if sh.Priority == 0 {
		sh.Priority = defaultPriority
	}
	if sh.Priority < 1 || sh.Priority > numLevels {
		return share{}, invalidf("share of %q: priority %d is not between 1 and %d", b.Key, sh.Priority, numLevels)
	}
	floor := int64(defaultFloor)
	if sh.Floor != 0 {
		floor = int64(math.Round(sh.Floor * 1e6))
		if math.IsNaN(sh.Floor) || sh.Floor < minFloor/1e6 || sh.Floor > maxFloor/1e6 {
			return share{}, invalidf("share of %q: floor %g is not between %g and %g", b.Key, sh.Floor, minFloor/1e6, maxFloor/1e6)
		}
	}
	if sh.Weight == 0 {
		sh.Weight = 1
	}
	if sh.Weight < 1 || sh.Weight > MaxShareWeight {
		return share{}, invalidf("share of %q: weight %d is not between 1 and %d", b.Key, sh.Weight, MaxShareWeight)
	}
	if sh.Horizon == 0 {
		sh.Horizon = defaultShareHorizon
	}
	if sh.Horizon < 0 || sh.Horizon > MaxShareHorizon {
		return share{}, invalidf("share of %q: horizon %v is not between 0 and %v", b.Key, sh.Horizon, MaxShareHorizon)
	}
	return share{tenant: sh.Tenant, level: int64(sh.Priority), floor: floor, weight: int64(sh.Weight), horizon: int64(sh.Horizon / time.Microsecond),
		t: perToken(b.Limit), n: int64(b.N), bucket: b.Key}, nil
}

// perToken is p's time per token, in µs (at least 1): its quota's period over its count.
func perToken(p Policy) int64 {
	count, period := p.quota()
	return max(int64(period/time.Microsecond)/int64(count), 1)
}

// shareKeys are the Redis keys of a shared bucket's tenants: a sorted set of
// their tags, and a hash of their weights, their come-back places, the sum
// of their weights and the time the keys expire.
func shareKeys(prefix, name string) (tags, info string) {
	k := redisKey(prefix, name) + ":share"
	return k + ":tags", k + ":info"
}

// pairOf names tenant at level in a shared bucket's state: the tenant's own
// name at defaultPriority (as before there were levels), else levelMark,
// the level's digit and the name (lua/share.lua's pairof).
func pairOf(level int64, tenant string) string {
	if level == defaultPriority {
		return tenant
	}
	return string(rune(levelMark)) + strconv.FormatInt(level, 10) + tenant
}

// levelOf splits a pair's name back into its level and tenant.
func levelOf(pair string) (int64, string) {
	if len(pair) >= 2 && pair[0] == levelMark && pair[1] >= '1' && pair[1] <= '0'+numLevels {
		return int64(pair[1] - '0'), pair[2:]
	}
	return defaultPriority, pair
}

// sharePart is the part of the rate, in ppm, of level l (counted active)
// when sums holds each level's sum of weights: all of it alone, 1 − floor
// for the highest of several, floor/m for each of the m below the highest
// (lua/share.lua's sharepart).
func sharePart(sums *[numLevels + 1]int64, l, floor int64) int64 {
	top, m := l, int64(0)
	for i := int64(1); i <= numLevels; i++ {
		if i != l && sums[i] > 0 {
			m++
			top = min(top, i)
		}
	}
	switch {
	case m == 0:
		return 1_000_000
	case l == top:
		return 1_000_000 - floor
	}
	return floor / m
}
