package throttle

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Ticket is a turn booked in a Limiter and handed off: a record in the store,
// beside the bucket it was booked from, that another process (any process
// sharing the store) can redeem once, at its slot. A job that cannot wait for
// its turn carries the ticket's ID while it is away, and runs at the slot
// without asking for tokens again.
//
// Only the store knows a ticket: an ID that was never issued, that expired,
// or that was redeemed before is no ticket, however it came to be (made up,
// or copied from a real one). Its holder should take a turn like any caller.
type Ticket struct {
	ID   string    // what the holder carries: 128 random bits, in hex
	Key  string    // the bucket the turn was booked from
	Slot time.Time // when the turn comes, on this process's clock
	At   time.Time // the same instant on the store's clock (as Reservation.Slot)
	Note string    // the issuer's, kept with the record (say, the limits the turn was booked under)
}

// The record of ticket ID of bucket key is one Redis string,
//
//	<prefix>{<key>}:ticket:<ID>  =  "<slot> <issued> <note>"   (µs of store time)
//
// (the bucket key as the bucket has it, so the record shares its Cluster
// slot), written by lua/ticket.lua with a TTL of the wait until the slot plus
// ticketGrace, and read and deleted in one step by lua/redeem.lua. Beside it,
//
//	<prefix>{<key>}:void  =  "<µs of store time>"
//
// written by lua/void.lua when the bucket is reset (Limiter.Reset): a ticket
// issued at or before it is void, as the turns it was booked among are gone.
// It lives as long as a ticket can (maxSpan plus ticketGrace). A memory store
// keeps the same records in its shards, with their expiry.
const (
	// ticketGrace is how long after its slot a ticket can still be redeemed;
	// then its record is gone.
	ticketGrace = time.Minute
	// maxTicketNote bounds a ticket's note, in bytes.
	maxTicketNote = 256
	// ticketIDLen is the length of a ticket's ID: 16 bytes in hex.
	ticketIDLen = 32
)

var (
	//go:embed lua/ticket.lua
	ticketLua string
	//go:embed lua/redeem.lua
	redeemLua string
	//go:embed lua/void.lua
	voidLua string

	ticketScript = newScript(ticketLua)
	redeemScript = newScript(redeemLua)
	voidScript   = newScript(voidLua)
)

// ticketKey is the Redis key of the record of ticket id of bucket key.
func ticketKey(prefix, key, id string) string { return redisKey(prefix, key) + ":ticket:" + id }

// voidKey is the Redis key of the instant bucket key's tickets were voided.
func voidKey(prefix, key string) string { return redisKey(prefix, key) + ":void" }

// ticketStore is what tickets need of a store, beyond the sealed Store
// interface: RedisStore and memoryStore have it. Times are µs.
type ticketStore interface {
	// issue writes the record of ticket id, for slot (store time), to be
	// kept until grace after it.
	issue(ctx context.Context, prefix, key, id string, slot, grace int64, note string) (now int64, err error)
	// redeem reads and deletes the record of ticket id: its slot and the
	// store's now, its note, and whether there was one (issued after the
	// bucket's tickets were last voided).
	redeem(ctx context.Context, prefix, key, id string) (slot, now int64, note string, ok bool, err error)
	// void makes every ticket of bucket key issued until now void.
	void(ctx context.Context, prefix, key string) error
}

