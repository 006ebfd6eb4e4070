/**
 * Python's `random.Random`, reproduced draw for draw for the calls seed generation needs:
 * `Random(int)`, `getrandbits`, `randrange(start, stop)`, `randint` and `sample`, as
 * CPython 3.11 implements them (Modules/_randommodule.c and Lib/random.py). Any other
 * sequence of calls than CPython's would give different numbers, so each method follows
 * CPython's order of draws, including its rejection loops.
 */

/** MT19937 (Matsumoto and Nishimura), as in CPython's _randommodule.c. */
class MersenneTwister {
  private static readonly N = 624;
  private static readonly M = 397;
  private readonly state = new Uint32Array(MersenneTwister.N);
  private index = MersenneTwister.N;

  /** CPython's init_by_array: the key is the seed's 32-bit words, least significant first. */
  constructor(key: readonly number[]) {
    const N = MersenneTwister.N;
    const mt = this.state;
    this.initGenrand(19650218);
    let i = 1;
    let j = 0;
    for (let k = Math.max(N, key.length); k > 0; k--) {
      const previous = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      mt[i] = (mt[i]! ^ Math.imul(previous, 1664525)) + key[j]! + j;
      i++;
      j++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
      if (j >= key.length) j = 0;
    }
    for (let k = N - 1; k > 0; k--) {
      const previous = mt[i - 1]! ^ (mt[i - 1]! >>> 30);
      mt[i] = (mt[i]! ^ Math.imul(previous, 1566083941)) - i;
      i++;
      if (i >= N) {
        mt[0] = mt[N - 1]!;
        i = 1;
      }
    }
    mt[0] = 0x80000000; // MSB is 1, assuring a non-zero initial array
  }

  private initGenrand(seed: number): void {
    const mt = this.state;
    mt[0] = seed;
    for (let i = 1; i < MersenneTwister.N; i++) {
      mt[i] = Math.imul(1812433253, mt[i - 1]! ^ (mt[i - 1]! >>> 30)) + i;
    }
    this.index = MersenneTwister.N;
  }

  /** The next 32-bit output (genrand_uint32). */
  nextUint32(): number {
    if (this.index >= MersenneTwister.N) this.regenerate();
    let y = this.state[this.index++]!;
    y ^= y >>> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    y ^= y >>> 18;
    return y >>> 0;
  }

  private regenerate(): void {
    const { N, M } = MersenneTwister;
    const mt = this.state;
    for (let kk = 0; kk < N; kk++) {
      const y = (mt[kk]! & 0x80000000) | (mt[(kk + 1) % N]! & 0x7fffffff);
      mt[kk] = mt[(kk + M) % N]! ^ (y >>> 1) ^ (y & 1 ? 0x9908b0df : 0);
    }
    this.index = 0;
  }
}

/** The number of bits needed to write `n` (Python's int.bit_length; 0 for 0). */
function bitLength(n: bigint): number {
  return n === 0n ? 0 : n.toString(2).length;
}

/**
 * The seed key CPython's random_seed builds from an int: the 32-bit words of |n|, least
 * significant first, as few as hold it, with [0] for 0.
 */
function seedKey(seed: bigint): number[] {
  let rest = seed < 0n ? -seed : seed;
  if (rest === 0n) return [0];
  const words: number[] = [];
  while (rest > 0n) {
    words.push(Number(rest & 0xffffffffn));
    rest >>= 32n;
  }
  return words;
}

/** A read-only indexable population for `sample` (arrays qualify, and so does `pythonRange`). */
export interface Population<T> {
  readonly length: number;
  at(index: number): T | undefined;
}

/** Python's `range(start, stop)` without materialising it. */
export function pythonRange(start: number, stop: number): Population<number> {
  const length = Math.max(0, stop - start);
  return { length, at: (index) => (index >= 0 && index < length ? start + index : undefined) };
}

/** Smallest m with 4**m >= x, for x >= 1. */
function ceilLog4(x: number): number {
  let m = 0;
  for (let power = 1; power < x; power *= 4) m++;
  return m;
}

export class PythonRandom {
  private readonly mt: MersenneTwister;

