// The CPU suite of test/torch, run on CUDA. Skipped where no GPU is visible.
import { test } from "bun:test";
import { cudaAvailable } from "../torch/helpers.ts";
import { nnSuite } from "../torch/suites/nn.ts";

if (cudaAvailable) nnSuite("cuda");
else test.skip("nn suite on CUDA (no GPU)", () => {});
