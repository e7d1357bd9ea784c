// The triage page's cards, each drawn from the triage result: findings, loss, rank agreement and
// load warnings.
import { api } from '../../api.js';
import { state, set, touch, ctx } from '../../state.js';
import { put, h, fmt, basename, kindDot, toast } from '../../dom.js';
import { lineChart } from '../../charts.js';
import { hitText, tensorLabel } from '../../hits.js';
import { rankLines, stepCauses } from './state.js';
import { bandChart, heatCanvas } from '../ranks/draw.js';
import { rankRanges } from '../ranks/state.js';
import { graphAt } from '../../replay.js';

const RANK_COLORS = ['#3b5bdb', '#e8590c', '#2f9e44', '#ae3ec9', '#1098ad', '#f08c00', '#c2255c', '#5c940d'];

/** One watchpoint that fired: its count, help, first hit (a link to the graph) and its code line. */
function findingRow(f, manyRanks) {
  const x = f.first;
  const loc = x.source;
  return h('div', { class: 'finding', 'data-watchpoint': f.watchpoint.name },
    h('div', { class: 'f-head' }, h('span', { class: 'chip hit' }, fmt(f.hits)), h('b', { class: 'mono' }, f.watchpoint.name),
      h('span', { class: 'muted small' }, `${f.iterations.length} iteration${f.iterations.length === 1 ? '' : 's'} · rank${f.ranks.length === 1 ? '' : 's'} ${rankRanges(f.ranks)}`)),
    f.watchpoint.help ? h('div', { class: 'f-help muted small' }, f.watchpoint.help) : null,
    h('div', { class: 'f-first' },
      h('span', { class: 'faint small' }, 'first'),
      h('a', { href: '#', class: 'f-node mono', title: `${x.node}\nshow in the graph at iteration ${x.iteration}`,
        onclick: (e) => { e.preventDefault(); set({ view: 'graph', rank: x.rank, graph: x.graph, iteration: x.iteration, node: x.node, io: x.io, slot: x.slot, scope: '' }); } },
      kindDot(x.kind), tensorLabel(x)),
      h('span', { class: 'small' }, `iteration ${x.iteration}${manyRanks ? `, rank ${x.rank}` : ''}`),
      loc ? h('a', { href: '#', class: 'f-loc mono small', title: `${loc}\nopen this line in the code view`,
        onclick: (e) => { e.preventDefault(); set({ view: 'code', file: loc.slice(0, loc.lastIndexOf(':')), line: loc }); } }, basename(loc))
        : h('span', { class: 'faint small' }, 'no code line')),
    h('div', { class: 'f-what small' }, hitText(x)));
}

/** Use the triage's watchpoints again (the user's list dropped) and tell every pane (the Watchpoints
 * view's and the graph's "back to the triage's"); false when it failed (a toast says why). */
export async function useTriageWatchpoints() {
  try {
    await api.watchDefaults(state.dump);
    touch('watchpoints');      // every pane that shows them: the hit badge, Run to next hit, the graph's marks
    toast('The triage\'s watchpoints are in use');
    return true;
  } catch (e) {
    toast(e.message, 'error');
    return false;
  }
}

/** The findings are the watchpoints in use (their hits in the graph and the replay) until the user edits
 * the list; then this button brings them back (redrawn when the list changes: triage.js). */
export function watchButton(t) {
  const own = ctx.watchSource && ctx.watchSource.from === 'user';
  if (own) {
    return h('button', { class: 'btn btn-small', title: `Your own watchpoints are in use: use the ${t.preset} ones of these findings again`,
      onclick: async () => { if (await useTriageWatchpoints()) set({ view: 'watch' }); } }, 'Watch these again');
  }
  return h('button', { class: 'btn btn-small', title: `These ${t.preset} watchpoints are in use: their hits show in the graph and the replay. Edit them in the Watchpoints tab`,
    onclick: () => set({ view: 'watch' }) }, 'Edit watchpoints');
}

export function findingsCard(t) {
  const head = h('div', { class: 'card-head' }, h('h2', {}, 'Findings'),
    h('span', { class: 'muted' }, t.findings.length
      ? `${t.findings.length} watchpoint${t.findings.length === 1 ? '' : 's'} fired · ${fmt(t.hits)} hit${t.hits === 1 ? '' : 's'} in ${t.checked.length} iteration${t.checked.length === 1 ? '' : 's'}`
      : `the ${t.preset} watchpoints, ${t.checked.length} iterations`),
    h('span', { class: 'spacer' }),
    h('span', { class: 'watch-action' }, watchButton(t)));
  const rows = t.findings.map((f) => findingRow(f, t.ranks.length > 1));
  return h('div', { class: 'card findings' }, head, h('div', { class: 'card-body' },
    rows, otherEvidence(t), t.findings.length ? null : verdictBox(t), skippedNote(t)));
}

