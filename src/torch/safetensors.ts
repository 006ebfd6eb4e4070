/**
 * safetensors checkpoints: read, write, sharded (model.safetensors.index.json).
 *
 * Format: 8-byte little-endian header length N, N bytes of JSON
 * ({name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}), then the
 * raw little-endian tensor bytes. Loading memory-maps the file and creates each tensor
 * from the mapped bytes with one copy straight onto the target device (converting
 * floating tensors to the target dtype on the way); the mapping is dropped afterwards.
 * Writing goes to a temporary file renamed into place, so a crash never leaves a
 * half-written checkpoint under the final name.
 */
import { toArrayBuffer, type Pointer } from "bun:ffi";
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, readSync, renameSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { OUT, OUT_PTR, S, check, loadTorch } from "./native.ts";
import { TorchError } from "./errors.ts";
import { isFloating, DTYPE_SIZE, type DType, type Device } from "./dtype.ts";
import { Tensor } from "./tensor.ts";
import { fromBytes } from "./creation.ts";
import { tidy } from "./scope.ts";

const FROM_ST: Readonly<Record<string, DType>> = {
  F32: "f32",
  F16: "f16",
  BF16: "bf16",
  F64: "f64",
  I64: "i64",
  I32: "i32",
  I16: "i16",
  I8: "i8",
  U8: "u8",
  BOOL: "bool",
};

const TO_ST: Readonly<Record<DType, string>> = {
  f32: "F32",
  f16: "F16",
  bf16: "BF16",
  f64: "F64",
  i64: "I64",
  i32: "I32",
  i16: "I16",
  i8: "I8",
  u8: "U8",
  bool: "BOOL",
};

export interface TensorInfo {
  dtype: DType;
  shape: number[];
  /** Byte range relative to the start of the data section. */
  dataOffsets: [number, number];
}

export interface Header {
  tensors: Map<string, TensorInfo>;
  metadata: Record<string, string>;
  /** File offset where the data section begins. */
  dataStart: number;
}

export interface LoadOptions {
  /** Target device (default "cpu"). */
  device?: Device;
  /** Floating-point tensors are converted to this dtype; integer and bool tensors keep theirs. */
  dtype?: DType;
  /** Load only the tensors this accepts. */
  filter?: (name: string) => boolean;
}

/** Upper bound on a header, to fail fast on files that are not safetensors. */
const MAX_HEADER_BYTES = 100 * 1024 * 1024;

/** Parses the header of a safetensors file. */
export function readHeader(path: string): Header {
  if (!existsSync(path)) throw new TorchError(`safetensors file ${path} does not exist`);
  const fd = openSync(path, "r");
  try {
    const lenBuf = Buffer.alloc(8);
    if (readSync(fd, lenBuf, 0, 8, 0) !== 8) throw new TorchError(`${path}: too short to be a safetensors file`);
    const len = Number(lenBuf.readBigUInt64LE(0));
    if (len <= 0 || len > MAX_HEADER_BYTES) {
      throw new TorchError(`${path}: header length ${len} is not plausible; is this a safetensors file?`);
    }
    const json = Buffer.alloc(len);
    if (readSync(fd, json, 0, len, 8) !== len) throw new TorchError(`${path}: header is truncated`);
    let raw: Record<string, unknown>;
    try {
      raw = JSON.parse(json.toString("utf8")) as Record<string, unknown>;
    } catch (err) {
      throw new TorchError(`${path}: header is not valid JSON (${(err as Error).message})`);
    }
    return parseHeader(path, raw, 8 + len);
  } finally {
    closeSync(fd);
  }
}

