/**
 * The remote-env multipart codec (VAGEN `envs_remote/multipart_codec.py`, spec 4.4).
 *
 * Body: a `data` part with UTF-8 JSON, then one `images` part per image (PNG), CRLF line
 * endings, boundary `gym_env_<32 hex>`. Requests are sent as `multipart/form-data`,
 * responses as `multipart/mixed`, both with the boundary quoted. Decoded images are
 * returned as RGB (VAGEN decodes to RGBA and the agent loop drops alpha).
 */
import { decodePng, encodePng } from "../../src/core/png.ts";
import type { RGBImage } from "../../src/core/image.ts";

const CRLF = "\r\n";
const encoder = new TextEncoder();
const decoder = new TextDecoder();

export interface MultipartMessage {
  data: Record<string, unknown>;
  images: RGBImage[];
}

export function newBoundary(): string {
  return `gym_env_${crypto.randomUUID().replaceAll("-", "")}`;
}

export function encodeMultipart(
  data: Record<string, unknown>,
  images: readonly RGBImage[] = [],
  boundary = newBoundary(),
): { boundary: string; body: Uint8Array } {
  const chunks: Uint8Array[] = [];
  const text = (s: string) => chunks.push(encoder.encode(s));
  text(`--${boundary}${CRLF}`);
  text(`Content-Disposition: form-data; name="data"${CRLF}`);
  text(`Content-Type: application/json; charset=utf-8${CRLF}${CRLF}`);
  text(JSON.stringify(data ?? {}));
  text(CRLF);
  images.forEach((image, i) => {
    text(`--${boundary}${CRLF}`);
    text(`Content-Disposition: form-data; name="images"; filename="${i}.png"${CRLF}`);
    text(`Content-Type: image/png${CRLF}${CRLF}`);
    chunks.push(encodePng(image));
    text(CRLF);
  });
  text(`--${boundary}--${CRLF}`);
  return { boundary, body: concat(chunks) };
}

export function requestContentType(boundary: string): string {
  return `multipart/form-data; boundary="${boundary}"`;
}

export function responseContentType(boundary: string): string {
  return `multipart/mixed; boundary="${boundary}"`;
}

export class MultipartError extends Error {}

export function boundaryOf(contentType: string): string {
  for (const piece of (contentType ?? "").split(";")) {
    const part = piece.trim();
    if (part.toLowerCase().startsWith("boundary=")) {
      const value = part.slice("boundary=".length).trim().replace(/^"|"$/g, "");
      if (value) return value;
    }
  }
  throw new MultipartError(`Missing boundary in Content-Type: ${contentType}`);
}

export interface DecodeMultipartOptions {
  /**
   * Decode image parts (default true). A reader that never uses them (the env server:
   * no built-in method takes images) passes false and only counts them.
   */
  decodeImages?: boolean;
  /** Pixel limit per image, checked from its header before decoding (`decodePng`). */
  maxPixels?: number;
}

/**
 * Decodes a body produced by either side of the protocol. Like VAGEN's decoder, a JSON
 * part that is not an object is wrapped as `{_data: x}` and unparsable JSON becomes
 * `{_data_raw: text}`; image parts are decoded in order (unless `decodeImages` is false).
 */
export function decodeMultipart(contentType: string, body: Uint8Array, options: DecodeMultipartOptions = {}): MultipartMessage & { skippedImages: number } {
  const marker = encoder.encode(`--${boundaryOf(contentType)}`);
  const decodeImages = options.decodeImages ?? true;
  const message: MultipartMessage & { skippedImages: number } = { data: {}, images: [], skippedImages: 0 };
  for (const chunk of splitOn(body, marker)) {
    const part = trimPart(chunk);
    if (part.length === 0 || (part[0] === 45 && part[1] === 45)) continue; // the closing "--"
    const split = indexOf(part, HEADER_END, 0);
    if (split < 0) continue;
    const headers = decoder.decode(part.subarray(0, split));
    let payload = part.subarray(split + HEADER_END.length);
    if (payload.length === 0) continue;
    // The encoder ends each payload with CRLF before the next boundary.
    if (payload.length >= 2 && payload[payload.length - 2] === 13 && payload[payload.length - 1] === 10) {
      payload = payload.subarray(0, payload.length - 2);
    }
    const type = partContentType(headers);
    if (type.includes("application/json")) {
      const raw = decoder.decode(payload);
      try {
        const value: unknown = JSON.parse(raw);
        message.data = value !== null && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : { _data: value };
      } catch {
        message.data = { _data_raw: raw };
      }
    } else if (type.startsWith("image/")) {
      if (decodeImages) message.images.push(decodePng(payload, { maxPixels: options.maxPixels }));
      else message.skippedImages++;
    }
  }
  return message;
}

const HEADER_END = encoder.encode("\r\n\r\n");

function partContentType(headers: string): string {
  for (const line of headers.split("\r\n")) {
    const colon = line.indexOf(":");
    if (colon > 0 && line.slice(0, colon).trim().toLowerCase() === "content-type") return line.slice(colon + 1).trim().toLowerCase();
  }
  return "";
}

/** Drops the line break that follows a boundary line (and any preamble whitespace). */
function trimPart(chunk: Uint8Array): Uint8Array {
  let start = 0;
  while (start < chunk.length && (chunk[start] === 13 || chunk[start] === 10 || chunk[start] === 32 || chunk[start] === 9)) start++;
  return chunk.subarray(start);
}

function splitOn(body: Uint8Array, marker: Uint8Array): Uint8Array[] {
  const pieces: Uint8Array[] = [];
  let from = 0;
  for (;;) {
    const at = indexOf(body, marker, from);
    if (at < 0) {
      pieces.push(body.subarray(from));
      return pieces;
    }
    pieces.push(body.subarray(from, at));
    from = at + marker.length;
  }
}

function indexOf(haystack: Uint8Array, needle: Uint8Array, from: number): number {
  return Buffer.from(haystack.buffer, haystack.byteOffset, haystack.byteLength).indexOf(
    Buffer.from(needle.buffer, needle.byteOffset, needle.byteLength),
    from,
  );
}

function concat(chunks: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.length;
  }
  return out;
}
