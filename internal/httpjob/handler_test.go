package httpjob

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/workers"
)

// now is the fixed instant the tests' Handlers read.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newHandler() *Handler {
	return &Handler{Now: func() time.Time { return now }}
}

// task returns an http:request task for r.
func task(t *testing.T, r Request) *asynq.Task {
	t.Helper()
	payload, err := json.Marshal(r)
	require.NoError(t, err)
	return asynq.NewTask(TaskType, payload)
}

func TestHandlerForwardsRequest(t *testing.T) {
	type seen struct {
		method, uri, body string
		header            http.Header
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.RequestURI, string(body), r.Header}
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()

	err := newHandler().ProcessTask(context.Background(), task(t, Request{
		URL:     srv.URL + "/v1/charge?id=42",
		Method:  "POST",
		Headers: map[string]string{"Content-Type": "application/json", "x-api-key": "k1", "X-Empty": ""},
		Body:    `{"amount": 100}`,
	}))
	require.NoError(t, err)
	s := <-got
	assert.Equal(t, "POST", s.method)
	assert.Equal(t, "/v1/charge?id=42", s.uri)
	assert.Equal(t, `{"amount": 100}`, s.body)
	assert.Equal(t, "application/json", s.header.Get("Content-Type"))
	assert.Equal(t, []string{"k1"}, s.header.Values("X-Api-Key"))
	assert.Equal(t, []string{""}, s.header.Values("X-Empty"))
	assert.Equal(t, "15", s.header.Get("Content-Length"))

	// GET by default, with no body.
	err = newHandler().ProcessTask(context.Background(), task(t, Request{URL: srv.URL + "/ping"}))
	require.NoError(t, err)
	s = <-got
	assert.Equal(t, "GET", s.method)
	assert.Equal(t, "/ping", s.uri)
	assert.Empty(t, s.body)
}

// outcome is what a test expects of an error returned by ProcessTask.
type outcome int

const (
	success   outcome = iota // nil
	permanent                // wraps asynq.SkipRetry: archived at once
	upstream                 // a *workers.UpstreamError: the bucket cools down
	retry                    // any other error: asynq retries with backoff
)

func (o outcome) String() string {
	return [...]string{"success", "permanent", "upstream", "retry"}[o]
}

func outcomeOf(err error) outcome {
	var ue *workers.UpstreamError
	switch {
	case err == nil:
		return success
	case errors.Is(err, asynq.SkipRetry):
		return permanent
	case errors.As(err, &ue):
		return upstream
	}
	return retry
}

