/**
 * Checkpoints that survive kill -9. A checkpoint is a directory
 *
 *   checkpoints/step_<N>/
 *     actor/model*.safetensors       the policy's weights (Hugging Face names)
 *     actor/optimizer.safetensors    AdamW moments, with step and lr in the metadata
 *     critic/...                     the same for the critic (with value_head.*), if any
 *     state.json                     step, data position, schedulers, RNG, KL coefficient, best validation
 *
 * written into a temporary sibling, every file fsynced, then renamed into place and the
 * parent fsynced. A directory named step_<N> is therefore complete, and resuming takes the
 * newest one; a crash mid-write leaves only a temporary, removed on the next start. The
 * newest `keep` checkpoints stay; older ones go after a new one is in place.
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import * as torch from "../torch/index.ts";
import { safetensors, type Tensor } from "../torch/index.ts";
import * as v from "valibot";
import { VagenError } from "../core/errors.ts";

const STEP_DIR = /^step_(\d+)$/;

const count = v.pipe(v.number(), v.integer(), v.minValue(0));

/**
 * What state.json holds. `run` records what the checkpoint's tensors mean (the model,
 * dtype, whether a critic is in it) so a resume with another config can be refused.
 */
export const TrainerStateSchema = v.object({
  step: count,
  data: v.object({ epoch: count, cursor: count }),
  /** LR scheduler positions. */
  actorSchedulerStep: count,
  criticSchedulerStep: v.optional(count),
  /** The adaptive KL controller's coefficient. */
  klCoef: v.pipe(v.number(), v.finite()),
  /** Best mean validation reward so far (null: none yet). */
  bestValReward: v.nullable(v.number()),
  /** libtorch's default CPU generator, hex. */
  torchRngState: v.pipe(v.string(), v.regex(/^([0-9a-f]{2})*$/, "hex bytes")),
  run: v.optional(
    v.object({
      modelDir: v.string(),
      dtype: v.string(),
      critic: v.boolean(),
      /** The model's architecture as config.json gives it (hidden size, layers, vocabulary). */
      modelShape: v.record(v.string(), v.unknown()),
    }),
  ),
});
export type TrainerState = v.InferOutput<typeof TrainerStateSchema>;

/** One model's part of a checkpoint: weights and the optimizer's state. */
export interface ModelPart {
  weights: Map<string, Tensor>;
  optimizer: { tensors: Record<string, Tensor>; metadata: Record<string, string> };
}

export function stepDirName(step: number): string {
  return `step_${step}`;
}

/** Complete checkpoints under `root`, oldest first. */
export function listCheckpoints(root: string): { step: number; path: string }[] {
  if (!existsSync(root)) return [];
  return readdirSync(root)
    .flatMap((name) => {
      const m = STEP_DIR.exec(name);
      return m && existsSync(join(root, name, "state.json")) ? [{ step: Number(m[1]), path: join(root, name) }] : [];
    })
    .sort((a, b) => a.step - b.step);
}

export function latestCheckpoint(root: string): string | undefined {
  return listCheckpoints(root).at(-1)?.path;
}

/** Temporaries of a run that died mid-save. */
export function removeStaleCheckpointTemporaries(root: string): void {
  if (!existsSync(root)) return;
  for (const name of readdirSync(root)) if (name.startsWith(".tmp-")) rmSync(join(root, name), { recursive: true, force: true });
}

