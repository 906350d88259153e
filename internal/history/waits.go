package history

import (
	"context"
	_ "embed"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The tenants' longest waits, the key, its schema and its script (lua/waits.lua):
//
//	<prefix>history:{<type>}:waits:<minute>   a sorted set, one per minute
//	                                         (minute = Unix seconds / 60)
//	  member: a tenant (the key a fair limit shares its global bucket by)
//	  score:  its longest wait in ms in that minute, over the fleet
//
// A minute keeps at most MaxTenants tenants, the longest waits, and expires
// WaitsTTL after its last write.

var (
	//go:embed lua/waits.lua
	waitsLua    string
	waitsScript = redis.NewScript(waitsLua)
)

const (
	// MaxTenants bounds the tenants a minute keeps per type.
	MaxTenants = 1000
	// WaitsTTL is how long a minute's waits are kept after its last write.
	WaitsTTL = 10 * time.Minute
	// maxTenantLen bounds a tenant's name (as throttle.MaxKeyLen a key).
	maxTenantLen = 512
)

// WaitsKey is the key of type typ's waits in the minute at is in.
func WaitsKey(prefix, typ string, at time.Time) string {
	return Key(prefix, typ) + ":waits:" + strconv.FormatInt(minuteOf(at), 10)
}

func minuteOf(at time.Time) int64 { return int64(math.Floor(float64(at.Unix()) / 60)) }

// AddWaits merges waits, one worker's longest wait per tenant of type typ,
// into the minute at falls in: each tenant keeps the longest of the fleet's.
// A minute keeps the MaxTenants longest; a tenant's name over 512 bytes is
// an error, as is a negative wait.
func (r *Ring) AddWaits(ctx context.Context, typ string, at time.Time, waits map[string]time.Duration) error {
	if err := checkType(typ); err != nil {
		return err
	}
	if len(waits) == 0 {
		return nil
	}
	args := make([]any, 0, 2+2*len(waits))
	args = append(args, MaxTenants, WaitsTTL.Milliseconds())
	for t, d := range waits {
		switch {
		case t == "" || len(t) > maxTenantLen:
			return fmt.Errorf("%w: waits of %q: tenant of %d bytes (1 to %d)", ErrInvalid, typ, len(t), maxTenantLen)
		case d < 0:
			return fmt.Errorf("%w: waits of %q: tenant %q waited %v", ErrInvalid, typ, t, d)
		}
		args = append(args, t, d.Milliseconds())
	}
	if err := waitsScript.Run(ctx, r.rdb, []string{WaitsKey(r.prefix, typ, at)}, args...).Err(); err != nil {
		return fmt.Errorf("history: add waits of %q: %w", typ, err)
	}
	return nil
}

// ReadWaits returns the longest wait of each tenant of type typ over the
// minutes that overlap the span over before now (at most WaitsTTL back:
// older minutes are gone). Tenants with no wait recorded are left out.
func ReadWaits(ctx context.Context, rdb redis.UniversalClient, prefix, typ string, now time.Time, over time.Duration) (map[string]time.Duration, error) {
	if err := checkType(typ); err != nil {
		return nil, err
	}
	over = min(max(over, 0), WaitsTTL)
	from, to := minuteOf(now.Add(-over)), minuteOf(now)
	cmds := make([]*redis.ZSliceCmd, 0, to-from+1)
	_, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for m := from; m <= to; m++ {
			cmds = append(cmds, p.ZRangeWithScores(ctx, Key(prefix, typ)+":waits:"+strconv.FormatInt(m, 10), 0, -1))
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		return nil, fmt.Errorf("history: read waits of %q: %w", typ, err)
	}
	out := make(map[string]time.Duration)
	for _, c := range cmds {
		for _, z := range c.Val() {
			t, ok := z.Member.(string)
			if !ok || math.IsNaN(z.Score) || z.Score < 0 {
				continue
			}
			if d := time.Duration(z.Score * float64(time.Millisecond)); d > out[t] {
				out[t] = d
			}
		}
	}
	return out, nil
}
