/**
 * Maximum-weight one-to-one assignment (the Hungarian algorithm, as scipy's
 * `linear_sum_assignment(maximize=True)` solves it): rows and columns are matched at most
 * once each, and the matched weights' sum is as large as possible. O(n² m) for an n x m
 * matrix, which is nothing at the sizes a description has.
 */

/** Returns `match[row] = column` (or -1 when the row is left unmatched) and the total weight. */
export function maxWeightAssignment(weights: readonly (readonly number[])[]): { match: number[]; total: number } {
  const rows = weights.length;
  const cols = rows === 0 ? 0 : weights[0]!.length;
  if (rows === 0 || cols === 0) return { match: new Array(rows).fill(-1), total: 0 };
  // The classic potentials formulation wants rows <= cols; solve the transpose otherwise.
  if (rows > cols) {
    const transposed = Array.from({ length: cols }, (_, c) => weights.map((row) => row[c]!));
    const inner = maxWeightAssignment(transposed);
    const match = new Array<number>(rows).fill(-1);
    inner.match.forEach((row, col) => {
      if (row >= 0) match[row] = col;
    });
    return { match, total: inner.total };
  }

  // Minimise cost = -weight. 1-based arrays: u/v are row/column potentials, p[col] is
  // the row matched to col, way[col] the previous column on the augmenting path.
  const cost = (r: number, c: number) => -weights[r - 1]![c - 1]!;
  const u = new Float64Array(rows + 1);
  const v = new Float64Array(cols + 1);
  const p = new Int32Array(cols + 1);
  const way = new Int32Array(cols + 1);
  for (let r = 1; r <= rows; r++) {
    p[0] = r;
    let col0 = 0;
    const minv = new Float64Array(cols + 1).fill(Infinity);
    const used = new Uint8Array(cols + 1);
    do {
      used[col0] = 1;
      const r0 = p[col0]!;
      let delta = Infinity;
      let col1 = 0;
      for (let c = 1; c <= cols; c++) {
        if (used[c]) continue;
        const reduced = cost(r0, c) - u[r0]! - v[c]!;
        if (reduced < minv[c]!) {
          minv[c] = reduced;
          way[c] = col0;
        }
        if (minv[c]! < delta) {
          delta = minv[c]!;
          col1 = c;
        }
      }
      for (let c = 0; c <= cols; c++) {
        if (used[c]) {
          u[p[c]!] += delta;
          v[c] -= delta;
        } else {
          minv[c] -= delta;
        }
      }
      col0 = col1;
    } while (p[col0] !== 0);
    do {
      const col1 = way[col0]!;
      p[col0] = p[col1]!;
      col0 = col1;
    } while (col0 !== 0);
  }

  const match = new Array<number>(rows).fill(-1);
  let total = 0;
  for (let c = 1; c <= cols; c++) {
    const r = p[c]!;
    if (r > 0) {
      match[r - 1] = c - 1;
      total += weights[r - 1]![c - 1]!;
    }
  }
  return { match, total };
}
