import { optimSuite } from "./suites/optim.ts";

optimSuite("cpu");
