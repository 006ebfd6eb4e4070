// THIS FILE IS GENERATED from the X-macro op lists of ffi/ops.cpp by scripts/shim-bindings.ts; do not edit it.
// `bun build.ts` rewrites it, and test/torch/shim-abi.test.ts fails when it is stale.

/** Op names per calling shape, in code order (the shim publishes the same lists as vt_op_table). */
export const OP_GROUPS = {
  unary: ["neg", "abs", "exp", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "silu", "gelu", "gelu_tanh", "erf", "floor", "ceil", "round", "trunc", "sign", "reciprocal", "square", "logical_not", "bitwise_not", "isnan", "isinf", "isfinite", "contiguous", "clone", "detach", "nonzero", "t", "sum_all", "mean_all", "max_all", "min_all", "argsort_stable"],
  binary: ["add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "matmul", "mm", "bmm", "dot", "outer", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "remainder", "fmod", "atan2", "floor_divide", "expand_as", "type_as", "equal", "mse_loss", "bce_with_logits"],
  scalar: ["add", "sub", "mul", "div", "pow", "eq", "ne", "lt", "le", "gt", "ge", "remainder", "fmod", "rsub", "rdiv", "rpow", "floor_divide", "maximum", "minimum"],
  inplace_binary: ["add", "sub", "mul", "div", "copy", "maximum"],
  inplace_scalar: ["add", "sub", "mul", "div", "pow", "fill", "clamp_min", "clamp_max"],
  reduce: ["sum", "mean", "amax", "amin", "logsumexp", "prod", "all", "any", "var", "std", "norm", "count_nonzero"],
  dim: ["softmax", "log_softmax", "cumsum", "cumprod", "argmax", "argmin", "argsort", "squeeze", "unsqueeze", "flatten_from"],
  int: ["transpose", "narrow", "slice", "select", "tril", "triu", "flatten", "roll", "diagonal", "movedim", "repeat_interleave", "one_hot", "unfold", "diag_embed"],
  list: ["reshape", "view", "expand", "permute", "flip", "repeat", "tile", "pad_zero"],
  pair: ["max_dim", "min_dim", "sort", "topk", "kthvalue", "var_mean", "std_mean"],
  index: ["index_select", "gather", "scatter", "scatter_add", "scatter_value", "masked_fill", "masked_fill_tensor", "masked_select", "take_along_dim", "index_add", "index_copy", "index_fill", "index_put", "index_put_accumulate", "boolean_index"],
  index_inplace: ["scatter", "scatter_add", "masked_fill", "index_add", "index_copy", "index_fill", "index_put"],
  ternary: ["where", "addmm", "baddbmm", "addcmul", "addcdiv", "lerp", "clamp_tensor"],
} as const;

/** Op codes by group and name: an op's code is its index in its X-macro list. */
export const OPS = {
  unary: { neg: 0, abs: 1, exp: 2, log: 3, log2: 4, log1p: 5, expm1: 6, sqrt: 7, rsqrt: 8, sin: 9, cos: 10, tan: 11, tanh: 12, sigmoid: 13, relu: 14, silu: 15, gelu: 16, gelu_tanh: 17, erf: 18, floor: 19, ceil: 20, round: 21, trunc: 22, sign: 23, reciprocal: 24, square: 25, logical_not: 26, bitwise_not: 27, isnan: 28, isinf: 29, isfinite: 30, contiguous: 31, clone: 32, detach: 33, nonzero: 34, t: 35, sum_all: 36, mean_all: 37, max_all: 38, min_all: 39, argsort_stable: 40 },
  binary: { add: 0, sub: 1, mul: 2, div: 3, pow: 4, maximum: 5, minimum: 6, eq: 7, ne: 8, lt: 9, le: 10, gt: 11, ge: 12, matmul: 13, mm: 14, bmm: 15, dot: 16, outer: 17, logical_and: 18, logical_or: 19, logical_xor: 20, bitwise_and: 21, bitwise_or: 22, remainder: 23, fmod: 24, atan2: 25, floor_divide: 26, expand_as: 27, type_as: 28, equal: 29, mse_loss: 30, bce_with_logits: 31 },
  scalar: { add: 0, sub: 1, mul: 2, div: 3, pow: 4, eq: 5, ne: 6, lt: 7, le: 8, gt: 9, ge: 10, remainder: 11, fmod: 12, rsub: 13, rdiv: 14, rpow: 15, floor_divide: 16, maximum: 17, minimum: 18 },
  inplace_binary: { add: 0, sub: 1, mul: 2, div: 3, copy: 4, maximum: 5 },
  inplace_scalar: { add: 0, sub: 1, mul: 2, div: 3, pow: 4, fill: 5, clamp_min: 6, clamp_max: 7 },
  reduce: { sum: 0, mean: 1, amax: 2, amin: 3, logsumexp: 4, prod: 5, all: 6, any: 7, var: 8, std: 9, norm: 10, count_nonzero: 11 },
  dim: { softmax: 0, log_softmax: 1, cumsum: 2, cumprod: 3, argmax: 4, argmin: 5, argsort: 6, squeeze: 7, unsqueeze: 8, flatten_from: 9 },
  int: { transpose: 0, narrow: 1, slice: 2, select: 3, tril: 4, triu: 5, flatten: 6, roll: 7, diagonal: 8, movedim: 9, repeat_interleave: 10, one_hot: 11, unfold: 12, diag_embed: 13 },
  list: { reshape: 0, view: 1, expand: 2, permute: 3, flip: 4, repeat: 5, tile: 6, pad_zero: 7 },
  pair: { max_dim: 0, min_dim: 1, sort: 2, topk: 3, kthvalue: 4, var_mean: 5, std_mean: 6 },
  index: { index_select: 0, gather: 1, scatter: 2, scatter_add: 3, scatter_value: 4, masked_fill: 5, masked_fill_tensor: 6, masked_select: 7, take_along_dim: 8, index_add: 9, index_copy: 10, index_fill: 11, index_put: 12, index_put_accumulate: 13, boolean_index: 14 },
  index_inplace: { scatter: 0, scatter_add: 1, masked_fill: 2, index_add: 3, index_copy: 4, index_fill: 5, index_put: 6 },
  ternary: { where: 0, addmm: 1, baddbmm: 2, addcmul: 3, addcdiv: 4, lerp: 5, clamp_tensor: 6 },
} as const;

export type OpGroupName = keyof typeof OP_GROUPS;
export type OpName<G extends OpGroupName> = (typeof OP_GROUPS)[G][number];
export type OpCodes = typeof OPS;
