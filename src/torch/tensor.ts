/**
 * The Tensor class: a handle to a libtorch tensor plus PyTorch's eager API in camelCase.
 *
 * Every method is one FFI call that returns a new Tensor (or `this` for in-place ops
 * ending in `_`). Shape, dtype and device are read from libtorch once, on first use.
 * Tensors are freed by scopes (tidy), `dispose()` / `using`, or, late, by the GC backstop.
 */
import { type Pointer } from "bun:ffi";
import { ARGS, ARGS_PTR, OPS, OUT, OUT_PTR, S, argsAt, check } from "./native.ts";
import { track, untrack } from "./scope.ts";
import { TorchError } from "./errors.ts";
import {
  DTYPE_CODE,
  DTYPE_SIZE,
  HOST_DTYPE,
  allocHostArray,
  deviceName,
  dtypeFromCode,
  isDType,
  parseDevice,
  type DType,
  type Device,
  type HostArray,
} from "./dtype.ts";
import type { GeneratorHandle } from "./generator-handle.ts";

export type Scalar = number | boolean;
export type TensorOrScalar = Tensor | Scalar;

/** Options for to(). */
export interface ToOptions {
  dtype?: DType;
  device?: Device;
  /** Asynchronous host<->device copy (the host side must be pinned to overlap). */
  nonBlocking?: boolean;
  /** Always copy, even when nothing changes. */
  copy?: boolean;
}

export interface BackwardOptions {
  retainGraph?: boolean;
  createGraph?: boolean;
}

/** values/indices pair returned by max(dim), min(dim), sort, topk, kthvalue. */
export interface ValuesIndices {
  values: Tensor;
  indices: Tensor;
}

const NO_DIMS: readonly number[] = [];
/** Marker the shim reads as "reduce over all dims" in var_mean / std_mean. */
const ALL_DIMS = -2147483648;

// ---- call helpers: one FFI crossing, then wrap OUT[0] --------------------------------

function result(status: number): Tensor {
  if (status !== 0) check(status);
  return new Tensor(OUT[0]!);
}

function pair(status: number): ValuesIndices {
  if (status !== 0) check(status);
  const values = new Tensor(OUT[0]!);
  return { values, indices: new Tensor(OUT[1]!) };
}

function isInt(x: number): number {
  return Number.isInteger(x) ? 1 : 0;
}

function num(x: Scalar): number {
  return typeof x === "boolean" ? (x ? 1 : 0) : x;
}

/** Writes an int list into ARGS at `offset`; returns its length. */
function putList(values: readonly number[], offset = 0): number {
  for (let i = 0; i < values.length; i++) ARGS[offset + i] = values[i]!;
  return values.length;
}

/** Accepts reshape(2, 3), reshape([2, 3]) and reshape() alike. */
function flatArgs(args: readonly (number | readonly number[])[]): readonly number[] {
  if (args.length === 1 && Array.isArray(args[0])) return args[0] as readonly number[];
  return args as readonly number[];
}

function dimList(dim: number | readonly number[] | undefined): readonly number[] {
  if (dim === undefined) return NO_DIMS;
  return typeof dim === "number" ? [dim] : dim;
}

function handle(t: Tensor | undefined | null): number {
  return t ? t._h : 0;
}

function genHandle(g: GeneratorHandle | undefined): number {
  return g ? g._h : 0;
}

export class Tensor {
  /** @internal Native handle; 0 once disposed. */
  _h: number;
  /** @internal Exempt from scopes (see keep()). */
  _kept = false;
  /** @internal Registered with the GC backstop (see scope.ts). */
  _gc = false;
  #shape: number[] | undefined;
  #dtype: DType | undefined;
  #device: Device | undefined;

  /** @internal Wraps a handle the shim just returned. Use the factory functions instead. */
  constructor(handle: number) {
    this._h = handle;
    track(this);
  }

  // ---- metadata ------------------------------------------------------------------------

