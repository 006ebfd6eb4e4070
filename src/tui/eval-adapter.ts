/**
 * The eval runner's events (src/evaluation/events.ts) as dashboard events. A running
 * episode is built turn by turn from `turn_finished` (its images are the pixels the
 * events carry); once finished it is read back from its folder (the runner writes a
 * folder before it reports the episode), so the live view and `vagen monitor` show the
 * same thing. Episodes skipped on resume are read from their folders when the run starts.
 */
import { finishedNormally } from "../evaluation/episode-metrics.ts";
import type { EvalEvent, EvalEventListener } from "../evaluation/events.ts";
import { type EpisodeView, loadEpisode } from "./episode.ts";
import { splitReply } from "./text-parts.ts";
import type { DashboardEvent } from "./events.ts";

/** An episode folder of the plan, with the env tag it belongs to. */
export interface PlannedEpisodeDir {
  tag: string;
  dir: string;
}

export function evalEventAdapter(dispatch: (event: DashboardEvent) => void, planned: PlannedEpisodeDir[] = []): EvalEventListener {
  /** Episodes in flight, by the id their folder will give them (`<tag>/seed_<S>`). */
  const running = new Map<string, EpisodeView>();
  const idOf = (tag: string, seed: number) => `${tag}/seed_${seed}`;
  const loadSkipped = (tag: string, skipped: number) => {
    let found = 0;
    for (const episode of planned) {
      if (found >= skipped) break;
      if (episode.tag !== tag) continue;
      const view = loadEpisode(episode.dir);
      if (!view || !finishedNormally(view.finishReason)) continue;
      found++;
      dispatch({
        type: "eval_episode",
        outcome: { tag, seed: view.seed, success: view.success, cumulative_reward: view.reward, num_turns: view.turns.length, finish_reason: view.finishReason },
      });
      dispatch({ type: "episode_loaded", episode: view });
    }
  };
  return (event: EvalEvent) => {
    switch (event.type) {
      case "run_started":
        dispatch({ type: "eval_started", outputDir: event.outputDir, model: event.model, envs: event.envs.map((e) => ({ tag: e.tag, planned: e.episodes })) });
        for (const env of event.envs) if (env.skipped > 0) loadSkipped(env.tag, env.skipped);
        if (event.progress.done > 0) dispatch({ type: "note", message: `resume: ${event.progress.done} episode(s) already finished` });
        return;
      case "episode_started": {
        dispatch({ type: "eval_running", running: event.progress.running });
        const episode: EpisodeView = {
          id: idOf(event.tag, event.seed),
          tag: event.tag,
          seed: event.seed,
          success: false,
          reward: 0,
          finishReason: "max_turns",
          initialText: "",
          initialImages: [],
          turns: [],
          running: true,
        };
        running.set(episode.id, episode);
        dispatch({ type: "episode_loaded", episode });
        return;
      }
      case "turn_finished": {
        const before = running.get(idOf(event.tag, event.seed));
        if (!before) return;
        const worldModel = Object.values(event.reward.worldModel);
        const episode: EpisodeView = {
          ...before,
          reward: before.reward + event.reward.total,
          turns: [
            ...before.turns,
            {
              index: event.turn,
              reply: event.text,
              parts: splitReply(event.text),
              actions: event.action.actions ?? [],
              formatCorrect: event.action.formatCorrect,
              reward: event.reward.total,
              rewardSplit: { env: event.reward.env, worldModel: worldModel.length > 0 ? worldModel.reduce((a, b) => a + b, 0) : undefined },
              done: event.done,
              observationText: event.observationText,
              images: event.images.map((ref) => ref.image),
            },
          ],
        };
        running.set(episode.id, episode);
        dispatch({ type: "episode_loaded", episode });
        return;
      }
      case "episode_finished": {
        dispatch({ type: "eval_running", running: event.progress.running });
        dispatch({
          type: "eval_episode",
          outcome: { tag: event.tag, seed: event.seed, success: event.success, cumulative_reward: event.reward, num_turns: event.turns, finish_reason: event.finishReason, error: event.error },
        });
        running.delete(idOf(event.tag, event.seed));
        const episode = loadEpisode(event.dir);
        if (episode) dispatch({ type: "episode_loaded", episode });
        return;
      }
      case "warning":
        dispatch({ type: "warning", step: 0, code: event.code, message: event.message });
        return;
      case "run_finished":
        dispatch({ type: "eval_finished" });
        return;
      // Summaries are in the table printed after the run.
      case "env_summary":
        return;
    }
  };
}
