/**
 * Errors meant for the person at the terminal.
 *
 * A `VagenError` carries a message that already says what went wrong and how to fix it;
 * the CLI prints it as one line (plus `hint`) and exits non-zero, without a stack trace
 * unless `--debug` is given. Anything else that escapes a command is a bug and is printed
 * the same way, but flagged as unexpected.
 */
export class VagenError extends Error {
  constructor(
    message: string,
    /** An optional second line telling the user how to fix it. */
    readonly hint?: string,
    /** Process exit code the CLI uses for this error. */
    readonly exitCode = 1,
  ) {
    super(message);
    this.name = "VagenError";
  }
}
