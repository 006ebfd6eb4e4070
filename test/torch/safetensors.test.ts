import { safetensorsSuite } from "./suites/safetensors.ts";

safetensorsSuite("cpu");
