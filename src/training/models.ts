/**
 * The models a training run holds: the actor (and the engine generating with its very
 * weight tensors), the critic with its value head, the frozen reference; their optimizers.
 */
import type { Tensor } from "../torch/index.ts";
import * as torch from "../torch/index.ts";
import { engineClientFor, type EngineClient } from "../clients/engine-client.ts";
import { VagenError } from "../core/errors.ts";
import { createEngine, type LoadedEngine } from "../engine/index.ts";
import { MODEL_FAMILIES } from "../models/family-list.ts";
import { LoraAdapter, loadModelFamily, type ModelFamily, type ValueHead } from "../models/index.ts";
import type { TrainConfig } from "./config.ts";
import { TrainingModel } from "./forward.ts";
import { loraSettingsOf } from "./lora-config.ts";
import { attachNewAdapter, releaseAdapter } from "./lora.ts";
import type { RankContext } from "./ranks.ts";
import { ParameterOptimizer, trainableWeights, type OptimizerSettings } from "./update.ts";

export interface Models {
  actor: TrainingModel;
  actorOptim: ParameterOptimizer;
  critic?: { model: TrainingModel; head: ValueHead; named: Map<string, Tensor>; optim: ParameterOptimizer };
  reference?: TrainingModel;
  engine: LoadedEngine;
  client: EngineClient;
}

export function optimizerSettings(optim: TrainConfig["actor"]["optim"], totalSteps: number, offload = false): OptimizerSettings {
  const warmupSteps = optim.lr_warmup_steps >= 0 ? optim.lr_warmup_steps : Math.floor(optim.lr_warmup_steps_ratio * totalSteps);
  return {
    lr: optim.lr,
    weightDecay: optim.weight_decay,
    betas: optim.betas,
    eps: optim.eps,
    warmupSteps,
    style: optim.warmup_style,
    minLrRatio: optim.min_lr_ratio,
    totalSteps,
    offload,
  };
}

/** Names of weights holding a NaN or an infinity (empty when all are finite). */
export function nonFiniteWeights(weights: Map<string, Tensor>, limit = 5): string[] {
  const bad: string[] = [];
  for (const [name, t] of weights) {
    if (bad.length >= limit) break;
    if (!torch.tidy(() => t.isfinite().all().item())) bad.push(name);
  }
  return bad;
}

/** `zero`: a data-parallel run's ranks when the optimizers shard their state (trainer.zero_stage 1). */
export function loadModels(config: TrainConfig, useCritic: boolean, useReference: boolean, zero?: RankContext): Models {
  const load = (): ModelFamily =>
    loadModelFamily(config.model.model_dir, { device: config.model.device, dtype: config.model.dtype, chatTemplateVariables: config.data.apply_chat_template_kwargs });
  const actorFamily = load();
  checkModelAdapter(config, actorFamily);
  // With LoRA only the adapter trains (and checkpoints); the base stays frozen.
  const lora = loraSettingsOf(config.actor, config.trainer.seed);
  const adapter = lora ? attachNewAdapter(actorFamily, lora) : undefined;
  const actor = new TrainingModel(actorFamily, adapter && { train: adapter });
  // A NaN in the starting weights would train on silently: every loss NaN, every step skipped.
  const bad = nonFiniteWeights(actor.family.weights);
  if (bad.length) {
    releaseAdapter(actor.family);
    actor.family.dispose();
    throw new VagenError(`${config.model.model_dir}: weights hold NaN or infinite values (${bad.join(", ")})`, "the model directory is corrupt or was saved from a diverged run");
  }
  const actorOptim = new ParameterOptimizer(trainableWeights(actor.weights, actor.family, config.actor.freeze_vision_tower), optimizerSettings(config.actor.optim, config.trainer.total_steps, config.actor.optimizer_offload), zero);
  let critic: Models["critic"];
  if (useCritic) {
    const model = criticModel(config, actor.family, adapter !== undefined, load);
    const head = model.newValueHead(config.critic.value_head_seed);
    // The critic never reads the LM head; leaving it out keeps AdamW from holding its moments.
    const named = new Map([...model.weights].filter(([name]) => name !== "lm_head.weight"));
    for (const [name, t] of head.entries()) named.set(name, t);
    const optim = new ParameterOptimizer(trainableWeights(named, model.family, config.critic.freeze_vision_tower), optimizerSettings(config.critic.optim, config.trainer.total_steps, config.critic.optimizer_offload), zero);
    critic = { model, head, named, optim };
  }
  // A LoRA run's reference is the base itself: the actor's family with the adapter off.
  const reference = useReference ? (adapter ? new TrainingModel(actor.family, { off: adapter }) : new TrainingModel(load())) : undefined;
  const engine = createEngine(actor.family, { ...config.rollout.engine, seed: config.trainer.seed });
  return { actor, actorOptim, critic, reference, engine, client: engineClientFor(engine) };
}

/** `trainer.model_adapter`, when named, must be the loaded family's (VAGEN's key; `auto` takes any). */
function checkModelAdapter(config: TrainConfig, family: ModelFamily): void {
  const wanted = config.trainer.model_adapter;
  const adapter = MODEL_FAMILIES.find((f) => f.modelType === family.family)?.adapter;
  if (wanted === "auto" || wanted === adapter) return;
  family.dispose();
  throw new VagenError(
    `key "trainer.model_adapter": got "${wanted}", but ${config.model.model_dir} is ${family.family} (adapter ${adapter ?? "none"})`,
    "leave it at auto: the family comes from config.json's model_type",
  );
}

/**
 * The critic's model. Without LoRA: a copy of the base, all of it trained. With
 * critic.lora_rank: an adapter of its own (seeded apart from the actor's) over a frozen
 * base; when the actor trains an adapter too, that base is the actor's own family, its
 * weights shared and never written, so a LoRA run holds one copy of the model.
 */
function criticModel(config: TrainConfig, actorFamily: ModelFamily, actorIsLora: boolean, load: () => ModelFamily): TrainingModel {
  const lora = loraSettingsOf(config.critic, config.trainer.seed + 1);
  if (!lora) return new TrainingModel(load());
  if (actorIsLora) return new TrainingModel(actorFamily, { swap: LoraAdapter.create(actorFamily.weights, actorFamily.spec.numLayers, lora, { device: actorFamily.device, dtype: actorFamily.dtype }) });
  const family = load();
  return new TrainingModel(family, { train: attachNewAdapter(family, lora) });
}

export async function disposeModels(m: Models): Promise<void> {
  await m.engine.close();
  m.actorOptim.dispose();
  releaseAdapter(m.actor.family);
  m.actor.family.dispose();
  if (m.critic) {
    m.critic.optim.dispose();
    for (const [, t] of m.critic.head.entries()) t.dispose();
    if (m.critic.model.family === m.actor.family) m.critic.model.ownAdapter?.dispose();
    else {
      releaseAdapter(m.critic.model.family);
      m.critic.model.family.dispose();
    }
  }
  if (m.reference && m.reference.family !== m.actor.family) m.reference.family.dispose();
}
