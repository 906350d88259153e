package integration

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

// A day cannot be made short without a test-only switch in the product, so
// these tests make midnight near instead: each writes a time zone of its own
// (a TZif file, as in the IANA database) whose UTC offset puts the next local
// midnight the few seconds away the test needs, in a directory the built
// binaries read zones from (Go's ZONEINFO), and names it in zone= as users
// name America/Los_Angeles. The workers, the limiter's boundaries and sluice
// limits all go through time.LoadLocation, as in production.

// zoneDir writes zone name, whose next midnight is about in from now on a
// whole second, into a fresh ZONEINFO directory; it returns the directory
// and that midnight.
func zoneDir(t *testing.T, name string, in time.Duration) (string, time.Time) {
	t.Helper()
	m := time.Now().Add(in).Truncate(time.Second).UTC()
	off := -int32(m.Hour()*3600 + m.Minute()*60 + m.Second()) // local midnight at m
	var b bytes.Buffer
	b.WriteString("TZif")
	b.WriteByte(0) // version 1: no transitions, one local time type
	b.Write(make([]byte, 15))
	for _, n := range []uint32{0, 0, 0, 0, 1, 4} { // isut, isstd, leap, time, type, char counts
		require.NoError(t, binary.Write(&b, binary.BigEndian, n))
	}
	require.NoError(t, binary.Write(&b, binary.BigEndian, off))
	b.Write([]byte{0, 0})
	b.WriteString("TST\x00")
	dir := t.TempDir()
	path := filepath.Join(dir, filepath.FromSlash(name))
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
	loc, err := time.LoadLocationFromTZData(name, b.Bytes())
	require.NoError(t, err)
	require.True(t, time.Date(m.In(loc).Year(), m.In(loc).Month(), m.In(loc).Day(), 0, 0, 0, 0, loc).Equal(m), "midnight at %v", m)
	return dir, m
}

// quotaFleet starts n built workers with ZONEINFO=dir and args.
func quotaFleet(t *testing.T, srv *redistest.Server, insp *asynq.Inspector, dir string, n int, args ...string) []*process {
	t.Helper()
	fleet := make([]*process, n)
	for i := range fleet {
		all := append([]string{"--redis", srv.URL(), "--key-prefix", keyPrefix, "--log-format", "json"}, args...)
		fleet[i] = startProcess(t, "worker"+string(rune('1'+i)), bin.worker, all, "ZONEINFO="+dir)
	}
	waitServers(t, insp, startTimeout, fleet...)
	return fleet
}

// quotaRow is what the tests read of a row of sluice limits --json.
type quotaRow struct {
	Type        string `json:"type"`
	Parked      int    `json:"parked"`
	ParkedUntil string `json:"parked_until"`
	Quota       *struct {
		Max  int    `json:"max"`
		Used *int   `json:"used"`
		Text string `json:"text"`
	} `json:"quota"`
}

// sluiceIn runs the built sluice command with ZONEINFO=dir and returns its
// output, failing the test unless it exits 0.
func sluiceIn(t *testing.T, srv *redistest.Server, dir string, args ...string) string {
	t.Helper()
	p := startProcess(t, "sluice", bin.sluice, append(args, "--redis", srv.URL(), "--key-prefix", keyPrefix), "ZONEINFO="+dir)
	require.Equal(t, 0, p.Wait(10*time.Second), "sluice %s: %s", strings.Join(args, " "), p.Output())
	return readFile(p.out)
}

