/**
 * Secrets never reach an output file, a log line or an error message. Everything vagen
 * writes from a config or from what a run produced (config.yaml, metrics.json,
 * summary.json, transcripts, progress lines, errors) passes through here first.
 *
 * A secret is recognised by what a key is called as a whole, never by a word inside it,
 * and by what a value looks like. A run's own config.yaml must load again: a key such as
 * `algorithm.lambda_token` (a GAE lambda), `max_tokens` or `pad_token` holds the word
 * "token" but no credential, and blanking it would make the run impossible to repeat.
 *
 * A key's name is first normalised (camelCase and dashes to snake_case, lower case:
 * `apiKey` and `X-Api-Key` become `api_key` and `x_api_key`). Its value is a secret when:
 *   - the whole name is a credential name (`CREDENTIAL_NAMES`: token, api_key, apikey,
 *     password, secret, authorization, access_token, hf_token, ...), or
 *   - the name ends in `_` plus a word that only ever means a credential
 *     (`CREDENTIAL_SUFFIXES`: api_key, access_token, auth_token, secret, password, ...):
 *     `wandb_api_key`, `client_secret`, `db_password`. Ambiguous words (`token`, `key`,
 *     `auth`) count only as the whole name, so `lambda_token`, `sort_key` and
 *     `eos_token` stay readable, and `token_env` (the *name* of a variable) too.
 *
 * Wherever a string sits, these are removed from it too:
 *   - credentials inside URLs (`https://user:pass@host`), and secret-named `name=value`
 *     pairs in text (`?token=...`, an override `model.api_key=...`), judged by the rule
 *     above on the name's last dotted part;
 *   - `Bearer ...` credentials, and values shaped like well-known API keys (`sk-...`,
 *     `hf_...`, `ghp_...`);
 *   - every value registered with `registerSecret` (keys read from environment
 *     variables, tokens seen in configs).
 */

export const REDACTED = "[redacted]";

/** Whole key names (normalised) whose value is a credential. */
const CREDENTIAL_NAMES = new Set([
  "token",
  "key",
  "apikey",
  "api_key",
  "x_api_key",
  "api_token",
  "access_token",
  "auth_token",
  "bearer_token",
  "refresh_token",
  "session_token",
  "id_token",
  "hf_token",
  "huggingface_token",
  "github_token",
  "gh_token",
  "secret",
  "secret_key",
  "private_key",
  "access_key",
  "password",
  "passwd",
  "passphrase",
  "authorization",
  "auth",
  "credential",
  "credentials",
  "cookie",
]);

/**
 * Endings (after `_`) that make any key a credential: words that never mean anything
 * else in a config. `token` and `key` alone are not here (`lambda_token`, `sort_key`).
 */
const CREDENTIAL_SUFFIXES = [
  "api_key",
  "apikey",
  "api_token",
  "access_token",
  "auth_token",
  "bearer_token",
  "refresh_token",
  "session_token",
  "secret",
  "secret_key",
  "access_key",
  "private_key",
  "password",
  "passwd",
  "passphrase",
  "credentials",
];

/** Shorter registered secrets would blank out ordinary words in text. */
const MIN_SECRET_LENGTH = 4;

const knownSecrets = new Set<string>();

/** Remember a secret value so `redactText` removes it wherever it appears. */
export function registerSecret(value: string | undefined | null): void {
  if (typeof value === "string" && value.length >= MIN_SECRET_LENGTH) knownSecrets.add(value);
}

/** `api_key`, `apiKey`, `x-api-key`, `Authorization`, `client_secret` ... but not `max_tokens`, `lambda_token` or `token_env`. */
export function isSecretKey(name: string): boolean {
  const normalised = name
    .replace(/([a-z0-9])([A-Z])/g, "$1_$2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter(Boolean)
    .join("_");
  return CREDENTIAL_NAMES.has(normalised) || CREDENTIAL_SUFFIXES.some((suffix) => normalised.endsWith(`_${suffix}`));
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
/**
 * Values shaped like the API keys of well-known services, whatever key holds them:
 * OpenAI-style `sk-...`, Hugging Face `hf_...`, GitHub `ghp_...`/`github_pat_...`. Long
 * enough (and, for `sk-`, holding a digit) that a folder or run name never matches.
 */
const KEY_SHAPES = /\b(?:sk-(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{32,}|hf_[A-Za-z0-9]{30,}|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})/g;

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
    .replace(AUTH_SCHEME, `$1 ${REDACTED}`)
    .replace(KEY_SHAPES, REDACTED);
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
