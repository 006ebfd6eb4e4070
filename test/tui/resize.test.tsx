import { expect, test } from "bun:test";
import { render } from "ink";
import { EventEmitter } from "node:events";
import { Dashboard } from "../../src/tui/dashboard.tsx";
import { DashboardStore } from "../../src/tui/store.ts";

/** A terminal-like stdout whose size the test changes, keeping the last frame written. */
class FakeTerminal extends EventEmitter {
  columns = 80;
  rows = 24;
  isTTY = true;
  frames: string[] = [];
  write = (frame: string) => {
    this.frames.push(frame);
    return true;
  };
  resize(columns: number, rows: number) {
    this.columns = columns;
    this.rows = rows;
    this.emit("resize");
  }
}

class FakeStdin extends EventEmitter {
  isTTY = true;
  setRawMode() {}
  setEncoding() {}
  resume() {}
  pause() {}
  ref() {}
  unref() {}
  read() {
    return null;
  }
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

test("the layout follows the terminal's size when it is resized", async () => {
  const store = new DashboardStore(0, () => 0);
  store.dispatch({ type: "run_started", outputDir: "runs/t", startStep: 0, totalSteps: 4, estimator: "gae", useCritic: true, envs: ["sokoban"], device: "cpu", dtype: "float32" });
  store.dispatch({ type: "metrics", step: 1, metrics: { "critic/score/mean": 0.1, "actor/ppo_kl": 0.01, "actor/entropy": 2 } });
  const terminal = new FakeTerminal();
  const instance = render(<Dashboard store={store} title="vagen train" />, {
    stdout: terminal as unknown as NodeJS.WriteStream,
    stdin: new FakeStdin() as unknown as NodeJS.ReadStream,
    debug: true, // every frame written whole, so the last write is the screen
    patchConsole: false,
    exitOnCtrlC: false,
  });
  await settle();
  const widest = (frame: string) => Math.max(...frame.split("\n").map((line) => Bun.stringWidth(line)));
  let frame = terminal.frames.at(-1)!;
  expect(widest(frame)).toBeLessThanOrEqual(80);
  // Two columns of charts at 80 wide: reward and KL side by side, entropy below.
  expect(frame.split("\n").some((line) => /reward .*KL/.test(line) && !line.includes("entropy"))).toBe(true);

  terminal.resize(160, 40);
  await settle();
  frame = terminal.frames.at(-1)!;
  expect(widest(frame)).toBeLessThanOrEqual(160);
  expect(widest(frame)).toBeGreaterThan(120);
  // Three columns from 150 wide.
  expect(frame.split("\n").some((line) => /reward .*KL .*entropy/.test(line))).toBe(true);

  terminal.resize(80, 24);
  await settle();
  expect(widest(terminal.frames.at(-1)!)).toBeLessThanOrEqual(80);
  instance.unmount();
});
