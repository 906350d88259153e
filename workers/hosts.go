package workers

import (
	"errors"
	"fmt"
	"maps"
	"sync/atomic"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/queue"
)

// Hosts counts the worker processes of a fleet, for throttle.FailLocal: give
// its Hosts method to throttle.WithHosts, and while the limiter's Redis is
// down each process takes 1/N of every limit, N being this count.
//
// It reads the count from asynq's own heartbeats: every running asynq server
// (one per Pool) keeps its record in the queue's Redis, refreshed every 5 s
// and expiring when its process stops beating. A process counts if it serves
// any of the queues given to NewHosts. The count is read while the queue's
// Redis answers and kept when it does not, so a limiter outage finds the last
// one. Before the first read it is 0, and FailLocal then fails closed.
//
// A Pool whose Config.Hosts is set refreshes it on every heartbeat; Refresh
// does it by hand. Its methods are safe for concurrent use.
type Hosts struct {
	rdb    redis.UniversalClient
	insp   *asynq.Inspector
	queues map[string]bool
	n      atomic.Int64
}

// NewHosts returns a count over the asynq servers in the Redis at r that
// serve any of queues (none means "default"): one server, a Redis Cluster
// or Sentinel, whose failover its connection rides out (see
// queue.FollowFailover). Close releases its connection. An r that makes no
// redis.UniversalClient (nil, or an option type of its own) is an error, as
// it is for NewPool.
func NewHosts(r asynq.RedisConnOpt, queues ...string) (*Hosts, error) {
	if r == nil {
		return nil, errors.New("workers: NewHosts: Redis is nil")
	}
	rdb, ok := r.MakeRedisClient().(redis.UniversalClient)
	if !ok || rdb == nil {
		return nil, fmt.Errorf("workers: NewHosts: unsupported asynq.RedisConnOpt %T", r)
	}
	queue.FollowFailover(rdb)
	h := &Hosts{rdb: rdb, insp: asynq.NewInspectorFromRedisClient(rdb), queues: make(map[string]bool)}
	if len(queues) == 0 {
		queues = []string{"default"}
	}
	for _, q := range queues {
		h.queues[q] = true
	}
	return h, nil
}

// HostsFor is NewHosts over the queues of cfg, as a Pool with cfg would serve them.
func HostsFor(cfg Config) (*Hosts, error) {
	qs := cfg.Queues
	if len(qs) == 0 {
		qs = map[string]int{"default": 1}
	}
	var names []string
	for q := range maps.Keys(qs) {
		names = append(names, q)
	}
	return NewHosts(cfg.Redis, names...)
}

// Hosts is the last count read: the live worker processes serving the queues.
func (h *Hosts) Hosts() int { return int(h.n.Load()) }

// Refresh reads the count again. On error the last count stays.
func (h *Hosts) Refresh() error {
	servers, err := h.insp.Servers()
	if err != nil {
		return fmt.Errorf("workers: counting hosts: %w", err)
	}
	n := 0
	for _, s := range servers {
		for q := range s.Queues {
			if h.queues[q] {
				n++
				break
			}
		}
	}
	h.n.Store(int64(n))
	return nil
}

// Close releases the count's connection to Redis.
func (h *Hosts) Close() error { return h.rdb.Close() }
