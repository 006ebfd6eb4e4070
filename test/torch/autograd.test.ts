import { autogradSuite } from "./suites/autograd.ts";

autogradSuite("cpu");
