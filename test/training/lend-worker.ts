/**
 * One rank of a 2-rank Gloo group lending row images (src/training/data-parallel.ts's
 * lendRowImages), started by test/training/lend-images.test.ts:
 *
 *   bun test/training/lend-worker.ts <rank> <port>
 *
 * Row 0 was played by rank 0 (one 2x1 image), row 1 by rank 1 (one 1x2 image), row 2 by
 * rank 0 without images. Each rank runs the other's image row; row 2 moves to rank 1 with
 * nothing to lend. Prints {"rank", "event":"lent", ...} with what each rank then holds.
 */
import * as torch from "../../src/torch/index.ts";
import { fromWireRow, lendRowImages, returnRowImages, toWireRow } from "../../src/training/data-parallel.ts";
import type { TrainingRow } from "../../src/rollout/types.ts";
import { handRow } from "./rows.ts";

const rank = Number(process.argv[2]);
const port = Number(process.argv[3]);
const group = torch.distributed.initProcessGroup({ backend: "gloo", masterAddr: "127.0.0.1", masterPort: port, rank, worldSize: 2, timeoutMs: 10_000, initTimeoutMs: 30_000 });
const ctx = { rank, world: 2, group };

const played: TrainingRow[] = [0, 1, 2].map((i) => ({
  ...handRow({ uid: `train-0-${i}`, prompt: [1, 2, 3], response: [4] }),
  images: i === 2 ? [] : [{ offset: 1, length: 1, grid: [1, 1, 1], image: i === 0 ? { width: 2, height: 1, data: new Uint8Array([1, 2, 3, 4, 5, 6]) } : { width: 1, height: 2, data: new Uint8Array([7, 8, 9, 10, 11, 12]) } }],
}));
const owner = [0, 1, 0];
// this rank's view: its own rows whole, the other's as they arrive over the exchange
const rows = played.map((r, i) => (owner[i] === rank ? r : fromWireRow(toWireRow(r), owner[i]!)));
const borrowed = lendRowImages(ctx, "update/0/images", rows, [
  { row: 0, rank: 1 },
  { row: 1, rank: 0 },
  { row: 2, rank: 1 },
  { row: 0, rank: 0 },
]);
const held = rows.map((r) => r.images.map((m) => ({ offset: m.offset, grid: m.grid, width: m.image.width, height: m.image.height, data: Array.from(m.image.data) })));
let keyLeft = "deleted";
try {
  group.storeGet(`update/0/images/${1 - rank}/${rank}`, 200);
  keyLeft = "still there";
} catch {}
returnRowImages(borrowed);
process.stdout.write(`${JSON.stringify({ rank, event: "lent", held, borrowed: borrowed.length, after: rows.map((r) => r.images.length), keyLeft })}\n`);
group.barrier();
group.dispose();