// Two built workers, a quota of 4 a day in a zone whose midnight is 8 s
// away, a horizon of 2 s: of 8 jobs, 4 run now and 4 are parked, due in the
// first seconds after the zone's midnight, none archived; sluice limits
// says 4 of 4 used and 4 parked until midnight; after midnight each parked
// job runs, once.
func TestQuotaParksUntilMidnight(t *testing.T) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	dir, midnight := zoneDir(t, "Sluice/Soon", 8*time.Second)
	fleet := quotaFleet(t, srv, insp, dir, 2, "--concurrency", "4", "--horizon", "2s", "--max-wait", "200ms",
		"--limit", "http:request=4/day,name=day,zone=Sluice/Soon", "--limit", "http:request=20/s,name=second")
	ids := jobIDs("q", 8)
	enqueueIDs(t, srv, up, ids, func(string) []asynq.Option { return []asynq.Option{asynq.MaxRetry(0)} })

	require.Eventually(t, func() bool { return len(up.Requests()) == 4 && queueInfo(t, insp).Scheduled == 4 }, 5*time.Second, 20*time.Millisecond,
		"4 run and 4 parked: %s", counts(queueInfo(t, insp)))
	scheduled, err := insp.ListScheduledTasks(queueName)
	require.NoError(t, err)
	for _, s := range scheduled {
		assert.False(t, s.NextProcessAt.Before(midnight), "due at the zone's midnight %v or after, not %v", midnight, s.NextProcessAt)
		assert.True(t, s.NextProcessAt.Before(midnight.Add(3*time.Second)), "within the first seconds after it: %v", s.NextProcessAt)
		assert.Equal(t, unixMicros(midnight), s.Headers[queue.HeaderParkedUntil])
	}
	var rows []quotaRow
	require.NoError(t, json.Unmarshal([]byte(sluiceIn(t, srv, dir, "limits", "--json")), &rows))
	require.Len(t, rows, 2)
	day := rows[0]
	if day.Quota == nil {
		day = rows[1]
	}
	require.NotNil(t, day.Quota)
	assert.Equal(t, 4, *day.Quota.Used)
	assert.Contains(t, day.Quota.Text, "4 of 4 today; resets 00:00 Sluice/Soon, in ")
	assert.Equal(t, 4, day.Parked)
	assert.Equal(t, midnight.UTC().Format(time.RFC3339), mustUTC(t, day.ParkedUntil))

	qi := waitDrained(t, insp, time.Until(midnight)+10*time.Second)
	assert.Equal(t, 0, qi.Archived, "none archived by the 2s horizon")
	byID := make(map[string][]time.Time)
	for _, r := range up.Requests() {
		byID[r.ID] = append(byID[r.ID], r.At)
	}
	after := 0
	for _, id := range ids {
		require.Len(t, byID[id], 1, "job %s ran once", id)
		if !byID[id][0].Before(midnight) {
			after++
		}
	}
	assert.Equal(t, 4, after, "the 4 parked jobs ran after midnight")
	st := stopFleet(t, fleet, 10*time.Second)
	assert.Equal(t, int64(8), st.Processed)
	assert.Equal(t, int64(0), st.Archived)
	assert.Equal(t, int64(4), st.Requeued, "each parked job sent back once")
}

// parkedScheduled counts the scheduled tasks that are parked for a
// calendar quota's reset.
func parkedScheduled(t *testing.T, insp *asynq.Inspector) int {
	t.Helper()
	s, err := insp.ListScheduledTasks(queueName)
	if err != nil {
		return -1
	}
	n := 0
	for _, x := range s {
		if x.Headers[queue.HeaderParkedUntil] != "" {
			n++
		}
	}
	return n
}

func unixMicros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }

func mustUTC(t *testing.T, rfc3339 string) string {
	t.Helper()
	at, err := time.Parse(time.RFC3339, rfc3339)
	require.NoError(t, err)
	return at.UTC().Format(time.RFC3339)
}

// A raised quota brings the parked jobs back within 2 s of sluice set, not
// at the reset an hour away.
func TestQuotaRaiseUnparks(t *testing.T) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	dir, _ := zoneDir(t, "Sluice/Later", time.Hour)
	fleet := quotaFleet(t, srv, insp, dir, 2, "--concurrency", "4", "--max-wait", "200ms",
		"--limit", "http:request=2/day,zone=Sluice/Later")
	enqueueIDs(t, srv, up, jobIDs("r", 5), nil)
	require.Eventually(t, func() bool { return len(up.Requests()) == 2 && queueInfo(t, insp).Scheduled == 3 }, 5*time.Second, 20*time.Millisecond,
		"2 run and 3 parked: %s", counts(queueInfo(t, insp)))

	set := time.Now()
	sluiceIn(t, srv, dir, "set", "http:request=10/day,zone=Sluice/Later")
	require.Eventually(t, func() bool { return len(up.Requests()) == 5 }, 5*time.Second, 10*time.Millisecond, "the parked jobs run")
	back := time.Since(set)
	t.Logf("the 3 parked jobs ran %v after sluice set began", back.Round(time.Millisecond))
	assert.Less(t, back, 2*time.Second, "within 2 s of the raise")
	qi := waitDrained(t, insp, 5*time.Second)
	assert.Equal(t, 0, qi.Archived)
	stopFleet(t, fleet, 10*time.Second)
}

