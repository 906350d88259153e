// Package control keeps the fleet's runtime state in the limiter's Redis:
// limits set at runtime (sluice set / unset), which override a worker's flags
// and limits file until unset, and each worker process's heartbeat. The
// worker reads and writes it; the sluice command reads it and sets limits.
//
// Every key shares one hash tag, so that the lot lives in one Redis Cluster
// slot:
//
//	<prefix>{ctl}:limits          HASH  type -> JSON Entry (runtime limits)
//	<prefix>{ctl}:changes         pub/sub channel: a type whose limit changed
//	<prefix>{ctl}:workers         ZSET  worker id -> last heartbeat (unix ms)
//	<prefix>{ctl}:worker:<id>     STRING JSON Heartbeat, with a TTL
//
// A runtime limit is set or unset, and announced on the channel, by one
// script (lua/change.lua): both or neither.
//
// Heartbeats expire on their own; the index is pruned of ids older than the
// TTL whenever a heartbeat is written or the workers are listed, so nothing
// grows without bound.
package control

import (
	"context"
	_ "embed" // the Lua script
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sluicehq/sluice/internal/limitspec"
)

// HeartbeatTTL is how long a worker's heartbeat lives without renewal.
const HeartbeatTTL = 30 * time.Second

// MaxHeartbeat bounds a heartbeat's JSON, in bytes.
const MaxHeartbeat = 64 << 10

// Control is the fleet's control state under one key prefix.
type Control struct {
	rdb    redis.UniversalClient
	prefix string
}

// New returns the control state in rdb under prefix (the limiter's key
// prefix, "sluice:" by default).
func New(rdb redis.UniversalClient, prefix string) *Control {
	return &Control{rdb: rdb, prefix: prefix}
}

func (c *Control) limitsKey() string          { return c.prefix + "{ctl}:limits" }
func (c *Control) changesChannel() string     { return c.prefix + "{ctl}:changes" }
func (c *Control) resetsChannel() string      { return c.prefix + "{ctl}:resets" }
func (c *Control) workersKey() string         { return c.prefix + "{ctl}:workers" }
func (c *Control) workerKey(id string) string { return c.prefix + "{ctl}:worker:" + id }

// Entry is a runtime limit: its spec in the --limit grammar, and who set it
// when, for the logs. A type of several limits has one spec per limit in
// Specs (limitspec.Spec.Flags), and Spec is them joined for people to
// read; a worker of a version without named limits cannot parse it, and
// applies none of it.
type Entry struct {
	Spec  string    `json:"spec"`
	Specs []string  `json:"specs,omitempty"`
	By    string    `json:"by"` // user@host of the sluice command
	At    time.Time `json:"at"`
}

// Parse parses the entry's limit: Specs if it has them, else Spec.
func (e Entry) Parse() (limitspec.Spec, error) { return ParseSpecs(e.Spec, e.Specs) }

// ParseSpecs parses the limit of one type written as spec, or as specs
// (one per limit) when there are any: see Entry and LimitState.
func ParseSpecs(spec string, specs []string) (limitspec.Spec, error) {
	if len(specs) == 0 {
		return limitspec.Parse(spec)
	}
	all, err := limitspec.ParseAll(specs)
	if err != nil {
		return limitspec.Spec{}, err
	}
	if len(all) != 1 {
		return limitspec.Spec{}, fmt.Errorf("%w: specs for %d types, want one", limitspec.ErrInvalid, len(all))
	}
	return all[0], nil
}

// SpecsOf is how an Entry or a LimitState writes sp: its String as Spec,
// and its Flags as Specs when it has more than one.
func SpecsOf(sp limitspec.Spec) (spec string, specs []string) {
	if flags := sp.Flags(); len(flags) > 1 {
		return sp.String(), flags
	}
	return sp.String(), nil
}

// changeScript sets or unsets a runtime limit and announces it, in one call.
//
//go:embed lua/change.lua
var changeSource string

var changeScript = redis.NewScript(changeSource)

