/**
 * PNG encoding of observation images, once per image object: a concat conversation
 * re-sends every earlier image each turn, and eval also saves each image to disk, so the
 * same pixels would otherwise be compressed again and again. Keyed weakly, so the cache
 * lives exactly as long as the images do.
 */
import { encodePng } from "../core/png.ts";
import type { RGBImage } from "../core/image.ts";

const pngCache = new WeakMap<RGBImage, Uint8Array>();
const dataUrlCache = new WeakMap<RGBImage, string>();

export function pngBytes(image: RGBImage): Uint8Array {
  let png = pngCache.get(image);
  if (png === undefined) {
    png = encodePng(image);
    pngCache.set(image, png);
  }
  return png;
}

/** `data:image/png;base64,...`, as OpenAI-compatible chat APIs take images. */
export function imageToDataUrl(image: RGBImage): string {
  let url = dataUrlCache.get(image);
  if (url === undefined) {
    url = `data:image/png;base64,${Buffer.from(pngBytes(image)).toString("base64")}`;
    dataUrlCache.set(image, url);
  }
  return url;
}
