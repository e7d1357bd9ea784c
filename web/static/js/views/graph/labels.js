// Where the edges' labels go: on a segment of the edge between two layers, where no node can be (the
// layout leaves rankSep px free between layers), beside the edge on its right or left; a spot clear of
// every node box and of the labels already placed, the one nearest the edge's middle first.
// Pure: runs in node unit tests (tests/web/js/labels.test.mjs).

const GAP = 4;        // px between the edge and its label
const PAD = 2;        // px kept clear around node boxes and other labels

/** Boxes overlap (each [x0, y0, x1, y1]), with `pad` px kept clear. */
export function overlaps(a, b, pad = 0) {
  return a[0] < b[2] + pad && b[0] < a[2] + pad && a[1] < b[3] + pad && b[1] < a[3] + pad;
}

/** The spots a label of w x h px may take on an edge through `points`: on each segment at a quarter,
 * half and three quarters of its way, right then left of the edge; those nearest the middle first. */
export function labelSpots(points, w, h) {
  const spots = [];
  const segs = points.length - 1;
  for (let i = 0; i < segs; i++) {
    const [x0, y0] = points[i], [x1, y1] = points[i + 1];
    for (const t of [0.5, 0.3, 0.7]) {
      const x = x0 + (x1 - x0) * t, y = y0 + (y1 - y0) * t;
      const away = Math.abs(i + t - segs / 2) + Math.abs(t - 0.5) * 0.01;
      spots.push({ away, box: [x + GAP, y - h / 2, x + GAP + w, y + h / 2] });
      spots.push({ away: away + 0.001, box: [x - GAP - w, y - h / 2, x - GAP, y + h / 2] });
    }
  }
  return spots.sort((a, b) => a.away - b.away).map((s) => s.box);
}

/** For each label {points, w, h}, its box [x0, y0, x1, y1]: clear of `nodes` ({x, y, w, h}) and of the
 * labels before it when a spot allows; else clear of the nodes at least; else its first spot. */
export function placeLabels(labels, nodes) {
  const boxes = nodes.map((n) => [n.x, n.y, n.x + n.w, n.y + n.h]);
  const placed = [];
  return labels.map(({ points, w, h }) => {
    const spots = labelSpots(points, w, h);
    const clearOfNodes = spots.filter((b) => !boxes.some((n) => overlaps(b, n, PAD)));
    const box = clearOfNodes.find((b) => !placed.some((p) => overlaps(b, p, PAD))) || clearOfNodes[0] || spots[0];
    if (box) placed.push(box);
    return box || null;
  });
}
