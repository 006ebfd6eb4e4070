/**
 * BLAKE2b (RFC 7693), unkeyed, with a chosen digest length: what Python's
 * `hashlib.blake2b(data, digest_size=n)` computes. The digest length is part of the
 * parameter block mixed into the initial state, so a 8-byte BLAKE2b is a different hash
 * from the first 8 bytes of BLAKE2b-512.
 *
 * Each 64-bit word is two 32-bit halves (low at 2i, high at 2i + 1 of a Uint32Array):
 * rollouts hash a seed string per model call, and BigInt words made that 0.1 ms a call.
 */

const BLOCK_BYTES = 128;

/** The SHA-512 initialisation vector (RFC 7693 section 2.6), as (low, high) halves. */
const IV = Uint32Array.from([
  0xf3bcc908, 0x6a09e667, 0x84caa73b, 0xbb67ae85, 0xfe94f82b, 0x3c6ef372, 0x5f1d36f1, 0xa54ff53a,
  0xade682d1, 0x510e527f, 0x2b3e6c1f, 0x9b05688c, 0xfb41bd6b, 0x1f83d9ab, 0x137e2179, 0x5be0cd19,
]);

/** Message word schedule per round (RFC 7693 section 2.7); rounds 10 and 11 reuse 0 and 1. */
const SIGMA: readonly (readonly number[])[] = [
  [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
  [14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3],
  [11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4],
  [7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8],
  [9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13],
  [2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9],
  [12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11],
  [13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10],
  [6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5],
  [10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0],
];

const ROUNDS = 12;

/** v[a] += v[b] + m[x], 64-bit, on halves (a, b, x are word indices). */
function add3(v: Uint32Array, a: number, b: number, m: Uint32Array, x: number): void {
  const lo = v[2 * a]! + v[2 * b]! + m[2 * x]!;
  const hi = v[2 * a + 1]! + v[2 * b + 1]! + m[2 * x + 1]! + Math.floor(lo / 0x100000000);
  v[2 * a] = lo;
  v[2 * a + 1] = hi;
}

/** v[c] += v[d], 64-bit. */
function add2(v: Uint32Array, c: number, d: number): void {
  const lo = v[2 * c]! + v[2 * d]!;
  v[2 * c + 1] = v[2 * c + 1]! + v[2 * d + 1]! + (lo >= 0x100000000 ? 1 : 0);
  v[2 * c] = lo;
}

/** v[d] = rotr64(v[d] ^ v[a], n) for n in 16, 24, 32, 63. */
function xorRotate(v: Uint32Array, d: number, a: number, n: number): void {
  const lo = v[2 * d]! ^ v[2 * a]!;
  const hi = v[2 * d + 1]! ^ v[2 * a + 1]!;
  if (n === 32) {
    v[2 * d] = hi;
    v[2 * d + 1] = lo;
  } else if (n === 63) {
    // rotr 63 = rotl 1
    v[2 * d] = (lo << 1) | (hi >>> 31);
    v[2 * d + 1] = (hi << 1) | (lo >>> 31);
  } else {
    v[2 * d] = (lo >>> n) | (hi << (32 - n));
    v[2 * d + 1] = (hi >>> n) | (lo << (32 - n));
  }
}

/** The mixing function G (RFC 7693 section 3.1), in place on the working vector. */
function mix(v: Uint32Array, a: number, b: number, c: number, d: number, m: Uint32Array, x: number, y: number): void {
  add3(v, a, b, m, x);
  xorRotate(v, d, a, 32);
  add2(v, c, d);
  xorRotate(v, b, c, 24);
  add3(v, a, b, m, y);
  xorRotate(v, d, a, 16);
  add2(v, c, d);
  xorRotate(v, b, c, 63);
}

/**
 * The compression function F (RFC 7693 section 3.2). `bytesSoFar` is the counter t: all
 * bytes hashed including this block (the spec's 128-bit counter; the high half stays 0
 * for inputs under 2^53 bytes).
 */
function compress(h: Uint32Array, block: Uint8Array, bytesSoFar: number, isLastBlock: boolean): void {
  const view = new DataView(block.buffer, block.byteOffset, block.byteLength);
  const m = new Uint32Array(32);
  for (let i = 0; i < 32; i++) m[i] = view.getUint32(i * 4, true);
  const v = new Uint32Array(32);
  v.set(h);
  v.set(IV, 16);
  v[24] = v[24]! ^ bytesSoFar % 0x100000000;
  v[25] = v[25]! ^ Math.floor(bytesSoFar / 0x100000000);
  if (isLastBlock) {
    v[28] = ~v[28]!;
    v[29] = ~v[29]!;
  }
  for (let round = 0; round < ROUNDS; round++) {
    const s = SIGMA[round % 10]!;
    mix(v, 0, 4, 8, 12, m, s[0]!, s[1]!);
    mix(v, 1, 5, 9, 13, m, s[2]!, s[3]!);
    mix(v, 2, 6, 10, 14, m, s[4]!, s[5]!);
    mix(v, 3, 7, 11, 15, m, s[6]!, s[7]!);
    mix(v, 0, 5, 10, 15, m, s[8]!, s[9]!);
    mix(v, 1, 6, 11, 12, m, s[10]!, s[11]!);
    mix(v, 2, 7, 8, 13, m, s[12]!, s[13]!);
    mix(v, 3, 4, 9, 14, m, s[14]!, s[15]!);
  }
  for (let i = 0; i < 16; i++) h[i] = h[i]! ^ v[i]! ^ v[i + 16]!;
}

/** BLAKE2b of `data` with a digest of `digestBytes` (1..64) bytes and no key. */
export function blake2b(data: Uint8Array, digestBytes = 64): Uint8Array {
  if (!Number.isInteger(digestBytes) || digestBytes < 1 || digestBytes > 64) {
    throw new RangeError(`blake2b: digest size must be 1..64 bytes, got ${digestBytes}`);
  }
  // Parameter block word 0: digest length, key length (0), fanout 1, depth 1 (sequential mode).
  const h = Uint32Array.from(IV);
  h[0] = h[0]! ^ 0x01010000 ^ digestBytes;

  // Every block but the last is compressed as soon as it is known not to be the last; the
  // empty message is one all-zero final block with counter 0.
  let offset = 0;
  while (data.length - offset > BLOCK_BYTES) {
    offset += BLOCK_BYTES;
    compress(h, data.subarray(offset - BLOCK_BYTES, offset), offset, false);
  }
  const last = new Uint8Array(BLOCK_BYTES);
  last.set(data.subarray(offset));
  compress(h, last, data.length, true);

  const out = new Uint8Array(64);
  const view = new DataView(out.buffer);
  h.forEach((half, i) => view.setUint32(i * 4, half, true));
  return out.slice(0, digestBytes);
}
