/**
 * A shim that cannot be found, built or loaded. src/torch turns it into a
 * TorchUnavailableError; the message says what is wrong and the hint what to install.
 */
import { VagenError } from "../core/errors.ts";

export class ShimError extends VagenError {
  constructor(message: string, hint: string) {
    super(message, hint);
    this.name = "ShimError";
  }
}
