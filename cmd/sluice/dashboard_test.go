package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/browsertest"
	"github.com/sluicehq/sluice/internal/control"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
	"github.com/sluicehq/sluice/throttle"
)

// newDashboard serves a dashboard over a fresh Redis holding a worker's
// heartbeat and three queued jobs, with token and the dashboard's flags in
// args (--allow-host, say).
func newDashboard(t *testing.T, token string, args ...string) (*httptest.Server, *fleet) {
	t.Helper()
	srv := redistest.Start(t)
	f, err := connect(context.Background(), options{redisURL: srv.URL(), keyPrefix: "sluice:"})
	require.NoError(t, err)
	t.Cleanup(f.close)
	require.NoError(t, f.ctl.Beat(context.Background(), control.Heartbeat{
		ID: "w1:42:1", Host: "worker-one", PID: 42, Mode: "shared", Seen: time.Now(), Queues: []string{"default"}, Cooldowns: 7,
		Limits: []control.LimitState{{Type: "sleep", Spec: "sleep=5/s,burst=2", Source: "flag", Grants: 4.5}},
	}))
	qc := queue.NewClient(asynq.NewClientFromRedisClient(srv.Client(t)))
	for range 3 {
		_, err := qc.Enqueue(context.Background(), queue.Task{Type: "sleep", Payload: []byte(`{"ms": 1}`)})
		require.NoError(t, err)
	}
	opts, _, err := parseArgs(append([]string{"dashboard", "--token", token}, args...))
	require.NoError(t, err)
	hs := httptest.NewUnstartedServer(nil)
	opts.addr = hs.Listener.Addr().String()
	hs.Config.Handler = newDashboardFor(f, opts, io.Discard).handler()
	hs.Start()
	t.Cleanup(hs.Close)
	return hs, f
}

func TestDashboardState(t *testing.T) {
	hs, _ := newDashboard(t, "")
	resp, err := http.Get(hs.URL + "/api/state")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st state
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	assert.False(t, st.Writable)
	require.Len(t, st.Limits, 1)
	assert.Equal(t, "sleep", st.Limits[0].Type)
	assert.InDelta(t, 5, st.Limits[0].RatePerS, 1e-9)
	require.Len(t, st.Workers, 1)
	require.Len(t, st.Queues, 1)
	assert.Equal(t, 3, st.Queues[0].Pending)

	for _, path := range []string{"/", "/dom.js", "/charts.js", "/app.js", "/style.css"} {
		resp, err := http.Get(hs.URL + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'", path)
	}
}

func TestDashboardActions(t *testing.T) {
	post := func(url, token, origin, ctype, body string) (int, string) {
		req, err := http.NewRequest(http.MethodPost, url+"/api/action", strings.NewReader(body))
		require.NoError(t, err)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		req.Header.Set("Content-Type", ctype)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	set := `{"op": "set", "spec": "sleep=1/s"}`

	ro, _ := newDashboard(t, "")
	code, body := post(ro.URL, "anything", "", "application/json", set)
	assert.Equal(t, http.StatusForbidden, code)
	assert.Contains(t, body, "read-only")

	wrong, _ := newDashboard(t, goodToken) // a wrong token holds its sender (TestDashboardWrongTokens)
	code, _ = post(wrong.URL, "", "", "application/json", set)
	assert.Equal(t, http.StatusUnauthorized, code, "no token")
	wrong, _ = newDashboard(t, goodToken)
	code, _ = post(wrong.URL, "wrong", "", "application/json", set)
	assert.Equal(t, http.StatusUnauthorized, code)

	hs, f := newDashboard(t, goodToken)
	code, _ = post(hs.URL, goodToken, "https://evil.example", "application/json", set)
	assert.Equal(t, http.StatusForbidden, code, "cross-site")
	code, _ = post(hs.URL, goodToken, "", "application/x-www-form-urlencoded", "op=set&spec=sleep%3D1%2Fs")
	assert.Equal(t, http.StatusUnsupportedMediaType, code, "a form")
	code, body = post(hs.URL, goodToken, "", "application/json", `{"op": "set", "spec": "sleep=fast"}`)
	assert.Equal(t, http.StatusBadRequest, code, "a bad spec is refused")
	assert.Contains(t, body, "sleep=fast")
	limits, _, err := f.ctl.Limits(context.Background())
	require.NoError(t, err)
	assert.Empty(t, limits, "nothing set by the refused requests")

	code, body = post(hs.URL, goodToken, hs.URL, "application/json", set)
	require.Equal(t, http.StatusOK, code, body)
	limits, _, err = f.ctl.Limits(context.Background())
	require.NoError(t, err)
	assert.Equal(t, "sleep=1/s,burst=1", limits["sleep"].Spec, "as the grammar writes it")
	assert.True(t, strings.HasPrefix(limits["sleep"].By, "dashboard "), limits["sleep"].By)

	code, body = post(hs.URL, goodToken, "", "application/json", `{"op": "cooldown", "key": "sleep", "duration": "20s"}`)
	require.Equal(t, http.StatusOK, code, body)
	st, err := f.lim.Peek(context.Background(), "sleep", mustPolicy(t, f, "sleep"))
	require.NoError(t, err)
	assert.Greater(t, st.Cooldown, 15*time.Second)
}

func mustPolicy(t *testing.T, f *fleet, typ string) throttle.Policy {
	t.Helper()
	p, _, err := f.policyOf(context.Background(), typ, "", "")
	require.NoError(t, err)
	return p
}

// The page, in a real headless browser at a phone's width, shows the live
// state: the limit with its spec, the worker, the queue's depth, and the
// read-only notice; its script ran (no row is in the HTML it was served).
// (The page's parts in detail: page_test.go, over a fixture.)
func TestDashboardInBrowser(t *testing.T) {
	chrome := browsertest.Path(t)
	hs, _ := newDashboard(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := dumpDOM(ctx, t, hs.URL+"/", 390)
	require.NoError(t, err, "%s --dump-dom", chrome)
	dom := string(out)
	assert.Contains(t, dom, `<tr data-type="sleep">`, "the limit's row, drawn by the script")
	assert.Contains(t, dom, "sleep=5/s,burst=2")
	assert.Contains(t, dom, "worker-one")
	assert.Contains(t, dom, `<td class="num cooling">7</td>`, "the worker's 429 cooldowns")
	assert.Contains(t, dom, `<section class="limit" data-type="sleep"`, "the type's section")
	assert.Contains(t, dom, `<svg class="chart" data-chart="grants"`, "its charts")
	assert.Contains(t, dom, `<td class="wlimits" title="sleep=5/s,burst=2 (flag)">sleep (flag)</td>`, "the worker's limits")
	assert.Regexp(t, `<td>default</td><td class="num">3</td>`, dom, "the queue's pending jobs")
	assert.Regexp(t, `<p id="readonly">`, dom, "the read-only notice is shown")
	assert.Contains(t, dom, "updated ", "the status line")
}
