package throttle

// Fine buckets: a Limit or a LeakyBucket faster than one token per
// microsecond (a byte rate of a gigabit is 1.25·10⁸ tokens a second). Their
// T is kept in ticks of a picosecond (fineQ per µs), Period/Rate rounded up
// to a whole tick, and their TAT, in µs plus ticks, is read by every call as
// ticks after now, which stay exact in float64 (Lua) and int64 (Go) because a
// fine bucket never books further ahead than fineSpan. lua/fine.lua is the
// Redis side; fineModule, below, the MemoryStore's.
//
// What a fine bucket does not do that the others do: a cancelled turn under
// later ones comes back to nobody (no holes: at these rates it is worth a few
// µs); it cannot be the ceiling of an Adaptive; and a call on it never waits
// longer than fineSpan (about 37 minutes), nor does a Cooldown hold it longer.
// A grant's slot is a whole µs, the booked instant rounded up: tokens act at
// most 1 µs after the instant the bucket booked them at.

const (
	// fineQ is ticks per µs: T of a fine bucket is in picoseconds.
	fineQ = 1_000_000
	// fineMinInterval is the shortest T, in µs: 10⁹ tokens per second.
	fineMinInterval = 1e-3
	// fineHorizon is how far ahead of now, in ticks, a fine bucket books.
	fineHorizon = 1 << 51
	// fineSpan is fineHorizon in whole µs: the longest wait on a fine bucket.
	fineSpan = fineHorizon / fineQ
	// fineBias keeps a fine handle positive (0 means "served from a hole").
	fineBias = 1 << 52
)

// fineTicks is T in ticks for an exact interval x in µs: rounded up, as
// Limit.interval rounds µs (a product within 1e-9 of a whole number is it).
func fineTicks(x float64) int64 { return roundUp(x * fineQ) }

// fineState is a fine bucket's state in a MemoryStore, as lua/fine.lua keeps
// it: the TAT is w µs and f ticks (0 <= f < fineQ).
type fineState struct{ w, f int64 }

func (s *fineState) idleAt(now int64) bool { return s.w < now || (s.w == now && s.f == 0) }

// fineModule is lua/fine.lua in Go, for a token bucket (size is its burst)
// or a leaky bucket (leaky; size is its capacity).
type fineModule struct {
	rel    int64 // the TAT in ticks after now, >= 0
	now    int64
	t      int64 // ticks per token
	size   int64
	leaky  bool
	cool   int64 // the cooldown's end in µs, 0: none
	before int64 // the TAT before the booking isTail found, in ticks after now
}

func openFine(st memState, now, t, size, cool int64, leaky bool) *fineModule {
	m := &fineModule{now: now, t: t, size: size, leaky: leaky, cool: cool}
	if s, ok := st.(*fineState); ok && s.w >= now {
		m.rel = (s.w-now)*fineQ + s.f
	}
	return m
}

// tick is µs instant x in ticks after now; up, ticks r in µs rounded up.
func (m *fineModule) tick(x int64) int64 { return (x - m.now) * fineQ }
func up(r int64) int64                   { return ceilDiv(max(r, 0), fineQ) }

func (m *fineModule) tail(now int64, n int, maxWait int64) (int64, bool, int64) {
	need := int64(n) * m.t
	if m.leaky {
		if over := m.rel + need - m.size*m.t; over > 0 {
			if maxWait < 0 || up(m.rel) <= maxWait {
				return 0, false, up(over)
			}
			return 0, false, up(m.rel)
		}
		return now + up(m.rel), true, 0
	}
	if beyond := m.rel + need - fineHorizon; beyond > 0 {
		return 0, false, up(beyond)
	}
	return now + up(m.rel+need-m.size*m.t), true, 0
}

// commit books n at slot s, from the earliest tick that rounds up to s; the
// handle is the TAT before, in ticks after s's tick, plus fineBias.
func (m *fineModule) commit(_, s int64, n int) int64 {
	before := m.rel
	m.rel = max(m.rel, m.tick(s)-fineQ+1) + int64(n)*m.t
	return before - m.tick(s) + fineBias
}

func (m *fineModule) figures(int64) (int, int64) {
	left := floorDiv(m.size*m.t-m.rel, m.t)
	if m.leaky {
		left = m.size - ceilDiv(m.rel, m.t)
	}
	return int(max(0, left)), up(m.rel)
}

// isTail reports whether the booking of handle at slot is the latest, and
// keeps the TAT before it for rollback, which only follows isTail.
func (m *fineModule) isTail(handle, slot int64, n int) bool {
	m.before = handle - fineBias + m.tick(slot)
	return m.rel == max(m.before, m.tick(slot)-fineQ+1)+int64(n)*m.t
}

// has: no holes on a fine bucket (see above).
func (m *fineModule) has(int64, int64) bool { return false }

// rollback puts the TAT back to what it was before the latest booking, never
// before now nor before what a cooldown holds.
func (m *fineModule) rollback(_ int64, _ int, _ int64, _ *holes) {
	floor := int64(0)
	if m.cool > m.now {
		floor = m.tick(m.cool)
		if !m.leaky {
			floor += (m.size - 1) * m.t
		}
		floor = min(floor, fineHorizon)
	}
	m.rel = max(m.before, floor, 0)
}

func (m *fineModule) release(int64, int, int64) {}

// hold: nothing before till (then one token, then one per T), within the horizon.
func (m *fineModule) hold(_, till int64) {
	x := m.tick(till)
	if !m.leaky {
		x += (m.size - 1) * m.t
	}
	m.rel = max(m.rel, min(x, fineHorizon))
}

func (m *fineModule) holeTill(at int64) int64    { return at + 1 }
func (m *fineModule) next(at int64, _ int) int64 { return at }
func (m *fineModule) flag()                      {}

func (m *fineModule) save() (memState, bool) {
	return &fineState{w: m.now + m.rel/fineQ, f: m.rel % fineQ}, true
}
