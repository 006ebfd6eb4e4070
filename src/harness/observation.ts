/**
 * Observations to chat messages: the text is split at each image placeholder and the
 * images are put in their places, in order.
 */
import type { EnvInfo, Observation } from "../../envs/_common/types.ts";
import { VagenError } from "../core/errors.ts";
import type { ChatMessage, ContentPart, Role } from "../core/chat.ts";

export const DEFAULT_IMAGE_PLACEHOLDER = "<image>";

export function observationToMessage(role: Role, obs: Observation, placeholder = DEFAULT_IMAGE_PLACEHOLDER): ChatMessage {
  const pieces = obs.text.split(placeholder);
  const placeholders = pieces.length - 1;
  if (placeholders !== obs.images.length) {
    throw new VagenError(
      `observation has ${placeholders} "${placeholder}" placeholder(s) but ${obs.images.length} image(s); an env must return one image per placeholder`,
    );
  }
  const content: ContentPart[] = [];
  pieces.forEach((text, i) => {
    if (text !== "") content.push({ type: "text", text });
    if (i < obs.images.length) content.push({ type: "image", image: obs.images[i]! });
  });
  return { role, content };
}

/**
 * Whether the env reports success: the first of `success`, `is_success`, `solved` that is
 * present (the keys VAGEN's envs use).
 */
export function reportedSuccess(info: EnvInfo | undefined): boolean | undefined {
  if (!info) return undefined;
  for (const key of ["success", "is_success", "solved"] as const) {
    const value = info[key];
    if (value !== undefined && value !== null) return Boolean(value);
  }
  return undefined;
}
