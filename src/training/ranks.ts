/**
 * Where this process stands in a data-parallel run (see data-parallel.ts): a leaf of types
 * the rollout, the update and the trainer share without importing each other.
 */
import type { ProcessGroup } from "../torch/distributed.ts";

/** This process's place in the run: rank 0 of 1 when not data parallel. */
export interface RankContext {
  rank: number;
  world: number;
  /** The process group; undefined for a world of one. */
  group?: ProcessGroup;
  /**
   * Where the optimizers shard (trainer.zero_stage; ParameterOptimizer reads it from the
   * context it is given): 1, AdamW's state; 2, its state and the reduced gradients.
   * Absent: stage 1 (a context given for ZeRO without a stage).
   */
  zeroStage?: 1 | 2;
  /**
   * ZeRO: the gradient reducer's bucket size in bytes (trainer.ddp_bucket_mb; 0: one
   * all-reduce after the backward). Parameters are dealt to owners bucket by bucket.
   */
  bucketBytes?: number;
  /** Where this rank's model lives (rankPlacement; absent: model.device). */
  device?: string;
}

export const SINGLE_RANK: RankContext = { rank: 0, world: 1 };

/** What a rank needs to know of its machine to be placed (rankPlacement). */
export interface PlacementInput {
  /** model.device */
  device: "cpu" | "cuda";
  /** trainer.dist_backend */
  backend: "auto" | "nccl" | "gloo";
  localRank: number;
  /** The ranks on this machine (torchrun's LOCAL_WORLD_SIZE). */
  localWorld: number;
  /** GPUs this process sees. */
  gpus: number;
  /** Whether the shim was built with NCCL. */
  ncclBuilt: boolean;
}

/**
 * The process group a rank joins and the device it runs on. On CUDA rank r of a machine
 * takes GPU r mod the GPUs it sees, so more ranks than GPUs share them round-robin. NCCL
 * refuses two ranks on one GPU ("Duplicate GPU detected"), so `auto` is NCCL only when
 * every rank of the machine has a GPU of its own (and the shim has NCCL), else Gloo,
 * which sums CUDA tensors through host memory. Throws, naming the key, when the choice
 * cannot work.
 */
export function rankPlacement(p: PlacementInput): { backend: "nccl" | "gloo"; device: string; gpu?: number } {
  const key = `key "trainer.dist_backend"`;
  if (p.device === "cpu") {
    if (p.backend === "nccl") throw new Error(`${key}: got "nccl", but model.device is cpu (NCCL runs on GPUs; use gloo or auto)`);
    return { backend: "gloo", device: "cpu" };
  }
  if (p.gpus < 1) throw new Error(`model.device is cuda, but this process sees no GPU (rank ${p.localRank} of this machine)`);
  const gpu = p.localRank % p.gpus;
  const device = `cuda:${gpu}`;
  const ownGpu = p.localWorld <= p.gpus;
  if (p.backend === "gloo") return { backend: "gloo", device, gpu };
  if (p.backend === "nccl") {
    if (!p.ncclBuilt) throw new Error(`${key}: got "nccl", but this build of the libtorch shim has no NCCL (use gloo or auto)`);
    if (!ownGpu) throw new Error(`${key}: got "nccl" for ${p.localWorld} ranks on ${p.gpus} GPU(s); NCCL refuses two ranks on one GPU (use gloo or auto)`);
    return { backend: "nccl", device, gpu };
  }
  return { backend: p.ncclBuilt && ownGpu ? "nccl" : "gloo", device, gpu };
}
