/**
 * What a run logs where, decided once from the config and the environment before any
 * model is loaded, so that a W&B run without its key or a Hub upload without a token
 * fails in the first second instead of after the model has loaded.
 *
 * TensorBoard: `trainer.tensorboard`, when set, decides (an explicit switch beats the
 * list, so `trainer.tensorboard=false` on the command line turns it off whatever the file
 * lists); when null, `trainer.logger` decides. `console` is the CLI's line log, shown
 * whatever the list says (what a terminal shows is the view's business, not the
 * trainer's); it is accepted so VAGEN's configs load.
 *
 * W&B: WANDB_MODE (online, offline, disabled; W&B's older names run and dryrun too),
 * WANDB_API_KEY (online only), WANDB_BASE_URL (a self-hosted server), WANDB_PROJECT and
 * WANDB_ENTITY (the config's project_name wins over WANDB_PROJECT, as the project
 * passed to W&B's own init beats its variable).
 *
 * Hub: HF_TOKEN, HF_ENDPOINT (a mirror or a self-hosted hub; default the library's).
 * Both secrets are registered with the redaction, so no message or file ever shows them.
 */
import { basename } from "node:path";
import { registerSecret } from "../../config/redact.ts";
import { VagenError } from "../../core/errors.ts";
import type { CheckedTrainConfig } from "../config.ts";

/** W&B's public API server; WANDB_BASE_URL replaces it. */
export const WANDB_DEFAULT_BASE_URL = "https://api.wandb.ai";

export interface WandbSettings {
  mode: "online" | "offline";
  /** Online only. */
  apiKey?: string;
  baseUrl: string;
  project: string;
  /** undefined: the API key's default entity (the server says which). */
  entity?: string;
  /** The run's display name. */
  name: string;
}

export interface HubSettings {
  token: string;
  /** undefined: the library's default hub. */
  endpoint?: string;
  repoId: string;
  private: boolean;
  every: number;
  /** Folder prefix inside the repo: `<project>/<experiment>`, VAGEN's layout. */
  pathPrefix: string;
  waitAtEndS: number;
}

export interface LoggerPlan {
  outputDir: string;
  tensorboard: boolean;
  wandb?: WandbSettings;
  hub?: HubSettings;
  logImages: { enable: boolean };
  valGenerations: number;
  flushS: number;
  /** The base model, which the Hub export copies tokenizer and config files from. */
  modelDir: string;
  /** The config as W&B shows it (redacted by whoever writes it). */
  config: CheckedTrainConfig["config"];
  file: string;
}

type Env = Record<string, string | undefined>;

/** W&B's mode names, new and old. */
function wandbMode(value: string | undefined, file: string): "online" | "offline" | "disabled" {
  const mode = (value ?? "online").trim().toLowerCase();
  if (mode === "online" || mode === "run" || mode === "") return "online";
  if (mode === "offline" || mode === "dryrun") return "offline";
  if (mode === "disabled") return "disabled";
  throw new VagenError(`${file}: environment variable WANDB_MODE: got "${value}", expected online, offline or disabled`);
}

export function planLoggers(checked: CheckedTrainConfig, env: Env = process.env): LoggerPlan {
  const { config, file } = checked;
  const { trainer } = config;
  const listed = new Set(trainer.logger);
  const project = trainer.project_name ?? env.WANDB_PROJECT ?? "vagen";
  const experiment = trainer.experiment_name ?? basename(trainer.output_dir);
  const plan: LoggerPlan = {
    outputDir: trainer.output_dir,
    tensorboard: trainer.tensorboard ?? listed.has("tensorboard"),
    logImages: { enable: trainer.log_image.enable },
    valGenerations: trainer.log_val_generations,
    flushS: trainer.logger_flush_s,
    modelDir: config.model.model_dir,
    config,
    file,
  };
  if (listed.has("wandb")) {
    const mode = wandbMode(env.WANDB_MODE, file);
    if (mode !== "disabled") {
      const apiKey = env.WANDB_API_KEY?.trim() || undefined;
      registerSecret(apiKey);
      if (mode === "online" && apiKey === undefined) {
        throw new VagenError(
          `${file}: key "trainer.logger" lists wandb, but the environment variable WANDB_API_KEY is not set`,
          "export WANDB_API_KEY (your key from W&B's settings page), log offline with WANDB_MODE=offline, or drop wandb from trainer.logger",
        );
      }
      const baseUrl = (env.WANDB_BASE_URL?.trim() || WANDB_DEFAULT_BASE_URL).replace(/\/+$/, "");
      if (!/^https?:\/\/[^\s]+$/.test(baseUrl)) throw new VagenError(`${file}: environment variable WANDB_BASE_URL: got "${baseUrl}", expected an http(s) URL such as https://wandb.example.com`);
      plan.wandb = { mode, apiKey, baseUrl, project, entity: env.WANDB_ENTITY?.trim() || undefined, name: experiment };
    }
  }
  const hub = config.huggingface_hub;
  if (hub.hf_save_freq !== null) {
    const token = env.HF_TOKEN?.trim() || undefined;
    registerSecret(token);
    if (token === undefined) {
      throw new VagenError(
        `${file}: key "huggingface_hub.hf_save_freq" is ${hub.hf_save_freq}, but the environment variable HF_TOKEN is not set`,
        "export HF_TOKEN (a token with write access), or set huggingface_hub.hf_save_freq=null",
      );
    }
    const endpoint = env.HF_ENDPOINT?.trim().replace(/\/+$/, "") || undefined;
    if (endpoint !== undefined && !/^https?:\/\/[^\s]+$/.test(endpoint)) throw new VagenError(`${file}: environment variable HF_ENDPOINT: got "${endpoint}", expected an http(s) URL`);
    plan.hub = { token, endpoint, repoId: hub.repo_id, private: hub.private, every: hub.hf_save_freq, pathPrefix: `${safeSegment(project)}/${safeSegment(experiment)}`, waitAtEndS: hub.wait_at_end_s };
  }
  return plan;
}

/** A name as one folder of a repo path (no slashes, no dot-only names). */
function safeSegment(name: string): string {
  const s = name.replace(/[^\w.-]+/g, "_");
  return /^\.+$/.test(s) ? "_" : s;
}
