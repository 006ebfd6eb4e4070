import { opsSuite } from "./suites/ops.ts";

opsSuite("cpu");
