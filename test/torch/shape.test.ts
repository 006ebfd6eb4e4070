import { expect, test } from "bun:test";
import * as torch from "../../src/torch/index.ts";

test("dims2/3/4 destructure a tensor of that rank and name the tensor and its shape otherwise", () => {
  torch.tidy(() => {
    const x = torch.zeros([2, 3, 4]);
    const [b, t, h] = torch.dims3(x, "hidden");
    expect([b, t, h]).toEqual([2, 3, 4]);
    expect(torch.dims4(torch.zeros([1, 2, 3, 4]), "q")).toEqual([1, 2, 3, 4]);
    expect(torch.dims2(torch.zeros([5, 6]), "logits")).toEqual([5, 6]);
    expect(torch.dims1(torch.zeros([7]), "ids")).toEqual([7]);
    expect(() => torch.dims2(x, "logits")).toThrow("logits: expected a 2-d tensor, got shape [2, 3, 4]");
  });
});