// Check reports whether this connection's user may set and unset runtime
// limits, changing nothing: the sluice command checks it before it resets a
// bucket for a change, so that a change it may not make leaves nothing
// behind. The error is Redis's (NOPERM ...) when it may not.
func (c *Control) Check(ctx context.Context) error {
	if _, err := c.change(ctx, "check", "", ""); err != nil {
		if redis.HasErrorPrefix(errors.Unwrap(err), "NOPERM") {
			return fmt.Errorf("this user may not change the runtime limits: %w", errors.Unwrap(err))
		}
		return err
	}
	return nil
}

// Set stores specs (TYPE=SPEC, the --limit grammar; several for a type of
// several named limits, as limitspec.ParseAll reads them) as the runtime
// limit of their type, whole, and tells the workers, in one script: both or
// neither. Specs that do not parse, or are for more than one type, are
// refused, and nothing is stored.
func (c *Control) Set(ctx context.Context, specs []string, by string) (limitspec.Spec, error) {
	all, err := limitspec.ParseAll(specs)
	if err != nil {
		return limitspec.Spec{}, err
	}
	if len(all) != 1 {
		return limitspec.Spec{}, fmt.Errorf("%w: specs for %d types: set one type at a time", limitspec.ErrInvalid, len(all))
	}
	sp := all[0]
	e := Entry{By: by, At: time.Now().UTC()}
	e.Spec, e.Specs = SpecsOf(sp)
	b, err := json.Marshal(e)
	if err != nil {
		return limitspec.Spec{}, err
	}
	if _, err := c.change(ctx, "set", sp.Name, string(b)); err != nil {
		return limitspec.Spec{}, err
	}
	return sp, nil
}

// Unset removes the runtime limit of typ, if any, and tells the workers, in
// one script; it reports whether there was one.
func (c *Control) Unset(ctx context.Context, typ string) (bool, error) {
	n, err := c.change(ctx, "unset", typ, "")
	return n > 0, err
}

// change runs changeScript: op is check, set or unset.
func (c *Control) change(ctx context.Context, op, typ, entry string) (int64, error) {
	n, err := changeScript.Run(ctx, c.rdb, []string{c.limitsKey()}, op, c.changesChannel(), typ, entry).Int64()
	if err != nil {
		return 0, fmt.Errorf("runtime limits: %s: %w", op, err)
	}
	return n, nil
}

// Malformed is a runtime limit that does not parse (written by another
// version, or by hand): the entry as far as it reads, and why (Err does not
// name the type).
type Malformed struct {
	Entry Entry // Spec holds the raw value when it is not a JSON entry
	Err   error
}

// Limits returns the runtime limits by type. An entry that no longer parses
// is returned in bad, with why, not dropped silently.
func (c *Control) Limits(ctx context.Context) (limits map[string]Entry, bad map[string]Malformed, err error) {
	all, err := c.rdb.HGetAll(ctx, c.limitsKey()).Result()
	if err != nil {
		return nil, nil, err
	}
	limits = make(map[string]Entry, len(all))
	bad = make(map[string]Malformed)
	for typ, raw := range all {
		var e Entry
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			bad[typ] = Malformed{Entry: Entry{Spec: raw}, Err: fmt.Errorf("not a JSON entry: %w", err)}
			continue
		}
		if _, err := e.Parse(); err != nil {
			bad[typ] = Malformed{Entry: e, Err: err}
			continue
		}
		limits[typ] = e
	}
	return limits, bad, nil
}

// Subscribe returns a subscription to limit changes and bucket resets; its
// messages carry the type whose limit changed or whose bucket was reset
// (IsReset tells which). Close it when done.
func (c *Control) Subscribe(ctx context.Context) *redis.PubSub {
	return c.rdb.Subscribe(ctx, c.changesChannel(), c.resetsChannel())
}

// Reset announces that a bucket of type typ was reset (sluice reset): the
// workers that run the type bring forward the jobs sent back holding turns
// in it, which the reset voided.
func (c *Control) Reset(ctx context.Context, typ string) error {
	return c.rdb.Publish(ctx, c.resetsChannel(), typ).Err()
}

// IsReset reports whether m, from Subscribe, announces a reset (its payload
// is the type) rather than a limit change.
func (c *Control) IsReset(m *redis.Message) bool { return m.Channel == c.resetsChannel() }

