package integration

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/httpjob"
)

// upstream is a fake third-party API for http:request jobs, on a loopback
// httptest server. It can enforce a token bucket of its own and answer 429
// with Retry-After beyond it, refuse a window of requests on demand, and
// answer slowly. It records every request: when it arrived, what it was
// answered, and the id and bucket from the URL's query (?id=…&b=…).
type upstream struct {
	srv *httptest.Server
	cfg upstreamConfig

	mu      sync.Mutex
	tat     time.Time // the enforced bucket's theoretical arrival time (GCRA)
	first   time.Time // the first request's arrival, for Schedule
	reqs    []request
	refuse  refusal
	served  int // requests answered so far, for refusal.after
	started bool
	llm     llmState
}

// upstreamConfig says how an upstream behaves. The zero value answers every
// request 200 at once.
type upstreamConfig struct {
	// Rate and Burst, if Rate > 0, make the upstream enforce a token bucket
	// of Rate requests per second holding Burst, answering 429 with
	// Retry-After to requests beyond it.
	Rate  float64
	Burst int
	// Jitter is how much earlier than the bucket allows a request may arrive
	// and still pass, plus the worst lateness Probe has seen so far, if set.
	// It stands for the scheduling and loopback jitter between a grant in
	// Redis and the request's arrival here: a request that arrives late,
	// followed by others on time, looks here like a token taken early. It
	// is no slack in the rate: a fleet granting faster than Rate runs past
	// it within a few requests.
	Jitter time.Duration
	Probe  *jitterProbe
	// Delay is how long the upstream takes to answer each request.
	Delay time.Duration
	// Announce, if set, puts the enforced bucket's quota on every answer:
	// "ietf" as RateLimit-Policy / RateLimit fields, "x" as X-RateLimit-*,
	// or in the dialect of an API (dialect_test.go): "openai", "anthropic",
	// "github", "discord", "shopify", which also say a refusal their way.
	Announce string
	// Schedule, if set, changes the enforced Rate over time: each step's
	// rate applies from its offset after the first request.
	Schedule []rateStep
	// LLM, if set, makes the upstream an LLM API limiting tokens, which it
	// charges max_tokens up front and settles at usage (llm_test.go).
	LLM *llmConfig
}

// rateStep is a rate the upstream enforces from At after its first request.
type rateStep struct {
	At   time.Duration
	Rate float64
}

// rateAt is the rate the upstream enforces at now; u.mu is held.
func (u *upstream) rateAt(now time.Time) float64 {
	rate := u.cfg.Rate
	for _, st := range u.cfg.Schedule {
		if u.started && now.Sub(u.first) >= st.At {
			rate = st.Rate
		}
	}
	return rate
}

// refusal is a window of requests answered 429 on demand.
type refusal struct {
	after      int           // the window opens at the first request after this many were answered
	window     time.Duration // and lasts this long
	retryAfter string        // the Retry-After header of each 429
	armed      bool
	opened     time.Time // zero until the window opens
}

// request is one request the upstream received.
type request struct {
	At     time.Time
	Status int
	ID     string // the URL's "id" query parameter
	Bucket string // the URL's "b" query parameter
	Used   int    // an LLM upstream's: the tokens the request used
}

func newUpstream(tb testing.TB, cfg upstreamConfig) *upstream {
	tb.Helper()
	u := &upstream{cfg: cfg}
	u.srv = httptest.NewServer(http.HandlerFunc(u.serve))
	tb.Cleanup(u.srv.Close)
	return u
}

// URL returns the address of a job with the given id in bucket b.
func (u *upstream) URL(id, b string) string {
	q := url.Values{}
	if id != "" {
		q.Set("id", id)
	}
	if b != "" {
		q.Set("b", b)
	}
	return u.srv.URL + "/job?" + q.Encode()
}

// Payload returns the http:request payload of a GET for a job with the given id in bucket b.
func (u *upstream) Payload(tb testing.TB, id, b string) string {
	tb.Helper()
	p, err := json.Marshal(httpjob.Request{URL: u.URL(id, b), Method: http.MethodGet})
	if err != nil {
		tb.Fatalf("marshal payload: %v", err)
	}
	return string(p)
}

// RefuseWindow makes the upstream answer 429 with the given Retry-After to
// every request in a window of length window, which opens at the first
// request after the next after requests have been answered.
func (u *upstream) RefuseWindow(after int, window time.Duration, retryAfter string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.refuse = refusal{after: u.served + after, window: window, retryAfter: retryAfter, armed: true}
}

// Refused returns when the refusal window opened, zero if it has not.
func (u *upstream) Refused() time.Time {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.refuse.opened
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	if u.cfg.LLM != nil {
		u.serveLLM(w, r)
		return
	}
	q := r.URL.Query()
	status, retryAfter, wait, now := u.decide()
	u.mu.Lock()
	u.reqs = append(u.reqs, request{At: now, Status: status, ID: q.Get("id"), Bucket: q.Get("b")})
	u.mu.Unlock()

	if d := u.cfg.Delay; d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
		}
	}
	if d, ok := dialects[u.cfg.Announce]; ok && u.cfg.Rate > 0 {
		u.speak(w, d, now, status, retryAfter, wait)
		return
	}
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	u.announce(w.Header(), now)
	w.WriteHeader(status)
	fmt.Fprintln(w, http.StatusText(status))
}