// IssueTicket records a ticket for a turn of bucket key at slot, with note,
// and returns it: a turn the caller booked and hands off, its slot on the
// store's clock (a Reservation's Slot, or a redeemed Ticket's At). It does
// not take tokens: the turn must have been booked, and the ticket is how it
// is redeemed, once, by whoever holds its ID. The record is kept until
// a minute after slot (a slot may be past: a late turn).
//
// Under FailLocal in fallback mode, or if the store cannot be reached, no
// ticket is issued and the error matches ErrUnavailable.
func (l *Limiter) IssueTicket(ctx context.Context, key string, slot time.Time, note string) (Ticket, error) {
	ts, err := l.tickets(key)
	if err != nil {
		return Ticket{}, err
	}
	if len(note) > maxTicketNote {
		return Ticket{}, invalidf("ticket note is %d bytes, longer than %d", len(note), maxTicketNote)
	}
	if wait, most := time.Until(slot), time.Duration(maxSpan)*time.Microsecond; wait > most || wait < -most {
		return Ticket{}, invalidf("ticket slot %v from now is further than %v", wait, most)
	}
	at := slot.UnixMicro()
	t := Ticket{ID: newTicketID(), Key: key, At: time.UnixMicro(at), Note: note}
	now, err := l.seam.issue(ctx, ts, l.cfg.prefix, key, t.ID, at, int64(ticketGrace/time.Microsecond), note)
	t.Slot = time.Now().Add(micros(at - now))
	if err != nil {
		return Ticket{}, err
	}
	return t, nil
}

// RedeemTicket redeems ticket id of bucket key: it returns the ticket, with
// its slot on this process's clock (in the past if its holder is late), and
// true, and no one can redeem it again. An id that names no ticket (never
// issued, expired, redeemed before, or malformed) returns false and no
// error: its holder has no turn and should take one like any caller.
//
// Under FailLocal in fallback mode, or if the store cannot be reached, the
// error matches ErrUnavailable; the ticket may or may not have been redeemed.
func (l *Limiter) RedeemTicket(ctx context.Context, key, id string) (Ticket, bool, error) {
	ts, err := l.tickets(key)
	if err != nil {
		return Ticket{}, false, err
	}
	if !validTicketID(id) {
		return Ticket{}, false, nil
	}
	slot, now, note, ok, err := l.seam.redeem(ctx, ts, l.cfg.prefix, key, id)
	if err != nil || !ok {
		return Ticket{}, false, err
	}
	return Ticket{ID: id, Key: key, Slot: time.Now().Add(micros(slot - now)), At: time.UnixMicro(slot), Note: note}, true, nil
}

// tickets is l's store as a ticketStore, once key is checked.
func (l *Limiter) tickets(key string) (ticketStore, error) {
	if l.err != nil {
		return nil, l.err
	}
	if err := checkName(key); err != nil {
		return nil, err
	}
	ts, ok := l.store.(ticketStore)
	if !ok {
		return nil, invalidf("the store %T cannot keep tickets", l.store)
	}
	return ts, nil
}

