package integration

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/sluicehq/sluice/internal/redistest"
)

// soakFor makes TestSoak run for about this long instead of its short form:
// go test ./integration/ -run Soak -soak 5m. SLUICE_SOAK=long means 5m.
var soakFor = flag.Duration("soak", 0, "run TestSoak for about this long (default: a short form of about 25 s)")

const (
	soakShort   = 25 * time.Second // the short form CI runs
	soakLong    = 5 * time.Minute  // SLUICE_SOAK=long
	soakWorkers = 3
	soakSlots   = 40
	soakTenants = 6
	// soakRate and soakBurst are each tenant's bucket: six of them make 900
	// jobs a second for the fleet, which three workers on two cores keep up
	// with, so that the buckets, not the machine, set the pace.
	soakRate  = 150.0
	soakBurst = 20
	// soakJitter is the lateness allowed to a request between its grant in
	// Redis and its arrival at the upstream, on top of the worst scheduling
	// delay a jitterProbe measures during the run: a worker's timer firing
	// late, a scheduler busy with the other processes, the loopback. A
	// request that arrives late after others that did not looks, at the
	// upstream, like a token taken early, so this is the only slack the
	// check allows. On a quiet machine the whole allowance is about 11 ms,
	// under 2 tokens at 150/s, against a burst of 20 and thousands of
	// tokens per bucket.
	soakJitter = 10 * time.Millisecond
)

// soakDuration is how long TestSoak's buckets should keep the fleet busy.
func soakDuration() time.Duration {
	switch {
	case *soakFor > 0:
		return *soakFor
	case os.Getenv("SLUICE_SOAK") == "long":
		return soakLong
	}
	return soakShort
}

// TestSoak runs several worker processes through tens of thousands of
// Acquires on a few buckets (one per tenant, from a key template over the
// task's sluice-key header) and checks, from the upstream's arrival times,
// that no bucket ever granted more than Burst + Rate·elapsed (less the
// documented jitter), that nothing failed, and that every job ran exactly
// once (nothing is killed here, so at-least-once means once).
func TestSoak(t *testing.T) {
	t.Parallel()
	tenants := make([]string, soakTenants)
	for i := range tenants {
		tenants[i] = fmt.Sprintf("tenant-%c", 'a'+i)
	}
	perTenant := int(soakRate * soakDuration().Seconds())
	probe := startJitterProbe(t)
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	fleet := startFleet(t, srv, insp, soakWorkers, "--concurrency", strconv.Itoa(soakSlots),
		"--limit", fmt.Sprintf("http:request=%g/s,burst=%d,key={header.sluice-key}", soakRate, soakBurst))

	// One enqueue command per tenant, at once, so that the tenants' jobs
	// are interleaved on the queue.
	probe.Reset()
	start := time.Now()
	var wg sync.WaitGroup
	for _, tn := range tenants {
		wg.Add(1)
		go func() {
			defer wg.Done()
			enqueue(t, srv.URL(), "--type", "http:request", "--count", strconv.Itoa(perTenant), "--key", tn,
				"--payload", up.Payload(t, "", tn))
		}()
	}
	wg.Wait()
	enqueued := time.Since(start)
	qi := waitDrained(t, insp, soakDuration()*3+30*time.Second)
	stats := stopFleet(t, fleet, stopTimeout)

	rs := up.Requests()
	byBucket := make(map[string][]time.Time)
	for _, r := range rs {
		if r.Status == http.StatusOK {
			byBucket[r.Bucket] = append(byBucket[r.Bucket], r.At)
		}
	}
	jitter := soakJitter + probe.Worst()
	allowed := soakRate * jitter.Seconds()
	t.Logf("soak: %d jobs (%d per bucket, %d buckets of %g/s burst %d) through %d workers x %d slots; enqueued in %v; upstream answers %v; requeued %d; jitter allowed %v (worst scheduling delay %v)",
		len(rs), perTenant, len(tenants), soakRate, soakBurst, soakWorkers, soakSlots, enqueued.Round(time.Millisecond), byStatus(rs), stats.Requeued,
		jitter, probe.Worst())
	for _, tn := range tenants {
		at := byBucket[tn]
		if !assert.Len(t, at, perTenant, "requests of %s answered 200: each job once", tn) || len(at) < 2 {
			continue
		}
		elapsed := at[len(at)-1].Sub(at[0])
		achieved := float64(len(at)-soakBurst) / elapsed.Seconds()
		worst, where := excess(at, soakRate, soakBurst)
		t.Logf("soak: %s: %d grants in %.3fs, %.1f/s of %g/s (%.1f%%); worst: %.2f tokens over Burst + Rate*elapsed at grant %d (allowed %.1f for jitter)",
			tn, len(at), elapsed.Seconds(), achieved, soakRate, 100*achieved/soakRate, worst, where, allowed)
		assert.LessOrEqual(t, worst, allowed, "%s: tokens granted beyond Burst + Rate*elapsed", tn)
	}
	assert.Equal(t, int64(0), stats.Failed, "jobs that failed")
	assert.Equal(t, int64(0), stats.Archived, "jobs the workers archived")
	assert.Equal(t, int64(len(tenants)*perTenant), stats.Processed, "jobs the workers processed")
	assert.Equal(t, 0, qi.Archived, "archived tasks")
}
