/**
 * The engine's events, for views that watch generation live (tokens per second, queue
 * depth, KV-cache pressure) without polling: one typed union, delivered to listeners
 * subscribed with `Engine.subscribe`. The engine only emits; it never draws.
 *
 * Events are built only while someone listens, so an engine nobody watches pays nothing.
 * A listener runs inside the scheduler loop: keep it quick and let it never throw (one
 * that throws is dropped from the step, not the engine; see `EngineEventHub.emit`).
 */
import type { EngineStats, FinishReason } from "./types.ts";

/** A scheduler step ran (a prefill chunk batch, a decode step, or both). */
export interface EngineStepEvent {
  type: "step";
  /** The engine's counters right after the step. */
  stats: EngineStats;
}

/** A request left the engine: completed, or failed (aborted, closed, an error). */
export interface EngineRequestFinishedEvent {
  type: "request_finished";
  seqId: number;
  promptTokens: number;
  /** Prompt tokens reused from the session's cache instead of prefilled. */
  cachedPromptTokens: number;
  generatedTokens: number;
  /** How generation ended, or "error" when the request failed. */
  finishReason: FinishReason | "error";
}

export type EngineEvent = EngineStepEvent | EngineRequestFinishedEvent;

export type EngineEventListener = (event: EngineEvent) => void;

/** The listeners of one engine. */
export class EngineEventHub {
  private readonly listeners = new Set<EngineEventListener>();

  /** Add a listener; the returned function removes it. */
  subscribe(listener: EngineEventListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** True while anyone listens: build an event only then. */
  get active(): boolean {
    return this.listeners.size > 0;
  }

  /** Deliver `event` to every listener. A listener's failure is its own: generation goes on. */
  emit(event: EngineEvent): void {
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // A view's bug must not fail the requests of everyone else.
      }
    }
  }
}
