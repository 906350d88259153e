package throttle

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// model is a reference token bucket kept as a token count (not a TAT), with
// reservations taken in debt and refunds that give back only what no later
// reservation stands on. The store must agree with it on every step.
type model struct {
	t      float64 // µs per token
	burst  float64
	tokens float64 // may be negative: debt
	last   int64   // µs
	net    float64 // tokens taken minus tokens given back, ever
}

type modelRes struct {
	n, mark float64
	slot    int64
	done    bool
}

func (m *model) refill(now int64) {
	m.tokens = math.Min(m.burst, m.tokens+float64(now-m.last)/m.t)
	m.last = now
}

func (m *model) take(now int64, n float64, maxWait int64) (granted bool, wait int64, res *modelRes) {
	m.refill(now)
	wait = int64(math.Ceil((n-m.tokens)*m.t - 1e-6))
	wait = max(wait, 0)
	if maxWait >= 0 && wait > maxWait {
		return false, wait, nil
	}
	m.tokens -= n
	m.net += n
	return true, wait, &modelRes{n: n, mark: m.net, slot: now + wait}
}

func (m *model) refund(now int64, r *modelRes) bool {
	if r.done || now >= r.slot {
		return false
	}
	r.done = true
	m.refill(now)
	later := m.net - r.mark
	if later < -1e-6 {
		return true
	}
	back := r.n - math.Max(0, later)
	if back > 0 {
		m.tokens = math.Min(m.burst, m.tokens+back)
		m.net -= back
	}
	return true
}

func TestStoreAgreesWithReferenceModel(t *testing.T) {
	limits := []Limit{{Rate: 10, Burst: 5}, {Rate: 3, Burst: 2}, {Rate: 7, Period: time.Minute, Burst: 9}, {Rate: 1000, Burst: 1}}
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			l := limits[int(seed)%len(limits)]
			clock := newFakeClock()
			store := NewMemoryStore(WithClock(clock))
			m := &model{t: float64(l.interval()), burst: float64(l.Burst), tokens: float64(l.Burst), last: 0}
			type held struct {
				req request
				d   decision
				mr  *modelRes
				id  string
			}
			var open []held
			now := int64(0)
			ctx := context.Background()
			for step := range 300 {
				msg := fmt.Sprintf("seed %d step %d", seed, step)
				switch k := rng.IntN(10); {
				case k < 3: // time passes
					now += rng.Int64N(3 * l.interval())
				case k < 8: // take, with a random budget
					n := 1 + rng.IntN(l.Burst)
					maxWait := int64(-1)
					if rng.IntN(2) == 0 {
						maxWait = rng.Int64N(2*l.interval() + 1)
					}
					clock.at(now)
					req := request{one: Bucket{Key: "k", Limit: l, N: n}, maxWait: maxWait}
					req.prepare()
					d, err := store.reserve(ctx, req)
					require.NoError(t, err, msg)
					granted, wait, mr := m.take(now, float64(n), maxWait)
					require.Equal(t, granted, d.granted, msg+" granted")
					// Both sides round floats differently; allow 1 µs plus 1e-8 of the wait.
					require.InDelta(t, wait, d.wait, 1+1e-8*float64(wait), msg+" wait")
					if granted && d.wait > 0 {
						open = append(open, held{req, d, mr, fmt.Sprint(step)})
					}
				default: // cancel an outstanding reservation, sometimes twice
					if len(open) == 0 {
						continue
					}
					i := rng.IntN(len(open))
					h := open[i]
					clock.at(now)
					ok, err := store.refund(ctx, h.req, h.d, h.id)
					require.NoError(t, err, msg)
					assert.Equal(t, m.refund(now, h.mr), ok, msg+" refunded")
					if rng.IntN(2) == 0 {
						open = append(open[:i], open[i+1:]...)
					}
				}
				// Tokens never exceed Burst, in the store as in the model.
				clock.at(now)
				tat := store.tatOf(memKey{name: "k"}, base.UnixMicro()+now)
				tokens := float64(l.Burst) - float64(tat-base.UnixMicro()-now)/float64(l.interval())
				assert.LessOrEqual(t, tokens, float64(l.Burst)+1e-9, msg+" tokens above burst")
				m.refill(now)
				assert.InDelta(t, m.tokens, tokens, 1e-3, msg+" tokens")
			}
		})
	}
}
