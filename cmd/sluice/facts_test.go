package main

import (
	"fmt"

	"bufio"
	"context"
	"encoding/json"
	"errors"
	"github.com/redis/go-redis/v9"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

// archiveOne has asynq archive a job of type typ in a member of the family
// of queue "default", failing with reason: a real asynq server runs it
// once (MaxRetry 0). It returns the job's id and its member queue.
func archiveOne(t *testing.T, srv *redistest.Server, typ, reason string) (id, member string) {
	t.Helper()
	member = queue.Family("default")[3]
	insp := asynq.NewInspectorFromRedisClient(srv.Client(t))
	before := 0 // the member's archived jobs so far (an earlier call's)
	if q, err := insp.GetQueueInfo(member); err == nil {
		before = q.Archived
	}
	ac := asynq.NewClientFromRedisClient(srv.Client(t))
	info, err := ac.Enqueue(asynq.NewTask(typ, nil), asynq.Queue(member), asynq.MaxRetry(0))
	require.NoError(t, err)
	as := asynq.NewServerFromRedisClient(srv.Client(t), asynq.Config{Concurrency: 1, Queues: map[string]int{member: 1},
		Logger: quietAsynq{}, LogLevel: asynq.FatalLevel})
	require.NoError(t, as.Start(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return errors.New(reason) })))
	defer as.Shutdown()
	require.Eventually(t, func() bool {
		q, err := insp.GetQueueInfo(member)
		return err == nil && q.Archived == before+1
	}, 10*time.Second, 20*time.Millisecond, "the job is archived")
	return info.ID, member
}

type quietAsynq struct{}

func (quietAsynq) Debug(...any) {}
func (quietAsynq) Info(...any)  {}
func (quietAsynq) Warn(...any)  {}
func (quietAsynq) Error(...any) {}
func (quietAsynq) Fatal(...any) {}

// dashboardOver serves a dashboard over srv, holding a worker's heartbeat
// (version v1.2.3, type sleep, queue default), with the dashboard's flags
// in args.
func dashboardOver(t *testing.T, srv *redistest.Server, args ...string) (*httptest.Server, *fleet, *dashboard) {
	t.Helper()
	f, err := connect(context.Background(), options{redisURL: srv.URL(), keyPrefix: "sluice:"})
	require.NoError(t, err)
	t.Cleanup(f.close)
	require.NoError(t, f.ctl.Beat(context.Background(), control.Heartbeat{
		ID: "w1:42:1", Host: "worker-one", PID: 42, Version: "v1.2.3", Mode: "shared", Seen: time.Now(), Queues: []string{"default"},
		Limits: []control.LimitState{{Type: "sleep", Spec: "sleep=5/s,burst=2", Source: "flag", Grants: 4.5}},
	}))
	opts, _, err := parseArgs(append([]string{"dashboard"}, args...))
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(nil)
	opts.addr = hs.Listener.Addr().String()
	d := newDashboardFor(f, opts, io.Discard)
	hs.Config.Handler = d.handler()
	t.Cleanup(hs.Close)
	return hs, f, d
}

