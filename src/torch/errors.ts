/**
 * Errors raised by the tensor library.
 *
 * Both extend `VagenError` so the CLI prints them as one clear line. `TorchError` carries
 * libtorch's own message (bad shapes, device mixes, out-of-range indices ...); the process
 * keeps running after one. `TorchUnavailableError` means the native layer could not be
 * loaded at all, and its hint says how to fix that.
 */
import { VagenError } from "../core/errors.ts";

export class TorchError extends VagenError {
  constructor(message: string) {
    super(message);
    this.name = "TorchError";
  }
}

export class TorchUnavailableError extends VagenError {
  constructor(message: string, hint: string) {
    super(message, hint);
    this.name = "TorchUnavailableError";
  }
}
