import { describe, expect, test } from "bun:test";
import { loadQwen25VLConfig, parseQwen25VLConfig } from "../../src/models/qwen2_5_vl/config.ts";
import { canonicalQwen25VLName } from "../../src/models/qwen2_5_vl/weights.ts";
import { FIXTURE_DIR } from "./fixture.ts";

/** The published Qwen2.5-VL-3B-Instruct config.json (flat layout, rope_scaling). */
const PUBLISHED_3B = {
  architectures: ["Qwen2_5_VLForConditionalGeneration"],
  bos_token_id: 151643,
  eos_token_id: 151645,
  vision_start_token_id: 151652,
  vision_end_token_id: 151653,
  vision_token_id: 151654,
  image_token_id: 151655,
  video_token_id: 151656,
  hidden_act: "silu",
  hidden_size: 2048,
  intermediate_size: 11008,
  max_position_embeddings: 128000,
  max_window_layers: 70,
  model_type: "qwen2_5_vl",
  num_attention_heads: 16,
  num_hidden_layers: 36,
  num_key_value_heads: 2,
  rms_norm_eps: 1e-6,
  rope_theta: 1000000.0,
  sliding_window: 32768,
  tie_word_embeddings: true,
  torch_dtype: "bfloat16",
  use_cache: true,
  use_sliding_window: false,
  vision_config: {
    depth: 32, hidden_act: "silu", hidden_size: 1280, intermediate_size: 3420, num_heads: 16, in_chans: 3,
    out_hidden_size: 2048, patch_size: 14, spatial_merge_size: 2, spatial_patch_size: 14, window_size: 112,
    fullatt_block_indexes: [7, 15, 23, 31], tokens_per_second: 2, temporal_patch_size: 2,
  },
  rope_scaling: { type: "mrope", mrope_section: [16, 24, 24] },
  vocab_size: 151936,
};

describe("Qwen2.5-VL config.json", () => {
  test("reads the published flat 3B layout", () => {
    const c = parseQwen25VLConfig(PUBLISHED_3B);
    expect(c.text).toMatchObject({ hiddenSize: 2048, numLayers: 36, numHeads: 16, numKvHeads: 2, headDim: 128, ropeTheta: 1e6, tieWordEmbeddings: true, vocabSize: 151936 });
    expect(c.text.mropeSection).toEqual([16, 24, 24]);
    expect(c.vision).toMatchObject({ depth: 32, hiddenSize: 1280, headDim: 80, inChannels: 3, outHiddenSize: 2048, windowSize: 112 });
    expect(c.vision.fullAttentionBlocks).toEqual([7, 15, 23, 31]);
    expect(c.imageTokenId).toBe(151655);
    expect(c.eosTokenIds).toEqual([151645]);
  });

  test("reads transformers 5's nested text_config with rope_parameters", () => {
    const c = loadQwen25VLConfig(FIXTURE_DIR);
    expect(c.text).toMatchObject({ hiddenSize: 64, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 16, ropeTheta: 10000, tieWordEmbeddings: false, vocabSize: 368 });
    expect(c.text.mropeSection).toEqual([2, 3, 3]);
    expect(c.vision.fullAttentionBlocks).toEqual([1]);
    expect(c.imageTokenId).toBe(366);
  });

  test("names the key and the expectation when something is wrong", () => {
    const bad = { ...PUBLISHED_3B, rope_scaling: { type: "mrope", mrope_section: [16, 24, 20] } };
    expect(() => parseQwen25VLConfig(bad, "m/config.json")).toThrow(/m\/config.json: mrope_section \[16,24,20\] must sum to head_dim \/ 2 = 64/);
    const missing = { ...PUBLISHED_3B, hidden_size: undefined };
    expect(() => parseQwen25VLConfig(missing, "m/config.json")).toThrow(/m\/config.json.*hidden_size/);
    const wrongType = { ...PUBLISHED_3B, model_type: "llama" };
    expect(() => parseQwen25VLConfig(wrongType, "m/config.json")).toThrow(/model_type/);
  });

  test("maps both checkpoint naming schemes onto the published one", () => {
    expect(canonicalQwen25VLName("model.language_model.layers.3.mlp.up_proj.weight")).toBe("model.layers.3.mlp.up_proj.weight");
    expect(canonicalQwen25VLName("model.visual.blocks.0.attn.qkv.bias")).toBe("visual.blocks.0.attn.qkv.bias");
    expect(canonicalQwen25VLName("visual.merger.mlp.0.weight")).toBe("visual.merger.mlp.0.weight");
    expect(canonicalQwen25VLName("lm_head.weight")).toBe("lm_head.weight");
    expect(canonicalQwen25VLName("model.rotary_emb.inv_freq")).toBeUndefined();
  });
});
