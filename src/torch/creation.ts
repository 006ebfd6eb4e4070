/**
 * Tensor factories. JavaScript cannot tell 1 from 1.0, so number data and fill values
 * default to f32 (PyTorch would pick int64 for integer literals); arange and randint,
 * whose arguments are integral by nature, default to i64 like PyTorch. Pass `dtype` to
 * choose.
 */
import { type Pointer } from "bun:ffi";
import { ARGS_PTR, OUT, OUT_PTR, S, check, loadTorch } from "./native.ts";
import { TorchError } from "./errors.ts";
import { DTYPE_CODE, dtypeOfArray, parseDevice, type DType, type Device } from "./dtype.ts";
import { Tensor, genHandle, putList, type Scalar } from "./tensor.ts";
import type { Generator } from "./random.ts";

export interface TensorOptions {
  dtype?: DType;
  device?: Device;
  requiresGrad?: boolean;
}

export interface RandomOptions extends TensorOptions {
  /** Draw from this generator instead of the device's default one. */
  generator?: Generator;
}

type Shape = readonly number[];
type NestedNumbers = number | boolean | readonly NestedNumbers[];

function finish(t: Tensor, opts: TensorOptions): Tensor {
  if (opts.requiresGrad) t.requiresGrad_(true);
  return t;
}

function dev(opts: TensorOptions) {
  return parseDevice(opts.device ?? "cpu");
}

function checkShape(shape: Shape, what: string): void {
  for (const s of shape) {
    if (!Number.isInteger(s) || s < 0) {
      throw new TorchError(`${what}: shape [${shape.join(", ")}] must hold non-negative integers`);
    }
  }
}

/**
 * A tensor holding `data`: a typed array (its dtype is kept unless opts.dtype is given),
 * a flat number array with an explicit shape, or nested arrays whose nesting gives the
 * shape. The data is copied once, straight onto the target device.
 */
export function tensor(data: NestedNumbers | ArrayBufferView, shape?: Shape, opts: TensorOptions = {}): Tensor {
  loadTorch();
  if (ArrayBuffer.isView(data)) {
    return fromTypedArray(data, shape ?? [elementCount(data)], opts);
  }
  const inferred: number[] = [];
  let probe: NestedNumbers = data;
  while (Array.isArray(probe)) {
    inferred.push(probe.length);
    probe = probe[0] as NestedNumbers;
  }
  const flat = Array.isArray(data) ? (data as unknown[]).flat(Infinity as 1) as (number | boolean)[] : [data as number | boolean];
  const finalShape = shape ?? inferred;
  const count = finalShape.reduce((a, b) => a * b, 1);
  if (count !== flat.length) {
    throw new TorchError(`tensor(): ${flat.length} values do not fill shape [${finalShape.join(", ")}] (${count} elements); nested arrays must be rectangular`);
  }
  const isBool = typeof probe === "boolean";
  const values = new Float64Array(flat.length);
  for (let i = 0; i < flat.length; i++) {
    const v = flat[i];
    values[i] = typeof v === "boolean" ? (v ? 1 : 0) : (v as number);
  }
  return fromTypedArray(values, finalShape, { ...opts, dtype: opts.dtype ?? (isBool ? "bool" : "f32") });
}

function elementCount(data: ArrayBufferView): number {
  return (data as unknown as { length: number }).length;
}

/**
 * A tensor from a typed array with the given shape; converts to opts.dtype on the way.
 * The array is read once (copied straight to the target device); it is not retained.
 */
export function fromTypedArray(data: ArrayBufferView, shape: Shape, opts: TensorOptions = {}): Tensor {
  loadTorch();
  checkShape(shape, "fromTypedArray");
  const srcDtype = dtypeOfArray(data);
  const count = shape.reduce((a, b) => a * b, 1);
  if (count !== elementCount(data)) {
    throw new TorchError(`fromTypedArray: ${elementCount(data)} elements do not fit shape [${shape.join(", ")}] (${count})`);
  }
  return fromBytes(data, srcDtype, shape, opts);
}

/**
 * A tensor from raw bytes holding elements of `srcDtype` (e.g. bf16 bit patterns in a
 * Uint16Array, or a slice of a memory-mapped file).
 */
export function fromBytes(bytes: ArrayBufferView | Pointer, srcDtype: DType, shape: Shape, opts: TensorOptions = {}): Tensor {
  loadTorch();
  const n = putList(shape);
  const d = dev(opts);
  const target = opts.dtype === undefined ? -1 : DTYPE_CODE[opts.dtype];
  let data = bytes as Pointer;
  // Bun cannot pass a pointer to a zero-length view; any valid address works for 0 elements.
  if (ArrayBuffer.isView(bytes) && bytes.byteLength === 0) data = OUT_PTR;
  check(S.vt_from_host(data, DTYPE_CODE[srcDtype], ARGS_PTR, n, target, d.type, d.index, OUT_PTR));
  return finish(new Tensor(OUT[0]!), opts);
}