function parseHeader(path: string, raw: Record<string, unknown>, dataStart: number): Header {
  const tensors = new Map<string, TensorInfo>();
  let metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(raw)) {
    if (name === "__metadata__") {
      metadata = (value ?? {}) as Record<string, string>;
      continue;
    }
    const v = value as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
    const dtype = FROM_ST[String(v.dtype)];
    if (dtype === undefined) {
      throw new TorchError(`${path}: tensor "${name}" has dtype ${String(v.dtype)}; supported: ${Object.keys(FROM_ST).join(", ")}`);
    }
    const shape = v.shape as number[];
    const offsets = v.data_offsets as [number, number];
    if (!Array.isArray(shape) || !Array.isArray(offsets) || offsets.length !== 2) {
      throw new TorchError(`${path}: tensor "${name}" needs "shape" and a two-element "data_offsets"`);
    }
    const expected = shape.reduce((a, b) => a * b, 1) * DTYPE_SIZE[dtype];
    if (offsets[1] - offsets[0] !== expected) {
      throw new TorchError(`${path}: tensor "${name}" spans ${offsets[1] - offsets[0]} bytes, expected ${expected} for ${dtype} [${shape.join(", ")}]`);
    }
    tensors.set(name, { dtype, shape, dataOffsets: offsets });
  }
  return { tensors, metadata, dataStart };
}

/** Loads every tensor of one safetensors file. */
export function load(path: string, opts: LoadOptions = {}): Map<string, Tensor> {
  loadTorch();
  const header = readHeader(path);
  check(S.vt_file_map(Buffer.from(`${path}\0`) as unknown as Pointer, OUT_PTR));
  const base = OUT[0]!;
  const length = OUT[1]!;
  const out = new Map<string, Tensor>();
  try {
    for (const [name, info] of header.tensors) {
      if (opts.filter && !opts.filter(name)) continue;
      const begin = header.dataStart + info.dataOffsets[0];
      if (header.dataStart + info.dataOffsets[1] > length) {
        throw new TorchError(`${path}: tensor "${name}" extends past the end of the file (truncated download?)`);
      }
      const numel = info.shape.reduce((a, b) => a * b, 1);
      // A zero-element tensor reads nothing; any valid address will do.
      const addr = (numel === 0 ? OUT_PTR : base + begin) as Pointer;
      const dtype = opts.dtype !== undefined && isFloating(info.dtype) ? opts.dtype : undefined;
      out.set(name, fromBytes(addr, info.dtype, info.shape, { device: opts.device, dtype }));
    }
  } catch (err) {
    for (const t of out.values()) t.dispose();
    throw err;
  } finally {
    check(S.vt_file_unmap(base as Pointer, length));
  }
  return out;
}

export const INDEX_FILE = "model.safetensors.index.json";

/**
 * Loads a Hugging Face model directory: the shards listed in model.safetensors.index.json,
 * or the single model.safetensors.
 */
export function loadSharded(dir: string, opts: LoadOptions = {}): Map<string, Tensor> {
  const indexPath = join(dir, INDEX_FILE);
  if (!existsSync(indexPath)) {
    const single = join(dir, "model.safetensors");
    if (!existsSync(single)) throw new TorchError(`${dir} holds neither ${INDEX_FILE} nor model.safetensors`);
    return load(single, opts);
  }
  let index: { weight_map?: Record<string, string> };
  try {
    index = JSON.parse(readFileSync(indexPath, "utf8")) as typeof index;
  } catch (err) {
    throw new TorchError(`${indexPath}: not valid JSON (${(err as Error).message})`);
  }
  if (!index.weight_map || typeof index.weight_map !== "object") {
    throw new TorchError(`${indexPath}: missing "weight_map" (tensor name -> shard file)`);
  }
  const shards = [...new Set(Object.values(index.weight_map))].sort();
  const all = new Map<string, Tensor>();
  try {
    for (const shard of shards) {
      const wanted = new Set(Object.entries(index.weight_map).filter(([, f]) => f === shard).map(([n]) => n));
      const part = load(join(dir, shard), { ...opts, filter: (n) => wanted.has(n) && (!opts.filter || opts.filter(n)) });
      for (const [name, t] of part) all.set(name, t);
    }
  } catch (err) {
    for (const t of all.values()) t.dispose();
    throw err;
  }
  return all;
}

type TensorDict = Record<string, Tensor> | Map<string, Tensor>;

function entries(tensors: TensorDict): [string, Tensor][] {
  return tensors instanceof Map ? [...tensors.entries()] : Object.entries(tensors);
}

