/**
 * `vagen serve`'s request log: one line per request (method, path, status, tokens,
 * milliseconds) and, for every 5xx, its cause. Bodies, query strings and headers (the API
 * key) are never written.
 */

export interface RequestLogOptions {
  /** Where lines go (stderr in `vagen serve`). */
  write: (line: string) => void;
  /** Leave out the per-request lines; server errors are still written. */
  quiet?: boolean;
}

export interface TokenCounts {
  promptTokens: number;
  completionTokens: number;
}

/** One request's log entry; `end` writes it (the first call only). */
export class RequestLogEntry {
  /** A streamed response ends after the handler returns; its stream ends the entry. */
  deferred = false;
  private tokens: TokenCounts | undefined;
  private ended = false;
  private readonly started = performance.now();

  constructor(
    private readonly options: RequestLogOptions,
    private readonly method: string,
    private readonly path: string,
  ) {}

  setTokens(tokens: TokenCounts): void {
    this.tokens = tokens;
  }

  /** Write the request's line; `cause` is the error behind a 5xx (or behind a stream that failed). */
  end(status: number, cause?: unknown): void {
    if (this.ended) return;
    this.ended = true;
    const ms = Math.round(performance.now() - this.started);
    const tokens = this.tokens ? ` prompt_tokens=${this.tokens.promptTokens} completion_tokens=${this.tokens.completionTokens}` : "";
    const line = `${new Date().toISOString()} ${this.method} ${this.path} ${status}${tokens} ${ms}ms`;
    if (cause !== undefined) this.options.write(`${line} error: ${describeCause(cause)}\n`);
    else if (!this.options.quiet) this.options.write(`${line}\n`);
  }
}

export function beginRequest(options: RequestLogOptions, req: Request): RequestLogEntry {
  return new RequestLogEntry(options, req.method, new URL(req.url).pathname);
}

function describeCause(cause: unknown): string {
  if (cause instanceof Error) return cause.stack ?? `${cause.name}: ${cause.message}`;
  return String(cause);
}
