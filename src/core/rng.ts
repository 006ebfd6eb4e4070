/**
 * Seeded randomness for environments (and anything else that must replay exactly).
 *
 * Levels must be identical on every machine and every run for the same seed, so envs never
 * touch `Math.random`. The generator is sfc32 (Chris Doty-Humphrey's "small fast counter",
 * 128-bit state, passes PractRand to 2^42+ bytes), seeded through splitmix32 so that nearby
 * seeds give unrelated streams. Integer seeds outside the uint32 range (negative, huge,
 * fractional) are first reduced with a stable string hash of their decimal form.
 */

/** FNV-1a over the UTF-16 code units of `text`: a stable 32-bit hash, same on every machine. */
export function stableHash32(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** Maps any number to a uint32 seed: uint32 integers map to themselves, others are hashed. */
export function toSeed32(seed: number): number {
  if (Number.isInteger(seed) && seed >= 0 && seed <= 0xffffffff) return seed;
  return stableHash32(String(seed));
}

/**
 * The deterministic replacement for VAGEN's `abs(hash(str(seed))) % 2**32` re-seed, which
 * is process-random in Python unless PYTHONHASHSEED is fixed.
 */
export function nextRetrySeed(seed: number): number {
  return stableHash32(String(seed));
}

function splitmix32(state: number): () => number {
  let s = state >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /** `stream` separates independent uses of one seed (e.g. map layout vs. slip noise). */
  constructor(seed: number, stream = 0) {
    const mix = splitmix32(toSeed32(seed) ^ Math.imul(stream >>> 0, 0x632be5ab));
    this.a = mix();
    this.b = mix();
    this.c = mix();
    this.d = mix();
    // Discard the first outputs: sfc32's state needs a few rounds to decorrelate.
    for (let i = 0; i < 12; i++) this.nextUint32();
  }

  nextUint32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** Uniform float in [0, 1) with 32 bits of randomness. */
  next(): number {
    return this.nextUint32() / 4294967296;
  }

  /** Uniform integer in [0, n), without modulo bias. */
  int(n: number): number {
    if (!Number.isInteger(n) || n <= 0) throw new RangeError(`Rng.int: n must be a positive integer, got ${n}`);
    const limit = 4294967296 - (4294967296 % n);
    let x = this.nextUint32();
    while (x >= limit) x = this.nextUint32();
    return x % n;
  }

  /** Uniform integer in [lo, hi], both inclusive (Python's `random.randint`). */
  intInclusive(lo: number, hi: number): number {
    return lo + this.int(hi - lo + 1);
  }

  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }

  /** True with probability `p`. */
  chance(p: number): boolean {
    return this.next() < p;
  }
}
