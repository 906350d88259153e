// The sluice dashboard. It takes the fleet's state from the server-sent
// events of /api/events (polling /api/state every second while the stream is
// silent), draws it, and patches the page in place: an update that changes
// nothing changes no element. Actions go to /api/preview, then, once the
// user confirms what it will do, to /api/action with the token the user
// typed (kept for this tab only). No library, nothing from elsewhere.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const chartHeight = 180;         // px; fixed, so an update never moves the page
const slots = 120;               // steps in a history ring (internal/history)
const widths = new Map();        // chart key -> its measured width in px
let last = null;                 // the state drawn last
let lastEvent = 0;               // when the stream last gave a state (Date.now)

// ---- building and patching elements ----

// el makes an HTML element (or an SVG one with ns); attributes null, undefined
// or false are left out, children may be nested arrays, null or false.
function el(tag, attrs, ...children) { return make(document.createElement(tag), attrs, children); }
function sv(tag, attrs, ...children) { return make(document.createElementNS(SVG, tag), attrs, children); }
function make(e, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== null && v !== undefined && v !== false) e.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

// keyOf is what identifies a row or block across updates.
function keyOf(n) {
  if (n.nodeType !== 1) return "";
  const d = n.dataset || {};
  return [n.id, d.type, d.limit, d.bucket, d.key, d.priority, d.worker, d.id, d.chart, d.queue]
    .map(v => v === undefined ? "" : v).join("|");
}

function same(a, b) {
  return a.nodeType === b.nodeType && a.nodeName === b.nodeName && a.namespaceURI === b.namespaceURI && keyOf(a) === keyOf(b);
}

// patch makes cur's children like next's, touching only what differs.
function patch(cur, next) {
  const want = [...next.childNodes];
  for (let i = 0; i < want.length; i++) {
    const w = want[i];
    let c = cur.childNodes[i];
    if (c && !same(c, w)) {
      const later = [...cur.childNodes].slice(i + 1).find(n => same(n, w));
      if (later && keyOf(w) !== "") {
        cur.insertBefore(later, c);
        c = later;
      } else {
        cur.insertBefore(w, c);
        continue;
      }
    }
    if (!c) {
      cur.appendChild(w);
      continue;
    }
    if (c.nodeType === Node.TEXT_NODE) {
      if (c.nodeValue !== w.nodeValue) c.nodeValue = w.nodeValue;
      continue;
    }
    for (const a of [...c.attributes]) if (!w.hasAttribute(a.name)) c.removeAttribute(a.name);
    for (const a of w.attributes) if (c.getAttribute(a.name) !== a.value) c.setAttribute(a.name, a.value);
    patch(c, w);
  }
  while (cur.childNodes.length > want.length) cur.removeChild(cur.lastChild);
}

function patchInto(sel, ...children) {
  const box = document.querySelector(sel);
  patch(box, make(box.cloneNode(false), {}, children));
}

// ---- numbers and times ----

function pad(n) { return String(n).padStart(2, "0"); }
function hhmm(t) { const d = new Date(t); return pad(d.getHours()) + ":" + pad(d.getMinutes()); }
function hhmmss(t) { const d = new Date(t); return hhmm(t) + ":" + pad(d.getSeconds()); }

// num says v briefly: 1204 as "1,204", 0.5 as "0.5", 39.83 as "39.8".
function num(v) {
  if (v === null || v === undefined || Number.isNaN(v)) return "-";
  const a = Math.abs(v);
  const digits = a >= 100 || Number.isInteger(v) ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : 3;
  return Number(v.toFixed(digits)).toLocaleString("en-US", { maximumFractionDigits: digits });
}

function rate(v) { return num(v) + "/s"; }

// dur says a duration in seconds: "42 s", "3.5 s", "2 min 5 s"; "-" for none.
function dur(s) {
  if (!s || s <= 0) return "-";
  if (s < 10) return num(Math.round(s * 10) / 10) + " s";
  if (s < 120) return Math.round(s) + " s";
  const m = Math.floor(s / 60);
  return m < 120 ? `${m} min ${Math.round(s % 60)} s` : `${Math.floor(m / 60)} h ${m % 60} min`;
}

function percent(f) { return Math.round(100 * f) + "%"; }

