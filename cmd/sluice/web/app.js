// The sluice dashboard. It takes the fleet's state from the server-sent
// events of /api/events (polling /api/state every second while the stream is
// silent), draws it, and patches the page in place: an update that changes
// nothing changes no element. Actions go to /api/preview, then, once the
// user confirms what it will do, to /api/action with the token the user
// typed (kept for this tab only). No library, nothing from elsewhere.
"use strict";

let last = null;                 // the state drawn last
let lastEvent = 0;               // when the stream last gave a state (Date.now)

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
  if (l.tenants.every(t => !t.weight)) return waitedKeys(l);
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

// waitedKeys lists the keys of a key template without fair shares whose
// jobs waited longest over the last minutes: no bucket knows their shares.
function waitedKeys(l) {
  return [
    el("h4", {}, "Keys whose jobs waited longest (last 5 min)"),
    el("div", { class: "scroll", tabindex: 0, role: "region", "aria-label": `keys of ${l.type}` },
      el("table", { class: "tenants" },
        el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "key"), el("th", { scope: "col" }, "longest wait"))),
        el("tbody", {}, l.tenants.map(t => el("tr", { class: "tenant", "data-key": t.key },
          el("th", { scope: "row" }, t.key),
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
