// Cost: the estimate of what the counted sandboxes cost now (free to
// compute), and Cost Explorer's bill of the month when asked (paid: $0.01 a
// request, cached by the dashboard).

import { h, time } from '../dom.js';

const usd = (v) => (v === null || v === undefined ? '—' : `$${Number(v).toFixed(4)}`);

export default function cost({ api, root }) {
  const estimated = h('section', { class: 'card', id: 'cost-estimated' });
  const billed = h('section', { class: 'card', id: 'cost-billed' });
  let askBill = false;
  const billButton = h('button', { type: 'button', id: 'read-bill' }, 'Read the bill (Cost Explorer, $0.01 a request)');
  root.append(h('h1', {}, 'Cost'), estimated, billed);

  function drawEstimate(e) {
    estimated.replaceChildren(
      h('h2', {}, 'Estimated now: ', h('span', { id: 'cost-total' }, usd(e.total_usd))),
      h('p', { class: 'muted small' }, `${e.basis} · prices of ${e.pricing_region} (${e.source})`),
      h('table', { class: 'grid' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Sandbox'), h('th', {}, 'State'), h('th', {}, 'Memory'), h('th', {}, 'Active'), h('th', {}, 'Cost'))),
        h('tbody', {}, e.items.map((i) => h('tr', { 'data-cost-sandbox': i.sandbox_id },
          h('td', { class: 'mono' }, i.sandbox_id), h('td', {}, i.state),
          h('td', {}, i.memory_mib ? `${i.memory_mib} MiB` : '—'),
          h('td', {}, i.active_seconds === null || i.active_seconds === undefined ? '—' : `${Math.round(i.active_seconds)} s`),
          h('td', {}, usd(i.cost_usd)))))));
  }

  function drawBill(r) {
    const b = r.billed;
    if (!b) {
      billed.replaceChildren(h('h2', {}, 'Billed'), h('p', { class: 'muted' }, r.billed_unavailable || 'Not read.'), billButton);
      return;
    }
    billed.replaceChildren(
      h('h2', {}, `Billed ${b.start} to ${b.end}: ${usd(b.total_usd)}${b.partial ? ' (partial: AWS may still revise it)' : ''}`),
      h('p', { class: 'muted small' }, `read ${time(b.fetched_at)} · ${b.requests} paid request(s)`),
      h('table', { class: 'grid' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Usage type'), h('th', {}, 'Component'), h('th', {}, 'Quantity'), h('th', {}, 'Cost'))),
        h('tbody', {}, b.lines.map((l) => h('tr', {},
          h('td', { class: 'mono small' }, l.usage_type), h('td', {}, l.component),
          h('td', {}, `${l.quantity.toFixed(2)} ${l.unit}`), h('td', {}, usd(l.cost_usd)))))));
  }

  async function refresh() {
    const r = await api.get('/cost', { billed: askBill ? '1' : '' });
    root.querySelector('h1').replaceChildren(`Cost (${r.period.start} to ${r.period.end}, ${r.currency})`);
    drawEstimate(r.estimated);
    drawBill(r);
  }
  billButton.addEventListener('click', () => { askBill = true; refresh().catch(() => {}); });
  return { live: false, refresh };
}
