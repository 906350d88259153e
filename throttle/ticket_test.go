package throttle

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
)

// A ticket is redeemed once, by the bucket it was booked from, with its slot
// as the store counted it; an id the store did not issue is no ticket.
func runTickets(t *testing.T, newStore func(clock) Store, prefix string) {
	ctx := context.Background()
	clock := newFakeClock()
	lim := NewLimiter(newStore(clock), WithKeyPrefix(prefix))
	const near = 50 * time.Millisecond // the test's own time between calls

	// Step 0: issue, and redeem half a second later on the store's clock.
	tk, err := lim.IssueTicket(ctx, "api", clock.Now().Add(2*time.Second), "fp@4")
	require.NoError(t, err, "step 0")
	assert.Len(t, tk.ID, 32, "step 0: id")
	clock.advance(500 * time.Millisecond)
	got, ok, err := lim.RedeemTicket(ctx, "api", tk.ID)
	require.NoError(t, err, "step 0")
	require.True(t, ok, "step 0: redeemed")
	assert.Equal(t, "fp@4", got.Note, "step 0: note")
	assert.Equal(t, "api", got.Key, "step 0: key")
	assert.WithinDuration(t, time.Now().Add(1500*time.Millisecond), got.Slot, near, "step 0: slot")
	assert.Equal(t, tk.At, got.At, "step 0: the slot on the store's clock")
	assert.Equal(t, clock.Now().Add(1500*time.Millisecond).UnixMicro(), got.At.UnixMicro(), "step 0: the slot on the store's clock")

	// Step 1: once.
	_, ok, err = lim.RedeemTicket(ctx, "api", tk.ID)
	require.NoError(t, err, "step 1")
	assert.False(t, ok, "step 1: redeemed twice")

	// Step 2: not by another bucket, and not after that by its own either
	// (a wrong bucket does not spend it).
	tk, err = lim.IssueTicket(ctx, "api", clock.Now().Add(time.Second), "")
	require.NoError(t, err, "step 2")
	_, ok, err = lim.RedeemTicket(ctx, "other", tk.ID)
	require.NoError(t, err, "step 2")
	assert.False(t, ok, "step 2: redeemed by another bucket")
	_, ok, err = lim.RedeemTicket(ctx, "api", tk.ID)
	require.NoError(t, err, "step 2")
	assert.True(t, ok, "step 2: redeemed by its bucket")

	// Step 3: made-up ids, well-formed or not, are no ticket and cost no error.
	for _, id := range []string{"", "1795757851613983", strings.Repeat("0", 32), strings.Repeat("z", 32), strings.Repeat("a", 4096)} {
		_, ok, err = lim.RedeemTicket(ctx, "api", id)
		require.NoError(t, err, "step 3: %q", id)
		assert.False(t, ok, "step 3: %.40q redeemed", id)
	}

	// Step 4: a late holder is told how late.
	tk, err = lim.IssueTicket(ctx, "api", clock.Now().Add(time.Second), "")
	require.NoError(t, err, "step 4")
	clock.advance(4 * time.Second)
	got, ok, err = lim.RedeemTicket(ctx, "api", tk.ID)
	require.NoError(t, err, "step 4")
	require.True(t, ok, "step 4: redeemed")
	assert.WithinDuration(t, time.Now().Add(-3*time.Second), got.Slot, near, "step 4: slot")

	// Step 5: a turn already late when its ticket is issued.
	tk, err = lim.IssueTicket(ctx, "api", clock.Now().Add(-10*time.Second), "")
	require.NoError(t, err, "step 5")
	got, ok, err = lim.RedeemTicket(ctx, "api", tk.ID)
	require.NoError(t, err, "step 5")
	require.True(t, ok, "step 5: redeemed")
	assert.WithinDuration(t, time.Now().Add(-10*time.Second), got.Slot, near, "step 5: slot")

	// Step 5b: a reset of the bucket voids the tickets issued before it, not
	// those issued after.
	before, err := lim.IssueTicket(ctx, "api", clock.Now().Add(time.Second), "")
	require.NoError(t, err, "step 5b")
	clock.advance(time.Millisecond)
	require.NoError(t, lim.Reset(ctx, "api", Limit{Rate: 10, Burst: 1}), "step 5b")
	clock.advance(time.Millisecond)
	after, err := lim.IssueTicket(ctx, "api", clock.Now().Add(time.Second), "")
	require.NoError(t, err, "step 5b")
	_, ok, err = lim.RedeemTicket(ctx, "api", before.ID)
	require.NoError(t, err, "step 5b")
	assert.False(t, ok, "step 5b: a ticket issued before the reset redeemed")
	_, ok, err = lim.RedeemTicket(ctx, "api", after.ID)
	require.NoError(t, err, "step 5b")
	assert.True(t, ok, "step 5b: a ticket issued after the reset redeemed")

	// Step 6: bad input, before any I/O.
	_, err = lim.IssueTicket(ctx, "api", clock.Now(), strings.Repeat("n", 257))
	assert.ErrorIs(t, err, ErrInvalid, "step 6: long note")
	_, err = lim.IssueTicket(ctx, "", clock.Now(), "")
	assert.ErrorIs(t, err, ErrInvalid, "step 6: no key")

	// Step 7: of many holders of one id at once, one redeems it.
	tk, err = lim.IssueTicket(ctx, "api", clock.Now().Add(time.Second), "")
	require.NoError(t, err, "step 7")
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok, err := lim.RedeemTicket(ctx, "api", tk.ID); err == nil && ok {
				wins.Add(1)
			}
		}()
	}
	wg.Wait()
	assert.Equal(t, int32(1), wins.Load(), "step 7: redeemed")
}

