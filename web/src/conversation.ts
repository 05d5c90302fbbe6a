/**
 * The conversation model: complete turns built from transcript pages and live events alike.
 *
 * Both sources go through `applyPart` (a live event is first turned into the transcript part
 * it was stored as), so a page and the live stream render identically. Items are immutable:
 * an update replaces the changed turn object only, so unchanged turns skip re-rendering.
 * `snapshot_through` merging: buffered live events whose `transcript_seq` the page already
 * holds are dropped (`isNewer`), the rest applied in order — nothing lost or doubled. A page
 * entry may carry several rows (`seq`..`last_seq`: the streamed chunks of one message), and a
 * page bounded in bytes may begin inside a turn: `prepend` joins it to its older part.
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
  /** Lowest and highest transcript seq applied to this turn. */
  firstSeq: number;
  lastSeq: number;
  /** The turn's number (from 1) when a checkpoint part or a live event said it. */
  number: number | null;
  /** The git tree the turn left (its `checkpoint` part / `turn_ended.checkpoint`). */
  checkpoint: string | null;
  /** `primed_from` of the turn's prompt (or of its live `turn_started`): the agent got a
   * parent's turns as a primer. */
  primedFrom: Lineage | null;
}

function blank(userSeq: number | null, prompt: string | null, firstSeq: number, lastSeq: number): Turn {
  return { userSeq, prompt, items: [], firstSeq, lastSeq, number: null, checkpoint: null, primedFrom: null };
}

export type Part = TranscriptEntry["part"];

/** Turns with one more part (rows `seq`..`lastSeq`) applied (`turns` itself when nothing changes). */
export function applyPart(turns: Turn[], seq: number, role: string, part: Part, lastSeq = seq): Turn[] {
  const last = turns[turns.length - 1];
  if (last !== undefined && seq <= last.lastSeq) return turns; // already shown
  if (role === "user" && (part.kind === "prompt" || part.kind === "text")) {
    const turn = blank(seq, part.text || null, seq, seq);
    const primedFrom = part.kind === "prompt" ? (part.primed_from ?? null) : null;
    return [...turns, primedFrom ? { ...turn, primedFrom } : turn];
  }
  const turn: Turn = last ?? blank(null, null, seq, -1);
  // The checkpoint row closes its turn: it numbers the turn rather than adding an item.
  if (part.kind === "checkpoint") {
    const numbered = { ...turn, number: part.turn, checkpoint: part.checkpoint, lastSeq };
    return last === undefined ? [numbered] : [...turns.slice(0, -1), numbered];
  }
  const item = toItem(part);
  const items = item === null ? turn.items : withItem(turn.items, item);
  const updated = { ...turn, items, lastSeq };
  return last === undefined ? [updated] : [...turns.slice(0, -1), updated];
}

function toItem(part: Part): Item | null {
  switch (part.kind) {
    case "text":
    case "prompt":
      return { type: "text", text: part.text };
    case "reasoning":
      return { type: "thought", text: part.text };
    case "plan":
      return { type: "plan", entries: part.entries };
    case "permission":
      return { type: "permission", title: part.title, option: part.option_id ?? null };
    case "rewind":
      return { type: "rewind", toTurn: part.to_turn ?? null, checkpoint: part.checkpoint, pre: part.pre_rewind_checkpoint };
    case "tool_call":
      return { type: "tool", id: part.id, title: part.title, status: part.status, kind: part.tool_kind ?? null, content: (part.content ?? []).map(toolContentText) };
    default:
      return null;
  }
}

/** `items` with one more: a chunk extends the message or thought it continues, a tool call
 * update merges into the call it updates. */
function withItem(items: Item[], item: Item): Item[] {
  const tail = items[items.length - 1];
  if (item.type === "text" && tail?.type === "text") return [...items.slice(0, -1), { type: "text", text: tail.text + item.text }];
  if (item.type === "thought" && tail?.type === "thought") return [...items.slice(0, -1), { type: "thought", text: tail.text + item.text }];
  if (item.type === "tool") {
    const index = items.findIndex((known) => known.type === "tool" && known.id === item.id);
    if (index >= 0) {
      const prior = items[index] as Extract<Item, { type: "tool" }>;
      // Later updates may omit kind, title or content: keep what was seen before.
      const merged: Item = {
        type: "tool",
        id: item.id,
        title: item.title || prior.title,
        status: item.status || prior.status,
        kind: item.kind ?? prior.kind,
        content: item.content.length > 0 ? item.content : prior.content,
      };
      return items.map((known, i) => (i === index ? merged : known));
    }
  }
  return [...items, item];
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
  for (const entry of entries) turns = applyPart(turns, entry.seq, entry.role, entry.part, entry.last_seq);
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

/** Older turns (a previous page) placed before the ones shown; shown ones that began inside
 * a turn (no user row) continue the older page's last turn. */
export function prepend(older: Turn[], turns: Turn[]): Turn[] {
  const first = turns[0];
  if (first === undefined) return older;
  const kept = older.filter((turn) => turn.lastSeq < first.firstSeq);
  const joint = kept[kept.length - 1];
  if (first.userSeq !== null || joint === undefined) return [...kept, ...turns];
  const joined = {
    ...joint,
    items: first.items.reduce(withItem, joint.items),
    lastSeq: first.lastSeq,
    number: first.number ?? joint.number,
    checkpoint: first.checkpoint ?? joint.checkpoint,
  };
  return [...kept.slice(0, -1), joined, ...turns.slice(1)];
}

/** The prompt text of the turn at `userSeq` filled in (live turns start without it). */
export function withPrompt(turns: Turn[], userSeq: number, text: string): Turn[] {
  return turns.map((turn) => (turn.userSeq === userSeq && turn.prompt !== text ? { ...turn, prompt: text } : turn));
}

/** Whether transcript row `seq` belongs to `turn` (a search hit's row, for highlighting). */
export function holdsSeq(turn: Turn, seq: number): boolean {
  return turn.firstSeq <= seq && seq <= turn.lastSeq;
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
