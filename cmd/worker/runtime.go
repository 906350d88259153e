package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/limitspec"
	"github.com/sluicehq/sluice/throttle"
	"github.com/sluicehq/sluice/workers"
)

const (
	// runtimePoll is the backstop of the pub/sub: a worker that missed a
	// message reads the runtime limits again at least this often, so that
	// sluice set's "within a second" holds without the message. A read is
	// one HGETALL of a hash of one entry per runtime limit.
	runtimePoll = 500 * time.Millisecond
	// heartbeatEvery is how often a worker renews its heartbeat.
	heartbeatEvery = 5 * time.Second
	// grantsWindow is the span of the grants/s a heartbeat reports.
	grantsWindow = time.Minute
)

// applied is the limit a worker applies to one type now, and where it came from.
type applied struct {
	spec   limitspec.Spec
	source string // flag, file or runtime
}

// runtimeLimits applies the runtime limits of the fleet (sluice set) over the
// worker's own (flags and file), and publishes its heartbeat.
type runtimeLimits struct {
	ctl     *control.Control
	pool    *workers.Pool
	lim     *throttle.Limiter
	rates   *rates
	log     *slog.Logger
	id      string
	host    string
	version string // the build, for the heartbeat (cli.Version without the program's name)
	start   time.Time
	c       config

	mu      sync.Mutex
	base    map[string]applied // the worker's own limits, by type
	now     map[string]applied // what is applied, by type
	ignored map[string]string  // runtime specs already reported as not applicable, by type
	samples []sample           // runs per type over the last grantsWindow
}

type sample struct {
	at   time.Time
	runs map[string]int64
}

func newRuntimeLimits(ctl *control.Control, pool *workers.Pool, lim *throttle.Limiter, r *rates, limits []limit, c config, log *slog.Logger) *runtimeLimits {
	host, _ := os.Hostname()
	start := time.Now()
	rl := &runtimeLimits{
		ctl: ctl, pool: pool, lim: lim, rates: r, log: log, c: c,
		host: host, start: start, version: strings.TrimPrefix(cli.Version(prog), prog+" "), id: fmt.Sprintf("%s:%d:%d", host, os.Getpid(), start.UnixMilli()),
		base: make(map[string]applied), now: make(map[string]applied), ignored: make(map[string]string),
	}
	for _, l := range limits {
		src := "flag"
		if strings.HasPrefix(l.source, "limits file") {
			src = "file"
		}
		rl.base[l.spec.Name] = applied{spec: l.spec, source: src}
		rl.now[l.spec.Name] = rl.base[l.spec.Name]
	}
	return rl
}

// run applies runtime limits as they change (pub/sub, with a poll as
// backstop) and beats until ctx ends; it then removes the heartbeat.
func (rl *runtimeLimits) run(ctx context.Context) {
	sub := rl.ctl.Subscribe(ctx)
	defer sub.Close()
	changes := sub.Channel()
	poll := time.NewTicker(runtimePoll)
	defer poll.Stop()
	beat := time.NewTicker(heartbeatEvery)
	defer beat.Stop()
	rl.sync(ctx)
	rl.beat(ctx)
	for {
		select {
		case <-ctx.Done():
			gctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			_ = rl.ctl.Gone(gctx, rl.id)
			return
		case m := <-changes:
			if rl.ctl.IsReset(m) {
				// The bucket's tickets are void: its jobs sent back take new turns.
				rl.pool.Replan(m.Payload)
				continue
			}
			rl.sync(ctx)
		case <-poll.C:
			rl.sync(ctx)
		case <-beat.C:
			rl.beat(ctx)
		}
	}
}