// LimitState is one limit as a worker applies it, in its heartbeat. A type
// of several limits has one spec per limit in Specs, as an Entry does.
type LimitState struct {
	Type    string   `json:"type"`
	Spec    string   `json:"spec"`
	Specs   []string `json:"specs,omitempty"`
	Source  string   `json:"source"`       // flag (or its SLUICE_ variable), file or runtime
	Grants  float64  `json:"grants_per_s"` // handler runs per second over the last minute
	Waiting int64    `json:"waiting"`      // jobs of the type waiting in this worker for their turn, now
	// WaitingByPriority splits Waiting by job priority ("1" to "5"); the
	// priorities with none are left out.
	WaitingByPriority map[string]int64 `json:"waiting_by_priority,omitempty"`
}

// Parse parses the state's limit: Specs if it has them, else Spec.
func (l LimitState) Parse() (limitspec.Spec, error) { return ParseSpecs(l.Spec, l.Specs) }

// Heartbeat is what a worker process publishes about itself.
type Heartbeat struct {
	ID        string       `json:"id"` // host:pid:start
	Host      string       `json:"host"`
	PID       int          `json:"pid"`
	Version   string       `json:"version,omitempty"` // the worker's build (cli.Version)
	Mode      string       `json:"mode"`              // the limiter's: shared, closed, open, fallback
	Queues    []string     `json:"queues"`
	Limits    []LimitState `json:"limits"`
	Waiting   int64        `json:"waiting"` // jobs waiting in this worker for their turn or an in-flight slot, now
	Active    int64        `json:"active"`  // jobs in the worker's hands now: waiting, running or going back
	Processed int64        `json:"processed"`
	Cooldowns int64        `json:"cooldowns"` // cooldowns put on buckets after an upstream 429 or 503
	Failed    int64        `json:"failed"`
	Requeued  int64        `json:"requeued"`
	Started   time.Time    `json:"started"`
	Seen      time.Time    `json:"seen"`
}

// Beat writes h with HeartbeatTTL and indexes it, pruning expired ids.
func (c *Control) Beat(ctx context.Context, h Heartbeat) error {
	b, err := json.Marshal(h)
	if err != nil {
		return err
	}
	if len(b) > MaxHeartbeat {
		return fmt.Errorf("heartbeat of %d bytes, more than %d", len(b), MaxHeartbeat)
	}
	now := h.Seen.UnixMilli()
	_, err = c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, c.workerKey(h.ID), b, HeartbeatTTL)
		p.ZAdd(ctx, c.workersKey(), redis.Z{Score: float64(now), Member: h.ID})
		p.ZRemRangeByScore(ctx, c.workersKey(), "-inf", strconv.FormatInt(now-HeartbeatTTL.Milliseconds(), 10))
		p.PExpire(ctx, c.workersKey(), 2*HeartbeatTTL)
		return nil
	})
	return err
}

// Gone removes worker id's heartbeat, when it stops.
func (c *Control) Gone(ctx context.Context, id string) error {
	_, err := c.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, c.workerKey(id))
		p.ZRem(ctx, c.workersKey(), id)
		return nil
	})
	return err
}

// Workers returns the live workers' heartbeats, by id order.
func (c *Control) Workers(ctx context.Context) ([]Heartbeat, error) {
	cutoff := time.Now().Add(-HeartbeatTTL).UnixMilli()
	ids, err := c.rdb.ZRangeByScore(ctx, c.workersKey(), &redis.ZRangeBy{Min: strconv.FormatInt(cutoff, 10), Max: "+inf"}).Result()
	if err != nil {
		return nil, err
	}
	out := make([]Heartbeat, 0, len(ids))
	for _, id := range ids {
		raw, err := c.rdb.Get(ctx, c.workerKey(id)).Bytes()
		if errors.Is(err, redis.Nil) {
			continue // expired since
		}
		if err != nil {
			return nil, err
		}
		var h Heartbeat
		if err := json.Unmarshal(raw, &h); err != nil {
			continue // not ours to judge; skipped
		}
		out = append(out, h)
	}
	return out, nil
}
