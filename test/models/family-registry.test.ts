/**
 * The model-family registry: a directory is loaded by the family registered for its
 * config.json `model_type`, and nothing else; an unknown type is a one-line error naming
 * the file, the key and the types there are.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { main } from "../../src/cli/main.ts";
import { loadEngine } from "../../src/engine/load.ts";
import { MODEL_FAMILIES } from "../../src/models/family-list.ts";
import { loadModelFamily, registerModelFamily, supportedModelTypes } from "../../src/models/index.ts";
import { Qwen25VLChatModel } from "../../src/models/qwen2_5_vl/chat-model.ts";
import { FIXTURE_DIR, refsJson } from "./fixture.ts";

const dir = mkdtempSync(join(tmpdir(), "vagen-family-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

test("an unknown model_type names the file, the key and the registered types", () => {
  writeFileSync(join(dir, "config.json"), JSON.stringify({ model_type: "llama" }));
  expect(() => loadModelFamily(dir, { device: "cpu", dtype: "f32" })).toThrow(
    `${join(dir, "config.json")}: key "model_type": got "llama", expected one of ${supportedModelTypes().join(", ")}`,
  );
  expect(supportedModelTypes()).toContain("qwen2_5_vl");
  expect(supportedModelTypes()).toContain("qwen3");
});

test("the families `vagen doctor` lists are the registered ones, and its report lists them", async () => {
  // before this file registers its own test family
  expect(MODEL_FAMILIES.map((f) => f.modelType).sort()).toEqual(supportedModelTypes().filter((t) => t !== "vagen_test_family").sort());
  const out: string[] = [];
  const write = process.stdout.write.bind(process.stdout);
  process.stdout.write = ((s: string) => (out.push(String(s)), true)) as typeof process.stdout.write;
  try {
    await main(["bun", "vagen", "doctor"]);
  } finally {
    process.stdout.write = write;
  }
  const text = out.join("");
  for (const f of MODEL_FAMILIES) expect(text).toContain(`${f.modelType.padEnd(11)} ${f.name}`);
});

test("a registered family loads its model_type, and the engine runs it through the seam alone", async () => {
  const calls: string[] = [];
  registerModelFamily("vagen_test_family", (d, opts) => {
    calls.push(d);
    // The test family is Qwen2.5-VL from the fixture: what matters is who gets called.
    return Qwen25VLChatModel.load(FIXTURE_DIR, opts);
  });
  writeFileSync(join(dir, "config.json"), JSON.stringify({ model_type: "vagen_test_family" }));
  const loaded = loadEngine(dir, { device: "cpu", dtype: "f32", max_seq_len: 256, kv_cache_gib: 0.01, max_slots: 2 });
  try {
    expect(calls).toEqual([dir]);
    const c = refsJson().cases.text!;
    const r = await loaded.engine.generate({ prompt: { tokenIds: [...c.input_ids!], images: [] }, sampling: { temperature: 0, maxNewTokens: 4, ignoreStopTokens: true } });
    expect(r.tokenIds).toEqual(c.greedy!.slice(0, 4));
  } finally {
    await loaded.close();
  }
});
