/**
 * A small byte-level BPE tokenizer made for one task, in the tokenizers library's
 * `tokenizer.json` format with Qwen2.5-VL's special tokens and chat template.
 *
 * Qwen's own vocabulary has 151k entries: its embedding table alone would be a hundred
 * times the size of the demo's policy. This one starts from the 256 byte symbols (GPT-2's
 * byte-to-unicode table, as Qwen uses) and learns merges on the task's own text (system
 * prompt, observations, answers), so every word the task uses is one or two tokens and the
 * vocabulary stays at a few hundred entries. Any text still encodes (bytes are the
 * fallback), so the model can say things the corpus never held.
 */

/** Qwen2's pre-tokenizer split (digits one at a time), as Qwen2.5-VL's tokenizer.json has it. */
export const QWEN2_SPLIT_PATTERN =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** The same split as a JavaScript regex (JS has no inline `(?i:)` group; the contractions are listed in both cases). */
const SPLIT = /'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+/gu;

/** Qwen2.5-VL's special tokens that the chat template and image placeholders use, in Qwen's order. */
export const QWEN25_VL_SPECIAL_TOKENS = [
  "<|endoftext|>",
  "<|im_start|>",
  "<|im_end|>",
  "<|vision_start|>",
  "<|vision_end|>",
  "<|vision_pad|>",
  "<|image_pad|>",
  "<|video_pad|>",
] as const;

/** The Qwen2.5-VL Instruct chat template (tokenizer_config.json of the published models). */
export const QWEN25_VL_CHAT_TEMPLATE =
  "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}" +
  "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}" +
  "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}" +
  "<|im_start|>{{ message['role'] }}\n" +
  "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n" +
  "{% else %}{% for content in message['content'] %}" +
  "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}" +
  "{% set image_count.value = image_count.value + 1 %}" +
  "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}" +
  "<|vision_start|><|image_pad|><|vision_end|>" +
  "{% elif content['type'] == 'video' or 'video' in content %}" +
  "{% set video_count.value = video_count.value + 1 %}" +
  "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}" +
  "<|vision_start|><|video_pad|><|vision_end|>" +
  "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n" +
  "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/**
 * GPT-2's byte-to-unicode table: printable bytes stand for themselves, the others are
 * shifted above 255, so every byte is one visible character. Returned in vocabulary order
 * (the printable ranges first, as GPT-2 and Qwen number them).
 */
export function byteSymbols(): { byte: number; symbol: string }[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const table = printable.map((byte) => ({ byte, symbol: String.fromCodePoint(byte) }));
  let shifted = 0;
  for (let byte = 0; byte < 256; byte++) {
    if (!printable.includes(byte)) table.push({ byte, symbol: String.fromCodePoint(256 + shifted++) });
  }
  return table;
}

export interface BpeTokenizerOptions {
  /** Most merges to learn (fewer when no pair occurs twice any more). */
  maxMerges: number;
}

export interface BpeTokenizer {
  /** The tokenizer.json object. */
  tokenizer: Record<string, unknown>;
  /** The tokenizer_config.json object (special tokens and the chat template). */
  config: Record<string, unknown>;
  vocabSize: number;
  /** Id of each special token, by its text. */
  specialIds: Record<(typeof QWEN25_VL_SPECIAL_TOKENS)[number], number>;
}

/**
 * Learn byte-level BPE merges on `corpus` and return the tokenizer files. Special tokens
 * in the corpus are cut out first (they are single added tokens, never merged). Merges are
 * learned greedily: the most frequent adjacent pair becomes a symbol, ties broken by the
 * pair's text, so the same corpus always gives the same tokenizer.
 */
export function trainBpeTokenizer(corpus: readonly string[], opts: BpeTokenizerOptions): BpeTokenizer {
  const symbols = byteSymbols();
  const symbolOfByte = new Map(symbols.map((s) => [s.byte, s.symbol]));
  const utf8 = new TextEncoder();

  // Each distinct pre-token, as its byte symbols, with how often it occurs.
  const wordCounts = new Map<string, number>();
  const specials = new RegExp(QWEN25_VL_SPECIAL_TOKENS.map(escapeRegex).join("|"), "g");
  for (const text of corpus) {
    for (const chunk of text.split(specials)) {
      for (const piece of chunk.match(SPLIT) ?? []) {
        const word = [...utf8.encode(piece)].map((b) => symbolOfByte.get(b)!).join("");
        wordCounts.set(word, (wordCounts.get(word) ?? 0) + 1);
      }
    }
  }
  const words = [...wordCounts.entries()].map(([word, count]) => ({ parts: [...word], count }));

  const vocab = new Map<string, number>(symbols.map((s, id) => [s.symbol, id]));
  const merges: [string, string][] = [];
  while (merges.length < opts.maxMerges) {
    const pairCounts = new Map<string, number>();
    for (const { parts, count } of words) {
      for (let i = 0; i + 1 < parts.length; i++) {
        const key = `${parts[i]}\u0000${parts[i + 1]}`;
        pairCounts.set(key, (pairCounts.get(key) ?? 0) + count);
      }
    }
    let best: string | undefined;
    let bestCount = 1; // a pair seen once is not worth a vocabulary entry
    for (const [key, count] of pairCounts) {
      if (count > bestCount || (count === bestCount && best !== undefined && key < best)) {
        best = key;
        bestCount = count;
      }
    }
    if (best === undefined) break;
    const [left, right] = best.split("\u0000") as [string, string];
    const merged = left + right;
    merges.push([left, right]);
    if (!vocab.has(merged)) vocab.set(merged, vocab.size);
    for (const word of words) word.parts = mergePair(word.parts, left, right);
  }

  const specialIds = {} as BpeTokenizer["specialIds"];
  const addedTokens = QWEN25_VL_SPECIAL_TOKENS.map((content, i) => {
    const id = vocab.size + i;
    specialIds[content] = id;
    return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
  });

  const tokenizer = {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: { type: "NFC" },
    pre_tokenizer: {
      type: "Sequence",
      pretokenizers: [
        { type: "Split", pattern: { Regex: QWEN2_SPLIT_PATTERN }, behavior: "Isolated", invert: false },
        { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: false },
      ],
    },
    post_processor: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    decoder: { type: "ByteLevel", add_prefix_space: false, trim_offsets: false, use_regex: false },
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab: Object.fromEntries(vocab),
      merges,
    },
  };
  const config = {
    add_bos_token: false,
    add_prefix_space: false,
    bos_token: null,
    eos_token: "<|im_end|>",
    pad_token: "<|endoftext|>",
    unk_token: null,
    model_max_length: 32768,
    clean_up_tokenization_spaces: false,
    chat_template: QWEN25_VL_CHAT_TEMPLATE,
  };
  return { tokenizer, config, vocabSize: vocab.size + addedTokens.length, specialIds };
}

function mergePair(parts: string[], left: string, right: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < parts.length; i++) {
    if (i + 1 < parts.length && parts[i] === left && parts[i + 1] === right) {
      out.push(left + right);
      i++;
    } else {
      out.push(parts[i]!);
    }
  }
  return out;
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
