/**
 * `vagen doctor [--json]`: what vagen found (Bun, libtorch, the shim and why that one:
 * carried prebuilt, compiled earlier into the cache, or compiled now; CUDA devices) and
 * a numeric self-check (a small matmul and its backward pass against known values).
 * Exits non-zero, with a fix-it hint, when libtorch or the shim can't be loaded or the
 * self-check fails.
 */
import type { Command } from "commander";
import { readFileSync } from "node:fs";
import { VagenError } from "../../core/errors.ts";
import { MODEL_FAMILIES, type FamilyDescription } from "../../models/family-list.ts";
import { VERSION } from "../../version.ts";

export interface DoctorCheck {
  name: string;
  ok: boolean;
  detail: string;
}

export interface CudaDevice {
  index: number;
  name: string;
  totalMemoryBytes: number;
}

export interface DoctorReport {
  ok: boolean;
  vagen: string;
  bun: string;
  platform: string;
  libtorch: { version: string; library: string | null; origin: string | null; root: string | null } | null;
  shim: {
    path: string;
    embedded: boolean;
    /** prebuilt (carried by the binary), cached (compiled earlier), built (compiled by this run) or override (VAGEN_TORCH_SHIM). */
    source: string;
    reason: string;
    key: string | null;
    cudaBuild: boolean;
    fusedAttention: boolean;
    fusedKernels: boolean;
  } | null;
  threads: number | null;
  cuda: { available: boolean; devices: CudaDevice[] };
  checks: DoctorCheck[];
  /** The model families this vagen reads (family-list.ts). */
  models: readonly FamilyDescription[];
  problem: { message: string; hint?: string } | null;
}

/** The libtorch_cpu library actually mapped into this process. */
function loadedLibtorch(): string | null {
  try {
    const maps = readFileSync("/proc/self/maps", "utf8");
    const line = maps.split("\n").find((l) => /libtorch_cpu\.(so|dylib)/.test(l));
    return line ? line.slice(line.indexOf("/")) : null;
  } catch {
    return null;
  }
}

const near = (got: ArrayLike<number>, want: number[]) =>
  got.length === want.length && want.every((w, i) => Math.abs(Number(got[i]) - w) <= 1e-4 * Math.max(1, Math.abs(w)));

type Torch = typeof import("../../torch/index.ts");

/** A 2x3 @ 3x2 matmul, its sum and the gradients, all known by hand. */
function selfCheck(torch: Torch, device: string): DoctorCheck {
  const name = `matmul + backward on ${device}`;
  try {
    return torch.tidy(() => {
      const a = torch.tensor([1, 2, 3, 4, 5, 6], [2, 3], { device, requiresGrad: true });
      const b = torch.tensor([7, 8, 9, 10, 11, 12], [3, 2], { device, requiresGrad: true });
      const c = a.matmul(b);
      const loss = c.sum();
      loss.backward();
      const problems: string[] = [];
      if (!near(c.toArray() as ArrayLike<number>, [58, 64, 139, 154])) problems.push(`A@B = ${c.toList()}`);
      if (!near([loss.item()], [415])) problems.push(`sum = ${loss.item()}`);
      if (!near(a.grad!.toArray() as ArrayLike<number>, [15, 19, 23, 15, 19, 23])) problems.push(`dA = ${a.grad!.toList()}`);
      if (!near(b.grad!.toArray() as ArrayLike<number>, [5, 5, 7, 7, 9, 9])) problems.push(`dB = ${b.grad!.toList()}`);
      return problems.length === 0
        ? { name, ok: true, detail: "A@B = [[58,64],[139,154]], sum 415, dA and dB as expected" }
        : { name, ok: false, detail: `wrong values: ${problems.join("; ")}` };
    });
  } catch (err) {
    return { name, ok: false, detail: (err as Error).message };
  }
}

function cudaDevices(torch: Torch): CudaDevice[] {
  const count = torch.torchInfo().cudaDevices;
  const devices: CudaDevice[] = [];
  for (let index = 0; index < count; index++) {
    const props = torch.cuda.getDeviceProperties(index);
    devices.push({ index, name: props.name, totalMemoryBytes: props.totalMemory });
  }
  return devices;
}

