// Building the page without innerHTML: every value from the API becomes a
// text node or an attribute, never markup.

const SVG_NS = 'http://www.w3.org/2000/svg';

function fill(el, attrs, children) {
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// An HTML element: h('td', {class: 'x'}, 'text', child).
export function h(tag, attrs, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

// An SVG element.
export function svg(tag, attrs, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

export function bytes(n) {
  if (n === null || n === undefined) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i += 1; }
  return `${n.toFixed(i ? 1 : 0)} ${units[i]}`;
}

// Seconds since the epoch of a time the API gives (a number of seconds, or
// an RFC 3339 string).
export function secs(t) {
  if (t === null || t === undefined || t === '') return null;
  return typeof t === 'number' ? t : Date.parse(t) / 1000;
}

export function time(t) {
  const unixSeconds = secs(t);
  if (!unixSeconds) return '—';
  return new Date(unixSeconds * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function ago(t) {
  const unixSeconds = secs(t);
  if (!unixSeconds) return '—';
  const s = Math.max(0, Math.round(Date.now() / 1000 - unixSeconds));
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}

// The last part of an ARN (an image's name).
export function shortArn(arn) {
  if (!arn) return '—';
  const cut = arn.lastIndexOf('/');
  return cut >= 0 ? arn.slice(cut + 1) : arn;
}

export function stateBadge(state) {
  return h('span', { class: `state state-${String(state).toLowerCase()}` }, state);
}
