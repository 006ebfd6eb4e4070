// The CPU suite of test/torch, run on CUDA. Skipped where no GPU is visible.
import { test } from "bun:test";
import { cudaAvailable } from "../torch/helpers.ts";
import { autogradSuite } from "../torch/suites/autograd.ts";

if (cudaAvailable) autogradSuite("cuda");
else test.skip("autograd suite on CUDA (no GPU)", () => {});
