/**
 * Element types and devices, and their codes on the native side (ffi/shim.h).
 */
import { TorchError } from "./errors.ts";

export type DType = "f32" | "f16" | "bf16" | "f64" | "i64" | "i32" | "u8" | "bool" | "i8" | "i16";

export const DTYPES: readonly DType[] = ["f32", "f16", "bf16", "f64", "i64", "i32", "u8", "bool", "i8", "i16"];

/** Native dtype codes, index-aligned with DTYPES (see vt::dtype in ffi/core.cpp). */
export const DTYPE_CODE: Readonly<Record<DType, number>> = {
  f32: 0,
  f16: 1,
  bf16: 2,
  f64: 3,
  i64: 4,
  i32: 5,
  u8: 6,
  bool: 7,
  i8: 8,
  i16: 9,
};

/** Bytes per element. */
export const DTYPE_SIZE: Readonly<Record<DType, number>> = {
  f32: 4,
  f16: 2,
  bf16: 2,
  f64: 8,
  i64: 8,
  i32: 4,
  u8: 1,
  bool: 1,
  i8: 1,
  i16: 2,
};

export function isFloating(dtype: DType): boolean {
  return dtype === "f32" || dtype === "f16" || dtype === "bf16" || dtype === "f64";
}

export function dtypeFromCode(code: number): DType {
  const d = DTYPES[code];
  if (d === undefined) throw new TorchError(`tensor has a dtype vagen does not support (native code ${code})`);
  return d;
}

export function isDType(value: string): value is DType {
  return (DTYPES as readonly string[]).includes(value);
}

/** Typed array that toArray() returns for each dtype (half types widen to float32). */
export type HostArray = Float32Array | Float64Array | BigInt64Array | Int32Array | Uint8Array | Int8Array | Int16Array;

/** The dtype a host array is read back as, per tensor dtype. */
export const HOST_DTYPE: Readonly<Record<DType, DType>> = {
  f32: "f32",
  f16: "f32",
  bf16: "f32",
  f64: "f64",
  i64: "i64",
  i32: "i32",
  u8: "u8",
  bool: "bool",
  i8: "i8",
  i16: "i16",
};

export function allocHostArray(dtype: DType, length: number): HostArray {
  switch (dtype) {
    case "f32":
      return new Float32Array(length);
    case "f64":
      return new Float64Array(length);
    case "i64":
      return new BigInt64Array(length);
    case "i32":
      return new Int32Array(length);
    case "u8":
    case "bool":
      return new Uint8Array(length);
    case "i8":
      return new Int8Array(length);
    case "i16":
      return new Int16Array(length);
    default:
      throw new TorchError(`no host array type holds ${dtype} directly`);
  }
}

/** The dtype a typed array's elements already have. */
export function dtypeOfArray(data: ArrayBufferView): DType {
  if (data instanceof Float32Array) return "f32";
  if (data instanceof Float64Array) return "f64";
  if (data instanceof BigInt64Array) return "i64";
  if (data instanceof Int32Array) return "i32";
  if (data instanceof Uint8Array || data instanceof Uint8ClampedArray) return "u8";
  if (data instanceof Int8Array) return "i8";
  if (data instanceof Int16Array) return "i16";
  throw new TorchError(`cannot make a tensor from a ${data.constructor.name}; use a Float32Array, Float64Array, BigInt64Array, Int32Array, Int16Array, Int8Array or Uint8Array`);
}

// ---- devices ---------------------------------------------------------------------------

/** "cpu", "cuda" (the current CUDA device) or "cuda:N". */
export type Device = string;

export interface DeviceCode {
  type: number; // 0 cpu, 1 cuda
  index: number; // -1: the current one
}

const deviceCache = new Map<string, DeviceCode>();

export function parseDevice(device: Device): DeviceCode {
  const cached = deviceCache.get(device);
  if (cached) return cached;
  let code: DeviceCode;
  if (device === "cpu") code = { type: 0, index: -1 };
  else if (device === "cuda") code = { type: 1, index: -1 };
  else {
    const m = /^cuda:(\d+)$/.exec(device);
    if (!m) throw new TorchError(`unknown device "${device}": expected "cpu", "cuda" or "cuda:N"`);
    code = { type: 1, index: Number(m[1]) };
  }
  deviceCache.set(device, code);
  return code;
}

export function deviceName(type: number, index: number): Device {
  if (type === 0) return "cpu";
  if (type === 1) return `cuda:${index}`;
  return "other";
}
