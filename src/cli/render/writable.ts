/** Where a view writes: a stream, or anything with `write` (tests collect the text). */
export interface Writable {
  write(text: string): unknown;
}
