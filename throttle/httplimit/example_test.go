package httplimit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/throttle/httplimit"
)

func ExampleMiddleware() {
	// A memory store for the example; replicas share throttle.NewRedisStore(rdb).
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	perMinute := throttle.Limit{Rate: 2, Period: time.Minute, Burst: 2}
	m := httplimit.New(lim, perMinute,
		httplimit.WithName("per-minute"),
		// Callers with an API key are limited per key, others per address.
		httplimit.WithKey(httplimit.FirstOf(httplimit.ByHeader("X-API-Key"), httplimit.ByIP)))
	if err := m.Err(); err != nil {
		fmt.Println(err)
		return
	}
	h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "hello")
	}))

	for i := range 3 {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if i == 0 {
			fmt.Println("RateLimit-Policy:", rec.Header().Get("RateLimit-Policy"))
		}
		fmt.Println(rec.Code, "RateLimit:", rec.Header().Get("RateLimit"))
		if ra := rec.Header().Get("Retry-After"); ra != "" {
			fmt.Println("Retry-After:", ra)
		}
	}
	// Output:
	// RateLimit-Policy: "per-minute";q=2;w=60
	// 200 RateLimit: "per-minute";r=1;t=30
	// 200 RateLimit: "per-minute";r=0;t=60
	// 429 RateLimit: "per-minute";r=0;t=30
	// Retry-After: 30
}

func ExampleByForwardedIP() {
	// Behind a load balancer in 10.0.0.0/8: its X-Forwarded-For is believed,
	// anyone else's is not.
	key := httplimit.ByForwardedIP(netip.MustParsePrefix("10.0.0.0/8"))

	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("X-Forwarded-For", "192.0.2.66, 203.0.113.9") // 192.0.2.66: written by the client
	r.RemoteAddr = "10.0.0.7:41000"
	k, _ := key(r)
	fmt.Println(k)

	r.RemoteAddr = "198.51.100.4:41000" // not the load balancer
	k, _ = key(r)
	fmt.Println(k)
	// Output:
	// ip:203.0.113.9
	// ip:198.51.100.4
}

func ExampleTransport() {
	// A third-party API that answers the first request 429, Retry-After: 1.
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	}))
	defer api.Close()

	// Every process built like this shares the bucket and its cooldowns when
	// the Limiter's store is Redis.
	lim := throttle.NewLimiter(throttle.NewMemoryStore())
	client := &http.Client{Transport: &httplimit.Transport{
		Limiter: lim,
		Limit:   throttle.Limit{Rate: 10, Period: time.Second, Burst: 5},
	}}

	resp, err := client.Get(api.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)

	u, _ := url.Parse(api.URL)
	left, _ := lim.CooldownLeft(context.Background(), u.Host) // the bucket is the host
	fmt.Println("cooling down:", left > 0)

	// The next request waits out the cooldown before it is sent.
	start := time.Now()
	resp, err = client.Get(api.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, time.Since(start) >= 900*time.Millisecond)
	// Output:
	// 429
	// cooling down: true
	// 200 true
}
