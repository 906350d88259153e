// The dashboard's charts of a type's last hour (internal/history), drawn by
// hand in SVG: a time axis in HH:MM, labelled values, the series, the limit
// line, a legend, a gap where a step is missing. Uses dom.js.
"use strict";

const chartHeight = 180;         // px; fixed, so an update never moves the page
const slots = 120;               // steps in a history ring (internal/history)
const widths = new Map();        // chart key -> its measured width in px

// ---- charts ----

// niceStep is 1, 2 or 5 times a power of ten, at least raw.
function niceStep(raw) {
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map(m => m * p).find(s => s >= raw * (1 - 1e-9));
}

// chartSpecs are the four charts of a type's history: lines (each a value
// per point; null leaves it out) and events (counts drawn as marks).
function chartSpecs(l, step) {
  const per = v => v / step;
  // The workers write the global bucket's rate as the limit when the type
  // has one (internal/history), else the first limit's, per key when keyed.
  const global = (l.buckets || []).some(b => b.kind === "global");
  const limitLabel = global ? "limit (global)" : "limit" + (l.keyed ? " per key" : "");
  return [
    { name: "grants", title: "grants per second against the limit", unit: "/s", lines: [
      { cls: "s-grants", label: "grants/s", v: p => per(p.grants) },
      { cls: "s-limit", label: limitLabel, v: p => p.limit_per_s || null },
      { cls: "s-effective", label: "effective rate", v: p => p.effective_per_s > 0 ? p.effective_per_s : null },
    ] },
    { name: "refusals", title: "upstream refusals (429/503) per second, and cooldowns", unit: "/s", lines: [
      { cls: "s-refused", label: "refused/s", v: p => per(p.refused) },
    ], events: { cls: "s-cooldown", label: "cooldowns put", v: p => p.cooldowns } },
    { name: "backlog", title: "jobs waiting in workers and queued", unit: "", lines: [
      { cls: "s-waiting", label: "waiting", v: p => p.waiting },
      { cls: "s-queued", label: "queued", v: p => p.queued },
    ] },
    { name: "jobs", title: "jobs done per second, and archived", unit: "/s", lines: [
      { cls: "s-done", label: "done/s", v: p => per(p.done) },
    ], events: { cls: "s-archived", label: "archived", v: p => p.archived } },
  ];
}

function charts(type, l, st) {
  const hist = l.history || { step_s: 30, points: [] };
  const step = hist.step_s > 0 ? hist.step_s : 30;
  const points = (hist.points || []).filter(p => !Number.isNaN(Date.parse(p.t)));
  return chartSpecs(l, step).map(c => chart(type, c, points, step, st));
}