// byPriority says " (p1 2, p5 8)" of counts by job priority, "" when there
// are none or all are of the default priority, 3.
function byPriority(m) {
  const ps = Object.keys(m || {}).filter(p => m[p] > 0).sort();
  if (ps.length === 0 || (ps.length === 1 && ps[0] === "3")) return "";
  return " (" + ps.map(p => `p${p} ${m[p]}`).join(", ") + ")";
}

// slug is an id made of a type's name, the same for the same name.
function slug(s) { return "type-" + s.replace(/[^A-Za-z0-9_-]/g, c => "_" + c.charCodeAt(0).toString(16)); }

// ---- the limits ----

// groups gathers the rows of each type, its first row first.
function groups(limits) {
  const m = new Map();
  for (const l of limits) {
    if (!m.has(l.type)) m.set(l.type, []);
    m.get(l.type).push(l);
  }
  return m;
}

function overviewRow(l) {
  const name = l.limit ? `${l.type} (${l.limit})` : l.type;
  const tokens = l.keyed ? "per key" : (l.tokens === undefined ? "-" : l.tokens);
  return el("tr", { "data-type": l.type, "data-limit": l.limit || null },
    el("td", {}, el("a", { href: "#" + slug(l.type) }, name)),
    el("td", { class: "num" }, l.quota ? `${l.quota.used === undefined ? "-" : num(l.quota.used)} of ${num(l.quota.max)}/${l.quota.unit}` :
      granted(l)),
    el("td", {}, l.binding || ""),
    el("td", { class: "num" }, tokens),
    el("td", { class: "num" + (l.cooldown_s > 0 ? " cooling" : "") }, dur(l.cooldown_s)),
    el("td", { class: "num" }, `${l.waiting}` + byPriority(l.waiting_by_priority)),
    el("td", { class: "num" }, l.queued === undefined ? "-" : `${num(l.queued)} (${(l.queues || []).join(", ")})` + byPriority(l.queued_by_priority)),
    el("td", { class: "spec" }, l.spec),
    el("td", {}, l.source + (l.set_by ? ` (${l.set_by})` : "")),
    el("td", { class: "num" }, l.workers + (l.conflict ? " (specs differ)" : "")));
}

// bucketsOf is the type's buckets (none for a malformed runtime entry).
function bucketsOf(rows) {
  return rows[0].buckets || [];
}

function bucketRow(b, rows) {
  const quota = rows.find(r => r.quota);
  let configured = rate(b.rate_per_s), effective = rate(b.effective_per_s);
  if (b.kind === "key") {
    configured += " per key";
    effective += " per key";
  } else if (b.kind === "in_flight") {
    configured = num(b.rate_per_s) + " slots";
    effective = num(b.effective_per_s) + " slots";
  } else if (b.kind === "quota" && quota) {
    configured = `${num(quota.quota.max)}/${quota.quota.unit}`;
  }
  return el("tr", { "data-bucket": b.name, class: b.binds ? "binds" : null },
    el("th", { scope: "row" }, b.name),
    el("td", { class: "num", "data-label": "configured" }, configured),
    el("td", { class: "num", "data-label": "effective" }, effective),
    el("td", { class: "cause", "data-label": "why" }, b.cause || ""),
    el("td", { class: "num", "data-label": "tokens" }, b.tokens === undefined || b.tokens === null ? "-" : b.tokens),
    el("td", { class: "num" + (b.cooldown_s > 0 ? " cooling" : ""), "data-label": "cooldown" }, dur(b.cooldown_s)),
    el("td", { class: "bind" }, b.binds ? "binds now" : ""));
}

// inFlight describes an automatic in-flight bound (in-flight=auto).
function inFlight(f) {
  return `${f.held} of ${f.bound} (auto ${f.floor}-${f.ceiling}, ` +
    `baseline ${f.baseline_ms.toFixed(1)} ms, recent ${f.recent_ms.toFixed(1)} ms, ${f.why})`;
}

// parked says the jobs parked until a quota's reset, and when that is.
function parked(l) {
  const at = l.parked_until ? l.parked_until.replace("T", " ").replace(/:\d\d([.]\d+)?(Z|[+-]\d\d:\d\d)$/, "") : "";
  return `${num(l.parked)} until ${at}` + (l.quota ? ` ${l.quota.zone}` : "");
}

