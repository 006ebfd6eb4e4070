/**
 * Tensor-library benchmarks: per-op dispatch overhead on small tensors and bf16 matmul
 * throughput. Prints one JSON object; bench/torch_dispatch.py runs the same loops in
 * PyTorch eager for comparison.
 *
 *   bun bench/torch-dispatch.ts [cpu|cuda] [--iters N]
 */
import * as torch from "../src/torch/index.ts";

const device = process.argv[2] === "cuda" ? "cuda" : "cpu";
const itersArg = process.argv.indexOf("--iters");
const iters = itersArg > 0 ? Number(process.argv[itersArg + 1]) : 20000;

function sync(): void {
  if (device === "cuda") torch.cuda.synchronize();
}

/** Mean microseconds per iteration of body, after a warm-up. */
function time(body: () => void, n = iters): number {
  for (let i = 0; i < Math.min(1000, n); i++) body();
  sync();
  const t0 = performance.now();
  for (let i = 0; i < n; i++) body();
  sync();
  return ((performance.now() - t0) * 1000) / n;
}

const a = torch.keep(torch.randn([16], { device }));
const b = torch.keep(torch.randn([16], { device }));
const m = torch.keep(torch.randn([16, 16], { device }));

const results: Record<string, number | string> = { device, iters, torch: torch.torchInfo().torchVersion };

results.add_us = time(() => a.add(b).dispose());
// The usual pattern in model code: ops inside a scope that frees them at its end.
results.add_in_tidy_us = time(() => torch.tidy(() => {
  for (let i = 0; i < 100; i++) a.add(b);
}), Math.floor(iters / 100)) / 100;
results.mul_scalar_us = time(() => a.mul(2).dispose());
results.matmul_16_us = time(() => m.matmul(m).dispose());
results.softmax_us = time(() => m.softmax(-1).dispose());
results.sum_dim_us = time(() => m.sum(1).dispose());
results.view_us = time(() => m.view(256).dispose());
results.add_inplace_us = time(() => void a.add_(b));
results.chain10_tidy_us = time(() => {
  torch.tidy(() => {
    let x = a;
    for (let i = 0; i < 10; i++) x = x.mul(1.0001).add(b);
    return undefined;
  });
}, Math.floor(iters / 10));
torch.setGcBackstop(false);
results.add_no_gc_backstop_us = time(() => a.add(b).dispose());
torch.setGcBackstop(true);

if (device === "cuda") {
  for (const n of [4096, 8192]) {
    const x = torch.keep(torch.randn([n, n], { device, dtype: "bf16" }));
    const y = torch.keep(torch.randn([n, n], { device, dtype: "bf16" }));
    for (let i = 0; i < 3; i++) x.matmul(y).dispose();
    const start = new torch.cuda.Event({ enableTiming: true });
    const end = new torch.cuda.Event({ enableTiming: true });
    const reps = 20;
    start.record();
    for (let i = 0; i < reps; i++) x.matmul(y).dispose();
    end.record();
    const ms = start.elapsedTime(end) / reps;
    results[`bf16_matmul_${n}_tflops`] = (2 * n ** 3) / (ms * 1e-3) / 1e12;
    x.dispose();
    y.dispose();
  }
}

for (const [k, v] of Object.entries(results)) if (typeof v === "number") results[k] = Math.round(v * 1000) / 1000;
console.log(JSON.stringify(results));
