/**
 * Reviewing and steering a session's history (issue 14): per-turn "Changes", "Rewind to here"
 * (with the outside-changes refusal and its "Rewind anyway"), the rewind note with "Undo
 * rewind", "Fork from here" and the fork's lineage.
 *
 * The turn list re-renders only the turn that changed, so the actions reach the turns through
 * a context (a Preact context updates its readers whatever their parents skip) rather than
 * props on every turn.
 */
import { createContext } from "preact";
import { useContext, useMemo, useRef, useState } from "preact/hooks";
import { mergeSnapshot, sessions } from "../app.js";
import { forkSession, rewind as rewindOp } from "../c2/generated/sdk.gen.js";
import type { SessionSnapshot } from "../c2/generated/types.gen.js";
import type { Item, Lineage } from "../conversation.js";
import { problemCode, problemMessage } from "../errors.js";
import { requestId, sessionHref, useStore } from "../hooks.js";
import { ChangesDialog } from "./changes.js";

/** Where a rewind goes: after a turn (0: the baseline) or to any checkpoint (an undo). */
export type RewindTarget = { toTurn: number } | { toCheckpoint: string };

export interface Review {
  /** Diffs can be asked for (the session's folder is a git checkout still there). */
  checkpoints: boolean;
  showChanges(turn: number | null): void;
  rewind(target: RewindTarget, ask: boolean): void;
  fork(atTurn: number | null): void;
}

export const ReviewContext = createContext<Review | null>(null);

function targetLabel(target: RewindTarget): string {
  if ("toCheckpoint" in target) return "the state before that rewind";
  return target.toTurn === 0 ? "how they were when the session started" : `how turn ${target.toTurn} left them`;
}

interface Refusal {
  target: RewindTarget;
  paths: string[];
  /** A plain folder (no worktree of its own): every rewind must be forced. */
  ownFolder: boolean;
}

/**
 * The review actions of session `id` and what they show: the changes dialog and a refused
 * rewind's choice. `checkpoints` is whether the session has any (a live worktree, or a turn
 * that recorded one); `onNotice` shows a problem's sentence.
 */
export function useReview(id: string, checkpoints: boolean, onNotice: (message: string | null) => void) {
  const [changes, setChanges] = useState<{ turn: number | null } | null>(null);
  const [refusal, setRefusal] = useState<Refusal | null>(null);
  const [busy, setBusy] = useState<string | null>(null);
  const notice = useRef(onNotice);
  notice.current = onNotice;

  const run = async (target: RewindTarget, force: boolean) => {
    const body = "toTurn" in target ? { to_turn: target.toTurn } : { to_checkpoint: target.toCheckpoint };
    setBusy("Rewinding…");
    const result = await rewindOp({ path: { session_id: id }, body: { ...body, force, request_id: requestId() } });
    setBusy(null);
    if (result.data !== undefined) {
      setRefusal(null);
      notice.current(null);
      return;
    }
    const code = problemCode(result.error);
    if (!force && (code === "outside_changes" || code === "force_required")) {
      const paths = (result.error as { paths?: string[] } | undefined)?.paths ?? [];
      setRefusal({ target, paths, ownFolder: code === "force_required" });
      return;
    }
    setRefusal(null);
    notice.current(problemMessage(result.error));
  };

  const review = useMemo<Review>(
    () => ({
      checkpoints,
      showChanges: (turn) => setChanges({ turn }),
      rewind: (target, ask) => {
        if (ask && !confirm(`Rewind the files to ${targetLabel(target)}? What is there now is kept: “Undo rewind” brings it back.`)) return;
        void run(target, false);
      },
      fork: (atTurn) => {
        void (async () => {
          setBusy("Forking…");
          const body = atTurn === null ? { request_id: requestId() } : { at_turn: atTurn, request_id: requestId() };
          const result = await forkSession({ path: { session_id: id }, body });
          setBusy(null);
          if (result.data === undefined) {
            notice.current(problemMessage(result.error));
            return;
          }
          mergeSnapshot(result.data);
          location.hash = sessionHref(result.data.id);
        })();
      },
    }),
    [id, checkpoints],
  );

  const overlays = (
    <>
      {busy && (
        <p class="muted busy" role="status">
          {busy}
        </p>
      )}
      {refusal && (
        <section role="region" aria-label="Rewind refused" class="permission refusal">
          {refusal.ownFolder ? (
            <p>
              This session works in your own folder, not in a worktree of its own: rewinding rewrites your files there (what is
              there now is kept and can be restored).
            </p>
          ) : (
            <>
              <p>These files changed outside any turn since c2 last recorded them; rewinding replaces them (they are kept and can be restored):</p>
              <ul class="paths">
                {refusal.paths.map((path) => (
                  <li>
                    <code>{path}</code>
                  </li>
                ))}
              </ul>
            </>
          )}
          <div class="actions">
            <button type="button" class="primary" onClick={() => void run(refusal.target, true)}>
              Rewind anyway
            </button>
            <button type="button" onClick={() => setRefusal(null)}>
              Cancel
            </button>
          </div>
        </section>
      )}
      {changes && <ChangesDialog session={id} turn={changes.turn} onClose={() => setChanges(null)} />}
    </>
  );
  return { review, overlays };
}

