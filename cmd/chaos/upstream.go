package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// upstream emulates a rate-limited third-party API for the fleet's
// http:request jobs. It enforces a token bucket of its own (GCRA, its quota
// and burst) and answers 429 with Retry-After beyond it; it announces its
// quota on every answer in IETF RateLimit-Policy / RateLimit fields; in a
// storm it answers every request 429. Each job's request takes a time drawn
// from the job's id, so that jobs are in flight when a worker dies. It
// records every request: its arrival, when its answer was written, the job
// and tenant from the URL, the answer, and the connection it came on, which
// is how a request is traced to the worker that sent it.
type upstream struct {
	srv   *http.Server
	ln    net.Listener
	burst int

	nextConn atomic.Int64

	mu      sync.Mutex
	quota   float64   // requests a second the bucket allows now
	tat     time.Time // the bucket's theoretical arrival time
	storm   time.Time // every request before this is refused
	stormRA int       // the storm's Retry-After, in seconds
	reqs    []request
	open    map[int]int64 // remote port → id of the open connection from it
}

// request is one request the upstream received.
type request struct {
	Start, End time.Time
	ID, Tenant string
	Status     int
	RetryAfter int   // seconds, on a 429
	Storm      bool  // refused by a storm rather than the bucket
	Conn       int64 // the connection it came on
}

type connKey struct{}

// upstreamBurst is the upstream's own bucket's burst.
const upstreamBurst = 6

func startUpstream(quota float64) (*upstream, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("upstream: %w", err)
	}
	u := &upstream{ln: ln, quota: quota, burst: upstreamBurst, open: make(map[int]int64)}
	u.srv = &http.Server{
		Handler:           http.HandlerFunc(u.serve),
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			id := u.nextConn.Add(1)
			u.mu.Lock()
			u.open[portOf(c.RemoteAddr())] = id
			u.mu.Unlock()
			return context.WithValue(ctx, connKey{}, id)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				u.mu.Lock()
				delete(u.open, portOf(c.RemoteAddr()))
				u.mu.Unlock()
			}
		},
	}
	go func() { _ = u.srv.Serve(ln) }()
	return u, nil
}

func portOf(a net.Addr) int {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.Port
	}
	return 0
}

// Port is the port the upstream listens on.
func (u *upstream) Port() int { return portOf(u.ln.Addr()) }

// URL is the address a job with the given id and tenant requests.
func (u *upstream) URL(id, tenant string) string {
	return fmt.Sprintf("http://%s/job?%s", u.ln.Addr(), url.Values{"id": {id}, "t": {tenant}}.Encode())
}

// Close stops the server.
func (u *upstream) Close() { _ = u.srv.Close() }

// SetQuota changes the rate the upstream's bucket allows.
func (u *upstream) SetQuota(q float64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.quota = q
}

// Storm refuses every request for d with the given Retry-After.
func (u *upstream) Storm(d time.Duration, retryAfter int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.storm, u.stormRA = time.Now().Add(d), retryAfter
}

// Conns returns the ids of the open connections from the given remote ports.
func (u *upstream) Conns(ports []int) []int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	var ids []int64
	for _, p := range ports {
		if id, ok := u.open[p]; ok {
			ids = append(ids, id)
		}
	}
	return ids
}

// Requests returns a copy of the log, in the order the requests arrived.
func (u *upstream) Requests() []request {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]request(nil), u.reqs...)
}

// Count returns the requests received so far and those answered 200.
func (u *upstream) Count() (all, ok int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, r := range u.reqs {
		if r.Status == http.StatusOK {
			ok++
		}
	}
	return len(u.reqs), ok
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	conn, _ := r.Context().Value(connKey{}).(int64)
	req := request{Start: time.Now(), ID: q.Get("id"), Tenant: q.Get("t"), Conn: conn}
	u.mu.Lock()
	req.Status, req.RetryAfter, req.Storm = u.decide(req.Start)
	u.announce(w.Header(), req.Start)
	i := len(u.reqs)
	u.reqs = append(u.reqs, req)
	u.mu.Unlock()

	if req.Status == http.StatusOK {
		select {
		case <-time.After(jobTime(req.ID)):
		case <-r.Context().Done():
		}
	} else {
		w.Header().Set("Retry-After", strconv.Itoa(req.RetryAfter))
	}
	// The end is recorded before the answer is written: the worker can
	// release the job's in-flight slot only after it reads the answer.
	u.mu.Lock()
	u.reqs[i].End = time.Now()
	u.mu.Unlock()
	w.WriteHeader(req.Status)
	fmt.Fprintln(w, http.StatusText(req.Status))
}

// decide answers a request arriving at now; u.mu is held.
func (u *upstream) decide(now time.Time) (status, retryAfter int, storm bool) {
	if now.Before(u.storm) {
		return http.StatusTooManyRequests, u.stormRA, true
	}
	interval := time.Duration(float64(time.Second) / u.quota)
	tat := u.tat
	if tat.Before(now) {
		tat = now
	}
	next := tat.Add(interval)
	if ahead := next.Sub(now) - time.Duration(u.burst)*interval; ahead > 0 {
		return http.StatusTooManyRequests, int(math.Ceil(ahead.Seconds())), false
	}
	u.tat = next
	return http.StatusOK, 0, false
}

// announce writes the bucket's quota and what is left of it; u.mu is held.
func (u *upstream) announce(h http.Header, now time.Time) {
	interval := time.Duration(float64(time.Second) / u.quota)
	ahead := max(u.tat.Sub(now), 0)
	left := max(u.burst-int(ahead/interval), 0)
	h.Set("RateLimit-Policy", fmt.Sprintf(`"default";q=%d;w=1`, int(u.quota)))
	h.Set("RateLimit", fmt.Sprintf(`"default";r=%d;t=%d`, left, int(math.Ceil(ahead.Seconds()))))
}

// jobTime is how long the upstream takes over a job's request: 20 to 120 ms,
// one job in twenty 600 ms, drawn from the id so that a job takes the same
// time every run.
func jobTime(id string) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	v := h.Sum32()
	if v%20 == 0 {
		return 600 * time.Millisecond
	}
	return time.Duration(20+v/20%101) * time.Millisecond
}
