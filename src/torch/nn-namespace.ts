/** torch.nn: only `functional` lives here (models are plain TypeScript objects). */
export * as functional from "./nn.ts";
