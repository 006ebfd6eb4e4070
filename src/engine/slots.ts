/**
 * Ownership of KV-cache slots: which sequence or session holds which slot, and what
 * each idle session's slot still contains.
 *
 * A slot holds the keys and values of one sequence (up to the cache's per-slot token
 * capacity). A running request owns its slot exclusively. When a request that belongs
 * to a session ends, the slot stays with the session, idle, together with the token ids
 * (and image keys) its KV was computed from, so the session's next turn prefills only
 * what changed. Idle sessions are evicted least-recently-used first when a new sequence
 * needs a slot and none is free; their next turn then prefills from scratch.
 *
 * Pure bookkeeping (no tensors): the scheduler asks, the cache does the copying.
 */
import type { ImageSpan } from "./prompt.ts";

export interface SlotContents {
  tokens: number[];
  images: ImageSpan[];
}

interface SessionEntry {
  slot: number;
  contents: SlotContents;
  busy: boolean;
  lastUsed: number;
  /** Released by its owner while a turn was running: free the slot when the turn ends. */
  releaseWhenIdle: boolean;
}

export interface SlotLease {
  slot: number;
  /** What the slot already holds (empty for a fresh slot). */
  contents: SlotContents;
  sessionId?: string;
}

const EMPTY: SlotContents = { tokens: [], images: [] };

export class SlotPool {
  /** Free slots, kept sorted so low slot numbers are reused first (keeps batches contiguous). */
  private readonly free: number[];
  private readonly sessions = new Map<string, SessionEntry>();
  private clock = 0;
  evictions = 0;

  constructor(readonly capacity: number) {
    this.free = Array.from({ length: capacity }, (_, i) => i);
  }

  get freeSlots(): number {
    return this.free.length;
  }

  get idleSessions(): number {
    let n = 0;
    for (const s of this.sessions.values()) if (!s.busy) n++;
    return n;
  }

  hasSession(sessionId: string): boolean {
    return this.sessions.has(sessionId);
  }

  /** True while a turn of this session is running (a second turn must wait). */
  isBusy(sessionId: string): boolean {
    return this.sessions.get(sessionId)?.busy ?? false;
  }

  /**
   * A slot for a new request, or undefined when every slot is held by a running
   * sequence (the request waits). May evict an idle session.
   */
  acquire(sessionId?: string): SlotLease | undefined {
    if (sessionId !== undefined) {
      const entry = this.sessions.get(sessionId);
      if (entry) {
        if (entry.busy) return undefined;
        entry.busy = true;
        entry.releaseWhenIdle = false;
        entry.lastUsed = ++this.clock;
        return { slot: entry.slot, contents: entry.contents, sessionId };
      }
    }
    const slot = this.takeFreeSlot();
    if (slot === undefined) return undefined;
    if (sessionId !== undefined) {
      this.sessions.set(sessionId, {
        slot,
        contents: { tokens: [], images: [] },
        busy: true,
        lastUsed: ++this.clock,
        releaseWhenIdle: false,
      });
    }
    return { slot, contents: EMPTY, sessionId };
  }

  /**
   * The request holding `lease` ended. `contents` says what the slot's KV now holds
   * (a session keeps it for its next turn; an anonymous request's slot is freed).
   */
  finish(lease: SlotLease, contents: SlotContents): void {
    if (lease.sessionId === undefined) {
      this.giveBack(lease.slot);
      return;
    }
    const entry = this.sessions.get(lease.sessionId);
    if (!entry || entry.slot !== lease.slot) {
      this.giveBack(lease.slot);
      return;
    }
    entry.busy = false;
    entry.contents = contents;
    entry.lastUsed = ++this.clock;
    if (entry.releaseWhenIdle) this.release(lease.sessionId);
  }

  /** Drop a session and free its slot (now, or when its running turn ends). Unknown ids are ignored. */
  release(sessionId: string): void {
    const entry = this.sessions.get(sessionId);
    if (!entry) return;
    if (entry.busy) {
      entry.releaseWhenIdle = true;
      return;
    }
    this.sessions.delete(sessionId);
    this.giveBack(entry.slot);
  }

  private takeFreeSlot(): number | undefined {
    if (this.free.length === 0) this.evictLeastRecentlyUsed();
    return this.free.shift();
  }

  private evictLeastRecentlyUsed(): void {
    let victim: string | undefined;
    let oldest = Infinity;
    for (const [id, entry] of this.sessions) {
      if (!entry.busy && entry.lastUsed < oldest) {
        oldest = entry.lastUsed;
        victim = id;
      }
    }
    if (victim === undefined) return;
    this.release(victim);
    this.evictions++;
  }

  private giveBack(slot: number): void {
    // Insert keeping the list sorted; capacities are small (hundreds), so linear is fine.
    let i = 0;
    while (i < this.free.length && this.free[i]! < slot) i++;
    this.free.splice(i, 0, slot);
  }
}
