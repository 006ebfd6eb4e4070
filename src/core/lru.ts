/**
 * A map that keeps its most recently used entries within a capacity: `capacity` entries,
 * or, with `sizeOf`, entries whose sizes sum to at most `capacity` (bytes, say). For
 * memoising pure functions that a rollout asks again every turn of every episode: a chat
 * template's rendering of the same messages, the tokens of the same text, the resize of
 * the same render. An entry larger than the whole capacity is not kept.
 */
export class LruMap<K, V> {
  private readonly entries = new Map<K, V>();
  private used = 0;

  constructor(
    readonly capacity: number,
    private readonly sizeOf: (value: V) => number = () => 1,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`LruMap: capacity must be a positive integer, got ${capacity}`);
  }

  get size(): number {
    return this.entries.size;
  }

  /** The value for `key` (now the most recent), or undefined. */
  get(key: K): V | undefined {
    const value = this.entries.get(key);
    if (value === undefined) return undefined;
    // A Map iterates in insertion order: re-inserting makes the entry the newest.
    this.entries.delete(key);
    this.entries.set(key, value);
    return value;
  }

  set(key: K, value: V): void {
    this.delete(key);
    const size = this.sizeOf(value);
    if (size > this.capacity) return;
    this.entries.set(key, value);
    this.used += size;
    for (const [oldest, old] of this.entries) {
      if (this.used <= this.capacity) break;
      this.entries.delete(oldest);
      this.used -= this.sizeOf(old);
    }
  }

  delete(key: K): void {
    const old = this.entries.get(key);
    if (old === undefined) return;
    this.entries.delete(key);
    this.used -= this.sizeOf(old);
  }

  /** `get`, or `make()` stored under `key` when absent. */
  getOrMake(key: K, make: () => V): V {
    const hit = this.get(key);
    if (hit !== undefined) return hit;
    const value = make();
    this.set(key, value);
    return value;
  }
}
