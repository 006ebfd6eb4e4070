/**
 * The supervised tests' task and policy: one fixed 3 x 3 FrozenLake board seen as an
 * image (its shortest path four moves long), and a policy small enough to train in
 * seconds.
 */
import { DEMO_MODEL_SPEC, oneTokenPerCell, type TinyQwenSpec } from "../../src/demo/model-dir.ts";
import type { DemoTask } from "../../src/demo/task.ts";

export const ONE_BOARD_TASK: DemoTask = {
  envName: "FrozenLake",
  envConfig: { render_mode: "vision", desc: ["SFH", "HFF", "HHG"], prompt_format: "no_think", max_actions_per_step: 1, use_example_in_sys_prompt: false },
  harness: "observation_only",
  maxPixels: oneTokenPerCell(3),
  maxTurns: 6,
  sftSeedStart: 0,
  trainSeedStart: 100,
  valSeedStart: 1000,
  probeSeedStart: 2000,
};

export const TINY_SPEC: TinyQwenSpec = { ...DEMO_MODEL_SPEC, textHidden: 32, textLayers: 1, textHeads: 2, textKvHeads: 1, textIntermediate: 64, visionHidden: 16, visionDepth: 1, visionHeads: 1, visionIntermediate: 32 };
