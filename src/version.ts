import pkg from "../package.json" with { type: "json" };

/** The vagen version, from package.json (embedded in the compiled binary). */
export const VERSION: string = pkg.version;
