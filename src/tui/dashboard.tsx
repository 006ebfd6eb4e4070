/**
 * The dashboard: a header with the run's progress, one pane at a time (overview, rollouts,
 * details), the newest warning and the keys. Used live by `vagen train` / `vagen eval`
 * and by `vagen monitor`; it only reads the store, never the run.
 *
 * Keys: tab / shift-tab (or 1-3) switch panes; ←/→ page episodes, ↑/↓ page turns, g/G the
 * first/last episode; q leaves the view; Ctrl-C goes to the command (train asks first).
 */
import { Box, Text, useInput, useStdout } from "ink";
import { useEffect, useState, useSyncExternalStore } from "react";
import { Details } from "./components/details.tsx";
import { EpisodeViewer } from "./components/episode-viewer.tsx";
import { EvalOverview } from "./components/eval-overview.tsx";
import { WarningLine } from "./components/notices.tsx";
import { TrainOverview } from "./components/train-overview.tsx";
import { formatDuration, progressBar, truncate } from "./format.ts";
import { type DashboardState, stepEta } from "./state.ts";
import type { DashboardStore } from "./store.ts";

export const PANES = ["overview", "rollouts", "details"] as const;
export type Pane = (typeof PANES)[number];

export interface InterruptChoice {
  /** The key that picks it. */
  key: string;
  label: string;
  run: () => void;
}

/** What Ctrl-C does: act at once, or ask first (train: save a checkpoint and stop?). */
export type InterruptHandler = { kind: "now"; run: () => void } | { kind: "ask"; question: string; choices: InterruptChoice[] };

export interface DashboardProps {
  store: DashboardStore;
  title: string;
  /** Fixed size (tests); by default the terminal's, following resizes. */
  size?: { columns: number; rows: number };
  onQuit?: () => void;
  onInterrupt?: InterruptHandler;
  initialPane?: Pane;
}

/** The smallest layout the dashboard is designed for. */
const MIN_SIZE = { columns: 80, rows: 24 };

function useTerminalSize(fixed?: { columns: number; rows: number }): { columns: number; rows: number } {
  const { stdout } = useStdout();
  const tty = stdout as NodeJS.WritableStream & { columns?: number; rows?: number };
  const read = () => ({ columns: tty.columns || MIN_SIZE.columns, rows: tty.rows || MIN_SIZE.rows });
  const [size, setSize] = useState(read);
  useEffect(() => {
    if (fixed) return;
    const onResize = () => setSize(read());
    stdout.on("resize", onResize);
    return () => {
      stdout.off("resize", onResize);
    };
  }, [stdout, fixed]);
  return fixed ?? size;
}

/** Below this width the pane tabs name only the pane shown (`1 overview 2 3`), so the progress keeps its room. */
const FULL_TABS_WIDTH = 100;

/** The pane tabs as text, each with the pane it names. */
export function paneTabs(pane: Pane, width: number): { pane: Pane; text: string }[] {
  return PANES.map((p, i) => ({ pane: p, text: p === pane || width >= FULL_TABS_WIDTH ? ` ${i + 1} ${p} ` : ` ${i + 1} ` }));
}

/** The progress part of the header, its bar `bar` cells wide. */
function progressText(state: DashboardState, bar: number): string {
  const end = state.finished ? " finished" : "";
  if (state.kind === "train") {
    const eta = stepEta(state);
    const pct = state.totalSteps ? ` ${Math.floor((state.step / state.totalSteps) * 100)}%` : "";
    // Without a total there is nothing for a bar to fill.
    const drawn = state.totalSteps ? ` ${progressBar(state.step, state.totalSteps, bar)}` : "";
    return `step ${state.step}${state.totalSteps ? `/${state.totalSteps}` : ""}${drawn}${pct}${eta !== undefined ? ` ETA ${formatDuration(eta)}` : ""}${end}`;
  }
  if (state.kind === "eval") {
    if (state.starting && state.evalEnvs.length === 0) return "starting";
    const done = state.evalEnvs.reduce((n, e) => n + e.done, 0);
    const planned = state.evalEnvs.reduce((n, e) => n + e.planned, 0);
    const elapsed = state.startedAt !== undefined ? (state.now - state.startedAt) / 1000 : 0;
    return `episodes ${done}/${planned} ${progressBar(done, planned, bar)}${elapsed > 0 ? ` ${formatDuration(elapsed)}` : ""}${end}`;
  }
  return "";
}

/**
 * The title, the run's progress and the pane tabs on one line. The progress (step, bar,
 * ETA) is laid out first and the title is cut to what is left, so at 80 columns the step
 * and its bar are always there however long the run's name is.
 */
export function headerParts(state: DashboardState, title: string, pane: Pane, width: number): { title: string; progress: string; tabs: { pane: Pane; text: string }[] } {
  const tabs = paneTabs(pane, width);
  const room = width - tabs.reduce((n, t) => n + t.text.length, 0) - 1;
  const fixed = progressText(state, 0).length;
  const bar = Math.max(10, Math.min(40, room - fixed - title.length - 1));
  const progress = progressText(state, bar);
  return { title: truncate(title, Math.max(0, room - progress.length - 1)), progress, tabs };
}