// newTicketID is a ticket's ID: 16 bytes from crypto/rand, so that no one
// can guess one that was issued.
func newTicketID() string {
	var b [ticketIDLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}

// validTicketID reports whether id could be one newTicketID made.
func validTicketID(id string) bool {
	if len(id) != ticketIDLen {
		return false
	}
	_, err := hex.DecodeString(id)
	return err == nil
}

func (s *RedisStore) issue(ctx context.Context, prefix, key, id string, slot, grace int64, note string) (int64, error) {
	now, err := ticketScript.Run(ctx, s.rdb, []string{ticketKey(prefix, key, id)}, s.now(), slot, grace, note).Int64()
	if err != nil {
		return 0, s.fail("ticket", err)
	}
	if now == 0 {
		return 0, storeErr("ticket", fmt.Errorf("ticket %s exists", id))
	}
	return now, nil
}

func (s *RedisStore) redeem(ctx context.Context, prefix, key, id string) (int64, int64, string, bool, error) {
	v, err := redeemScript.Run(ctx, s.rdb, []string{ticketKey(prefix, key, id), voidKey(prefix, key)}, s.now()).Slice()
	if err != nil {
		return 0, 0, "", false, s.fail("redeem", err)
	}
	if len(v) == 0 || len(v) > 2 {
		return 0, 0, "", false, storeErr("redeem", fmt.Errorf("bad reply %v", v))
	}
	now, ok := v[0].(int64)
	if !ok {
		return 0, 0, "", false, storeErr("redeem", fmt.Errorf("bad reply %v", v))
	}
	if len(v) == 1 {
		return 0, now, "", false, nil
	}
	rec, _ := v[1].(string)
	slot, _, note, err := parseTicket(rec)
	if err != nil {
		return 0, 0, "", false, storeErr("redeem", err)
	}
	return slot, now, note, true, nil
}

func (s *RedisStore) void(ctx context.Context, prefix, key string) error {
	ttl := (maxSpan + int64(ticketGrace/time.Microsecond)) / 1000
	if err := voidScript.Run(ctx, s.rdb, []string{voidKey(prefix, key)}, s.now(), ttl).Err(); err != nil {
		return s.fail("reset", err)
	}
	return nil
}

// parseTicket reads a ticket's record: its slot, when it was issued and its
// note.
func parseTicket(rec string) (slot, issued int64, note string, err error) {
	f := strings.SplitN(rec, " ", 3)
	if len(f) < 2 {
		return 0, 0, "", fmt.Errorf("bad ticket record %q", rec)
	}
	slot, err = strconv.ParseInt(f[0], 10, 64)
	if err == nil {
		issued, err = strconv.ParseInt(f[1], 10, 64)
	}
	if err != nil {
		return 0, 0, "", fmt.Errorf("bad ticket record %q", rec)
	}
	if len(f) == 3 {
		note = f[2]
	}
	return slot, issued, note, nil
}

// memTicket is a ticket's record in a memory store.
type memTicket struct {
	slot, exp, issued int64 // µs
	note              string
}

func (m *memoryStore) issue(ctx context.Context, prefix, key, id string, slot, grace int64, note string) (int64, error) {
	return m.shard(key).issue(prefix, key, id, slot, grace, note)
}

func (m *memoryStore) redeem(ctx context.Context, prefix, key, id string) (int64, int64, string, bool, error) {
	return m.shard(key).redeem(prefix, key, id)
}

func (m *memShard) issue(prefix, key, id string, slot, grace int64, note string) (int64, error) {
	now := m.nowMicros()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tickets == nil {
		m.tickets = make(map[memKey]memTicket)
	}
	k := memKey{prefix: prefix, name: key + ":ticket:" + id}
	if t, ok := m.tickets[k]; ok && t.exp > now {
		return 0, storeErr("ticket", fmt.Errorf("ticket %s exists", id))
	}
	m.sweepTickets(now)
	m.tickets[k] = memTicket{slot: slot, exp: max(slot+grace, now+1000), issued: now, note: note}
	return now, nil
}

func (m *memShard) redeem(prefix, key, id string) (int64, int64, string, bool, error) {
	now := m.nowMicros()
	m.mu.Lock()
	defer m.mu.Unlock()
	k := memKey{prefix: prefix, name: key + ":ticket:" + id}
	t, ok := m.tickets[k]
	if !ok {
		return 0, now, "", false, nil
	}
	delete(m.tickets, k)
	if t.exp <= now || t.issued <= m.voids[memKey{prefix: prefix, name: key}] {
		return 0, now, "", false, nil
	}
	return t.slot, now, t.note, true, nil
}

func (m *memoryStore) void(ctx context.Context, prefix, key string) error {
	return m.shard(key).void(prefix, key)
}

// void records now as the instant key's tickets were voided; the tickets
// issued until then are forgotten at once.
func (m *memShard) void(prefix, key string) error {
	now := m.nowMicros()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.voids == nil {
		m.voids = make(map[memKey]int64)
	}
	m.voids[memKey{prefix: prefix, name: key}] = now
	for k, t := range m.tickets {
		if k.prefix == prefix && strings.HasPrefix(k.name, key+":ticket:") && t.issued <= now {
			delete(m.tickets, k)
		}
	}
	return nil
}

// sweepTickets forgets up to two expired tickets: amortised cleanup, run
// when one is issued, so that tickets never redeemed do not pile up. m.mu is
// held.
func (m *memShard) sweepTickets(now int64) {
	n := 0
	for k, t := range m.tickets {
		if n == 2 {
			return
		}
		n++
		if t.exp <= now {
			delete(m.tickets, k)
		}
	}
}
