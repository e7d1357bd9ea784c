// Small DOM helpers, number formatting and the kind chip and legend shared by every view.
import { kinds, kindColor, kindLabel } from './kinds.js';

/** Create an element: h('div', {class: 'x', onclick: fn}, 'text', child, [more]). */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

const SVG_NS = 'http://www.w3.org/2000/svg';
/** Create an SVG element. */
export function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  setAttrs(el, attrs);
  append(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'style' && typeof v === 'object') {
      for (const [sk, sv] of Object.entries(v)) {
        if (sk.startsWith('--')) el.style.setProperty(sk, sv); else el.style[sk] = sv;
      }
    }
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'text') el.textContent = v;
    else if (k === 'html') el.innerHTML = v;
    else if (k === 'value' && 'value' in el && el.namespaceURI !== SVG_NS) el.value = v;
    else if (k === 'checked' || k === 'selected' || k === 'disabled') el[k] = !!v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** Append children like h() does: arrays flattened, null/false/undefined skipped. */
export function put(el, ...children) { append(el, children); return el; }

export function clear(el) { while (el.firstChild) el.firstChild.remove(); return el; }

/** Format a statistic: '—' for none, thousands for integers, 4-5 significant digits otherwise. */
export function fmt(v, digits = 5) {
  if (v === null || v === undefined) return '—';
  if (typeof v === 'string') return v === 'Inf' ? '+Inf' : v;
  if (typeof v === 'boolean') return v ? 'true' : 'false';
  if (Number.isInteger(v) && Math.abs(v) < 1e15) return v.toLocaleString('en-US');
  if (v === 0) return '0';
  const a = Math.abs(v);
  if (a < 1e-3 || a >= 1e6) return parseFloat(v.toPrecision(Math.max(1, digits - 1))).toExponential().replace('e+', 'e');
  return String(parseFloat(v.toPrecision(digits)));
}

export function fmtBytes(n) {
  if (n === null || n === undefined) return '—';
  const u = ['B', 'KB', 'MB', 'GB', 'TB'];
  let i = 0;
  while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(n < 10 ? 1 : 0) : n} ${u[i]}`;
}

export function shape(sh) { return sh ? `[${sh.join(', ')}]` : '—'; }

export function kindChip(kind) {
  return h('span', { class: 'chip kind', style: { background: kindColor(kind) } }, kindLabel(kind));
}

/** A kind's colour swatch followed by its name. */
export function kindSwatch(kind) {
  return h('span', {}, h('i', { style: { background: kindColor(kind) } }), kindLabel(kind));
}

export function legend(list = kinds()) {
  return h('div', { class: 'legend' }, list.map(kindSwatch));
}

/** The small coloured dot before a node or tensor name. */
export function kindDot(kind) {
  return h('i', { class: 'kdot', style: { background: kindColor(kind) } });
}

export function debounce(fn, ms) {
  let t = null;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
}

export function toast(message, type = '') {
  const box = document.getElementById('toasts');
  const el = h('div', { class: `toast ${type}` }, message);
  box.append(el);
  setTimeout(() => el.remove(), type === 'error' ? 7000 : 3500);
  return el;
}

export function errorBox(e) {
  return h('div', { class: 'error-box' }, e && e.message ? e.message : String(e));
}

export function empty(title, text) {
  return h('div', { class: 'empty' }, h('b', {}, title), text || '');
}

/** The part of a full name after its scope. */
export function shortName(name) {
  const i = name.lastIndexOf('/');
  return i >= 0 ? name.slice(i + 1) : name;
}

export function basename(path) {
  const i = path.replace(/\\/g, '/').lastIndexOf('/');
  return i >= 0 ? path.slice(i + 1) : path;
}

/** A dump page's head: its name, its path and view buttons ([label, onclick, accent?] each). */
export function dumpHead(title, path, buttons) {
  return h('div', { class: 'ov-head' },
    h('div', {}, h('h1', {}, title), h('div', { class: 'mono muted' }, path)),
    h('div', { class: 'row' }, buttons.map(([label, onclick, accent]) =>
      h('button', { class: accent ? 'btn btn-accent' : 'btn', onclick }, label))));
}
