package integration

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// kneeASCII draws the learned bound over time, one row per second: the
// bound as '#', the upstream's capacity C as '|'.
func kneeASCII(series []kneePoint) string {
	var b strings.Builder
	b.WriteString("\n  t   C  bound  held  recent  baseline  why         (# bound, | capacity)\n")
	next := time.Duration(0)
	for _, p := range series {
		if p.at < next {
			continue
		}
		next = p.at.Truncate(time.Second) + time.Second
		row := []byte(strings.Repeat(" ", 41))
		for i := 0; i < min(p.limit, 40); i++ {
			row[i] = '#'
		}
		if p.c <= 40 {
			row[p.c] = '|'
		}
		fmt.Fprintf(&b, "%3.0fs %3d  %5d  %4d  %5.0fms  %6.1fms  %-10s  %s\n", p.at.Seconds(), p.c, p.limit, p.held, float64(p.recent)/1e6, float64(p.base)/1e6, p.why, row)
	}
	return b.String()
}

// kneeSVG draws the run: above, the fleet's bound and the upstream's
// capacity C over time; below, the p50 and p99 latency of each half second's
// answers and the fleet's recent (mean) latency, against S and 2·S.
func kneeSVG(series []kneePoint, u *kneeUpstream, end, s time.Duration) string {
	const w, h, pad = 720.0, 420.0, 40.0
	top, mid := pad, h/2+10
	ph := h/2 - pad - 10
	x := func(t time.Duration) float64 { return pad + (w-2*pad)*t.Seconds()/end.Seconds() }
	yb := func(v float64) float64 { return top + ph - ph*v/30 }                          // bound: 0..30
	yl := func(d time.Duration) float64 { return mid + ph - ph*float64(d)/float64(4*s) } // latency: 0..4S
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="11">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	line := func(pts [][2]float64, color, dash string) {
		var p strings.Builder
		for _, q := range pts {
			fmt.Fprintf(&p, "%.1f,%.1f ", q[0], q[1])
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5" stroke-dasharray="%s" points="%s"/>`+"\n", color, dash, p.String())
	}
	var bound, limit, capa, recent [][2]float64
	for _, p := range series {
		bound = append(bound, [2]float64{x(p.at), yb(float64(p.bound))})
		limit = append(limit, [2]float64{x(p.at), yb(float64(p.limit))})
		capa = append(capa, [2]float64{x(p.at), yb(float64(p.c))})
		recent = append(recent, [2]float64{x(p.at), yl(min(p.recent, 4*s))})
	}
	var p50, p99 [][2]float64
	for t0 := time.Duration(0); t0 < end; t0 += 500 * time.Millisecond {
		f := figuresOf(u.between(t0, t0+500*time.Millisecond), 500*time.Millisecond)
		if f.n == 0 {
			continue
		}
		p50 = append(p50, [2]float64{x(t0 + 250*time.Millisecond), yl(min(f.p50, 4*s))})
		p99 = append(p99, [2]float64{x(t0 + 250*time.Millisecond), yl(min(f.p99, 4*s))})
	}
	// Axes and guides.
	for _, v := range []float64{0, 8, 10, 20, 25, 30} {
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end">%g</text>`+"\n", pad, w-pad, yb(v), yb(v), pad-4, yb(v)+4, v)
	}
	for _, d := range []time.Duration{0, s, 2 * s, 4 * s} {
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#eee"/><text x="%.0f" y="%.1f" text-anchor="end">%dms</text>`+"\n", pad, w-pad, yl(d), yl(d), pad-4, yl(d)+4, d.Milliseconds())
	}
	for t := time.Duration(0); t <= end; t += 5 * time.Second {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f" text-anchor="middle">%.0fs</text>`+"\n", x(t), h-8, t.Seconds())
	}
	line(capa, "#999", "4 3")
	line(bound, "#9ecae1", "")
	line(limit, "#1f77b4", "")
	line(p99, "#d62728", "")
	line(p50, "#ff7f0e", "")
	line(recent, "#2ca02c", "2 2")
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">fleet's learned in-flight bound (blue; light: as granted, ¾ of it in probes) and upstream capacity C (grey)</text>`+"\n", pad, top-8)
	fmt.Fprintf(&b, `<text x="%.0f" y="%.0f">latency at the upstream: p99 (red), p50 (orange) per 0.5 s; fleet's window mean (green)</text>`+"\n", pad, mid-8)
	b.WriteString("</svg>\n")
	return b.String()
}

// kneeAnomalies lists the readings where more slots were held than the
// bound (leases taken before it fell), and when 503s were answered.
func kneeAnomalies(series []kneePoint, u *kneeUpstream) string {
	var b strings.Builder
	for _, p := range series {
		if p.held > p.bound {
			fmt.Fprintf(&b, "held>bound at %v: %d>%d; ", p.at, p.held, p.bound)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	per := map[int]int{}
	for _, a := range u.answers {
		if a.status == http.StatusServiceUnavailable {
			per[int(a.at.Seconds()*10)]++
		}
	}
	fmt.Fprintf(&b, "\n503 per 100ms: %v", per)
	return b.String()
}
