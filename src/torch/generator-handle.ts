/**
 * What a tensor op needs of a seeded `Generator` (random.ts): its native handle. A type of
 * its own so tensor.ts need not import random.ts, which builds tensors (its states are
 * uint8 tensors); `Generator` implements it.
 */
export interface GeneratorHandle {
  /** @internal The shim's generator handle (0 once disposed). */
  readonly _h: number;
}
