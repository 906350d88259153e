package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/browsertest"
	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/queue"
)

// The live fleet of issue #29's case: three workers, a fair limit whose
// global bucket adapts to an upstream that allows and announces 40/s, two
// tenants with backlogs, one job that fails for good.
const (
	liveToken   = "s3cret-s3cret-s3cret"
	liveKeyTmpl = "tenant:{header.sluice-key}"
	liveLimit   = "http:request=100/s,burst=10,key=" + liveKeyTmpl + ",global=60/s:6"
	// liveRuntime is the spec set through the page: a lower rate per key,
	// still above what the upstream lets the global bucket have.
	liveRuntime = "http:request=50/s,burst=5,key=" + liveKeyTmpl + ",global=60/s:6"
	liveBadID   = "live-bad-payload"
	// Tenants A's and B's backlogs: each has work for over a minute at its
	// share of 20/s (the screenshots for docs/ wait for a minute of history).
	liveA = 2000
	liveB = 1400
)

// liveState is the part of /api/state the test reads (cmd/sluice's state,
// limitView, bucketView, tenantView, historyView and archivedView).
type liveState struct {
	Limits []struct {
		Type    string `json:"type"`
		Source  string `json:"source"`
		SetBy   string `json:"set_by"`
		Buckets []struct {
			Name          string  `json:"name"`
			Kind          string  `json:"kind"`
			RatePerS      float64 `json:"rate_per_s"`
			EffectivePerS float64 `json:"effective_per_s"`
			Cause         string  `json:"cause"`
			Binds         bool    `json:"binds"`
		} `json:"buckets"`
		Binding string `json:"binding"`
		Why     string `json:"why"`
		History *struct {
			StepS  float64         `json:"step_s"`
			Points []history.Point `json:"points"`
		} `json:"history"`
		Tenants []struct {
			Key          string  `json:"key"`
			LongestWaitS float64 `json:"longest_wait_s"`
		} `json:"tenants"`
	} `json:"limits"`
	Archived []struct {
		ID     string `json:"id"`
		Type   string `json:"type"`
		Reason string `json:"reason"`
	} `json:"archived"`
}

// readState GETs the dashboard's /api/state.
func readState(t *testing.T, url string) (liveState, string) {
	t.Helper()
	var s liveState
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url + "api/state")
	require.NoError(t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, err = b.ReadFrom(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, b.String())
	require.NoError(t, json.Unmarshal(b.Bytes(), &s), b.String())
	return s, b.String()
}

// liveFacts is what the JSON says of the type http:request: the binding
// bucket and its cause, the causes of every bucket, the history's points
// and the refusals in it, each tenant's longest wait, the archived job's
// reason.
type liveFacts struct {
	Binding, Why, BindingCause string
	BindingEffective           float64
	Causes                     map[string]string // bucket name → cause
	Points                     int
	Refused                    float64 // summed over the history
	Waits                      map[string]float64
	Archived                   string // the bad job's reason, "" if not listed
}

func factsOf(s liveState) liveFacts {
	f := liveFacts{Causes: map[string]string{}, Waits: map[string]float64{}}
	for _, l := range s.Limits {
		if l.Type != "http:request" || len(l.Buckets) == 0 {
			continue
		}
		f.Binding, f.Why = l.Binding, l.Why
		for _, b := range l.Buckets {
			f.Causes[b.Name] = b.Cause
			if b.Binds {
				f.BindingCause, f.BindingEffective = b.Cause, b.EffectivePerS
			}
		}
		if l.History != nil {
			f.Points = len(l.History.Points)
			for _, p := range l.History.Points {
				f.Refused += p.Refused
			}
		}
		for _, tn := range l.Tenants {
			f.Waits[tn.Key] = tn.LongestWaitS
		}
	}
	for _, a := range s.Archived {
		if a.ID == liveBadID {
			f.Archived = a.Reason
		}
	}
	return f
}

// pageFacts is what the page shows of the type http:request, read from its
// DOM in one evaluation (the selectors of cmd/sluice/web).
type pageFacts struct {
	Section bool              `json:"section"` // section.limit[data-type="http:request"] is there and visible
	Binding string            `json:"binding"` // its .binding text
	Binds   []string          `json:"binds"`   // the data-bucket of its rows of class binds
	Causes  map[string]string `json:"causes"`  // data-bucket → td.cause text
	Charts  map[string]int    `json:"charts"`  // data-chart → data-points
	Waits   map[string]string `json:"waits"`   // tr.tenant data-key → td.wait text
	// RefusedTop is how far above the refusals chart's zero line its
	// refused/s line's highest point is drawn, in the chart's units (> 0:
	// a step with refusals); Cooldowns counts its cooldown marks.
	RefusedTop float64 `json:"refusedTop"`
	Cooldowns  int     `json:"cooldowns"`
	Reason     string  `json:"reason"` // #archived tr[data-id=liveBadID] td.reason text
	// Workers are the limits column (td.wlimits) of each #workers row.
	Workers []string `json:"workers"`
	Width   int      `json:"width"` // document.documentElement.scrollWidth
}

