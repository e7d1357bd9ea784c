// Replay over the whole run (replay.js): the slider's iterations, the graph an iteration opens.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  defaultGraph, graphAt, graphRunning, iterationsOf, nearestIteration, rangeLabel, runIterations, stepIteration,
} from '../../../web/static/js/replay.js';

// A PyTorch recording: its first step (which creates the optimizer state) is a graph of its own.
const TORCH = [{ graph: 0, iterations: [0] }, { graph: 1, iterations: [1, 2, 4, 5, 6, 7] }, { graph: 2, iterations: [3] }];
// A MindSpore step runs two graphs.
const MS = [{ graph: 0, iterations: [0, 1, 2] }, { graph: 1, iterations: [0, 1, 2] }, { graph: 2, iterations: [] }];

test('the slider walks every iteration of every graph, once each, in order', () => {
  assert.deepEqual(runIterations(TORCH), [0, 1, 2, 3, 4, 5, 6, 7]);
  assert.deepEqual(runIterations(MS), [0, 1, 2]);
  assert.deepEqual(runIterations([]), []);
  assert.equal(rangeLabel(runIterations(TORCH)), 'of 0–7');
  assert.equal(rangeLabel([]), '(none dumped)');
});

test('an iteration another graph ran opens that graph; one the open graph ran keeps it', () => {
  assert.equal(graphRunning(TORCH, 0, 1), 0);
  assert.equal(graphRunning(TORCH, 3, 1), 2);
  assert.equal(graphRunning(TORCH, 4, 2), 1);
  assert.equal(graphRunning(TORCH, 4, 1), 1);
  assert.equal(graphRunning(MS, 1, 1), 1);     // a step of several graphs keeps the open one
  assert.equal(graphRunning(MS, 1, 7), 0);     // else the lowest id of those that ran most
  assert.equal(graphRunning(TORCH, 9, 1), null);
  assert.equal(graphRunning(TORCH, null, 1), null);
});

test('a link with no graph opens the one that ran its iteration, else the one that ran most', () => {
  assert.equal(defaultGraph(TORCH, null), 1);
  assert.equal(defaultGraph(TORCH, 0), 0);
  assert.equal(defaultGraph(TORCH, 3), 2);
  assert.equal(defaultGraph(TORCH, 99), 1);
  assert.equal(defaultGraph([], 0), null);
});

test('a graph chosen by hand moves the iteration to the nearest earlier one it ran', () => {
  assert.deepEqual(iterationsOf(TORCH, 1), [1, 2, 4, 5, 6, 7]);
  assert.deepEqual(iterationsOf(TORCH, 9), []);
  assert.equal(nearestIteration([1, 2, 4, 5], 3), 2);
  assert.equal(nearestIteration([1, 2, 4, 5], 0), 1);
  assert.equal(nearestIteration([1, 2, 4, 5], null), 1);
  assert.equal(nearestIteration([], 3), null);
});

test('stepping walks the run and stops at its ends', () => {
  const its = runIterations(TORCH);
  assert.equal(stepIteration(its, 2, 1), 3);
  assert.equal(stepIteration(its, 0, -1), 0);
  assert.equal(stepIteration(its, 7, 1), 7);
  assert.equal(stepIteration(its, 3, -1e9), 0);
  assert.equal(stepIteration(its, 3, 1e9), 7);
  assert.equal(stepIteration([], 3, 1), null);
});

test("a curve's spans give the graph that ran an iteration", () => {
  const spans = [[0, 0, 0], [1, 1, 2], [2, 3, 3], [1, 4, 7]];
  assert.equal(graphAt(spans, 0), 0);
  assert.equal(graphAt(spans, 2), 1);
  assert.equal(graphAt(spans, 3), 2);
  assert.equal(graphAt(spans, 7), 1);
  assert.equal(graphAt(spans, 8), null);
  assert.equal(graphAt(undefined, 1), null);
});
