/**
 * The room left for one generation in a training row (VAGEN main's `generation_limit`).
 *
 * A row's response region holds every token from the first sampled one on: replies,
 * and the observations and template tokens between them. With R tokens for it, `spent`
 * already used, `pending` about to be appended (the next observation) and `reserve` kept
 * back (a summary's budget), the next generation may take what is left, but only when
 * that is at least `floor` tokens: a sliver of room would only produce a cut-off reply.
 * 0 means "stop here".
 */
export function generationLimit(responseBudget: number, floor: number, spent: number, pending = 0, reserve = 0): number {
  const left = responseBudget - spent - pending - reserve;
  return left >= Math.max(1, floor) ? left : 0;
}

/** VAGEN's floor: a quarter of the row's response budget, but never more than one turn's limit. */
export function generationFloor(responseBudget: number, perTurn: number | undefined): number {
  const quarter = Math.max(1, Math.floor(responseBudget / 4));
  return perTurn === undefined ? quarter : Math.min(perTurn, quarter);
}
