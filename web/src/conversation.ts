/**
 * The conversation model: complete turns built from transcript pages and live events alike.
 *
 * Both sources go through `applyPart` (a live event is first turned into the transcript part
 * it was stored as), so a page and the live stream render identically. Items are immutable:
 * an update replaces the changed turn object only, so unchanged turns skip re-rendering.
 * `snapshot_through` merging: buffered live events whose `transcript_seq` the page already
 * holds are dropped (`isNewer`), the rest applied in order — nothing lost or doubled.
 */
import type { StreamEvent, TranscriptEntry } from "./c2/generated/types.gen.js";

export type Item =
  | { type: "text"; text: string }
  | { type: "thought"; text: string }
  | { type: "tool"; id: string; title: string; status: string; kind: string | null; content: string[] }
  | { type: "plan"; entries: string[] }
  | { type: "permission"; title: string; option: string | null }
  | { type: "rewind"; toTurn: number | null; checkpoint: string; pre: string };

/** A fork's parent and turn (`forked_from`, `primed_from`). */
export interface Lineage {
  session: string;
  turn: number;
}

export interface Turn {
  /** Seq of the user prompt row; null for an agent-only preamble. */
  userSeq: number | null;
  prompt: string | null;
  items: Item[];
  /** Highest transcript seq applied to this turn. */
  lastSeq: number;
  /** The turn's number (from 1) when a checkpoint part or a live event said it. */
  number: number | null;
  /** The git tree the turn left (its `checkpoint` part / `turn_ended.checkpoint`). */
  checkpoint: string | null;
  /** Live `turn_started.primed_from`: the agent got a parent's turns as a primer. */
  primedFrom: Lineage | null;
}

function blank(userSeq: number | null, prompt: string | null, seq: number): Turn {
  return { userSeq, prompt, items: [], lastSeq: seq, number: null, checkpoint: null, primedFrom: null };
}

export type Part = TranscriptEntry["part"];

/** Turns with one more part applied (returns `turns` itself when nothing changes). */
export function applyPart(turns: Turn[], seq: number, role: string, part: Part): Turn[] {
  const last = turns[turns.length - 1];
  if (last !== undefined && seq <= last.lastSeq) return turns; // already shown
  if (role === "user" && (part.kind === "prompt" || part.kind === "text")) {
    return [...turns, blank(seq, part.text || null, seq)];
  }
  const turn: Turn = last ?? blank(null, null, -1);
  // The checkpoint row closes its turn: it numbers the turn rather than adding an item.
  const updated =
    part.kind === "checkpoint"
      ? { ...turn, number: part.turn, checkpoint: part.checkpoint, lastSeq: seq }
      : { ...turn, items: withPart(turn.items, part), lastSeq: seq };
  return last === undefined ? [updated] : [...turns.slice(0, -1), updated];
}

function withPart(items: Item[], part: Part): Item[] {
  const tail = items[items.length - 1];
  switch (part.kind) {
    case "text":
    case "prompt":
      if (tail?.type === "text") return [...items.slice(0, -1), { type: "text", text: tail.text + part.text }];
      return [...items, { type: "text", text: part.text }];
    case "reasoning":
      if (tail?.type === "thought") return [...items.slice(0, -1), { type: "thought", text: tail.text + part.text }];
      return [...items, { type: "thought", text: part.text }];
    case "plan":
      return [...items, { type: "plan", entries: part.entries }];
    case "permission":
      return [...items, { type: "permission", title: part.title, option: part.option_id ?? null }];
    case "rewind":
      return [...items, { type: "rewind", toTurn: part.to_turn ?? null, checkpoint: part.checkpoint, pre: part.pre_rewind_checkpoint }];
    case "tool_call": {
      const content = (part.content ?? []).map(toolContentText);
      const index = items.findIndex((item) => item.type === "tool" && item.id === part.id);
      if (index >= 0) {
        const prior = items[index] as Extract<Item, { type: "tool" }>;
        // Later updates may omit kind, title or content: keep what was seen before.
        const merged: Item = {
          type: "tool",
          id: part.id,
          title: part.title || prior.title,
          status: part.status || prior.status,
          kind: part.tool_kind ?? prior.kind,
          content: content.length > 0 ? content : prior.content,
        };
        return items.map((item, i) => (i === index ? merged : item));
      }
      return [...items, { type: "tool", id: part.id, title: part.title, status: part.status, kind: part.tool_kind ?? null, content }];
    }
    default:
      return items;
  }
}

type ToolContent = NonNullable<Extract<Part, { kind: "tool_call" }>["content"]>[number];

function toolContentText(content: ToolContent): string {
  const cut = content.truncated ? "\n… (truncated)" : "";
  if (content.type === "diff") {
    const before = (content.old_text ?? "").split("\n").map((line) => `- ${line}`);
    const after = (content.new_text ?? "").split("\n").map((line) => `+ ${line}`);
    return [`--- ${content.path ?? ""}`, ...(content.old_text ? before : []), ...after].join("\n") + cut;
  }
  if (content.type === "terminal") return `terminal ${content.terminal_id ?? ""}`;
  return (content.text ?? "") + cut;
}