function chart(type, c, points, step, st) {
  const key = type + "\n" + c.name;
  const w = widths.get(key) || 480, h = chartHeight;
  const m = { l: 44, r: 10, t: 14, b: 24 };
  const stepMs = step * 1000;
  const end = points.length ? Date.parse(points[points.length - 1].t) + stepMs : Date.parse(st.time) || Date.now();
  const start = Math.min(points.length ? Date.parse(points[0].t) : end, end - slots * stepMs);
  const x = t => m.l + (t - start) / (end - start) * (w - m.l - m.r);
  let top = 0;
  for (const p of points) {
    for (const s of c.lines) { const v = s.v(p); if (v !== null && v > top) top = v; }
  }
  const vstep = niceStep(top > 0 ? top / 4 : 0.25);
  top = Math.max(vstep, Math.ceil(top / vstep - 1e-9) * vstep);
  const y = v => m.t + (1 - v / top) * (h - m.t - m.b);
  const parts = [];

  // The value axis: a line and a label at each step of vstep.
  for (let v = 0; v <= top + vstep / 2; v += vstep) {
    parts.push(sv("line", { class: "grid", x1: m.l, x2: w - m.r, y1: y(v).toFixed(1), y2: y(v).toFixed(1) }),
      sv("text", { class: "vlabel", x: m.l - 5, y: (y(v) + 4).toFixed(1), "text-anchor": "end" }, num(v)));
  }
  // The time axis: HH:MM at whole minutes, as many as fit.
  const span = end - start, room = Math.max(2, Math.floor((w - m.l - m.r) / 64));
  const every = [1, 2, 5, 10, 15, 20, 30, 60, 120].map(n => n * 60000).find(n => span / n <= room) || 3600000;
  const off = new Date(start).getTimezoneOffset() * 60000;
  for (let t = Math.ceil((start - off) / every) * every + off; t <= end; t += every) {
    const xt = x(t).toFixed(1), edge = x(t) > w - 16;
    parts.push(sv("line", { class: "tick", x1: xt, x2: xt, y1: h - m.b, y2: h - m.b + 4 }),
      sv("text", { class: "tlabel", x: edge ? w - 1 : xt, y: h - 6, "text-anchor": edge ? "end" : "middle" }, hhmm(t)));
  }
  parts.push(sv("line", { class: "axis", x1: m.l, x2: w - m.r, y1: h - m.b, y2: h - m.b }),
    sv("line", { class: "axis", x1: m.l, x2: m.l, y1: m.t, y2: h - m.b }));

  // Events: a mark at each step with some, and a count over each run of them.
  if (c.events) {
    let run = null;
    const label = () => {
      if (!run) return;
      const xm = (run.x0 + run.x1) / 2;
      parts.push(sv("text", { class: "elabel " + c.events.cls, x: Math.min(Math.max(xm, m.l + 8), w - 8).toFixed(1), y: m.t - 2,
        "text-anchor": "middle" }, num(run.n)));
      run = null;
    };
    for (const p of points) {
      const n = c.events.v(p), t = Date.parse(p.t);
      if (!(n > 0)) continue;
      const xe = x(t + stepMs / 2);
      parts.push(sv("line", { class: "event " + c.events.cls, x1: xe.toFixed(1), x2: xe.toFixed(1), y1: m.t, y2: h - m.b }));
      // A run ends at a step without events, unless the next mark is
      // too close for a label of its own: then one label counts both.
      if (run && t - run.t > 1.5 * stepMs && xe - run.x1 > 18) label();
      if (!run) run = { x0: xe, x1: xe, n: 0, t: t };
      run.x1 = xe;
      run.n += n;
      run.t = t;
    }
    label();
  }
  // Lines: broken where a step is missing, or a value is.
  for (const s of c.lines) {
    let d = "", prev = null, run = 0;
    for (const p of points) {
      const t = Date.parse(p.t), v = s.v(p);
      if (v === null || v === undefined) { if (run === 1) d += "h0"; prev = null; run = 0; continue; }
      const jump = prev === null || t - prev > 1.5 * stepMs;
      if (jump && run === 1) d += "h0"; // a lone point: a dot
      d += (jump ? "M" : "L") + x(t + stepMs / 2).toFixed(1) + " " + y(v).toFixed(1);
      run = jump ? 1 : run + 1;
      prev = t;
    }
    if (run === 1) d += "h0";
    if (d) parts.push(sv("path", { class: "line " + s.cls, d: d }));
  }
  if (!points.length) {
    parts.push(sv("text", { class: "empty", x: (m.l + w - m.r) / 2, y: (m.t + h - m.b) / 2, "text-anchor": "middle" }, "no history yet"));
  }

  const lastP = points[points.length - 1];
  const now = lastP ? c.lines.map(s => s.v(lastP)).map((v, i) => v === null ? "" : `${c.lines[i].label} ${num(v)}`).filter(Boolean).join(", ") : "";
  const minutes = Math.round(span / 60000);
  const label = `${type}: ${c.title}, last ${minutes} min, ${points.length} points` +
    (points.length ? ` from ${hhmm(Date.parse(points[0].t))} to ${hhmm(end)}; at the end ${now}` : "; no history yet");
  const legend = c.lines.map(s => el("li", {}, el("span", { class: "sw " + s.cls, "aria-hidden": "true" }), s.label));
  if (c.events) legend.push(el("li", {}, el("span", { class: "sw " + c.events.cls, "aria-hidden": "true" }), c.events.label));
  return el("figure", { "data-chart": c.name },
    el("figcaption", {}, c.title),
    sv("svg", { class: "chart", "data-chart": c.name, "data-points": points.length, "data-key": key, viewBox: `0 0 ${w} ${h}`,
      role: "img", "aria-label": label }, sv("title", {}, label), parts),
    el("ul", { class: "legend" }, legend));
}

// measure notes each chart's width; true if one changed since it was drawn.
function measure() {
  let changed = false;
  document.querySelectorAll("svg.chart").forEach(s => {
    const w = Math.round(s.getBoundingClientRect().width);
    if (w > 0 && w !== widths.get(s.dataset.key)) {
      widths.set(s.dataset.key, w);
      changed = true;
    }
  });
  return changed;
}
