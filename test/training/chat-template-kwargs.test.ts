/**
 * data.apply_chat_template_kwargs: every prompt a training run renders gets these keyword
 * arguments, VAGEN's default turning Qwen3's thinking mode off. The prompts equal
 * transformers' apply_chat_template with the same arguments (the fixture's references).
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { loadEngine } from "../../src/engine/load.ts";
import { loadModelFamily } from "../../src/models/index.ts";
import { sftLoadOptions } from "../../src/sft/trainer.ts";
import { loadTrainConfig } from "../../src/training/config.ts";
import { disposeModels, loadModels } from "../../src/training/models.ts";
import { refsJson } from "../models/fixture.ts";

const CONFIG = join(import.meta.dir, "digit.yaml");
const QWEN3_DIR = join(import.meta.dir, "..", "fixtures", "qwen3_tiny");
const refs = refsJson(QWEN3_DIR);
const user = (text: string) => [{ role: "user" as const, content: [{ type: "text" as const, text }] }];

describe("data.apply_chat_template_kwargs", () => {
  test("VAGEN's default, enable_thinking false: the trainer's prompts are transformers' non-thinking ones", async () => {
    const { config } = await loadTrainConfig(CONFIG, [`model.model_dir=${QWEN3_DIR}`, "trainer.output_dir=/nonexistent/unused"]);
    expect(config.data.apply_chat_template_kwargs).toEqual({ enable_thinking: false });
    const models = loadModels(config, false, false);
    try {
      const noThink = refs.cases.no_think!;
      expect(models.actor.family.buildPrompt(user("Count to five.")).tokenIds).toEqual(noThink.input_ids!);
    } finally {
      await disposeModels(models);
    }
  });

  test("an explicit {} renders with the template's own defaults (Qwen3: thinking)", async () => {
    const { config } = await loadTrainConfig(CONFIG, [`model.model_dir=${QWEN3_DIR}`, "trainer.output_dir=/nonexistent/unused", "data.apply_chat_template_kwargs={}"]);
    const models = loadModels(config, false, false);
    try {
      expect(models.actor.family.buildPrompt(user("Describe a sunny day.")).tokenIds).toEqual(refs.cases.single!.input_ids!);
    } finally {
      await disposeModels(models);
    }
  });

  test("the engine's chat_template_kwargs (eval's engine backend, serve's flag) reach the prompts", async () => {
    const loaded = loadEngine(QWEN3_DIR, { device: "cpu", chat_template_kwargs: { enable_thinking: false } });
    try {
      expect(loaded.builder.buildPrompt(user("Count to five.")).tokenIds).toEqual(refs.cases.no_think!.input_ids!);
    } finally {
      await loaded.close();
    }
  });
});

describe("trainer.model_adapter (VAGEN's key)", () => {
  test("auto takes the model's family; a named adapter must be the family's; anything else is refused by the schema", async () => {
    const qwen3 = [`model.model_dir=${QWEN3_DIR}`, "trainer.output_dir=/nonexistent/unused"];
    for (const adapter of ["auto", "qwen"]) {
      const models = loadModels((await loadTrainConfig(CONFIG, [...qwen3, `trainer.model_adapter=${adapter}`])).config, false, false);
      expect(models.actor.family.family).toBe("qwen3");
      await disposeModels(models);
    }
    const { config } = await loadTrainConfig(CONFIG, [...qwen3, "trainer.model_adapter=glm"]);
    expect(() => loadModels(config, false, false)).toThrow(`key "trainer.model_adapter": got "glm", but ${QWEN3_DIR} is qwen3 (adapter qwen)`);
    await expect(loadTrainConfig(CONFIG, [...qwen3, "trainer.model_adapter=llama"])).rejects.toThrow(/trainer\.model_adapter/);
  });
});

describe("vagen sft's data.apply_chat_template_kwargs", () => {
  test("unset: VAGEN's enable_thinking false, as the RL run after it; {} the template's own defaults", () => {
    const config = { device: "cpu", dtype: "f32" as const, data: { layout: "no_concat" as const, eval_dirs: [], only_success: true } };
    const render = (opts: ReturnType<typeof sftLoadOptions>, text: string) => {
      const family = loadModelFamily(QWEN3_DIR, opts);
      try {
        return family.buildPrompt(user(text)).tokenIds;
      } finally {
        family.dispose();
      }
    };
    expect(render(sftLoadOptions(config), "Count to five.")).toEqual(refs.cases.no_think!.input_ids!);
    expect(render(sftLoadOptions({ ...config, data: { ...config.data, apply_chat_template_kwargs: {} } }), "Describe a sunny day.")).toEqual(refs.cases.single!.input_ids!);
  });
});
