/**
 * HTTP plumbing of `vagen serve`: OpenAI-style error bodies, the JSON content-type rule
 * and a request-body reader that counts bytes as they arrive, so an oversized body is
 * refused after at most `maxBytes` of it were read, never buffered whole.
 */

/** An error with the HTTP status, OpenAI `type`, `param` and `code` it answers with. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly detail: { param?: string; code?: string; type?: string } = {},
  ) {
    super(message);
    this.name = "HttpError";
  }
}

/** A 400 about one request parameter (named by its path, e.g. `messages.0.content.1`). */
export function badRequest(message: string, param?: string, code?: string): HttpError {
  return new HttpError(400, message, { param, code });
}

/** The body OpenAI's API (and vLLM, SGLang) answer errors with. */
export function errorJson(status: number, message: string, detail: HttpError["detail"] = {}): Response {
  const type = detail.type ?? (status >= 500 ? "server_error" : "invalid_request_error");
  return Response.json({ error: { message, type, param: detail.param ?? null, code: detail.code ?? null } }, { status });
}

/**
 * JSON endpoints take `application/json` only: a browser page may post `text/plain` (or a
 * form) to a localhost port without a CORS preflight, and must not reach the model.
 */
export function requireJsonContentType(req: Request): void {
  const header = req.headers.get("content-type");
  const mediaType = header?.split(";")[0]!.trim().toLowerCase();
  if (mediaType !== "application/json") {
    throw new HttpError(415, `the request body must be application/json, got ${header ? JSON.stringify(header) : "no content-type"}`, {
      code: "unsupported_media_type",
    });
  }
}

/**
 * The body as text, refused with a 413 once it is known to exceed `maxBytes`: up front
 * from Content-Length, otherwise (chunked uploads) as soon as the running count passes it.
 */
export async function readBodyText(req: Request, maxBytes: number): Promise<string> {
  const tooLarge = (size: string) =>
    new HttpError(413, `the request body is ${size} bytes; this server accepts at most ${maxBytes} (--max-body-mib)`, {
      code: "request_too_large",
    });
  const declared = req.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) throw tooLarge(declared);
  if (!req.body) return "";
  const reader = req.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined);
      throw tooLarge(`more than ${maxBytes}`);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, size).toString("utf8");
}

/** Parse the body as JSON (400 when it is not). */
export async function readJsonBody(req: Request, maxBytes: number): Promise<unknown> {
  const text = await readBodyText(req, maxBytes);
  try {
    return JSON.parse(text);
  } catch (e) {
    throw badRequest(`the body is not valid JSON (${(e as Error).message})`);
  }
}
