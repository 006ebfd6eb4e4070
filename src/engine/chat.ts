/**
 * The engine's name for a family's prompt builder (src/models/family.ts): chat messages
 * to prompts and ids back to text, so the in-process client and the HTTP server stay
 * family-independent.
 */
export type { PromptBuilder as ChatPromptBuilder } from "../models/family.ts";
