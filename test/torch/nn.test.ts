import { nnSuite } from "./suites/nn.ts";

nnSuite("cpu");
