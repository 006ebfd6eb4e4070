/**
 * The one PNG header check every decoder of untrusted images goes through
 * (`readPngSize`, `checkPngSize`): the declared size against a pixel limit, read from the
 * first 29 bytes, before any decompression.
 */
import { VagenError } from "./errors.ts";

/**
 * Pixels a PNG may declare before it is decoded (4096 x 4096). Decoding costs about 7
 * bytes per pixel (RGBA plus RGB), so a 1 MB file that declares 16000 x 16000 would take
 * gigabytes; its header says so in the first 24 bytes.
 */
export const DEFAULT_MAX_PNG_PIXELS = 4096 * 4096;

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

/** Bytes that are not a PNG, or a PNG whose header is broken. */
export class PngFormatError extends VagenError {
  constructor(message: string) {
    super(message, "only PNG images are supported");
    this.name = "PngFormatError";
  }
}

/** A PNG whose declared size is over the pixel limit; nothing was decoded. */
export class PngTooLargeError extends VagenError {
  constructor(
    readonly width: number,
    readonly height: number,
    readonly maxPixels: number,
  ) {
    super(`PNG of ${width}x${height} (${width * height} pixels) is over the limit of ${maxPixels} pixels`, "send a smaller image");
    this.name = "PngTooLargeError";
  }
}

export interface PngSize {
  width: number;
  height: number;
  /** Adam7 interlacing (its decoder inflates without a size bound, so it is checked apart). */
  interlaced: boolean;
}

/** Width and height from the IHDR chunk (the first 29 bytes); nothing is decompressed. */
export function readPngSize(bytes: Uint8Array): PngSize {
  if (bytes.length < 8 || PNG_SIGNATURE.some((b, i) => bytes[i] !== b)) throw new PngFormatError("not a PNG image (no PNG signature)");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const chunkType = String.fromCharCode(...bytes.subarray(12, 16));
  if (bytes.length < 29 || chunkType !== "IHDR") throw new PngFormatError("broken PNG image (no IHDR chunk after the signature)");
  const width = view.getUint32(16);
  const height = view.getUint32(20);
  if (width === 0 || height === 0) throw new PngFormatError(`broken PNG image (size ${width}x${height})`);
  return { width, height, interlaced: bytes[28] !== 0 };
}

/** `readPngSize`, then throws `PngTooLargeError` when width * height is over `maxPixels`. */
export function checkPngSize(bytes: Uint8Array, maxPixels = DEFAULT_MAX_PNG_PIXELS): PngSize {
  const size = readPngSize(bytes);
  if (size.width * size.height > maxPixels) throw new PngTooLargeError(size.width, size.height, maxPixels);
  return size;
}