/** Writes tensors (any device or dtype) and string metadata to one file, atomically. */
export function save(path: string, tensors: TensorDict, metadata: Record<string, string> = {}): void {
  loadTorch();
  const list = entries(tensors).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const header: Record<string, unknown> = {};
  if (Object.keys(metadata).length > 0) header.__metadata__ = metadata;
  let offset = 0;
  for (const [name, t] of list) {
    const bytes = t.nbytes();
    header[name] = { dtype: TO_ST[t.dtype], shape: t.shape, data_offsets: [offset, offset + bytes] };
    offset += bytes;
  }
  let json = JSON.stringify(header);
  // Pad with spaces so the data section starts 8-byte aligned, as the reference writer does.
  json += " ".repeat((8 - ((8 + Buffer.byteLength(json)) % 8)) % 8);
  const headerBytes = Buffer.from(json, "utf8");
  const lenBytes = Buffer.alloc(8);
  lenBytes.writeBigUInt64LE(BigInt(headerBytes.length));

  mkdirSync(dirname(path), { recursive: true });
  const tmp = join(dirname(path), `.${basename(path)}.tmp-${process.pid}`);
  const fd = openSync(tmp, "w");
  try {
    writeSync(fd, lenBytes);
    writeSync(fd, headerBytes);
    for (const [, t] of list) writeTensorBytes(fd, t);
    fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    rmSync(tmp, { force: true });
    throw err;
  }
  closeSync(fd);
  renameSync(tmp, path);
}

function writeTensorBytes(fd: number, t: Tensor): void {
  if (t.numel() === 0) return;
  // A contiguous CPU copy in the tensor's own dtype, read through a zero-copy view (made in
  // a scope: the intermediate of to() and contiguous() is freed even when no caller's scope is open).
  const host = tidy(() => t.to({ device: "cpu" }).contiguous());
  try {
    check(S.vt_data_ptr(host._h, OUT_PTR));
    const addr = OUT[0]! as Pointer;
    const n = OUT[1]!;
    const chunk = 1 << 30; // toArrayBuffer views are limited in size; write large tensors in pieces
    for (let off = 0; off < n; off += chunk) {
      const view = new Uint8Array(toArrayBuffer(addr, off, Math.min(chunk, n - off)));
      let written = 0;
      while (written < view.length) written += writeSync(fd, view, written, view.length - written);
    }
  } finally {
    host.dispose();
  }
}

/**
 * Writes a Hugging Face-style sharded checkpoint: model-0000i-of-0000n.safetensors files of
 * at most maxShardBytes each (a larger tensor gets a shard of its own) plus
 * model.safetensors.index.json. A checkpoint that fits in one shard is written as
 * model.safetensors.
 */
export function saveSharded(dir: string, tensors: TensorDict, opts: { maxShardBytes?: number; metadata?: Record<string, string> } = {}): void {
  const max = opts.maxShardBytes ?? 5 * 1024 ** 3;
  const list = entries(tensors).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const shards: [string, Tensor][][] = [[]];
  let size = 0;
  for (const entry of list) {
    const bytes = entry[1].nbytes();
    if (size > 0 && size + bytes > max) {
      shards.push([]);
      size = 0;
    }
    shards[shards.length - 1]!.push(entry);
    size += bytes;
  }
  mkdirSync(dir, { recursive: true });
  if (shards.length === 1) {
    save(join(dir, "model.safetensors"), new Map(shards[0]), opts.metadata ?? { format: "pt" });
    return;
  }
  const n = shards.length;
  const pad = (i: number) => String(i).padStart(5, "0");
  const weightMap: Record<string, string> = {};
  let total = 0;
  shards.forEach((shard, i) => {
    const file = `model-${pad(i + 1)}-of-${pad(n)}.safetensors`;
    save(join(dir, file), new Map(shard), opts.metadata ?? { format: "pt" });
    for (const [name, t] of shard) {
      weightMap[name] = file;
      total += t.nbytes();
    }
  });
  const indexJson = JSON.stringify({ metadata: { total_size: total }, weight_map: weightMap }, null, 2);
  const tmp = join(dir, `.${INDEX_FILE}.tmp-${process.pid}`);
  writeFileSync(tmp, indexJson);
  renameSync(tmp, join(dir, INDEX_FILE));
}