func TestHandlerOutcomes(t *testing.T) {
	tests := []struct {
		status     int
		header     map[string]string
		body       string
		want       outcome
		message    string // after "http:request: GET <url> answered "; for upstream, the whole message
		retryAfter time.Duration
	}{
		{status: 200, body: "ok", want: success},
		{status: 202, want: success},
		{status: 204, want: success},
		{status: 404, body: "no such user", want: permanent, message: `404 Not Found: "no such user": skip retry for the task`},
		{status: 400, body: "{\n  \"error\":\t\"bad amount\"\n}", want: permanent, message: `400 Bad Request: "{ \"error\": \"bad amount\" }": skip retry for the task`},
		{status: 401, want: permanent, message: `401 Unauthorized: skip retry for the task`},
		{status: 410, body: strings.Repeat("gone ", 100), want: permanent, message: `410 Gone: "` + strings.TrimSpace(strings.Repeat("gone ", 40)) + `...": skip retry for the task`},
		{status: 304, want: permanent, message: `304 Not Modified: skip retry for the task`},
		{status: 429, header: map[string]string{"Retry-After": "7"}, want: upstream, message: "workers: upstream answered 429, retry after 7s", retryAfter: 7 * time.Second},
		{status: 429, want: upstream, message: "workers: upstream answered 429"},
		{status: 429, header: map[string]string{"Retry-After": "soon"}, want: upstream, message: `workers: upstream answered 429 (backoff: invalid Retry-After: "soon" is neither delta-seconds nor an HTTP-date)`},
		{status: 503, header: map[string]string{"Retry-After": now.Add(90 * time.Second).Format(http.TimeFormat)}, want: upstream, message: "workers: upstream answered 503, retry after 1m30s", retryAfter: 90 * time.Second},
		{status: 503, body: "maintenance", want: upstream, message: "workers: upstream answered 503"},
		// GitHub: a 403 with its quota spent, or with Retry-After, is a limit; without either, a client error.
		{status: 403, header: map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(now.Add(42*time.Second).Unix(), 10)}, want: upstream, message: "workers: upstream answered 403, retry after 42s", retryAfter: 42 * time.Second},
		{status: 403, header: map[string]string{"Retry-After": "60", "X-RateLimit-Remaining": "4000"}, want: upstream, message: "workers: upstream answered 403, retry after 1m0s", retryAfter: time.Minute},
		{status: 403, header: map[string]string{"X-RateLimit-Remaining": "4000"}, body: "forbidden", want: permanent, message: `403 Forbidden: "forbidden": skip retry for the task`},
		// Discord: the wait in a JSON body; Shopify: Retry-After as a decimal.
		{status: 429, header: map[string]string{"Content-Type": "application/json"}, body: `{"message": "You are being rate limited.", "retry_after": 0.64, "global": false}`, want: upstream, message: "workers: upstream answered 429, retry after 640ms", retryAfter: 640 * time.Millisecond},
		{status: 429, header: map[string]string{"X-Shopify-Shop-Api-Call-Limit": "40/40", "Retry-After": "2.0"}, want: upstream, message: "workers: upstream answered 429, retry after 2s", retryAfter: 2 * time.Second},
		{status: 500, body: "boom", want: retry, message: `500 Internal Server Error: "boom"`},
		{status: 502, want: retry, message: `502 Bad Gateway`},
		{status: 504, want: retry, message: `504 Gateway Timeout`},
	}
	for i, tt := range tests {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			for k, v := range tt.header {
				w.Header().Set(k, v)
			}
			w.WriteHeader(tt.status)
			_, _ = io.WriteString(w, tt.body)
		}))
		err := newHandler().ProcessTask(context.Background(), task(t, Request{URL: srv.URL + "/x"}))
		srv.Close()

		assert.Equal(t, tt.want, outcomeOf(err), "%d: status %d: %v", i, tt.status, err)
		switch tt.want {
		case success:
		case upstream:
			var ue *workers.UpstreamError
			require.ErrorAs(t, err, &ue, "%d", i)
			assert.Equal(t, tt.status, ue.StatusCode, "%d", i)
			assert.Equal(t, tt.retryAfter, ue.RetryAfter, "%d", i)
			assert.Equal(t, tt.message, err.Error(), "%d", i)
		default:
			assert.Equal(t, "http:request: GET "+srv.URL+"/x answered "+tt.message, err.Error(), "%d", i)
		}
	}
}

func TestHandlerBadPayload(t *testing.T) {
	tests := []struct {
		payload string
		want    string
	}{
		{`{}`, "http:request: bad payload: url is missing: skip retry for the task"},
		{`{"url": "https://h/", "verb": "GET"}`, `http:request: bad payload: payload: unknown field "verb": skip retry for the task`},
		{`not json`, `http:request: bad payload: payload: invalid character 'o' in literal null (expecting 'u'): skip retry for the task`},
	}
	for i, tt := range tests {
		err := newHandler().ProcessTask(context.Background(), asynq.NewTask(TaskType, []byte(tt.payload)))
		require.Error(t, err, "%d", i)
		assert.ErrorIs(t, err, asynq.SkipRetry, "%d", i)
		assert.Equal(t, tt.want, err.Error(), "%d", i)
	}
}

func TestHandlerNetworkError(t *testing.T) {
	// A port that was free a moment ago: nothing listens there.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())

	err = newHandler().ProcessTask(context.Background(), task(t, Request{URL: "http://" + addr + "/x", Method: "PUT"}))
	require.Error(t, err)
	assert.Equal(t, retry, outcomeOf(err), "%v", err)
	assert.True(t, strings.HasPrefix(err.Error(), "http:request: PUT http://"+addr+"/x: dial tcp "), err.Error())
}

func TestHandlerErrorsHideCredentials(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusForbidden)
	}))
	defer srv.Close()
	u := strings.Replace(srv.URL, "http://", "http://alice:hunter2@", 1) + "/x?api_key=s3cret#frag"

	err := newHandler().ProcessTask(context.Background(), task(t, Request{URL: u}))
	require.Error(t, err)
	assert.Equal(t, `http:request: GET `+srv.URL+`/x answered 403 Forbidden: "nope": skip retry for the task`, err.Error())

	// And when the request never gets an answer.
	srv.Close()
	err = newHandler().ProcessTask(context.Background(), task(t, Request{URL: u}))
	require.Error(t, err)
	for _, secret := range []string{"alice", "hunter2", "s3cret"} {
		assert.NotContains(t, err.Error(), secret)
	}
}

