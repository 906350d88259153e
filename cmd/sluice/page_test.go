package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/browsertest"
)

// The page's tests run it in a real headless Chromium over a fixture
// (testdata/state.json: a fleet with a keyed fair type bound by its global
// bucket, which the upstream announced down to 40/s after a 429 episode; a
// calendar quota spent with jobs parked; an in-flight=auto type; three
// workers; two archived jobs), served as the dashboard serves its state.

const (
	previewText = "every worker applies http:request=20/s,burst=2 within a second; 1,204 queued jobs take turns under it"
	actionText  = "set http:request=20/s,burst=2 (runtime): the 3 workers that limit http:request apply it within a second"
	pageToken   = "page-token-page-token"
)

// loadFixture reads testdata/state.json into the dashboard's own state type,
// refusing a field the server does not send.
func loadFixture(t *testing.T) state {
	t.Helper()
	b, err := os.ReadFile("testdata/state.json")
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var st state
	require.NoError(t, dec.Decode(&st), "the fixture has the server's fields only")
	return st
}

// request is one POST the page sent.
type request struct {
	Path, Auth string
	Body       map[string]string
}

// pageServer serves the embedded page with the dashboard's headers, its
// state from a fixture (GET /api/state, and GET /api/events as the server
// sends it), and records the previews and actions it is sent.
type pageServer struct {
	mu    sync.Mutex
	state []byte
	subs  map[chan []byte]bool
	posts []request
}

func newPageServer(t *testing.T, st state) (*httptest.Server, *pageServer) {
	ps := &pageServer{subs: make(map[chan []byte]bool)}
	ps.push(t, st)
	mux := http.NewServeMux()
	static, err := fs.Sub(webFiles, "web")
	require.NoError(t, err)
	mux.Handle("GET /", http.FileServerFS(static))
	mux.HandleFunc("GET /api/state", func(w http.ResponseWriter, r *http.Request) {
		ps.mu.Lock()
		defer ps.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(ps.state)
	})
	mux.HandleFunc("GET /api/events", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		ch := make(chan []byte, 16)
		ps.mu.Lock()
		ps.subs[ch] = true
		ch <- ps.state
		ps.mu.Unlock()
		defer func() {
			ps.mu.Lock()
			delete(ps.subs, ch)
			ps.mu.Unlock()
		}()
		tick := time.NewTicker(time.Second) // as the dashboard: the state once a second, changed or not
		defer tick.Stop()
		for {
			var b []byte
			select {
			case <-r.Context().Done():
				return
			case b = <-ch:
			case <-tick.C:
				ps.mu.Lock()
				b = ps.state
				ps.mu.Unlock()
			}
			fmt.Fprintf(w, "event: state\ndata: %s\n\n", b)
			w.(http.Flusher).Flush()
		}
	})
	post := func(answer map[string]string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var body map[string]string
			b, _ := io.ReadAll(r.Body)
			_ = json.Unmarshal(b, &body)
			ps.mu.Lock()
			ps.posts = append(ps.posts, request{Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Body: body})
			ps.mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(answer)
		}
	}
	mux.HandleFunc("POST /api/preview", post(map[string]string{"confirm": previewText}))
	mux.HandleFunc("POST /api/action", post(map[string]string{"ok": actionText}))
	hs := httptest.NewServer(securityHeaders(mux))
	t.Cleanup(hs.Close)
	return hs, ps
}

// push makes st the state, and sends it to every open stream.
func (ps *pageServer) push(t *testing.T, st state) {
	t.Helper()
	b, err := json.Marshal(st)
	require.NoError(t, err)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.state = b
	for ch := range ps.subs {
		ch <- b
	}
}

func (ps *pageServer) sent(path string) []request {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	var out []request
	for _, r := range ps.posts {
		if r.Path == path {
			out = append(out, r)
		}
	}
	return out
}