function fact(term, value, cls) {
  return el("div", { class: cls || null }, el("dt", {}, term), el("dd", {}, value));
}

// granted says the type's grants per second against what allows them: the
// binding bucket's capacity when one binds, else the limit (per key with a
// key template).
function granted(l) {
  const b = (l.buckets || []).find(b => b.binds && b.capacity_per_s >= 0);
  if (b) return `${num(l.grants_per_s)} of ${rate(b.capacity_per_s)} (${b.name})`;
  return `${num(l.grants_per_s)} of ${rate(l.rate_per_s)}` + (l.keyed ? " per key" : "");
}

function facts(rows, st) {
  const l = rows[0];
  const out = [
    fact("grants/s (1 min)", granted(l), "grants"),
    fact("waiting in workers", `${num(l.waiting)}` + byPriority(l.waiting_by_priority), "waiting"),
    fact("queued", l.queued === undefined ? "-" : `${num(l.queued)} in ${(l.queues || []).join(", ")}` + byPriority(l.queued_by_priority), "queued"),
  ];
  for (const r of rows) {
    if (r.quota) out.push(fact(r.limit ? `quota (${r.limit})` : "quota", r.quota.text, "quota"));
    if (r.parked > 0) out.push(fact("parked", parked(r), "parked"));
  }
  if (l.in_flight) out.push(fact("in flight", inFlight(l.in_flight), "inflight"));
  out.push(fact("source", l.source + (l.set_by ? ` (${l.set_by})` : "")));
  out.push(fact("workers", l.workers + (l.conflict ? " (specs differ)" : "")));
  return el("dl", { class: "facts" }, out);
}

function tenants(l) {
  if (!l.tenants || !l.tenants.length) return null;
  const prio = l.tenants.some(t => t.priority);
  const more = l.tenant_count > l.tenants.length ? ` (${l.tenants.length} of ${l.tenant_count})` : "";
  return [
    el("h4", {}, "Tenants with work now" + more),
    el("div", { class: "scroll", tabindex: 0, role: "region", "aria-label": `tenants of ${l.type}` },
      el("table", { class: "tenants" },
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "key"), prio && el("th", { scope: "col" }, "priority"),
          el("th", { scope: "col" }, "share"), el("th", { scope: "col" }, "weight"), el("th", { scope: "col" }, "waiting"),
          el("th", { scope: "col" }, "booked ahead"), el("th", { scope: "col" }, "longest wait"))),
        el("tbody", {}, l.tenants.map(t => el("tr", { class: "tenant", "data-key": t.key, "data-priority": t.priority || null },
          el("th", { scope: "row" }, t.key), prio && el("td", { class: "num", "data-label": "priority" }, t.priority || "-"),
          el("td", { class: "num", "data-label": "share" }, percent(t.share)), el("td", { class: "num", "data-label": "weight" }, t.weight),
          el("td", { class: "num", "data-label": "waiting" }, t.waiting), el("td", { class: "num", "data-label": "booked ahead" }, dur(t.ahead_s)),
          el("td", { class: "num wait", "data-label": "longest wait" }, dur(t.longest_wait_s))))))),
  ];
}

function levels(l) {
  if (!l.levels || !l.levels.length) return null;
  return [
    el("h4", {}, "Priorities with turns booked"),
    el("div", { class: "scroll", tabindex: 0, role: "region", "aria-label": `priorities of ${l.type}` },
      el("table", { class: "levels" },
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "priority"), el("th", { scope: "col" }, "share"),
          el("th", { scope: "col" }, "booked ahead"), el("th", { scope: "col" }, "waiting"))),
        el("tbody", {}, l.levels.map(p => el("tr", { class: "level", "data-priority": p.priority },
          el("th", { scope: "row" }, p.priority), el("td", { class: "num" }, percent(p.share)),
          el("td", { class: "num" }, dur(p.ahead_s)), el("td", { class: "num" }, p.waiting)))))),
  ];
}

