/**
 * Access rules of `vagen serve`: an API key checked as `Authorization: Bearer <key>` like
 * OpenAI-compatible servers do, and no open server on an address other machines reach
 * unless the operator says so.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { VagenError } from "../core/errors.ts";
import { errorJson } from "./http.ts";

/**
 * A check of requests against `apiKey`, or undefined when the server is open. The answer
 * is a 401 response for a missing or wrong key, undefined for a good one.
 */
export function bearerGuard(apiKey: string | undefined): ((req: Request) => Response | undefined) | undefined {
  if (!apiKey) return undefined;
  // Comparing fixed-length digests in constant time leaks neither the key's bytes nor its length.
  const expected = sha256(apiKey);
  return (req) => {
    const header = req.headers.get("authorization");
    const match = header ? /^Bearer\s+(.+)$/i.exec(header.trim()) : null;
    if (match && timingSafeEqual(sha256(match[1]!), expected)) return undefined;
    return errorJson(
      401,
      match ? "Incorrect API key provided." : "Missing API key: send it as an Authorization: Bearer header.",
      { code: "invalid_api_key" },
    );
  };
}

function sha256(text: string): Buffer {
  return createHash("sha256").update(text, "utf8").digest();
}

/** Addresses only this machine can reach: 127.0.0.0/8, ::1 and the name localhost. */
export function isLoopback(host: string): boolean {
  const h = host.trim().toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (h === "localhost" || h === "::1" || h === "0:0:0:0:0:0:0:1") return true;
  if (/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h)) return true;
  return /^::ffff:127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** Refuse to expose the model to the network without an API key, unless told to. */
export function checkExposure(host: string, apiKey: string | undefined, insecure: boolean): void {
  if (apiKey || insecure || isLoopback(host)) return;
  throw new VagenError(
    `--host ${host} is reachable from other machines and no API key is set`,
    "set --api-key (or VAGEN_API_KEY), which clients then send in the Authorization header, or pass --insecure to serve without one",
  );
}
