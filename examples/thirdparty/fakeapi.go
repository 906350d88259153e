package main

import (
	"context"
	"math"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/sluicehq/sluice/throttle"
)

// fakeAPI is a stand-in for a partner's rate-limited HTTP API. It allows its
// limit (kept with a throttle.Limiter over a memory store: the API's own
// counter, nothing to do with the workers') and answers 429 with Retry-After
// beyond it. During a maintenance window it answers every request 429 with
// "Retry-After: 2".
type fakeAPI struct {
	lim   *throttle.Limiter
	limit throttle.Limit
	start time.Time

	mu          sync.Mutex
	windowStart time.Time // zero: no maintenance yet
	windowEnd   time.Time
	ok          int
	overLimit   int            // 429s for going over the rate limit
	inWindow    map[string]int // 429s during maintenance, by host
	arrivals    []time.Time    // every request
}

func newFakeAPI(limit throttle.Limit) *fakeAPI {
	return &fakeAPI{
		lim:      throttle.NewLimiter(throttle.NewMemoryStore()),
		limit:    limit,
		start:    time.Now(),
		inWindow: make(map[string]int),
	}
}

// maintenance starts a window of d during which every request gets 429.
func (a *fakeAPI) maintenance(d time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.windowStart = time.Now()
	a.windowEnd = a.windowStart.Add(d)
}

func (a *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.arrivals = append(a.arrivals, now)
	if !now.Before(a.windowStart) && now.Before(a.windowEnd) {
		a.inWindow[r.Header.Get("X-Host")]++
		w.Header().Set("Retry-After", "2")
		http.Error(w, "down for maintenance", http.StatusTooManyRequests)
		return
	}
	res, err := a.lim.TryAcquire(context.Background(), "partner", a.limit, 1)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if !res.Allowed {
		a.overLimit++
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(res.RetryAfter.Seconds()))))
		http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
		return
	}
	a.ok++
	w.WriteHeader(http.StatusOK)
}

// apiStats is what the API saw.
type apiStats struct {
	ok, overLimit          int
	inWindow               map[string]int
	windowStart, windowEnd time.Duration // since the API started
	quietFrom, quietTo     time.Duration // the longest stretch without a request
}

func (a *fakeAPI) stats() apiStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := apiStats{ok: a.ok, overLimit: a.overLimit, inWindow: make(map[string]int)}
	for h, n := range a.inWindow {
		s.inWindow[h] = n
	}
	if !a.windowStart.IsZero() {
		s.windowStart, s.windowEnd = a.windowStart.Sub(a.start), a.windowEnd.Sub(a.start)
	}
	for i := 1; i < len(a.arrivals); i++ {
		if gap := a.arrivals[i].Sub(a.arrivals[i-1]); gap > s.quietTo-s.quietFrom {
			s.quietFrom, s.quietTo = a.arrivals[i-1].Sub(a.start), a.arrivals[i].Sub(a.start)
		}
	}
	return s
}