/** Turns built from a page's entries (oldest first). */
export function fromEntries(entries: TranscriptEntry[], base: Turn[] = []): Turn[] {
  let turns = base;
  for (const entry of entries) turns = applyPart(turns, entry.seq, entry.role, entry.part);
  return turns;
}

/** The transcript part a live event was stored as, with its seq; null for other events. */
export function eventPart(event: StreamEvent): { seq: number; role: string; part: Part } | null {
  const seq = "transcript_seq" in event ? event.transcript_seq : null;
  if (seq === null || seq === undefined) return null;
  switch (event.event) {
    case "turn_started":
      return { seq, role: "user", part: { kind: "prompt", text: "", display: "" } };
    case "agent_text":
      return { seq, role: "agent", part: { kind: "text", text: event.text } };
    case "agent_thought":
      return { seq, role: "agent", part: { kind: "reasoning", text: event.text } };
    case "plan":
      return { seq, role: "agent", part: { kind: "plan", entries: event.entries } };
    case "tool_call":
      return {
        seq,
        role: "agent",
        part: {
          kind: "tool_call",
          id: event.id,
          title: event.title,
          status: event.status,
          tool_kind: event.kind ?? null,
          content: event.content ?? null,
        },
      };
    case "permission_resolved":
      return { seq, role: "agent", part: { kind: "permission", input_id: event.request_id, title: "Permission", option_id: event.option_id } };
    case "session_rewound":
      return {
        seq,
        role: "agent",
        part: { kind: "rewind", to_turn: event.to_turn, checkpoint: event.checkpoint, pre_rewind_checkpoint: event.pre_rewind_checkpoint },
      };
    default:
      return null;
  }
}

/** Whether a buffered live part is newer than the page snapshot it is merged into. */
export function isNewer(seq: number, snapshotThrough: number | null): boolean {
  return snapshotThrough === null || seq > snapshotThrough;
}

/** Older turns (a previous page) placed before the ones shown. */
export function prepend(older: Turn[], turns: Turn[]): Turn[] {
  const first = turns[0];
  if (first === undefined) return older;
  return [...older.filter((turn) => turn.lastSeq < (first.userSeq ?? first.lastSeq)), ...turns];
}

/** The prompt text of the turn at `userSeq` filled in (live turns start without it). */
export function withPrompt(turns: Turn[], userSeq: number, text: string): Turn[] {
  return turns.map((turn) => (turn.userSeq === userSeq && turn.prompt !== text ? { ...turn, prompt: text } : turn));
}

/** Whether transcript row `seq` belongs to `turn` (a search hit's row, for highlighting). */
export function holdsSeq(turn: Turn, seq: number): boolean {
  return (turn.userSeq ?? Number.NEGATIVE_INFINITY) <= seq && seq <= turn.lastSeq;
}

/** A live `turn_started` applied: the turn at `userSeq` gets its number and primer lineage. */
export function withTurnStart(turns: Turn[], userSeq: number, number: number | null, primedFrom: Lineage | null): Turn[] {
  return turns.map((turn) =>
    turn.userSeq === userSeq && (turn.number !== number || turn.primedFrom !== primedFrom)
      ? { ...turn, number: number ?? turn.number, primedFrom: primedFrom ?? turn.primedFrom }
      : turn,
  );
}

/**
 * A live `turn_ended` applied (it carries no transcript seq; its `checkpoint` row is read with
 * pages): the turn numbered `number` — else the newest turn, when it has no number yet (a
 * running turn read from a page) — gets the checkpoint. Applying it twice changes nothing.
 */
export function withTurnEnd(turns: Turn[], number: number | null, checkpoint: string | null): Turn[] {
  if (number === null) return turns;
  let index = turns.findIndex((turn) => turn.number === number);
  if (index < 0) {
    const last = turns.length - 1;
    if (last >= 0 && turns[last]?.userSeq !== null && turns[last]?.number === null) index = last;
  }
  const turn = turns[index];
  if (turn === undefined || (turn.number === number && turn.checkpoint === (checkpoint ?? turn.checkpoint))) return turns;
  const ended = { ...turn, number, checkpoint: checkpoint ?? turn.checkpoint };
  return turns.map((t, i) => (i === index ? ended : t));
}

/**
 * Each turn's number (null for a preamble or when unknown). Turns are numbered by their prompt
 * rows (one per turn), so a number seen on one turn — or the start of the transcript, when
 * `complete` — numbers its neighbours by counting prompts.
 */
export function turnNumbers(turns: Turn[], complete: boolean): (number | null)[] {
  const out = turns.map((turn) => (turn.userSeq === null ? null : turn.number));
  let previous: number | null = complete ? 0 : null;
  turns.forEach((turn, i) => {
    if (turn.userSeq === null) return;
    const known = out[i] ?? null;
    if (known !== null) previous = known;
    else if (previous !== null) out[i] = previous = previous + 1;
  });
  let next: number | null = null;
  for (let i = turns.length - 1; i >= 0; i -= 1) {
    if (turns[i]?.userSeq === null) continue;
    const known = out[i] ?? null;
    if (known !== null) next = known;
    else if (next !== null && next > 1) out[i] = next = next - 1;
  }
  return out;
}
