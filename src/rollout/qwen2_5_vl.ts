/**
 * Qwen2.5-VL's part of a row batch: the pixel values of every image in batch order (the
 * processor's patches, one block per image), their patch grids, checked against the
 * grids the rollout recorded (they sized the placeholders), and the M-RoPE position ids
 * of the padded rows (padding gets position 0, as transformers does).
 */
import * as torch from "../torch/index.ts";
import { VagenError } from "../core/errors.ts";
import { processImages } from "../models/image-processor.ts";
import type { Qwen25VLChatModel } from "../models/qwen2_5_vl/chat-model.ts";
import { computeRopeIndex } from "../models/qwen2_5_vl/rope-index.ts";
import type { PaddedRows, RowBatchFamily } from "./batch.ts";

export function qwen25VLRowFamily(chat: Qwen25VLChatModel): RowBatchFamily {
  const { imageTokenId, vision } = chat.model.config;
  return {
    padTokenId: chat.padTokenId,
    device: chat.device,
    modelInputs(padded: PaddedRows) {
      const images = padded.images.flat();
      const recorded = images.map((img) => [...img.grid]);
      const processed = images.length > 0 ? processImages(images.map((img) => img.image), chat.imageOptions) : undefined;
      processed?.gridThw.forEach((grid, i) => {
        if (grid.join(",") !== recorded[i]!.join(",")) {
          throw new VagenError(`row batch image ${i}: the rollout recorded patch grid [${recorded[i]!.join(", ")}] but the image processor gives [${grid.join(", ")}]`);
        }
      });
      const { positionIds } = computeRopeIndex({
        inputIds: padded.inputIds,
        attentionMask: padded.attentionMask,
        imageGridThw: recorded,
        imageTokenId,
        spatialMergeSize: vision.spatialMergeSize,
      });
      const B = padded.inputIds.length;
      const T = padded.promptWidth + padded.responseWidth;
      const flat = new Float64Array(3 * B * T);
      let o = 0;
      for (const axis of positionIds) for (const row of axis) for (const p of row) flat[o++] = p;
      return {
        pixelValues: processed && torch.tidy(() => torch.tensor(processed.pixelValues, [processed.numPatches, processed.patchDim], { dtype: "f32", device: chat.device }).to(chat.dtype)),
        imageGridThw: recorded,
        positionIds: torch.tensor(flat, [3, B, T], { dtype: "i64", device: chat.device }),
        images: padded.images.map((row) => row.map((img) => img.image)),
      };
    },
  };
}
