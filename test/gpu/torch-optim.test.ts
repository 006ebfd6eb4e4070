// The CPU suite of test/torch, run on CUDA. Skipped where no GPU is visible.
import { test } from "bun:test";
import { cudaAvailable } from "../torch/helpers.ts";
import { optimSuite } from "../torch/suites/optim.ts";

if (cudaAvailable) optimSuite("cuda");
else test.skip("optim suite on CUDA (no GPU)", () => {});
