package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
)

// ErrPoolClosed is returned by Start after Shutdown.
var ErrPoolClosed = errors.New("workers: pool is shut down")

// Pool runs asynq handlers, taking each job's tokens from its Policy's buckets
// before its handler runs. A job whose turn comes within its wait budget waits
// for it in the worker; one whose turn is further off goes back to its queue
// holding that turn (a ticket) and runs without asking again when it comes
// back; one throttled for longer than Config.Horizon is archived with the
// reason. An upstream 429 or 503 (an *UpstreamError from the handler) puts
// the bucket in cooldown for the whole fleet. Throttling is never a failure:
// it spends no retry and never archives a job before its horizon, whatever its
// MaxRetry.
//
// Register handlers with Handle or HandleFunc, then call Run, or Start and
// later Shutdown. A Pool runs once: it cannot be started again after Shutdown.
// Its methods are safe for concurrent use, except that every Handle call must
// come before Start.
type Pool struct {
	cfg     Config
	log     *slog.Logger
	rdb     redis.UniversalClient // the queues' Redis: the pool's own client
	srv     *asynq.Server
	client  *queue.Client
	tel     *telemetry
	stats   stats
	promote promoter // moves jobs sent back to come at a time of their own to pending then
	// malformed holds the names of the policies whose upstream's unreadable
	// rate-limit fields were warned of (warnMalformed).
	malformed sync.Map
	// unsettled holds the names of the policies whose jobs' real cost could
	// not be read from an answer, once warned of (warnUnsettled).
	unsettled sync.Map

	mu      sync.Mutex
	state   poolState
	routes  map[string]*route // read without mu once started: no writes after Start
	errs    []error           // from Handle, returned by Start
	names   map[string]*policy
	stopped chan struct{} // closed to end the status goroutine
	status  chan struct{} // closed when the status goroutine has ended

	closing  atomic.Bool  // Shutdown has begun
	aborts   atomic.Int64 // Unix ns when asynq's shutdown puts unfinished jobs back (abortAt); 0 until then
	wmu      sync.Mutex   // guards waiters and draining
	waiters  map[*waiter]struct{}
	draining bool
	stopCtx  context.Context // ends once the waiters are drained: jobs holding tickets go back
	stop     context.CancelFunc
	inflight sync.WaitGroup // jobs in the pool's hands (process)
	bg       sync.WaitGroup // the pool's own goroutines other than the status one (replan)
	once     sync.Once      // starts the shutdown
	done     chan struct{}  // closed when the shutdown is complete
}

type poolState int

const (
	stateNew poolState = iota
	stateRunning
	stateClosed
)

// route is what the pool does with one task type.
type route struct {
	h    asynq.Handler
	name string                 // the policy's name; "" for an unthrottled route
	pol  atomic.Pointer[policy] // nil: not throttled; SetPolicy swaps it while jobs run
	tel  *routeTelemetry

	st        routeStats      // the route's share of the pool's counters (StatsByPolicy)
	waits     keyWaits        // the longest wait per key since the last TakeWaits
	waiting   atomic.Int64    // jobs of the route waiting in this process now
	waitingBy [5]atomic.Int64 // the same by job priority, from 1
	// gaveBack wakes one job of the route waiting unbooked for tokens
	// (place) when a job's charge gave tokens back (see charge).
	gaveBack chan struct{}
}

// NewPool checks cfg and returns a Pool that is ready for Handle. It does no
// I/O: Start checks that the queues' Redis answers. The Pool opens its own
// connection to cfg.Redis, closed by Shutdown, which should therefore be
// called even if Start never was. cfg.Redis may be one server
// (asynq.RedisClientOpt), a Redis Cluster (asynq.RedisClusterClientOpt) or a
// master behind Sentinel (asynq.RedisFailoverClientOpt); on the last two the
// connection rides out a failover (see queue.FollowFailover).
func NewPool(cfg Config) (*Pool, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	rdb, ok := cfg.Redis.MakeRedisClient().(redis.UniversalClient)
	if !ok || rdb == nil {
		return nil, fmt.Errorf("workers: invalid Config: Redis: unsupported asynq.RedisConnOpt %T", cfg.Redis)
	}
	queue.FollowFailover(rdb)
	rdb.AddHook(newChooser(cfg.TaskCheckInterval, cfg.StrictPriority)) // a fetch finds the right member of a family at once (dequeue.go)
	stopCtx, stop := context.WithCancel(context.Background())
	p := &Pool{
		cfg:     cfg,
		log:     cfg.Logger,
		rdb:     rdb,
		client:  queue.NewClient(asynq.NewClientFromRedisClient(rdb)),
		tel:     newTelemetry(cfg.MeterProvider, cfg.TracerProvider),
		routes:  make(map[string]*route),
		names:   make(map[string]*policy),
		waiters: make(map[*waiter]struct{}),
		stopCtx: stopCtx,
		stop:    stop,
		done:    make(chan struct{}),
	}
	p.srv = asynq.NewServerFromRedisClient(rdb, p.asynqConfig())
	return p, nil
}

// Handle registers h for tasks of type taskType, throttled by pol; a nil pol
// means the tasks are not throttled (they still get the pool's handling of
// UpstreamError and queue.ThrottledError). The Policy is copied.
//
// A mistake (an empty type, a nil handler, a type registered twice, an invalid
// policy, or two policies of one name with different limits) is returned by
// Start. Handle panics if called after Start or Shutdown.
func (p *Pool) Handle(taskType string, h asynq.Handler, pol *Policy) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != stateNew {
		panic("workers: Handle called after Start or Shutdown")
	}
	rt, err := p.newRoute(taskType, h, pol)
	if err != nil {
		p.errs = append(p.errs, fmt.Errorf("workers: Handle(%q): %w", taskType, err))
		return
	}
	p.routes[taskType] = rt
}

