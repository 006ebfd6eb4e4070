/**
 * The families vagen reads, for people: `vagen doctor` lists them with where their parity
 * with transformers was measured (docs/models.md has the figures). A leaf with no imports,
 * so commands that never load a model can show it without libtorch; the registry
 * (index.ts) is the truth, and test/models/family-registry.test.ts keeps the two alike.
 */
export interface FamilyDescription {
  /** config.json's `model_type`. */
  modelType: string;
  name: string;
  inputs: "text" | "text and images";
  /** Where logits and greedy tokens were checked against transformers. */
  parity: string;
  /** VAGEN's `trainer.model_adapter` name for the family's chat rendering. */
  adapter: ModelAdapter;
}

/** VAGEN's `trainer.model_adapter` values: `auto` picks the family from config.json's `model_type`. */
export const MODEL_ADAPTERS = ["auto", "qwen", "internvl", "glm"] as const;
export type ModelAdapter = Exclude<(typeof MODEL_ADAPTERS)[number], "auto">;

export const MODEL_FAMILIES: readonly FamilyDescription[] = [
  { modelType: "qwen2_5_vl", name: "Qwen2.5-VL", inputs: "text and images", parity: "3B shapes on an H200, f32 and bf16; tiny fixture in CI", adapter: "qwen" },
  { modelType: "qwen3", name: "Qwen3 (dense)", inputs: "text", parity: "0.6B shapes on an H200, f32 and bf16; tiny fixture in CI", adapter: "qwen" },
  { modelType: "qwen3_vl", name: "Qwen3-VL (dense)", inputs: "text and images", parity: "2B shapes on an H200, f32 and bf16; tiny fixture in CI", adapter: "qwen" },
  { modelType: "internvl", name: "InternVL3.5", inputs: "text and images", parity: "1B shapes on an H200, f32 and bf16; tiny fixture in CI", adapter: "internvl" },
  { modelType: "glm4v", name: "GLM-4V (GLM-4.1V, GLM-4.6V-Flash)", inputs: "text and images", parity: "GLM-4.6V-Flash (9B) shapes on an H200, f32 and bf16; tiny fixture in CI", adapter: "glm" },
];
