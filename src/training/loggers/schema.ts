/**
 * The config keys of a run's loggers, as VAGEN (over verl) names them:
 *
 *   trainer:
 *     logger: [console, tensorboard, wandb]   verl's list of backends
 *     project_name: vagen                     W&B project (and the Hub upload's folder)
 *     experiment_name: null                   W&B run name (null: the output folder's name)
 *     log_val_generations: 32                 validation episodes in the W&B table per validation
 *     log_image: {enable: false, max_pending: 2, png_compress_level: 0}
 *     logger_flush_s: 60                      how long the end of a run waits for W&B
 *   huggingface_hub:
 *     hf_save_freq: null                      upload every this many steps (a multiple of trainer.save_freq)
 *     repo_id: vagen-training                 "user/name", or a name the token's user is put in front of
 *     private: false
 *     upload_contents: [hf_model]
 *     wait_at_end_s: 600                      how long the end of a run waits for pending uploads
 *
 * A leaf module (valibot only), so the train config can import it without a cycle
 * through the loggers that read the config.
 */
import * as v from "valibot";

/** The backends `trainer.logger` may list (verl's names; console is the CLI's line log). */
export const LOGGER_BACKENDS = ["console", "tensorboard", "wandb"] as const;
export type LoggerBackend = (typeof LOGGER_BACKENDS)[number];

const nonNegativeInt = (what: string) => v.pipe(v.number(), v.integer(`${what}: an integer`), v.minValue(0, `${what} >= 0`));
const nonNegative = v.pipe(v.number(), v.check((x) => Number.isFinite(x) && x >= 0, "a finite number >= 0"));

/** VAGEN's trainer.log_image: sample observation images in the W&B validation table. */
export const LogImageSection = v.strictObject({
  enable: v.optional(v.boolean(), false),
  /** Accepted for VAGEN's configs (its image dumps in flight); vagen writes the images at once. */
  max_pending: v.optional(nonNegativeInt("max_pending"), 2),
  /** Accepted for VAGEN's configs; images are written at vagen's one PNG setting. */
  png_compress_level: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(9)), 0),
});

/** The trainer keys the loggers read; spread into the train config's TrainerSection. */
export const loggerTrainerEntries = {
  logger: v.optional(v.pipe(v.array(v.picklist(LOGGER_BACKENDS, `one of ${LOGGER_BACKENDS.join(", ")}`)), v.check((l) => new Set(l).size === l.length, "a list without repeats")), ["console", "tensorboard"]),
  /** TensorBoard on (true) or off (false) whatever `logger` lists; null: as `logger` says. */
  tensorboard: v.optional(v.nullable(v.boolean()), null),
  /** W&B's project; null: $WANDB_PROJECT, else "vagen". */
  project_name: v.optional(v.nullable(v.pipe(v.string(), v.minLength(1))), null),
  /** W&B's run name; null: the output folder's name. */
  experiment_name: v.optional(v.nullable(v.pipe(v.string(), v.minLength(1))), null),
  log_val_generations: v.optional(nonNegativeInt("log_val_generations"), 32),
  log_image: v.optional(LogImageSection, {}),
  logger_flush_s: v.optional(nonNegative, 60),
};

/** VAGEN's huggingface_hub section: the exported model uploaded every hf_save_freq steps. */
export const HuggingFaceHubSection = v.strictObject({
  hf_save_freq: v.optional(v.nullable(v.pipe(v.number(), v.integer("an integer"), v.minValue(1, "hf_save_freq >= 1"))), null),
  repo_id: v.optional(v.pipe(v.string(), v.regex(/^(?:[\w.-]+\/)?[\w.-]+$/, 'a repo id: "name" or "user/name"')), "vagen-training"),
  private: v.optional(v.boolean(), false),
  /** VAGEN uploads a subset of {model, optimizer, extra, hf_model}; vagen uploads the exported model only. */
  upload_contents: v.optional(v.array(v.picklist(["hf_model"], "hf_model (the exported Hugging Face model; vagen uploads nothing else)")), ["hf_model"]),
  wait_at_end_s: v.optional(nonNegative, 600),
});
export type HuggingFaceHubSection = v.InferOutput<typeof HuggingFaceHubSection>;
