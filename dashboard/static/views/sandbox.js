// One sandbox: its state, its metrics over the last 15 minutes as SVG
// charts (CPU, memory, disk) redrawn on every poll, and its lifecycle
// events (when the events stack is deployed, or on the local backend).

import { h, bytes, time, shortArn, stateBadge } from '../dom.js';
import { lineChart } from '../charts.js';

export default function sandbox({ api, arg, root }) {
  const id = arg || '';
  const head = h('div', { id: 'sandbox-head' });
  const charts = h('div', { id: 'charts', class: 'charts' });
  const events = h('div', { id: 'events' });
  root.append(
    h('p', {}, h('a', { href: '#/fleet' }, '← Fleet')),
    h('h1', { class: 'mono' }, id),
    head,
    h('h2', {}, 'Metrics'),
    charts,
    h('h2', {}, 'Events'),
    events);

  function drawMetrics(m) {
    if (!m.available) {
      charts.replaceChildren(h('p', { class: 'muted', id: 'metrics-unavailable' }, m.reason || 'no metrics'));
      return;
    }
    const pts = m.points;
    const memTop = Math.max(...pts.map((p) => p.mem_total_bytes), 1);
    const diskTop = Math.max(...pts.map((p) => p.disk_total_bytes), 1);
    charts.replaceChildren(
      h('figure', {}, h('figcaption', {}, 'CPU %'),
        lineChart({ id: 'chart-cpu', title: 'CPU %', yMax: 100, series: [{ name: 'cpu', cls: 's1', points: pts.map((p) => [p.t, p.cpu_pct]) }], format: (v) => `${v.toFixed(0)}%` })),
      h('figure', {}, h('figcaption', {}, 'Memory used'),
        lineChart({ id: 'chart-mem', title: 'Memory used', yMax: memTop, series: [{ name: 'mem', cls: 's2', points: pts.map((p) => [p.t, p.mem_used_bytes]) }], format: bytes })),
      h('figure', {}, h('figcaption', {}, 'Disk used'),
        lineChart({ id: 'chart-disk', title: 'Disk used', yMax: diskTop, series: [{ name: 'disk', cls: 's3', points: pts.map((p) => [p.t, p.disk_used_bytes]) }], format: bytes })));
  }

  function drawEvents(list) {
    if (!list || list.length === 0) {
      events.replaceChildren(h('p', { class: 'muted' }, 'No events (the events stack keeps them on AWS; see docs/events.md).'));
      return;
    }
    events.replaceChildren(h('table', { class: 'grid', id: 'events-table' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Time'), h('th', {}, 'Type'), h('th', {}, 'Detail'))),
      h('tbody', {}, list.map((e) => h('tr', {},
        h('td', {}, time(e.timestamp)), h('td', {}, e.type), h('td', { class: 'mono small' }, e.detail || ''))))));
  }

  async function refresh() {
    const [info, metrics, evts] = await Promise.all([
      api.get(`/sandboxes/${encodeURIComponent(id)}`).catch((e) => ({ error: e })),
      api.get(`/sandboxes/${encodeURIComponent(id)}/metrics`),
      api.get(`/sandboxes/${encodeURIComponent(id)}/events`, { limit: 50 }).catch(() => []),
    ]);
    if (info.error) head.replaceChildren(h('p', { class: 'error' }, `${info.error.code}: ${info.error.message}`));
    else head.replaceChildren(h('dl', { class: 'facts' },
      h('dt', {}, 'State'), h('dd', { id: 'sandbox-state' }, stateBadge(info.state)),
      h('dt', {}, 'Image'), h('dd', { title: info.image }, `${shortArn(info.image)} (version ${info.version || '—'})`),
      h('dt', {}, 'Started'), h('dd', {}, time(info.started_at)),
      h('dt', {}, 'Ends by'), h('dd', {}, time(info.end_at))));
    drawMetrics(metrics);
    drawEvents(evts);
  }
  return { live: true, refresh };
}
