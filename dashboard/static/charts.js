// Charts drawn as SVG by the page: a time series of one or more lines, and
// a gauge with its warning (0.8) and critical (0.95) marks.

import { svg } from './dom.js';

const W = 560;
const H = 180;
const PAD = { left: 66, right: 12, top: 12, bottom: 28 };

// series: [{name, cls, points: [[t, v], ...]}]; yMax: the top of the axis
// (else the largest value); format: v => label.
export function lineChart({ id, title, series, yMax, format }) {
  const all = series.flatMap((s) => s.points);
  const fmt = format || ((v) => v.toFixed(1));
  const root = svg('svg', {
    id,
    class: 'chart',
    viewBox: `0 0 ${W} ${H}`,
    role: 'img',
    'aria-label': title,
    'data-points': all.length,
  });
  root.append(svg('title', {}, title));
  if (all.length === 0) {
    root.append(svg('text', { x: W / 2, y: H / 2, 'text-anchor': 'middle', class: 'chart-empty' }, 'no samples yet'));
    return root;
  }
  const t0 = Math.min(...all.map((p) => p[0]));
  const t1 = Math.max(...all.map((p) => p[0]));
  const top = yMax || Math.max(...all.map((p) => p[1]), 1e-9);
  const x = (t) => PAD.left + (t1 === t0 ? 0.5 : (t - t0) / (t1 - t0)) * (W - PAD.left - PAD.right);
  const y = (v) => H - PAD.bottom - Math.min(v / top, 1) * (H - PAD.top - PAD.bottom);
  // Axes and three horizontal guides.
  for (const f of [0, 0.5, 1]) {
    root.append(
      svg('line', { x1: PAD.left, x2: W - PAD.right, y1: y(top * f), y2: y(top * f), class: 'guide' }),
      svg('text', { x: PAD.left - 6, y: y(top * f) + 4, 'text-anchor': 'end', class: 'axis' }, fmt(top * f)),
    );
  }
  const clock = (t) => new Date(t * 1000).toISOString().slice(11, 19);
  root.append(
    svg('text', { x: PAD.left, y: H - 8, class: 'axis' }, clock(t0)),
    svg('text', { x: W - PAD.right, y: H - 8, 'text-anchor': 'end', class: 'axis' }, clock(t1)),
  );
  for (const s of series) {
    const pts = s.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(' ');
    root.append(svg('polyline', { points: pts, class: `line ${s.cls || ''}`, 'data-series': s.name }));
    const last = s.points[s.points.length - 1];
    if (last) root.append(svg('circle', { cx: x(last[0]), cy: y(last[1]), r: 3, class: `dot ${s.cls || ''}` }));
  }
  return root;
}

// A horizontal gauge of `fraction` (0..1) with the level's color and the
// 0.8 / 0.95 marks.
export function gauge({ id, label, fraction, level, text }) {
  const gw = 320;
  const gh = 28;
  const f = Math.max(0, Math.min(1, fraction || 0));
  const root = svg('svg', {
    id,
    class: `gauge level-${level || 'ok'}`,
    viewBox: `0 0 ${gw} ${gh + 18}`,
    role: 'img',
    'aria-label': `${label}: ${text}`,
    'data-level': level || 'ok',
  });
  root.append(
    svg('title', {}, `${label}: ${text}`),
    svg('rect', { x: 0, y: 0, width: gw, height: gh, rx: 4, class: 'gauge-track' }),
    svg('rect', { x: 0, y: 0, width: (gw * f).toFixed(1), height: gh, rx: 4, class: 'gauge-fill' }),
  );
  for (const mark of [0.8, 0.95]) {
    root.append(svg('line', { x1: gw * mark, x2: gw * mark, y1: 0, y2: gh, class: 'gauge-mark' }));
  }
  root.append(svg('text', { x: 4, y: gh + 14, class: 'axis' }, text));
  return root;
}
