/**
 * A session's follow-up queue (issue 14): prompts lined up while a turn runs, run in order by
 * c2 itself. The panel lists them (edit, remove), and shows a paused queue with its reason and
 * Resume.
 *
 * State is the `GET …/queue` answer kept current by the stream: `queue_changed` carries the
 * whole list, `queue_paused` / `queue_resumed` the pause. Events are buffered while the first
 * read is in flight and applied over it (each one is a whole state, in commit order), so every
 * tab converges on the server's queue.
 */
import { useEffect, useState } from "preact/hooks";
import { epoch, onEvent, sessions, whenLive } from "../app.js";
import { editQueued, getQueue, removeQueued, resumeQueue } from "../c2/generated/sdk.gen.js";
import type { QueueItem, StreamEvent } from "../c2/generated/types.gen.js";
import { problemMessage } from "../errors.js";
import { requestId, useStore } from "../hooks.js";

export interface QueueState {
  paused: boolean;
  reason: string | null;
  items: QueueItem[];
}

const EMPTY: QueueState = { paused: false, reason: null, items: [] };

const REASONS: Record<string, string> = {
  cancelled: "the last turn was stopped",
  failed: "a turn failed or could not start",
  permission: "a queued turn asked for permission",
  interrupted: "c2 restarted while a turn ran",
};

export function useQueue(id: string): QueueState {
  const generation = useStore(epoch);
  const [state, setState] = useState<QueueState>(EMPTY);
  useEffect(() => {
    let alive = true;
    let buffer: StreamEvent[] | null = [];
    let current = EMPTY;
    const set = (next: QueueState) => {
      current = next;
      setState(next);
    };
    const apply = (event: StreamEvent) => {
      if (event.event === "queue_changed") set({ ...current, items: event.items });
      else if (event.event === "queue_paused") set({ ...current, paused: true, reason: event.reason });
      else if (event.event === "queue_resumed") set({ ...current, paused: false, reason: null });
    };
    const off = onEvent((event) => {
      if (event.session !== id || !event.event.startsWith("queue_")) return;
      if (buffer !== null) buffer.push(event);
      else apply(event);
    });
    set(EMPTY);
    const stop = whenLive(() => void getQueue({ path: { session_id: id } }).then((result) => {
      if (!alive) return;
      if (result.data !== undefined) set({ paused: result.data.paused, reason: result.data.pause_reason, items: result.data.items });
      const pending = buffer ?? [];
      buffer = null;
      for (const event of pending) apply(event);
    }));
    return () => {
      alive = false;
      stop();
      off();
    };
  }, [id, generation]);
  return state;
}

type Block = QueueItem["doc"][number];

function textOf(doc: Block[]): string {
  return doc
    .filter((block): block is Extract<Block, { type: "text" }> => block.type === "text")
    .map((block) => block.text)
    .join("\n");
}

/** A queued doc with its text replaced: skills and @chat references stay, text goes last. */
function withText(doc: Block[], text: string): Block[] {
  const others = doc.filter((block) => block.type !== "text");
  return text.trim() ? [...others, { type: "text", text } as Block] : others;
}

function Attached({ doc }: { doc: Block[] }) {
  const list = useStore(sessions);
  const chips = doc.flatMap((block) => {
    if (block.type === "skill") return [`Skill: ${block.skill_id}`];
    if (block.type === "session") return [`@${list.find((s) => s.id === block.session_id)?.title || block.session_id.slice(0, 8)}`];
    return [];
  });
  return chips.length === 0 ? null : (
    <span class="meta">
      {chips.map((chip) => (
        <span class="badge chat">{chip}</span>
      ))}
    </span>
  );
}

function QueueEntry({ session, item, onError }: { session: string; item: QueueItem; onError: (message: string | null) => void }) {
  const [draft, setDraft] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const text = textOf(item.doc);
  const save = async (event: Event) => {
    event.preventDefault();
    if (draft === null) return;
    setBusy(true);
    const result = await editQueued({
      path: { session_id: session, item: item.id },
      body: { doc: withText(item.doc, draft), request_id: requestId() },
    });
    setBusy(false);
    onError(result.data === undefined ? problemMessage(result.error) : null);
    if (result.data !== undefined) setDraft(null);
  };
  const remove = async () => {
    setBusy(true);
    const result = await removeQueued({ path: { session_id: session, item: item.id } });
    setBusy(false);
    onError(result.data === undefined ? problemMessage(result.error) : null);
  };
  if (draft !== null) {
    const empty = withText(item.doc, draft).length === 0;
    return (
      <li class="queued editing">
        <form onSubmit={save}>
          <textarea aria-label="Queued message" rows={2} value={draft} onInput={(e) => setDraft(e.currentTarget.value)} />
          <div class="actions">
            <button type="button" onClick={() => setDraft(null)}>
              Cancel
            </button>
            <button type="submit" class="primary" disabled={busy || empty}>
              Save
            </button>
          </div>
        </form>
      </li>
    );
  }
  return (
    <li class="queued">
      <span class="queued-text">{text || "(no text)"}</span>
      <Attached doc={item.doc} />
      <span class="queued-actions">
        <button type="button" class="link" onClick={() => setDraft(text)} disabled={busy}>
          Edit
        </button>
        <button type="button" class="link" onClick={() => void remove()} disabled={busy}>
          Remove
        </button>
      </span>
    </li>
  );
}

/** The waiting prompts and the pause; nothing while the queue is empty and running freely. */
export function QueuePanel({ session, queue }: { session: string; queue: QueueState }) {
  const [error, setError] = useState<string | null>(null);
  if (queue.items.length === 0 && !queue.paused) return null;
  const resume = async () => {
    const result = await resumeQueue({ path: { session_id: session }, body: { request_id: requestId() } });
    setError(result.data === undefined ? problemMessage(result.error) : null);
  };
  return (
    <section role="region" aria-label="Queue" class="queue">
      <div class="queue-head">
        <strong>Queued next</strong>
        <span class="muted">{queue.items.length === 0 ? "nothing waiting" : `${queue.items.length} waiting`}</span>
      </div>
      {queue.paused && (
        <div class="paused">
          <p role="status">Queue paused: {REASONS[queue.reason ?? ""] ?? queue.reason ?? "waiting for you"}.</p>
          <button type="button" class="primary" onClick={() => void resume()}>
            Resume
          </button>
        </div>
      )}
      {queue.items.length > 0 && (
        <ol>
          {queue.items.map((item) => (
            <QueueEntry key={item.id} session={session} item={item} onError={setError} />
          ))}
        </ol>
      )}
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </section>
  );
}
