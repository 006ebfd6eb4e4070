/**
 * The supervised tests' task and policy: one fixed 3 x 3 FrozenLake board seen as an
 * image (its shortest path four moves long), and a policy small enough to train in
 * seconds.
 */
import { DEMO_MODEL_SPEC, oneTokenPerCell, type TinyQwenSpec } from "../../src/demo/model-dir.ts";
import { demoSolverData, type DemoTask } from "../../src/demo/task.ts";
import type { SftConfig } from "../../src/sft/config.ts";

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

/**
 * A `vagen sft` config over the board's two shortest-path episodes (8 one-turn samples):
 * lr 3e-3, constant, full weights, vision tower frozen, one epoch of 8 a step, unless
 * `optim` or `train` says otherwise.
 */
export function oneBoardSftConfig(modelDir: string, outputDir: string, over: { optim?: Partial<SftConfig["optim"]>; train?: Partial<SftConfig["train"]> } = {}): SftConfig {
  return {
    model_dir: modelDir,
    output_dir: outputDir,
    seed: 0,
    device: "cpu",
    dtype: "f32",
    data: { layout: "observation_only", solver: demoSolverData(ONE_BOARD_TASK, 2, 0), eval_dirs: [], only_success: true },
    optim: { lr: 3e-3, weight_decay: 0, grad_clip: 1.0, warmup_steps: 0, schedule: "constant", ...over.optim },
    train: { epochs: 1, batch_size: 8, micro_batch_size: 8, max_steps: 0, save_every_epoch: false, freeze_vision_tower: true, label_smoothing: 0, stop_below_loss: 0, ...over.train },
  };
}
