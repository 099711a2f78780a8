// The dashboard's page: a router over the hash (#/fleet, #/sandbox/<id>,
// #/images, #/quotas, #/cost), each view refreshed by polling while it is
// shown.

import * as api from './api.js';
import { h } from './dom.js';
import fleet from './views/fleet.js';
import sandbox from './views/sandbox.js';
import images from './views/images.js';
import quotas from './views/quotas.js';
import cost from './views/cost.js';

const routes = { fleet, sandbox, images, quotas, cost };
let meta = null;
// Each route change starts a new generation; an older view's timer stops.
let generation = 0;

function status(text, isError) {
  const el = document.getElementById('status');
  el.replaceChildren(text);
  el.className = isError ? 'error' : 'muted';
}

async function show() {
  generation += 1;
  const mine = generation;
  const parts = location.hash.replace(/^#\/?/, '').split('/');
  const name = routes[parts[0]] ? parts[0] : 'fleet';
  const arg = parts.length > 1 ? decodeURIComponent(parts.slice(1).join('/')) : null;
  for (const a of document.querySelectorAll('nav a')) {
    a.classList.toggle('active', a.dataset.nav === name);
  }
  const root = document.getElementById('view');
  root.replaceChildren();
  root.dataset.view = name;
  const view = routes[name]({ api, meta, arg, root });
  const tick = async () => {
    if (mine !== generation) return;
    try {
      await view.refresh();
      if (mine === generation) status(`Updated ${new Date().toLocaleTimeString()}`);
    } catch (e) {
      if (mine === generation) status(`${e.code || 'error'}: ${e.message}`, true);
    }
    if (view.live && mine === generation) setTimeout(tick, meta.poll_interval_ms);
  };
  await tick();
}

async function start() {
  try {
    meta = await api.get('/meta');
  } catch (e) {
    document.getElementById('view').replaceChildren(h('p', { class: 'error' }, `${e.code}: ${e.message}`));
    return;
  }
  const where = meta.backend === 'local' ? 'local backend' : `AWS ${meta.region || ''}`;
  document.getElementById('backend').replaceChildren(
    `${where} · actions ${meta.allow_actions ? 'enabled' : 'disabled'}`,
  );
  window.addEventListener('hashchange', show);
  if (!location.hash) history.replaceState(null, '', '#/fleet');
  await show();
}

start();