// sync reads the runtime limits and applies what changed: a runtime limit
// over the worker's own, or the worker's own back when it is unset. A spec
// that does not make a valid policy is logged and not applied.
func (rl *runtimeLimits) sync(ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	entries, bad, err := rl.ctl.Limits(cctx)
	if err != nil {
		rl.log.Debug("runtime limits: cannot read them; keeping the ones applied", "err", err)
		return
	}
	rl.mu.Lock()
	defer rl.mu.Unlock()
	for typ, b := range bad {
		if rl.ignored[typ] != b.Err.Error() {
			rl.ignored[typ] = b.Err.Error()
			rl.log.Warn("runtime limit not applied", "type", typ, "err", b.Err)
		}
	}
	for typ, e := range entries {
		cur, ok := rl.now[typ]
		if !ok {
			if rl.ignored[typ] != e.Spec {
				rl.ignored[typ] = e.Spec
				rl.log.Warn("runtime limit not applied: this worker has no limit for the type to replace (give it one, or it does not run the type)",
					"type", typ, "spec", e.Spec, "set_by", e.By)
			}
			continue
		}
		sp, err := e.Parse()
		if err == nil && cur.source == "runtime" && cur.spec.String() == sp.String() {
			continue // applied already (compared as written by String: "5/s" is "5/s,burst=5")
		}
		if err == nil {
			err = rl.apply(sp)
		}
		if err != nil {
			if rl.ignored[typ] != e.Spec {
				rl.ignored[typ] = e.Spec
				rl.log.Warn("runtime limit not applied", "type", typ, "spec", e.Spec, "err", err)
			}
			continue
		}
		rl.now[typ] = applied{spec: sp, source: "runtime"}
		rl.log.Info("limit changed at runtime", "type", typ, "spec", e.Spec, "was", cur.spec.String(),
			"set_by", e.By, "set_at", e.At.Format(time.RFC3339))
	}
	for typ, cur := range rl.now {
		if _, still := entries[typ]; still || cur.source != "runtime" {
			continue
		}
		base := rl.base[typ]
		if err := rl.apply(base.spec); err != nil {
			rl.log.Error("cannot restore the worker's own limit", "type", typ, "err", err)
			continue
		}
		rl.now[typ] = base
		rl.log.Info("runtime limit unset: the worker's own limit applies again", "type", typ,
			"spec", base.spec.String(), "source", base.source)
	}
}

// apply gives the pool the policy of sp; rl.mu is held.
func (rl *runtimeLimits) apply(sp limitspec.Spec) error {
	if err := rl.pool.SetPolicy(sp.Name, sp.Policy); err != nil {
		return err
	}
	rl.rates.setLimit(sp.Name, sp.Policy)
	return nil
}

// current returns what is applied now, by type order.
func (rl *runtimeLimits) current() []applied {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	out := make([]applied, 0, len(rl.now))
	for _, a := range rl.now {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].spec.Name < out[j].spec.Name })
	return out
}

// beat publishes the heartbeat.
func (rl *runtimeLimits) beat(ctx context.Context) {
	now := time.Now()
	runs := rl.rates.runs()
	rl.mu.Lock()
	rl.samples = append(rl.samples, sample{at: now, runs: runs})
	for len(rl.samples) > 1 && now.Sub(rl.samples[1].at) >= grantsWindow {
		rl.samples = rl.samples[1:]
	}
	oldest := rl.samples[0]
	rl.mu.Unlock()

	st := rl.pool.Stats()
	h := control.Heartbeat{
		ID: rl.id, Host: rl.host, PID: os.Getpid(), Version: rl.version, Mode: rl.lim.Mode(), Queues: queueNames(rl.c.queues),
		Waiting: st.Waiting, Active: st.Active, Cooldowns: st.Cooldowns, Processed: st.Processed, Failed: st.Failed, Requeued: st.Requeued,
		Started: rl.start, Seen: now,
	}
	span := now.Sub(oldest.at).Seconds()
	waiting, byPrio := rl.pool.WaitingByPolicy(), rl.pool.WaitingByPriority()
	for _, a := range rl.current() {
		ls := control.LimitState{Type: a.spec.Name, Source: a.source, Waiting: waiting[a.spec.Name]}
		for i, n := range byPrio[a.spec.Name] {
			if n > 0 {
				if ls.WaitingByPriority == nil {
					ls.WaitingByPriority = make(map[string]int64)
				}
				ls.WaitingByPriority[strconv.Itoa(i+1)] = n
			}
		}
		ls.Spec, ls.Specs = control.SpecsOf(a.spec)
		if span > 0 {
			ls.Grants = float64(runs[a.spec.Name]-oldest.runs[a.spec.Name]) / span
		}
		h.Limits = append(h.Limits, ls)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := rl.ctl.Beat(cctx, h); err != nil {
		rl.log.Debug("heartbeat not written", "err", err)
	}
}