var pageFactsJS = `(() => {
  const sec = document.querySelector('section.limit[data-type="http:request"]');
  const f = {section: false, binding: "", binds: [], causes: {}, charts: {}, waits: {}, refusedTop: 0, cooldowns: 0, reason: "", workers: [],
    width: document.documentElement.scrollWidth};
  if (sec) {
    f.section = sec.offsetParent !== null;
    const b = sec.querySelector('.binding');
    f.binding = b ? b.textContent : "";
    for (const tr of sec.querySelectorAll('tr[data-bucket]')) {
      const c = tr.querySelector('td.cause');
      f.causes[tr.dataset.bucket] = c ? c.textContent : "";
      if (tr.classList.contains('binds')) f.binds.push(tr.dataset.bucket);
    }
    for (const svg of sec.querySelectorAll('svg.chart[data-chart]')) {
      f.charts[svg.dataset.chart] = parseInt(svg.dataset.points || "0", 10);
    }
    const r = sec.querySelector('svg.chart[data-chart="refusals"]');
    const axis = r && r.querySelector('line.axis');
    const line = r && r.querySelector('path.s-refused');
    if (axis && line) {
      // The path is M/L x y pairs (h0 after a lone point): the least y is
      // the highest point; the horizontal axis is drawn at y of zero.
      const ys = [...line.getAttribute('d').matchAll(/[ML]\s*[-\d.]+\s+([-\d.]+)/g)].map(m => parseFloat(m[1]));
      if (ys.length) f.refusedTop = parseFloat(axis.getAttribute('y1')) - Math.min(...ys);
    }
    f.cooldowns = r ? r.querySelectorAll('line.event').length : 0;
  }
  for (const tr of document.querySelectorAll('tr.tenant[data-key]')) {
    const w = tr.querySelector('td.wait');
    f.waits[tr.dataset.key] = w ? w.textContent : "";
  }
  const a = document.querySelector('#archived tr[data-id="` + liveBadID + `"] td.reason');
  f.reason = a ? a.textContent : "";
  for (const tr of document.querySelectorAll('#workers tr[data-worker]')) {
    const l = tr.querySelector('td.wlimits');
    f.workers.push(l ? l.textContent : "");
  }
  return f;
})()`