  #readMeta(): void {
    check(S.vt_meta(this._h, OUT_PTR));
    const ndim = OUT[0]!;
    this.#dtype = dtypeFromCode(OUT[1]!);
    this.#device = deviceName(OUT[2]!, OUT[3]!);
    const shape = new Array<number>(ndim);
    for (let i = 0; i < ndim; i++) shape[i] = OUT[5 + i]!;
    this.#shape = shape;
  }

  /** Sizes of each dimension. Do not mutate the returned array. */
  get shape(): number[] {
    if (this.#shape === undefined) this.#readMeta();
    return this.#shape!;
  }

  get dtype(): DType {
    if (this.#dtype === undefined) this.#readMeta();
    return this.#dtype!;
  }

  /** "cpu" or "cuda:N". */
  get device(): Device {
    if (this.#device === undefined) this.#readMeta();
    return this.#device!;
  }

  get ndim(): number {
    return this.shape.length;
  }

  dim(): number {
    return this.shape.length;
  }

  /** size() is the shape; size(d) one dimension (negative d counts from the end). */
  size(): number[];
  size(dim: number): number;
  size(dim?: number): number[] | number {
    const s = this.shape;
    if (dim === undefined) return s;
    const d = dim < 0 ? dim + s.length : dim;
    if (d < 0 || d >= s.length) throw new TorchError(`dimension ${dim} out of range for a ${s.length}-d tensor`);
    return s[d]!;
  }

  numel(): number {
    let n = 1;
    for (const s of this.shape) n *= s;
    return n;
  }

  get isCuda(): boolean {
    return this.device !== "cpu";
  }

  get requiresGrad(): boolean {
    check(S.vt_meta(this._h, OUT_PTR));
    return OUT[4] === 1;
  }

  set requiresGrad(flag: boolean) {
    check(S.vt_requires_grad_(this._h, flag ? 1 : 0));
  }

  get isLeaf(): boolean {
    check(S.vt_autograd_meta(this._h, OUT_PTR));
    return OUT[0] === 1;
  }

  get hasGradFn(): boolean {
    check(S.vt_autograd_meta(this._h, OUT_PTR));
    return OUT[1] === 1;
  }

  isContiguous(): boolean {
    check(S.vt_layout(this._h, OUT_PTR));
    return OUT[2] === 1;
  }

  stride(): number[] {
    const n = this.ndim;
    check(S.vt_layout(this._h, OUT_PTR));
    return Array.from(OUT.subarray(4, 4 + n));
  }

  /** Whether both tensors view the same storage. */
  isAliasOf(other: Tensor): boolean {
    check(S.vt_same_storage(this._h, other._h, OUT_PTR));
    return OUT[0] === 1;
  }

  get isDisposed(): boolean {
    return this._h === 0;
  }

  toString(): string {
    if (this._h === 0) return "Tensor(disposed)";
    return `Tensor(shape=[${this.shape.join(", ")}], dtype=${this.dtype}, device=${this.device})`;
  }

  /** console.log / Bun.inspect show the summary instead of the internal fields. */
  [Symbol.for("nodejs.util.inspect.custom")](): string {
    return this.toString();
  }

  // ---- lifetime ------------------------------------------------------------------------

  /** Frees the native tensor now. Safe to call more than once. */
  dispose(): void {
    if (this._h === 0) return;
    S.vt_free(this._h);
    untrack(this);
    this._h = 0;
  }

  [Symbol.dispose](): void {
    this.dispose();
  }

  // ---- conversion and reading back -----------------------------------------------------

  /** to("cuda"), to("bf16"), to({device, dtype}) or to(other tensor's dtype and device). */
  to(target: Device | DType | ToOptions | Tensor): Tensor {
    let opts: ToOptions;
    if (typeof target === "string") opts = isDType(target) ? { dtype: target } : { device: target };
    else if (target instanceof Tensor) opts = { dtype: target.dtype, device: target.device };
    else opts = target;
    const dt = opts.dtype === undefined ? -1 : DTYPE_CODE[opts.dtype];
    let devType = -1;
    let devIndex = -1;
    if (opts.device !== undefined) {
      const d = parseDevice(opts.device);
      devType = d.type;
      devIndex = d.index;
    }
    return result(S.vt_to(this._h, dt, devType, devIndex, opts.nonBlocking ? 1 : 0, opts.copy ? 1 : 0, OUT_PTR));
  }

  /**
   * A copy in page-locked host memory (CUDA builds only), so that `to({ device, nonBlocking:
   * true })` from it is queued on the stream instead of holding the host until the device
   * reaches it.
   */
  pinMemory(): Tensor {
    return result(S.vt_pin_memory(this._h, OUT_PTR));
  }

  /** Whether this is a host tensor in page-locked memory. */
  get isPinned(): boolean {
    check(S.vt_is_pinned(this._h, OUT_PTR));
    return OUT[0] === 1;
  }

  float(): Tensor {
    return this.to({ dtype: "f32" });
  }
  half(): Tensor {
    return this.to({ dtype: "f16" });
  }
  bfloat16(): Tensor {
    return this.to({ dtype: "bf16" });
  }
  double(): Tensor {
    return this.to({ dtype: "f64" });
  }
  long(): Tensor {
    return this.to({ dtype: "i64" });
  }
  int(): Tensor {
    return this.to({ dtype: "i32" });
  }
  bool(): Tensor {
    return this.to({ dtype: "bool" });
  }
  cpu(): Tensor {
    return this.to({ device: "cpu" });
  }
  cuda(index?: number): Tensor {
    return this.to({ device: index === undefined ? "cuda" : `cuda:${index}` });
  }

  /**
   * All elements, row-major, in a typed array: Float32Array for f32/f16/bf16,
   * Float64Array, BigInt64Array (i64), Int32Array, Uint8Array (u8, bool), Int8Array,
   * Int16Array. One copy, from any device.
   */
  toArray(): HostArray {
    return this.#readInto(HOST_DTYPE[this.dtype]);
  }

  /** Elements converted to float32. */
  toFloat32Array(): Float32Array {
    return this.#readInto("f32") as Float32Array;
  }

  /** Elements converted to float64 (exact for every integer up to 2^53). */
  toFloat64Array(): Float64Array {
    return this.#readInto("f64") as Float64Array;
  }

  /** Elements converted to int32 (token ids, indices). */
  toInt32Array(): Int32Array {
    return this.#readInto("i32") as Int32Array;
  }

  #readInto(hostDtype: DType): HostArray {
    const out = allocHostArray(hostDtype, this.numel());
    if (out.length > 0) {
      check(S.vt_to_host(this._h, out as unknown as Pointer, DTYPE_CODE[hostDtype], out.byteLength));
    }
    return out;
  }

  /** Nested arrays of numbers (booleans for bool tensors), like PyTorch's tolist(). */
  toList(): unknown {
    const flat = this.dtype === "bool" ? Array.from(this.toArray() as Uint8Array, (v) => v !== 0) : Array.from(this.toFloat64Array());
    const shape = this.shape;
    if (shape.length === 0) return flat[0];
    const build = (dim: number, offset: number, stride: number): unknown[] => {
      const n = shape[dim]!;
      const inner = stride / n;
      const out = new Array<unknown>(n);
      for (let i = 0; i < n; i++) {
        out[i] = dim === shape.length - 1 ? flat[offset + i] : build(dim + 1, offset + i * inner, inner);
      }
      return out;
    };
    return build(0, 0, flat.length);
  }

  /** The value of a one-element tensor. */
  item(): number {
    check(S.vt_item(this._h, OUT_PTR));
    return OUT[0]!;
  }

  /** Size in bytes of the elements. */
  nbytes(): number {
    return this.numel() * DTYPE_SIZE[this.dtype];
  }

  // ---- copies and autograd identity ----------------------------------------------------

  clone(): Tensor {
    return result(S.vt_unary(OPS.unary.clone, this._h, OUT_PTR));
  }
  detach(): Tensor {
    return result(S.vt_unary(OPS.unary.detach, this._h, OUT_PTR));
  }
  contiguous(): Tensor {
    return result(S.vt_unary(OPS.unary.contiguous, this._h, OUT_PTR));
  }
  /** A second handle to this very tensor (same storage and autograd identity). */
  alias(): Tensor {
    return result(S.vt_shallow_clone(this._h, OUT_PTR));
  }

  // ---- autograd ------------------------------------------------------------------------

  requiresGrad_(flag = true): this {
    check(S.vt_requires_grad_(this._h, flag ? 1 : 0));
    return this;
  }

  /** The accumulated gradient, as a new handle, or undefined when there is none. */
  get grad(): Tensor | undefined {
    check(S.vt_grad(this._h, OUT_PTR));
    const h = OUT[0]!;
    return h === 0 ? undefined : new Tensor(h);
  }

  set grad(g: Tensor | undefined) {
    check(S.vt_set_grad(this._h, handle(g)));
  }

  retainGrad(): this {
    check(S.vt_retain_grad(this._h));
    return this;
  }

  /**
   * Backpropagates from this tensor. Without `grad` the tensor must hold one element.
   * Checkpointed blocks on the way are recomputed (see checkpoint()).
   */
  backward(grad?: Tensor, opts: BackwardOptions = {}): void {
    check(S.vt_backward(this._h, handle(grad), opts.retainGraph ? 1 : 0, opts.createGraph ? 1 : 0));
    afterBackward.run(opts);
  }

  // ---- elementwise arithmetic ------------------------------------------------------------

  add(other: TensorOrScalar, alpha = 1): Tensor {
    if (typeof other === "object") return result(S.vt_binary(OPS.binary.add, this._h, other._h, alpha, OUT_PTR));
    const v = num(other) * alpha;
    return result(S.vt_scalar(OPS.scalar.add, this._h, v, isInt(v), OUT_PTR));
  }
  sub(other: TensorOrScalar, alpha = 1): Tensor {
    if (typeof other === "object") return result(S.vt_binary(OPS.binary.sub, this._h, other._h, alpha, OUT_PTR));
    const v = num(other) * alpha;
    return result(S.vt_scalar(OPS.scalar.sub, this._h, v, isInt(v), OUT_PTR));
  }
  mul(other: TensorOrScalar): Tensor {
    return this.#binOrScalar(OPS.binary.mul, OPS.scalar.mul, other);
  }
  div(other: TensorOrScalar): Tensor {
    if (typeof other === "object") return result(S.vt_binary(OPS.binary.div, this._h, other._h, 1, OUT_PTR));
    // true division, like PyTorch: the scalar is never treated as an integer here
    return result(S.vt_scalar(OPS.scalar.div, this._h, num(other), 0, OUT_PTR));
  }
  pow(exponent: TensorOrScalar): Tensor {
    return this.#binOrScalar(OPS.binary.pow, OPS.scalar.pow, exponent);
  }
  remainder(other: TensorOrScalar): Tensor {
    return this.#binOrScalar(OPS.binary.remainder, OPS.scalar.remainder, other);
  }
  fmod(other: TensorOrScalar): Tensor {
    return this.#binOrScalar(OPS.binary.fmod, OPS.scalar.fmod, other);
  }
  floorDivide(other: TensorOrScalar): Tensor {
    return this.#binOrScalar(OPS.binary.floor_divide, OPS.scalar.floor_divide, other);
  }
  maximum(other: TensorOrScalar): Tensor {
    return this.#binOrScalar(OPS.binary.maximum, OPS.scalar.maximum, other);
  }
  minimum(other: TensorOrScalar): Tensor {
    return this.#binOrScalar(OPS.binary.minimum, OPS.scalar.minimum, other);
  }
  atan2(other: Tensor): Tensor {
    return result(S.vt_binary(OPS.binary.atan2, this._h, other._h, 1, OUT_PTR));
  }
  /** scalar - this */
  rsub(scalar: number): Tensor {
    return result(S.vt_scalar(OPS.scalar.rsub, this._h, scalar, isInt(scalar), OUT_PTR));
  }
  /** scalar / this */
  rdiv(scalar: number): Tensor {
    return result(S.vt_scalar(OPS.scalar.rdiv, this._h, scalar, 0, OUT_PTR));
  }
  /** scalar ** this */
  rpow(scalar: number): Tensor {
    return result(S.vt_scalar(OPS.scalar.rpow, this._h, scalar, isInt(scalar), OUT_PTR));
  }

  #binOrScalar(binaryOp: number, scalarOp: number, other: TensorOrScalar): Tensor {
    if (typeof other === "object") return result(S.vt_binary(binaryOp, this._h, other._h, 1, OUT_PTR));
    const v = num(other);
    return result(S.vt_scalar(scalarOp, this._h, v, isInt(v), OUT_PTR));
  }

  #unary(op: number): Tensor {
    return result(S.vt_unary(op, this._h, OUT_PTR));
  }

  neg(): Tensor { return this.#unary(OPS.unary.neg); }
  abs(): Tensor { return this.#unary(OPS.unary.abs); }
  exp(): Tensor { return this.#unary(OPS.unary.exp); }
  log(): Tensor { return this.#unary(OPS.unary.log); }
  log2(): Tensor { return this.#unary(OPS.unary.log2); }
  log1p(): Tensor { return this.#unary(OPS.unary.log1p); }
  expm1(): Tensor { return this.#unary(OPS.unary.expm1); }
  sqrt(): Tensor { return this.#unary(OPS.unary.sqrt); }
  rsqrt(): Tensor { return this.#unary(OPS.unary.rsqrt); }
  sin(): Tensor { return this.#unary(OPS.unary.sin); }
  cos(): Tensor { return this.#unary(OPS.unary.cos); }
  tan(): Tensor { return this.#unary(OPS.unary.tan); }
  tanh(): Tensor { return this.#unary(OPS.unary.tanh); }
  sigmoid(): Tensor { return this.#unary(OPS.unary.sigmoid); }
  relu(): Tensor { return this.#unary(OPS.unary.relu); }
  silu(): Tensor { return this.#unary(OPS.unary.silu); }
  /** GELU; approximate "tanh" uses the tanh formula. */
  gelu(approximate: "none" | "tanh" = "none"): Tensor {
    return this.#unary(approximate === "tanh" ? OPS.unary.gelu_tanh : OPS.unary.gelu);
  }
  erf(): Tensor { return this.#unary(OPS.unary.erf); }
  floor(): Tensor { return this.#unary(OPS.unary.floor); }
  ceil(): Tensor { return this.#unary(OPS.unary.ceil); }
  round(): Tensor { return this.#unary(OPS.unary.round); }
  trunc(): Tensor { return this.#unary(OPS.unary.trunc); }
  sign(): Tensor { return this.#unary(OPS.unary.sign); }
  reciprocal(): Tensor { return this.#unary(OPS.unary.reciprocal); }
  square(): Tensor { return this.#unary(OPS.unary.square); }
  logicalNot(): Tensor { return this.#unary(OPS.unary.logical_not); }
  bitwiseNot(): Tensor { return this.#unary(OPS.unary.bitwise_not); }
  isnan(): Tensor { return this.#unary(OPS.unary.isnan); }
  isinf(): Tensor { return this.#unary(OPS.unary.isinf); }
  isfinite(): Tensor { return this.#unary(OPS.unary.isfinite); }
  /** Indices of non-zero elements, shape [count, ndim]. */
  nonzero(): Tensor { return this.#unary(OPS.unary.nonzero); }

  clamp(min?: number, max?: number): Tensor {
    return result(S.vt_clamp(this._h, min === undefined ? 0 : 1, min ?? 0, max === undefined ? 0 : 1, max ?? 0, OUT_PTR));
  }
  /** Elementwise clamp with tensor bounds (either may be omitted). */
  clampTensor(min?: Tensor, max?: Tensor): Tensor {
    return result(S.vt_ternary(OPS.ternary.clamp_tensor, this._h, handle(min), handle(max), 0, 0, OUT_PTR));
  }
  clampMin(min: number): Tensor {
    return this.clamp(min, undefined);
  }
  clampMax(max: number): Tensor {
    return this.clamp(undefined, max);
  }
  /** this + weight * (end - this), weight a tensor. */
  lerp(end: Tensor, weight: Tensor | number): Tensor {
    if (typeof weight === "number") return this.add(end.sub(this).mul(weight));
    return result(S.vt_ternary(OPS.ternary.lerp, this._h, end._h, weight._h, 0, 0, OUT_PTR));
  }
  /** this + value * t1 * t2 */
  addcmul(t1: Tensor, t2: Tensor, value = 1): Tensor {
    return result(S.vt_ternary(OPS.ternary.addcmul, this._h, t1._h, t2._h, value, 0, OUT_PTR));
  }
  /** this + value * t1 / t2 */
  addcdiv(t1: Tensor, t2: Tensor, value = 1): Tensor {
    return result(S.vt_ternary(OPS.ternary.addcdiv, this._h, t1._h, t2._h, value, 0, OUT_PTR));
  }

  // ---- comparisons and logic --------------------------------------------------------------

  eq(other: TensorOrScalar): Tensor { return this.#binOrScalar(OPS.binary.eq, OPS.scalar.eq, other); }
  ne(other: TensorOrScalar): Tensor { return this.#binOrScalar(OPS.binary.ne, OPS.scalar.ne, other); }
  lt(other: TensorOrScalar): Tensor { return this.#binOrScalar(OPS.binary.lt, OPS.scalar.lt, other); }
  le(other: TensorOrScalar): Tensor { return this.#binOrScalar(OPS.binary.le, OPS.scalar.le, other); }
  gt(other: TensorOrScalar): Tensor { return this.#binOrScalar(OPS.binary.gt, OPS.scalar.gt, other); }
  ge(other: TensorOrScalar): Tensor { return this.#binOrScalar(OPS.binary.ge, OPS.scalar.ge, other); }
  logicalAnd(other: Tensor): Tensor { return result(S.vt_binary(OPS.binary.logical_and, this._h, other._h, 1, OUT_PTR)); }
  logicalOr(other: Tensor): Tensor { return result(S.vt_binary(OPS.binary.logical_or, this._h, other._h, 1, OUT_PTR)); }
  logicalXor(other: Tensor): Tensor { return result(S.vt_binary(OPS.binary.logical_xor, this._h, other._h, 1, OUT_PTR)); }
  bitwiseAnd(other: Tensor): Tensor { return result(S.vt_binary(OPS.binary.bitwise_and, this._h, other._h, 1, OUT_PTR)); }
  bitwiseOr(other: Tensor): Tensor { return result(S.vt_binary(OPS.binary.bitwise_or, this._h, other._h, 1, OUT_PTR)); }

  /** True when both tensors have the same shape and elements. */
  equal(other: Tensor): boolean {
    const t = result(S.vt_binary(OPS.binary.equal, this._h, other._h, 1, OUT_PTR));
    const v = t.item();
    t.dispose();
    return v === 1;
  }

  // ---- matrix products ------------------------------------------------------------------

  matmul(other: Tensor): Tensor { return result(S.vt_binary(OPS.binary.matmul, this._h, other._h, 1, OUT_PTR)); }
  mm(other: Tensor): Tensor { return result(S.vt_binary(OPS.binary.mm, this._h, other._h, 1, OUT_PTR)); }
  bmm(other: Tensor): Tensor { return result(S.vt_binary(OPS.binary.bmm, this._h, other._h, 1, OUT_PTR)); }
  dot(other: Tensor): Tensor { return result(S.vt_binary(OPS.binary.dot, this._h, other._h, 1, OUT_PTR)); }
  outer(other: Tensor): Tensor { return result(S.vt_binary(OPS.binary.outer, this._h, other._h, 1, OUT_PTR)); }
  /** beta * this + alpha * (batch1 @ batch2) */
  baddbmm(batch1: Tensor, batch2: Tensor, opts: { beta?: number; alpha?: number } = {}): Tensor {
    return result(S.vt_ternary(OPS.ternary.baddbmm, this._h, batch1._h, batch2._h, opts.beta ?? 1, opts.alpha ?? 1, OUT_PTR));
  }
  /** beta * this + alpha * (mat1 @ mat2) */
  addmm(mat1: Tensor, mat2: Tensor, opts: { beta?: number; alpha?: number } = {}): Tensor {
    return result(S.vt_ternary(OPS.ternary.addmm, this._h, mat1._h, mat2._h, opts.beta ?? 1, opts.alpha ?? 1, OUT_PTR));
  }

  // ---- reductions -----------------------------------------------------------------------

  #reduce(op: number, dim: number | readonly number[] | undefined, keepdim: boolean, dtype?: DType, p = 0): Tensor {
    const n = putList(dimList(dim));
    return result(S.vt_reduce(op, this._h, ARGS_PTR, n, keepdim ? 1 : 0, dtype === undefined ? -1 : DTYPE_CODE[dtype], p, OUT_PTR));
  }

  sum(dim?: number | readonly number[], keepdim = false, opts: { dtype?: DType } = {}): Tensor {
    if (dim === undefined && opts.dtype === undefined) return this.#unary(OPS.unary.sum_all);
    return this.#reduce(OPS.reduce.sum, dim, keepdim, opts.dtype);
  }
  mean(dim?: number | readonly number[], keepdim = false, opts: { dtype?: DType } = {}): Tensor {
    if (dim === undefined && opts.dtype === undefined) return this.#unary(OPS.unary.mean_all);
    return this.#reduce(OPS.reduce.mean, dim, keepdim, opts.dtype);
  }
  prod(dim?: number, keepdim = false, opts: { dtype?: DType } = {}): Tensor {
    return this.#reduce(OPS.reduce.prod, dim, keepdim, opts.dtype);
  }
  amax(dim?: number | readonly number[], keepdim = false): Tensor {
    return this.#reduce(OPS.reduce.amax, dim, keepdim);
  }
  amin(dim?: number | readonly number[], keepdim = false): Tensor {
    return this.#reduce(OPS.reduce.amin, dim, keepdim);
  }
  logsumexp(dim?: number | readonly number[], keepdim = false): Tensor {
    return this.#reduce(OPS.reduce.logsumexp, dim, keepdim);
  }
  all(dim?: number, keepdim = false): Tensor {
    return this.#reduce(OPS.reduce.all, dim, keepdim);
  }
  any(dim?: number, keepdim = false): Tensor {
    return this.#reduce(OPS.reduce.any, dim, keepdim);
  }
  /** Variance; unbiased (Bessel-corrected) by default, like PyTorch. */
  var(dim?: number | readonly number[], opts: { unbiased?: boolean; keepdim?: boolean } = {}): Tensor {
    return this.#reduce(OPS.reduce.var, dim, opts.keepdim ?? false, undefined, (opts.unbiased ?? true) ? 1 : 0);
  }
  std(dim?: number | readonly number[], opts: { unbiased?: boolean; keepdim?: boolean } = {}): Tensor {
    return this.#reduce(OPS.reduce.std, dim, opts.keepdim ?? false, undefined, (opts.unbiased ?? true) ? 1 : 0);
  }
  /** {var, mean} in one pass. */
  varMean(dim?: number, opts: { unbiased?: boolean; keepdim?: boolean } = {}): { var: Tensor; mean: Tensor } {
    const r = pair(S.vt_pair_op(OPS.pair.var_mean, this._h, dim ?? ALL_DIMS, (opts.unbiased ?? true) ? 1 : 0, opts.keepdim ? 1 : 0, 0, OUT_PTR));
    return { var: r.values, mean: r.indices };
  }
  /** Vector p-norm (default 2) over dims (default all); `dtype` accumulates and returns in it (no copy of the input). */
  norm(p = 2, dim?: number | readonly number[], keepdim = false, opts: { dtype?: DType } = {}): Tensor {
    return this.#reduce(OPS.reduce.norm, dim, keepdim, opts.dtype, p);
  }
  countNonzero(dim?: number | readonly number[]): Tensor {
    return this.#reduce(OPS.reduce.count_nonzero, dim, false);
  }

  /** max() of all elements, or {values, indices} along dim. */
  max(): Tensor;
  max(dim: number, keepdim?: boolean): ValuesIndices;
  max(dim?: number, keepdim = false): Tensor | ValuesIndices {
    if (dim === undefined) return this.#unary(OPS.unary.max_all);
    return pair(S.vt_pair_op(OPS.pair.max_dim, this._h, dim, keepdim ? 1 : 0, 0, 0, OUT_PTR));
  }
  min(): Tensor;
  min(dim: number, keepdim?: boolean): ValuesIndices;
  min(dim?: number, keepdim = false): Tensor | ValuesIndices {
    if (dim === undefined) return this.#unary(OPS.unary.min_all);
    return pair(S.vt_pair_op(OPS.pair.min_dim, this._h, dim, keepdim ? 1 : 0, 0, 0, OUT_PTR));
  }
  argmax(dim?: number, keepdim = false): Tensor {
    return result(S.vt_dim_op(OPS.dim.argmax, this._h, dim === undefined ? 0 : 1, dim ?? 0, keepdim ? 1 : 0, -1, OUT_PTR));
  }
  argmin(dim?: number, keepdim = false): Tensor {
    return result(S.vt_dim_op(OPS.dim.argmin, this._h, dim === undefined ? 0 : 1, dim ?? 0, keepdim ? 1 : 0, -1, OUT_PTR));
  }
  cumsum(dim: number, opts: { dtype?: DType } = {}): Tensor {
    return this.#dimOp(OPS.dim.cumsum, dim, opts.dtype);
  }
  cumprod(dim: number, opts: { dtype?: DType } = {}): Tensor {
    return this.#dimOp(OPS.dim.cumprod, dim, opts.dtype);
  }
  softmax(dim: number, opts: { dtype?: DType } = {}): Tensor {
    return this.#dimOp(OPS.dim.softmax, dim, opts.dtype);
  }
  logSoftmax(dim: number, opts: { dtype?: DType } = {}): Tensor {
    return this.#dimOp(OPS.dim.log_softmax, dim, opts.dtype);
  }

  #dimOp(op: number, dim: number, dtype?: DType): Tensor {
    return result(S.vt_dim_op(op, this._h, 1, dim, 0, dtype === undefined ? -1 : DTYPE_CODE[dtype], OUT_PTR));
  }

  // ---- sorting and sampling ---------------------------------------------------------------

  sort(dim = -1, descending = false): ValuesIndices {
    return pair(S.vt_pair_op(OPS.pair.sort, this._h, dim, descending ? 1 : 0, 0, 0, OUT_PTR));
  }
  argsort(dim = -1, descending = false): Tensor {
    return result(S.vt_dim_op(OPS.dim.argsort, this._h, 1, dim, descending ? 1 : 0, -1, OUT_PTR));
  }
  topk(k: number, dim = -1, largest = true, sorted = true): ValuesIndices {
    return pair(S.vt_pair_op(OPS.pair.topk, this._h, k, dim, largest ? 1 : 0, sorted ? 1 : 0, OUT_PTR));
  }
  kthvalue(k: number, dim = -1, keepdim = false): ValuesIndices {
    return pair(S.vt_pair_op(OPS.pair.kthvalue, this._h, k, dim, keepdim ? 1 : 0, 0, OUT_PTR));
  }
  /** Samples indices from rows of (unnormalised) probabilities. */
  multinomial(numSamples: number, replacement = false, generator?: GeneratorHandle): Tensor {
    return result(S.vt_multinomial(this._h, numSamples, replacement ? 1 : 0, genHandle(generator), OUT_PTR));
  }

  // ---- shape and views --------------------------------------------------------------------

  #listOp(op: number, values: readonly number[]): Tensor {
    const n = putList(values);
    return result(S.vt_list_op(op, this._h, ARGS_PTR, n, OUT_PTR));
  }
  #intOp(op: number, i0 = 0, i1 = 0, i2 = 0, i3 = 0): Tensor {
    return result(S.vt_int_op(op, this._h, i0, i1, i2, i3, OUT_PTR));
  }

  reshape(...shape: (number | readonly number[])[]): Tensor { return this.#listOp(OPS.list.reshape, flatArgs(shape)); }
  view(...shape: (number | readonly number[])[]): Tensor { return this.#listOp(OPS.list.view, flatArgs(shape)); }
  expand(...shape: (number | readonly number[])[]): Tensor { return this.#listOp(OPS.list.expand, flatArgs(shape)); }
  expandAs(other: Tensor): Tensor { return result(S.vt_binary(OPS.binary.expand_as, this._h, other._h, 1, OUT_PTR)); }
  permute(...dims: (number | readonly number[])[]): Tensor { return this.#listOp(OPS.list.permute, flatArgs(dims)); }
  repeat(...times: (number | readonly number[])[]): Tensor { return this.#listOp(OPS.list.repeat, flatArgs(times)); }
  tile(...times: (number | readonly number[])[]): Tensor { return this.#listOp(OPS.list.tile, flatArgs(times)); }
  flip(...dims: (number | readonly number[])[]): Tensor { return this.#listOp(OPS.list.flip, flatArgs(dims)); }
  transpose(dim0: number, dim1: number): Tensor { return this.#intOp(OPS.int.transpose, dim0, dim1); }
  /** Transpose of a 2-d tensor. */
  t(): Tensor { return this.#unary(OPS.unary.t); }
  /** Shorthand for transpose(-2, -1). */
  mT(): Tensor { return this.#intOp(OPS.int.transpose, -2, -1); }
  narrow(dim: number, start: number, length: number): Tensor { return this.#intOp(OPS.int.narrow, dim, start, length); }
  /** Python's t[..., start:end:step] along one dim; end defaults to the end. */
  slice(dim: number, start = 0, end?: number, step = 1): Tensor {
    return this.#intOp(OPS.int.slice, dim, start, end ?? Number.MAX_SAFE_INTEGER, step);
  }
  /** Several slices in one call: [dim, start, end, step] each (end undefined = to the end). */
  slices(specs: readonly (readonly [number, number, number | undefined, number?])[]): Tensor {
    specs.forEach(([d, s, e, st], i) => {
      ARGS[4 * i] = d;
      ARGS[4 * i + 1] = s;
      ARGS[4 * i + 2] = e ?? Number.MAX_SAFE_INTEGER;
      ARGS[4 * i + 3] = st ?? 1;
    });
    return result(S.vt_slices(this._h, ARGS_PTR, specs.length, OUT_PTR));
  }
  /** t[..., index, ...] along dim (removes that dim). */
  select(dim: number, index: number): Tensor { return this.#intOp(OPS.int.select, dim, index); }
  squeeze(dim?: number): Tensor {
    return result(S.vt_dim_op(OPS.dim.squeeze, this._h, dim === undefined ? 0 : 1, dim ?? 0, 0, -1, OUT_PTR));
  }
  unsqueeze(dim: number): Tensor {
    return result(S.vt_dim_op(OPS.dim.unsqueeze, this._h, 1, dim, 0, -1, OUT_PTR));
  }
  flatten(startDim = 0, endDim = -1): Tensor { return this.#intOp(OPS.int.flatten, startDim, endDim); }
  /** Splits dim into `sizes` (one entry may be -1). */
  unflatten(dim: number, sizes: readonly number[]): Tensor {
    const shape = this.shape;
    const d = dim < 0 ? dim + shape.length : dim;
    return this.reshape([...shape.slice(0, d), ...sizes, ...shape.slice(d + 1)]);
  }
  movedim(source: number, destination: number): Tensor { return this.#intOp(OPS.int.movedim, source, destination); }
  tril(diagonal = 0): Tensor { return this.#intOp(OPS.int.tril, diagonal); }
  triu(diagonal = 0): Tensor { return this.#intOp(OPS.int.triu, diagonal); }
  roll(shift: number, dim: number): Tensor { return this.#intOp(OPS.int.roll, shift, dim); }
  diagonal(offset = 0, dim1 = 0, dim2 = 1): Tensor { return this.#intOp(OPS.int.diagonal, offset, dim1, dim2); }
  diagEmbed(offset = 0, dim1 = -2, dim2 = -1): Tensor { return this.#intOp(OPS.int.diag_embed, offset, dim1, dim2); }
  repeatInterleave(repeats: number, dim: number): Tensor { return this.#intOp(OPS.int.repeat_interleave, repeats, dim); }
  unfold(dim: number, size: number, step: number): Tensor { return this.#intOp(OPS.int.unfold, dim, size, step); }
  oneHot(numClasses = -1): Tensor { return this.#intOp(OPS.int.one_hot, numClasses); }

  #split(op: number, values: readonly number[], dim: number): Tensor[] {
    const n = putList(values);
    check(S.vt_split(op, this._h, ARGS_PTR, n, dim, OUT.length - 1, OUT_PTR));
    const count = OUT[0]!;
    const parts = new Array<Tensor>(count);
    for (let i = 0; i < count; i++) parts[i] = new Tensor(OUT[1 + i]!);
    return parts;
  }
  /** split(size) into equal chunks of `size`, or split([sizes]) into those sizes. */
  split(sizeOrSizes: number | readonly number[], dim = 0): Tensor[] {
    if (typeof sizeOrSizes === "number") return this.#split(0, [sizeOrSizes], dim);
    return this.#split(1, sizeOrSizes, dim);
  }
  chunk(chunks: number, dim = 0): Tensor[] { return this.#split(2, [chunks], dim); }
  unbind(dim = 0): Tensor[] { return this.#split(3, NO_DIMS, dim); }

  // ---- indexing ------------------------------------------------------------------------

  #indexOp(op: number, dim: number, b: Tensor, c: Tensor | undefined, value = 0): Tensor {
    return result(S.vt_index_op(op, this._h, dim, b._h, handle(c), value, isInt(value), OUT_PTR));
  }
  #indexInplace(op: number, dim: number, b: Tensor, c: Tensor | undefined, value = 0): this {
    check(S.vt_index_inplace(op, this._h, dim, b._h, handle(c), value, isInt(value)));
    return this;
  }

  indexSelect(dim: number, index: Tensor): Tensor { return this.#indexOp(OPS.index.index_select, dim, index, undefined); }
  gather(dim: number, index: Tensor): Tensor { return this.#indexOp(OPS.index.gather, dim, index, undefined); }
  takeAlongDim(indices: Tensor, dim: number): Tensor { return this.#indexOp(OPS.index.take_along_dim, dim, indices, undefined); }
  scatter(dim: number, index: Tensor, src: Tensor | number): Tensor {
    if (typeof src === "number") return this.#indexOp(OPS.index.scatter_value, dim, index, undefined, src);
    return this.#indexOp(OPS.index.scatter, dim, index, src);
  }
  scatterAdd(dim: number, index: Tensor, src: Tensor): Tensor { return this.#indexOp(OPS.index.scatter_add, dim, index, src); }
  /** Fills positions where mask is true with value (a number or a one-element tensor). */
  maskedFill(mask: Tensor, value: Tensor | Scalar): Tensor {
    if (typeof value === "object") return this.#indexOp(OPS.index.masked_fill_tensor, 0, mask, value);
    return this.#indexOp(OPS.index.masked_fill, 0, mask, undefined, num(value));
  }
  maskedSelect(mask: Tensor): Tensor { return this.#indexOp(OPS.index.masked_select, 0, mask, undefined); }
  indexAdd(dim: number, index: Tensor, source: Tensor): Tensor { return this.#indexOp(OPS.index.index_add, dim, index, source); }
  indexCopy(dim: number, index: Tensor, source: Tensor): Tensor { return this.#indexOp(OPS.index.index_copy, dim, index, source); }
  indexFill(dim: number, index: Tensor, value: number): Tensor { return this.#indexOp(OPS.index.index_fill, dim, index, undefined, value); }
  /** t[index] = values (index: an integer or bool tensor over the leading dims). */
  indexPut(index: Tensor, values: Tensor, accumulate = false): Tensor {
    return this.#indexOp(accumulate ? OPS.index.index_put_accumulate : OPS.index.index_put, 0, index, values);
  }
  /** t[index]: an integer tensor picks rows, a bool tensor selects by mask. */
  index(index: Tensor): Tensor { return this.#indexOp(OPS.index.boolean_index, 0, index, undefined); }

  scatter_(dim: number, index: Tensor, src: Tensor): this { return this.#indexInplace(OPS.index_inplace.scatter, dim, index, src); }
  scatterAdd_(dim: number, index: Tensor, src: Tensor): this { return this.#indexInplace(OPS.index_inplace.scatter_add, dim, index, src); }
  maskedFill_(mask: Tensor, value: Scalar): this { return this.#indexInplace(OPS.index_inplace.masked_fill, 0, mask, undefined, num(value)); }
  indexAdd_(dim: number, index: Tensor, source: Tensor): this { return this.#indexInplace(OPS.index_inplace.index_add, dim, index, source); }
  indexCopy_(dim: number, index: Tensor, source: Tensor): this { return this.#indexInplace(OPS.index_inplace.index_copy, dim, index, source); }
  indexFill_(dim: number, index: Tensor, value: number): this { return this.#indexInplace(OPS.index_inplace.index_fill, dim, index, undefined, value); }
  indexPut_(index: Tensor, values: Tensor): this { return this.#indexInplace(OPS.index_inplace.index_put, 0, index, values); }

  // ---- in-place arithmetic -------------------------------------------------------------

  #inplace(binaryOp: number, scalarOp: number, other: TensorOrScalar, alpha = 1): this {
    if (typeof other === "object") check(S.vt_inplace_binary(binaryOp, this._h, other._h, alpha));
    else {
      const v = num(other) * alpha;
      check(S.vt_inplace_scalar(scalarOp, this._h, v, isInt(v)));
    }
    return this;
  }
  add_(other: TensorOrScalar, alpha = 1): this { return this.#inplace(OPS.inplace_binary.add, OPS.inplace_scalar.add, other, alpha); }
  sub_(other: TensorOrScalar, alpha = 1): this { return this.#inplace(OPS.inplace_binary.sub, OPS.inplace_scalar.sub, other, alpha); }
  mul_(other: TensorOrScalar): this { return this.#inplace(OPS.inplace_binary.mul, OPS.inplace_scalar.mul, other); }
  div_(other: TensorOrScalar): this {
    if (typeof other === "object") return this.#inplace(OPS.inplace_binary.div, OPS.inplace_scalar.div, other);
    check(S.vt_inplace_scalar(OPS.inplace_scalar.div, this._h, num(other), 0));
    return this;
  }
  pow_(exponent: number): this {
    check(S.vt_inplace_scalar(OPS.inplace_scalar.pow, this._h, exponent, isInt(exponent)));
    return this;
  }
  /** Copies src's values into this tensor (broadcasting, converting dtype and device). */
  copy_(src: Tensor): this {
    check(S.vt_inplace_binary(OPS.inplace_binary.copy, this._h, src._h, 1));
    return this;
  }
  fill_(value: Scalar): this {
    const v = num(value);
    check(S.vt_inplace_scalar(OPS.inplace_scalar.fill, this._h, v, isInt(v)));
    return this;
  }
  zero_(): this {
    return this.fill_(0);
  }
  clampMin_(min: number): this {
    check(S.vt_inplace_scalar(OPS.inplace_scalar.clamp_min, this._h, min, isInt(min)));
    return this;
  }
  clampMax_(max: number): this {
    check(S.vt_inplace_scalar(OPS.inplace_scalar.clamp_max, this._h, max, isInt(max)));
    return this;
  }
  /** Fills with samples from U[low, high). */
  uniform_(low = 0, high = 1, generator?: GeneratorHandle): this {
    check(S.vt_random_(0, this._h, low, high, genHandle(generator)));
    return this;
  }
  /** Fills with samples from N(mean, std^2). */
  normal_(mean = 0, std = 1, generator?: GeneratorHandle): this {
    check(S.vt_random_(1, this._h, mean, std, genHandle(generator)));
    return this;
  }
}

/**
 * Hook run after every backward(). The checkpoint module installs the recompute driver
 * here; by default it does nothing. Kept as a mutable slot so tensor.ts does not import
 * the autograd module (which imports this one).
 */
export const afterBackward: { run: (opts: BackwardOptions) => void } = { run: () => {} };

// Re-exported for modules that build argument lists for the shim.
export { putList, argsAt, handle, genHandle, result, pair, isInt, num };