function typeSection(type, rows, st) {
  const l = rows[0];
  const id = slug(type);
  const why = l.why || (l.effective_why ? `${type} adapts to the upstream: ${rate(l.effective_per_s)} now (${l.effective_why})` :
    `${type}: ${rate(l.grants_per_s)} granted of ${rate(l.rate_per_s)}` + (l.keyed ? " per key" : ""));
  return el("section", { class: "limit", "data-type": type, id: id, "aria-labelledby": id + "-h" },
    el("h3", { id: id + "-h" }, type, " ", el("span", { class: "spec" }, rows.length > 1 ? (l.specs || []).join(" ") : l.spec)),
    el("p", { class: "binding" + (l.binding ? " bound" : ""), "data-binding": l.binding || null }, why),
    facts(rows, st),
    el("h4", {}, "Buckets"),
    el("div", { class: "scroll", tabindex: 0, role: "region", "aria-label": `buckets of ${type}` },
      el("table", { class: "buckets" },
        el("thead", {}, el("tr", {}, ["bucket", "configured", "effective", "why", "tokens", "cooldown", "binds"].map(h => el("th", { scope: "col" }, h)))),
        el("tbody", {}, bucketsOf(rows).map(b => bucketRow(b, rows))))),
    tenants(l),
    levels(l),
    el("h4", {}, "Last hour"),
    el("div", { class: "charts" }, charts(type, l, st)));
}

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

  // Events: a mark at each step with some, with its count.
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
      if (!(n > 0)) { label(); continue; }
      const xe = x(t + stepMs / 2);
      parts.push(sv("line", { class: "event " + c.events.cls, x1: xe.toFixed(1), x2: xe.toFixed(1), y1: m.t, y2: h - m.b }));
      if (run && t - run.t > 1.5 * stepMs) label();
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

// ---- workers, queues, archived ----

function ago(t, now) {
  const s = (now - Date.parse(t)) / 1000;
  return Math.max(0, Math.round(s)) + " s ago";
}

function workerRow(w, now) {
  return el("tr", { "data-worker": w.id },
    el("td", {}, w.host), el("td", { class: "num" }, w.pid), el("td", { class: "version" }, w.version || "-"),
    el("td", { class: "mode-" + w.mode }, w.mode),
    el("td", { class: "wlimits", title: (w.limits || []).map(l => `${l.spec} (${l.source})`).join("\n") },
      (w.limits || []).map(l => `${l.type} (${l.source})`).join(", ")),
    el("td", { class: "num" }, num(w.active)), el("td", { class: "num" }, num(w.waiting)), el("td", { class: "num" }, num(w.processed)),
    el("td", { class: "num" + (w.cooldowns > 0 ? " cooling" : "") }, w.cooldowns),
    el("td", { class: "num" }, ago(w.seen, now)));
}

function queueRow(q) {
  return el("tr", { "data-queue": q.name },
    el("td", {}, q.name), el("td", { class: "num" }, num(q.pending)), el("td", { class: "num" }, num(q.scheduled)),
    el("td", { class: "num" }, num(q.retry)), el("td", { class: "num" }, num(q.active)), el("td", { class: "num" }, num(q.archived)),
    el("td", {}, byPriority(q.by_priority).replace(/^ \((.*)\)$/, "$1")));
}

function archivedRow(a, now) {
  const link = a.link && /^https?:\/\//i.test(a.link) ? el("a", { href: a.link, rel: "noopener noreferrer" }, a.id) : a.id;
  const t = Date.parse(a.failed_at);
  return el("tr", { "data-id": a.id },
    el("td", { class: "job" }, link), el("td", { "data-label": "type" }, a.type), el("td", { "data-label": "queue" }, a.queue),
    el("td", { class: "reason", "data-label": "why" }, a.reason),
    el("td", { class: "when", "data-label": "when" }, Number.isNaN(t) ? "-" : `${hhmmss(t)} (${dur((now - t) / 1000)} ago)`));
}

// ---- drawing ----

