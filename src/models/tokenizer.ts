/**
 * Text tokenizer of a Hugging Face model directory: `tokenizer.json` (the tokenizers
 * library's format) plus `tokenizer_config.json`, run by @huggingface/tokenizers.
 *
 * Family-independent. Special tokens written in the text (`<|im_start|>`,
 * `<|image_pad|>`, ...) are matched as single ids, exactly like transformers does
 * for added tokens, so a rendered chat template can be encoded directly.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Tokenizer } from "@huggingface/tokenizers";
import { VagenError } from "../errors.ts";

export interface TokenizerFiles {
  /** Parsed tokenizer.json. */
  tokenizer: Record<string, unknown>;
  /** Parsed tokenizer_config.json ({} when the file is absent). */
  config: Record<string, unknown>;
}

export class TextTokenizer {
  private readonly inner: Tokenizer;
  private readonly specialIds: Set<number>;
  private readonly tokenToIdMap: Map<string, number>;

  constructor(
    readonly files: TokenizerFiles,
    /** Where the files came from, for error messages. */
    readonly source = "tokenizer",
  ) {
    this.inner = new Tokenizer(files.tokenizer, files.config);
    this.tokenToIdMap = this.inner.get_vocab(true);
    this.specialIds = new Set();
    for (const [id, token] of this.inner.get_added_tokens_decoder()) {
      if ((token as { special?: boolean }).special) this.specialIds.add(id);
    }
  }

  /** Load `tokenizer.json` (+ `tokenizer_config.json` if present) from a model directory. */
  static fromDir(dir: string): TextTokenizer {
    const tokPath = join(dir, "tokenizer.json");
    if (!existsSync(tokPath)) {
      throw new VagenError(`${tokPath}: file not found`, "a model directory needs tokenizer.json (the tokenizers library format)");
    }
    const cfgPath = join(dir, "tokenizer_config.json");
    return new TextTokenizer(
      { tokenizer: readJson(tokPath), config: existsSync(cfgPath) ? readJson(cfgPath) : {} },
      tokPath,
    );
  }

  /** Token ids of `text`, without adding BOS/EOS (chat templates write them). */
  encode(text: string): number[] {
    return this.inner.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: readonly number[], opts: { skipSpecialTokens?: boolean } = {}): string {
    return this.inner.decode([...ids], {
      skip_special_tokens: opts.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: false,
    });
  }

  /** The id of a token (usually a special one); throws a clear error if it is unknown. */
  tokenId(token: string): number {
    const id = this.tokenToIdMap.get(token);
    if (id === undefined) throw new VagenError(`${this.source}: the vocabulary has no token ${JSON.stringify(token)}`);
    return id;
  }

  /** The id of `token`, or undefined when the vocabulary lacks it. */
  maybeTokenId(token: string): number | undefined {
    return this.tokenToIdMap.get(token);
  }

  isSpecial(id: number): boolean {
    return this.specialIds.has(id);
  }

  /** Number of ids the tokenizer can produce (the model's embedding table may be larger). */
  get size(): number {
    return this.tokenToIdMap.size;
  }

  /** A named special token from tokenizer_config.json (`eos_token`, `pad_token`, ...). */
  configToken(key: string): string | undefined {
    const value = this.files.config[key];
    if (typeof value === "string") return value;
    if (value && typeof value === "object" && typeof (value as { content?: unknown }).content === "string") {
      return (value as { content: string }).content;
    }
    return undefined;
  }
}

export function readJson(path: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (e) {
    throw new VagenError(`${path}: cannot read (${(e as Error).message})`);
  }
  try {
    return JSON.parse(text) as Record<string, unknown>;
  } catch (e) {
    throw new VagenError(`${path}: not valid JSON (${(e as Error).message})`);
  }
}
