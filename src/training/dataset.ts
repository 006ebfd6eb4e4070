/**
 * The env dataset: VAGEN's list of env specs, each `n_envs` instances with seeds from its
 * directive (the same seeds `vagen eval` gives, via planEnvSpecs), drawn in batches of
 * `train_batch_size` items from a permutation redrawn each epoch (verl's RandomSampler
 * with `drop_last`, seeded here so a run is reproducible and resumable).
 *
 * The position (epoch, cursor) is all the state there is. `next` advances it when a step
 * draws its items, before the rollout; a step abandoned by an interrupt seeks back to the
 * position it started from (runTraining does), so a checkpoint always stores the first
 * item of the next step to take, and a resumed run draws the same batches an
 * uninterrupted run would.
 */
import { Rng } from "../core/rng.ts";
import { planEnvSpecs, type EnvSpec } from "../core/env-plan.ts";
import type { TrainEnvSpec } from "./config.ts";

/** One dataset item: an env instance of a spec, with its seed. */
export interface DatasetItem {
  /** The spec's tag under data.train / data.val. */
  tag: string;
  spec: TrainEnvSpec;
  seed: number;
}

export interface DatasetPosition {
  epoch: number;
  /** Items of this epoch's permutation already handed out. */
  cursor: number;
}

interface TaggedSpec extends EnvSpec {
  tag: string;
  train: TrainEnvSpec;
}

/** Every item of a spec mapping, spec by spec in key order. */
export function datasetItems(specs: Record<string, TrainEnvSpec>, baseSeed: number, where = "data"): DatasetItem[] {
  const tagged: TaggedSpec[] = Object.entries(specs).map(([tag, s]) => ({
    tag,
    train: s,
    name: s.name,
    config: s.config,
    count: s.n_envs,
    seed: s.seed,
    seedList: s.seed_list,
    split: s.split,
    maxTurns: s.max_turns,
  }));
  return planEnvSpecs(tagged, baseSeed, (i) => `${where}.${tagged[i]!.tag}`).map((e) => ({ tag: e.spec.tag, spec: e.spec.train, seed: e.seed }));
}

export class EnvDataset {
  #order: number[] = [];
  #position: DatasetPosition = { epoch: 0, cursor: 0 };

  constructor(
    readonly items: readonly DatasetItem[],
    private readonly opts: { shuffle: boolean; seed: number },
  ) {
    this.#order = this.#permutation(0);
  }

  get position(): DatasetPosition {
    return { ...this.#position };
  }

  /** Jump to a stored position (resume). */
  seek(position: DatasetPosition): void {
    this.#position = { ...position };
    this.#order = this.#permutation(position.epoch);
  }

  /** The next `size` items; an epoch's remainder smaller than a batch is skipped (drop_last). */
  next(size: number): DatasetItem[] {
    if (size > this.items.length) throw new Error(`a batch of ${size} items from a dataset of ${this.items.length}`);
    if (this.#position.cursor + size > this.#order.length) this.seek({ epoch: this.#position.epoch + 1, cursor: 0 });
    const batch = this.#order.slice(this.#position.cursor, this.#position.cursor + size).map((i) => this.items[i]!);
    this.#position.cursor += size;
    return batch;
  }

  #permutation(epoch: number): number[] {
    const order = Array.from({ length: this.items.length }, (_, i) => i);
    if (!this.opts.shuffle) return order;
    const rng = new Rng(this.opts.seed, epoch + 1);
    for (let i = order.length - 1; i > 0; i--) {
      const j = rng.int(i + 1);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    return order;
  }
}
