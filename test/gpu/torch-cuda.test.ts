// CUDA runtime services (devices, memory, streams, events, graphs). Skipped without a GPU.
import { test } from "bun:test";
import { cudaAvailable } from "../torch/helpers.ts";
import { cudaSuite } from "../torch/suites/cuda.ts";

if (cudaAvailable) cudaSuite();
else test.skip("CUDA runtime suite (no GPU)", () => {});
