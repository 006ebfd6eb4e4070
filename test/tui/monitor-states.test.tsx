/** What the dashboard shows of a monitored run that finished or whose directory is gone. */
import { afterEach, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { appendFileSync, cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Dashboard } from "../../src/tui/dashboard.tsx";
import { RunDirReader } from "../../src/tui/run-dir.ts";
import { DashboardStore } from "../../src/tui/store.ts";

const FIXTURE = join(import.meta.dir, "..", "fixtures", "run-dir");
const temporaries: string[] = [];
afterEach(() => {
  for (const dir of temporaries.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A copy of the training fixture (step 6 of 10) and a store fed from it. */
function monitored(): { dir: string; reader: RunDirReader; store: DashboardStore } {
  const dir = mkdtempSync(join(tmpdir(), "vagen-monitor-"));
  temporaries.push(dir);
  cpSync(join(FIXTURE, "train"), dir, { recursive: true });
  const reader = new RunDirReader(dir);
  const store = new DashboardStore(0, () => 0);
  for (const e of reader.poll()) store.dispatch(e);
  return { dir, reader, store };
}

test("a deleted run directory: the dashboard says it is gone", () => {
  const { dir, reader, store } = monitored();
  rmSync(dir, { recursive: true, force: true });
  for (const e of reader.poll()) store.dispatch(e);
  const { lastFrame, unmount } = render(<Dashboard store={store} title="vagen monitor" size={{ columns: 160, rows: 30 }} />);
  expect(lastFrame()).toContain(`⚠ the run directory ${dir} is gone (deleted or moved); nothing more will appear`);
  unmount();
});

test("a run at its last step: the footer says finished, the header has no ETA", () => {
  const { dir, reader, store } = monitored();
  for (const step of [7, 8, 9, 10]) appendFileSync(join(dir, "metrics.jsonl"), `{"step": ${step}, "timing_s/step": 30}\n`);
  const before = render(<Dashboard store={store} title="vagen monitor" size={{ columns: 100, rows: 30 }} />);
  expect(before.lastFrame()).toContain("ETA");
  expect(before.lastFrame()).not.toContain("finished");
  before.unmount();
  for (const e of reader.poll()) store.dispatch(e);
  const after = render(<Dashboard store={store} title="vagen monitor" size={{ columns: 100, rows: 30 }} />);
  expect(after.lastFrame()).toContain("step 10/10");
  expect(after.lastFrame()).toContain("finished: completed");
  expect(after.lastFrame()).not.toContain("ETA");
  after.unmount();
});
