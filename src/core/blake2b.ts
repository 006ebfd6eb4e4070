/**
 * BLAKE2b (RFC 7693), unkeyed, with a chosen digest length: what Python's
 * `hashlib.blake2b(data, digest_size=n)` computes. The digest length is part of the
 * parameter block mixed into the initial state, so a 8-byte BLAKE2b is a different hash
 * from the first 8 bytes of BLAKE2b-512.
 *
 * Written with BigInt for clarity; it hashes short seed strings, not bulk data.
 */

const MASK_64 = (1n << 64n) - 1n;
const BLOCK_BYTES = 128;

/** The SHA-512 initialisation vector (RFC 7693 section 2.6). */
const IV: readonly bigint[] = [
  0x6a09e667f3bcc908n, 0xbb67ae8584caa73bn, 0x3c6ef372fe94f82bn, 0xa54ff53a5f1d36f1n,
  0x510e527fade682d1n, 0x9b05688c2b3e6c1fn, 0x1f83d9abfb41bd6bn, 0x5be0cd19137e2179n,
];

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

function rotateRight64(x: bigint, n: bigint): bigint {
  return ((x >> n) | (x << (64n - n))) & MASK_64;
}

/** The mixing function G (RFC 7693 section 3.1), in place on the working vector. */
function mix(v: bigint[], a: number, b: number, c: number, d: number, x: bigint, y: bigint): void {
  v[a] = (v[a]! + v[b]! + x) & MASK_64;
  v[d] = rotateRight64(v[d]! ^ v[a]!, 32n);
  v[c] = (v[c]! + v[d]!) & MASK_64;
  v[b] = rotateRight64(v[b]! ^ v[c]!, 24n);
  v[a] = (v[a]! + v[b]! + y) & MASK_64;
  v[d] = rotateRight64(v[d]! ^ v[a]!, 16n);
  v[c] = (v[c]! + v[d]!) & MASK_64;
  v[b] = rotateRight64(v[b]! ^ v[c]!, 63n);
}

/** The 16 little-endian 64-bit words of a (zero-padded) 128-byte block. */
function blockWords(block: Uint8Array): bigint[] {
  const view = new DataView(block.buffer, block.byteOffset, block.byteLength);
  return Array.from({ length: 16 }, (_, i) => view.getBigUint64(i * 8, true));
}

/**
 * The compression function F (RFC 7693 section 3.2). `bytesSoFar` is the counter t: all
 * bytes hashed including this block (the spec's 128-bit counter; the high half stays 0
 * for inputs under 2^64 bytes).
 */
function compress(h: bigint[], block: Uint8Array, bytesSoFar: bigint, isLastBlock: boolean): void {
  const m = blockWords(block);
  const v = [...h, ...IV];
  v[12] = v[12]! ^ (bytesSoFar & MASK_64);
  v[13] = v[13]! ^ (bytesSoFar >> 64n);
  if (isLastBlock) v[14] = v[14]! ^ MASK_64;
  for (let round = 0; round < ROUNDS; round++) {
    const s = SIGMA[round % 10]!;
    mix(v, 0, 4, 8, 12, m[s[0]!]!, m[s[1]!]!);
    mix(v, 1, 5, 9, 13, m[s[2]!]!, m[s[3]!]!);
    mix(v, 2, 6, 10, 14, m[s[4]!]!, m[s[5]!]!);
    mix(v, 3, 7, 11, 15, m[s[6]!]!, m[s[7]!]!);
    mix(v, 0, 5, 10, 15, m[s[8]!]!, m[s[9]!]!);
    mix(v, 1, 6, 11, 12, m[s[10]!]!, m[s[11]!]!);
    mix(v, 2, 7, 8, 13, m[s[12]!]!, m[s[13]!]!);
    mix(v, 3, 4, 9, 14, m[s[14]!]!, m[s[15]!]!);
  }
  for (let i = 0; i < 8; i++) h[i] = h[i]! ^ v[i]! ^ v[i + 8]!;
}

/** BLAKE2b of `data` with a digest of `digestBytes` (1..64) bytes and no key. */
export function blake2b(data: Uint8Array, digestBytes = 64): Uint8Array {
  if (!Number.isInteger(digestBytes) || digestBytes < 1 || digestBytes > 64) {
    throw new RangeError(`blake2b: digest size must be 1..64 bytes, got ${digestBytes}`);
  }
  // Parameter block word 0: digest length, key length (0), fanout 1, depth 1 (sequential mode).
  const h = [...IV];
  h[0] = h[0]! ^ 0x01010000n ^ BigInt(digestBytes);

  // Every block but the last is compressed as soon as it is known not to be the last; the
  // empty message is one all-zero final block with counter 0.
  let offset = 0;
  while (data.length - offset > BLOCK_BYTES) {
    offset += BLOCK_BYTES;
    compress(h, data.subarray(offset - BLOCK_BYTES, offset), BigInt(offset), false);
  }
  const last = new Uint8Array(BLOCK_BYTES);
  last.set(data.subarray(offset));
  compress(h, last, BigInt(data.length), true);

  const out = new Uint8Array(64);
  const view = new DataView(out.buffer);
  h.forEach((word, i) => view.setBigUint64(i * 8, word, true));
  return out.slice(0, digestBytes);
}
