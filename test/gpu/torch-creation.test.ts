// The CPU suite of test/torch, run on CUDA. Skipped where no GPU is visible.
import { test } from "bun:test";
import { cudaAvailable } from "../torch/helpers.ts";
import { creationSuite } from "../torch/suites/creation.ts";

if (cudaAvailable) creationSuite("cuda");
else test.skip("creation suite on CUDA (no GPU)", () => {});
