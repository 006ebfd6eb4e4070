import { creationSuite } from "./suites/creation.ts";

creationSuite("cpu");