function draw(st) {
  if (last && Date.parse(st.time) < Date.parse(last.time)) return; // a late poll
  last = st;
  const now = Date.parse(st.time) || Date.now();
  const status = `${lastEvent && Date.now() - lastEvent < 2500 ? "live" : "polling"} · updated ${hhmmss(now)}`;
  const s = document.getElementById("status");
  if (s.textContent !== status) s.textContent = status;
  const errors = document.getElementById("errors");
  const text = (st.errors || []).join("; ");
  if (errors.hidden !== !text) errors.hidden = !text;
  if (errors.textContent !== text) errors.textContent = text;

  const limits = st.limits || [];
  const byType = groups(limits);
  const render = () => {
    patchInto("#limits tbody", limits.length ? limits.map(overviewRow) :
      el("tr", { class: "empty" }, el("td", { colspan: 10 }, "no limit in the fleet yet")));
    patchInto("#types", [...byType].map(([type, rows]) => typeSection(type, rows, st)));
  };
  render();
  if (measure()) render(); // the charts' widths are known once laid out
  patchInto("#workers tbody", (st.workers || []).map(w => workerRow(w, now)));
  patchInto("#queues tbody", (st.queues || []).map(queueRow));
  const archived = st.archived || [];
  patchInto("#archived tbody", archived.length ? archived.map(a => archivedRow(a, now)) :
    el("tr", { class: "empty" }, el("td", { colspan: 5 }, "none recently")));

  const ro = document.getElementById("readonly");
  if (ro.hidden !== !!st.writable) ro.hidden = !!st.writable;
  document.querySelectorAll("#actions form").forEach(f => {
    f.querySelectorAll("input, button").forEach(i => { if (i.disabled !== !st.writable) i.disabled = !st.writable; });
  });
}

async function refresh() {
  try {
    const r = await fetch("api/state", { cache: "no-store" });
    if (!r.ok) throw new Error(r.status + " " + r.statusText);
    draw(await r.json());
  } catch (e) {
    document.getElementById("status").textContent = "cannot reach the dashboard: " + e.message;
  }
}

// listen takes each state from the stream; while it gives none (not served,
// broken, reconnecting), the page polls once a second.
function listen() {
  if (window.EventSource) {
    const es = new EventSource("api/events");
    es.addEventListener("state", e => {
      lastEvent = Date.now();
      try { draw(JSON.parse(e.data)); } catch (err) { console.error(err); }
    });
  }
  setInterval(() => { if (Date.now() - lastEvent > 2500) refresh(); }, 1000);
}

// ---- actions ----

function token() { return document.querySelector("#auth input[name=token]").value; }

async function post(path, body) {
  const r = await fetch(path, {
    method: "POST",
    headers: { "Content-Type": "application/json", "Authorization": "Bearer " + token() },
    body: JSON.stringify(body),
  });
  let out = {};
  try { out = await r.json(); } catch (e) { out = { error: r.status + " " + r.statusText }; }
  return { status: r.status, ok: r.ok, out };
}

// ask shows what will happen and resolves true if the user confirms.
function ask(text) {
  const dlg = document.getElementById("confirm");
  dlg.querySelector(".consequence").textContent = text;
  dlg.returnValue = "";
  return new Promise(resolve => {
    dlg.addEventListener("close", () => resolve(dlg.returnValue === "confirm"), { once: true });
    dlg.showModal();
  });
}

async function act(form) {
  sessionStorage.setItem("sluice-token", token());
  const body = { op: form.dataset.op };
  new FormData(form).forEach((v, k) => { if (v !== "") body[k] = v; });
  const result = document.getElementById("result");
  result.textContent = "asking what it will do…";
  try {
    const p = await post("api/preview", body);
    const text = p.out.confirm;
    if (!text) {
      result.textContent = "refused: " + (p.out.error || p.status);
      return;
    }
    const yes = await ask(text);
    (form.querySelector("button") || form).focus();
    if (!yes) {
      result.textContent = "cancelled: nothing was sent";
      return;
    }
    result.textContent = "sending…";
    const r = await post("api/action", body);
    result.textContent = r.ok ? r.out.ok : "refused: " + r.out.error;
  } catch (e) {
    result.textContent = "failed: " + e.message;
  }
  refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelector("#auth input[name=token]").value = sessionStorage.getItem("sluice-token") || "";
  document.querySelector("#auth").addEventListener("submit", e => e.preventDefault());
  document.querySelectorAll("#actions form[data-op]").forEach(f => {
    f.addEventListener("submit", e => { e.preventDefault(); act(f); });
  });
  let resized = 0;
  window.addEventListener("resize", () => {
    clearTimeout(resized);
    resized = setTimeout(() => { if (last && measure()) { const st = last; last = null; draw(st); } }, 100);
  });
  refresh();
  listen();
});
