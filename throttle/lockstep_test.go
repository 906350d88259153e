package throttle

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// The randomized lockstep harness shared by the policies' Random tests:
// runRandom drives one policy on every store at once, requires the same answer
// from each at every step, and hands back the grants, on which each test
// checks its policy's invariant (grantTimes gives their times); a test that
// checks something along the way passes a lockstepCheck.

// windowGrant is a grant of a random run: its request and decision, and
// whether a refund of it was applied.
type windowGrant struct {
	req  request
	d    decision
	id   string
	gone bool
}

// lockstepStep is a step of a random run, as a lockstepCheck sees it once
// every store has agreed on it.
type lockstepStep struct {
	msg    string        // "seed s step i", to prefix failure messages with
	rdb    *redis.Client // the real redis-server, to look at the run's keys (under prefix)
	prefix string
	req    *request // the step's request if it was a reserve, granted or not; nil otherwise
	d      decision // req's decision
}

// lockstepCheck, if not nil, is called by runRandom after every step.
type lockstepCheck func(s lockstepStep)

// runRandom drives 300 random takes, tries, cancels (if cancels) and pauses
// under p on a memory store, a real redis-server and miniredis in lockstep,
// requires the same answers from all three at every step, calls check (if not
// nil) after every step, and returns the grants. unit is the policy's slot (or
// window, or turn, or queue) in µs: pauses and maxWaits are drawn around it.
// A cancel picks any grant so far, or, half the time, one of the latest four,
// which are most likely still ahead and so give something back.
//
// The clock is fake, but a real Redis expires keys in real time, by TTLs
// computed from the fake clock: its keys are made persistent with each script
// call (see persisting), so the scripts must answer from a stale state what
// the memory store, which forgets an idle state, answers from none. miniredis
// is moved on with the clock, so its keys expire by their TTLs: one that
// expired while its state still mattered would answer differently.
func runRandom(t *testing.T, p algo, seed uint64, unit int64, cancels bool, check lockstepCheck) []*windowGrant {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 5))
	mr, mini := miniredisClient(t)
	rdb := redistest.Shared(t).Client(t)
	clock := newFakeClock()
	stores := []Store{
		NewMemoryStore(WithClock(clock)),
		NewRedisStore(persisting{rdb}, WithClock(clock)),
		NewRedisStore(mini, WithClock(clock)),
	}
	names := []string{"memory", "redis", "miniredis"}
	limit, _ := p.quota()
	prefix := redistest.Prefix(t)
	ctx := context.Background()
	var grants []*windowGrant
	now := int64(0)
	for step := range 300 {
		msg := fmt.Sprintf("seed %d step %d", seed, step)
		mr.FastForward(micros(now) - clock.Now().Sub(base))
		clock.at(now)
		s := lockstepStep{msg: msg, rdb: rdb, prefix: prefix}
		switch k := rng.IntN(12); {
		case k < 2:
			now += rng.Int64N(unit)
		case k < 3:
			now += rng.Int64N(3 * unit)
		case k < 4:
			now += 1 + rng.Int64N(3)
		case k < 9 || !cancels:
			req := request{prefix: prefix, one: Bucket{Key: "k", Limit: p, N: 1 + rng.IntN(limit)}, maxWait: -1}
			if rng.IntN(2) == 0 {
				req.one.N = 1 // mostly single units, so that the key fills gradually
			}
			switch rng.IntN(3) {
			case 0:
				req.maxWait = 0
			case 1:
				req.maxWait = rng.Int64N(4 * unit)
			}
			var first decision
			for i, st := range stores {
				d, err := st.reserve(ctx, req)
				require.NoError(t, err, msg)
				if i == 0 {
					first = d
				} else {
					require.Equal(t, first, d, "%s: %s agrees with memory", msg, names[i])
				}
			}
			if first.granted {
				grants = append(grants, &windowGrant{req: req, d: first, id: fmt.Sprint(step)})
			}
			s.req, s.d = &req, first
		default:
			if len(grants) == 0 {
				break
			}
			// Half the time one of the latest grants: those are the
			// bookings still ahead, whose refund gives something back.
			i := rng.IntN(len(grants))
			if rng.IntN(2) == 0 {
				i = len(grants) - 1 - rng.IntN(min(len(grants), 4))
			}
			g := grants[i]
			if g.d.wait == 0 { // as Reservation.Cancel: nothing to give back
				break
			}
			var first bool
			for i, st := range stores {
				ok, err := st.refund(ctx, g.req, g.d, g.id)
				require.NoError(t, err, msg)
				if i == 0 {
					first = ok
				} else {
					require.Equal(t, first, ok, "%s: %s refund agrees with memory", msg, names[i])
				}
			}
			g.gone = g.gone || first
		}
		if check != nil {
			check(s)
		}
	}
	return grants
}

// standing are the grants of a random run that stand (no refund of them was
// applied), by slot.
func standing(grants []*windowGrant) []*windowGrant {
	var stand []*windowGrant
	for _, g := range grants {
		if !g.gone {
			stand = append(stand, g)
		}
	}
	sort.SliceStable(stand, func(i, j int) bool { return stand[i].d.slot() < stand[j].d.slot() })
	return stand
}

// persisting is a client whose script calls also drop the TTLs of the keys
// they name, inside the script itself, so that no key expires in between:
// Redis freezes the time a script sees, so a key a script wrote with a TTL
// of a millisecond is still there for its PERSIST, where a PERSIST queued
// after it in MULTI/EXEC could find it gone on a loaded machine. EVALSHA
// answers NOSCRIPT, so that Script.Run sends the source, which persisting
// wraps.
type persisting struct{ *redis.Client }

func (c persisting) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	cmd := redis.NewCmd(ctx)
	cmd.SetErr(redis.ErrNoScript)
	return cmd
}

func (c persisting) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.Client.Eval(ctx, "local function body()\n"+script+"\nend\nlocal r = body()\n"+
		"for _, k in ipairs(KEYS) do redis.call(\"PERSIST\", k) end\nreturn r", keys, args...)
}

// grantTimes are the times of the grants that stand, one per unit of n, sorted.
func grantTimes(grants []*windowGrant) []int64 {
	var times []int64
	for _, g := range grants {
		if g.gone {
			continue
		}
		for range g.req.one.N {
			times = append(times, g.d.slot())
		}
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return times
}