func TestHandlerContextBoundsRequest(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := newHandler().ProcessTask(ctx, task(t, Request{URL: srv.URL}))
	require.Error(t, err)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, retry, outcomeOf(err))
	assert.Less(t, time.Since(start), 5*time.Second)
}

func TestHandlerClientTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)

	h := &Handler{Client: &http.Client{Timeout: 100 * time.Millisecond}}
	err := h.ProcessTask(context.Background(), task(t, Request{URL: srv.URL}))
	require.Error(t, err)
	assert.Equal(t, retry, outcomeOf(err))
	assert.Contains(t, err.Error(), "Client.Timeout exceeded")
}

// Bodies are drained, so one keep-alive connection serves request after request.
func TestHandlerDrainsBodies(t *testing.T) {
	var conns atomic.Int32
	status := []int{200, 404, 500, 429, 201, 400}
	var i atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status[int(i.Add(1)-1)%len(status)])
		_, _ = io.WriteString(w, strings.Repeat("x", 20<<10))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	h := &Handler{Client: &http.Client{}}
	for range 2 * len(status) {
		_ = h.ProcessTask(context.Background(), task(t, Request{URL: srv.URL}))
	}
	assert.Equal(t, int32(2*len(status)), i.Load())
	assert.Equal(t, int32(1), conns.Load())
}

// An endless body is read only so far, then closed.
func TestHandlerBoundsDrain(t *testing.T) {
	var written atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := []byte(strings.Repeat("y", 32<<10))
		for written.Load() < 1<<30 {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()

	start := time.Now()
	err := newHandler().ProcessTask(context.Background(), task(t, Request{URL: srv.URL}))
	require.NoError(t, err)
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Less(t, written.Load(), int64(64<<20), "the handler read far more than it should")
}

func TestExcerpt(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{" \n\t ", ""},
		{"plain", `: "plain"`},
		{"a\x00b\x1bc\r\nd", `: "a b c d"`},
		{"bad \xff\xfe utf8", `: "bad utf8"`},
		{"héllo", `: "héllo"`},
		{strings.Repeat("a", maxExcerpt-1) + "é", `: "` + strings.Repeat("a", maxExcerpt-1) + `..."`}, // the cut splits é
		{strings.Repeat("b", maxExcerpt), `: "` + strings.Repeat("b", maxExcerpt) + `"`},
	}
	for i, tt := range tests {
		assert.Equal(t, tt.want, excerptOf([]byte(tt.in)), "%d: %q", i, tt.in)
	}
}

// Many jobs at once through one Handler.
func TestHandlerConcurrent(t *testing.T) {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
	}))
	defer srv.Close()

	h := newHandler()
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := range 50 {
		tk := task(t, Request{URL: fmt.Sprintf("%s/%d", srv.URL, i)})
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- h.ProcessTask(context.Background(), tk)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	assert.Equal(t, int32(50), hits.Load())
}

// With Hosts set, a job for another host is archived without a request, and
// so is a redirect to one; a job for an allowed host goes through.
func TestHandlerAllowedHosts(t *testing.T) {
	var calls atomic.Int64
	inner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	defer inner.Close()
	// The same server under another name: "localhost" is allowed, 127.0.0.1 is not.
	named := strings.Replace(inner.URL, "127.0.0.1", "localhost", 1)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inner.URL+"/internal", http.StatusFound)
	}))
	defer redirect.Close()
	redirectNamed := strings.Replace(redirect.URL, "127.0.0.1", "LocalHost", 1)

	h := &Handler{Hosts: []string{"localhost"}}
	ctx := context.Background()

	require.NoError(t, h.ProcessTask(ctx, task(t, Request{URL: named + "/ok"})))
	assert.Equal(t, int64(1), calls.Load(), "an allowed host is called")

	err := h.ProcessTask(ctx, task(t, Request{URL: inner.URL + "/admin"}))
	require.Error(t, err)
	assert.ErrorIs(t, err, asynq.SkipRetry, "archived, not retried")
	assert.ErrorIs(t, err, errHostNotAllowed)
	assert.Equal(t, int64(1), calls.Load(), "no request to a host not allowed")

	err = h.ProcessTask(ctx, task(t, Request{URL: redirectNamed + "/go"}))
	require.Error(t, err)
	assert.ErrorIs(t, err, asynq.SkipRetry, "a redirect out of the allowed hosts is archived")
	assert.ErrorIs(t, err, errHostNotAllowed)
	assert.Equal(t, int64(1), calls.Load(), "the redirect was not followed")

	require.NoError(t, (&Handler{}).ProcessTask(ctx, task(t, Request{URL: inner.URL})), "no Hosts: any host")
}