  /** `random.Random(seed)` for an int seed (version 2 seeding treats ints as themselves). */
  constructor(seed: bigint | number) {
    this.mt = new MersenneTwister(seedKey(BigInt(seed)));
  }

  /**
   * `getrandbits(k)`: one 32-bit output's top k bits when k <= 32, otherwise ceil(k/32)
   * outputs filling the result from the least significant word up, the last one cut to
   * its top bits.
   */
  getrandbits(k: number): bigint {
    if (!Number.isInteger(k) || k < 0) throw new RangeError("number of bits must be non-negative");
    if (k === 0) return 0n;
    if (k <= 32) return BigInt(this.mt.nextUint32() >>> (32 - k));
    let result = 0n;
    for (let word = 0, bitsLeft = k; bitsLeft > 0; word++, bitsLeft -= 32) {
      let r = this.mt.nextUint32();
      if (bitsLeft < 32) r >>>= 32 - bitsLeft;
      result |= BigInt(r) << BigInt(32 * word);
    }
    return result;
  }

  /**
   * `_randbelow(n)` (the getrandbits variant): draw n.bit_length() bits until the value
   * is below n. CPython uses the bit length of n, not n - 1, so a power of two wastes
   * about half its draws; the same draws must be wasted here.
   */
  randbelow(n: bigint): bigint {
    if (n <= 0n) throw new RangeError("randbelow: n must be positive");
    const k = bitLength(n);
    let r = this.getrandbits(k);
    while (r >= n) r = this.getrandbits(k);
    return r;
  }

  /** `randrange(start, stop)` with step 1: start + _randbelow(stop - start). */
  randrange(start: number, stop: number): number {
    checkSafeInteger(start, "randrange start");
    checkSafeInteger(stop, "randrange stop");
    if (stop <= start) throw new RangeError(`empty range for randrange() (${start}, ${stop})`);
    return start + Number(this.randbelow(BigInt(stop) - BigInt(start)));
  }

  /** `randint(a, b)`: randrange(a, b + 1), both ends included. */
  randint(a: number, b: number): number {
    return this.randrange(a, b + 1);
  }

  /**
   * `sample(population, k)` as in CPython 3.11: k distinct positions, in selection order.
   * CPython picks one of two algorithms by comparing the population size with an
   * estimate of a k-entry set's size; the two consume random numbers differently, so
   * the choice is reproduced exactly. (CPython computes ceil(log(3k, 4)) in floating
   * point; 3k is never a power of 4, so the integer loop here gives the same m.)
   */
  sample<T>(population: Population<T>, k: number): T[] {
    const n = population.length;
    if (!Number.isInteger(k) || k < 0 || k > n) throw new RangeError("Sample larger than population or is negative");
    let setSize = 21;
    if (k > 5) setSize += 4 ** ceilLog4(k * 3);
    return n <= setSize ? this.sampleFromPool(population, k) : this.sampleBySet(population, k);
  }

  /** Partial Fisher-Yates over a copy: the picked slot is refilled from the end. */
  private sampleFromPool<T>(population: Population<T>, k: number): T[] {
    const n = population.length;
    const pool = Array.from({ length: n }, (_, i) => population.at(i) as T);
    const result: T[] = [];
    for (let i = 0; i < k; i++) {
      const j = Number(this.randbelow(BigInt(n - i)));
      result.push(pool[j]!);
      pool[j] = pool[n - i - 1]!;
    }
    return result;
  }

  /** Draw positions over the whole population, redrawing ones already taken. */
  private sampleBySet<T>(population: Population<T>, k: number): T[] {
    const n = BigInt(population.length);
    const selected = new Set<number>();
    const result: T[] = [];
    for (let i = 0; i < k; i++) {
      let j = Number(this.randbelow(n));
      while (selected.has(j)) j = Number(this.randbelow(n));
      selected.add(j);
      result.push(population.at(j) as T);
    }
    return result;
  }
}

function checkSafeInteger(x: number, what: string): void {
  if (!Number.isSafeInteger(x)) throw new RangeError(`${what} must be an integer within ±2^53, got ${x}`);
}
