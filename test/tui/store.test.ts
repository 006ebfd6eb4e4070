import { expect, test } from "bun:test";
import { DashboardStore } from "../../src/tui/store.ts";

test("a burst of events costs one redraw now and one when the interval is over, with nothing lost", async () => {
  const clock = { now: 1_000 };
  const store = new DashboardStore(50, () => clock.now);
  let notified = 0;
  store.subscribe(() => notified++);
  for (let step = 1; step <= 100; step++) store.dispatch({ type: "metrics", step, metrics: { "actor/entropy": step } });
  // The first event is drawn at once; the other 99 wait for the interval.
  expect(notified).toBe(1);
  expect(store.getState().series["actor/entropy"]!.values).toHaveLength(100);
  clock.now += 50;
  await new Promise((resolve) => setTimeout(resolve, 80));
  expect(notified).toBe(2);
});

test("flush tells subscribers at once", () => {
  const store = new DashboardStore(10_000, () => 0);
  let notified = 0;
  store.subscribe(() => notified++);
  store.dispatch({ type: "note", message: "a" });
  store.dispatch({ type: "note", message: "b" });
  store.flush();
  expect(notified).toBe(2);
  expect(store.getState().notes).toEqual(["a", "b"]);
});
