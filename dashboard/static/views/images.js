// Images and their versions, newest first.

import { h, time, stateBadge } from '../dom.js';

export default function images({ api, root }) {
  const list = h('div', { id: 'images' });
  root.append(h('h1', {}, 'Images'), list);
  async function refresh() {
    const all = await api.get('/images');
    if (all.length === 0) {
      list.replaceChildren(h('p', { class: 'muted' }, 'No images.'));
      return;
    }
    list.replaceChildren(...all.map((img) => h('section', { class: 'card', 'data-image': img.name },
      h('h2', {}, img.name, ' ', stateBadge(img.state || '')),
      h('p', { class: 'mono small muted' }, img.image_arn || ''),
      h('table', { class: 'grid' },
        h('thead', {}, h('tr', {}, h('th', {}, 'Version'), h('th', {}, 'State'), h('th', {}, 'Memory'), h('th', {}, 'Created'))),
        h('tbody', {}, (img.versions || []).map((v) => h('tr', {},
          h('td', {}, v.version), h('td', {}, stateBadge(v.state || '')),
          h('td', {}, v.memory_mib ? `${v.memory_mib} MiB` : '—'), h('td', {}, time(v.created_at)))))))));
  }
  return { live: false, refresh };
}
