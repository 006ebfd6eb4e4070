/**
 * The op names this library calls, per calling shape. The shim numbers its ops itself and
 * publishes the numbering (vt_op_table); at load time native.ts resolves every name below
 * and refuses a shim that lacks one, so TypeScript and C++ can never disagree silently.
 * The groups mirror the X-macro lists in ffi/ops.cpp.
 */
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

type Groups = typeof OP_GROUPS;
export type OpCodes = { readonly [G in keyof Groups]: { readonly [N in Groups[G][number]]: number } };
export type OpName<G extends keyof Groups> = Groups[G][number];
