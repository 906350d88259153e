package main

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/cli"
	"github.com/sluicehq/sluice/internal/control"
)

//go:embed web
var webFiles embed.FS

// maxActionBody bounds an action's request body, in bytes.
const maxActionBody = 4 << 10

// dashboard serves the live page and its API: GET /api/state and GET
// /api/events (its stream; read-only, for anyone who can reach the
// address), POST /api/preview (what an action will do, changing nothing)
// and POST /api/action (set, unset, reset, cooldown), which needs the
// token.
//
// Every route answers only the host names it is known by (see
// allowedHosts), and wrong tokens slow their sender down (see lockout).
type dashboard struct {
	f       *fleet
	token   string   // "" means read-only
	hosts   []string // the Host names it answers
	guard   *lockout
	addr    string // --addr
	tlsCert string // --tls-cert and --tls-key: "" serves plain HTTP
	tlsKey  string
	log     *slog.Logger
	// asynqmon is --asynqmon, the address of an asynqmon whose page of
	// each archived job the state links to ("": none).
	asynqmon string
	// streams holds a place per live /api/events stream (maxStreams), and
	// every is how often each sends the state.
	streams chan struct{}
	every   time.Duration
	// last is the latest state read for the streams, which share it: a
	// reading younger than every/2 is sent again rather than read anew, so
	// that 32 streams cost about one reading a second, not 32.
	mu   sync.Mutex
	last *state
}

// maxStreams bounds the /api/events streams served at once.
const maxStreams = 32

// minToken is the shortest --token the dashboard accepts, in bytes.
const minToken = 16

// newDashboardFor is the dashboard of f under opts, logging its actions to out.
func newDashboardFor(f *fleet, opts options, out io.Writer) *dashboard {
	return &dashboard{f: f, token: opts.token, hosts: allowedHosts(opts.addr, opts.allowHosts),
		guard: newLockout(time.Now), addr: opts.addr, tlsCert: opts.tlsCert, tlsKey: opts.tlsKey,
		log: slog.New(slog.NewTextHandler(out, nil)), asynqmon: opts.asynqmon,
		streams: make(chan struct{}, maxStreams), every: time.Second}
}

// checkDashboard refuses the dashboard's flags before anything starts: a
// token shorter than minToken, half of a TLS pair.
func checkDashboard(opts options, _ []string) error {
	if opts.token != "" && len(opts.token) < minToken {
		return cli.Usagef("--token is %d bytes: want at least %d (anyone who can reach the page may guess a short one); "+
			"e.g. SLUICE_TOKEN=$(openssl rand -hex 16)", len(opts.token), minToken)
	}
	if (opts.tlsCert == "") != (opts.tlsKey == "") {
		return cli.Usagef("--tls-cert and --tls-key go together: give both, or neither")
	}
	return checkAsynqmon(opts)
}

// checkAsynqmon refuses an --asynqmon that is not an http(s) address.
func checkAsynqmon(opts options) error {
	if opts.asynqmon == "" {
		return nil
	}
	u, err := url.Parse(opts.asynqmon)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return cli.Usagef("--asynqmon %s: want asynqmon's address, such as http://127.0.0.1:8081", cli.Clip(opts.asynqmon))
	}
	return nil
}

// queueView is one asynq queue's depths.
type queueView struct {
	Name      string `json:"name"`
	Pending   int    `json:"pending"`
	Scheduled int    `json:"scheduled"`
	Retry     int    `json:"retry"`
	Active    int    `json:"active"`
	Archived  int    `json:"archived"`
	// ByPriority is pending, scheduled and retry by job priority ("1" to
	// "5"), over the queue's family; the priorities with none are left out.
	ByPriority map[string]int `json:"by_priority,omitempty"`
}

// state is what the page shows, read once a second.
type state struct {
	Time     time.Time           `json:"time"`
	Writable bool                `json:"writable"`
	Limits   []limitView         `json:"limits"`
	Workers  []control.Heartbeat `json:"workers"`
	Queues   []queueView         `json:"queues"`
	Archived []archivedView      `json:"archived"` // the latest archived jobs of the workers' queues, newest first
	Errors   []string            `json:"errors,omitempty"`
}

func (d *dashboard) handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(webFiles, "web")
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /api/state", d.state)
	mux.HandleFunc("GET /api/events", d.events)
	mux.HandleFunc("POST /api/action", d.action)
	mux.HandleFunc("POST /api/preview", d.preview)
	return securityHeaders(checkHost(d.hosts, mux))
}

