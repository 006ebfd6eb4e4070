/**
 * Checked shape destructuring: `const [B, T, H] = dims3(x, "hidden")` instead of
 * `x.shape as [number, number, number]`, which silently yields undefined on a tensor of
 * the wrong rank. A wrong rank throws an error that names the tensor and its shape.
 */
import type { Tensor } from "./tensor.ts";

function checked(t: Tensor, rank: number, name: string): number[] {
  const shape = t.shape;
  if (shape.length !== rank) {
    throw new Error(`${name}: expected a ${rank}-d tensor, got shape [${shape.join(", ")}]`);
  }
  return shape;
}

export function dims1(t: Tensor, name: string): [number] {
  return checked(t, 1, name) as [number];
}

export function dims2(t: Tensor, name: string): [number, number] {
  return checked(t, 2, name) as [number, number];
}

export function dims3(t: Tensor, name: string): [number, number, number] {
  return checked(t, 3, name) as [number, number, number];
}

export function dims4(t: Tensor, name: string): [number, number, number, number] {
  return checked(t, 4, name) as [number, number, number, number];
}
