// The fleet: every sandbox with its live state, filters by state and
// image, and (with --allow-actions) bulk actions: a dry-run plan shown
// first, run only once its confirmation is typed back.

import { h, ago, time, shortArn, stateBadge } from '../dom.js';

const STATES = ['', 'PENDING', 'RUNNING', 'SUSPENDING', 'SUSPENDED', 'TERMINATING', 'TERMINATED'];
const ACTIONS = [
  ['kill', 'Kill'],
  ['pause', 'Pause'],
  ['resume', 'Resume'],
  ['set_timeout', 'Set timeout'],
];

export default function fleet({ api, meta, root }) {
  const selected = new Set();
  const state = h('select', { id: 'filter-state' }, STATES.map((s) => h('option', { value: s }, s || 'any state')));
  const image = h('input', { id: 'filter-image', type: 'search', placeholder: 'image name or ARN' });
  const count = h('span', { class: 'muted', id: 'fleet-count' });
  const body = h('tbody', { id: 'fleet-rows' });
  const table = h('table', { class: 'grid', id: 'fleet-table' },
    h('thead', {}, h('tr', {},
      h('th', {}, ''), h('th', {}, 'Sandbox'), h('th', {}, 'State'), h('th', {}, 'Image'),
      h('th', {}, 'Version'), h('th', {}, 'Started'), h('th', {}, 'Memory'), h('th', {}, 'Metadata'))),
    body);
  let refreshNow = () => {};
  state.addEventListener('change', () => refreshNow());
  image.addEventListener('change', () => refreshNow());

  root.append(
    h('h1', {}, 'Fleet'),
    h('div', { class: 'toolbar' }, h('label', {}, 'State ', state), h('label', {}, 'Image ', image), count),
    table,
    actionsPanel(),
  );

  function actionsPanel() {
    if (!meta.allow_actions) {
      return h('p', { class: 'muted', id: 'actions-disabled' },
        'Actions are disabled: start the dashboard with --allow-actions to kill, pause, resume or set timeouts.');
    }
    const action = h('select', { id: 'action' }, ACTIONS.map(([v, l]) => h('option', { value: v }, l)));
    const timeout = h('input', { id: 'action-timeout', type: 'number', min: '1', value: '300', class: 'narrow' });
    const planButton = h('button', { id: 'plan', type: 'button' }, 'Plan');
    const out = h('div', { id: 'plan-out' });
    planButton.addEventListener('click', async () => {
      out.replaceChildren(h('p', { class: 'muted' }, 'Planning…'));
      const request = { action: action.value };
      if (action.value === 'set_timeout') request.timeout_seconds = Number(timeout.value);
      if (selected.size) request.ids = [...selected];
      else {
        if (state.value) request.states = [state.value];
        if (image.value) request.image = image.value;
      }
      try {
        showPlan(out, await api.post('/actions/plan', request));
      } catch (e) {
        out.replaceChildren(h('p', { class: 'error' }, `${e.code}: ${e.message}`));
      }
    });
    return h('section', { class: 'actions' },
      h('h2', {}, 'Bulk action'),
      h('p', { class: 'muted' }, 'On the selected sandboxes, or on those the filters show when none is selected. A plan comes first; nothing happens until it is confirmed.'),
      h('div', { class: 'toolbar' }, h('label', {}, 'Action ', action), h('label', {}, 'Timeout (s) ', timeout), planButton),
      out);
  }

  function showPlan(out, plan) {
    const acting = plan.targets.filter((t) => t.will === 'act').length;
    const typed = h('input', { id: 'confirmation', type: 'text', autocomplete: 'off', spellcheck: 'false' });
    const confirm = h('button', { id: 'confirm', type: 'button', class: 'danger', disabled: true }, 'Confirm');
    const cancel = h('button', { id: 'cancel', type: 'button' }, 'Cancel');
    typed.addEventListener('input', () => { confirm.disabled = typed.value !== plan.confirmation; });
    cancel.addEventListener('click', () => out.replaceChildren());
    confirm.addEventListener('click', async () => {
      confirm.disabled = true;
      try {
        const outcome = await api.post('/actions/run', { plan_id: plan.plan_id, confirmation: typed.value });
        out.replaceChildren(outcomeTable(outcome));
        refreshNow();
      } catch (e) {
        out.append(h('p', { class: 'error' }, `${e.code}: ${e.message}`));
      }
    });
    out.replaceChildren(
      h('div', { id: 'plan-view', class: 'plan' },
        h('h3', {}, `Plan: ${plan.action} — ${acting} of ${plan.targets.length} will act`),
        h('table', { class: 'grid' },
          h('thead', {}, h('tr', {}, h('th', {}, 'Sandbox'), h('th', {}, 'State'), h('th', {}, 'Will'), h('th', {}, 'Why'))),
          h('tbody', {}, plan.targets.map((t) => h('tr', { 'data-plan-target': t.sandbox_id, class: `will-${t.will}` },
            h('td', { class: 'mono' }, t.sandbox_id), h('td', {}, stateBadge(t.state)), h('td', {}, t.will), h('td', {}, t.reason || ''))))),
        h('p', {}, 'Type ', h('code', { id: 'confirmation-text' }, plan.confirmation), ' to confirm:'),
        h('div', { class: 'toolbar' }, typed, confirm, cancel)));
  }

  function outcomeTable(outcome) {
    return h('div', { id: 'outcome' },
      h('h3', {}, 'Done'),
      h('table', { class: 'grid' },
        h('tbody', {}, outcome.results.map((r) => h('tr', { 'data-result': r.sandbox_id },
          h('td', { class: 'mono' }, r.sandbox_id), h('td', {}, r.ok ? (r.changed ? 'done' : 'unchanged') : `failed (${r.error_kind}): ${r.message || ''}`))))));
  }

  function row(s) {
    const box = h('input', { type: 'checkbox', 'data-select': s.sandbox_id, checked: selected.has(s.sandbox_id) });
    box.addEventListener('change', () => { if (box.checked) selected.add(s.sandbox_id); else selected.delete(s.sandbox_id); });
    const meta = Object.entries(s.metadata || {}).map(([k, v]) => `${k}=${v}`).join(' ');
    return h('tr', { 'data-sandbox-id': s.sandbox_id, 'data-state': s.state },
      h('td', {}, box),
      h('td', { class: 'mono' }, h('a', { href: `#/sandbox/${encodeURIComponent(s.sandbox_id)}` }, s.sandbox_id)),
      h('td', {}, stateBadge(s.state)),
      h('td', { title: s.image || '' }, s.image_name || shortArn(s.image)),
      h('td', {}, s.version || '—'),
      h('td', { title: time(s.started_at) }, ago(s.started_at)),
      h('td', {}, s.memory_mib ? `${s.memory_mib} MiB` : '—'),
      h('td', { class: 'mono small' }, meta));
  }

  // The rows are redrawn only when the fleet changed, so a click or a
  // selection is never lost to a poll.
  let shown = null;
  async function refresh() {
    const rows = await api.get('/sandboxes', { state: state.value, image: image.value });
    const signature = JSON.stringify(rows);
    if (signature === shown) return;
    shown = signature;
    body.replaceChildren(...rows.map(row));
    count.replaceChildren(`${rows.length} sandbox${rows.length === 1 ? '' : 'es'}`);
  }
  refreshNow = () => refresh().catch(() => {});
  return { live: true, refresh };
}
