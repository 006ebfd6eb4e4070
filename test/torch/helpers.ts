/**
 * Shared helpers for the tensor-library tests. Every suite is a function of the device so
 * test/torch runs it on the CPU and test/gpu runs the very same checks on CUDA.
 */
import { expect } from "bun:test";
import * as torch from "../../src/torch/index.ts";

export { torch };

/** Asserts numbers are elementwise within atol + rtol * |expected|. */
export function expectClose(actual: ArrayLike<number | bigint> | number, expected: ArrayLike<number> | number, atol = 1e-5, rtol = 1e-5): void {
  const a = typeof actual === "number" ? [actual] : Array.from(actual as ArrayLike<number>, Number);
  const e = typeof expected === "number" ? [expected] : Array.from(expected);
  expect(a.length).toBe(e.length);
  for (let i = 0; i < e.length; i++) {
    const tol = atol + rtol * Math.abs(e[i]!);
    if (!(Math.abs(a[i]! - e[i]!) <= tol)) {
      throw new Error(`element ${i}: got ${a[i]}, expected ${e[i]} (tolerance ${tol})\n  actual:   [${a.slice(0, 16).join(", ")}]\n  expected: [${e.slice(0, 16).join(", ")}]`);
    }
  }
}

/** Reads a tensor as plain numbers. */
export function values(t: torch.Tensor): number[] {
  return Array.from(t.toFloat64Array());
}

/** Runs fn in a tidy scope and asserts it leaves no tensor behind. */
export function noLeak(fn: () => void): void {
  const before = torch.liveTensors();
  torch.tidy(fn);
  expect(torch.liveTensors()).toBe(before);
}

/**
 * Central finite-difference gradient of scalar f at x (f64 for accuracy). Returns the
 * numerical gradient as plain numbers.
 */
export function finiteDifference(f: (x: torch.Tensor) => torch.Tensor, x: torch.Tensor, eps = 1e-6): number[] {
  const base = Array.from(x.toFloat64Array());
  const grad: number[] = [];
  for (let i = 0; i < base.length; i++) {
    const eval_ = (delta: number) =>
      torch.tidy(() => {
        const data = base.slice();
        data[i] = data[i]! + delta;
        const xi = torch.tensor(data, x.shape, { dtype: "f64", device: x.device });
        return torch.noGrad(() => f(xi)).item();
      });
    grad.push((eval_(eps) - eval_(-eps)) / (2 * eps));
  }
  return grad;
}

/** Analytic gradient of scalar f at x via backward(). */
export function analyticGradient(f: (x: torch.Tensor) => torch.Tensor, x: torch.Tensor): number[] {
  return torch.tidy(() => {
    const xi = x.detach().requiresGrad_(true);
    f(xi).backward();
    return values(xi.grad!);
  });
}

export const cudaAvailable = (() => {
  try {
    return torch.cuda.isAvailable();
  } catch {
    return false;
  }
})();