// HandleFunc is shorthand for Handle(taskType, asynq.HandlerFunc(f), pol).
func (p *Pool) HandleFunc(taskType string, f func(context.Context, *asynq.Task) error, pol *Policy) {
	var h asynq.Handler
	if f != nil {
		h = asynq.HandlerFunc(f)
	}
	p.Handle(taskType, h, pol)
}

func (p *Pool) newRoute(taskType string, h asynq.Handler, pol *Policy) (*route, error) {
	switch {
	case taskType == "":
		return nil, errors.New("empty task type")
	case h == nil:
		return nil, errors.New("nil handler")
	case p.routes[taskType] != nil:
		return nil, errors.New("task type registered twice")
	}
	rt := &route{h: h, gaveBack: make(chan struct{}, 1)}
	if pol != nil {
		pp, err := newPolicy(*pol, p.cfg.MaxWait, p.cfg.Concurrency)
		if err != nil {
			return nil, err
		}
		if other := p.names[pp.Name]; other != nil && !sameLimits(other, pp) {
			return nil, fmt.Errorf("policy %q is already registered with other limits: one name is one set of buckets", pp.Name)
		}
		p.names[pp.Name] = pp
		rt.pol.Store(pp)
		rt.name = pp.Name
	}
	rt.tel = newRouteTelemetry(taskType, rt.name)
	return rt, nil
}

// SetPolicy replaces, while the pool runs, the policy of every task type
// registered under the policy named name: jobs that begin from then on take
// their turns under pol; jobs waiting in this pool for a turn booked under
// the old limits give it back and book a new one, and a ticket booked under
// them (here or on another host running the same change) is void when its
// job comes back, which then books a new turn. Jobs already sent back to
// their queues under the old limits are brought forward to do so at once
// (see replan), so that a raise reaches them now, not at their old turns.
// Turns booked under the old limits are otherwise left in the bucket: reset
// it (Limiter.Reset) for the new limits to start from a full bucket.
// pol.Name must be name or empty. It is how runtime limits reach a running
// pool (cmd/worker applies `sluice set` with it). The policy is checked as
// Handle checks it; an error leaves the old one in place.
func (p *Pool) SetPolicy(name string, pol Policy) error {
	if pol.Name == "" {
		pol.Name = name
	}
	if pol.Name != name {
		return fmt.Errorf("workers: SetPolicy(%q): the policy is named %q", name, pol.Name)
	}
	pp, err := newPolicy(pol, p.cfg.MaxWait, p.cfg.Concurrency)
	if err != nil {
		return fmt.Errorf("workers: SetPolicy(%q): %w", name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.names[name] == nil {
		return fmt.Errorf("workers: SetPolicy(%q): no task type is registered under a policy of that name", name)
	}
	old := p.names[name]
	p.names[name] = pp
	for _, rt := range p.routes {
		if rt.name == name {
			rt.pol.Store(pp)
		}
	}
	// Jobs waiting here for a turn booked under the old limits give it back
	// and book anew (see acquire); tickets booked under them are void when
	// their jobs come back (see redeem).
	p.wmu.Lock()
	for w := range p.waiters {
		if w.policy == name {
			w.cancel()
		}
	}
	p.wmu.Unlock()
	// Jobs sent back under the old limits come back to take a turn under
	// the new ones (see replan). Under p.mu: Shutdown waits for what it
	// starts once it has seen the pool closed.
	if old.fp != pp.fp && looser(old, pp) && p.state == stateRunning {
		p.replan(name, pp, true)
	}
	return nil
}

func sameLimits(a, b *policy) bool {
	return slices.EqualFunc(a.limits, b.limits, func(x, y NamedLimit) bool {
		return x.Name == y.Name && samePolicy(x.Limit, y.Limit)
	}) && a.slots == b.slots && samePolicy(a.global, b.global)
}

// Start checks that the queues' Redis answers and starts taking jobs. It
// returns the mistakes of earlier Handle calls, if any, without starting.
func (p *Pool) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch p.state {
	case stateRunning:
		return errors.New("workers: pool already started")
	case stateClosed:
		return ErrPoolClosed
	}
	if err := errors.Join(p.errs...); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := p.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("workers: queue store (asynq's Redis) unavailable: %w", err)
	}
	if err := p.srv.Start(asynq.HandlerFunc(p.process)); err != nil {
		return fmt.Errorf("workers: start asynq server: %w", err)
	}
	if p.cfg.StatusInterval > 0 || p.cfg.Hosts != nil {
		p.stopped, p.status = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(p.status)
			p.background(p.stopped)
		}()
	}
	p.state = stateRunning
	p.log.Info("workers: pool started", "concurrency", p.cfg.Concurrency, "queues", p.cfg.Queues, "task_types", len(p.routes))
	return nil
}

// startTimeout bounds Start's check of the queues' Redis.
const startTimeout = 5 * time.Second

// Run starts the pool, waits for ctx to end, then shuts the pool down, giving
// it ShutdownTimeout plus a few seconds. It returns Start's error, or
// Shutdown's, or nil.
func (p *Pool) Run(ctx context.Context) error {
	if err := p.Start(); err != nil {
		return err
	}
	<-ctx.Done()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), p.cfg.ShutdownTimeout+shutdownSlack)
	defer cancel()
	return p.Shutdown(sctx)
}