function fsyncPath(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

function writePart(dir: string, part: ModelPart): void {
  mkdirSync(dir, { recursive: true });
  safetensors.saveSharded(dir, part.weights);
  safetensors.save(join(dir, "optimizer.safetensors"), part.optimizer.tensors, part.optimizer.metadata);
  for (const name of readdirSync(dir)) fsyncPath(join(dir, name));
  fsyncPath(dir);
}

/**
 * Writes a checkpoint for `state.step` under `root` atomically and prunes to `keep`.
 * Returns its path. A failure (a full disk) removes the temporary and leaves every
 * earlier checkpoint as it was.
 */
export function saveCheckpoint(root: string, parts: { actor: ModelPart; critic?: ModelPart }, state: TrainerState, keep: number): string {
  mkdirSync(root, { recursive: true });
  const final = join(root, stepDirName(state.step));
  const tmp = join(root, `.tmp-${stepDirName(state.step)}-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  try {
    writePart(join(tmp, "actor"), parts.actor);
    if (parts.critic) writePart(join(tmp, "critic"), parts.critic);
    const statePath = join(tmp, "state.json");
    writeFileSync(statePath, `${JSON.stringify(state, null, 2)}\n`);
    fsyncPath(statePath);
    fsyncPath(tmp);
    rmSync(final, { recursive: true, force: true });
    renameSync(tmp, final);
    fsyncPath(root);
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw new VagenError(`could not save checkpoint ${final}: ${(err as Error).message}`, "earlier checkpoints are untouched; free disk space and resume");
  }
  for (const old of listCheckpoints(root).slice(0, -keep)) rmSync(old.path, { recursive: true, force: true });
  return final;
}

/** A checkpoint's state.json, checked: a truncated or hand-edited file is an error naming it and the key. */
export function readTrainerState(checkpoint: string): TrainerState {
  const path = join(checkpoint, "state.json");
  if (!existsSync(path)) throw new VagenError(`${checkpoint}: not a complete checkpoint (no state.json)`);
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new VagenError(`${path}: not valid JSON (${(err as Error).message})`, "the file is truncated or corrupt; resume from an earlier checkpoint (trainer.resume=PATH)");
  }
  const parsed = v.safeParse(TrainerStateSchema, raw);
  if (!parsed.success) {
    const issue = parsed.issues[0];
    const key = issue.path?.map((p) => String(p.key)).join(".") || "(top level)";
    throw new VagenError(`${path}: key "${key}": ${issue.message}`, "the file is corrupt; resume from an earlier checkpoint (trainer.resume=PATH)");
  }
  return parsed.output;
}

/**
 * The newest checkpoint under `root` whose state.json reads, and the ones skipped on the
 * way (newest first, with why): resume=auto falls back past a damaged newest checkpoint.
 */
export function latestReadableCheckpoint(root: string): { path?: string; state?: TrainerState; skipped: { path: string; reason: string }[] } {
  const skipped: { path: string; reason: string }[] = [];
  for (const c of listCheckpoints(root).reverse()) {
    try {
      return { path: c.path, state: readTrainerState(c.path), skipped };
    } catch (err) {
      skipped.push({ path: c.path, reason: (err as Error).message });
    }
  }
  return { skipped };
}

/** Copies a checkpoint part's weights into live tensors (in place, so every view sees them) and returns the optimizer state. */
export function loadPart(dir: string, into: Map<string, Tensor>): { tensors: Map<string, Tensor>; metadata: Record<string, string> } {
  const stored = existsSync(join(dir, safetensors.INDEX_FILE)) ? safetensors.loadSharded(dir) : safetensors.load(join(dir, "model.safetensors"));
  try {
    for (const [name, t] of into) {
      const src = stored.get(name);
      if (!src) throw new VagenError(`${dir}: checkpoint lacks weight "${name}"`, loraMismatchHint(name, stored));
      // copy_ broadcasts: a rank-1 adapter would fill a rank-8 one without a word
      if (src.shape.join(",") !== t.shape.join(",")) {
        throw new VagenError(`${dir}: weight "${name}" has shape [${src.shape.join(", ")}], the run's has [${t.shape.join(", ")}]`, loraMismatchHint(name, stored));
      }
      torch.noGrad(() => t.copy_(src));
    }
    // An adapter the run would not load (another target_modules) would be dropped silently.
    const dropped = [...stored.keys()].find((name) => isLoraName(name) && !into.has(name));
    if (dropped) throw new VagenError(`${dir}: checkpoint holds adapter weight "${dropped}", which the run has no module for`, "resume with the actor.lora_rank and actor.target_modules it was trained with");
  } finally {
    for (const t of stored.values()) t.dispose();
  }
  const optPath = join(dir, "optimizer.safetensors");
  const header = safetensors.readHeader(optPath);
  return { tensors: safetensors.load(optPath), metadata: header.metadata };
}

/** A LoRA adapter's weight, by PEFT's names. */
function isLoraName(name: string): boolean {
  return /\.lora_[AB]\.weight$/.test(name);
}

/** Why a weight may be missing: the checkpoint was trained with LoRA and the run is not, or the other way round. */
function loraMismatchHint(missing: string, stored: ReadonlyMap<string, Tensor>): string | undefined {
  const storedLora = [...stored.keys()].some(isLoraName);
  if (isLoraName(missing) && !storedLora) return "the checkpoint holds full weights (trained without LoRA): resume with actor.lora_rank=0, or start afresh";
  if (!isLoraName(missing) && storedLora) return "the checkpoint holds a LoRA adapter: resume with the actor.lora_rank and actor.target_modules it was trained with";
  if (isLoraName(missing)) return "the checkpoint's adapter covers other modules or another rank: resume with the actor.lora_rank and actor.target_modules it was trained with";
  return undefined;
}

/** The default CPU generator's state as hex, and back. */
export function torchRngHex(): string {
  const t = torch.getRngState("cpu");
  const hex = Buffer.from(t.toArray() as Uint8Array).toString("hex");
  t.dispose();
  return hex;
}

export function restoreTorchRng(hex: string): void {
  const bytes = Uint8Array.from(Buffer.from(hex, "hex"));
  const t = torch.tensor(bytes, [bytes.length], { dtype: "u8" });
  torch.setRngState(t, "cpu");
  t.dispose();
}
