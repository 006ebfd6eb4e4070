/**
 * Qwen3's config.json: the published layouts (transformers 4.5x's top-level rope_theta,
 * 5.x's rope_parameters) normalise to the shared decoder's config, transformers'
 * defaults fill omitted keys, and what vagen does not implement is refused naming the
 * file, the key and the expected value.
 */
import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { loadQwen3Config, parseQwen3Config } from "../../src/models/qwen3/config.ts";

/** The published Qwen3-0.6B config.json (transformers 4.51). */
const QWEN3_0_6B = {
  architectures: ["Qwen3ForCausalLM"],
  attention_bias: false,
  attention_dropout: 0.0,
  bos_token_id: 151643,
  eos_token_id: 151645,
  head_dim: 128,
  hidden_act: "silu",
  hidden_size: 1024,
  initializer_range: 0.02,
  intermediate_size: 3072,
  max_position_embeddings: 40960,
  max_window_layers: 28,
  model_type: "qwen3",
  num_attention_heads: 16,
  num_hidden_layers: 28,
  num_key_value_heads: 8,
  rms_norm_eps: 1e-6,
  rope_scaling: null,
  rope_theta: 1000000,
  sliding_window: null,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  transformers_version: "4.51.0",
  use_cache: true,
  use_sliding_window: false,
  vocab_size: 151936,
};

/** The published Qwen3-8B config.json: untied head, wider. */
const QWEN3_8B = { ...QWEN3_0_6B, hidden_size: 4096, intermediate_size: 12288, num_attention_heads: 32, num_hidden_layers: 36, tie_word_embeddings: false };

describe("Qwen3 config.json", () => {
  test("reads the published 0.6B layout: head_dim from config (q_proj 2048 wide over hidden 1024), tied head, one rotary axis", () => {
    const c = parseQwen3Config(QWEN3_0_6B);
    expect(c.decoder).toEqual({
      vocabSize: 151936,
      hiddenSize: 1024,
      intermediateSize: 3072,
      numLayers: 28,
      numHeads: 16,
      numKvHeads: 8,
      headDim: 128,
      rmsNormEps: 1e-6,
      ropeTheta: 1e6,
      ropeSections: [64],
      tieWordEmbeddings: true,
      qkvBias: false,
      qkNorm: true,
    });
    expect(c.maxPositions).toBe(40960);
    expect(c.eosTokenIds).toEqual([151645]);
  });

  test("reads the 8B layout untied, and transformers 5's rope_parameters (the fixture)", () => {
    expect(parseQwen3Config(QWEN3_8B).decoder).toMatchObject({ hiddenSize: 4096, numHeads: 32, numKvHeads: 8, headDim: 128, tieWordEmbeddings: false });
    const fixture = loadQwen3Config(join(import.meta.dir, "..", "fixtures", "qwen3_tiny"));
    expect(fixture.decoder).toMatchObject({ hiddenSize: 64, numHeads: 4, numKvHeads: 2, headDim: 64, ropeTheta: 1e6, ropeSections: [32], tieWordEmbeddings: true });
  });

  test("omitted keys take transformers' Qwen3Config defaults", () => {
    const { head_dim: _h, rope_theta: _r, tie_word_embeddings: _t, num_key_value_heads: _k, max_position_embeddings: _m, ...bare } = QWEN3_0_6B;
    const c = parseQwen3Config(bare);
    expect(c.decoder).toMatchObject({ headDim: 128, ropeTheta: 10000, tieWordEmbeddings: false, numKvHeads: 16 });
    expect(c.maxPositions).toBe(32768);
  });

  test("names the file, the key and the expectation when something is wrong or unsupported", () => {
    expect(() => parseQwen3Config({ ...QWEN3_0_6B, rope_scaling: { rope_type: "yarn", factor: 4, original_max_position_embeddings: 32768 } }, "q/config.json")).toThrow(
      'q/config.json: key "rope_scaling.rope_type": got "yarn", expected "default" (or no rope_scaling)',
    );
    expect(() => parseQwen3Config({ ...QWEN3_0_6B, attention_bias: true }, "q/config.json")).toThrow('q/config.json: key "attention_bias": got true, expected false');
    expect(() => parseQwen3Config({ ...QWEN3_0_6B, use_sliding_window: true }, "q/config.json")).toThrow('q/config.json: key "use_sliding_window": got true, expected false');
    expect(() => parseQwen3Config({ ...QWEN3_0_6B, num_key_value_heads: 5 }, "q/config.json")).toThrow('key "num_key_value_heads": got 5, expected a divisor of num_attention_heads 16');
    const { hidden_size: _, ...noHidden } = QWEN3_0_6B;
    expect(() => parseQwen3Config(noHidden, "q/config.json")).toThrow('q/config.json: key "hidden_size": got nothing (the key is missing)');
  });
});
