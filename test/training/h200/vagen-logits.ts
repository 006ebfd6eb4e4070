/** Writes vagen's logits of a fixed id sequence on a model directory as JSON (for check_export.py). */
import { writeFileSync } from "node:fs";
import * as torch from "../../../src/torch/index.ts";
import { loadModelFamily } from "../../../src/models/index.ts";

const [dir, out] = process.argv.slice(2);
const family = loadModelFamily(dir!, { device: "cpu", dtype: "f32" });
const ids = [361, 10, 11, 12, 13, 362, 198, 361, 20, 21, 22, 23, 24];
const logits = torch.noGrad(() => torch.tidy(() => family.logits(family.forwardForTraining({ inputIds: [ids], images: [[]] })).to("f32").toFloat32Array()));
const vocab = logits.length / ids.length;
writeFileSync(out!, JSON.stringify({ ids, logits: Array.from({ length: ids.length }, (_, i) => Array.from(logits.subarray(i * vocab, (i + 1) * vocab))) }));
