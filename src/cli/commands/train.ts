/**
 * `vagen train CONFIG.yaml [key.path=value ...]`: PPO (with a critic) or GRPO over the
 * config's envs, in this process. Thin: check the config (everything that can be checked
 * without a model), run the loop with a view of its events, map the ending to an exit
 * status (130 after Ctrl-C).
 */
import type { Command } from "commander";
import { VagenError } from "../../core/errors.ts";
import type { TrainEventListener } from "../../training/events.ts";
import * as torch from "../../torch/index.ts";
import { loadTrainConfig, type TrainConfig } from "../../training/config.ts";
import { rankPlacement, type RankContext } from "../../training/ranks.ts";
import { runTraining } from "../../training/trainer.ts";
import { type ImageMode, parseImageMode, resolveImageMode } from "../../tui/image/index.ts";
import { startTrainDashboard } from "../../tui/train-dashboard.ts";
import { trainLogRenderer } from "../render/train-lines.ts";
import { abortOnStopSignals, onStopSignals, signalKey, STOP_SIGNALS } from "../signals.ts";

const INTERRUPTED_EXIT = STOP_SIGNALS.SIGINT;

export function register(program: Command): void {
  program
    .command("train")
    .description("train a model with multi-turn RL (PPO with a critic, GRPO, ...) on environments; checkpoints resume after any crash")
    .argument("<config>", "train config YAML (see examples/train/)")
    .argument("[overrides...]", "key.path=value overrides, e.g. algorithm.adv_estimator=grpo trainer.total_steps=10")
    .option("--quiet-phases", "only the per-step summary lines, not a line per phase")
    .option("--no-tui", "plain lines instead of the dashboard, even on a terminal")
    .option("--image <mode>", "how the dashboard draws observation images: auto, kitty, iterm2, sixel, blocks, none", parseImageModeFlag, "auto")
    .action(async (file: string, overrides: string[], opts: TrainOptions) => {
      await trainCommand(file, overrides, opts);
    });
}

interface TrainOptions {
  quietPhases?: boolean;
  tui: boolean;
  image: ImageMode;
}

function parseImageModeFlag(value: string): ImageMode {
  try {
    return parseImageMode(value);
  } catch (err) {
    throw new VagenError((err as Error).message);
  }
}

async function trainCommand(file: string, overrides: string[], opts: TrainOptions): Promise<void> {
  const checked = await loadTrainConfig(file, overrides);
  const { n_gpus_per_node: perNode, nnodes } = checked.config.trainer;
  const launchedAsRank = process.env.WORLD_SIZE !== undefined && process.env.RANK !== undefined;
  if (!launchedAsRank && perNode * nnodes > 1) {
    if (nnodes > 1) {
      throw new VagenError(
        `${checked.file}: key "trainer.nnodes": got ${nnodes}; a run on several machines starts one process per GPU on each with torchrun's variables (MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK)`,
        "see docs/distributed.md",
      );
    }
    // The placement the ranks will make, checked once here rather than failed by each rank.
    placeRank(checked.file, checked.config, { localRank: 0, localWorld: perNode });
    const code = await launchLocalRanks(perNode, checked.config.trainer.dist_timeout_s);
    if (code !== 0) throw new VagenError(`a rank of the ${perNode}-rank run exited with status ${code}`, undefined, code);
    return;
  }
  const ranks = launchedAsRank ? joinProcessGroup(checked.file, checked.config) : undefined;
  // Data parallel: rank 0 shows the run; the other ranks say only what goes wrong.
  if (ranks && ranks.rank > 0) opts = { ...opts, tui: false, quietPhases: true };
  const lines = () => trainLogRenderer(process.stderr, { phases: !opts.quietPhases });
  // A terminal gets the dashboard (Ctrl-C there asks before stopping); pipes, CI and --no-tui get lines.
  const dashboard =
    opts.tui && process.stdout.isTTY && process.stdin.isTTY
      ? startTrainDashboard({
          protocol: resolveImageMode(opts.image),
          outputDir: checked.config.trainer.output_dir,
          onSaveAndStop: () => signals.stop("SIGINT"),
          onStop: () => void dashboard?.close().then(() => process.exit(INTERRUPTED_EXIT)),
          // q leaves the dashboard; the run goes on with lines.
          onQuit: () => (view = lines()),
        })
      : undefined;
  let view: TrainEventListener = ranks && ranks.rank > 0 ? rankErrorsOnly(ranks.rank) : (dashboard?.onEvent ?? lines());
  // First signal: stop at the next phase boundary (a step before its updates is abandoned
  // and retaken on resume, a step in its updates is finished), then save the last finished
  // step. Second signal: leave at once; the checkpoints already on disk are intact. The
  // trainer yields between micro-batches and engine steps, so this runs within one of them.
  const controller = new AbortController();
  const signals = abortOnStopSignals(controller, {
    first: (signal) =>
      view({
        type: "warning",
        step: 0,
        code: "interrupted",
        message: `${signal}: stopping: a step not yet in its updates is abandoned (resume retakes it), one in its updates is finished; then the last finished step is saved (${signalKey(signal)} again to leave at once)`,
      }),
    again: (signal) => view({ type: "warning", step: 0, code: "interrupted", message: `${signal} again: leaving now without saving; the checkpoints on disk are intact` }),
  });
  try {
    const result = await runTraining(checked, { onEvent: (event) => view(event), signal: controller.signal, ...(ranks ? { ranks } : {}) });
    if (dashboard) {
      await dashboard.close();
      process.stdout.write(dashboard.summary());
    }
    // The exit status travels as an error: main() sets the process's status from it.
    if (result.reason === "interrupted") {
      throw new VagenError(
        `interrupted${signals.received ? ` by ${signals.received}` : ""} after step ${result.step}${result.checkpoint ? `; checkpoint ${result.checkpoint}` : ""}`,
        "run the same command again to resume (trainer.resume=auto)",
        STOP_SIGNALS[signals.received ?? "SIGINT"],
      );
    }
  } finally {
    await dashboard?.close();
    signals.off();
    ranks?.group?.dispose();
  }
}

