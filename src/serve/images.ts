/**
 * Image parts of chat requests: PNG data URLs, sized from their IHDR header before any
 * pixel is decoded. A small PNG can declare a huge canvas (16000x16000 deflates to about
 * 1 MB), and decoding allocates width x height x 4 bytes at once; the header check turns
 * such a decompression bomb into a 400 that costs nothing.
 */
import { decodePng } from "../core/png.ts";
import { PngFormatError, readPngSize, type PngSize } from "../core/png-size.ts";
import type { RGBImage } from "../core/image.ts";
import { badRequest } from "./http.ts";

export interface PixelLimits {
  /** Most pixels one image may have. */
  maxImagePixels: number;
  /** Most pixels all images of one request may have together. */
  maxRequestPixels: number;
}

/** An image part whose header was read and checked, not yet decoded. */
export interface PendingImage {
  png: Uint8Array;
  width: number;
  height: number;
  /** Request path of the part, for errors (`messages.0.content.1`). */
  param: string;
}

/** Read an image part's data URL and header (400 for anything but a PNG data URL). */
export function readImagePart(url: string, param: string, limits: PixelLimits): PendingImage {
  const match = /^data:image\/png;base64,/.exec(url);
  if (!match) throw badRequest(`${param}.image_url.url: expected a PNG data URL (data:image/png;base64,...)`, param);
  const png = Buffer.from(url.slice(match[0].length), "base64");
  let size: PngSize;
  try {
    size = readPngSize(png);
  } catch (e) {
    if (!(e instanceof PngFormatError)) throw e;
    throw badRequest(`${param}.image_url.url: ${e.message}`, param);
  }
  const pixels = size.width * size.height;
  if (pixels > limits.maxImagePixels) {
    throw badRequest(
      `${param}: the image is ${size.width}x${size.height} = ${pixels} pixels; this server accepts at most ${limits.maxImagePixels} per image (--max-image-pixels)`,
      param,
      "image_too_large",
    );
  }
  return { png, width: size.width, height: size.height, param };
}

/**
 * Decode checked images, after making sure that together they stay within the request's
 * pixel budget; nothing is decoded when they do not.
 */
export function decodeImages(images: readonly PendingImage[], limits: PixelLimits): RGBImage[] {
  const total = images.reduce((sum, img) => sum + img.width * img.height, 0);
  if (total > limits.maxRequestPixels) {
    throw badRequest(
      `the request's ${images.length} image(s) hold ${total} pixels together; this server accepts at most ${limits.maxRequestPixels} per request (--max-request-pixels)`,
      "messages",
      "image_too_large",
    );
  }
  return images.map((img) => {
    try {
      return decodePng(img.png);
    } catch (e) {
      throw badRequest(`${img.param}.image_url.url: not a decodable PNG (${(e as Error).message})`, img.param);
    }
  });
}
