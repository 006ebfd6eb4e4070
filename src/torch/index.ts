/**
 * vagen's tensor library: libtorch through bun:ffi with PyTorch's eager API in camelCase.
 *
 *   import * as torch from "../torch/index.ts";
 *   const y = torch.tidy(() => torch.randn([2, 3]).matmul(w).relu());
 *
 * This file is the single public entry; everything above src/torch imports only it.
 */
export { Tensor, type ValuesIndices, type ToOptions, type BackwardOptions, type Scalar, type TensorOrScalar } from "./tensor.ts";
export { TorchError, TorchUnavailableError } from "./errors.ts";
export { loadTorch, setNumThreads, torchInfo, type TorchInfo } from "./native.ts";
export { DTYPES, DTYPE_SIZE, isFloating, type DType, type Device, type HostArray } from "./dtype.ts";
export { tidy, keep, liveTensors, tensorsFreedByGc, tensorLedger, setGcBackstop } from "./scope.ts";
export { dims1, dims2, dims3, dims4 } from "./shape.ts";
export {
  tensor,
  fromTypedArray,
  fromBytes,
  zeros,
  ones,
  empty,
  full,
  zerosLike,
  onesLike,
  emptyLike,
  fullLike,
  arange,
  linspace,
  eye,
  scalarTensor,
  rand,
  randn,
  randint,
  type TensorOptions,
  type RandomOptions,
} from "./creation.ts";
export { cat, stack, where, matmul, split, allclose } from "./functional.ts";
export { Generator, manualSeed, getRngState, setRngState } from "./random.ts";
export {
  noGrad,
  enableGrad,
  inferenceMode,
  isGradEnabled,
  setGradEnabled,
  isInferenceMode,
  grad,
  backward,
  checkpoint,
  customGrad,
  pendingCheckpoints,
} from "./autograd.ts";
export * as F from "./nn.ts";
export * as nn from "./nn-namespace.ts";
export * as optim from "./optim.ts";
export * as cuda from "./cuda.ts";
export * as safetensors from "./safetensors.ts";
export * as distributed from "./distributed.ts";