// browser opens url in a headless Chromium at width × 900 px (a phone's
// screen below 600), in UTC, and returns the page's context.
func browser(t *testing.T, url string, width int64) context.Context {
	t.Helper()
	chrome := browsertest.Path(t)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(int(width), 900), chromedp.Flag("disable-dev-shm-usage", true), chromedp.Env("TZ=UTC"))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	var emulate []chromedp.EmulateViewportOption
	if width < 600 {
		emulate = append(emulate, chromedp.EmulateMobile)
	}
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(width, 900, emulate...), chromedp.Navigate(url)))
	return ctx
}

// page drives one page in tests: its values by selector, waits, keys.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p page) within(d time.Duration) context.Context {
	c, cancel := context.WithTimeout(p.ctx, d)
	p.t.Cleanup(cancel)
	return c
}

// eval is the value of a JavaScript expression.
func eval[T any](p page, js string) T {
	p.t.Helper()
	v, err := chromedp.Run(p.within(10*time.Second), chromedp.Evaluate[T](js))
	require.NoError(p.t, err, js)
	return v
}

func q(sel string) string { b, _ := json.Marshal(sel); return string(b) }

// text is the trimmed text of sel's first match, or "<none>".
func (p page) text(sel string) string {
	p.t.Helper()
	return eval[string](p, `(() => { const e = document.querySelector(`+q(sel)+`); return e ? e.textContent.trim() : "<none>"; })()`)
}

func (p page) count(sel string) int {
	p.t.Helper()
	return eval[int](p, `document.querySelectorAll(`+q(sel)+`).length`)
}

func (p page) attr(sel, name string) string {
	p.t.Helper()
	return eval[string](p, `(() => { const e = document.querySelector(`+q(sel)+`); return e ? String(e.getAttribute(`+q(name)+`)) : "<none>"; })()`)
}

// until waits for a JavaScript condition to hold.
func (p page) until(js, msg string) {
	p.t.Helper()
	require.Eventually(p.t, func() bool {
		v, err := chromedp.Run(p.within(5*time.Second), chromedp.Evaluate[bool](js))
		return err == nil && v
	}, 10*time.Second, 50*time.Millisecond, msg)
}

func (p page) keys(k string) {
	p.t.Helper()
	require.NoError(p.t, chromedp.Do(p.within(5*time.Second), chromedp.KeyEvent(k)))
}

// shot saves the whole page as a PNG at name, and the screenfuls it is
// made of beside it (name-1.png, ...), to look at.
func (p page) shot(name string) {
	p.t.Helper()
	png, err := chromedp.Run(p.within(10*time.Second), chromedp.FullScreenshot(100))
	require.NoError(p.t, err)
	require.NoError(p.t, os.WriteFile(name+".png", png, 0o644))
	height := eval[int](p, `document.documentElement.scrollHeight`)
	for i, y := 1, 0; y < height; i, y = i+1, y+900 {
		eval[bool](p, fmt.Sprintf(`(window.scrollTo(0, %d), true)`, y))
		png, err := chromedp.Run(p.within(10*time.Second), chromedp.CaptureScreenshot())
		require.NoError(p.t, err)
		require.NoError(p.t, os.WriteFile(fmt.Sprintf("%s-%d.png", name, i), png, 0o644))
	}
	eval[bool](p, `(window.scrollTo(0, 0), true)`)
	p.t.Logf("screenshot: %s.png", name)
}

const httpSec = `section.limit[data-type="http:request"] `

