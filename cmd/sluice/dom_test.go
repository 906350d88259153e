package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// dumpDOM opens url in a headless Chromium at width px (browser) and
// returns the page's HTML once its script has drawn a state (its status
// line says "updated"), as chromium --dump-dom would print it. The page
// keeps its /api/events stream open, so --dump-dom with a virtual time
// budget never returns (virtual time stops while a fetch is pending).
func dumpDOM(ctx context.Context, t *testing.T, url string, width int64) ([]byte, error) {
	t.Helper()
	p := page{t: t, ctx: browser(t, url, width)}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		status := eval[string](p, `(document.getElementById("status") || {}).textContent || ""`)
		if strings.Contains(status, "updated ") {
			break
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the page drew no state in 20s: status %q", status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return []byte("<!DOCTYPE html>\n" + eval[string](p, "document.documentElement.outerHTML")), nil
}