/** A finished turn's actions (a running one: its changes so far). */
export function TurnTools({ number, live, checkpoint }: { number: number | null; live: boolean; checkpoint: string | null }) {
  const review = useContext(ReviewContext);
  if (review === null || number === null) return null;
  if (live) {
    return review.checkpoints ? (
      <div class="turn-tools">
        <button type="button" class="link" onClick={() => review.showChanges(number)}>
          Changes so far
        </button>
      </div>
    ) : null;
  }
  const recorded = checkpoint !== null && review.checkpoints;
  return (
    <div class="turn-tools">
      {recorded && (
        <button type="button" class="link" onClick={() => review.showChanges(number)}>
          Changes
        </button>
      )}
      {recorded && (
        <button type="button" class="link" onClick={() => review.rewind({ toTurn: number }, true)}>
          Rewind to here
        </button>
      )}
      <button type="button" class="link" onClick={() => review.fork(number)}>
        Fork from here
      </button>
    </div>
  );
}

/**
 * A rewind as the conversation shows it; the latest one (nothing ran since) offers the undo:
 * rewinding to the tree it replaced. A rewind to a tree that ends no turn is, in the app, the
 * undo of the rewind before it (`undoes`: it restores what that one replaced), and says so:
 * "an earlier state" would be wrong, it is the later one.
 */
export function RewindNote({ item, latest, undoes }: { item: Extract<Item, { type: "rewind" }>; latest: boolean; undoes: boolean }) {
  const review = useContext(ReviewContext);
  const where = item.toTurn === null ? "an earlier state" : item.toTurn === 0 ? "the start of the session" : `after turn ${item.toTurn}`;
  const said = item.toTurn === null && undoes ? "Rewind undone: the files are back as they were before it." : `Files rewound to ${where}.`;
  return (
    <p class="rewind-note" role="note">
      {said}{" "}
      {latest && review?.checkpoints && (
        <button type="button" class="link" onClick={() => review.rewind({ toCheckpoint: item.pre }, false)}>
          Undo rewind
        </button>
      )}
    </p>
  );
}

function titleOf(list: SessionSnapshot[], id: string): string | null {
  const found = list.find((s) => s.id === id);
  return found ? found.title || "Untitled" : null;
}

function atTurn(turn: number): string {
  return turn === 0 ? "at its start" : `at turn ${turn}`;
}

/** "Forked from <parent> at turn n", linking to the parent. */
export function LineageNote({ from }: { from: Lineage }) {
  const list = useStore(sessions);
  const title = titleOf(list, from.session);
  return (
    <p class="lineage muted">
      Forked from {title === null ? "a session that no longer exists" : <a href={sessionHref(from.session)}>{title}</a>} {atTurn(from.turn)}
    </p>
  );
}

/** On a fork's first turn: the agent could not fork its own session and got the parent's turns. */
export function PrimedNote({ from }: { from: Lineage }) {
  const list = useStore(sessions);
  const title = titleOf(list, from.session) ?? "the parent session";
  return (
    <p class="primed muted" role="note">
      Primed from “{title}” up to turn {from.turn}: the agent was given those turns as context.
    </p>
  );
}
