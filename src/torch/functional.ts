/**
 * Functions over several tensors: cat, stack, where, and free-function forms of the
 * Tensor methods that PyTorch code commonly calls as torch.xxx(...).
 */
import { ARGS, ARGS_PTR, OPS, OUT, OUT_PTR, S, check } from "./native.ts";
import { TorchError } from "./errors.ts";
import { Tensor, result, type Scalar } from "./tensor.ts";
import { scalarTensor } from "./creation.ts";

function putHandles(tensors: readonly Tensor[], what: string): number {
  if (tensors.length === 0) throw new TorchError(`${what}() needs at least one tensor`);
  if (tensors.length > ARGS.length) throw new TorchError(`${what}() of more than ${ARGS.length} tensors`);
  for (let i = 0; i < tensors.length; i++) ARGS[i] = tensors[i]!._h;
  return tensors.length;
}

/** Concatenates along an existing dim. */
export function cat(tensors: readonly Tensor[], dim = 0): Tensor {
  const n = putHandles(tensors, "cat");
  return result(S.vt_join(0, ARGS_PTR, n, dim, OUT_PTR));
}

/** Stacks along a new dim. */
export function stack(tensors: readonly Tensor[], dim = 0): Tensor {
  const n = putHandles(tensors, "stack");
  return result(S.vt_join(1, ARGS_PTR, n, dim, OUT_PTR));
}

/** Elementwise `condition ? a : b`; a or b may be numbers. */
export function where(condition: Tensor, a: Tensor | Scalar, b: Tensor | Scalar): Tensor {
  const ref = typeof a === "object" ? a : typeof b === "object" ? b : undefined;
  const opts = ref ? { dtype: ref.dtype, device: ref.device } : { device: condition.device };
  const ta = typeof a === "object" ? a : scalarTensor(a, opts);
  const tb = typeof b === "object" ? b : scalarTensor(b, opts);
  try {
    return result(S.vt_ternary(OPS.ternary.where, condition._h, ta._h, tb._h, 0, 0, OUT_PTR));
  } finally {
    if (ta !== a) ta.dispose();
    if (tb !== b) tb.dispose();
  }
}

export function matmul(a: Tensor, b: Tensor): Tensor {
  return a.matmul(b);
}

/** Splits a tensor into one tensor per entry of `sizes` along dim (torch.split). */
export function split(t: Tensor, sizeOrSizes: number | readonly number[], dim = 0): Tensor[] {
  return t.split(sizeOrSizes, dim);
}

/** torch.allclose: |a - b| <= atol + rtol * |b| everywhere. */
export function allclose(a: Tensor, b: Tensor, rtol = 1e-5, atol = 1e-8): boolean {
  const x = a.toFloat64Array();
  const y = b.toFloat64Array();
  if (x.length !== y.length) return false;
  for (let i = 0; i < x.length; i++) {
    const d = Math.abs(x[i]! - y[i]!);
    if (!(d <= atol + rtol * Math.abs(y[i]!))) {
      if (!(Number.isNaN(x[i]!) && Number.isNaN(y[i]!))) return false;
    }
  }
  return true;
}

/** A second handle to a tensor; exported for parity with OUT-based helpers. */
export function aliasOf(t: Tensor): Tensor {
  check(S.vt_shallow_clone(t._h, OUT_PTR));
  return new Tensor(OUT[0]!);
}
