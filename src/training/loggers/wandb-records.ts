/**
 * W&B's run file (`run-<id>.wandb`), the file `wandb sync` uploads: a LevelDB log of
 * protobuf `Record`s (wandb_internal.proto; the field numbers are W&B's persistent
 * format, which W&B keeps stable on purpose).
 *
 *   file   = header block*       header = ":W&B" | uint16 0xBEE1 (LE) | uint8 version 0
 *   block  = 32768 bytes of chunks, zero-padded when fewer than 7 bytes are left
 *   chunk  = uint32 crc (LE) | uint16 length (LE) | uint8 type | data
 *            type FULL 1, or FIRST 2, MIDDLE 3, LAST 4 for a record split over blocks;
 *            crc = CRC-32 (zlib's) of the type byte followed by the data
 *
 *   Record  { num 1: int64; history 2; summary 3; config 5; files 6; run 17; exit 18;
 *             final 20; header 21 }
 *   HistoryRecord { item 1: repeated {key 1, value_json 16}; step 2: {num 1} }
 *   SummaryRecord / ConfigRecord { update 1: repeated {key 1, value_json 16} }
 *   FilesRecord   { files 1: repeated {path 1, policy 2 (NOW 0, END 1, LIVE 2)} }
 *   RunRecord     { run_id 1, entity 2, project 3, config 4, display_name 8, host 13,
 *                   start_time 17: Timestamp {seconds 1, nanos 2}, resumed 18 }
 *   RunExitRecord { exit_code 1, runtime 2 }
 */
import { ProtoWriter as Proto } from "../protobuf.ts";


const keyValue = (key: string, valueJson: string) => new Proto().string(1, key).string(16, valueJson);

/** Record field numbers (the `record_type` oneof). */
const RECORD = { history: 2, summary: 3, config: 5, files: 6, run: 17, exit: 18, final: 20, header: 21 } as const;

export function record(num: number, kind: keyof typeof RECORD, body: Proto): Uint8Array {
  return new Proto().int(1, num).message(RECORD[kind], body).finish();
}

export function historyBody(items: Record<string, string>, step: number): Proto {
  const p = new Proto();
  for (const [k, v] of Object.entries(items)) p.message(1, keyValue(k, v));
  return p.message(2, new Proto().int(1, step));
}

/** A SummaryRecord or ConfigRecord: `update` items. */
export function updatesBody(items: Record<string, string>): Proto {
  const p = new Proto();
  for (const [k, v] of Object.entries(items)) p.message(1, keyValue(k, v));
  return p;
}

export function filesBody(paths: readonly string[]): Proto {
  const p = new Proto();
  for (const path of paths) p.message(1, new Proto().string(1, path).int(2, 0));
  return p;
}

export interface RunRecordFields {
  id: string;
  entity?: string;
  project: string;
  displayName: string;
  host?: string;
  config: Record<string, string>;
  startTimeMs: number;
  resumed: boolean;
}

export function runBody(r: RunRecordFields): Proto {
  const seconds = Math.floor(r.startTimeMs / 1000);
  return new Proto()
    .string(1, r.id)
    .string(2, r.entity)
    .string(3, r.project)
    .message(4, updatesBody(r.config))
    .string(8, r.displayName)
    .string(13, r.host)
    .message(17, new Proto().int(1, seconds).int(2, Math.round((r.startTimeMs - seconds * 1000) * 1e6)))
    .bool(18, r.resumed);
}

export function exitBody(exitCode: number, runtimeS: number): Proto {
  return new Proto().int(1, exitCode).int(2, Math.round(runtimeS));
}

// ---- the LevelDB log framing --------------------------------------------------------------

export const BLOCK = 32768;
const CHUNK_HEADER = 7;

const CRC32_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

/** zlib's CRC-32 of `bytes`, continuing from `crc` (0 for a fresh one). */
export function crc32(bytes: Uint8Array, crc = 0): number {
  let c = (crc ^ 0xffffffff) >>> 0;
  for (const b of bytes) c = CRC32_TABLE[(c ^ b) & 0xff]! ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

export function fileHeader(): Uint8Array {
  const h = new Uint8Array(7);
  h.set(new TextEncoder().encode(":W&B"), 0);
  new DataView(h.buffer).setUint16(4, 0xbee1, true);
  h[6] = 0;
  return h;
}

/**
 * The bytes that append `data` to a log whose length is now `position` (header
 * included): padding to the next block when fewer than 7 bytes are left, then one FULL
 * chunk, or FIRST, MIDDLE..., LAST chunks across blocks.
 */
export function frame(data: Uint8Array, position: number): Uint8Array {
  const out: number[] = [];
  let pos = position;
  let rest = data;
  let first = true;
  for (;;) {
    let left = BLOCK - (pos % BLOCK);
    if (left < CHUNK_HEADER) {
      for (let i = 0; i < left; i++) out.push(0);
      pos += left;
      left = BLOCK;
    }
    const room = left - CHUNK_HEADER;
    const piece = rest.subarray(0, room);
    const last = piece.length === rest.length;
    const type = first && last ? 1 : first ? 2 : last ? 4 : 3;
    const header = new Uint8Array(CHUNK_HEADER);
    const view = new DataView(header.buffer);
    view.setUint32(0, crc32(piece, crc32(Uint8Array.of(type))), true);
    view.setUint16(4, piece.length, true);
    header[6] = type;
    out.push(...header, ...piece);
    pos += CHUNK_HEADER + piece.length;
    rest = rest.subarray(piece.length);
    first = false;
    if (last) return Uint8Array.from(out);
  }
}

/** Reads the records back (tests, and `vagen`'s own checks of a run file). */
export function readRecords(file: Uint8Array): Uint8Array[] {
  const header = fileHeader();
  if (file.length < 7 || !header.every((b, i) => file[i] === b)) throw new Error("not a W&B run file (bad header)");
  const records: Uint8Array[] = [];
  let pos = 7;
  let pending: number[] | undefined;
  while (pos < file.length) {
    const left = BLOCK - (pos % BLOCK);
    if (left < CHUNK_HEADER) {
      pos += left;
      continue;
    }
    if (pos + CHUNK_HEADER > file.length) break;
    const view = new DataView(file.buffer, file.byteOffset + pos, CHUNK_HEADER);
    const crc = view.getUint32(0, true);
    const length = view.getUint16(4, true);
    const type = file[pos + 6]!;
    const data = file.subarray(pos + CHUNK_HEADER, pos + CHUNK_HEADER + length);
    if (crc32(data, crc32(Uint8Array.of(type))) !== crc) throw new Error(`bad chunk checksum at byte ${pos}`);
    pos += CHUNK_HEADER + length;
    if (type === 1) records.push(data.slice());
    else if (type === 2) pending = [...data];
    else if (type === 3) pending?.push(...data);
    else if (type === 4 && pending) {
      pending.push(...data);
      records.push(Uint8Array.from(pending));
      pending = undefined;
    }
  }
  return records;
}
