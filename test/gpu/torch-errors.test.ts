// The CPU suite of test/torch, run on CUDA. Skipped where no GPU is visible.
import { test } from "bun:test";
import { cudaAvailable } from "../torch/helpers.ts";
import { errorsSuite } from "../torch/suites/errors.ts";

if (cudaAvailable) errorsSuite("cuda");
else test.skip("errors suite on CUDA (no GPU)", () => {});