/**
 * This process's rank in a run launched with torchrun's variables: Gloo on the CPU; on
 * GPUs NCCL, or Gloo where ranks share a GPU or the shim has no NCCL (rankPlacement).
 */
function joinProcessGroup(file: string, config: TrainConfig): RankContext {
  const env = process.env;
  const localRank = Number(env.LOCAL_RANK ?? env.RANK ?? 0);
  const localWorld = Number(env.LOCAL_WORLD_SIZE ?? Math.ceil(Number(env.WORLD_SIZE ?? 1) / config.trainer.nnodes));
  const placement = placeRank(file, config, { localRank, localWorld });
  const group = torch.distributed.processGroupFromEnv({ backend: placement.backend, timeoutMs: config.trainer.dist_timeout_s * 1000, ...(placement.backend === "nccl" ? { device: placement.gpu } : {}) });
  return { rank: group.rank, world: group.size, group, device: placement.device };
}

/** rankPlacement for this machine, its refusal as a VagenError naming the config file. */
function placeRank(file: string, config: TrainConfig, at: { localRank: number; localWorld: number }): ReturnType<typeof rankPlacement> {
  const cuda = config.model.device === "cuda";
  try {
    return rankPlacement({
      device: cuda ? "cuda" : "cpu",
      backend: config.trainer.dist_backend,
      ...at,
      gpus: cuda ? torch.cuda.deviceCount() : 0,
      // the shim is loaded only where the answer matters
      ncclBuilt: cuda || config.trainer.dist_backend === "nccl" ? torch.distributed.availableBackends().nccl : false,
    });
  } catch (err) {
    throw new VagenError(`${file}: ${(err as Error).message}`);
  }
}

/** A rank other than 0 prints its failure, prefixed, and nothing else (rank 0 shows the run and its warnings). */
function rankErrorsOnly(rank: number): TrainEventListener {
  return (event) => {
    if (event.type === "run_finished" && event.error) process.stderr.write(`[rank ${rank}] ${event.reason}: ${event.error}\n`);
  };
}

/**
 * `trainer.n_gpus_per_node` ranks on this machine: this command again, once per rank,
 * with torchrun's variables set. Signals are passed on; when one rank fails the others
 * are stopped. Returns the first non-zero exit status (0 when all succeeded).
 */
async function launchLocalRanks(count: number, timeoutS: number): Promise<number> {
  const port = await freePort();
  // From source `bun main.ts train ...`; the compiled binary is its own entry point.
  const compiled = Bun.main.startsWith("/$bunfs");
  const command = [process.execPath, ...(compiled ? [] : [Bun.main]), ...process.argv.slice(2)];
  const children = Array.from({ length: count }, (_, rank) =>
    Bun.spawn(command, {
      stdio: ["inherit", "inherit", "inherit"],
      env: { ...process.env, MASTER_ADDR: "127.0.0.1", MASTER_PORT: String(port), WORLD_SIZE: String(count), RANK: String(rank), LOCAL_RANK: String(rank), LOCAL_WORLD_SIZE: String(count) },
    }),
  );
  const offSignals = onStopSignals((signal) => {
    for (const c of children) c.kill(signal);
  });
  try {
    let first = 0;
    await Promise.all(
      children.map(async (child, rank) => {
        const code = await child.exited;
        if (code !== 0 && first === 0) {
          first = code;
          process.stderr.write(`train: rank ${rank} exited with status ${code}; stopping the other ranks\n`);
          // the others would wait for it until trainer.dist_timeout_s; stop them now
          for (const other of children) if (other !== child) other.kill("SIGTERM");
          setTimeout(() => {
            for (const other of children) other.kill("SIGKILL");
          }, Math.min(30, timeoutS) * 1000).unref();
        }
      }),
    );
    return first;
  } finally {
    offSignals();
  }
}

/** A TCP port nothing listens on now (for rank 0's rendezvous store). */
async function freePort(): Promise<number> {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const { port } = server;
  server.stop(true);
  return port;
}
