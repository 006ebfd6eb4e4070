/**
 * Two host-side costs of a vision rollout, on the CPU: attention within a vision tower's
 * windows of mixed lengths (a 12 x 12-patch image cut by 8 x 8-patch windows into 64, 32,
 * 32 and 16), through one (n, n) block-diagonal mask against one batch per length;
 * turning a 96 x 96 render into patches at 28 px a cell (168 x 168) and 14 (84 x 84); and
 * a batch of such renders' patches made on the host against made by libtorch from the
 * resized bytes (device-patches.ts; here the device is the CPU).
 * `OMP_NUM_THREADS=1 bun bench/vision-host.ts [IMAGES]` (default 64 images).
 */
import * as torch from "../src/torch/index.ts";
import { DEFAULT_IMAGE_PROCESSOR, processImages, resizeForPatches } from "../src/models/image-processor.ts";
import { segmentAttention, segmentLayout } from "../src/models/segment-attention.ts";
import { patchesOnDevice } from "../src/models/device-patches.ts";

const images = Number(process.argv[2] ?? 64);
const bounds = [0];
for (let i = 0; i < images; i++) for (const l of [64, 32, 32, 16]) bounds.push(bounds.at(-1)! + l);
const n = bounds.at(-1)!;
const gen = new torch.Generator({ seed: 1, device: "cpu" });
const [q, k, v] = [0, 1, 2].map(() => torch.randn([n, 2, 32], { dtype: "f32", generator: gen })) as [torch.Tensor, torch.Tensor, torch.Tensor];
for (const [name, maskMaxRows] of [["block-diagonal mask", Number.MAX_SAFE_INTEGER], ["one batch per length", 0]] as const) {
  torch.tidy(() => {
    const layout = segmentLayout(bounds, n, "cpu", maskMaxRows);
    segmentAttention(q, k, v, layout, 0.17).sum().item();
    const started = performance.now();
    for (let r = 0; r < 3; r++) segmentAttention(q, k, v, layout, 0.17).sum().item();
    console.log(`window attention, ${images} images (${n} rows, 2 heads of 32), ${name}: ${((performance.now() - started) / 3).toFixed(1)} ms a call`);
  });
}

const render = { width: 96, height: 96, data: new Uint8Array(96 * 96 * 3).map((_, i) => (i * 37) % 256) };
for (const cell of [28, 14]) {
  const side = 6 * cell;
  const options = { ...DEFAULT_IMAGE_PROCESSOR, minPixels: side * side, maxPixels: side * side + cell * 12 + 1 };
  processImages([render], options);
  const started = performance.now();
  for (let i = 0; i < 200; i++) processImages([render], options);
  console.log(`96 x 96 render to ${side} x ${side} patches: ${((performance.now() - started) / 200).toFixed(2)} ms an image`);
}

{
  const side = 168;
  const options = { ...DEFAULT_IMAGE_PROCESSOR, minPixels: side * side, maxPixels: side * side + 28 * 12 + 1 };
  const renders = Array.from({ length: images }, () => render);
  const time = (f: () => void) => {
    f();
    const started = performance.now();
    for (let i = 0; i < 5; i++) f();
    return ((performance.now() - started) / 5).toFixed(1);
  };
  const host = time(() => void torch.tidy(() => { const p = processImages(renders, options); torch.tensor(p.pixelValues, [p.numPatches, p.patchDim], { device: "cpu" }).sum().item(); }));
  const resized = renders.map((img) => resizeForPatches(img, options));
  const onDevice = time(() => void torch.tidy(() => patchesOnDevice(resized, options, "cpu").pixels.sum().item()));
  // The resize as float64 products too (what a GPU runs); on a CPU's one thread, dense.
  const resizedThere = time(() => void torch.tidy(() => patchesOnDevice(renders, options, "cpu", { resize: "device" }).pixels.sum().item()));
  console.log(`${images} renders to a (${images * 144}, 1176) patch tensor: ${host} ms on the host (resize included), ${onDevice} ms from resized bytes through libtorch, ${resizedThere} ms from the renders' bytes with the resize in libtorch`);
}