// TestDashboardPage: each part of the page, with the fixture's values, at a
// phone's width and a desktop's.
func TestDashboardPage(t *testing.T) {
	fixture := loadFixture(t)
	var httpRow, mailRow, dbRow limitView
	for _, l := range fixture.Limits {
		switch {
		case l.Type == "http:request":
			httpRow = l
		case l.Type == "mail:send" && l.Limit == "second":
			mailRow = l
		case l.Type == "db:query":
			dbRow = l
		}
	}
	require.Len(t, httpRow.History.Points, 120)
	cooldowns := 0
	for _, pt := range httpRow.History.Points {
		if pt.Cooldowns > 0 {
			cooldowns++
		}
	}
	require.Positive(t, cooldowns, "the fixture has a 429 episode")

	for _, width := range []int64{390, 1280} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			hs, _ := newPageServer(t, fixture)
			p := page{t, browser(t, hs.URL+"/", width)}
			p.until(`!!document.querySelector(`+q(httpSec+`tr[data-bucket="global"]`)+`)`, "the type's section is drawn")

			// 1. What binds and why, every bucket with its cause.
			assert.Equal(t, httpRow.Why, p.text(httpSec+"p.binding"))
			assert.Equal(t, "announced by the upstream 40/s at 14:02", p.text(httpSec+`tr[data-bucket="global"] td.cause`))
			assert.Equal(t, "binds", p.attr(httpSec+`tr[data-bucket="global"]`, "class"))
			assert.Equal(t, "binds now", p.text(httpSec+`tr[data-bucket="global"] td.bind`), "said in words, not colour only")
			assert.Equal(t, "60/s", p.text(httpSec+`tr[data-bucket="global"] td:nth-of-type(1)`), "configured")
			assert.Equal(t, "40/s", p.text(httpSec+`tr[data-bucket="global"] td:nth-of-type(2)`), "effective")
			assert.Equal(t, "", p.text(httpSec+`tr[data-bucket="per key tenant:{header.sluice-key}"] td.bind`))
			assert.Equal(t, "--limit flag", p.text(httpSec+`tr[data-bucket="per key tenant:{header.sluice-key}"] td.cause`))
			assert.Equal(t, "39.8 of 40/s (global)", p.text(httpSec+`.grants dd`), "against the binding bucket's capacity")
			assert.Equal(t, "57", p.text(httpSec+`.waiting dd`))
			assert.Equal(t, "1,204 in default", p.text(httpSec+`.queued dd`))
			mail := `section.limit[data-type="mail:send"] `
			assert.Equal(t, mailRow.Why, p.text(mail+"p.binding"))
			assert.Equal(t, "spent: 2,000 of 2,000 today; resets 00:00 UTC", p.text(mail+`tr[data-bucket="quota"].binds td.cause`))
			assert.Equal(t, "2,000/day", p.text(mail+`tr[data-bucket="quota"] td:nth-of-type(1)`))
			assert.Equal(t, "runtime limit set by alice@ops-1", p.text(mail+`tr[data-bucket="limit second"] td.cause`))
			assert.Equal(t, "310 until 2026-03-11 00:00 UTC", p.text(mail+`.parked dd`))
			assert.Equal(t, "2,000 of 2,000 today; resets 00:00 UTC, in 9h30m", p.text(mail+`.quota dd`))
			db := `section.limit[data-type="db:query"] `
			assert.Equal(t, "12 of 12 (auto 2-50, baseline 8.2 ms, recent 11.5 ms, gradient)", p.text(db+`.inflight dd`))
			assert.Equal(t, "12 slots", p.text(db+`tr[data-bucket="in flight"].binds td:nth-of-type(2)`))
			assert.Equal(t, dbRow.Why, p.text(db+"p.binding"))
			assert.Equal(t, 4, p.count(`#limits tbody tr`), "the overview: one row per limit")
			assert.Equal(t, "global", p.text(`#limits tr[data-type="http:request"] td:nth-of-type(3)`), "what binds, in the overview")

			// 2. The charts: every point drawn, axes labelled, a limit line, a legend.
			for _, name := range []string{"grants", "refusals", "backlog", "jobs"} {
				c := httpSec + `svg.chart[data-chart="` + name + `"]`
				assert.Equal(t, fmt.Sprint(len(httpRow.History.Points)), p.attr(c, "data-points"), name)
				assert.Contains(t, p.attr(c, "aria-label"), "120 points", name)
				assert.Contains(t, p.text(c+" title"), "http:request: ", name)
				assert.GreaterOrEqual(t, p.count(c+" text.tlabel"), 4, "%s: time labels", name)
				assert.GreaterOrEqual(t, p.count(c+" text.vlabel"), 3, "%s: value labels", name)
				assert.Equal(t, 1, eval[int](p, `document.querySelector(`+q(c+" path.line")+`).getAttribute("d").split("M").length - 1`),
					"%s: one unbroken line (no step missing)", name)
				assert.GreaterOrEqual(t, p.count(`figure[data-chart="`+name+`"] ul.legend li`), 2, name)
				assert.Equal(t, "180", fmt.Sprint(eval[int](p, `Math.round(document.querySelector(`+q(c)+`).getBoundingClientRect().height)`)), name)
				dc := db + `svg.chart[data-chart="` + name + `"]`
				assert.Equal(t, "0", p.attr(dc, "data-points"), name)
				assert.Equal(t, "no history yet", p.text(dc+" text.empty"), name)
				assert.GreaterOrEqual(t, p.count(dc+" text.tlabel"), 3, "%s: an empty chart keeps its axes", name)
			}
			labels := eval[[]string](p, `[...document.querySelectorAll(`+q(httpSec+`svg.chart[data-chart="grants"] text.tlabel`)+`)].map(e => e.textContent)`)
			assert.Contains(t, labels, "14:00", "HH:MM in the page's zone (UTC here)")
			assert.Equal(t, 1, p.count(httpSec+`svg.chart[data-chart="grants"] path.s-limit`), "the limit line")
			assert.Equal(t, 1, p.count(httpSec+`svg.chart[data-chart="grants"] path.s-effective`), "the effective rate")
			assert.Equal(t, cooldowns, p.count(httpSec+`svg.chart[data-chart="refusals"] line.event`), "a mark per step with cooldowns")
			assert.Equal(t, fmt.Sprint(cooldowns), p.text(httpSec+`svg.chart[data-chart="refusals"] text.elabel`), "one label for the episode, its count")
			assert.Equal(t, 2, p.count(httpSec+`svg.chart[data-chart="jobs"] line.event`), "the archived jobs' steps")

			// 3. Tenants and their waits.
			assert.Equal(t, "42 s", p.text(httpSec+`tr.tenant[data-key="tenant:acme"] td.wait`))
			assert.Equal(t, "3 s", p.text(httpSec+`tr.tenant[data-key="tenant:globex"] td.wait`))
			assert.Equal(t, "50%", p.text(httpSec+`tr.tenant[data-key="tenant:acme"] td:nth-of-type(1)`), "share")

			// 4. Workers and archived jobs.
			assert.Equal(t, 3, p.count(`#workers tbody tr`))
			assert.Equal(t, "v0.8.2", p.text(`#workers tr[data-worker="worker-c:977:1773150000"] td.version`))
			assert.Equal(t, "4 s ago", p.text(`#workers tr[data-worker="worker-c:977:1773150000"] td:last-child`), "heartbeat age, on the server's clock")
			a := fixture.Archived[0]
			assert.Equal(t, a.Reason, p.text(`#archived tr[data-id="`+a.ID+`"] td.reason`))
			assert.Equal(t, a.Link, p.attr(`#archived tr[data-id="`+a.ID+`"] a`, "href"))
			assert.Equal(t, "14:22:41 (7 min 19 s ago)", p.text(`#archived tr[data-id="`+a.ID+`"] td.when`))
			assert.Equal(t, 0, p.count(`#archived tr[data-id="`+fixture.Archived[1].ID+`"] a`), "no link without one")

			// 6. Nothing wider than the screen; tables scroll inside their box.
			assert.LessOrEqual(t, eval[int](p, `document.documentElement.scrollWidth`), int(width))
			p.shot(fmt.Sprintf("/tmp/sluice-page-%d", width))
		})
	}
}

