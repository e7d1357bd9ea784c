// Trends pane: a rank's per-step series over the whole run (issue 25): the loss with its spikes marked
// (a click lists the spike's ranked causes and links the nearest deep capture in the graph view), a
// tensors x steps heatmap of any statistic, and one tensor's curve. Every chart shows one shared step
// range: drag across a chart or turn the wheel to zoom, and each asks the server again for that range.
// ``refresh()`` re-reads the series (new steps of a followed run) and redraws what is shown.
import { api } from '../api.js';
import { state, set, hashOf } from '../state.js';
import { h, put, clear, fmt, errorBox } from '../dom.js';
import { curveChart, heatCanvas } from './trends/draw.js';
import { clampRange, deepTarget, isWhole, wheelZoom } from './trends/state.js';

let mounted = null;
const LIVE_MS = 1000;     // a followed run: its new steps are drawn within about a second of their segment


/** Re-read the mounted trends view's series and redraw it (a no-op when the view is not shown). */
export function refresh() { return mounted ? mounted.refresh() : Promise.resolve(); }

export function mount(root) {
  const view = new TrendsView(root);
  const timer = setInterval(() => view.follow(), LIVE_MS);
  // a window made narrower or wider: the charts are drawn again at the new width
  const resized = new ResizeObserver(() => { if (view.cat && view.width() !== view.drawnWidth) view.drawAll(); });
  resized.observe(root);
  const handle = {
    refresh: () => view.load(),
    update(changed) { if (changed.has('dump') || changed.has('rank')) view.reset(); },
    destroy() { if (mounted === handle) mounted = null; view.seq++; clearInterval(timer); resized.disconnect(); },
  };
  mounted = handle;
  view.load();
  return handle;
}

class TrendsView {
  constructor(root) {
    Object.assign(this, { root, cat: null, range: null, tensor: null, stat: 'l2norm', log: false, scalar: 'loss', spikes: null, spike: null,
      heat: { stat: 'l2norm', role: 'gradient', agg: 'max', log: true }, seq: 0 });
    this.page = put(root, h('div', { class: 'page trends' })).lastChild;
    this.cards = { head: h('div', { class: 'trends-head' }), loss: h('div', { class: 'card-body trends-loss' }),
      causes: h('div', { class: 'spike-causes' }), heat: h('div', { class: 'card-body trends-heatmap' }), curve: h('div', { class: 'card-body trends-curve' }) };
    this.bars = { loss: h('span', { class: 'trends-tools' }), heat: h('span', { class: 'trends-tools' }), curve: h('span', { class: 'trends-tools' }) };
  }

  // the card's inner width (the page's less its padding and the card's): the charts fill it, up to 1,800 px
  width() { return Math.max(560, Math.min(1800, (this.page.clientWidth || 1080) - 82)); }

  reset() { this.range = null; this.spike = null; clear(this.page); this.load(); }

  // A run still being written: when the series has new steps, read it again (the zoom is kept).
  async follow() {
    if (!this.cat || !this.cat.available || this.following || document.hidden) return;
    this.following = true;
    try {
      const cat = await api.series(state.dump, state.rank);
      const was = this.cat.steps;
      if (cat.available && (cat.steps.last !== was.last || cat.steps.count !== was.count)) await this.load();
    } catch (e) { /* the next look tries again; load() shows lasting errors */ } finally { this.following = false; }
  }

  async load() {
    const my = ++this.seq;
    try {
      const cat = await api.series(state.dump, state.rank);
      if (my !== this.seq) return;
      if (!cat.available) { this.cat = cat; put(clear(this.page), h('div', { class: 'note trends-none' }, cat.message)); return; }
      const spikes = await api.seriesSpikes(state.dump, state.rank).catch((e) => ({ available: false, spikes: [], message: e.message }));
      if (my !== this.seq) return;
      this.cat = cat; this.spikes = spikes;
      if (!cat.tensors.some((x) => x.name === this.tensor)) this.tensor = firstOf(cat.tensors);
      if (this.heat.role !== 'all' && !rolesOf(cat).includes(this.heat.role)) this.heat.role = rolesOf(cat)[0] || 'all';
      if (this.spike) this.spike = spikes.spikes.find((x) => x.step === this.spike.step) || null;
      if (!this.page.querySelector('.trends-head')) this.layout();
      this.tools();
      await this.drawAll();
    } catch (e) { if (my === this.seq) put(clear(this.page), errorBox(e)); }
  }

  layout() {
    const card = (title, note, bar, ...bodies) => h('div', { class: 'card' },
      h('div', { class: 'card-head' }, h('h2', {}, title), note ? h('span', { class: 'muted' }, note) : null, h('span', { class: 'spacer' }), bar), ...bodies);
    const c = this.cards;
    put(clear(this.page), c.head, card('Loss', null, this.bars.loss, c.loss, c.causes),
      card('Heatmap', 'tensors by layer × steps', this.bars.heat, c.heat), card('Curve', null, this.bars.curve, c.curve));
  }

