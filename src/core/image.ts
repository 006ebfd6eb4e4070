/**
 * The one image type every layer shares: env observations, the chat messages clients and
 * the engine carry, the model's image processor and the PNG codec all speak `RGBImage`.
 */

/** An RGB image, 8 bits per channel, row-major, `data.length === width * height * 3`. */
export interface RGBImage {
  width: number;
  height: number;
  data: Uint8Array;
}
