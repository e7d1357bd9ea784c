// Triage pane, the landing page of a dump: what is wrong with it before the user asks. The loss
// curve of every rank, the recommended scan's findings grouped by watchpoint (first occurrence and
// its code line), the ranks' agreement and the load warnings. The server computes it in the
// background (from the cache when warm); this pane polls and shows the progress meanwhile.
// Also the dump chooser: every dump of the folder with its health at a glance.
import { api } from '../api.js';
import { state, set, ctx } from '../state.js';
import { put, h, clear, fmt, errorBox, basename, kindDot, toast, dumpHead } from '../dom.js';
import { lineChart } from '../charts.js';
import { hitText, tensorLabel } from '../inspector.js';

const RANK_COLORS = ['#3b5bdb', '#e8590c', '#2f9e44', '#ae3ec9', '#1098ad', '#f08c00', '#c2255c', '#5c940d'];
const POLL_MS = 400;
const STAGES = { start: 'Starting', loss: 'Reading the loss', scan: 'Running the recommended watchpoints', compare: 'Comparing the ranks', done: 'Done' };

/** The triage of a dump once known; ``onProgress(progress)`` while the server works on it. */
export async function waitTriage(dump, onProgress, alive = () => true) {
  for (;;) {
    const r = await api.triage(dump);
    if (r.state === 'done') return r.result;
    if (r.state === 'error') throw new Error(`Triage failed: ${r.error}`);
    if (!alive()) return null;
    onProgress(r.progress);
    await new Promise((res) => setTimeout(res, POLL_MS));
  }
}

