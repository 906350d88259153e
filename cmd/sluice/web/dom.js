// The dashboard's elements and figures: building elements, patching the page
// in place (an update that changes nothing changes no element), numbers and
// times as the page writes them. Loaded before charts.js and app.js.
"use strict";

const SVG = "http://www.w3.org/2000/svg";

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