  // The shared range and the run's ends: zoom by drag (a range) or wheel (a factor at a step).
  ends() { return [this.cat.steps.first, this.cat.steps.last]; }
  zoomTo(r) { this.range = r ? clampRange(r, ...this.ends()) : null; this.drawAll(); }
  wheel(at, factor) {
    const [first, last] = this.ends();
    this.zoomTo(wheelZoom(this.range || { start: first, stop: last }, at, factor, first, last));
  }
  params() { return this.range ? { start: this.range.start, stop: this.range.stop } : {}; }
  zoomOpts() { return { onZoom: (r) => this.zoomTo(r), onWheel: (at, f) => this.wheel(at, f), onSpike: (sp) => this.pickSpike(sp), selected: this.spike }; }

  head() {
    const [first, last] = this.ends();
    const r = this.range || { start: first, stop: last };
    put(clear(this.cards.head), h('b', {}, `Rank ${state.rank}: ${fmt(this.cat.steps.count)} steps`),
      h('span', { class: 'muted trends-range' }, ` showing steps ${fmt(r.start)}–${fmt(r.stop)} of ${fmt(first)}–${fmt(last)} · drag across a chart or turn the wheel to zoom `),
      h('button', { class: 'btn btn-small trends-reset', disabled: isWhole(this.range, first, last), onclick: () => this.zoomTo(null) }, 'Whole run'),
      this.cat.warnings.length ? h('ul', { class: 'warn-list' }, this.cat.warnings.map((w) => h('li', { class: 'small mono' }, w))) : null);
  }

  async drawAll() {
    if (!this.cat || !this.cat.available) return;
    this.drawnWidth = this.width();
    this.head();
    await Promise.all([this.drawLoss(), this.drawHeat(), this.drawCurve()]);
    this.page.dataset.drawn = String((Number(this.page.dataset.drawn) || 0) + 1);
  }

  async drawLoss() {
    const my = this.seq;
    try {
      const r = await api.seriesScalars({ dump: state.dump, rank: state.rank, points: this.width(), ...this.params() });
      if (my !== this.seq) return;
      const c = r.scalars[this.scalar];
      const spikes = this.scalar === 'loss' && this.spikes.available ? this.spikes.spikes : [];
      put(clear(this.cards.loss), c.known ? curveChart(c, { width: this.width(), height: 200, spikes, label: this.scalar, ...this.zoomOpts() })
        : h('div', { class: 'note' }, `This run recorded no ${this.scalar}.`), this.spikeNote());
      this.causes();
    } catch (e) { put(clear(this.cards.loss), errorBox(e)); }
  }

  spikeNote() {
    if (this.scalar !== 'loss') return null;
    if (!this.spikes.available) return h('div', { class: 'muted small' }, `Spikes: ${this.spikes.message}.`);
    const n = this.spikes.spikes.length;
    return h('div', { class: 'muted small trends-spike-count' }, n ? `${n} loss spike${n === 1 ? '' : 's'} found: click a marker for its causes.`
      : 'No loss spike found in this run.');
  }

  pickSpike(sp) { this.spike = sp; this.drawLoss(); this.drawCurve(); }

  causes() {
    const sp = this.spike;
    if (!sp) { clear(this.cards.causes); return; }
    put(clear(this.cards.causes), h('div', { class: 'spike-head' },
      h('b', {}, `Loss spike at step ${fmt(sp.step)}`), ` loss ${fmt(sp.loss)}, baseline ${fmt(sp.baseline)}, z ${fmt(sp.z, 3)} `,
      h('span', { class: 'spacer' }), deepLink(sp), h('button', { class: 'btn btn-small', onclick: () => this.pickSpike(null) }, 'Close')),
    sp.causes.length ? this.causeTable(sp) : h('div', { class: 'note' }, 'No tensor departed from its own recent behaviour before this spike.'));
  }

  causeTable(sp) {
    const cols = ['#', 'tensor', 'role', 'statistic', 'first moved', 'lead', 'score', 'layer', 'code', ''];
    const row = (c, i) => h('tr', { class: 'clickable cause-row', 'data-tensor': c.tensor, title: 'click: its curve below', onclick: () => this.showCause(c) },
      h('td', { class: 'num' }, i + 1), h('td', { class: 'mono' }, c.tensor),
      h('td', {}, c.role, c.outside_optimizer ? h('span', { class: 'chip hit outside-optimizer', title: 'its update is far larger than its gradient and learning rate explain: the weight was changed outside the optimizer' }, 'outside the optimizer') : null), h('td', {}, c.stat),
      h('td', { class: 'num' }, fmt(c.first_step)), h('td', { class: 'num' }, `${fmt(c.lead)} steps`), h('td', { class: 'num' }, fmt(c.score, 3)),
      h('td', { class: 'mono' }, c.layer || '—'), h('td', { class: 'mono small' }, c.source || '—'), h('td', {}, graphLink(sp, c, 'graph', 'cause-graph')));
    return h('table', { class: 'tbl cause-table' }, h('thead', {}, h('tr', {}, cols.map((c) => h('th', {}, c)))), h('tbody', {}, sp.causes.map(row)));
  }

