// The CPU suite of test/torch, run on CUDA. Skipped where no GPU is visible.
import { test } from "bun:test";
import { cudaAvailable } from "../torch/helpers.ts";
import { memorySuite } from "../torch/suites/memory.ts";

if (cudaAvailable) memorySuite("cuda");
else test.skip("memory suite on CUDA (no GPU)", () => {});
