/**
 * Where the compiled shim lives. Importing the library as a file asset makes `bun build
 * --compile` embed it in the single binary (Bun extracts it to a temp file when it is
 * opened); under `bun run` / `bun test` the import resolves to build/ in the checkout.
 *
 * This module is loaded lazily (see native.ts) because the import fails when the shim
 * has not been built yet, and that must surface as a TorchUnavailableError, not as a
 * crash at startup of commands that never touch tensors.
 */
// @ts-ignore: Bun file-asset import, typed as a path string
import shimPath from "../../build/libvagen_torch.so" with { type: "file" };

export default shimPath as string;
