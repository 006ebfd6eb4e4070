/**
 * SFT learns: a policy made from random weights cannot play at all (it does not even
 * write an answer), and after a short supervised phase on the solver's demonstrations it
 * walks a fixed FrozenLake board from start to goal (Right, Down, Right, Down), answering
 * each observation in the trained format. The observation_only layout shows the policy
 * the board image alone, so it must read where it stands from the picture (with the
 * vision tower frozen at its random initialisation, as the demo trains). The test checks
 * the supervised pipeline end to end (solver episodes, token-level samples, the loss on
 * the replies only, AdamW, the checkpoint directory, greedy play through the engine).
 * About 5-10 s on 2 cores.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DEMO_MODEL_SPEC, type TinyQwenSpec } from "../../src/demo/model-dir.ts";
import { writeDemoBaseModel } from "../../src/demo/task.ts";
import { validate } from "../../src/demo/validate.ts";
import { runSft } from "../../src/sft/trainer.ts";
import { ONE_BOARD_TASK, oneBoardSftConfig } from "./one-board.ts";

const root = mkdtempSync(join(tmpdir(), "vagen-sft-learn-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const task = ONE_BOARD_TASK;

/** ~70k parameters; a 192 x 192 board resized to 84 x 84, one merged token per cell. */
const SPEC: TinyQwenSpec = { ...DEMO_MODEL_SPEC, textHidden: 64, textLayers: 2, textHeads: 4, textKvHeads: 2, textIntermediate: 128, visionHidden: 32, visionDepth: 1, visionHeads: 2, visionIntermediate: 64, initializerRange: 0.1 };

test(
  "a short supervised phase takes a random policy from 0 to solving the board",
  async () => {
    const baseDir = join(root, "base");
    await writeDemoBaseModel(baseDir, task, { seed: 0, spec: SPEC });
    const evaluate = (modelDir: string, name: string) => validate(task, { modelDir, outputDir: join(root, name), episodes: 2, device: "cpu", maxTokens: 8 });

    expect((await evaluate(baseDir, "val-base")).successRate).toBe(0);

    const losses: number[] = [];
    const sft = await runSft(
      oneBoardSftConfig(baseDir, join(root, "sft"), { optim: { warmup_steps: 3 }, train: { epochs: 60 } }),
      (event) => {
        if (event.type === "step") losses.push(event.loss);
      },
    );
    expect(losses.at(-1)!).toBeLessThan(losses[0]! / 20);
    expect((await evaluate(sft.modelDir, "val-sft")).successRate).toBe(1);
  },
  180_000,
);