function fill(kind: number, shape: Shape, value: number, opts: TensorOptions, what: string): Tensor {
  loadTorch();
  checkShape(shape, what);
  const n = putList(shape);
  const d = dev(opts);
  const dtype = opts.dtype ?? "f32";
  check(S.vt_fill(kind, ARGS_PTR, n, value, Number.isInteger(value) ? 1 : 0, DTYPE_CODE[dtype], d.type, d.index, OUT_PTR));
  return finish(new Tensor(OUT[0]!), opts);
}

export function zeros(shape: Shape, opts: TensorOptions = {}): Tensor {
  return fill(0, shape, 0, opts, "zeros");
}
export function ones(shape: Shape, opts: TensorOptions = {}): Tensor {
  return fill(1, shape, 0, opts, "ones");
}
/** Uninitialised memory: fast, contents arbitrary. */
export function empty(shape: Shape, opts: TensorOptions = {}): Tensor {
  return fill(2, shape, 0, opts, "empty");
}
export function full(shape: Shape, value: Scalar, opts: TensorOptions = {}): Tensor {
  const isBool = typeof value === "boolean";
  const v = isBool ? (value ? 1 : 0) : (value as number);
  return fill(3, shape, v, { ...opts, dtype: opts.dtype ?? (isBool ? "bool" : "f32") }, "full");
}

function fillLike(kind: number, like: Tensor, value: number, opts: { dtype?: DType }): Tensor {
  check(S.vt_fill_like(kind, like._h, value, Number.isInteger(value) ? 1 : 0, opts.dtype === undefined ? -1 : DTYPE_CODE[opts.dtype], OUT_PTR));
  return new Tensor(OUT[0]!);
}
export function zerosLike(t: Tensor, opts: { dtype?: DType } = {}): Tensor {
  return fillLike(0, t, 0, opts);
}
export function onesLike(t: Tensor, opts: { dtype?: DType } = {}): Tensor {
  return fillLike(1, t, 0, opts);
}
export function emptyLike(t: Tensor, opts: { dtype?: DType } = {}): Tensor {
  return fillLike(2, t, 0, opts);
}
export function fullLike(t: Tensor, value: number, opts: { dtype?: DType } = {}): Tensor {
  return fillLike(3, t, value, opts);
}

/** arange(end) or arange(start, end, step?); i64 unless some argument is fractional. */
export function arange(startOrEnd: number, end?: number, step = 1, opts: TensorOptions = {}): Tensor {
  loadTorch();
  const start = end === undefined ? 0 : startOrEnd;
  const stop = end === undefined ? startOrEnd : end;
  const integral = Number.isInteger(start) && Number.isInteger(stop) && Number.isInteger(step);
  const dtype = opts.dtype ?? (integral ? "i64" : "f32");
  const d = dev(opts);
  check(S.vt_arange(start, stop, step, DTYPE_CODE[dtype], d.type, d.index, OUT_PTR));
  return finish(new Tensor(OUT[0]!), opts);
}

export function linspace(start: number, end: number, steps: number, opts: TensorOptions = {}): Tensor {
  loadTorch();
  const d = dev(opts);
  check(S.vt_linspace(start, end, steps, DTYPE_CODE[opts.dtype ?? "f32"], d.type, d.index, OUT_PTR));
  return finish(new Tensor(OUT[0]!), opts);
}

export function eye(n: number, m = n, opts: TensorOptions = {}): Tensor {
  loadTorch();
  const d = dev(opts);
  check(S.vt_eye(n, m, DTYPE_CODE[opts.dtype ?? "f32"], d.type, d.index, OUT_PTR));
  return finish(new Tensor(OUT[0]!), opts);
}

/** A 0-d tensor holding value. */
export function scalarTensor(value: Scalar, opts: TensorOptions = {}): Tensor {
  loadTorch();
  const isBool = typeof value === "boolean";
  const v = isBool ? (value ? 1 : 0) : (value as number);
  const d = dev(opts);
  const dtype = opts.dtype ?? (isBool ? "bool" : "f32");
  check(S.vt_scalar_tensor(v, Number.isInteger(v) ? 1 : 0, DTYPE_CODE[dtype], d.type, d.index, OUT_PTR));
  return finish(new Tensor(OUT[0]!), opts);
}

function random(kind: number, shape: Shape, low: number, high: number, dtype: DType, opts: RandomOptions, what: string): Tensor {
  loadTorch();
  checkShape(shape, what);
  const n = putList(shape);
  const d = dev(opts);
  check(S.vt_random(kind, ARGS_PTR, n, low, high, genHandle(opts.generator), DTYPE_CODE[dtype], d.type, d.index, OUT_PTR));
  return finish(new Tensor(OUT[0]!), opts);
}

/** Uniform samples in [0, 1). */
export function rand(shape: Shape, opts: RandomOptions = {}): Tensor {
  return random(0, shape, 0, 1, opts.dtype ?? "f32", opts, "rand");
}
/** Standard normal samples. */
export function randn(shape: Shape, opts: RandomOptions = {}): Tensor {
  return random(1, shape, 0, 1, opts.dtype ?? "f32", opts, "randn");
}
/** Integers uniform in [low, high). */
export function randint(low: number, high: number, shape: Shape, opts: RandomOptions = {}): Tensor {
  return random(2, shape, low, high, opts.dtype ?? "i64", opts, "randint");
}
