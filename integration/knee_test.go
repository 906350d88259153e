package integration

import (
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"
)

// kneeUpstream is a service that slows down instead of refusing: it serves
// C requests at once in S each and queues the rest, first come first
// served, so that latency grows with the queue; beyond a queue of 2·C it
// answers 503. C can change while it runs. It records every answer.
type kneeUpstream struct {
	srv *httptest.Server
	s   time.Duration

	mu      sync.Mutex
	c       int
	active  int
	waiting []chan struct{} // FIFO
	answers []kneeAnswer
	start   time.Time

	// refuse, if positive, answers that many requests 429 with
	// Retry-After: 1 (an upstream's rate refusal), once served passes.
	refuse, served int
	// in and most count each bucket's requests in it (?b=…) now, and the
	// most at once since most was last cleared.
	in, most map[string]int
}

type kneeAnswer struct {
	at      time.Duration // since start, when answered
	latency time.Duration
	status  int
}

func newKneeUpstream(tb testing.TB, c int, s time.Duration) *kneeUpstream {
	u := &kneeUpstream{c: c, s: s, start: time.Now()}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	tb.Cleanup(u.srv.Close)
	return u
}

// SetC changes how many requests it serves at once; more waiting ones start at once.
func (u *kneeUpstream) SetC(c int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.c = c
	u.admit()
}

// admit starts waiting requests while there is room. u.mu is held.
func (u *kneeUpstream) admit() {
	for u.active < u.c && len(u.waiting) > 0 {
		ch := u.waiting[0]
		u.waiting = u.waiting[1:]
		u.active++
		close(ch)
	}
}

func (u *kneeUpstream) serve(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	b := r.URL.Query().Get("b")
	u.mu.Lock()
	if u.in == nil {
		u.in, u.most = map[string]int{}, map[string]int{}
	}
	if u.refuse > 0 && u.served > 0 {
		u.refuse--
		u.record(arrived, http.StatusTooManyRequests)
		u.mu.Unlock()
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	u.in[b]++
	u.most[b] = max(u.most[b], u.in[b])
	defer func() {
		u.mu.Lock()
		u.in[b]--
		u.mu.Unlock()
	}()
	if u.active < u.c && len(u.waiting) == 0 {
		u.active++
		u.mu.Unlock()
	} else if len(u.waiting) >= 2*u.c {
		u.record(arrived, http.StatusServiceUnavailable)
		u.mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	} else {
		ch := make(chan struct{})
		u.waiting = append(u.waiting, ch)
		u.mu.Unlock()
		<-ch
	}
	time.Sleep(u.s)
	u.mu.Lock()
	u.active--
	u.admit()
	u.served++
	u.record(arrived, http.StatusOK)
	u.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// record notes an answer to a request that arrived then. u.mu is held.
func (u *kneeUpstream) record(arrived time.Time, status int) {
	now := time.Now()
	u.answers = append(u.answers, kneeAnswer{at: now.Sub(u.start), latency: now.Sub(arrived), status: status})
}

// between returns the answers given from t0 to t1 since start.
func (u *kneeUpstream) between(t0, t1 time.Duration) []kneeAnswer {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []kneeAnswer
	for _, a := range u.answers {
		if a.at >= t0 && a.at < t1 {
			out = append(out, a)
		}
	}
	return out
}

// kneeFigures are the figures of a span of answers: 200s per second, the
// 99th percentile and median latency of the 200s, and the share of 503s.
type kneeFigures struct {
	okPerS      float64
	p50, p99    time.Duration
	unavailable float64
	n           int
}

func figuresOf(as []kneeAnswer, over time.Duration) kneeFigures {
	var lat []time.Duration
	bad := 0
	for _, a := range as {
		if a.status == http.StatusOK {
			lat = append(lat, a.latency)
		} else {
			bad++
		}
	}
	f := kneeFigures{n: len(as), okPerS: float64(len(lat)) / over.Seconds()}
	if len(as) > 0 {
		f.unavailable = float64(bad) / float64(len(as))
	}
	if len(lat) > 0 {
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		f.p50 = lat[len(lat)/2]
		f.p99 = lat[min(len(lat)-1, len(lat)*99/100)]
	}
	return f
}

// mostAndClear returns the most requests of each bucket in it at once
// since the last call, and starts counting again.
func (u *kneeUpstream) mostAndClear() map[string]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := u.most
	u.most = map[string]int{}
	return out
}

// count returns how many answers had status.
func (u *kneeUpstream) count(status int) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, a := range u.answers {
		if a.status == status {
			n++
		}
	}
	return n
}