// securityHeaders forbids framing and inline content from elsewhere, on
// every response.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Referrer-Policy", "no-referrer")
		h.ServeHTTP(w, r)
	})
}

func (d *dashboard) state(w http.ResponseWriter, r *http.Request) {
	st := d.read(r.Context())
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(st)
}

// read reads the state the page shows, now.
func (d *dashboard) read(ctx context.Context) state {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	st := state{Time: time.Now().UTC(), Writable: d.token != "", Limits: []limitView{}, Workers: []control.Heartbeat{},
		Queues: []queueView{}, Archived: []archivedView{}}
	limits, hbs, err := d.f.limits(ctx)
	if err != nil {
		st.Errors = append(st.Errors, "limiter Redis: "+err.Error())
	} else {
		st.Limits, st.Workers = limits, hbs
	}
	var names []string
	for _, h := range hbs {
		for _, q := range h.Queues {
			if !slices.Contains(names, q) {
				names = append(names, q)
			}
		}
	}
	sort.Strings(names)
	qs, errs := d.f.queues(names)
	st.Queues = append(st.Queues, qs...)
	archived, aerrs := d.f.archivedOf(qs, "", d.asynqmon)
	st.Archived = archived
	for _, err := range append(errs, aerrs...) {
		st.Errors = append(st.Errors, err.Error())
	}
	return st
}

// shared is the state for the streams: the last reading if it is younger
// than every/2, else a new one.
func (d *dashboard) shared(ctx context.Context) state {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last != nil && time.Since(d.last.Time) < d.every/2 {
		return *d.last
	}
	st := d.read(ctx)
	d.last = &st
	return st
}

