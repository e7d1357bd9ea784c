// Code pane: the user's source files that created nodes (framework files behind a toggle), the
// file with its node-creating lines marked, and the nodes of the chosen line, forward and backward.
// Split by job: code/state.js (pure logic), code/render.js (the DOM); this module loads the data
// and wires the events.
import { api } from '../api.js';
import { state, set } from '../state.js';
import { put, h, clear, errorBox, basename, empty, debounce, toast } from '../dom.js';
import { createInspector } from '../components/inspector.js';
import { fileForLine, fileNamedBy, fileOfAnswer, lineGroups, parseLoc, selectedLine } from './code/state.js';
import { fileItems, nodeGroup, sourceHead, sourceTable, userFilesOf } from './code/render.js';

export function mount(root) {
  const v = buildPane();
  put(root, v.el);
  v.inspector = createInspector(v.inspEl, { context: 'code' });
  Object.assign(v, { files: [], seq: 0, srcSeq: 0, nodesSeq: 0 });
  v.fwToggle.addEventListener('change', () => loadFiles(v));
  v.fileFilter.addEventListener('input', debounce(() => loadFiles(v), 200));
  if (state.line) v.locInput.value = state.line.replace(/^.*\//, '');
  loadFiles(v);
  loadSource(v);
  loadNodes(v);
  v.inspector.render();
  return { update: (changed) => update(v, changed), destroy() { v.inspector.destroy(); } };
}

function buildPane() {
  const v = {
    locInput: h('input', { type: 'search', class: 'search-input', placeholder: 'FILE:LINE, e.g. train.py:14', 'aria-label': 'code location' }),
    fileFilter: h('input', { type: 'search', placeholder: 'Filter files', 'aria-label': 'filter files' }),
    fwToggle: h('input', { type: 'checkbox' }),
    fileList: h('div', { class: 'file-list' }),
    srcHead: h('div', { class: 'src-head' }),
    srcBody: h('div', { class: 'src-body' }),
    nodesPanel: h('div', { class: 'line-nodes' }),
    inspEl: h('div', { class: 'code-inspector inspector' }),
  };
  v.el = h('div', { class: 'code-view' },
    h('aside', { class: 'code-files' },
      h('div', { class: 'pane-head' }, h('h2', {}, 'Source'), h('span', { class: 'spacer' }),
        h('label', { class: 'toggle', title: 'Show MindSpore and other library files' }, v.fwToggle, 'Framework files')),
      h('form', { class: 'loc-form', onsubmit: (e) => { e.preventDefault(); goLocation(v.locInput.value); } },
        v.locInput, h('button', { class: 'btn btn-accent', type: 'submit' }, 'Find')),
      h('div', { class: 'file-filter' }, v.fileFilter),
      v.fileList),
    h('section', { class: 'code-source' }, v.srcHead, v.srcBody),
    h('aside', { class: 'code-side' }, v.nodesPanel, v.inspEl));
  return v;
}

function update(v, changed) {
  if (changed.has('dump') || changed.has('rank')) { loadFiles(v); loadSource(v); loadNodes(v); }
  else {
    const open = fileToOpen(v);
    if (open) set({ file: open }, { push: false });     // its own update loads it, the line chosen in it
    else if (changed.has('file')) { renderFiles(v); loadSource(v); }
    else if (changed.has('line')) markLine(v);
    if (changed.has('line') || changed.has('node')) loadNodes(v);
  }
  v.inspector.update(changed);
}

// The file an address leaves to the view: none named (line= alone, as a finding or the README links a line),
// or a line in another file than the one open.
function fileToOpen(v) {
  if (!v.files || !v.files.length) return null;
  if (!state.file) return fileForLine(v.files, state.line);
  const other = selectedLine(state.line, state.file) === null ? fileNamedBy(v.files, state.line) : null;
  return other && other !== state.file ? other : null;
}

function markLine(v) {
  const sel = parseLoc(state.line);
  for (const el of v.srcBody.querySelectorAll('.src-line.selected')) el.classList.remove('selected');
  if (!sel) return;
  const el = v.srcBody.querySelector(`.src-line[data-line="${sel.line}"]`);
  if (el) { el.classList.add('selected'); scrollToLine(v.srcBody, el, false); }
}

// Up or down only, inside the source pane: scrollIntoView may also scroll it sideways (a line's row is
// as wide as the longest line) and scroll the boxes around it, whose overflow is hidden.
function scrollToLine(body, el, centre) {
  const b = body.getBoundingClientRect(), r = el.getBoundingClientRect();
  if (centre) body.scrollTop += (r.top + r.bottom - b.top - b.bottom) / 2;
  else if (r.top < b.top) body.scrollTop -= b.top - r.top;
  else if (r.bottom > b.bottom) body.scrollTop += r.bottom - b.bottom;
}

async function loadFiles(v) {
  const my = ++v.seq;
  put(clear(v.fileList), h('div', { class: 'muted pad' }, 'Loading…'));
  try {
    const r = await api.codeFiles({ dump: state.dump, rank: state.rank, framework: v.fwToggle.checked, q: v.fileFilter.value.trim() });
    if (my !== v.seq) return;
    v.files = r.items;
    renderFiles(v);
    if (!state.file && v.files.length) set({ file: fileForLine(v.files, state.line) }, { push: false });
  } catch (e) { put(clear(v.fileList), errorBox(e)); }
}

function renderFiles(v) { put(clear(v.fileList), fileItems(v.files, v.fwToggle.checked)); }

async function goLocation(text) {
  const loc = parseLoc(text.trim());
  if (!loc) { toast('Expected FILE:LINE, e.g. train.py:14', 'error'); return; }
  try {
    const r = await api.codeNodes({ dump: state.dump, rank: state.rank, location: text.trim() });
    if (!r.files.length) { toast(`No source file of this dump matches ${loc.file}`, 'error'); return; }
    const file = fileOfAnswer(r);
    set({ file, line: `${file}:${loc.line}` });
  } catch (e) { toast(e.message, 'error'); }
}

async function loadSource(v) {
  const my = ++v.srcSeq;
  clear(v.srcHead); clear(v.srcBody);
  if (!state.file) { put(v.srcBody, empty('No file chosen', 'Pick a file on the left or type FILE:LINE.')); return; }
  let lines, text;
  try {
    [lines, text] = await Promise.all([
      api.codeLines({ dump: state.dump, rank: state.rank, file: state.file }),
      api.codeSource({ dump: state.dump, rank: state.rank, file: state.file }),
    ]);
  } catch (e) { if (my === v.srcSeq) put(v.srcBody, errorBox(e)); return; }
  if (my !== v.srcSeq) return;
  put(v.srcHead, sourceHead(lines, text, v.files.length ? userFilesOf(v.files) : [lines.file]));
  const selLine = selectedLine(state.line, lines.file);
  const table = sourceTable(lines, text, selLine);
  put(v.srcBody, table);
  const target = table.querySelector(selLine ? `.src-line[data-line="${selLine}"]` : '.src-line.has-nodes');
  if (target) requestAnimationFrame(() => scrollToLine(v.srcBody, target, true));
}

async function loadNodes(v) {
  const my = ++v.nodesSeq;
  clear(v.nodesPanel);
  const loc = parseLoc(state.line);
  if (!loc) {
    put(v.nodesPanel, h('div', { class: 'pane-head' }, h('h2', {}, 'Nodes of a line')),
      h('p', { class: 'muted pad' }, 'Click a marked line to list the nodes it created, forward and backward.'));
    return;
  }
  let r;
  try { r = await api.codeNodes({ dump: state.dump, rank: state.rank, location: state.line }); }
  catch (e) { if (my === v.nodesSeq) put(v.nodesPanel, errorBox(e)); return; }
  if (my !== v.nodesSeq) return;
  renderNodes(v, loc, r.items);
}

function renderNodes(v, loc, items) {
  const g = lineGroups(items);
  const first = g.forward[0] || g.backward[0] || g.definition[0];
  put(v.nodesPanel, h('div', { class: 'pane-head' }, h('h2', {}, `${basename(loc.file)}:${loc.line}`),
    h('span', { class: 'spacer' }),
    items.length ? h('button', { class: 'btn btn-small', title: 'Open the graph with these nodes highlighted',
      onclick: () => set({ view: 'graph', graph: first.graph, node: first.node, scope: first.place }) }, 'Show in graph') : null));
  if (!items.length) { put(v.nodesPanel, h('p', { class: 'muted pad' }, 'This line created no node in this rank.')); return; }
  // a layer's definition (self.fc2 = ...) makes no node itself: its nodes are the layer's
  put(v.nodesPanel, nodeGroup('forward', g.forward, 'fwd', g.manyGraphs), nodeGroup('backward', g.backward, 'bwd', g.manyGraphs),
    g.definition.length ? h('p', { class: 'muted pad' }, `This line defines the layer ${g.definition[0].layer}; its nodes:`) : null,
    nodeGroup('layer', g.definition, 'def', g.manyGraphs));
}
