// The tensor pane's "Across ranks" card: one statistic of this tensor in every rank, per iteration
// (/api/band): a band with its outlier ranks named from 16 ranks on, one line per rank below.
import { api } from '../../api.js';
import { state, set } from '../../state.js';
import { put, h, clear, errorBox } from '../../dom.js';
import { lineChart } from '../../charts.js';
import { bandChart } from '../ranks/draw.js';

const STATS = ['mean', 'abs_mean', 'min', 'max', 'std', 'l2norm'];
const COLORS = ['#3b5bdb', '#e8590c', '#2f9e44', '#ae3ec9', '#1098ad', '#f08c00', '#c2255c', '#5c940d'];
const prefs = { stat: 'l2norm' };

/** The card, filled when the server answers; ``q`` names the tensor (dump, graph, node, io, slot). */
export function ranksCard(q, alive) {
  const card = h('div', { class: 'card span-2 ranks-band-card' });
  const draw = async () => {
    const statSel = h('select', { class: 'input band-stat', 'aria-label': 'statistic', onchange: (e) => { prefs.stat = e.target.value; draw(); } },
      STATS.map((k) => h('option', { value: k, selected: k === prefs.stat }, k.replace('_', ' '))));
    const body = h('div', { class: 'card-body' }, h('span', { class: 'muted' }, 'Loading…'));
    put(clear(card), h('div', { class: 'card-head' }, h('h2', {}, 'Across ranks'), h('span', { class: 'spacer' }), statSel), body);
    let b;
    try { b = await api.band({ dump: q.dump, graph: q.graph, node: q.node, io: q.io, slot: q.slot, stat: prefs.stat }); }
    catch (e) { if (alive()) put(clear(body), errorBox(e)); return; }
    if (!alive()) return;
    const open = (rank, iteration) => set({ rank, iteration });
    const width = Math.max(400, card.clientWidth - 34);
    put(clear(body), b.series
      ? lineChart(b.series.map((x, i) => ({ name: `rank ${x.rank}`, color: COLORS[i % COLORS.length], points: x.points.map(([px, y]) => ({ x: px, y })) })),
        { width, height: 220, marker: state.iteration, onPick: (x) => set({ iteration: x }) })
      : bandChart(b, { width, height: 240, marker: state.iteration, onRank: open, onPick: (x) => set({ iteration: x }) }),
    h('div', { class: 'muted small' }, b.outlier_count
      ? `${b.outlier_count} outlier rank${b.outlier_count === 1 ? '' : 's'}: ${b.outliers.map((o) => o.rank).join(', ')}${b.outlier_count > b.outliers.length ? ' …' : ''} (click one to open it)`
      : `${b.ranks} ranks, none outside the band`));
  };
  draw();
  return card;
}