// One verdict from all evidence: what the watchpoints of the dumped iterations do not see (the per-step
// series' loss spikes and non-finite losses, ranks that disagree) is said beside their findings.
function otherEvidence(t) {
  const spikes = t.series_findings || [];
  const fd = t.agreement && t.agreement.first_divergence;
  if (!spikes.length && !fd) return null;
  return h('div', { class: 'error-box other-evidence' },
    spikes.length ? h('div', { class: 'series-findings' }, h('b', {}, `The per-step series: ${fmt(t.series_hits)} loss spike${t.series_hits === 1 ? '' : 's'} or non-finite loss${t.series_hits === 1 ? '' : 'es'}`),
      ' (see Trends): ', spikes.slice(0, 3).map((s) => `rank ${s.rank} step ${s.step}: ${s.detail}`).join('; ')) : null,
    fd ? h('div', { class: 'ranks-disagree' }, h('b', {}, 'The ranks disagree'), ` from iteration ${fd.iteration} (see Ranks agree? below).`) : null);
}

// No watchpoint fired: green only when every watchpoint checked something and no other evidence says otherwise.
function verdictBox(t) {
  const unanswered = (t.coverage && t.coverage.unanswered) || [];
  if (!t.checked.length) {
    return h('div', { class: 'incomplete-box' }, h('b', {}, 'No iteration was dumped'),
      ': the watchpoints had nothing to check (what a per-step series says is above and in Trends).');
  }
  if (unanswered.length) {      // never a green box over what could not be checked
    return h('div', { class: 'incomplete-box' }, h('b', {}, 'Nothing fired, but not everything could be checked'),
      ` in ${t.checked.length} iterations: ${unanswered.length} watchpoint${unanswered.length === 1 ? '' : 's'} checked nothing.`,
      h('ul', {}, unanswered.map((u) => h('li', { class: 'unanswered' }, u))));
  }
  if ((t.series_findings || []).length || (t.agreement && t.agreement.first_divergence)) {
    return h('div', { class: 'muted' }, `No watchpoint fired in ${t.checked.length} iterations.`);
  }
  return h('div', { class: 'ok-box' }, `Nothing fired: no NaN/Inf, vanishing gradient, frozen or exploding weight, all-zero tensor, saturated or dead layer in ${t.checked.length} iterations.`);
}

// What did not apply (an update ratio of a zero-initialised bias ...): one line per watchpoint and reason;
// optimizer steps that did not run (a loss scaler's skipped steps): one line per cause; iterations
// recorded coarser than every operator: what their watchpoints cannot answer there.
function skippedNote(t) {
  const skipped = t.skipped || [];
  const steps = t.skipped_steps || [];
  const levels = t.level_notes || [];
  const left = t.left_out || [];
  if (!skipped.length && !steps.length && !levels.length && !left.length) return null;
  const causes = stepCauses(steps);
  const WHY = { loss_scale_overflow: 'the loss scaler found NaN/Inf in the scaled gradients and skipped the step (its NaN/Inf are not findings)',
    optimizer_step_not_run: 'the optimizer did not step',
    learning_rate_zero: 'the optimizer stepped with learning rate 0 in every parameter group (a warm-up from 0)' };
  return h('div', { class: 'skipped muted small' },
    left.length ? h('div', { class: 'left-out' }, `Iteration${left.length === 1 ? '' : 's'} ${left.join(', ')} left out: the job is still writing ${left.length === 1 ? 'it' : 'them'} (checked once it moves on or goes quiet).`) : null,
    levels.map((note) => h('div', { class: 'level-note' }, note)),
    Object.entries(causes).map(([cause, its]) => h('div', { class: 'skipped-step', 'data-cause': cause },
      h('b', {}, `${its.length} optimizer step${its.length === 1 ? '' : 's'} skipped`),
      ` (iteration${its.length === 1 ? '' : 's'} ${[...new Set(its)].join(', ')}): ${WHY[cause] || cause}`)),
    skipped.length ? h('b', {}, 'Not applicable') : null,
    skipped.map((s) => h('div', { class: 'skip', 'data-watchpoint': s.watchpoint, title: `e.g. ${s.example.node}, iteration ${s.example.iteration}` },
      h('span', { class: 'mono' }, s.watchpoint), ` skipped ${fmt(s.checks)} check${s.checks === 1 ? '' : 's'}: ${s.reason}`)));
}

export function lossCard(t) {
  if (t.loss_band) return lossBandCard(t);
  const series = rankLines(t.loss).map((l, i) => ({ ...l, color: RANK_COLORS[i % RANK_COLORS.length] }));
  const body = h('div', { class: 'card-body' });
  if (!series.length) put(body, h('div', { class: 'muted' }, 'No loss node was found in the graphs.'));
  else {
    put(body, lineChart(series, { width: 520, height: 220, marker: state.iteration, onPick: (x) => set({ iteration: x }) }),
      h('div', { class: 'legend' }, series.map((x) => h('span', {}, h('i', { style: { background: x.color } }), x.name))));
  }
  return h('div', { class: 'card loss-card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Loss'),
    h('span', { class: 'muted' }, !t.loss[0] ? '' : t.loss[0].source === 'series'
      ? 'the per-step series (no loss in the dumped iterations)' : `mean of ${basename(t.loss[0].node)} per iteration`)), body);
}

