/**
 * Multimodal rotary position ids (M-RoPE) for Qwen2.5-VL's language model, in plain
 * arrays: per row, over the unpadded tokens, text advances one position on all three
 * axes; an image span lays out its merged (t, h, w) grid starting at the current
 * position, and text after it resumes at current + max(h, w). Padded slots get
 * position 0, as in transformers.
 *
 * `ropeDeltas[b]` = (max position + 1) - (padded row length): decode step k (0-based
 * after a prompt of padded length T) uses position T + k + delta on all three axes.
 */
export interface RopeIndexInput {
  /** (B, T) token ids. */
  inputIds: readonly (readonly number[])[];
  /** (B, T) 1 for real tokens, 0 for padding; all ones when omitted. */
  attentionMask?: readonly (readonly number[])[];
  /** [t, h, w] in patches for each image, in the order images occur across the batch. */
  imageGridThw: readonly (readonly number[])[];
  imageTokenId: number;
  spatialMergeSize: number;
}

export interface RopeIndex {
  /** [axis][row][position] with axis 0/1/2 = temporal/height/width. */
  positionIds: number[][][];
  ropeDeltas: number[];
}

export function computeRopeIndex(input: RopeIndexInput): RopeIndex {
  const { inputIds, attentionMask, imageGridThw, imageTokenId, spatialMergeSize: m } = input;
  const B = inputIds.length;
  const T = B ? inputIds[0]!.length : 0;
  const positionIds = [0, 1, 2].map(() => Array.from({ length: B }, () => new Array<number>(T).fill(0)));
  const ropeDeltas: number[] = [];
  let imageIndex = 0;
  for (let b = 0; b < B; b++) {
    const ids = inputIds[b]!;
    if (ids.length !== T) throw new Error(`computeRopeIndex: row ${b} has ${ids.length} tokens, row 0 has ${T}`);
    const mask = attentionMask?.[b];
    const valid: number[] = [];
    for (let i = 0; i < T; i++) if (!mask || mask[i]) valid.push(i);
    let current = 0;
    let maxPos = -1;
    let j = 0;
    while (j < valid.length) {
      const slot = valid[j]!;
      if (ids[slot] !== imageTokenId) {
        for (let a = 0; a < 3; a++) positionIds[a]![b]![slot] = current;
        maxPos = Math.max(maxPos, current);
        current++;
        j++;
        continue;
      }
      const grid = imageGridThw[imageIndex++];
      if (!grid) throw new Error(`computeRopeIndex: row ${b} has more image spans than the ${imageGridThw.length} image grids given`);
      const [gt, gh, gw] = [grid[0]!, grid[1]! / m, grid[2]! / m];
      const count = gt * gh * gw;
      for (let k = 0; k < count; k++) {
        const s = valid[j + k];
        if (s === undefined || ids[s] !== imageTokenId) {
          throw new Error(`computeRopeIndex: row ${b}: an image span is shorter than its grid ${JSON.stringify(grid)} (${count} tokens)`);
        }
        const t = Math.floor(k / (gh * gw));
        const h = Math.floor((k % (gh * gw)) / gw);
        const w = k % gw;
        positionIds[0]![b]![s] = current + t;
        positionIds[1]![b]![s] = current + h;
        positionIds[2]![b]![s] = current + w;
        maxPos = Math.max(maxPos, current + t, current + h, current + w);
      }
      j += count;
      current += Math.max(gh, gw);
    }
    ropeDeltas.push(maxPos + 1 - T);
  }
  if (imageIndex !== imageGridThw.length) {
    throw new Error(`computeRopeIndex: ${imageGridThw.length} image grids given but ${imageIndex} image spans found`);
  }
  return { positionIds, ropeDeltas };
}
