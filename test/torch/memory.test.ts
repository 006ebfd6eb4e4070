import { memorySuite } from "./suites/memory.ts";

memorySuite("cpu");