export async function diagnose(): Promise<DoctorReport> {
  const report: DoctorReport = {
    ok: false,
    vagen: VERSION,
    bun: Bun.version,
    platform: `${process.platform}-${process.arch}`,
    libtorch: null,
    shim: null,
    threads: null,
    cuda: { available: false, devices: [] },
    checks: [],
    models: MODEL_FAMILIES,
    problem: null,
  };
  let torch: Torch;
  try {
    torch = await import("../../torch/index.ts");
    const info = torch.torchInfo();
    report.libtorch = { version: info.torchVersion, library: loadedLibtorch(), origin: info.libtorchOrigin ?? null, root: info.libtorchRoot ?? null };
    report.shim = {
      path: info.shim,
      embedded: info.shim.startsWith("/$bunfs/"),
      source: info.shimSource,
      reason: info.shimReason,
      key: info.shimKey ?? null,
      cudaBuild: info.cudaBuild,
      fusedAttention: info.fusedAttention,
      fusedKernels: info.fusedKernels,
    };
    report.threads = info.threads;
  } catch (err) {
    const e = err as VagenError;
    report.problem = { message: e.message, hint: e.hint };
    return report;
  }
  try {
    report.cuda.devices = cudaDevices(torch);
    report.cuda.available = report.cuda.devices.length > 0;
  } catch (err) {
    report.checks.push({ name: "CUDA devices", ok: false, detail: (err as Error).message });
  }
  report.checks.push(selfCheck(torch, "cpu"));
  for (const d of report.cuda.devices) report.checks.push(selfCheck(torch, `cuda:${d.index}`));
  report.ok = report.checks.every((c) => c.ok);
  if (!report.ok) {
    report.problem = {
      message: "the numeric self-check failed",
      hint: "the shim may be built against a different libtorch than the one loaded: rebuild it with `vagen setup --force` (in a checkout: `bun build.ts --force`)",
    };
  }
  return report;
}

const gib = (bytes: number) => `${(bytes / 2 ** 30).toFixed(1)} GiB`;

function printReport(r: DoctorReport): void {
  const rows: [string, string][] = [
    ["vagen", r.vagen],
    ["bun", r.bun],
    ["platform", r.platform],
    ["libtorch", r.libtorch ? `${r.libtorch.version}${r.libtorch.library ? ` (${r.libtorch.library})` : ""}` : "not loaded"],
    ["shim", r.shim ? `${r.shim.source}: ${r.shim.reason}` : "not loaded"],
    ["threads", r.threads === null ? "-" : `${r.threads}${r.threads === 1 ? " (set OMP_NUM_THREADS to use more cores)" : ""}`],
    ["cuda", r.cuda.available ? `${r.cuda.devices.length} device(s)` : "no"],
  ];
  if (r.shim) {
    const traits = [r.shim.cudaBuild ? "CUDA build" : "CPU build", r.shim.fusedAttention && "fused attention", r.shim.fusedKernels && "fused CUDA kernels"];
    rows.splice(5, 0, ["", `${r.shim.embedded ? "embedded in the binary" : r.shim.path} (${traits.filter(Boolean).join(", ")})`]);
  }
  for (const d of r.cuda.devices) rows.push([`  cuda:${d.index}`, `${d.name}, ${gib(d.totalMemoryBytes)}`]);
  for (const c of r.checks) rows.push([c.ok ? "ok" : "FAILED", `${c.name}: ${c.detail}`]);
  MODEL_FAMILIES.forEach((f, i) => rows.push([i === 0 ? "models" : "", `${f.modelType.padEnd(11)} ${f.name}, ${f.inputs}; parity: ${f.parity}`]));
  const width = Math.max(...rows.map(([k]) => k.length));
  for (const [k, v] of rows) process.stdout.write(`${k.padEnd(width)}  ${v}\n`);
}

export function register(program: Command): void {
  program
    .command("doctor")
    .description("check the installation: Bun, libtorch, the shim, CUDA devices, a numeric self-check; list the model families")
    .option("--json", "print the report as JSON")
    .action(async (opts: { json?: boolean }) => {
      const report = await diagnose();
      if (opts.json) process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
      else printReport(report);
      if (report.problem) throw new VagenError(report.problem.message, report.problem.hint);
    });
}
