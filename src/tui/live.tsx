/**
 * Mounting the dashboard on a terminal: full-screen (alternate screen, so the shell's
 * scrollback is left as it was), redraws capped at `maxFps`, graphics images drawn after
 * each frame. The caller feeds the store and decides what quitting and Ctrl-C mean.
 */
import { render } from "ink";
import { Dashboard, type InterruptHandler } from "./dashboard.tsx";
import { GraphicsContext } from "./components/image-view.tsx";
import type { ImageProtocol } from "./image/index.ts";
import { GraphicsOverlay } from "./overlay.ts";
import type { DashboardStore } from "./store.ts";

export interface LiveDashboardOptions {
  store: DashboardStore;
  title: string;
  protocol: ImageProtocol;
  /** `q`: the view is closed (the run itself goes on unless the caller stops it). */
  onQuit?: () => void;
  onInterrupt?: InterruptHandler;
  /** Redraws per second at most. */
  maxFps?: number;
  stdout?: NodeJS.WriteStream;
  stdin?: NodeJS.ReadStream;
}

export interface LiveDashboard {
  /** Draw the last state, leave the alternate screen and give the terminal back. */
  close(): Promise<void>;
  closed: Promise<void>;
}

export function startLiveDashboard(options: LiveDashboardOptions): LiveDashboard {
  const stdout = options.stdout ?? process.stdout;
  const overlay = options.protocol === "blocks" || options.protocol === "none" ? undefined : new GraphicsOverlay(options.protocol, (text) => stdout.write(text));
  let instance: ReturnType<typeof render> | undefined;
  const quit = () => {
    options.onQuit?.();
    instance?.unmount();
  };
  instance = render(
    <GraphicsContext.Provider value={{ protocol: options.protocol, overlay }}>
      <Dashboard store={options.store} title={options.title} onQuit={quit} onInterrupt={options.onInterrupt} />
    </GraphicsContext.Provider>,
    {
      stdout,
      stdin: options.stdin ?? process.stdin,
      exitOnCtrlC: false,
      patchConsole: true,
      alternateScreen: true,
      // The callers start the dashboard only on a terminal, so draw it as one even where
      // CI=true is set (Ink would otherwise print just the final frame and ignore keys).
      interactive: stdout.isTTY === true ? true : undefined,
      maxFps: options.maxFps ?? 10,
      incrementalRendering: true,
      onRender: () => overlay?.afterFrame(),
    },
  );
  const closed = instance.waitUntilExit().then(() => undefined);
  return {
    closed,
    async close() {
      // Draw the last state before leaving, so the final frame is the finished run.
      options.store.flush();
      await instance?.waitUntilRenderFlush();
      instance?.unmount();
      await closed;
    },
  };
}
