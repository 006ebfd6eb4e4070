import { expect, test } from "bun:test";
import { Box, Text } from "ink";
import { render } from "ink-testing-library";
import { join } from "node:path";
import { GraphicsContext, ImageView } from "../../src/tui/components/image-view.tsx";
import { GraphicsOverlay } from "../../src/tui/overlay.ts";

const PNG = join(import.meta.dir, "..", "fixtures", "run-dir", "eval", "sokoban_vision", "seed_0", "images", "obs_00_0.png");
const settle = () => new Promise((resolve) => setTimeout(resolve, 30));

test("a graphics image keeps its box blank and is drawn at the box's place after the frame", async () => {
  const written: string[] = [];
  const overlay = new GraphicsOverlay("iterm2", (text) => written.push(text));
  const { lastFrame, unmount } = render(
    <GraphicsContext.Provider value={{ protocol: "iterm2", overlay }}>
      <Box flexDirection="column">
        <Text>header</Text>
        <Text>second line</Text>
        <Box flexDirection="row">
          <Box width={10}>
            <Text>left</Text>
          </Box>
          <ImageView source={PNG} maxColumns={8} />
        </Box>
      </Box>
    </GraphicsContext.Provider>,
  );
  await settle();
  overlay.afterFrame();
  // The box starts on the third row (index 2) after the 10-column left box: cursor to (3, 11), 1-based.
  expect(written).toHaveLength(1);
  expect(written[0]!.startsWith("\x1b7\x1b[3;11H\x1b]1337;File=inline=1;")).toBe(true);
  expect(written[0]!).toContain("width=8;height=4");
  expect(written[0]!.endsWith("\x07\x1b8")).toBe(true);
  // Ink's own frame holds no escape: just blank cells where the image goes.
  expect(lastFrame()).not.toContain("1337");
  unmount();
  // Once the view is gone, nothing is drawn again.
  overlay.afterFrame();
  expect(written).toHaveLength(1);
});

test("without an overlay (inline output, tests) a graphics protocol falls back to half-blocks", () => {
  const { lastFrame, unmount } = render(
    <GraphicsContext.Provider value={{ protocol: "kitty" }}>
      <ImageView source={PNG} maxColumns={8} />
    </GraphicsContext.Provider>,
  );
  expect(lastFrame()).toContain("▀");
  expect(lastFrame()).not.toContain("\x1b_G");
  unmount();
});

test("an unreadable image says so in its place", () => {
  const { lastFrame, unmount } = render(<ImageView source="/nonexistent.png" maxColumns={8} />);
  expect(lastFrame()).toContain("[image unreadable");
  unmount();
});
