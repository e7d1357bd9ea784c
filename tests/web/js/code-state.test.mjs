// The code view's pure logic (views/code/state.js).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  defaultFile, fileForLine, fileOfAnswer, lineClass, lineGroups, lineTitle, marksSummary, parseLoc, pyTokens, selectedLine, shortDir,
  stackRows,
} from '../../../web/static/js/views/code/state.js';

test('FILE:LINE parses at its last colon; anything else is null', () => {
  assert.deepEqual(parseLoc('C:/work/train.py:14'), { file: 'C:/work/train.py', line: 14 });
  assert.equal(parseLoc('train.py'), null);
  assert.equal(parseLoc('train.py:x'), null);
  assert.equal(parseLoc(null), null);
});

test('Python tokens: keywords, strings, numbers and comments get their classes', () => {
  assert.deepEqual(pyTokens('x = self.fc(1.5)  # "hi"'), [
    ['', 'x'], ['', ' '], ['', '='], ['', ' '], ['py-k', 'self'], ['', '.'], ['', 'fc'], ['', '('], ['py-n', '1.5'], ['', ')'],
    ['', '  '], ['py-c', '# "hi"']]);
  assert.deepEqual(pyTokens("return 'a\\'b'"), [['py-k', 'return'], ['', ' '], ['py-s', "'a\\'b'"]]);
});

test('a marked line says what it made; a layer definition says so', () => {
  const mark = { forward: 2, backward: 3 };
  assert.equal(lineClass(7, mark, 7), 'src-line has-nodes selected');
  assert.equal(lineClass(7, { layer: 'fc1', definition: 4 }, null), 'src-line has-nodes defines');
  assert.equal(lineClass(8, undefined, 7), 'src-line');
  assert.equal(lineTitle(mark), '2 forward, 3 backward node(s): click to list them');
  assert.equal(lineTitle({ layer: 'fc1', definition: 4 }), 'defines the layer fc1 (4 nodes): click to list them');
});

test('the chosen line counts only in its own file', () => {
  assert.equal(selectedLine('/a/t.py:9', '/a/t.py'), 9);
  assert.equal(selectedLine('/a/u.py:9', '/a/t.py'), null);
  assert.equal(selectedLine('t.py:9', '/a/t.py'), 9);          // the file's name as the user types it
  assert.equal(selectedLine('a/t.py:9', '/w/a/t.py'), 9);
  assert.equal(selectedLine('st.py:9', '/a/test.py'), null);   // a whole name, never a part of one
});

test('an address with a line and no file opens the file that line names', () => {
  const files = [{ file: '/w/lib.py', is_framework: false }, { file: '/w/make_sample.py', is_framework: false }];
  assert.equal(fileForLine(files, 'make_sample.py:200'), '/w/make_sample.py');
  assert.equal(fileForLine(files, 'other.py:3'), '/w/lib.py');
  assert.equal(fileForLine(files, undefined), '/w/lib.py');
});

test('which file opens: the only match, the first node\'s, the first user file', () => {
  assert.equal(fileOfAnswer({ files: ['/a'], items: [] }), '/a');
  assert.equal(fileOfAnswer({ files: ['/a', '/b'], items: [{ file: '/b' }] }), '/b');
  assert.equal(defaultFile([{ file: '/lib', is_framework: true }, { file: '/me', is_framework: false }]), '/me');
});

test('nodes of a line group by direction and notice several graphs', () => {
  const g = lineGroups([{ direction: 'forward', graph: 0 }, { direction: 'backward', graph: 1 }, { direction: 'forward', graph: 0 }]);
  assert.equal(g.forward.length, 2);
  assert.equal(g.backward.length, 1);
  assert.equal(g.definition.length, 0);
  assert.equal(g.manyGraphs, true);
});

test('lines known only from stacks show a gap between non-adjacent lines', () => {
  const rows = stackRows([{ line: 3, code: 'a' }, { line: 4, code: 'b' }, { line: 9, code: 'c' }]);
  assert.deepEqual(rows.map((r) => (r.gap ? '⋯' : r.line)), [3, 4, '⋯', 9]);
});

test('a file is listed under a folder with no absolute path; a library file under the folder the server gives', () => {
  const mine = ['/home/ana/proj/train.py', '/home/ana/proj/lib/model.py'];
  assert.equal(shortDir(mine[0], mine), 'proj/');
  assert.equal(shortDir(mine[1], mine), 'proj/lib/');
  assert.equal(shortDir('/usr/lib/python3.11/x/torch/nn/modules/linear.py', mine, 'torch/nn/modules/'), 'torch/nn/modules/');   // the server's
  assert.equal(shortDir('/home/ana/proj/train.py', ['/home/ana/proj/train.py']), 'proj/');
  assert.equal(shortDir('/srv/a/b/x.py', ['/srv/a/b/x.py', '/data/y.py']), '…/a/b/');   // nothing shared: the last two folders
  assert.equal(shortDir('C:\\Users\\ana\\proj\\train.py', ['C:\\Users\\ana\\proj\\train.py']), 'proj/');
  assert.equal(shortDir('train.py', ['train.py']), '');
  for (const f of [...mine, '/srv/a/b/x.py']) assert.ok(!shortDir(f, mine).startsWith('/'));
});

test('the marked lines are counted so that the numbers add up: nodes made, layers defined', () => {
  const items = [{ line: 3 }, { line: 5, layer: 'fc1' }, { line: 6, layer: 'fc2' }, { line: 9 }];
  assert.equal(marksSummary(items), '2 lines created nodes · 2 define a layer');
  assert.equal(marksSummary([{ line: 1 }, { line: 2, layer: 'fc' }]), '1 line created nodes · 1 defines a layer');
  assert.equal(marksSummary([{ line: 1 }]), '1 line created nodes');
});
