/**
 * Parity of vagen's Qwen3 (text) family with transformers on the committed tiny model
 * (test/fixtures/qwen3_tiny, made by its make_fixture.py; CPU, f32): chat-template prompts
 * rendered and tokenized as apply_chat_template does (thinking mode by default, and
 * `enable_thinking: false`), logits of single-turn and multi-turn prompts and of padded
 * batches (left and right), bf16 within bf16 rounding, 12 greedy tokens by full
 * recompute and through the engine's KV cache; plus tied embeddings, sharded loading,
 * text-only refusals and tensor lifetimes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { ChatMessage } from "../../src/core/chat.ts";
import { VagenError } from "../../src/core/errors.ts";
import { loadEngine } from "../../src/engine/load.ts";
import { loadModelFamily } from "../../src/models/index.ts";
import { Qwen3ChatModel } from "../../src/models/qwen3/chat-model.ts";
import { Qwen3Model } from "../../src/models/qwen3/model.ts";
import * as torch from "../../src/torch/index.ts";
import { fixtureMessages, maxRelativeError, ref } from "./fixture.ts";
import { QWEN3_BATCHES, QWEN3_CASES, QWEN3_DIR, caseError, greedyFromIds, logitsOf, qwen3Refs, rows } from "./qwen3-parity.ts";

const CASES = QWEN3_CASES;
const BATCHES = QWEN3_BATCHES;
const refs = qwen3Refs;

let family: Qwen3ChatModel;
let ledger: { leaked(): number };

beforeAll(() => {
  torch.loadTorch();
  ledger = torch.tensorLedger();
  family = loadModelFamily(QWEN3_DIR, { device: "cpu", dtype: "f32" }) as Qwen3ChatModel;
});

afterAll(() => {
  family.dispose();
  expect(ledger.leaked()).toBe(0);
});

/** The family over the same weights, rendering with `enable_thinking` as the case says. */
function familyFor(name: string): Qwen3ChatModel {
  const kwargs = refs.cases[name]!.template_kwargs;
  if (Object.keys(kwargs).length === 0) return family;
  return new Qwen3ChatModel(family.model, family.tokenizer, family.template, { templateVariables: kwargs });
}

