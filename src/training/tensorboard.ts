/**
 * TensorBoard event files, written natively: a TFRecord stream of `Event` protos, each
 * holding a `Summary` of scalars. What `tensorboard --logdir` reads:
 *
 *   record  = uint64 length (little-endian) | uint32 masked_crc32c(length bytes)
 *             | data | uint32 masked_crc32c(data)
 *   Event   = { 1: wall_time double, 2: step int64, 3: file_version string, 5: summary Summary }
 *   Summary = { 1: repeated Value }    Value = { 1: tag string, 2: simple_value float }
 *
 * The first event carries file_version "brain.Event:2". Each step's scalars are one
 * event, appended and flushed at once, so a killed run leaves every finished step
 * readable.
 */
import { appendFileSync, mkdirSync, readFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { ProtoWriter } from "./protobuf.ts";

// ---- crc32c (Castagnoli), table-driven ----------------------------------------------------

const CRC_TABLE = (() => {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return table;
})();

export function crc32c(bytes: Uint8Array): number {
  let crc = 0xffffffff;
  for (const b of bytes) crc = CRC_TABLE[(crc ^ b) & 0xff]! ^ (crc >>> 8);
  return (crc ^ 0xffffffff) >>> 0;
}

/** TFRecord's masking: rotate right by 15 and add a constant (so CRCs of CRCs stay strong). */
export function maskedCrc32c(bytes: Uint8Array): number {
  const crc = crc32c(bytes);
  return ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0;
}

/** One Event proto with the given scalars (or the file-version header when `version` is set). */
export function encodeEvent(event: { wallTime: number; step: number; version?: string; scalars?: Record<string, number> }): Uint8Array {
  const w = new ProtoWriter().double(1, event.wallTime).int64(2, event.step);
  if (event.version !== undefined) w.string(3, event.version);
  if (event.scalars) {
    const summary = new ProtoWriter();
    for (const [tag, value] of Object.entries(event.scalars)) summary.bytes(1, new ProtoWriter().string(1, tag).float(2, value).finish());
    w.bytes(5, summary.finish());
  }
  return w.finish();
}

/** data framed as one TFRecord. */
export function tfRecord(data: Uint8Array): Uint8Array {
  const header = new Uint8Array(8);
  new DataView(header.buffer).setBigUint64(0, BigInt(data.length), true);
  const out = new Uint8Array(8 + 4 + data.length + 4);
  const view = new DataView(out.buffer);
  out.set(header, 0);
  view.setUint32(8, maskedCrc32c(header), true);
  out.set(data, 12);
  view.setUint32(12 + data.length, maskedCrc32c(data), true);
  return out;
}

/** Appends scalar events to one event file under `dir`. */
export class TensorBoardWriter {
  readonly path: string;

  constructor(dir: string, now = Date.now()) {
    mkdirSync(dir, { recursive: true });
    this.path = join(dir, `events.out.tfevents.${Math.floor(now / 1000)}.${hostname()}.${process.pid}.vagen`);
    appendFileSync(this.path, tfRecord(encodeEvent({ wallTime: now / 1000, step: 0, version: "brain.Event:2" })));
  }

  /** One step's scalars; non-finite values are skipped (TensorBoard cannot chart them). */
  scalars(step: number, values: Record<string, number>, now = Date.now()): void {
    const finite = Object.fromEntries(Object.entries(values).filter(([, v]) => Number.isFinite(v)));
    appendFileSync(this.path, tfRecord(encodeEvent({ wallTime: now / 1000, step, scalars: finite })));
  }
}

// ---- reading back (tests, and `vagen` tools that inspect a run) ----------------------------

export interface ScalarEvent {
  wallTime: number;
  step: number;
  version?: string;
  scalars: Record<string, number>;
}

/** Parses an event file, checking every record's CRCs. */
export function readEventFile(path: string): ScalarEvent[] {
  const buf = readFileSync(path);
  const bytes = new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const events: ScalarEvent[] = [];
  let o = 0;
  while (o < bytes.length) {
    const length = Number(view.getBigUint64(o, true));
    if (view.getUint32(o + 8, true) !== maskedCrc32c(bytes.subarray(o, o + 8))) throw new Error(`${path}: bad length CRC at byte ${o}`);
    const data = bytes.subarray(o + 12, o + 12 + length);
    if (view.getUint32(o + 12 + length, true) !== maskedCrc32c(data)) throw new Error(`${path}: bad data CRC at byte ${o}`);
    events.push(decodeEvent(data));
    o += 16 + length;
  }
  return events;
}

function decodeEvent(data: Uint8Array): ScalarEvent {
  const event: ScalarEvent = { wallTime: 0, step: 0, scalars: {} };
  for (const f of fields(data)) {
    if (f.field === 1) event.wallTime = f.double!;
    else if (f.field === 2) event.step = Number(f.varint!);
    else if (f.field === 3) event.version = new TextDecoder().decode(f.bytes!);
    else if (f.field === 5) {
      for (const v of fields(f.bytes!)) {
        let tag = "";
        let value = Number.NaN;
        for (const g of fields(v.bytes!)) {
          if (g.field === 1) tag = new TextDecoder().decode(g.bytes!);
          else if (g.field === 2) value = g.float!;
        }
        event.scalars[tag] = value;
      }
    }
  }
  return event;
}

interface Field {
  field: number;
  varint?: bigint;
  double?: number;
  float?: number;
  bytes?: Uint8Array;
}

function* fields(data: Uint8Array): Generator<Field> {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  let o = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = data[o++]!;
      result |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return result;
      shift += 7n;
    }
  };
  while (o < data.length) {
    const key = Number(varint());
    const field = key >> 3;
    const wire = key & 7;
    if (wire === 0) yield { field, varint: varint() };
    else if (wire === 1) {
      yield { field, double: view.getFloat64(o, true) };
      o += 8;
    } else if (wire === 5) {
      yield { field, float: view.getFloat32(o, true) };
      o += 4;
    } else if (wire === 2) {
      const n = Number(varint());
      yield { field, bytes: data.subarray(o, o + n) };
      o += n;
    } else throw new Error(`protobuf wire type ${wire} not supported`);
  }
}