// The state lists the archived jobs of the queues the workers serve,
// newest first, with their reasons and, with --asynqmon, a link to
// asynqmon's page of each; inspect TYPE lists the type's, and --json gives
// the type's rows beside them.
func TestArchivedJobs(t *testing.T) {
	srv := redistest.Start(t)
	hs, _, _ := dashboardOver(t, srv, "--asynqmon", "http://mon.example:8081/monitoring/")
	hs.Start()
	id, member := archiveOne(t, srv, "sleep", "upstream said 400: bad request")
	other, _ := archiveOne(t, srv, "other", "no handler")

	resp, err := http.Get(hs.URL + "/api/state")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st state
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	require.Len(t, st.Archived, 2, st.Errors)
	assert.Equal(t, other, st.Archived[0].ID, "newest first")
	a := st.Archived[1]
	assert.Equal(t, id, a.ID)
	assert.Equal(t, "sleep", a.Type)
	assert.Equal(t, "default", a.Queue, "the family's name")
	assert.Equal(t, "upstream said 400: bad request", a.Reason)
	assert.WithinDuration(t, time.Now(), a.FailedAt, 30*time.Second)
	assert.Equal(t, "http://mon.example:8081/monitoring/queues/"+member+"/tasks/"+id, a.Link)

	r := runArgs("inspect", "sleep", "--redis", srv.URL(), "--json")
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	var x struct {
		Remaining *int           `json:"remaining"`
		Limits    []limitView    `json:"limits"`
		Archived  []archivedView `json:"archived"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &x))
	require.NotNil(t, x.Remaining, "the type's own bucket, as inspect KEY gives it")
	require.Len(t, x.Limits, 1)
	assert.Equal(t, "own", x.Limits[0].Buckets[0].Kind)
	require.Len(t, x.Archived, 1, "of the type only")
	assert.Equal(t, id, x.Archived[0].ID)
	assert.Empty(t, x.Archived[0].Link, "no --asynqmon")

	r = runArgs("inspect", "sleep", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Regexp(t, `^sleep: 2 left, `, r.stdout, "the bucket's line first, as before")
	assert.Contains(t, r.stdout, "sleep: own binds: cold start: waiting for the upstream's first answer; 4.5 grants/s\n",
		"4.5 grants/s is 90 % of 5/s")
	assert.Regexp(t, `\* own\s+5\s+5\s+2\s+-\s+cold start`, r.stdout, "the binding bucket marked")
	assert.Regexp(t, `default\s+`+id+`\s+upstream said 400: bad request`, r.stdout)
}

func TestPreviewText(t *testing.T) {
	for i, tc := range []struct {
		x    previewFacts
		want string
	}{
		{previewFacts{Op: "set", Type: "http:request", Spec: "20/s,burst=2", Workers: 3, Emptied: []string{"http:request"}, Unpark: 1204, Parked: 1204},
			"every worker that limits http:request (3) applies 20/s,burst=2 within a second; the bucket http:request is emptied (full again); 1,204 parked jobs come back"},
		{previewFacts{Op: "set", Type: "q", Spec: "10/day", Workers: 1, Emptied: []string{"q"}, Unpark: 10, Parked: 40},
			"the worker that limits q applies 10/day within a second; the bucket q is emptied (full again); 10 of the 40 parked jobs come back"},
		{previewFacts{Op: "set", Type: "slep", Spec: "1/s", Workers: 0},
			"no live worker limits slep: 1/s is stored, and a worker applies it once it runs with a limit for the type"},
		{previewFacts{Op: "set", Type: "http:request", Spec: "20/s,key=tenant:{header.k},global=30/s", Workers: -1,
			Emptied: []string{"{http:request}:global"}, PerKey: true},
			"every worker that limits http:request applies 20/s,key=tenant:{header.k},global=30/s within a second; " +
				"the bucket {http:request}:global is emptied (full again); each key's bucket keeps the turns booked in it"},
		{previewFacts{Op: "unset", Type: "sleep", Own: []string{"sleep=5/s,burst=2"}, Emptied: []string{"sleep"}},
			"the workers' own limits of sleep apply again: sleep=5/s,burst=2; the bucket sleep is emptied (full again)"},
		{previewFacts{Op: "unset", Type: "sleep"},
			"the workers' own limits of sleep apply again (their flags or limits files; their heartbeats show the runtime limit while it is set)"},
		{previewFacts{Op: "reset", Bucket: "sleep", Tickets: 12},
			"bucket sleep is full again; the turns booked in it are void and 12 jobs sent back holding them come forward (as many at once as the limit runs in 5s)"},
		{previewFacts{Op: "reset", Bucket: "sleep", Tickets: 1000, TicketsMore: true},
			"bucket sleep is full again; the turns booked in it are void and at least 1,000 jobs sent back holding them come forward (as many at once as the limit runs in 5s)"},
		{previewFacts{Op: "reset", Bucket: "sleep"}, "bucket sleep is full again; the turns booked in it are void"},
		{previewFacts{Op: "cooldown", Bucket: "sleep", Duration: 30 * time.Second, Waiting: 4},
			"every worker pauses bucket sleep for 30s: its jobs wait or go back to their queue (4 waiting now)"},
	} {
		assert.Equal(t, tc.want, confirmText(tc.x), "%d", i)
	}
}

// POST /api/preview: no token, nothing changed; a bad spec gets the
// message set gives; the cross-site checks hold.
func TestPreviewHTTP(t *testing.T) {
	srv := redistest.Start(t)
	hs, f, _ := dashboardOver(t, srv, "--token", goodToken)
	hs.Start()
	post := func(origin, body string) (int, map[string]string) {
		req, err := http.NewRequest(http.MethodPost, hs.URL+"/api/preview", strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		var out map[string]string
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return resp.StatusCode, out
	}
	code, out := post("", `{"op": "set", "spec": "sleep=20/s,burst=2"}`)
	require.Equal(t, http.StatusOK, code, out)
	assert.Equal(t, "the worker that limits sleep applies 20/s,burst=2 within a second; the bucket sleep is emptied (full again)", out["confirm"])
	limits, _, err := f.ctl.Limits(context.Background())
	require.NoError(t, err)
	assert.Empty(t, limits, "a preview sets nothing")

	code, out = post("", `{"op": "set", "spec": "sleep=fast"}`)
	assert.Equal(t, http.StatusBadRequest, code)
	r := runArgs("--redis", srv.URL(), "set", "sleep=fast")
	assert.Equal(t, "sluice: "+out["error"], strings.SplitN(r.stderr, "\n", 2)[0], "the message set gives")

	code, out = post("", `{"op": "cooldown", "key": "sleep", "duration": "30s"}`)
	require.Equal(t, http.StatusOK, code, out)
	assert.Equal(t, "every worker pauses bucket sleep for 30s: its jobs wait or go back to their queue (0 waiting now)", out["confirm"])
	code, out = post("", `{"op": "cooldown", "key": "sleep", "duration": "-5s"}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, out["error"], "must be positive")
	code, out = post("", `{"op": "unset", "type": "sleep"}`)
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Equal(t, `no runtime limit for type "sleep"`, out["error"])
	code, _ = post("https://evil.example", `{"op": "reset", "key": "sleep"}`)
	assert.Equal(t, http.StatusForbidden, code, "cross-site")
	code, out = post("", `{"op": "reset", "key": "sleep"}`)
	require.Equal(t, http.StatusOK, code, out)
	assert.Equal(t, "bucket sleep is full again; the turns booked in it are void", out["confirm"])
}