describe("Qwen3 tiny, f32 on the CPU, against transformers", () => {
  test("the registry loads model_type qwen3 as the Qwen3 family: one rotary axis, head_dim from config, tied head", () => {
    expect(family).toBeInstanceOf(Qwen3ChatModel);
    expect(family.family).toBe("qwen3");
    expect(family.spec).toMatchObject({ numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 64, hiddenSize: 64, positionAxes: 1, maxPositions: 4096 });
    // Tied embeddings: the head is the embedding matrix, and the map holds no lm_head.
    expect(family.weights.has("lm_head.weight")).toBe(false);
    expect(family.weights.get("model.layers.1.self_attn.q_proj.weight")!.shape).toEqual([256, 64]);
    expect(family.weights.get("model.layers.1.self_attn.k_norm.weight")!.shape).toEqual([64]);
    expect(family.visionTokenIds).toEqual([]);
    expect(family.isVisionWeight("model.embed_tokens.weight")).toBe(false);
    const im = (t: string) => family.tokenizer.tokenId(t);
    expect([...family.eosTokenIds].sort()).toEqual([im("<|endoftext|>"), im("<|im_end|>")].sort());
  });

  test("the tokenizer encodes as transformers does, think tags as single ids", () => {
    for (const c of refs.tokenizer_checks) expect(family.tokenizer.encode(c.text)).toEqual(c.ids);
  });

  for (const name of CASES) {
    test(`the chat template renders and tokenizes ${name} as apply_chat_template(${JSON.stringify(refs.cases[name]!.template_kwargs)})`, () => {
      const c = refs.cases[name]!;
      const messages = fixtureMessages(QWEN3_DIR, name);
      const builder = familyFor(name);
      const text = builder.template.render(
        messages.map((m) => ({ role: m.role, content: m.content.map((p) => (p.type === "text" ? { type: "text" as const, text: p.text } : { type: "image" as const })) })),
        { addGenerationPrompt: true, variables: c.template_kwargs },
      );
      expect(text).toBe(c.prompt_text!);
      expect(builder.buildPrompt(messages)).toEqual({ tokenIds: c.input_ids!, images: [] });
    });
  }

  test("the multi-turn prompt drops the past reply's reasoning, as Qwen3's template does", () => {
    const c = refs.cases.multi_turn!;
    expect(JSON.stringify(c.messages)).toContain("<think>");
    expect(c.prompt_text).not.toContain("<think>");
    expect(refs.cases.no_think!.prompt_text!.endsWith("<|im_start|>assistant\n<think>\n\n</think>\n\n")).toBe(true);
    expect(refs.cases.single!.prompt_text!.endsWith("<|im_start|>assistant\n")).toBe(true);
  });

  for (const name of [...CASES, ...BATCHES]) {
    test(`logits match for ${name}${name.startsWith("batch") ? " at every real token" : ""}`, () => {
      expect(caseError(family.model, name)).toBeLessThan(1e-4);
    });
  }

  test("12 greedy tokens from the reference ids match transformers (full recompute)", () => {
    for (const name of CASES) {
      const c = refs.cases[name]!;
      expect(c.greedy!.length).toBe(12);
      expect(greedyFromIds(family.model, c.input_ids!, 12)).toEqual(c.greedy!);
    }
  }, 30_000);

  test("the engine (KV cache, batched prefill and decode) gives the same 12 greedy tokens from the chat messages", async () => {
    const loaded = loadEngine(QWEN3_DIR, { device: "cpu", dtype: "f32", max_seq_len: 256, kv_cache_gib: 0.01, max_slots: 8 });
    try {
      const results = await Promise.all(
        CASES.map((name) =>
          loaded.engine.generate({
            prompt: { tokenIds: [...refs.cases[name]!.input_ids!], images: [] },
            sampling: { temperature: 0, maxNewTokens: 12, ignoreStopTokens: true },
          }),
        ),
      );
      results.forEach((r, i) => expect(r.tokenIds).toEqual(refs.cases[CASES[i]!]!.greedy!));
      // From messages through the family's prompt builder (default: thinking mode).
      const fromMessages = await loaded.engine.generate({
        prompt: loaded.model.buildPrompt(fixtureMessages(QWEN3_DIR, "multi_turn")),
        sampling: { temperature: 0, maxNewTokens: 12, ignoreStopTokens: true },
      });
      expect(fromMessages.tokenIds).toEqual(refs.cases.multi_turn!.greedy!);
    } finally {
      await loaded.close();
    }
  }, 60_000);
});

describe("Qwen3 tiny, bf16", () => {
  test("logits are within bf16 rounding of transformers' bf16 logits", () => {
    const bf16 = Qwen3Model.load(QWEN3_DIR, { device: "cpu", dtype: "bf16" });
    try {
      for (const name of ["single", "multi_turn"]) {
        // transformers' bf16 is itself this far from its f32; we must be no further than twice that.
        const scale = maxRelativeError(ref(`${name}.logits_bf16`, QWEN3_DIR).values, ref(`${name}.logits`, QWEN3_DIR).values);
        expect(scale).toBeGreaterThan(1e-3);
        expect(scale).toBeLessThan(5e-2);
        expect(caseError(bf16, name, "logits_bf16")).toBeLessThan(2 * scale);
        expect(caseError(bf16, name, "logits")).toBeLessThan(2 * scale);
      }
    } finally {
      bf16.dispose();
    }
  });
});

