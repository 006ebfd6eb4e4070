// The CPU suite of test/torch, run on CUDA. Skipped where no GPU is visible.
import { test } from "bun:test";
import { cudaAvailable } from "../torch/helpers.ts";
import { opsSuite } from "../torch/suites/ops.ts";

if (cudaAvailable) opsSuite("cuda");
else test.skip("ops suite on CUDA (no GPU)", () => {});
