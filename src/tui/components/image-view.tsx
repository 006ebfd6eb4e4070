import { Box, type DOMElement, Text } from "ink";
import { createContext, useContext, useEffect, useId, useMemo, useRef } from "react";
import type { ImageSource } from "../episode.ts";
import { drawImage, type ImageProtocol, loadImage } from "../image/index.ts";
import type { GraphicsOverlay } from "../overlay.ts";

export interface GraphicsSettings {
  protocol: ImageProtocol;
  /** Present full-screen only: where kitty / iTerm2 / sixel images are drawn. */
  overlay?: GraphicsOverlay;
}

export const GraphicsContext = createContext<GraphicsSettings>({ protocol: "blocks" });

/**
 * An observation image (a PNG file, or pixels in memory), at most `maxColumns` cells wide. Half-blocks are
 * text Ink lays out; a graphics protocol gets a blank box the overlay draws into (without
 * an overlay, e.g. inline or in tests, half-blocks stand in).
 */
export function ImageView({ source, maxColumns }: { source: ImageSource; maxColumns: number }) {
  const { protocol, overlay } = useContext(GraphicsContext);
  const id = useId();
  const ref = useRef<DOMElement>(null);
  const image = useMemo(() => (typeof source === "string" ? loadImage(source) : source), [source]);
  const effective = protocol === "none" || protocol === "blocks" || overlay ? protocol : "blocks";
  const drawn = useMemo(
    () => (image instanceof Error || effective === "none" ? undefined : drawImage(image, effective, maxColumns)),
    [image, effective, maxColumns],
  );
  useEffect(() => {
    if (!overlay || drawn?.kind !== "escape" || !ref.current) return;
    overlay.place(id, ref.current, drawn.sequence);
    return () => overlay.remove(id);
  }, [overlay, drawn, id]);

  if (image instanceof Error) return <Text color="red">[image unreadable: {image.message.slice(0, 60)}]</Text>;
  if (!drawn) return <Text dimColor>[image {image.width}x{image.height}]</Text>;
  if (drawn.kind === "lines") {
    return (
      <Box flexDirection="column">
        {drawn.lines.map((line, i) => (
          <Text key={i}>{line}</Text>
        ))}
      </Box>
    );
  }
  return <Box ref={ref} width={drawn.columns} height={drawn.rows} />;
}