describe("Qwen3 loading and refusals", () => {
  test("a sharded checkpoint (model.safetensors.index.json) loads to the same logits", () => {
    const dir = mkdtempSync(join(tmpdir(), "vagen-qwen3-sharded-"));
    try {
      for (const f of ["config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"]) copyFileSync(join(QWEN3_DIR, f), join(dir, f));
      torch.tidy(() => torch.safetensors.saveSharded(dir, torch.safetensors.load(join(QWEN3_DIR, "model.safetensors")), { maxShardBytes: 100_000 }));
      expect(readdirSync(dir).filter((f) => f.endsWith(".safetensors")).length).toBeGreaterThan(2);
      const sharded = loadModelFamily(dir, { device: "cpu", dtype: "f32" }) as Qwen3ChatModel;
      try {
        const ids = rows("multi_turn.input_ids");
        expect(Array.from(logitsOf(sharded.model, ids))).toEqual(Array.from(logitsOf(family.model, ids)));
      } finally {
        sharded.dispose();
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an image in a message is a VagenError naming the message and the family", () => {
    const image = { width: 2, height: 2, data: new Uint8Array(12) };
    const messages: ChatMessage[] = [
      { role: "system", content: [{ type: "text", text: "Look." }] },
      { role: "user", content: [{ type: "text", text: "What is this?" }, { type: "image", image }] },
    ];
    expect(() => family.buildPrompt(messages)).toThrow(VagenError);
    expect(() => family.buildPrompt(messages)).toThrow("message 2 (user) holds an image, but qwen3 is a text-only model family");
    expect(() => family.forwardForTraining({ inputIds: [[1, 2, 3]], images: [[image]] })).toThrow("training batch row 0: 1 image(s) given to qwen3, a text-only model family");
    expect(() => family.promptPositions({ tokenIds: [1, 2], images: [{ image, offset: 0, length: 1, key: "k" }] })).toThrow(VagenError);
  });

  test("text parts of one message are joined, as a text model's template reads a string", () => {
    const split: ChatMessage[] = [{ role: "user", content: [{ type: "text", text: "Describe a " }, { type: "text", text: "sunny day." }] }];
    expect(family.buildPrompt(split).tokenIds).toEqual(refs.cases.single!.input_ids!);
  });

  test("the training forward's hidden states give the reference logits, with gradients reaching q/k norms", () => {
    const ids = rows("batch_left.input_ids");
    const mask = rows("batch_left.attention_mask");
    const qNorm = family.weights.get("model.layers.0.self_attn.q_norm.weight")!;
    qNorm.requiresGrad_(true);
    try {
      const logits = torch.enableGrad(() =>
        torch.tidy(() => {
          const out = family.logits(family.forwardForTraining({ inputIds: ids, attentionMask: mask, images: ids.map(() => []) }));
          out.sum().backward();
          expect(qNorm.grad!.abs().sum().item()).toBeGreaterThan(0);
          return Float64Array.from(out.detach().toFloat32Array());
        }),
      );
      const expected = ref("batch_left.logits", QWEN3_DIR).values;
      const [B, T, V] = ref("batch_left.logits", QWEN3_DIR).shape as [number, number, number];
      const last = (b: number) => (b * T + T - 1) * V; // left padding: every row's last column is real
      for (let b = 0; b < B; b++) {
        expect(maxRelativeError(logits.subarray(last(b), last(b) + V), expected.subarray(last(b), last(b) + V))).toBeLessThan(1e-4);
      }
    } finally {
      qNorm.grad?.dispose();
      qNorm.grad = undefined;
      qNorm.requiresGrad_(false);
    }
  });

  test("outside any scope, forwardBatch leaves only its result alive", () => {
    torch.noGrad(() => {
      const before = torch.liveTensors();
      const hidden = family.model.forwardBatch({ inputIds: rows("batch_right.input_ids"), attentionMask: rows("batch_right.attention_mask") });
      expect(torch.liveTensors()).toBe(before + 1);
      hidden.dispose();
    });
  });
});