// TestDashboardPageLive: a state event that changes nothing changes nothing
// on the page; one that changes two numbers changes their cells only, and no
// section's height; a step missing from the history breaks the line.
func TestDashboardPageLive(t *testing.T) {
	fixture := loadFixture(t)
	for _, width := range []int64{390, 1280} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			hs, ps := newPageServer(t, fixture)
			p := page{t, browser(t, hs.URL+"/", width)}
			p.until(`!!document.querySelector(`+q(httpSec+`tr.tenant`)+`) && document.getElementById("status").textContent.startsWith("live")`,
				"drawn from the stream")
			heights := `JSON.stringify([...document.querySelectorAll("main > section, #types > section, figure")].map(e => e.getBoundingClientRect().height))`
			before := eval[string](p, heights)
			eval[bool](p, `(() => {
				window.mutated = [];
				new MutationObserver(ms => ms.forEach(m => {
					const e = m.target.nodeType === 3 ? m.target.parentElement : m.target;
					window.mutated.push(e);
				})).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
				return true; })()`)

			ps.push(t, fixture) // the same state again
			changed := loadFixture(t)
			for i := range changed.Limits {
				if changed.Limits[i].Type == "http:request" {
					changed.Limits[i].Waiting = 1057
					changed.Limits[i].Tenants[0].LongestWaitS = 118
				}
			}
			ps.push(t, changed)
			p.until(`document.querySelector(`+q(httpSec+`tr.tenant[data-key="tenant:acme"] td.wait`)+`).textContent === "118 s"`, "the new wait is shown")
			assert.Equal(t, "1,057", p.text(httpSec+`.waiting dd`))
			assert.Equal(t, "1057", p.text(`#limits tr[data-type="http:request"] td:nth-of-type(6)`))
			outside := eval[[]string](p, `window.mutated.filter(e => !e.matches(`+
				q(httpSec+`tr.tenant[data-key="tenant:acme"] td.wait, `+httpSec+`.waiting dd, #limits tr[data-type="http:request"] td:nth-of-type(6)`)+
				`)).map(e => e.outerHTML.slice(0, 120))`)
			assert.Empty(t, outside, "only the changed numbers' cells change")
			assert.Equal(t, 3, eval[int](p, `window.mutated.length`), "one change per cell")
			assert.Equal(t, before, eval[string](p, heights), "no section changes height")

			// A step missing: a gap in each line, not a line across it.
			gap := loadFixture(t)
			for i := range gap.Limits {
				if gap.Limits[i].Type == "http:request" {
					pts := gap.Limits[i].History.Points
					gap.Limits[i].History.Points = append(pts[:60:60], pts[61:]...)
				}
			}
			ps.push(t, gap)
			c := httpSec + `svg.chart[data-chart="grants"]`
			p.until(`document.querySelector(`+q(c)+`).dataset.points === "119"`, "the shorter history is drawn")
			assert.Equal(t, 2, eval[int](p, `document.querySelector(`+q(c+" path.s-grants")+`).getAttribute("d").split("M").length - 1`),
				"the line stops before the missing step and starts after it")
			assert.Equal(t, before, eval[string](p, heights), "no section changes height")
		})
	}
}