// decide is the answer to a request that arrives now: 200, or 429 and a
// Retry-After, and the wait it rounds up (0 in a refusal window), and the
// instant it was decided at. The instant is read under the lock, so that
// the decisions are taken in the order of their instants: read before it,
// a request whose goroutine was delayed on a loaded host would be judged
// at an instant earlier than a decision already taken after it, as no
// server judges one.
func (u *upstream) decide() (status int, retryAfter string, wait time.Duration, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	now = time.Now()
	defer func() { u.served++ }()

	if f := &u.refuse; f.armed && u.served >= f.after {
		if f.opened.IsZero() {
			f.opened = now
		}
		if now.Before(f.opened.Add(f.window)) {
			return http.StatusTooManyRequests, f.retryAfter, 0, now
		}
		f.armed = false
	}
	if u.cfg.Rate <= 0 {
		return http.StatusOK, "", 0, now
	}
	if !u.started {
		u.started, u.tat, u.first = true, now, now
	}
	interval := time.Duration(float64(time.Second) / u.rateAt(now))
	tat := u.tat
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	if next.Sub(now) > time.Duration(u.cfg.Burst)*interval+u.cfg.Jitter+u.cfg.Probe.Worst() {
		wait := next.Sub(now) - time.Duration(u.cfg.Burst)*interval
		return http.StatusTooManyRequests, strconv.Itoa(int(wait.Seconds()) + 1), wait, now
	}
	u.tat = next
	return http.StatusOK, "", 0, now
}

// Requests returns a copy of every request received so far, in arrival order.
func (u *upstream) Requests() []request {
	u.mu.Lock()
	defer u.mu.Unlock()
	rs := make([]request, len(u.reqs))
	copy(rs, u.reqs)
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].At.Before(rs[j].At) })
	return rs
}

// Count returns how many requests were answered with status.
func (u *upstream) Count(status int) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, r := range u.reqs {
		if r.Status == status {
			n++
		}
	}
	return n
}

// byStatus counts requests by their answer.
func byStatus(rs []request) map[int]int {
	m := make(map[int]int)
	for _, r := range rs {
		m[r.Status]++
	}
	return m
}

// okByID counts, for each job id, the requests answered 200.
func okByID(rs []request) map[string]int {
	m := make(map[string]int)
	for _, r := range rs {
		if r.Status == http.StatusOK {
			m[r.ID]++
		}
	}
	return m
}

// span is the time from the first to the last request in rs, which must be
// sorted by arrival; 0 for fewer than two.
func span(rs []request) time.Duration {
	if len(rs) < 2 {
		return 0
	}
	return rs[len(rs)-1].At.Sub(rs[0].At)
}

// excess checks arrivals against a token bucket of rate per second holding
// burst: it returns the largest amount, in tokens, by which any stretch of
// arrivals [a_i, a_j] exceeded burst + rate·(a_j − a_i), and where. A value
// ≤ 0 means every arrival conformed. at must be sorted.
//
// It runs GCRA over the arrivals, each taking a token whatever happened:
// after arrival j the theoretical arrival time is max over i ≤ j of
// a_i + (j−i+1)/rate, so tat_j − a_j ≤ burst/rate holds for every j exactly
// when (j−i+1) ≤ burst + rate·(a_j − a_i) holds for every window.
func excess(at []time.Time, rate float64, burst int) (worst float64, where int) {
	interval := float64(time.Second) / rate
	var tat float64 // ns since at[0]
	worst = -float64(burst)
	for j, a := range at {
		t := float64(a.Sub(at[0]))
		tat = max(tat, t) + interval
		if e := (tat-t)/interval - float64(burst); e > worst {
			worst, where = e, j
		}
	}
	return worst, where
}

// announce writes the enforced bucket's quota and what is left of it at now,
// in the style cfg.Announce names.
func (u *upstream) announce(h http.Header, now time.Time) {
	if u.cfg.Announce == "" || u.cfg.Rate <= 0 {
		return
	}
	u.mu.Lock()
	rate := u.rateAt(now)
	interval := time.Duration(float64(time.Second) / rate)
	ahead := max(u.tat.Sub(now), 0)
	u.mu.Unlock()
	left := max(u.cfg.Burst-int(ahead/interval)-1, 0)
	reset := int(math.Ceil(ahead.Seconds()))
	switch u.cfg.Announce {
	case "ietf":
		h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=1`, int(rate)))
		h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, left, reset))
	case "x":
		h.Set("X-RateLimit-Limit", strconv.Itoa(int(rate)))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(left))
		h.Set("X-RateLimit-Reset", strconv.Itoa(reset))
	}
}
