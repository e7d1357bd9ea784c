// Triage pane, the landing page of a dump: what is wrong with it before the user asks. The loss
// curve of every rank, the recommended scan's findings grouped by watchpoint (first occurrence and
// its code line), the ranks' agreement and the load warnings. The server computes it in the
// background (from the cache when warm); this pane polls and shows the progress meanwhile.
// Also the dump chooser: every dump of the folder with its health at a glance.
import { api } from '../api.js';
import { state, set, ctx } from '../state.js';
import { put, h, clear, fmt, errorBox, dumpHead } from '../dom.js';
import { agreementCard, findingsCard, gradNormCard, heatmapCard, lossCard, warningsCard, watchButton } from './triage/cards.js';
import { progressPercent, progressText } from './triage/state.js';

const POLL_MS = 400;


/** The triage of a dump once known; ``onProgress(progress)`` while the server works on it. */
export async function waitTriage(dump, onProgress, alive = () => true, { start = true } = {}) {
  for (;;) {
    const r = await api.triage(dump, { start });
    if (r.state === 'done') return r.result;
    if (r.state === 'idle') return null;          // not known, and not to be started (start: false)
    if (r.state === 'error') throw new Error(`Triage failed: ${r.error}`);
    if (!alive()) return null;
    onProgress(r.progress);
    await new Promise((res) => setTimeout(res, POLL_MS));
  }
}

const HEALTH = {
  ok: ['ok', 'healthy'],
  warnings: ['warn', 'load warnings'],
  incomplete: ['warn', 'not all checked'],
  problems: ['hit', 'problems found'],
};

/** A chip saying how a dump is: problems (with their count), load warnings, or healthy. */
export function healthChip(hl) {
  if (!hl) return h('span', { class: 'chip muted-chip' }, 'checking…');
  const [cls, text] = HEALTH[hl.status] || ['', hl.status];
  const n = hl.status === 'problems' ? `${hl.problems} ${hl.problems === 1 ? 'problem' : 'problems'}` : text;
  return h('span', { class: `chip ${cls}`, title: `${hl.hits} hit(s) of the recommended watchpoints · ${hl.warnings} load warning(s)${hl.diverged ? ' · ranks diverge' : ''}` }, n);
}

/** Every dump of the folder with its health; each fills in as its triage finishes. */
export function dumpChooser(current, alive) {
  const list = h('div', { class: 'dump-list' });
  for (const d of ctx.dumps) {
    const chip = h('span', { class: 'dump-health' }, healthChip(d.health));
    put(list, h('button', { class: `dump-item${d.id === current ? ' active' : ''}`, 'data-dump': d.id,
      onclick: () => set({ view: 'triage', dump: d.id, rank: d.ranks[0] ?? 0, graph: null, iteration: null, scope: '', node: null, line: null, file: null }) },
    h('b', {}, d.id), h('span', { class: 'faint small' }, `${d.ranks.length} rank${d.ranks.length === 1 ? '' : 's'}`), chip,
    h('span', { class: 'mono faint dump-path' }, d.where)));
    if (!d.health) {
      waitTriage(d.id, () => {}, alive).then((t) => {
        if (!t) return;
        d.health = t.health;
        put(clear(chip), healthChip(t.health));
      }).catch(() => put(clear(chip), h('span', { class: 'chip warn' }, 'unreadable')));
    }
  }
  return h('div', { class: 'card dumps-card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Dumps in this folder'),
    h('span', { class: 'muted' }, `${ctx.dumps.length} found`)), list);
}

export function mount(root) {
  const page = h('div', { class: 'page triage' });
  put(root, page);
  let seq = 0;
  let live = true;
  let partial = false;        // the triage shown left out iterations a running job was writing
  let shown = null;           // the triage drawn (its findings' button follows whose watchpoints are in use)

  async function render() {
    const my = ++seq;
    const alive = () => live && my === seq;
    delete page.dataset.ready;
    clear(page);
    const d = ctx.dumps.find((x) => x.id === state.dump) || ctx.dumps[0];
    put(page, dumpHead(d.id, d.where, [['Open graph', () => set({ view: 'graph' }), true],
      ['Overview', () => set({ view: 'overview' })], ['Watchpoints', () => set({ view: 'watch' })]]));
    const wait = progressCard();
    put(page, wait);
    // the other dumps of the folder after this one's findings: those stay above the fold
    const chooser = ctx.dumps.length > 1 ? dumpChooser(d.id, () => live) : null;
    if (chooser) put(page, chooser);
    let t;
    try {
      t = await waitTriage(d.id, wait.progress, alive);
    } catch (e) { if (alive()) put(clear(wait), h('div', { class: 'card-body' }, errorBox(e))); return; }
    if (!t || !alive()) return;
    d.health = t.health;
    shown = t;
    partial = (t.left_out || []).length > 0;
    for (const chip of page.querySelectorAll(`.dump-item[data-dump="${CSS.escape(d.id)}"] .dump-health`)) put(clear(chip), healthChip(t.health));
    wait.remove();
    const grid = h('div', { class: 'triage-grid' }, findingsCard(t), lossCard(t), gradNormCard(t), heatmapCard(t), agreementCard(t), warningsCard(t));
    if (chooser) page.insertBefore(grid, chooser); else put(page, grid);
    page.dataset.ready = '1';
  }

  render();
  return {
    update(changed) {
      if (changed.has('dump') || (changed.has('triage') && partial)) render();
      else if (changed.has('watch') && shown) for (const slot of page.querySelectorAll('.watch-action')) put(clear(slot), watchButton(shown));
    },
    destroy() { live = false; },
  };
}

/** The card shown while the server works on the triage; its ``progress(p)`` moves the bar. */
function progressCard() {
  const bar = h('i', { style: { width: '0%' } });
  const stage = h('span', {}, 'Starting');
  const card = h('div', { class: 'card triage-wait' }, h('div', { class: 'card-body' },
    h('div', { class: 'row' }, h('div', { class: 'boot-spinner' }), h('b', {}, 'Looking for problems'), stage),
    h('div', { class: 'progress' }, bar),
    h('div', { class: 'muted small' }, 'The page stays usable meanwhile; the result is kept in the cache for the next time.')));
  card.progress = (p) => {
    stage.textContent = progressText(p, fmt);
    bar.style.width = `${progressPercent(p)}%`;
  };
  return card;
}

/** The chooser alone: the landing page of a folder holding several dumps. */
export function mountChooser(root) {
  let live = true;
  put(root, h('div', { class: 'page triage' }, h('div', { class: 'ov-head' }, h('div', {}, h('h1', {}, 'Choose a dump'),
    h('div', { class: 'muted' }, 'Each is checked in the background with the recommended watchpoints.'))),
  dumpChooser(null, () => live)));
  return { destroy() { live = false; } };
}