  showCause(c) {
    this.tensor = c.tensor; this.stat = c.stat;
    this.tools();
    this.drawCurve();
    this.cards.curve.scrollIntoView({ block: 'nearest' });
  }

  async drawHeat() {
    const my = this.seq;
    try {
      const heat = await api.seriesHeatmap({ dump: state.dump, rank: state.rank, ...this.heat, columns: Math.floor(this.width() / 3), ...this.params() });
      if (my !== this.seq) return;
      const onRow = (t) => { this.tensor = t; this.stat = heat.stat; this.tools(); this.drawCurve(); };
      put(clear(this.cards.heat), heat.rows.length ? heatCanvas(heat, { width: this.width() - 170, onRow, onWheel: (at, f) => this.wheel(at, f) })
        : h('div', { class: 'note' }, `No ${this.heat.role} tensor in this series.`));
    } catch (e) { put(clear(this.cards.heat), errorBox(e)); }
  }

  async drawCurve() {
    const my = this.seq;
    if (!this.tensor) { put(clear(this.cards.curve), h('div', { class: 'note' }, 'The series holds no tensor.')); return; }
    try {
      const c = await api.seriesCurve({ dump: state.dump, rank: state.rank, tensor: this.tensor, stat: this.stat, points: this.width(), ...this.params() });
      if (my !== this.seq) return;
      put(clear(this.cards.curve), h('div', { class: 'small muted trends-curve-label' }, `${c.tensor} (${c.role}, layer ${c.layer}): ${c.stat}, `,
        c.exact ? 'every step' : `min–max of ${fmt(c.count)} steps in ${c.x.length} buckets, mean as a line`),
      curveChart(c, { width: this.width(), height: 220, log: this.log, label: `${c.tensor} ${c.stat}`,
        spikes: this.spikes.available ? this.spikes.spikes : [], ...this.zoomOpts() }));
    } catch (e) { put(clear(this.cards.curve), errorBox(e)); }
  }

  tools() {
    const cat = this.cat, ht = this.heat;
    put(clear(this.bars.loss), select('scalar', cat.scalars, this.scalar, (x) => { this.scalar = x; this.drawLoss(); }));
    put(clear(this.bars.heat), select('heatmap statistic', cat.stats, ht.stat, (x) => { ht.stat = x; this.drawHeat(); }),
      select('heatmap role', [...rolesOf(cat), 'all'], ht.role, (x) => { ht.role = x; this.drawHeat(); }),
      select('heatmap aggregate', cat.aggregates, ht.agg, (x) => { ht.agg = x; this.drawHeat(); }),
      tick('log', ht.log, (x) => { ht.log = x; this.drawHeat(); }));
    put(clear(this.bars.curve), select('tensor', cat.tensors.map((t) => t.name), this.tensor, (x) => { this.tensor = x; this.drawCurve(); }),
      select('curve statistic', cat.stats, this.stat, (x) => { this.stat = x; this.drawCurve(); }),
      tick('log y', this.log, (x) => { this.log = x; this.drawCurve(); }));
  }
}

function select(label, values, cur, on) {
  return h('select', { class: 'input', 'aria-label': label, onchange: (e) => on(e.target.value) },
    values.map((x) => h('option', { value: x, selected: x === cur }, x)));
}

function tick(label, cur, on) {
  return h('label', { class: 'toggle' }, h('input', { type: 'checkbox', checked: cur, 'aria-label': label, onchange: (e) => on(e.target.checked) }), label);
}

// A link into the graph view at the spike's nearest deep capture (the cause's tensor selected).
function graphLink(sp, cause, text, cls) {
  const t = deepTarget(sp, cause, state.rank);
  if (!t || (cause && !cause.node)) return null;      // a scalar (lr, grad_norm) is no graph node
  return h('a', { class: cls, href: hashOf({ ...state, ...t }), onclick: (e) => { e.preventDefault(); e.stopPropagation(); set(t); } }, text);
}

function deepLink(sp) {
  if (!sp.deep) return h('span', { class: 'muted small' }, 'no deep capture in this rank');
  const d = sp.deep.distance;
  return graphLink(sp, sp.causes.find((c) => c.node) || null, `Open the deep capture: iteration ${sp.deep.iteration}${d ? ` (${d} step${d === 1 ? '' : 's'} from the spike)` : ''} in the graph view`, 'deep-link');
}

// The roles the series has, in the library's order.
function rolesOf(cat) { return cat.roles.filter((r) => cat.tensors.some((t) => t.role === r)); }

// The curve shown first: the first gradient (what moves before a spike), else the first tensor.
function firstOf(tensors) {
  const g = tensors.find((t) => t.role === 'gradient') || tensors[0];
  return g ? g.name : null;
}