// A calendar quota with the other options on, in the built binaries: a key
// per tenant, a global bucket shared fairly and adaptive (the defaults with
// key= and global=), an upstream 429 that cools the global bucket down, and
// a raise with sluice set. Each tenant's quota is its own; the 429's job
// comes back after the cooldown and runs; tenant a's jobs over its quota are
// parked; the raise runs one of them within 2 s and parks the other again;
// none is archived, none runs twice.
func TestQuotaWithEveryOption(t *testing.T) {
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	dir, _ := zoneDir(t, "Sluice/Later", time.Hour)
	spec := func(perDay int) string {
		return "http:request=" + strconv.Itoa(perDay) + "/day,zone=Sluice/Later,key=tenant:{header.sluice-key},global=50/s:5"
	}
	fleet := quotaFleet(t, srv, insp, dir, 2, "--concurrency", "4", "--max-wait", "200ms", "--limit", spec(2))

	up.RefuseWindow(0, 300*time.Millisecond, "1")
	enqueueKeyed(t, srv, up, "b", []string{"b-1"}, nil)
	require.Eventually(t, func() bool { return up.Count(200) == 1 }, 10*time.Second, 20*time.Millisecond, "b's job, after its 429's cooldown")
	require.Equal(t, 1, up.Count(429), "one 429")
	enqueueKeyed(t, srv, up, "a", jobIDs("a", 4), nil)
	// a job of a may go back over its fair share first, and be parked when
	// it comes back
	require.Eventually(t, func() bool { return up.Count(200) == 3 && parkedScheduled(t, insp) == 2 }, 5*time.Second, 20*time.Millisecond,
		"2 of a's run, 2 parked: %s", counts(queueInfo(t, insp)))

	var rows []quotaRow
	require.NoError(t, json.Unmarshal([]byte(sluiceIn(t, srv, dir, "limits", "--json")), &rows))
	require.Len(t, rows, 1)
	require.NotNil(t, rows[0].Quota)
	assert.Contains(t, rows[0].Quota.Text, "2 per key today; resets 00:00 Sluice/Later")
	assert.Equal(t, 2, rows[0].Parked)

	set := time.Now()
	sluiceIn(t, srv, dir, "set", spec(3))
	require.Eventually(t, func() bool { return up.Count(200) == 4 }, 5*time.Second, 10*time.Millisecond, "one parked job of a runs")
	t.Logf("a parked job ran %v after sluice set began", time.Since(set).Round(time.Millisecond))
	assert.Less(t, time.Since(set), 2500*time.Millisecond)
	require.Eventually(t, func() bool {
		s, err := insp.ListScheduledTasks(queueName)
		return err == nil && len(s) == 1 && s[0].Headers[queue.HeaderParks] == "2"
	}, 5*time.Second, 20*time.Millisecond, "the other parked again")
	time.Sleep(300 * time.Millisecond)
	assert.Equal(t, 4, up.Count(200), "no room for it until the reset")
	ok := map[string]int{}
	for _, r := range up.Requests() {
		if r.Status == 200 {
			ok[r.ID]++
		}
	}
	for id, n := range ok {
		assert.Equal(t, 1, n, "%s ran once", id)
	}
	assert.Equal(t, 0, queueInfo(t, insp).Archived)
	st := stopFleet(t, fleet, 10*time.Second)
	assert.Equal(t, int64(0), st.Archived)
}
