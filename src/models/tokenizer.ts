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
import { VagenError } from "../core/errors.ts";
import { LruMap } from "../core/lru.ts";

export interface TokenizerFiles {
  /** Parsed tokenizer.json. */
  tokenizer: Record<string, unknown>;
  /** Parsed tokenizer_config.json ({} when the file is absent). */
  config: Record<string, unknown>;
}

/** Texts whose tokens are kept, and the longest kept: turns repeat their short texts. */
const ENCODE_MEMO_ENTRIES = 4096;
const ENCODE_MEMO_MAX_CHARS = 4096;

export class TextTokenizer {
  private readonly inner: Tokenizer;
  /** Ids by text: a rollout encodes the same observation text and framing every turn. */
  private readonly encoded = new LruMap<string, number[]>(ENCODE_MEMO_ENTRIES);
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
    if (text.length > ENCODE_MEMO_MAX_CHARS) return this.inner.encode(text, { add_special_tokens: false }).ids;
    // A copy: callers own the array they get.
    return this.encoded.getOrMake(text, () => this.inner.encode(text, { add_special_tokens: false }).ids).slice();
  }

  decode(ids: readonly number[], opts: { skipSpecialTokens?: boolean } = {}): string {
    return this.inner.decode([...ids], {
      skip_special_tokens: opts.skipSpecialTokens ?? false,
      clean_up_tokenization_spaces: false,
    });
  }

  /**
   * For byte-level BPE tokenizers (GPT-2 style: Qwen, LLaMA 3), the UTF-8 bytes each id
   * contributes to `decode(ids, { skipSpecialTokens: true })`: decoding is then the
   * concatenation of these bytes read as UTF-8, which a streaming TextDecoder does one
   * token at a time. Undefined for other decoders (SentencePiece, WordPiece, ...).
   */
  tokenBytes(): ((id: number) => Uint8Array) | undefined {
    const decoder = this.files.tokenizer.decoder as { type?: string } | null | undefined;
    if (decoder?.type !== "ByteLevel") return undefined;
    if (!this.bytesOf) {
      const byteOfChar = byteLevelDecoderTable();
      const utf8 = new TextEncoder();
      const tokens: string[] = [];
      for (const [token, id] of this.tokenToIdMap) tokens[id] = token;
      const cache = new Map<number, Uint8Array>();
      const empty = new Uint8Array(0);
      this.bytesOf = (id: number) => {
        let bytes = cache.get(id);
        if (bytes) return bytes;
        const token = tokens[id];
        if (token === undefined || this.specialIds.has(id)) bytes = empty;
        else {
          const out: number[] = [];
          // Characters outside the byte table (possible in added tokens) stand for themselves.
          for (const ch of token) {
            const b = byteOfChar.get(ch);
            if (b !== undefined) out.push(b);
            else out.push(...utf8.encode(ch));
          }
          bytes = Uint8Array.from(out);
        }
        cache.set(id, bytes);
        return bytes;
      };
    }
    return this.bytesOf;
  }
  private bytesOf: ((id: number) => Uint8Array) | undefined;

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

/**
 * GPT-2's byte-level alphabet, inverted: the printable character standing for each byte.
 * Printable Latin-1 bytes stand for themselves; the other 68 bytes map to U+0100 onward.
 */
function byteLevelDecoderTable(): Map<string, number> {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const table = new Map<string, number>();
  for (const b of printable) table.set(String.fromCharCode(b), b);
  const isPrintable = new Set(printable);
  let next = 0;
  for (let b = 0; b < 256; b++) if (!isPrintable.has(b)) table.set(String.fromCharCode(256 + next++), b);
  return table;
}
