/** The one redaction every output goes through (src/config/redact.ts). */
import { describe, expect, test } from "bun:test";
import * as v from "valibot";
import { isSecretKey, redactSecrets, redactText, registerConfigSecrets, registerSecret, resolveTree, validateResolved } from "../../src/config/index.ts";

describe("isSecretKey", () => {
  test("whole credential names and credential endings, in any case or spelling", () => {
    for (const key of [
      "token",
      "api_key",
      "apiKey",
      "APIKEY",
      "x-api-key",
      "key",
      "secret",
      "client_secret",
      "password",
      "db_password",
      "Authorization",
      "credentials",
      "access_token",
      "auth_token",
      "hf_token",
      "HF_TOKEN",
      "wandb_api_key",
      "openaiApiKey",
    ]) {
      expect(isSecretKey(key), key).toBe(true);
    }
  });

  test("a credential word inside a longer name is not enough: counts, lambdas, tokenizer keys and *_env names stay readable", () => {
    for (const key of [
      "lambda_token",
      "max_tokens",
      "prompt_tokens",
      "response_length_per_turn",
      "logprob_chunk_tokens",
      "tokenizer",
      "pad_token",
      "eos_token",
      "eos_token_id",
      "ppo_max_token_len",
      "token_env",
      "api_key_env",
      "judge_api_key_env",
      "sort_key",
      "num_keys",
      "keys",
      "num_key_value_heads",
      "base_urls",
      "name",
    ]) {
      expect(isSecretKey(key), key).toBe(false);
    }
  });
});

describe("redactSecrets", () => {
  test("secret-named keys lose their values at any depth; unset ones stay visible; the input is not changed", () => {
    const input = {
      env_config: { token: "abc-123-xyz", token_env: "GYM_TOKEN", size: 4, nested: [{ password: "hunter22" }] },
      headers: { Authorization: "Bearer abcdef", "X-Title": "vagen" },
      api_key: null,
      secret: "",
      max_tokens: 64,
    };
    const out = redactSecrets(input);
    expect(out).toEqual({
      env_config: { token: "[redacted]", token_env: "GYM_TOKEN", size: 4, nested: [{ password: "[redacted]" }] },
      headers: { Authorization: "[redacted]", "X-Title": "vagen" },
      api_key: null,
      secret: "",
      max_tokens: 64,
    });
    expect(input.env_config.token).toBe("abc-123-xyz");
  });

  test("credentials inside URLs, wherever the string sits", () => {
    expect(redactSecrets({ base_urls: ["https://user:pa55@host:8000/v1", "http://host/x?token=t0k3n&n=2"] })).toEqual({
      base_urls: ["https://[redacted]@host:8000/v1", "http://host/x?token=[redacted]&n=2"],
    });
  });
});

test("a config with lambda_token, max_tokens and a tokenizer comes back unchanged; its credentials do not", () => {
  const input = {
    algorithm: { adv_estimator: "bi_level_gae", lambda_token: 1.0, lambda_turn: 0.95 },
    rollout: { max_tokens: 64, response_length_per_turn: 128, logprob_chunk_tokens: 512 },
    model: { tokenizer: "tok/", pad_token: "<|endoftext|>", api_key_env: "OPENAI_API_KEY" },
    wandb: { wandb_api_key: "w-secret-1", hf_token: "h-secret-2" },
  };
  expect(redactSecrets(input)).toEqual({ ...input, wandb: { wandb_api_key: "[redacted]", hf_token: "[redacted]" } });
});

describe("redactText", () => {
  test("an echoed override of a non-secret key with token in its name stays readable", () => {
    expect(redactText("bad value in algorithm.lambda_token=2.5 (max_tokens=5, hf_token=abc123)")).toBe("bad value in algorithm.lambda_token=2.5 (max_tokens=5, hf_token=[redacted])");
  });

  test("values shaped like well-known API keys, under any key; a run folder named sk-... is not one", () => {
    const openai = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z";
    const hf = "hf_abcdefghijklmnopqrstuvwxyzABCDEF12";
    expect(redactSecrets({ note: `key ${openai}`, other: hf, out: "runs/sk-learning-rate-sweep-long-name" })).toEqual({
      note: "key [redacted]",
      other: "[redacted]",
      out: "runs/sk-learning-rate-sweep-long-name",
    });
  });


  test("URL credentials, secret query parameters, echoed overrides and bearer tokens", () => {
    const text = 'POST https://bob:pw@api.example/v1?api_key=k123&model=m failed; command line (envs.r.config.token=zz99) said "Bearer sk-abcdef"; max_tokens=5';
    expect(redactText(text)).toBe(
      'POST https://[redacted]@api.example/v1?api_key=[redacted]&model=m failed; command line (envs.r.config.token=[redacted]) said "Bearer [redacted]"; max_tokens=5',
    );
  });

  test("a registered secret is removed wherever it appears; too-short ones are ignored", () => {
    registerSecret("plain-secret-value-42");
    registerSecret("ab");
    expect(redactText("the server said: bad key plain-secret-value-42 (ab)")).toBe("the server said: bad key [redacted] (ab)");
  });

  test("registerConfigSecrets learns secret values and the values of *_env variables named by secret keys", () => {
    registerConfigSecrets({ envs: { r: { config: { token: "cfg-token-998877", token_env: "GYM_TOKEN_VAR" } } }, model: { api_key_env: "MY_KEY_VAR", name_env: "NOT_SECRET" } }, {
      GYM_TOKEN_VAR: "from-env-token-5566",
      MY_KEY_VAR: "sk-from-env-4433",
      NOT_SECRET: "visible-value-1",
    });
    expect(redactText("cfg-token-998877 from-env-token-5566 sk-from-env-4433 visible-value-1")).toBe("[redacted] [redacted] [redacted] visible-value-1");
  });
});

test("a validation error on a secret key does not quote the value", () => {
  const schema = v.strictObject({ token: v.string(), retries: v.number() });
  const resolved = resolveTree({ token: 12345678, retries: "x" });
  let message = "";
  try {
    validateResolved(schema, resolved);
  } catch (err) {
    message = (err as Error).message;
  }
  expect(message).toContain('key "token": got [redacted], expected string');
  expect(message).not.toContain("12345678");
  expect(message).toContain('key "retries": got "x" (string)');
});