func TestTicketsMemory(t *testing.T) {
	runTickets(t, func(c clock) Store { return NewMemoryStore(WithClock(c)) }, "")

	// A ticket never redeemed is forgotten ticketGrace after its slot.
	ctx := context.Background()
	clock := newFakeClock()
	lim := NewLimiter(NewMemoryStore(WithClock(clock)))
	tk, err := lim.IssueTicket(ctx, "api", clock.Now().Add(time.Second), "")
	require.NoError(t, err)
	clock.advance(time.Second + ticketGrace)
	_, ok, err := lim.RedeemTicket(ctx, "api", tk.ID)
	require.NoError(t, err)
	assert.False(t, ok, "redeemed after its grace")
}

func TestTicketsRedis(t *testing.T) {
	rdb := redistest.Shared(t).Client(t)
	prefix := redistest.Prefix(t)
	runTickets(t, func(c clock) Store { return NewRedisStore(rdb, WithClock(c)) }, prefix)

	// The record lives beside its bucket until ticketGrace after its slot.
	ctx := context.Background()
	lim := NewLimiter(NewRedisStore(rdb), WithKeyPrefix(prefix))
	tk, err := lim.IssueTicket(ctx, "api", time.Now().Add(3*time.Second), "fp")
	require.NoError(t, err)
	key := prefix + "{api}:ticket:" + tk.ID
	ttl, err := rdb.PTTL(ctx, key).Result()
	require.NoError(t, err)
	assert.InDelta(t, float64(3*time.Second+ticketGrace), float64(ttl), float64(100*time.Millisecond), "the record's TTL")
	rec, err := rdb.Get(ctx, key).Result()
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(rec, " fp"), "the record %q", rec)

	// A store that cannot answer: an error, and the ticket is not spent.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = lim.RedeemTicket(cctx, "api", tk.ID)
	assert.Error(t, err, "redeem on an ended context")
	_, ok, err := lim.RedeemTicket(ctx, "api", tk.ID)
	require.NoError(t, err)
	assert.True(t, ok, "redeemed after a failed call")
}