// TestDashboardPageActions: an action shows what it will do and is sent
// only when confirmed; the keyboard reaches every form and Escape cancels.
func TestDashboardPageActions(t *testing.T) {
	for _, width := range []int64{390, 1280} {
		t.Run(fmt.Sprint(width), func(t *testing.T) {
			hs, ps := newPageServer(t, loadFixture(t))
			p := page{t, browser(t, hs.URL+"/", width)}
			p.until(`!!document.querySelector("#workers tbody tr")`, "drawn")
			set := `form[data-op=set] `
			require.NoError(t, chromedp.Do(p.within(10*time.Second),
				chromedp.SendKeys(`#auth input[name=token]`, pageToken),
				chromedp.SendKeys(set+`input[name=spec]`, "http:request=20/s,burst=2"),
				chromedp.Click(set+`button`)))
			p.until(`document.getElementById("confirm").open`, "the confirmation opens")
			assert.Equal(t, previewText, p.text(`dialog#confirm p.consequence`))
			previews := ps.sent("/api/preview")
			require.Len(t, previews, 1)
			assert.Equal(t, map[string]string{"op": "set", "spec": "http:request=20/s,burst=2"}, previews[0].Body)
			assert.Equal(t, "Bearer "+pageToken, previews[0].Auth)
			assert.Empty(t, ps.sent("/api/action"), "nothing done before confirming")

			require.NoError(t, chromedp.Do(p.within(5*time.Second), chromedp.Click(`dialog#confirm button[value=cancel]`)))
			p.until(`!document.getElementById("confirm").open`, "cancel closes it")
			assert.Equal(t, "cancelled: nothing was sent", p.text(`#result`))
			assert.Empty(t, ps.sent("/api/action"), "cancel sends nothing")

			require.NoError(t, chromedp.Do(p.within(5*time.Second), chromedp.Click(set+`button`)))
			p.until(`document.getElementById("confirm").open`, "the confirmation opens again")
			require.NoError(t, chromedp.Do(p.within(5*time.Second), chromedp.Click(`dialog#confirm button[value=confirm]`)))
			p.until(`document.getElementById("result").textContent === `+q(actionText), "the outcome is shown")
			actions := ps.sent("/api/action")
			require.Len(t, actions, 1, "confirm sends the action once")
			assert.Equal(t, map[string]string{"op": "set", "spec": "http:request=20/s,burst=2"}, actions[0].Body)
			assert.Equal(t, "Bearer "+pageToken, actions[0].Auth)

			// The keyboard: Tab from the token reaches each form's button, with
			// a visible focus; Enter submits; Escape cancels and focus returns.
			eval[bool](p, `(document.querySelector("#auth input[name=token]").focus(), true)`)
			var reached []string
			for range 16 {
				p.keys(kb.Tab)
				if op := eval[string](p, `(() => { const a = document.activeElement; return a.tagName === "BUTTON" && a.form ? a.form.dataset.op : ""; })()`); op != "" {
					reached = append(reached, op)
					assert.NotEqual(t, "none", eval[string](p, `getComputedStyle(document.activeElement).outlineStyle`), "a visible focus on %s", op)
				}
			}
			assert.Equal(t, []string{"set", "unset", "reset", "cooldown"}, reached)
			eval[bool](p, `(document.querySelector("form[data-op=set] button").focus(), true)`)
			p.keys(kb.Enter)
			p.until(`document.getElementById("confirm").open`, "Enter submits the form: the confirmation opens")
			p.keys(kb.Escape)
			p.until(`!document.getElementById("confirm").open`, "Escape closes it")
			p.until(`document.getElementById("result").textContent === "cancelled: nothing was sent"`, "and cancels")
			assert.Len(t, ps.sent("/api/action"), 1, "Escape sends nothing")
			assert.Equal(t, "set", eval[string](p, `document.activeElement.form ? document.activeElement.form.dataset.op : document.activeElement.tagName`),
				"focus returns to the form")
		})
	}
}

