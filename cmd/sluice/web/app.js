// The sluice dashboard: reads /api/state once a second and draws it; sends
// actions to /api/action with the token the user typed (kept for this tab
// only). No library, nothing from elsewhere.
"use strict";

const history = new Map(); // type -> recent grants/s, for the charts
const keep = 120;          // points per chart: two minutes at one a second

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function seconds(s) {
  if (!s || s <= 0) return "-";
  return s < 10 ? s.toFixed(2) + "s" : Math.round(s) + "s";
}

function ago(t) {
  const s = (Date.now() - Date.parse(t)) / 1000;
  return Math.max(0, Math.round(s)) + "s ago";
}

// spark draws grants/s over time against the limit's rate (dashed).
function spark(points, limit) {
  const w = 160, h = 28;
  const top = Math.max(limit, ...points, 1e-9) * 1.1;
  const y = v => (h - (v / top) * h).toFixed(1);
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "spark");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  const line = document.createElementNS(svg.namespaceURI, "line");
  Object.entries({ class: "limit", x1: 0, x2: w, y1: y(limit), y2: y(limit) }).forEach(([k, v]) => line.setAttribute(k, v));
  svg.append(line);
  const path = document.createElementNS(svg.namespaceURI, "polyline");
  path.setAttribute("class", "grants");
  path.setAttribute("points", points.map((v, i) => `${(i * w / (keep - 1)).toFixed(1)},${y(v)}`).join(" "));
  svg.append(path);
  return svg;
}

function fill(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  body.replaceChildren(...rows);
}

// tenants says which keys share a fair limit's global bucket now.
// inFlight describes an automatic in-flight bound (in-flight=auto), if any.
function inFlight(l) {
  const f = l.in_flight;
  if (!f) return "";
  return ` · in flight ${f.held} of ${f.bound} (auto ${f.floor}-${f.ceiling}, ` +
    `baseline ${f.baseline_ms.toFixed(1)} ms, recent ${f.recent_ms.toFixed(1)} ms, ${f.why})`;
}

function tenants(l) {
  if (!l.tenant_count) return "";
  const shown = (l.tenants || []).map(t =>
    `${t.key}${t.priority && t.priority !== 3 ? " p" + t.priority : ""} ${(100 * t.share).toFixed(0)}%` +
    (t.waiting > 0 ? ` (${t.waiting} waiting)` : ""));
  const more = l.tenant_count > shown.length ? `, ${l.tenant_count - shown.length} more` : "";
  return `; ${l.tenant_count} keys sharing: ${shown.join(", ")}${more}`;
}

// levels says which priorities have turns booked on a limit's shared bucket
// now (docs/priorities.md): each one's part of the rate and its jobs waiting.
function levels(l) {
  if (!l.levels || !l.levels.length) return "";
  return "; priorities " + l.levels.map(p =>
    `${p.priority}: ${(100 * p.share).toFixed(0)}%` + (p.waiting > 0 ? ` (${p.waiting} waiting)` : "")).join(", ");
}

function draw(st) {
  document.getElementById("status").textContent = "updated " + new Date(st.time).toLocaleTimeString();
  const errors = document.getElementById("errors");
  errors.hidden = !(st.errors && st.errors.length);
  errors.textContent = (st.errors || []).join("; ");

  fill("limits", st.limits.map(l => {
    const name = l.limit ? `${l.type} (${l.limit})` : l.type; // one row per named limit
    const h = history.get(name) || [];
    h.push(l.grants_per_s);
    while (h.length > keep) h.shift();
    history.set(name, h);
    const tokens = l.keyed ? "per key" : (l.tokens === undefined ? "-" : l.tokens);
    const cool = el("td", l.cooldown_s > 0 ? { class: "cooling" } : {}, seconds(l.cooldown_s));
    return el("tr", { "data-type": l.type },
      el("td", {}, name),
      el("td", {}, spark(h, l.effective_why ? l.effective_per_s : l.rate_per_s),
        ` ${l.grants_per_s.toFixed(1)} of ${(l.effective_why ? l.effective_per_s : l.rate_per_s).toFixed(1)}` +
        (l.effective_why && l.effective_why !== "ceiling" ? ` (ceiling ${l.rate_per_s.toFixed(1)}, ${l.effective_why})` : "") +
        (l.keyed ? " per key" : "") + tenants(l) + levels(l) + inFlight(l)),
      el("td", { class: "num" }, tokens), cool,
      el("td", { class: "num" }, `${l.waiting}` + byPriority(l.waiting_by_priority)),
      el("td", { class: "num" }, l.queued === undefined ? "-" : `${l.queued} (${(l.queues || []).join(", ")})` + byPriority(l.queued_by_priority)),
      el("td", {}, l.spec),
      el("td", {}, l.source + (l.set_by ? ` (${l.set_by})` : "")),
      el("td", { class: "num" }, l.workers + (l.conflict ? " (specs differ)" : "")));
  }));
  fill("workers", st.workers.map(w => el("tr", {},
    el("td", {}, w.host), el("td", { class: "num" }, w.pid),
    el("td", { class: "mode-" + w.mode }, w.mode),
    el("td", {}, (w.limits || []).map(l => `${l.spec} (${l.source})`).join("; ")),
    el("td", { class: "num" }, w.active), el("td", { class: "num" }, w.waiting), el("td", { class: "num" }, w.processed),
    el("td", { class: "num" + (w.cooldowns > 0 ? " cooling" : "") }, w.cooldowns),
    el("td", {}, ago(w.seen)))));
  fill("queues", st.queues.map(q => el("tr", {},
    el("td", {}, q.name), el("td", { class: "num" }, q.pending), el("td", { class: "num" }, q.scheduled),
    el("td", { class: "num" }, q.retry), el("td", { class: "num" }, q.active), el("td", { class: "num" }, q.archived),
    el("td", {}, byPriority(q.by_priority).replace(/^ \((.*)\)$/, "$1")))));

  document.getElementById("readonly").hidden = st.writable;
  document.querySelectorAll("#actions form").forEach(f => {
    f.querySelectorAll("input, button").forEach(i => { i.disabled = !st.writable; });
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

async function act(form) {
  const token = document.querySelector("#auth input[name=token]").value;
  sessionStorage.setItem("sluice-token", token);
  const body = { op: form.dataset.op };
  new FormData(form).forEach((v, k) => { if (v !== "") body[k] = v; });
  const result = document.getElementById("result");
  try {
    const r = await fetch("api/action", {
      method: "POST",
      headers: { "Content-Type": "application/json", "Authorization": "Bearer " + token },
      body: JSON.stringify(body),
    });
    const out = await r.json();
    result.textContent = r.ok ? out.ok : "refused: " + out.error;
  } catch (e) {
    result.textContent = "failed: " + e.message;
  }
  refresh();
}

document.addEventListener("DOMContentLoaded", () => {
  document.querySelector("#auth input[name=token]").value = sessionStorage.getItem("sluice-token") || "";
  document.querySelectorAll("#actions form[data-op]").forEach(f => {
    f.addEventListener("submit", e => { e.preventDefault(); act(f); });
  });
  refresh();
  setInterval(refresh, 1000);
});

// byPriority says " (p1 2, p5 8)" of counts by job priority, "" when there
// are none or all are of the default priority, 3.
function byPriority(m) {
  const ps = Object.keys(m || {}).filter(p => m[p] > 0).sort();
  if (ps.length === 0 || (ps.length === 1 && ps[0] === "3")) return "";
  return " (" + ps.map(p => `p${p} ${m[p]}`).join(", ") + ")";
}