const HEALTH = {
  ok: ['ok', 'healthy'],
  warnings: ['warn', 'load warnings'],
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
      onclick: () => set({ view: 'triage', dump: d.id, rank: d.ranks[0] ?? 0, graph: 0, iteration: null, scope: '', node: null, line: null, file: null }) },
    h('b', {}, d.id), h('span', { class: 'faint small' }, `${d.ranks.length} rank${d.ranks.length === 1 ? '' : 's'}`), chip,
    h('span', { class: 'mono faint dump-path' }, d.path)));
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

  async function render() {
    const my = ++seq;
    const alive = () => live && my === seq;
    clear(page);
    const d = ctx.dumps.find((x) => x.id === state.dump) || ctx.dumps[0];
    put(page, dumpHead(d.id, d.path, [['Open graph', () => set({ view: 'graph' }), true],
      ['Overview', () => set({ view: 'overview' })], ['Watchpoints', () => set({ view: 'watch' })]]));
    if (ctx.dumps.length > 1) put(page, dumpChooser(d.id, () => live));
    const bar = h('i', { style: { width: '0%' } });
    const stage = h('span', {}, 'Starting');
    const wait = h('div', { class: 'card triage-wait' }, h('div', { class: 'card-body' },
      h('div', { class: 'row' }, h('div', { class: 'boot-spinner' }), h('b', {}, 'Looking for problems'), stage),
      h('div', { class: 'progress' }, bar),
      h('div', { class: 'muted small' }, 'The page stays usable meanwhile; the result is kept in the cache for the next time.')));
    put(page, wait);
    let t;
    try {
      t = await waitTriage(d.id, (p) => {
        stage.textContent = `${STAGES[p.stage] || p.stage}${p.total > 1 ? ` (${fmt(p.done)} of ${fmt(p.total)})` : ''}`;
        bar.style.width = `${p.total ? Math.round((100 * p.done) / p.total) : 0}%`;
      }, alive);
    } catch (e) { if (alive()) put(clear(wait), h('div', { class: 'card-body' }, errorBox(e))); return; }
    if (!t || !alive()) return;
    d.health = t.health;
    for (const chip of page.querySelectorAll(`.dump-item[data-dump="${CSS.escape(d.id)}"] .dump-health`)) put(clear(chip), healthChip(t.health));
    wait.remove();
    put(page, h('div', { class: 'triage-grid' }, findingsCard(t), lossCard(t), agreementCard(t), warningsCard(t)));
    page.dataset.ready = '1';
  }

  function findingsCard(t) {
    const head = h('div', { class: 'card-head' }, h('h2', {}, 'Findings'),
      h('span', { class: 'muted' }, t.findings.length
        ? `${t.findings.length} watchpoint${t.findings.length === 1 ? '' : 's'} fired · ${fmt(t.hits)} hit${t.hits === 1 ? '' : 's'} in ${t.checked.length} iteration${t.checked.length === 1 ? '' : 's'}`
        : `the ${t.preset} watchpoints, ${t.checked.length} iterations`),
      h('span', { class: 'spacer' }),
      h('button', { class: 'btn btn-small', title: `Add the ${t.preset} watchpoints to this dump: their hits show in the graph and the replay`,
        onclick: async () => {
          try {
            const r = await api.addWatchpoint(state.dump, { preset: t.preset });
            toast(r.created.length ? `${r.created.length} watchpoints added` : 'These watchpoints are already set');
            set({ view: 'watch' });
          } catch (e) { toast(e.message, 'error'); }
        } }, 'Watch these'));
    if (!t.findings.length) {
      return h('div', { class: 'card findings' }, head, h('div', { class: 'card-body' },
        h('div', { class: 'ok-box' }, `Nothing fired: no NaN/Inf, vanishing gradient, frozen or exploding weight, all-zero tensor, saturated or dead layer in ${t.checked.length} iterations.`),
        skippedNote(t)));
    }
    const rows = t.findings.map((f) => {
      const x = f.first;
      const loc = x.source;
      return h('div', { class: 'finding', 'data-watchpoint': f.watchpoint.name },
        h('div', { class: 'f-head' }, h('span', { class: 'chip hit' }, fmt(f.hits)), h('b', { class: 'mono' }, f.watchpoint.name),
          h('span', { class: 'muted small' }, `${f.iterations.length} iteration${f.iterations.length === 1 ? '' : 's'} · rank${f.ranks.length === 1 ? '' : 's'} ${f.ranks.join(', ')}`)),
        f.watchpoint.help ? h('div', { class: 'f-help muted small' }, f.watchpoint.help) : null,
        h('div', { class: 'f-first' },
          h('span', { class: 'faint small' }, 'first'),
          h('a', { href: '#', class: 'f-node mono', title: `${x.node}\nshow in the graph at iteration ${x.iteration}`,
            onclick: (e) => { e.preventDefault(); set({ view: 'graph', rank: x.rank, graph: x.graph, iteration: x.iteration, node: x.node, io: x.io, slot: x.slot, scope: '' }); } },
          kindDot(x.kind), tensorLabel(x)),
          h('span', { class: 'small' }, `iteration ${x.iteration}${t.ranks.length > 1 ? `, rank ${x.rank}` : ''}`),
          loc ? h('a', { href: '#', class: 'f-loc mono small', title: `${loc}\nopen this line in the code view`,
            onclick: (e) => { e.preventDefault(); set({ view: 'code', file: loc.slice(0, loc.lastIndexOf(':')), line: loc }); } }, basename(loc))
            : h('span', { class: 'faint small' }, 'no code line')),
        h('div', { class: 'f-what small' }, hitText(x)));
    });
    return h('div', { class: 'card findings' }, head, h('div', { class: 'card-body' }, rows, skippedNote(t)));
  }

  // What did not apply (an update ratio of a zero-initialised bias ...): one line per watchpoint and reason;
  // optimizer steps that did not run (a loss scaler's skipped steps): one line per cause.
  function skippedNote(t) {
    const skipped = t.skipped || [];
    const steps = t.skipped_steps || [];
    if (!skipped.length && !steps.length) return null;
    const causes = {};
    for (const s of steps) (causes[s.cause] = causes[s.cause] || []).push(s.iteration);
    const WHY = { loss_scale_overflow: 'the loss scaler found NaN/Inf in the scaled gradients and skipped the step (its NaN/Inf are not findings)',
      optimizer_step_not_run: 'the optimizer did not step' };
    return h('div', { class: 'skipped muted small' },
      Object.entries(causes).map(([cause, its]) => h('div', { class: 'skipped-step', 'data-cause': cause },
        h('b', {}, `${its.length} optimizer step${its.length === 1 ? '' : 's'} skipped`),
        ` (iteration${its.length === 1 ? '' : 's'} ${[...new Set(its)].join(', ')}): ${WHY[cause] || cause}`)),
      skipped.length ? h('b', {}, 'Not applicable') : null,
      skipped.map((s) => h('div', { class: 'skip', 'data-watchpoint': s.watchpoint, title: `e.g. ${s.example.node}, iteration ${s.example.iteration}` },
        h('span', { class: 'mono' }, s.watchpoint), ` skipped ${fmt(s.checks)} check${s.checks === 1 ? '' : 's'}: ${s.reason}`)));
  }

  function lossCard(t) {
    const series = t.loss.map((c, i) => ({ name: `rank ${c.rank}`, color: RANK_COLORS[i % RANK_COLORS.length],
      points: c.points.map(([x, y]) => ({ x, y })) }));
    const body = h('div', { class: 'card-body' });
    if (!series.length) put(body, h('div', { class: 'muted' }, 'No loss node was found in the graphs.'));
    else {
      put(body, lineChart(series, { width: 520, height: 220, marker: state.iteration, onPick: (x) => set({ iteration: x }) }),
        h('div', { class: 'legend' }, series.map((x) => h('span', {}, h('i', { style: { background: x.color } }), x.name))));
    }
    return h('div', { class: 'card loss-card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Loss'),
      h('span', { class: 'muted' }, t.loss[0] ? `mean of ${basename(t.loss[0].node)} per iteration` : '')), body);
  }

  function agreementCard(t) {
    const a = t.agreement;
    const body = h('div', { class: 'card-body' });
    if (!a) put(body, h('div', { class: 'muted' }, 'One rank: nothing to compare.'));
    else {
      const sm = a.summary, fd = a.first_divergence;
      put(body, h('div', { class: 'cmp-metrics' },
        ...[['pairs', sm.pairs, ''], ['pass', sm.pass, 'ok'], ['warning', sm.warning, sm.warning ? 'warn' : ''], ['error', sm.error, sm.error ? 'bad' : '']]
          .map(([l, v, c]) => h('div', { class: `cmp-metric ${c}` }, h('b', {}, fmt(v)), h('span', {}, l)))),
      sm.nothing_compared   // no pair is no evidence of agreement
        ? h('div', { class: 'muted' }, h('b', {}, 'Nothing compared: '), sm.nothing_compared)
        : h('div', { class: fd ? 'error-box' : 'ok-box' }, fd
        ? [h('b', {}, 'First divergence: '), `iteration ${fd.iteration}, rank ${fd.a.rank} vs ${fd.b.rank}: `, h('code', {}, tensorLabel(fd)), ` (${fd.reason || fd.grade})`]
        : `Ranks ${[a.base, ...a.ranks].join(', ')} agree in iterations ${a.iterations.join(', ')}: parameters and all-reduced values are equal.`),
      h('button', { class: 'btn btn-small', onclick: () => set({ view: 'ranks' }) }, 'Compare in detail'));
    }
    return h('div', { class: 'card agreement-card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Ranks agree?'),
      h('span', { class: 'muted' }, `${t.ranks.length} rank${t.ranks.length === 1 ? '' : 's'}`)), body);
  }

  function warningsCard(t) {
    return h('div', { class: 'card warnings-card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Load warnings'), h('span', { class: 'muted' }, String(t.warning_count))),
      h('div', { class: 'card-body' }, t.warnings.length
        ? h('ul', { class: 'warn-list' }, t.warnings.slice(0, 50).map((x) => h('li', { class: 'mono small' }, x)))
        : h('div', { class: 'muted' }, 'None: every tensor file matched a graph node and every iteration is complete.')));
  }

  render();
  return {
    update(changed) { if (changed.has('dump')) render(); },
    destroy() { live = false; },
  };
}

/** The chooser alone: the landing page of a folder holding several dumps. */
export function mountChooser(root) {
  let live = true;
  put(root, h('div', { class: 'page triage' }, h('div', { class: 'ov-head' }, h('div', {}, h('h1', {}, 'Choose a dump'),
    h('div', { class: 'muted' }, 'Each is checked in the background with the recommended watchpoints.'))),
  dumpChooser(null, () => live)));
  return { destroy() { live = false; } };
}