// A key template without fair shares lists the keys whose jobs waited
// longest, with their waits and nothing else (no bucket knows a share).
func TestDashboardPageWaitedKeys(t *testing.T) {
	fixture := loadFixture(t)
	i := slices.IndexFunc(fixture.Limits, func(l limitView) bool { return l.Type == "http:request" && len(l.Tenants) > 0 })
	require.GreaterOrEqual(t, i, 0, "the fixture's keyed type")
	fixture.Limits[i].Tenants = []tenantView{{Key: "tenant:slow", LongestWaitS: 42}, {Key: "tenant:fast", LongestWaitS: 3}}
	fixture.Limits[i].TenantCount = 0
	hs, _ := newPageServer(t, fixture)
	p := page{t, browser(t, hs.URL+"/", 390)}
	sec := `section.limit[data-type="http:request"] `
	p.until(`!!document.querySelector(`+q(sec+`tr.tenant[data-key="tenant:slow"]`)+`)`, "the keys are drawn")
	assert.Equal(t, "Keys whose jobs waited longest (last 5 min)", p.text(sec+"h4:has(+ div table.tenants)"))
	assert.Equal(t, "42 s", p.text(sec+`tr.tenant[data-key="tenant:slow"] td.wait`))
	assert.Equal(t, "3 s", p.text(sec+`tr.tenant[data-key="tenant:fast"] td.wait`))
	assert.Equal(t, 1, p.count(sec+`tr.tenant[data-key="tenant:slow"] td`), "its wait only: no share, weight or turns")
}