// Many ranks: a per-rank series as a band (min-max, quartiles, median) with its outlier ranks named; a
// click on one opens that rank at the iteration where it departs (the node when the series has one).
function bandCard(cls, title, what, b) {
  // the graph that ran the iteration (null: the page picks it); a PyTorch run's first step is a graph of its own
  const graphOf = (iteration) => graphAt(b.graph_spans, iteration);
  const open = (rank, iteration) => set({ view: 'graph', rank, graph: graphOf(iteration), iteration, scope: '',
    ...(b.node ? { node: b.node, io: 'output', slot: 0 } : {}) });
  const names = b.outliers.map((o) => h('a', { href: '#', class: 'chip hit band-rank', 'data-rank': o.rank,
    onclick: (e) => { e.preventDefault(); open(o.rank, o.iterations[0]); } }, `rank ${o.rank}`));
  const body = h('div', { class: 'card-body' },
    bandChart(b, { width: 520, height: 240, marker: state.iteration, onRank: open, onPick: (x) => set({ iteration: x }) }),
    h('div', { class: 'legend small' }, h('span', {}, h('i', { style: { background: '#4c6ef5', opacity: 0.3 } }), 'quartiles'),
      h('span', {}, h('i', { style: { background: '#4c6ef5', opacity: 0.12 } }), 'min-max'),
      h('span', {}, h('i', { style: { background: '#3b5bdb' } }), 'median')),
    h('div', { class: 'band-outliers small' }, b.outlier_count
      ? [h('b', {}, `${b.outlier_count} outlier rank${b.outlier_count === 1 ? '' : 's'}: `), ...names,
        b.outlier_count > names.length ? h('span', { class: 'muted' }, ` and ${b.outlier_count - names.length} more`) : null]
      : h('span', { class: 'muted' }, 'No outlier rank: every rank stays within the band.')));
  return h('div', { class: `card ${cls}` }, h('div', { class: 'card-head' }, h('h2', {}, title),
    h('span', { class: 'muted' }, `${b.ranks} ranks · ${what}`)), body);
}

function lossBandCard(t) {
  return bandCard('loss-card', 'Loss', `mean of ${basename(t.loss_band.node || '')} per iteration`, t.loss_band);
}

/** The gradient norm per iteration: a band for many ranks, a line per rank for a few; null when no gradient is dumped. */
export function gradNormCard(t) {
  const what = 'sqrt of the summed squared L2 norms of the gradients';
  if (t.grad_norm_band) return bandCard('grad-card', 'Gradient norm', what, t.grad_norm_band);
  if (!t.grad_norm || !t.grad_norm.length) return null;
  const series = rankLines(t.grad_norm).map((l, i) => ({ ...l, color: RANK_COLORS[i % RANK_COLORS.length] }));
  return h('div', { class: 'card grad-card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Gradient norm'), h('span', { class: 'muted' }, what)),
    h('div', { class: 'card-body' }, lineChart(series, { width: 520, height: 200, marker: state.iteration, onPick: (x) => set({ iteration: x }) }),
      h('div', { class: 'legend' }, series.map((x) => h('span', {}, h('i', { style: { background: x.color } }), x.name)))));
}

/** Ranks x iterations: where the recommended watchpoints fired and where ranks diverge; a cell opens it. */
export function heatmapCard(t) {
  const heat = t.heatmap;
  if (!heat || t.ranks.length < 2) return null;
  const marked = heat.cells.length;
  return h('div', { class: 'card heatmap-card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Ranks × iterations'),
    h('span', { class: 'muted' }, `${heat.rows.length} ranks in ${heat.groups.length} group${heat.groups.length === 1 ? '' : 's'} · ${marked} cell${marked === 1 ? '' : 's'} with hits or divergence`)),
  h('div', { class: 'card-body' }, heatCanvas(heat, { width: 440, onCell: (target) => set(target) }),
    h('div', { class: 'legend small' }, h('span', {}, h('i', { style: { background: '#e03131' } }), 'hits'),
      h('span', {}, h('i', { style: { background: '#7048e8' } }), 'divergent from the base rank'))));
}

export function agreementCard(t) {
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
      : `Ranks ${rankRanges([a.base, ...a.ranks])} agree in iterations ${rankRanges(a.iterations, 8, 'iterations')}: parameters and all-reduced values are equal.`),
    h('button', { class: 'btn btn-small', onclick: () => set({ view: 'ranks' }) }, 'Compare in detail'));
  }
  return h('div', { class: 'card agreement-card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Ranks agree?'),
    h('span', { class: 'muted' }, `${t.ranks.length} rank${t.ranks.length === 1 ? '' : 's'}`)), body);
}

export function warningsCard(t) {
  return h('div', { class: 'card warnings-card' }, h('div', { class: 'card-head' }, h('h2', {}, 'Load warnings'), h('span', { class: 'muted' }, String(t.warning_count))),
    h('div', { class: 'card-body' }, t.warnings.length
      ? h('ul', { class: 'warn-list' }, t.warnings.slice(0, 50).map((x) => h('li', { class: 'mono small' }, x)))
      : h('div', { class: 'muted' }, 'None: every tensor file matched a graph node and every iteration is complete.')));
}