// events streams the state as server-sent events: an event "state", the
// JSON of /api/state, at once and then every d.every, until the client
// goes (or the dashboard stops). At most maxStreams stream at once; one
// more is answered 503 with Retry-After.
func (d *dashboard) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming unsupported", http.StatusInternalServerError)
		return
	}
	select {
	case d.streams <- struct{}{}:
		defer func() { <-d.streams }()
	default:
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("too many live streams (at most %d): poll /api/state", cap(d.streams)), http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no") // a proxy that buffers would hold the events back
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", (2 * d.every).Milliseconds())
	tick := time.NewTicker(d.every)
	defer tick.Stop()
	for {
		b, err := json.Marshal(d.shared(r.Context()))
		if err != nil {
			return
		}
		if _, err := fmt.Fprintf(w, "event: state\ndata: %s\n\n", b); err != nil {
			return
		}
		fl.Flush()
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// actionRequest is a POST /api/action body.
type actionRequest struct {
	Op       string `json:"op"`   // set, unset, reset, cooldown
	Spec     string `json:"spec"` // set
	Type     string `json:"type"` // unset; the policy's type for reset and cooldown (default: key)
	Key      string `json:"key"`  // reset, cooldown
	Duration string `json:"duration"`
}

// action runs one change. It needs the token as "Authorization: Bearer
// TOKEN" and a JSON body: a cross-site form or image cannot send either, and
// a cross-site script is stopped by the browser before it may (no CORS here),
// so only the page itself, or a client that holds the token, acts.
func (d *dashboard) action(w http.ResponseWriter, r *http.Request) {
	fail := func(code int, msg string) { apiError(w, code, msg) }
	if d.token == "" {
		fail(http.StatusForbidden, "read-only: start the dashboard with --token (or SLUICE_TOKEN) to allow changes")
		return
	}
	if !sameSiteJSON(w, r) {
		return
	}
	if wait := d.guard.wait(remote(r)); wait > 0 {
		secs := int64((wait + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
		fail(http.StatusTooManyRequests, fmt.Sprintf("a wrong token came from this address: try again in %ds", secs))
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte("Bearer "+d.token)) != 1 {
		d.guard.failed(remote(r))
		d.log.Warn("dashboard: wrong or missing token", "from", remote(r))
		fail(http.StatusUnauthorized, "wrong or missing token")
		return
	}
	d.guard.succeeded(remote(r))
	req, ok := readAction(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	opts := options{typ: req.Type}
	var out strings.Builder
	var err error
	switch req.Op {
	case "set":
		err = cmdSetBy(ctx, d.f, []string{req.Spec}, "dashboard "+remote(r), &out)
	case "unset":
		err = cmdUnset(ctx, d.f, opts, []string{req.Type}, &out)
	case "reset":
		err = cmdReset(ctx, d.f, opts, []string{req.Key}, &out)
	case "cooldown":
		err = cmdCooldown(ctx, d.f, opts, []string{req.Key, req.Duration}, &out)
	default:
		err = cli.Usagef("unknown op %q: want set, unset, reset or cooldown", req.Op)
	}
	if err != nil {
		fail(errorStatus(err), err.Error())
		return
	}
	d.log.Info("dashboard action", "op", req.Op, "spec", req.Spec, "type", req.Type, "key", req.Key,
		"duration", req.Duration, "from", remote(r))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"ok": strings.TrimSpace(out.String())})
}

// preview says what an action will do, doing nothing: the same body as
// POST /api/action, no token (it changes nothing), the same checks of
// Host, site and Content-Type. It answers {"confirm": "..."}, or
// {"error": "..."} with 400 for a request the action would refuse as bad.
func (d *dashboard) preview(w http.ResponseWriter, r *http.Request) {
	if !sameSiteJSON(w, r) {
		return
	}
	req, ok := readAction(w, r)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	text, err := d.f.preview(ctx, req)
	if err != nil {
		apiError(w, errorStatus(err), err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(map[string]string{"confirm": text})
}

// apiError answers an API call with {"error": msg} and code.
func apiError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": cli.ClipMessage(msg)})
}

// sameSiteJSON checks what an action and a preview both need of r: it
// comes from this site, with a JSON body. Otherwise it answers r and
// returns false.
func sameSiteJSON(w http.ResponseWriter, r *http.Request) bool {
	switch {
	case crossSite(r):
		apiError(w, http.StatusForbidden, "cross-site request refused")
		return false
	case !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json"):
		apiError(w, http.StatusUnsupportedMediaType, "want Content-Type: application/json")
		return false
	}
	return true
}

// readAction decodes the body of an action or a preview (at most
// maxActionBody bytes, no unknown field); on a bad one it answers r with
// 400 and returns false.
func readAction(w http.ResponseWriter, r *http.Request) (actionRequest, bool) {
	var req actionRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		apiError(w, http.StatusBadRequest, "bad request body: "+err.Error())
		return req, false
	}
	return req, true
}

// errorStatus is the status of an action's or a preview's error: 400 for
// bad input (cli.ErrUsage), else 503 (the fleet's Redis did not answer).
func errorStatus(err error) int {
	if errors.Is(err, cli.ErrUsage) {
		return http.StatusBadRequest
	}
	return http.StatusServiceUnavailable
}

// crossSite reports whether r comes from another site: its Origin is not
// the host it was sent to, or the browser says so (Sec-Fetch-Site).
func crossSite(r *http.Request) bool {
	return r.Header.Get("Sec-Fetch-Site") == "cross-site" || (r.Header.Get("Origin") != "" && !sameOrigin(r))
}

// sameOrigin reports whether the request's Origin is the host it was sent to.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	return o == "http://"+r.Host || o == "https://"+r.Host
}

func remote(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// serveDashboard serves d on its address until ctx ends: HTTPS with its
// certificate and key, else HTTP, with a warning on stdout when the address
// is not loopback (the token and the fleet's state would cross the network
// in clear).
func serveDashboard(ctx context.Context, d *dashboard, out io.Writer) error {
	var certs []tls.Certificate
	if d.tlsCert != "" {
		c, err := tls.LoadX509KeyPair(d.tlsCert, d.tlsKey)
		if err != nil {
			return cli.Usagef("--tls-cert %s, --tls-key %s: %w", cli.Clip(d.tlsCert), cli.Clip(d.tlsKey), err)
		}
		certs = []tls.Certificate{c}
	}
	ln, err := net.Listen("tcp", d.addr)
	if err != nil {
		return fmt.Errorf("cannot serve the dashboard on --addr %s: %w", cli.Clip(d.addr), err)
	}
	// Requests end with ctx: a live /api/events stream too, so that
	// Shutdown does not wait for its client to go.
	srv := &http.Server{Handler: d.handler(), ReadHeaderTimeout: 5 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	scheme := "http"
	if certs != nil {
		scheme = "https"
		ln = tls.NewListener(ln, &tls.Config{Certificates: certs, MinVersion: tls.VersionTLS12})
	} else if !loopback(d.addr) {
		fmt.Fprintf(out, "warning: serving on %s without TLS: the token and the fleet's state cross the network in clear; "+
			"give --tls-cert and --tls-key, or put the dashboard behind a TLS proxy\n", d.addr)
	}
	mode := "read-only (no --token)"
	if d.token != "" {
		mode = "actions allowed with the token"
	}
	fmt.Fprintf(out, "dashboard on %s://%s/ (%s); Ctrl-C stops it\n", scheme, ln.Addr(), mode)
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// loopback reports whether addr's host is a loopback name or address.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
