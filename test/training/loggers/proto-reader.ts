/**
 * A protobuf wire-format reader for the tests: a message as field number -> values
 * (varints as bigint, length-delimited fields as bytes), enough to read W&B records back
 * without W&B's generated code.
 */
export function decodeFields(bytes: Uint8Array): Map<number, (bigint | Uint8Array)[]> {
  const out = new Map<number, (bigint | Uint8Array)[]>();
  let pos = 0;
  const varint = (): bigint => {
    let result = 0n;
    let shift = 0n;
    for (;;) {
      const b = bytes[pos++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
      shift += 7n;
    }
  };
  while (pos < bytes.length) {
    const key = Number(varint());
    const field = key >> 3;
    const wire = key & 7;
    let value: bigint | Uint8Array;
    if (wire === 0) value = varint();
    else if (wire === 2) {
      const n = Number(varint());
      value = bytes.subarray(pos, pos + n);
      pos += n;
    } else if (wire === 1) {
      value = bytes.subarray(pos, pos + 8);
      pos += 8;
    } else if (wire === 5) {
      value = bytes.subarray(pos, pos + 4);
      pos += 4;
    } else throw new Error(`wire type ${wire} at byte ${pos}`);
    out.set(field, [...(out.get(field) ?? []), value]);
  }
  return out;
}
