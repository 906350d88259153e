package workers

import (
	"strings"
	"sync"
	"time"
)

// maxWaitKeys bounds the keys whose longest wait a route keeps between two
// TakeWaits: beyond it, the shortest waits are dropped.
const maxWaitKeys = 1000

// keyWaits is the longest wait of each key of one route since the last
// TakeWaits. It is safe for concurrent use.
type keyWaits struct {
	mu sync.Mutex
	m  map[string]time.Duration
}

// add keeps d as key's wait if it is its longest; with maxWaitKeys keys
// kept, a new key takes the place of the shortest wait if it is longer.
func (w *keyWaits) add(key string, d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = make(map[string]time.Duration)
	}
	if old, ok := w.m[key]; ok {
		w.m[key] = max(old, d)
		return
	}
	if len(w.m) >= maxWaitKeys {
		short, least := "", time.Duration(-1)
		for k, v := range w.m {
			if least < 0 || v < least {
				short, least = k, v
			}
		}
		if d <= least {
			return
		}
		delete(w.m, short)
	}
	w.m[key] = d
}

// take returns the waits kept and starts afresh.
func (w *keyWaits) take() map[string]time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.m
	w.m = nil
	return m
}

// started records job j's wait as its handler starts: the time since it was
// enqueued, under the key its policy derives for it (the tenant a fair
// limit shares its global bucket by). A job enqueued without sluice's
// header, unthrottled, or of a policy without a key template (no
// tenants: one key) is not recorded.
func (p *Pool) started(j *job) {
	if j.pol == nil || j.pol.Key == nil || j.meta.EnqueuedAt.IsZero() || len(j.buckets) == 0 {
		return
	}
	j.rt.waits.add(j.tenant(), max(time.Since(j.meta.EnqueuedAt), 0))
}

// tenant is the key job j's policy derived for it: its own bucket's key
// without the policy's part (BucketKey), the tenant of Limiter.Shares.
func (j *job) tenant() string {
	name := ""
	if len(j.pol.limits) > 0 {
		name = j.pol.limits[0].Name
	}
	return strings.TrimPrefix(j.key, BucketKey(j.pol.Policy, "", name))
}

// TakeWaits returns, by policy name and then by key (the key each policy
// derives from a job: the tenant its fair share is kept by; the policy's
// name when it has no Key), the longest time a job of that key had waited
// since it was enqueued when its handler started, over the jobs that
// started since the previous call, and starts afresh. At most 1000 keys are
// kept per policy between calls, the longest waits. Jobs enqueued without
// sluice's headers (not by queue.Client) are not counted; policies with no
// job started are left out. It is safe to call from any goroutine.
func (p *Pool) TakeWaits() map[string]map[string]time.Duration {
	out := make(map[string]map[string]time.Duration)
	for _, rt := range p.routes {
		if rt.name == "" {
			continue
		}
		m := rt.waits.take()
		if len(m) == 0 {
			continue
		}
		into := out[rt.name]
		if into == nil {
			out[rt.name] = m
			continue
		}
		for k, d := range m {
			into[k] = max(into[k], d)
		}
	}
	return out
}
