package history

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// The ring's Redis key, its schema and the script that writes it live here
// (and in lua/add.lua):
//
//	<prefix>history:{<type>}   a hash
//	  "step"                   the step in ms
//	  "0".."119"               slot epoch % Slots: "epoch grants done archived
//	                           refused cooldowns waiting queued limit effective
//	                           workers", numbers space-separated
//
// The braces put a type's keys in one Cluster slot. The key expires
// Slots * step * 2 after its last write.

var (
	//go:embed lua/add.lua
	addLua    string
	addScript = redis.NewScript(addLua)
)

// MaxTypeLen bounds a job type's name in a history key.
const MaxTypeLen = 256

// ErrInvalid matches the errors of a write refused before any I/O: a bad
// type name, step or value.
var ErrInvalid = errors.New("history: invalid")

// fields is the number of numbers in a slot's record: the epoch and ten values.
const fields = 11

// Ring writes steps of job types' history into a Redis, under one key
// prefix and at one step. The zero value is not usable: call NewRing. It is
// safe for concurrent use.
type Ring struct {
	rdb    redis.UniversalClient
	prefix string
	step   time.Duration
}

// NewRing returns a Ring writing to rdb under prefix (the limiter's key
// prefix, e.g. "sluice:") at step, which is a whole number of
// milliseconds; Add refuses a step under a millisecond.
func NewRing(rdb redis.UniversalClient, prefix string, step time.Duration) *Ring {
	return &Ring{rdb: rdb, prefix: prefix, step: step}
}

// Step is the ring's step.
func (r *Ring) Step() time.Duration { return r.step }

// Key is the key of type typ's ring under prefix.
func Key(prefix, typ string) string { return prefix + "history:{" + typ + "}" }

// Add adds p, one worker's reading of type typ over the step that p.At
// falls in, to the ring: merged with the other workers' writes of that step,
// or replacing what an older lap left in its slot. A write older than the
// slot's record is dropped, not an error. A ring kept at another step
// restarts at this one.
func (r *Ring) Add(ctx context.Context, typ string, p Point) error {
	if err := checkType(typ); err != nil {
		return err
	}
	stepMs := r.step.Milliseconds()
	if stepMs < 1 {
		return fmt.Errorf("%w: step %v is under a millisecond", ErrInvalid, r.step)
	}
	vals := p.values()
	args := make([]any, 0, 2+len(vals))
	args = append(args, stepMs, epochOf(p.At, stepMs))
	for i, v := range vals {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%w: point of %q: %s is %v", ErrInvalid, typ, valueNames[i], v)
		}
		args = append(args, formatValue(i, v))
	}
	if err := addScript.Run(ctx, r.rdb, []string{Key(r.prefix, typ)}, args...).Err(); err != nil {
		return fmt.Errorf("history: add to %q: %w", typ, err)
	}
	return nil
}

// formatValue writes the i-th value of a record: a count exactly, a rate
// (limit, effective) to 6 significant digits (1666.67 for 100000/m), which
// keeps a record short whatever the rate's fraction.
func formatValue(i int, v float64) string {
	if i == 7 || i == 8 {
		v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// epochOf is the step of stepMs that at falls in: floor(at / step).
func epochOf(at time.Time, stepMs int64) int64 {
	ms := at.UnixMilli()
	e := ms / stepMs
	if ms < 0 && ms%stepMs != 0 {
		e--
	}
	return e
}

var valueNames = [fields - 1]string{"grants", "done", "archived", "refused", "cooldowns", "waiting", "queued", "limit", "effective", "workers"}

// values are p's numbers in the order of a record, after its epoch.
func (p Point) values() [fields - 1]float64 {
	return [...]float64{p.Grants, p.Done, p.Archived, p.Refused, p.Cooldowns, p.Waiting, p.Queued, p.Limit, p.Effective, float64(p.Workers)}
}

// parseRecord reads a slot's record; ok is false for one that does not read
// as fields finite numbers.
func parseRecord(s string, stepMs int64) (epoch int64, p Point, ok bool) {
	f := strings.Fields(s)
	if len(f) != fields {
		return 0, Point{}, false
	}
	epoch, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		// Lua may write a large epoch as a float ("1e+15"): read it as one.
		e, ferr := strconv.ParseFloat(f[0], 64)
		if ferr != nil || e != math.Trunc(e) || math.Abs(e) > 1<<53 {
			return 0, Point{}, false
		}
		epoch = int64(e)
	}
	var v [fields - 1]float64
	for i := range v {
		x, err := strconv.ParseFloat(f[i+1], 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			return 0, Point{}, false
		}
		v[i] = x
	}
	if v[9] != math.Trunc(v[9]) || v[9] > math.MaxInt32 {
		return 0, Point{}, false
	}
	p = Point{
		At:     time.UnixMilli(epoch * stepMs).UTC(),
		Grants: v[0], Done: v[1], Archived: v[2], Refused: v[3], Cooldowns: v[4],
		Waiting: v[5], Queued: v[6], Limit: v[7], Effective: v[8], Workers: int(v[9]),
	}
	return epoch, p, true
}

// Read returns type typ's ring under prefix: its step, and the steps that
// began within Slots steps before now (the last hour at the default step),
// oldest first, the one now is in last. A slot no worker wrote in that
// span is left out, as is a record that does not read (a partial write
// by another version, say): that is not an error. A type without a ring
// has step 0 and no points.
func Read(ctx context.Context, rdb redis.UniversalClient, prefix, typ string, now time.Time) (time.Duration, []Point, error) {
	if err := checkType(typ); err != nil {
		return 0, nil, err
	}
	h, err := rdb.HGetAll(ctx, Key(prefix, typ)).Result()
	if err != nil {
		return 0, nil, fmt.Errorf("history: read %q: %w", typ, err)
	}
	stepMs, err := strconv.ParseInt(h["step"], 10, 64)
	if err != nil || stepMs < 1 {
		return 0, nil, nil
	}
	last := epochOf(now, stepMs)
	type slot struct {
		epoch int64
		p     Point
	}
	var slots []slot
	for k, v := range h {
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 || i >= Slots {
			continue
		}
		e, p, ok := parseRecord(v, stepMs)
		if !ok || e > last || e <= last-Slots || e%Slots != int64(i) {
			continue
		}
		slots = append(slots, slot{e, p})
	}
	sort.Slice(slots, func(i, j int) bool { return slots[i].epoch < slots[j].epoch })
	pts := make([]Point, len(slots))
	for i, s := range slots {
		pts[i] = s.p
	}
	return time.Duration(stepMs) * time.Millisecond, pts, nil
}

func checkType(typ string) error {
	switch {
	case typ == "":
		return fmt.Errorf("%w: empty job type", ErrInvalid)
	case len(typ) > MaxTypeLen:
		return fmt.Errorf("%w: job type is %d bytes, more than %d", ErrInvalid, len(typ), MaxTypeLen)
	case strings.ContainsAny(typ, "{}"):
		return fmt.Errorf("%w: job type %q contains '{' or '}'", ErrInvalid, typ)
	}
	return nil
}
