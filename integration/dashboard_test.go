package integration

import (
	"bufio"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/sluicehq/sluice/internal/browsertest"
	"github.com/sluicehq/sluice/internal/redistest"
)

// startDashboard runs the built `sluice dashboard` on a free port and
// returns its address.
func startDashboard(t *testing.T, srv *redistest.Server, token string) string {
	t.Helper()
	p := startProcess(t, "dashboard", bin.sluice, []string{"dashboard", "--redis", srv.URL(), "--key-prefix", keyPrefix,
		"--addr", "127.0.0.1:0"}, "SLUICE_TOKEN="+token)
	re := regexp.MustCompile(`dashboard on (http://\S+/) `)
	var url string
	require.Eventually(t, func() bool {
		sc := bufio.NewScanner(strings.NewReader(p.Output()))
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				url = m[1]
				return true
			}
		}
		return false
	}, 10*time.Second, 20*time.Millisecond, "the dashboard's address")
	return url
}

// TestDashboardDrivesTheFleet opens the dashboard of a running fleet in a
// real headless Chromium at a phone's width: the page shows the fleet's limit
// and workers, its figures move as jobs run, and a limit set through the
// page's form (with the token) is obeyed by the fleet.
func TestDashboardDrivesTheFleet(t *testing.T) {
	chrome := browsertest.Path(t)
	srv := redistest.Start(t)
	insp := newInspector(t, srv)
	up := newUpstream(t, upstreamConfig{})
	probe := startJitterProbe(t)
	fleet := startFleet(t, srv, insp, 2, "--concurrency", "5", "--limit", "http:request=30/s,burst=3")
	url := startDashboard(t, srv, "s3cret-s3cret-s3cret")
	enqueue(t, srv.URL(), "--type", "http:request", "--count", "600", "--payload", up.Payload(t, "", ""))

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.WindowSize(390, 844), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	// The first call starts the browser, which lives as long as ctx: no timeout on it.
	require.NoError(t, chromedp.Do(ctx, chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(url)))
	within := func(d time.Duration) context.Context {
		c, cancel := context.WithTimeout(ctx, d)
		t.Cleanup(cancel)
		return c
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(within(10*time.Second), chromedp.Text(sel))
		require.NoError(t, err, sel)
		return s
	}

	require.NoError(t, chromedp.Do(within(20*time.Second), chromedp.WaitVisible(`#limits tr[data-type="http:request"]`)))
	assert.Contains(t, text(`#workers tbody`), "shared", "each worker's mode")
	first := text(`#queues tbody`)
	require.Eventually(t, func() bool { return text(`#queues tbody`) != first },
		20*time.Second, 500*time.Millisecond, "the queue's figures move (%q)", first)
	assert.Contains(t, text(`#limits tr[data-type="http:request"]`), "http:request=30/s,burst=3")
	width, err := chromedp.Run(within(5*time.Second), chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
	require.NoError(t, err)
	assert.LessOrEqual(t, width, 390, "nothing wider than a phone's screen but the scrolling tables")

	probe.Reset()
	require.NoError(t, chromedp.Do(within(10*time.Second),
		chromedp.SendKeys(`#auth input[name=token]`, "s3cret-s3cret-s3cret"),
		chromedp.SendKeys(`form[data-op=set] input[name=spec]`, "http:request=10/s,burst=1"),
		chromedp.Click(`form[data-op=set] button`),
		// The page asks first, saying what will happen; only Confirm sends it.
		chromedp.WaitVisible(`dialog#confirm p.consequence`),
		chromedp.Click(`dialog#confirm button[value=confirm]`),
	))
	var result string
	require.Eventually(t, func() bool {
		result = text(`#result`)
		// "asking what it will do…" and "sending…" come before the answer
		return result != "" && !strings.HasSuffix(result, "…")
	}, 10*time.Second, 100*time.Millisecond)
	require.Contains(t, result, "set http:request=10/s,burst=1 (runtime)")
	// The limit changed when the page showed its result, not when the
	// browser began typing the token and the spec (which took over a second
	// once, letting arrivals under the old 30/s into the window below).
	set := time.Now()

	time.Sleep(4 * time.Second)
	var slow []time.Time
	for _, a := range arrivals(up.Requests(), http.StatusOK) {
		if a.After(set.Add(time.Second)) {
			slow = append(slow, a)
		}
	}
	worst, _ := excess(slow, 10, 1)
	allowance := float64(probe.Worst()+upstreamJitter)*10/float64(time.Second) + 0.5
	t.Logf("after the page's set: %d arrivals, worst %.2f tokens over 10/s burst 1 (allowance %.2f for the %v scheduling delay measured)",
		len(slow), worst, allowance, probe.Worst())
	assert.LessOrEqual(t, worst, allowance, "the fleet obeys the limit set through the page")
	assert.GreaterOrEqual(t, len(slow), 20, "and uses it")

	var row string
	require.Eventually(t, func() bool {
		row = text(`#limits tr[data-type="http:request"]`)
		return strings.Contains(row, "runtime")
	}, 10*time.Second, 200*time.Millisecond, "the page shows the runtime source: %q", row)
	stopFleet(t, fleet, stopTimeout)
}
