/**
 * A minimal protobuf writer for the run files vagen writes in other tools' formats
 * (TensorBoard's event files, W&B's offline `.wandb` records): varints and the wire types
 * those messages use. Proto3 defaults are skipped where the method says so, as protobuf
 * encoders do.
 */
export class ProtoWriter {
  readonly #parts: number[] = [];

  varint(value: number | bigint): this {
    let v = BigInt.asUintN(64, BigInt(value));
    do {
      let byte = Number(v & 0x7fn);
      v >>= 7n;
      if (v !== 0n) byte |= 0x80;
      this.#parts.push(byte);
    } while (v !== 0n);
    return this;
  }

  key(field: number, wireType: 0 | 1 | 2 | 5): this {
    return this.varint((field << 3) | wireType);
  }

  /** A varint field, written even when 0. */
  int64(field: number, value: number | bigint): this {
    return this.key(field, 0).varint(value);
  }

  /** A varint field, left out when 0 (proto3's default). */
  int(field: number, value: number | bigint): this {
    return value === 0 || value === 0n ? this : this.int64(field, value);
  }

  bool(field: number, value: boolean): this {
    return value ? this.int(field, 1) : this;
  }

  double(field: number, value: number): this {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setFloat64(0, value, true);
    this.key(field, 1).#parts.push(...b);
    return this;
  }

  float(field: number, value: number): this {
    const b = new Uint8Array(4);
    new DataView(b.buffer).setFloat32(0, value, true);
    this.key(field, 5).#parts.push(...b);
    return this;
  }

  bytes(field: number, value: Uint8Array): this {
    this.key(field, 2).varint(value.length);
    for (const b of value) this.#parts.push(b);
    return this;
  }

  /** A string field, left out when empty or undefined (proto3's default). */
  string(field: number, value: string | undefined): this {
    return value ? this.bytes(field, new TextEncoder().encode(value)) : this;
  }

  message(field: number, inner: ProtoWriter): this {
    return this.bytes(field, inner.finish());
  }

  finish(): Uint8Array {
    return Uint8Array.from(this.#parts);
  }
}
