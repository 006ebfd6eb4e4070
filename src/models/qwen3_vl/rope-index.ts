/**
 * Qwen3-VL's multimodal rotary positions (transformers' Qwen3VLModel.get_rope_index) for
 * images: text advances one position on all three axes; an image's merged (1, h, w) grid
 * is laid out from the current position (temporal axis constant, height and width
 * counting rows and columns), and text after it resumes at current + max(h, w). For
 * still images that is Qwen2.5-VL's layout exactly (its temporal scaling only moves
 * video frames), so the computation is shared. Videos, which Qwen3-VL splits into
 * timestamped frames, are not supported by vagen.
 */
export { computeRopeIndex, type RopeIndex, type RopeIndexInput } from "../qwen2_5_vl/rope-index.ts";
