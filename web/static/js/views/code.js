// Code pane: the user's source files that created nodes (framework files behind a toggle), the
// file with its node-creating lines marked, and the nodes of the chosen line, forward and backward.
import { api } from '../api.js';
import { state, set } from '../state.js';
import { put, h, clear, kindDot, errorBox, basename, empty, debounce, toast } from '../dom.js';
import { createInspector } from '../inspector.js';

const PY_KEYWORDS = new Set(('False None True and as assert async await break class continue def del elif else except finally for from '
  + 'global if import in is lambda nonlocal not or pass raise return try while with yield self').split(' '));

function highlightPython(line) {
  const out = [];
  const re = /(#.*$)|("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')|(\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b)|([A-Za-z_][A-Za-z0-9_]*)|(\s+)|(.)/g;
  let m;
  while ((m = re.exec(line))) {
    if (m[1]) out.push(h('span', { class: 'py-c' }, m[1]));
    else if (m[2]) out.push(h('span', { class: 'py-s' }, m[2]));
    else if (m[3]) out.push(h('span', { class: 'py-n' }, m[3]));
    else if (m[4]) out.push(PY_KEYWORDS.has(m[4]) ? h('span', { class: 'py-k' }, m[4]) : m[4]);
    else out.push(m[0]);
  }
  return out;
}

function parseLoc(loc) {
  if (!loc) return null;
  const i = loc.lastIndexOf(':');
  if (i < 0) return null;
  const line = parseInt(loc.slice(i + 1), 10);
  return Number.isFinite(line) ? { file: loc.slice(0, i), line } : null;
}

export function mount(root) {
  const locInput = h('input', { type: 'search', class: 'search-input', placeholder: 'FILE:LINE, e.g. train.py:14', 'aria-label': 'code location' });
  const fileFilter = h('input', { type: 'search', placeholder: 'Filter files', 'aria-label': 'filter files' });
  const fwToggle = h('input', { type: 'checkbox' });
  const fileList = h('div', { class: 'file-list' });
  const srcHead = h('div', { class: 'src-head' });
  const srcBody = h('div', { class: 'src-body' });
  const nodesPanel = h('div', { class: 'line-nodes' });
  const inspEl = h('div', { class: 'code-inspector inspector' });
  put(root, h('div', { class: 'code-view' },
    h('aside', { class: 'code-files' },
      h('div', { class: 'pane-head' }, h('h2', {}, 'Source'), h('span', { class: 'spacer' }),
        h('label', { class: 'toggle', title: 'Show MindSpore and other library files' }, fwToggle, 'Framework files')),
      h('form', { class: 'loc-form', onsubmit: (e) => { e.preventDefault(); goLocation(locInput.value); } },
        locInput, h('button', { class: 'btn btn-accent', type: 'submit' }, 'Find')),
      h('div', { class: 'file-filter' }, fileFilter),
      fileList),
    h('section', { class: 'code-source' }, srcHead, srcBody),
    h('aside', { class: 'code-side' }, nodesPanel, inspEl)));
  const inspector = createInspector(inspEl, { context: 'code' });

  let files = [];
  let seq = 0;

  async function loadFiles() {
    const my = ++seq;
    put(clear(fileList), h('div', { class: 'muted pad' }, 'Loading…'));
    try {
      const r = await api.codeFiles({ dump: state.dump, rank: state.rank, framework: fwToggle.checked, q: fileFilter.value.trim() });
      if (my !== seq) return;
      files = r.items;
      renderFiles();
      if (!state.file && files.length) {
        const user = files.find((f) => !f.is_framework) || files[0];
        set({ file: user.file }, { push: false });
      }
    } catch (e) { put(clear(fileList), errorBox(e)); }
  }

  function renderFiles() {
    clear(fileList);
    if (!files.length) {
      put(fileList, empty('No source files', fwToggle.checked ? 'The graphs record no stacks.' : 'No user file created nodes; try “Framework files”.'));
      return;
    }
    let lastFw = null;
    for (const f of files) {
      if (f.is_framework !== lastFw) {
        put(fileList, h('div', { class: 'file-group' }, f.is_framework ? 'Framework' : 'Your code'));
        lastFw = f.is_framework;
      }
      const dir = f.file.slice(0, f.file.length - f.name.length);
      put(fileList, h('div', { class: `file-item${state.file === f.file ? ' active' : ''}`, title: f.file,
        onclick: () => set({ file: f.file }) },
      h('div', { class: 'fi-name' }, f.name, f.exists ? null : h('span', { class: 'chip', title: 'not on this machine' }, 'stack only')),
      h('div', { class: 'fi-dir' }, dir),
      h('div', { class: 'fi-meta' }, `${f.lines} line${f.lines === 1 ? '' : 's'} · ${f.nodes} node${f.nodes === 1 ? '' : 's'}`)));
    }
  }

  async function goLocation(text) {
    const loc = parseLoc(text.trim());
    if (!loc) { toast('Expected FILE:LINE, e.g. train.py:14', 'error'); return; }
    try {
      const r = await api.codeNodes({ dump: state.dump, rank: state.rank, location: text.trim() });
      if (!r.files.length) { toast(`No source file of this dump matches ${loc.file}`, 'error'); return; }
      const file = r.files.length === 1 ? r.files[0] : (r.items[0] ? r.items[0].file : r.files[0]);
      set({ file, line: `${file}:${loc.line}` });
    } catch (e) { toast(e.message, 'error'); }
  }

  let srcSeq = 0;
  async function loadSource() {
    const my = ++srcSeq;
    clear(srcHead); clear(srcBody);
    if (!state.file) { put(srcBody, empty('No file chosen', 'Pick a file on the left or type FILE:LINE.')); return; }
    let lines, text;
    try {
      [lines, text] = await Promise.all([
        api.codeLines({ dump: state.dump, rank: state.rank, file: state.file }),
        api.codeSource({ dump: state.dump, rank: state.rank, file: state.file }),
      ]);
    } catch (e) { if (my === srcSeq) put(srcBody, errorBox(e)); return; }
    if (my !== srcSeq) return;
    const marks = new Map(lines.items.map((l) => [l.line, l]));
    const made = lines.items.filter((l) => !l.layer).length;
    put(srcHead, h('div', { class: 'src-title' }, h('b', {}, basename(lines.file)),
      h('span', { class: 'mono muted ellipsis', title: lines.file }, lines.file)),
    h('div', { class: 'src-meta' },
      text.exists ? h('span', { class: 'chip', title: 'read from this machine' }, 'file on disk')
        : h('span', { class: 'chip', title: text.reason || '' }, 'not on this machine: code from the stacks'),
      h('span', { class: 'muted' }, `${made} line${made === 1 ? '' : 's'} created nodes`)));
    const sel = parseLoc(state.line);
    const selLine = sel && sel.file === lines.file ? sel.line : null;
    const table = h('div', { class: 'src-lines' });
    const row = (n, code, mark) => {
      const el = h('div', { class: `src-line${mark ? ' has-nodes' : ''}${mark && mark.layer ? ' defines' : ''}${n === selLine ? ' selected' : ''}`, 'data-line': n,
        onclick: mark ? () => set({ line: `${lines.file}:${n}` }) : undefined,
        title: !mark ? '' : mark.layer ? `defines the layer ${mark.layer} (${mark.definition} nodes): click to list them`
          : `${mark.forward} forward, ${mark.backward} backward node(s): click to list them` },
      h('span', { class: 'ln' }, n),
      h('span', { class: 'gut' }, mark ? h('span', { class: 'gut-mark' },
        mark.layer ? h('span', { class: 'g-d' }, mark.definition) : null,
        mark.forward ? h('span', { class: 'g-f' }, mark.forward) : null, mark.backward ? h('span', { class: 'g-b' }, mark.backward) : null) : null),
      h('code', { class: 'src-code' }, code === null ? '' : highlightPython(code)));
      return el;
    };
    if (text.exists) {
      const all = text.text.replace(/\n$/, '').split('\n');
      all.forEach((code, i) => put(table, row(i + 1, code, marks.get(i + 1))));
      if (text.truncated) put(table, h('div', { class: 'src-gap' }, '… file truncated'));
    } else {
      let prev = null;
      for (const l of lines.items) {
        if (prev !== null && l.line > prev + 1) put(table, h('div', { class: 'src-gap' }, '⋯'));
        put(table, row(l.line, l.code, l));
        prev = l.line;
      }
    }
    put(srcBody, table);
    if (selLine) {
      const elx = table.querySelector(`.src-line[data-line="${selLine}"]`);
      if (elx) requestAnimationFrame(() => elx.scrollIntoView({ block: 'center' }));
    } else {
      const first = table.querySelector('.src-line.has-nodes');
      if (first) requestAnimationFrame(() => first.scrollIntoView({ block: 'center' }));
    }
  }

  let nodesSeq = 0;
  async function loadNodes() {
    const my = ++nodesSeq;
    clear(nodesPanel);
    const loc = parseLoc(state.line);
    if (!loc) {
      put(nodesPanel, h('div', { class: 'pane-head' }, h('h2', {}, 'Nodes of a line')),
        h('p', { class: 'muted pad' }, 'Click a marked line to list the nodes it created, forward and backward.'));
      return;
    }
    let r;
    try { r = await api.codeNodes({ dump: state.dump, rank: state.rank, location: state.line }); }
    catch (e) { if (my === nodesSeq) put(nodesPanel, errorBox(e)); return; }
    if (my !== nodesSeq) return;
    const fwd = r.items.filter((n) => n.direction === 'forward');
    const bwd = r.items.filter((n) => n.direction === 'backward');
    const def = r.items.filter((n) => n.direction === 'definition');
    // the same line in several graphs (a PyTorch run's first iteration is a graph of its own): say which
    const manyGraphs = new Set(r.items.map((n) => n.graph)).size > 1;
    put(nodesPanel, h('div', { class: 'pane-head' }, h('h2', {}, `${basename(loc.file)}:${loc.line}`),
      h('span', { class: 'spacer' }),
      r.items.length ? h('button', { class: 'btn btn-small', title: 'Open the graph with these nodes highlighted',
        onclick: () => { const f = fwd[0] || bwd[0] || def[0]; set({ view: 'graph', graph: f.graph, node: f.node, scope: f.place }); } }, 'Show in graph') : null));
    if (!r.items.length) { put(nodesPanel, h('p', { class: 'muted pad' }, 'This line created no node in this rank.')); return; }
    const list = (title, items, cls) => items.length ? h('div', { class: 'ln-group' },
      h('div', { class: 'sub-title' }, h('span', { class: `chip ${cls}` }, title), ` ${items.length} node${items.length > 1 ? 's' : ''}`),
      h('ul', { class: 'node-list' }, items.map((n) => h('li', { class: `${n.node === state.node ? 'active' : ''}`, title: n.node,
        onclick: () => set({ node: n.node, graph: n.graph, io: 'output', slot: 0 }) },
      kindDot(n.kind),
      h('span', { class: 'nl-name' }, n.name), h('span', { class: 'chip op' }, n.op_type),
      h('div', { class: 'nl-scope' }, manyGraphs ? `graph ${n.graph}${n.scope ? ' · ' + n.scope : ''}` : n.scope))))) : null;
    // a layer's definition (self.fc2 = ...) makes no node itself: its nodes are the layer's
    put(nodesPanel, list('forward', fwd, 'fwd'), list('backward', bwd, 'bwd'),
      def.length ? h('p', { class: 'muted pad' }, `This line defines the layer ${def[0].layer}; its nodes:`) : null,
      list('layer', def, 'def'));
  }

  fwToggle.addEventListener('change', loadFiles);
  fileFilter.addEventListener('input', debounce(loadFiles, 200));
  if (state.line) locInput.value = state.line.replace(/^.*\//, '');
  loadFiles();
  loadSource();
  loadNodes();
  inspector.render();

  return {
    update(changed) {
      if (changed.has('dump') || changed.has('rank')) { loadFiles(); loadSource(); loadNodes(); }
      else {
        if (changed.has('file')) { renderFiles(); loadSource(); }
        else if (changed.has('line')) {
          const sel = parseLoc(state.line);
          for (const el of srcBody.querySelectorAll('.src-line.selected')) el.classList.remove('selected');
          if (sel) {
            const elx = srcBody.querySelector(`.src-line[data-line="${sel.line}"]`);
            if (elx) { elx.classList.add('selected'); elx.scrollIntoView({ block: 'nearest' }); }
          }
        }
        if (changed.has('line') || changed.has('node')) loadNodes();
      }
      inspector.update(changed);
    },
    destroy() { inspector.destroy(); },
  };
}
