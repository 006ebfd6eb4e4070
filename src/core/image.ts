import { VagenError } from "./errors.ts";

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

/** Throws, naming the size, unless `image.data` holds exactly width x height RGB bytes. */
export function checkRgbImage(image: RGBImage): void {
  if (image.data.length !== image.width * image.height * 3) {
    throw new VagenError(`image of ${image.width}x${image.height}: expected ${image.width * image.height * 3} RGB bytes, got ${image.data.length}`);
  }
}
