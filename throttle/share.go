package throttle

import (
	"errors"
	"time"
)

// Share divides one bucket of a call among tenants by weight: set it on the
// shared bucket (say a global one) of a ReserveAll, AcquireAll or
// TryAcquireAll whose other bucket is the tenant's own. See docs/fairness.md.
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
type Share struct {
	// Tenant names who asks: bounded like a bucket name (MaxKeyLen).
	Tenant string
	// Weight is the tenant's weight, 1 to MaxShareWeight; 0 means 1.
	Weight int
	// Horizon is how far ahead of now a tenant may book the shared bucket;
	// 0 means 500 ms. At most MaxShareHorizon.
	Horizon time.Duration
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
)

// ErrOverShare matches a *LimitedError from a call whose tenant is over its
// Share of the shared bucket: nothing was booked.
var ErrOverShare = errors.New("throttle: over its share")

// share is a checked Share, in the units the stores use.
type share struct {
	tenant  string
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
	return share{tenant: sh.Tenant, weight: int64(sh.Weight), horizon: int64(sh.Horizon / time.Microsecond),
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
