// The CPU suite of test/torch, run on CUDA. Skipped where no GPU is visible.
import { test } from "bun:test";
import { cudaAvailable } from "../torch/helpers.ts";
import { safetensorsSuite } from "../torch/suites/safetensors.ts";

if (cudaAvailable) safetensorsSuite("cuda");
else test.skip("safetensors suite on CUDA (no GPU)", () => {});
