package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"
)

// injector applies the fault schedule to the run, each fault in its own
// goroutine at its time, and records what happened. Faults on one resource
// are serialized even when the run falls behind the schedule.
type injector struct {
	r     *runState
	wg    sync.WaitGroup
	locks sync.Map // resource → *sync.Mutex
}

func (in *injector) lock(res string) func() {
	m, _ := in.locks.LoadOrStore(res, new(sync.Mutex))
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// run starts each fault of plan at its time until ctx ends; Wait waits for
// the faults started to be over (their recovery done).
func (in *injector) run(ctx context.Context, plan []fault) {
	for _, f := range plan {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(in.r.start.Add(f.At))):
		}
		in.wg.Add(1)
		go func() {
			defer in.wg.Done()
			in.apply(f)
		}()
	}
}

func (in *injector) Wait() { in.wg.Wait() }

func (in *injector) apply(f fault) {
	r := in.r
	res := f.Kind.resource()
	if f.Kind == faultKill {
		res = fmt.Sprintf("worker%d", f.Worker)
	}
	defer in.lock(res)()
	switch f.Kind {
	case faultKill:
		in.kill(f)
	case faultPause:
		from := time.Now()
		r.say("SIGSTOP redis for %v", f.For)
		err := pauseRedis(r.srv, f.For)
		in.outage(from, "SIGCONT redis", err)
	case faultRestart:
		from := time.Now()
		r.say("SIGKILL redis, down %v", f.For)
		err := restartRedis(r.srv, f.For)
		in.outage(from, "redis restarted from its AOF", err)
	case faultPubSub:
		err := redisCommand(r.rdb, "client", "kill", "type", "pubsub")
		r.rec.add(func(rec *record) { rec.msgLosses = append(rec.msgLosses, time.Now()) })
		in.done("CLIENT KILL TYPE pubsub", err)
	case faultFlush:
		in.done("SCRIPT FLUSH", redisCommand(r.rdb, "script", "flush"))
	case faultStorm:
		r.up.Storm(f.For, int(f.Value))
		r.say("429 storm for %v, Retry-After %gs", f.For, f.Value)
		time.Sleep(f.For)
	case faultQuota:
		r.up.SetQuota(f.Value)
		r.say("upstream quota %g/s for %v", f.Value, f.For)
		time.Sleep(f.For)
		r.up.SetQuota(upstreamQuota)
		r.say("upstream quota back to %g/s", upstreamQuota)
	case faultLower, faultRaise:
		spec := lowSpec
		if f.Kind == faultRaise {
			spec = highSpec
		}
		in.setLimit(spec)
		time.Sleep(f.For)
		in.setLimit("")
	case faultCooldown:
		start := time.Now()
		_, err := r.cli.Run("cooldown", "tenant:"+f.Tenant, f.For.String(), "--type", jobType)
		c := cooldown{Start: start, End: time.Now(), For: f.For, Tenant: f.Tenant}
		if err == nil {
			r.rec.add(func(rec *record) { rec.cooldowns = append(rec.cooldowns, c) })
		}
		in.done(fmt.Sprintf("sluice cooldown tenant:%s %v", f.Tenant, f.For), err)
		time.Sleep(time.Until(start.Add(f.For)))
	}
}

// kill SIGKILLs a worker, noting first the connections it has open to the
// upstream, and restarts it f.For later.
func (in *injector) kill(f fault) {
	r := in.r
	w := r.fleet[f.Worker]
	k := kill{Worker: w.name, Known: true}
	pid, at, err := w.Kill(func(pid int) {
		ports, perr := localPorts(pid, r.up.Port())
		if perr != nil {
			k.Known = false
			return
		}
		k.Conns = r.up.Conns(ports)
	})
	if err != nil {
		in.done("SIGKILL "+w.name, err)
		return
	}
	k.Pid, k.At = pid, at
	inFlight := 0
	for _, q := range r.up.Requests() {
		if q.End.IsZero() && q.Status == http.StatusOK && slices.Contains(k.Conns, q.Conn) {
			inFlight++
		}
	}
	r.rec.add(func(rec *record) { rec.kills = append(rec.kills, k) })
	what := fmt.Sprintf("%d connections to the upstream, %d requests in flight", len(k.Conns), inFlight)
	if !k.Known {
		what = "its connections unknown (no /proc)"
	}
	r.say("SIGKILL %s (pid %d): %s", w.name, pid, what)
	time.Sleep(f.For)
	if err := w.Restart(); err != nil {
		in.done("restart "+w.name, err)
		return
	}
	r.say("restarted %s (pid %d)", w.name, w.Pid())
}

// setLimit runs sluice set spec, or sluice unset for "", and records the change.
func (in *injector) setLimit(spec string) {
	r := in.r
	b := r.base
	args := []string{"unset", jobType}
	what := "sluice unset " + jobType
	if spec != "" {
		var err error
		if b, err = boundsOf(spec); err != nil {
			panic(err) // the run's own specs parse: a test checks them
		}
		args = []string{"set", spec}
		what = "sluice set " + spec
	}
	start := time.Now()
	_, err := r.cli.Run(args...)
	c := limitChange{Start: start, End: time.Now(), Bounds: b, Failed: err != nil}
	r.rec.add(func(rec *record) { rec.limits = append(rec.limits, c) })
	in.done(what, err)
}

// outage records Redis unavailable from from until now.
func (in *injector) outage(from time.Time, what string, err error) {
	to := time.Now()
	in.r.rec.add(func(rec *record) {
		rec.outages = append(rec.outages, span{from, to})
		rec.msgLosses = append(rec.msgLosses, from, to)
	})
	in.done(what, err)
}

// done says what a fault did, or records that it failed.
func (in *injector) done(what string, err error) {
	if err != nil {
		in.r.rec.add(func(rec *record) { rec.problems = append(rec.problems, what+": "+err.Error()) })
		in.r.say("%s: FAILED: %v", what, err)
		return
	}
	in.r.say("%s", what)
}
