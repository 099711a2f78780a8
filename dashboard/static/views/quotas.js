// Quotas: the memory in use against its quota as a gauge with its level
// (ok, warning from 80 %, critical from 95 %), the warnings, and every
// quota with its applied value against the default.

import { h } from '../dom.js';
import { gauge } from '../charts.js';

export default function quotas({ api, root }) {
  const gauges = h('div', { id: 'quota-gauges' });
  const warnings = h('div', { id: 'quota-warnings' });
  const table = h('div', { id: 'quota-table' });
  root.append(h('h1', {}, 'Quotas'), gauges, warnings, table);
  async function refresh() {
    const r = await api.get('/quotas');
    const m = r.memory;
    gauges.replaceChildren(h('figure', {},
      h('figcaption', {}, `Memory in use (${r.region || 'local'})`),
      gauge({
        id: 'gauge-memory',
        label: 'Memory',
        fraction: m.fraction,
        level: m.level,
        text: `${m.allocated_gb.toFixed(1)} of ${m.quota_gb} GB (${(m.fraction * 100).toFixed(1)} %, ${m.level}) · ${m.sandboxes} sandboxes${m.unresolved ? `, ${m.unresolved} unresolved` : ''}`,
      })));
    warnings.replaceChildren(...r.warnings.map((w) => h('p', { class: `warning warning-${w.code}` },
      `${w.message} `, w.console_url ? h('a', { href: w.console_url, rel: 'noreferrer noopener', target: '_blank' }, 'console') : '')));
    table.replaceChildren(h('table', { class: 'grid' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Quota'), h('th', {}, 'Kind'), h('th', {}, 'Operation'), h('th', {}, 'Applied'), h('th', {}, 'Default'), h('th', {}, ''))),
      h('tbody', {}, r.entries.map((e) => h('tr', { 'data-quota': e.code },
        h('td', {}, e.name, h('div', { class: 'mono small muted' }, e.code)), h('td', {}, e.kind), h('td', {}, e.operation || ''),
        h('td', {}, e.value === null || e.value === undefined ? '—' : e.value), h('td', {}, e.default),
        h('td', {}, e.adjustable && e.increase_url ? h('a', { href: e.increase_url, rel: 'noreferrer noopener', target: '_blank' }, 'request increase') : ''))))));
  }
  return { live: true, refresh };
}
