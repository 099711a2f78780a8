// Cost: the estimate of what the running sandboxes cost (free to compute),
// and the billed cost when Cost Explorer answers.

import { h } from '../dom.js';

function money(v, currency) {
  return v === null || v === undefined ? '—' : `${Number(v).toFixed(4)} ${currency || 'USD'}`;
}

function section(title, value) {
  if (value === null || value === undefined) return h('section', { class: 'card' }, h('h2', {}, title), h('p', { class: 'muted' }, 'Not available.'));
  const rows = Object.entries(value).filter(([, v]) => typeof v !== 'object' || v === null);
  const lists = Object.entries(value).filter(([, v]) => Array.isArray(v));
  return h('section', { class: 'card' }, h('h2', {}, title),
    h('dl', { class: 'facts' }, rows.map(([k, v]) => [h('dt', {}, k.replaceAll('_', ' ')), h('dd', {}, /usd|cost|amount/.test(k) ? money(v) : String(v))])),
    lists.map(([k, list]) => h('table', { class: 'grid', 'data-list': k },
      h('tbody', {}, list.map((item) => h('tr', {}, Object.values(item).map((v) => h('td', {}, typeof v === 'object' ? JSON.stringify(v) : String(v)))))))));
}

export default function cost({ api, root }) {
  const out = h('div', { id: 'cost' });
  root.append(h('h1', {}, 'Cost'), out);
  async function refresh() {
    const r = await api.get('/cost');
    out.replaceChildren(
      h('p', { class: 'muted' }, `Period: ${r.period ? JSON.stringify(r.period) : '—'} · ${r.currency || 'USD'}`),
      section('Estimated', r.estimated),
      section('Billed (Cost Explorer)', r.billed));
  }
  return { live: false, refresh };
}