// TestDashboardLive is issue #29's "done when": a live fleet goes through an
// announced quota, a 429 episode, a tenant backlog, an archived job and a
// runtime change made through the page, and the page shows each at a
// phone's width and a desktop's, with a screenshot at each
// (SLUICE_DASHBOARD_SHOT_DIR=docs writes docs/dashboard-390.png and
// docs/dashboard-1280.png).
func TestDashboardLive(t *testing.T) {
	chrome := browsertest.Path(t)
	start := time.Now()
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	// 40/s announced in IETF fields; from 6 s after its first request the
	// upstream allows and announces 8/s for 4 s, then 40/s again (measured:
	// the fleet follows the announcements down and up, drawing one 429 at
	// most: the 429 episode is the refusal window below).
	up := newUpstream(t, upstreamConfig{Rate: 40, Burst: 6, Announce: "ietf",
		Schedule: []rateStep{{6 * time.Second, 8}, {10 * time.Second, 40}}})
	fleet := startFleet(t, srv, insp, 3, "--concurrency", "10", "--limit", liveLimit,
		"--history-step", "1s", "--status-interval", "1s")
	url := startDashboard(t, srv, liveToken)

	// The job that fails for good: a payload the http:request handler
	// refuses, archived at once whatever its retries (internal/httpjob).
	qc := queue.NewClient(asynq.NewClientFromRedisClient(srv.Client(t)))
	_, err := qc.Enqueue(context.Background(), queue.Task{Type: "http:request", Key: "B", Payload: []byte(`{"url": "gopher://h/"}`)},
		asynq.TaskID(liveBadID), asynq.MaxRetry(0))
	require.NoError(t, err)
	enqueue(t, srv.URL(), "--type", "http:request", "--key", "A", "--count", fmt.Sprint(liveA), "--payload", up.Payload(t, "", "A"))
	enqueue(t, srv.URL(), "--type", "http:request", "--key", "B", "--count", fmt.Sprint(liveB), "--payload", up.Payload(t, "", "B"))

	// The facts in /api/state first: they explain a failure of the page's
	// checks better than the page can.
	var f liveFacts
	var raw string
	var causes []string // every binding bucket and cause /api/state showed, in order
	waitFacts := func(what string, timeout time.Duration, ok func(liveFacts) bool) {
		t.Helper()
		if !poll(timeout, 250*time.Millisecond, func() bool {
			var s liveState
			s, raw = readState(t, url)
			f = factsOf(s)
			if c := f.Binding + ": " + f.BindingCause; !slices.Contains(causes, c) {
				causes = append(causes, c)
			}
			return ok(f)
		}) {
			t.Fatalf("/api/state never showed %s within %v: %+v\n%s", what, timeout, f, raw)
		}
		t.Logf("+%.1fs /api/state shows %s: %+v", time.Since(start).Seconds(), what, f)
	}
	waitFacts("the global bucket binding at the upstream's announced 40/s", 20*time.Second, func(f liveFacts) bool {
		return f.Binding == "global" && strings.Contains(f.BindingCause, "announced by the upstream 40/s")
	})
	// The 429 episode: the upstream refuses every request for 3 s, with
	// Retry-After: 1, so the fleet's global bucket cools down, tries again
	// after each second, and is refused again (a window of 1 s drew one
	// 429).
	up.RefuseWindow(0, 3*time.Second, "1")
	waitFacts("the global bucket cooling down after a 429", 10*time.Second, func(f liveFacts) bool {
		return f.Binding == "global" && strings.Contains(f.BindingCause, "cooling down")
	})
	waitFacts("the archived job and its reason", 20*time.Second, func(f liveFacts) bool {
		return strings.Contains(f.Archived, "bad payload")
	})
	waitFacts("both tenants' longest waits", 20*time.Second, func(f liveFacts) bool {
		return f.Waits["tenant:A"] > 0 && f.Waits["tenant:B"] > 0
	})
	waitFacts("the 429 episode in the history", 30*time.Second, func(f liveFacts) bool {
		return f.Refused > 0
	})
	waitFacts("a history of more than 5 steps", 20*time.Second, func(f liveFacts) bool {
		return f.Points > 5
	})
	assert.Positive(t, up.Count(http.StatusTooManyRequests), "the upstream answered 429s")

	// The browser, at a desktop's width first, for the runtime change.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first call starts the browser, which lives as long as ctx: no timeout on it.
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900), chromedp.Navigate(url)))
	within := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(ctx, d)
		t.Cleanup(cancel)
		return c
	}
	var p pageFacts
	readPage := func() pageFacts {
		t.Helper()
		p, err := chromedp.Run(within(10*time.Second), chromedp.Evaluate[pageFacts](pageFactsJS))
		require.NoError(t, err)
		return p
	}
	waitPage := func(what string, timeout time.Duration, ok func(pageFacts) bool) {
		t.Helper()
		if !poll(timeout, 250*time.Millisecond, func() bool { p = readPage(); return ok(p) }) {
			t.Fatalf("the page never showed %s within %v: %+v", what, timeout, p)
		}
	}
	waitPage("the limit's section", 20*time.Second, func(p pageFacts) bool { return p.Section })

	// The runtime change, through the page's form with the token: the
	// confirmation says what will happen before anything does.
	require.NoError(t, chromedp.Do(within(10*time.Second),
		chromedp.SendKeys(`#auth input[name=token]`, liveToken),
		chromedp.SendKeys(`form[data-op=set] input[name=spec]`, liveRuntime),
		chromedp.Click(`form[data-op=set] button`),
		chromedp.WaitVisible(`dialog#confirm p.consequence`),
	))
	consequence, err := chromedp.Run(within(5*time.Second), chromedp.Text(`dialog#confirm p.consequence`))
	require.NoError(t, err)
	t.Logf("the confirmation says: %q", consequence)
	assert.Contains(t, consequence, "(3) applies 50/s", "the confirmation says which workers apply what")
	assert.Contains(t, consequence, "within a second", "and when")
	require.NoError(t, chromedp.Do(within(5*time.Second), chromedp.Click(`dialog#confirm button[value=confirm]`)))
	var result string
	require.True(t, poll(10*time.Second, 100*time.Millisecond, func() bool {
		result, err = chromedp.Run(within(5*time.Second), chromedp.Text(`#result`))
		// "asking what it will do…" and "sending…" come before the answer
		return err == nil && result != "" && !strings.HasSuffix(result, "…")
	}), "the page shows the action's answer: %q", result)
	assert.Contains(t, result, "set "+liveRuntime+" (runtime)")
	waitFacts("the runtime cause", 10*time.Second, func(f liveFacts) bool {
		for _, c := range f.Causes {
			if strings.Contains(c, "runtime limit set by") {
				return true
			}
		}
		return false
	})
	// Every worker applies it, and says so in its heartbeat.
	waitPage("every worker applying the runtime limit", 10*time.Second, func(p pageFacts) bool {
		return len(p.Workers) == 3 && !slices.ContainsFunc(p.Workers, func(l string) bool { return !strings.Contains(l, "runtime") })
	})
	// The global bucket still binds: the upstream's 40/s is under the
	// runtime limit's 60/s.
	waitFacts("the global bucket binding at 40/s again after the change", 10*time.Second, func(f liveFacts) bool {
		return f.Binding == "global" && strings.Contains(f.BindingCause, "announced by the upstream 40/s")
	})

	// The terminal says the same: sluice inspect TYPE names the binding
	// bucket and its cause, the tenants' waits and the last steps.
	code, out := runCommand(t, 10*time.Second, bin.sluice, "inspect", "http:request", "--redis", srv.URL(), "--key-prefix", keyPrefix)
	require.Equal(t, 0, code, out)
	t.Logf("sluice inspect http:request:\n%s", out)
	assert.Regexp(t, `global binds: announced by the upstream 40/s`, out)
	assert.Regexp(t, `tenant:A\s`, out, "tenant A's row")
	assert.Regexp(t, `tenant:B\s`, out, "tenant B's row")
	assert.Contains(t, out, "history, the last", "the last steps of its history")
	assert.Contains(t, out, "bad payload", "its archived job")

	// SLUICE_DASHBOARD_SHOT_DIR is relative to the repository's root, where
	// go test ./integration/ is run from (the test runs in integration/).
	shots := os.Getenv("SLUICE_DASHBOARD_SHOT_DIR")
	if shots != "" && !filepath.IsAbs(shots) {
		shots = filepath.Join("..", shots)
	}
	if shots != "" {
		// The screenshots for docs/ show a minute of the charts, not a few
		// seconds at the end of their axis.
		waitFacts("a minute of history, for the screenshots", 90*time.Second, func(f liveFacts) bool {
			return f.Points >= 60
		})
	}
	for _, w := range []struct {
		width, height int64
		mobile        bool
	}{{390, 844, true}, {1280, 900, false}} {
		emulate := chromedp.EmulateViewport(w.width, w.height)
		if w.mobile {
			emulate = chromedp.EmulateViewport(w.width, w.height, chromedp.EmulateMobile)
		}
		require.NoError(t, chromedp.Do(within(10*time.Second), emulate))
		where := fmt.Sprintf("at %d px", w.width)

		waitPage("the global bucket binding, announced 40/s, "+where, 10*time.Second, func(p pageFacts) bool {
			return p.Section && len(p.Binds) == 1 && p.Binds[0] == "global" &&
				strings.Contains(p.Causes["global"], "announced by the upstream 40/s") &&
				strings.Contains(p.Binding, "global")
		})
		waitPage("the runtime cause "+where, 10*time.Second, func(p pageFacts) bool {
			for _, c := range p.Causes {
				if strings.Contains(c, "runtime limit set by") {
					return true
				}
			}
			return false
		})
		waitPage("both tenants' waits "+where, 10*time.Second, func(p pageFacts) bool {
			return strings.ContainsAny(p.Waits["tenant:A"], "0123456789") && strings.ContainsAny(p.Waits["tenant:B"], "0123456789")
		})
		waitPage("the archived job and its reason "+where, 10*time.Second, func(p pageFacts) bool {
			return strings.Contains(p.Reason, "bad payload")
		})
		waitPage("the 429 episode in the refusals chart "+where, 5*time.Second, func(p pageFacts) bool {
			return p.RefusedTop > 1 && p.Cooldowns > 0
		})
		before := readPage().Charts
		for _, c := range []string{"grants", "refusals", "backlog", "jobs"} {
			assert.Greater(t, before[c], 5, "the %s chart's points %s", c, where)
		}
		waitPage("the charts growing "+where, 5*time.Second, func(p pageFacts) bool {
			return p.Charts["grants"] > before["grants"]
		})
		if w.mobile {
			assert.LessOrEqual(t, p.Width, 390, "nothing wider than a phone's screen but the scrolling tables")
		}
		t.Logf("the page %s: %+v", where, p)

		png, err := chromedp.Run(within(20*time.Second), chromedp.FullScreenshot(100))
		require.NoError(t, err)
		require.True(t, bytes.HasPrefix(png, []byte("\x89PNG")), "a PNG screenshot %s", where)
		name := fmt.Sprintf("dashboard-%d.png", w.width)
		require.NoError(t, os.WriteFile(filepath.Join(t.TempDir(), name), png, 0o644))
		if shots != "" {
			require.NoError(t, os.WriteFile(filepath.Join(shots, name), png, 0o644))
		}
	}

	t.Logf("the binding buckets and causes /api/state showed, in order: %q", causes)
	final := stopFleet(t, fleet, stopTimeout)
	assert.Equal(t, int64(1), final.Archived, "the one bad job archived, nothing else")
	t.Logf("the whole run: %.1fs; upstream answers %v", time.Since(start).Seconds(), byStatus(up.Requests()))
}
