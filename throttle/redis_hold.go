package throttle

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// The scripts of Concurrency; each file's header documents its KEYS, ARGV and reply.
var (
	//go:embed lua/hold.lua
	holdLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/release.lua
	releaseLua string

	holdScript    = newScript(holdLua)
	renewScript   = newScript(renewLua)
	releaseScript = newScript(releaseLua)
)

func (s *RedisStore) hold(ctx context.Context, prefix, key string, max int, lease int64, id string, auto int) (holdReply, error) {
	keys, args := []string{semKey(prefix, key)}, []any{s.now(), max, lease, id}
	if auto > 0 {
		keys, args = append(keys, flightKey(prefix, key)), append(args, auto)
	}
	v, err := holdScript.Run(ctx, s.rdb, keys, args...).Result()
	if err != nil {
		return holdReply{}, s.fail("hold", err)
	}
	a, ok := v.([]any)
	if !ok || len(a) != 6 {
		return holdReply{}, storeErr("hold", fmt.Errorf("bad reply %v", v))
	}
	var ints [6]int64
	for i := range a {
		x, ok := a[i].(int64)
		if !ok || x < 0 {
			return holdReply{}, storeErr("hold", fmt.Errorf("bad reply field %d: %v", i, a[i]))
		}
		ints[i] = x
	}
	r := holdReply{granted: ints[0] == 1, wait: ints[1], held: int(ints[2]), now: ints[3], expired: int(ints[4]), max: int(ints[5])}
	if !r.granted && r.wait == 0 {
		return holdReply{}, storeErr("hold", fmt.Errorf("bad reply %v: denied without a wait", v))
	}
	return r, nil
}

func (s *RedisStore) renew(ctx context.Context, prefix, key string, lease int64, id string) (bool, error) {
	v, err := renewScript.Run(ctx, s.rdb, []string{semKey(prefix, key)}, s.now(), lease, id).Int64()
	if err != nil {
		return false, s.fail("renew", err)
	}
	return v == 1, nil
}

func (s *RedisStore) release(ctx context.Context, prefix, key, id string) (bool, error) {
	v, err := releaseScript.Run(ctx, s.rdb, []string{semKey(prefix, key)}, s.now(), id).Int64()
	if err != nil {
		return false, s.fail("release", err)
	}
	return v == 1, nil
}

func (s *RedisStore) waiters() *waitRoom { return s.wake.room(s.rdb) }

// wakeHub is how a RedisStore hears releases: one pub/sub subscription,
// made when a Hold first waits and ended by Close, subscribed to the channel
// of each key that has Holds waiting in this process and to no other. A
// key's channel is named like its sorted set, and release.lua publishes on
// it; a message wakes the key's longest-waiting Hold.
//
// The subscription is go-redis's: it pings an idle connection, reconnects
// and subscribes again. Every (re)subscription of a key makes its waiters ask
// again, since a release published meanwhile was not heard; a message lost
// otherwise costs a waiter at most one lease, after which the earliest lease
// runs out and the head of the queue asks anyway.
//
// The subscription follows the waiting room from a goroutine of the hub's,
// which runs while there are keys to subscribe or unsubscribe: a Hold never
// waits for a SUBSCRIBE, which a stalled server would hold up past its ctx.
type wakeHub struct {
	rdb  redis.UniversalClient
	once sync.Once
	r    waitRoom

	subbed map[string]bool // the channels subscribed to; used by the syncing goroutine only

	mu      sync.Mutex
	ps      *redis.PubSub // nil until the first waiter, and after close
	closed  bool
	done    chan struct{}   // closed when the dispatching goroutine has returned
	changed map[string]bool // keys whose queue was made or removed since their last sync
	syncing chan struct{}   // while the syncing goroutine runs: closed when it has returned
}

// room returns the hub's waiting room, set up on first use to subscribe through rdb.
func (h *wakeHub) room(rdb redis.UniversalClient) *waitRoom {
	h.once.Do(func() {
		h.rdb = rdb
		h.r.watch = h.change
		h.subbed = make(map[string]bool)
		h.changed = make(map[string]bool)
	})
	return &h.r
}

// change has the subscription follow name's queue, made or removed: it
// notes name for the syncing goroutine, and starts it if it is not running.
func (h *wakeHub) change(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.changed[name] = true
	if h.syncing == nil {
		h.syncing = make(chan struct{})
		go h.syncChanged(h.syncing)
	}
}

// syncChanged syncs the changed keys, one at a time, until none is left or
// the hub is closed, and then closes done.
func (h *wakeHub) syncChanged(done chan struct{}) {
	defer close(done)
	for {
		h.mu.Lock()
		if len(h.changed) == 0 || h.closed {
			h.syncing = nil
			h.mu.Unlock()
			return
		}
		var name string
		for name = range h.changed {
			break
		}
		delete(h.changed, name)
		h.mu.Unlock()
		h.sync(name)
	}
}

// subTimeout bounds a SUBSCRIBE or UNSUBSCRIBE write. If it fails, go-redis
// reconnects and subscribes again to what it was asked for.
const subTimeout = time.Second

// sync subscribes to name, or unsubscribes, so that the subscription matches
// whether any Hold waits for it. Only the syncing goroutine calls it, after
// each change of the key, and it reads the latest state, so the last call
// leaves the subscription right. The write gets a context of its own: one
// cut short would make go-redis drop the connection and subscribe to every
// channel again.
func (h *wakeHub) sync(name string) {
	ps := h.pubsub()
	if ps == nil {
		return
	}
	want := h.r.has(name)
	ctx, cancel := context.WithTimeout(context.Background(), subTimeout)
	defer cancel()
	switch {
	case want && !h.subbed[name]:
		h.subbed[name] = true
		_ = ps.Subscribe(ctx, name) // the confirmation makes the queue ready
	case want:
		// Subscribed all along, but the queue is new: what was published
		// before it existed reached no one.
		h.r.ready(name, true)
	case h.subbed[name]:
		delete(h.subbed, name)
		_ = ps.Unsubscribe(ctx, name)
	}
}

// pubsub returns the subscription, made on first use with the goroutine that
// dispatches its messages; nil once the store is closed.
func (h *wakeHub) pubsub() *redis.PubSub {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	if h.ps == nil {
		h.ps = h.rdb.Subscribe(context.Background())
		h.done = make(chan struct{})
		ch := h.ps.ChannelWithSubscriptions()
		go func() {
			defer close(h.done)
			h.dispatch(ch)
		}()
	}
	return h.ps
}

// dispatch hands the subscription's messages to the waiting room until the
// subscription is closed.
func (h *wakeHub) dispatch(ch <-chan any) {
	for m := range ch {
		switch m := m.(type) {
		case *redis.Message:
			h.r.notify(m.Channel)
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe":
				h.r.ready(m.Channel, true)
			case "unsubscribe":
				h.r.ready(m.Channel, false)
			}
		}
	}
}

// close ends the subscription and waits for the hub's goroutines (a
// subscription change in flight is bounded by subTimeout). Holds still
// waiting are woken to ask again, and go on waiting, if they must, on the
// earliest lease alone.
func (h *wakeHub) close() {
	h.mu.Lock()
	h.closed = true
	syncing := h.syncing
	h.mu.Unlock()
	if syncing != nil {
		<-syncing
	}
	h.mu.Lock()
	ps, done := h.ps, h.done
	h.ps = nil
	h.mu.Unlock()
	if ps != nil {
		_ = ps.Close()
		<-done
	}
	h.r.deaf()
}

var _ holdStore = (*RedisStore)(nil)
