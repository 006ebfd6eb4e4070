/**
 * Holds the dashboard state between the event source and Ink. Events are folded in at
 * once (nothing is lost), but subscribers hear about it at most every `intervalMs`, so a
 * burst of events (a rollout finishing 256 episodes) costs one redraw, not 256.
 */
import type { DashboardEvent } from "./events.ts";
import { type DashboardState, initialState, reduce } from "./state.ts";

export class DashboardStore {
  private state: DashboardState;
  private readonly listeners = new Set<() => void>();
  private timer: ReturnType<typeof setTimeout> | undefined;
  private lastNotified = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly intervalMs = 100,
    private readonly clock: () => number = Date.now,
  ) {
    this.state = initialState(clock());
  }

  getState = (): DashboardState => this.state;

  dispatch = (event: DashboardEvent): void => {
    this.state = reduce(this.state, event, this.clock());
    this.schedule();
  };

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  /** Tell subscribers now (at the end of a run, before the last frame). */
  flush(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.lastNotified = this.clock();
    for (const listener of this.listeners) listener();
  }

  private schedule(): void {
    if (this.timer) return;
    const wait = Math.max(0, this.lastNotified + this.intervalMs - this.clock());
    if (wait === 0) {
      this.flush();
      return;
    }
    this.timer = setTimeout(() => this.flush(), wait);
  }
}