function Header({ state, title, pane, width }: { state: DashboardState; title: string; pane: Pane; width: number }) {
  const parts = headerParts(state, title, pane, width);
  return (
    <Box width={width} justifyContent="space-between">
      <Box flexShrink={1} overflow="hidden">
        <Text wrap="truncate">
          <Text bold color="magenta">
            {parts.title}
          </Text>
          {parts.title && parts.progress ? " " : ""}
          {parts.progress}
        </Text>
      </Box>
      <Box flexShrink={0}>
        <Text>
          {parts.tabs.map((t) => (
            <Text key={t.pane} inverse={t.pane === pane} dimColor={t.pane !== pane}>
              {t.text}
            </Text>
          ))}
        </Text>
      </Box>
    </Box>
  );
}

/** The body of a view whose run directory holds nothing recognisable yet. */
function NothingYet({ state, width }: { state: DashboardState; width: number }) {
  return (
    <Box flexDirection="column" width={width}>
      <Text dimColor wrap="truncate">
        {state.starting ?? `nothing recognisable in ${state.outputDir ?? "the run directory"} yet`}
      </Text>
      <Text dimColor wrap="truncate">
        waiting for a training run's metrics.jsonl or rollouts/, or an eval run's config.yaml
      </Text>
    </Box>
  );
}

export function Dashboard({ store, title, size, onQuit, onInterrupt, initialPane = "overview" }: DashboardProps) {
  const state = useSyncExternalStore(store.subscribe, store.getState);
  const { columns, rows } = useTerminalSize(size);
  const [pane, setPane] = useState<Pane>(initialPane);
  const [selected, setSelected] = useState<number | null>(null); // null: follow the newest episode
  const [turn, setTurn] = useState(0);
  const [detailsOffset, setDetailsOffset] = useState(0);
  const [asking, setAsking] = useState(false);

  // Header, footer and the warning line; a terminal smaller than 80x24 still gets a frame, cut.
  const bodyHeight = Math.max(6, rows - 3);
  // The details pane lists non-validation metrics, two rows below its title.
  const lastDetailsOffset = Math.max(0, Object.keys(state.series).filter((k) => !k.startsWith("val/")).length - (bodyHeight - 2));
  const episodes = state.episodes;
  const episodeIndex = Math.min(selected ?? episodes.length - 1, episodes.length - 1);
  const turns = episodes[episodeIndex]?.turns.length ?? 0;

  useInput((input, key) => {
    if (asking && onInterrupt?.kind === "ask") {
      const choice = onInterrupt.choices.find((c) => c.key === input);
      if (choice || key.escape) setAsking(false);
      choice?.run();
      return;
    }
    if (key.ctrl && input === "c") {
      if (onInterrupt?.kind === "ask") setAsking(true);
      else onInterrupt?.run();
      return;
    }
    if (input === "q") return onQuit?.();
    const paneIndex = PANES.indexOf(pane);
    if (key.tab) return setPane(PANES[(paneIndex + (key.shift ? PANES.length - 1 : 1)) % PANES.length]!);
    if (["1", "2", "3"].includes(input)) return setPane(PANES[Number(input) - 1]!);
    const page = (to: number) => {
      const next = Math.max(0, Math.min(episodes.length - 1, to));
      setSelected(next >= episodes.length - 1 ? null : next);
      setTurn(0);
      if (pane !== "rollouts") setPane("rollouts");
    };
    if (key.leftArrow) return page(episodeIndex - 1);
    if (key.rightArrow) return page(episodeIndex + 1);
    if (input === "g") return page(0);
    if (input === "G") return page(episodes.length - 1);
    if (pane === "details") {
      if (key.upArrow) return setDetailsOffset((o) => Math.max(0, o - 1));
      if (key.downArrow) return setDetailsOffset((o) => Math.min(lastDetailsOffset, o + 1));
    }
    if (key.upArrow) return setTurn((t) => Math.max(0, t - 1));
    if (key.downArrow) return setTurn((t) => Math.min(turns, t + 1));
  });

  const width = Math.max(40, columns);
  const body =
    pane === "rollouts" ? (
      <EpisodeViewer episodes={episodes} episodeIndex={Math.max(0, episodeIndex)} turnIndex={Math.min(turn, turns)} width={width} height={bodyHeight} />
    ) : pane === "details" ? (
      <Details state={state} width={width} height={bodyHeight} offset={detailsOffset} />
    ) : state.kind === "eval" ? (
      <EvalOverview state={state} width={width} height={bodyHeight} />
    ) : state.kind === "unknown" && Object.keys(state.series).length === 0 ? (
      <NothingYet state={state} width={width} />
    ) : (
      <TrainOverview state={state} width={width} height={bodyHeight} />
    );
  const finished = state.finished ? `finished: ${state.finished.reason}${state.finished.error ? ` (${state.finished.error})` : ""}  ` : "";
  return (
    <Box flexDirection="column" width={width} height={rows}>
      <Header state={state} title={title} pane={pane} width={width} />
      <Box height={bodyHeight} overflow="hidden">
        {body}
      </Box>
      {asking && onInterrupt?.kind === "ask" ? (
        <Text color="yellow" bold wrap="truncate">
          {`${onInterrupt.question} ${onInterrupt.choices.map((c) => `[${c.key}] ${c.label}`).join("  ")}  [esc] keep going`}
        </Text>
      ) : state.warnings.length > 0 ? (
        <WarningLine warnings={state.warnings} width={width} />
      ) : (
        <Text dimColor wrap="truncate">
          {truncate(state.notes[state.notes.length - 1] ?? "", width) || " "}
        </Text>
      )}
      <Text dimColor wrap="truncate">
        {finished}tab/1-3 panes  ←/→ episodes  ↑/↓ turns  q leave the view{onInterrupt ? "  ctrl-c stop" : ""}
      </Text>
    </Box>
  );
}
