/**
 * Secrets never reach an output file, a log line or an error message. Everything vagen
 * writes from a config or from what a run produced (config.yaml, metrics.json,
 * summary.json, transcripts, progress lines, errors) passes through here first.
 *
 * What counts as a secret:
 *   - the value of any key named like one (token, api_key, apiKey, x-api-key, secret,
 *     client_secret, password, authorization, credentials, cookie ...), judged by the
 *     name's last word so `max_tokens` or `token_env` (the name of a variable, not its
 *     value) stay readable;
 *   - credentials inside URLs (`https://user:pass@host`), and secret-named
 *     `name=value` pairs in text (`?token=...`, an override `model.api_key=...`);
 *   - `Bearer ...` credentials in text;
 *   - every value registered with `registerSecret` (keys read from environment
 *     variables, tokens seen in configs), wherever it appears in text.
 */

export const REDACTED = "[redacted]";

/** Last words of a key name that mark its value as a secret. */
const SECRET_WORDS = new Set([
  "token",
  "key",
  "apikey",
  "secret",
  "password",
  "passwd",
  "passphrase",
  "authorization",
  "auth",
  "credential",
  "credentials",
  "cookie",
]);

/** Shorter registered secrets would blank out ordinary words in text. */
const MIN_SECRET_LENGTH = 4;

const knownSecrets = new Set<string>();

/** Remember a secret value so `redactText` removes it wherever it appears. */
export function registerSecret(value: string | undefined | null): void {
  if (typeof value === "string" && value.length >= MIN_SECRET_LENGTH) knownSecrets.add(value);
}

/** `api_key`, `apiKey`, `x-api-key`, `Authorization`, `client_secret` ... but not `max_tokens` or `token_env`. */
export function isSecretKey(name: string): boolean {
  const words = name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean);
  const last = words[words.length - 1];
  return last !== undefined && SECRET_WORDS.has(last);
}

/** URL userinfo: `scheme://user:pass@` or `scheme://token@`. */
const URL_CREDENTIALS = /\b([a-z][a-z0-9+.-]*:\/\/)[^\s/?#@"'<>]+@/gi;
/**
 * `name=value` in a URL query (`?token=...`), an override echoed in a message
 * (`envs.remote.config.token=...`) or a log line; the name's last dotted part is checked
 * with `isSecretKey`.
 */
const KEY_VALUE = /(^|[?&\s(,;"'])([\w.-]+)=([^&\s#"'<>),;]*)/g;
/** An Authorization header's bearer credential, quoted in text. */
const AUTH_SCHEME = /\b(Bearer)\s+[A-Za-z0-9._~+/=-]{4,}/gi;

/** The text with every secret it contains replaced by `[redacted]`. */
export function redactText(text: string): string {
  let out = text;
  // Longest first, so a secret that contains another is removed whole.
  for (const secret of [...knownSecrets].sort((a, b) => b.length - a.length)) out = out.split(secret).join(REDACTED);
  return out
    .replace(URL_CREDENTIALS, `$1${REDACTED}@`)
    .replace(KEY_VALUE, (whole, before: string, name: string, value: string) =>
      isSecretKey(name.split(".").pop()!) && value !== "" && value !== REDACTED ? `${before}${name}=${REDACTED}` : whole,
    )
    .replace(AUTH_SCHEME, `$1 ${REDACTED}`);
}

/**
 * A deep copy of `value` with secrets removed: secret-named keys keep their key but lose
 * their value (unset ones, null or "", stay as they are, so a reader sees it was unset),
 * and every string is passed through `redactText`.
 */
export function redactSecrets<T>(value: T): T {
  return redactValue(value, undefined) as T;
}

function redactValue(value: unknown, key: string | undefined): unknown {
  if (key !== undefined && isSecretKey(key) && value !== null && value !== undefined && value !== "") return REDACTED;
  if (typeof value === "string") return redactText(value);
  if (Array.isArray(value)) return value.map((item) => redactValue(item, undefined));
  if (typeof value === "object" && value !== null && Object.getPrototypeOf(value) === Object.prototype) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, redactValue(v, k)]));
  }
  return value;
}

/**
 * Register the secrets a config holds, so they are removed from any text later (an error
 * message quoting a URL, a server echoing a token): values of secret-named keys, and the
 * values of environment variables that secret-named `*_env` keys point to
 * (`api_key_env: OPENAI_API_KEY`, `token_env: GYM_TOKEN`).
 */
export function registerConfigSecrets(tree: unknown, env: Record<string, string | undefined> = process.env): void {
  if (Array.isArray(tree)) {
    for (const item of tree) registerConfigSecrets(item, env);
    return;
  }
  if (typeof tree !== "object" || tree === null) return;
  for (const [key, value] of Object.entries(tree)) {
    if (typeof value === "string" && isSecretKey(key)) registerSecret(value);
    else if (typeof value === "string" && /_env$/i.test(key) && isSecretKey(key.replace(/_env$/i, ""))) registerSecret(env[value]);
    else registerConfigSecrets(value, env);
  }
}