// GET /api/events streams the state, an event a second (here every 50 ms),
// and a 33rd stream is refused while 32 are open.
func TestEvents(t *testing.T) {
	srv := redistest.Start(t)
	hs, _, d := dashboardOver(t, srv)
	d.every = 50 * time.Millisecond
	d.streams = make(chan struct{}, 2)
	hs.Start()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func() *http.Response {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, hs.URL+"/api/events", nil)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	resp := open()
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "text/event-stream", resp.Header.Get("Content-Type"))
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var events []state
	var times []time.Time
	event := ""
	for len(events) < 2 && sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			require.Equal(t, "state", event)
			var st state
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &st))
			events = append(events, st)
			times = append(times, time.Now())
		}
	}
	require.Len(t, events, 2, sc.Err())
	for _, st := range events {
		require.Len(t, st.Limits, 1)
		assert.Equal(t, "sleep", st.Limits[0].Type)
		require.Len(t, st.Workers, 1)
		assert.Equal(t, "v1.2.3", st.Workers[0].Version)
	}
	assert.True(t, events[1].Time.After(events[0].Time), "two readings, not one sent twice")

	second := open()
	defer second.Body.Close()
	require.Equal(t, http.StatusOK, second.StatusCode)
	third := open()
	b, _ := io.ReadAll(third.Body)
	third.Body.Close()
	assert.Equal(t, http.StatusServiceUnavailable, third.StatusCode, "over the bound of 2 streams")
	assert.NotEmpty(t, third.Header.Get("Retry-After"))
	assert.Contains(t, string(b), "too many live streams")

	r := runArgs("workers", "--redis", srv.URL())
	require.Equal(t, cli.ExitOK, r.code, r.stderr)
	assert.Regexp(t, `worker-one\s+42\s+shared\s+v1\.2\.3\s+sleep=5/s,burst=2 \(flag\)`, r.stdout)
}

// A raise of a spent calendar quota says how many parked jobs come back; a
// raise that leaves it spent, or a rate change, says none.
func TestPreviewParked(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	_, f, _ := dashboardOver(t, srv)
	require.NoError(t, f.ctl.Beat(ctx, control.Heartbeat{
		ID: "w2:43:1", Host: "worker-two", PID: 43, Mode: "shared", Seen: time.Now(), Queues: []string{"default"},
		Limits: []control.LimitState{{Type: "q", Spec: "q=2/day", Source: "flag"}},
	}))
	pol := mustPolicy(t, f, "q")
	for range 2 { // the day's quota spent
		res, err := f.lim.TryAcquire(ctx, "q", pol, 1)
		require.NoError(t, err)
		require.True(t, res.Allowed)
	}
	for i := range 3 {
		require.NoError(t, f.qrdb.ZAdd(ctx, "sluice:parked:{q}", redis.Z{Score: float64(time.Now().Add(time.Hour).UnixMilli()), Member: fmt.Sprint("job", i)}).Err())
	}
	for i, tc := range []struct{ spec, want string }{
		{"q=10/day", "the worker that limits q applies 10/day,policy=fixed-window within a second; the bucket q is emptied (full again); 3 parked jobs come back"},
		{"q=2/day", "the worker that limits q applies 2/day,policy=fixed-window within a second; the bucket q is emptied (full again)"},
		{"q=5/s", "the worker that limits q applies 5/s,burst=5 within a second; the bucket q is emptied (full again)"},
	} {
		got, err := f.preview(ctx, actionRequest{Op: "set", Spec: tc.spec})
		require.NoError(t, err, "%d", i)
		assert.Equal(t, tc.want, got, "%d", i)
	}
}

// --asynqmon takes an http(s) address; anything else is bad usage.
func TestAsynqmonFlag(t *testing.T) {
	for _, bad := range []string{"mon.example:8081", "ftp://mon.example", "http://"} {
		r := runArgs("dashboard", "--redis", "redis://127.0.0.1:1", "--asynqmon", bad)
		assert.Equal(t, cli.ExitUsage, r.code, bad)
		assert.Contains(t, r.stderr, "want asynqmon's address", bad)
		r = runArgs("inspect", "sleep", "--redis", "redis://127.0.0.1:1", "--asynqmon", bad)
		assert.Equal(t, cli.ExitUsage, r.code, bad)
	}
	assert.Equal(t, "http://m:1/queues/default:p3:l0/tasks/a%2Fb", asynqmonLink("http://m:1/", "default:p3:l0", "a/b"))
	assert.Empty(t, asynqmonLink("", "default", "x"))
}
