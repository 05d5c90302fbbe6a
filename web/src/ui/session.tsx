/**
 * One session: header with settings, the conversation (transcript pages + live events), parked
 * permissions and the composer.
 *
 * Loading follows the protocol's merge rule: subscribe to live events first and buffer them,
 * read the newest transcript page once the stream is live, then apply the buffered events whose `transcript_seq` is
 * above the page's `snapshot_through`; from then on events apply as they come. A `resync`
 * (epoch change) reloads from scratch.
 */
import { Component } from "preact";
import { useEffect, useLayoutEffect, useRef, useState } from "preact/hooks";
import { epoch, mergeSnapshot, onEvent, sessions, sessionsComplete, usage, whenLive } from "../app.js";
import {
  answerPermission,
  cancel,
  deleteSession,
  discardWorktree,
  getTranscript,
  listSkills,
  previewPrompt,
  prompt,
  queuePrompt,
  setConfigOption,
  setExecutionPolicy,
  setMode,
  setModel,
} from "../c2/generated/sdk.gen.js";
import type {
  ExecutionPolicy,
  PendingInput,
  PermissionMode,
  PreviewBody,
  PromptPreview,
  SandboxPolicy,
  SessionSnapshot,
  SkillInfo,
  StreamEvent,
} from "../c2/generated/types.gen.js";
import {
  type Item,
  type Turn,
  applyPart,
  eventPart,
  fromEntries,
  holdsSeq,
  isNewer,
  prepend,
  turnNumbers,
  withPrompt,
  withTurnEnd,
  withTurnStart,
} from "../conversation.js";
import { problemMessage } from "../errors.js";
import { type HitTarget, requestId, sessionHref, useStore } from "../hooks.js";
import { Markdown } from "../markdown.js";
import { OwnerBadge } from "./instances.js";
import { type QueueState, QueuePanel, useQueue } from "./queue.js";
import { LineageNote, PrimedNote, ReviewContext, RewindNote, TurnTools, useReview } from "./review.js";
import { MODES, SANDBOXES, activityLabel, providerLabel } from "./sessions.js";

const PAGE_TURNS = 20;

function ItemView({ item }: { item: Item }) {
  switch (item.type) {
    case "text":
      return <Markdown source={item.text} />;
    case "thought":
      return (
        <details class="thought">
          <summary>Thought</summary>
          <p>{item.text}</p>
        </details>
      );
    case "plan":
      return (
        <div class="plan">
          <strong>Plan</strong>
          <ul>
            {item.entries.map((entry) => (
              <li>
                <input type="checkbox" disabled aria-label={entry} /> {entry}
              </li>
            ))}
          </ul>
        </div>
      );
    case "tool":
      return (
        <details class={`tool status-${item.status.replace(/[^a-z_]/g, "")}`}>
          <summary>
            <span class="kind">{item.kind ?? "tool"}</span> {item.title || item.id}{" "}
            <span class="status">{item.status}</span>
          </summary>
          {item.content.length === 0 ? <p class="muted">No output.</p> : item.content.map((text) => <pre>{text}</pre>)}
        </details>
      );
    case "permission":
      return (
        <p class="muted permission-note">
          {item.title}: {item.option === null ? "denied" : `answered “${item.option}”`}
        </p>
      );
    case "rewind":
      return null; // shown after the turn's actions (TurnView)
  }
}

interface TurnProps {
  turn: Turn;
  hit?: boolean;
  /** The turn's number (null: unknown, or the preamble). */
  number: number | null;
  /** The turn is running now. */
  live?: boolean;
  /** The newest turn: its last rewind (nothing ran since) can be undone. */
  newest?: boolean;
}

/** One turn; re-renders only when its own object changes (a live chunk touches the last). */
class TurnView extends Component<TurnProps> {
  override shouldComponentUpdate(next: TurnProps): boolean {
    const now = this.props;
    return next.turn !== now.turn || next.hit !== now.hit || next.number !== now.number || next.live !== now.live || next.newest !== now.newest;
  }
  override render() {
    const { turn, hit, number, live = false, newest = false } = this.props;
    // Rewinds happen between turns: they follow the turn's own actions.
    const rewinds = turn.items.filter((item) => item.type === "rewind");
    return (
      <article class={hit ? "turn hit" : "turn"} aria-current={hit ? "true" : undefined} aria-label={turn.prompt ? `Turn: ${turn.prompt.slice(0, 60)}` : "Turn"}>
        {turn.userSeq !== null && <div class="prompt">{turn.prompt ?? "…"}</div>}
        {turn.primedFrom && <PrimedNote from={turn.primedFrom} />}
        <div class="reply">
          {turn.items.map((item) => item.type !== "rewind" && <ItemView item={item} />)}
        </div>
        {turn.userSeq !== null && <TurnTools number={number} live={live} checkpoint={turn.checkpoint} />}
        {rewinds.map((item, i) => (
          <RewindNote item={item} latest={newest && !live && i === rewinds.length - 1} undoes={i > 0 && rewinds[i - 1].pre === item.checkpoint} />
        ))}
      </article>
    );
  }
}

/** Every turn but the newest: skipped by a live chunk, which only replaces the newest turn. */
class OlderTurns extends Component<{ turns: Turn[]; numbers: (number | null)[]; hit: number | null }> {
  override shouldComponentUpdate(next: { turns: Turn[]; numbers: (number | null)[]; hit: number | null }): boolean {
    const now = this.props;
    return (
      next.hit !== now.hit ||
      next.turns.length !== now.turns.length ||
      next.turns.some((turn, i) => turn !== now.turns[i] || next.numbers[i] !== now.numbers[i])
    );
  }
  override render() {
    const { hit, numbers } = this.props;
    return this.props.turns.map((turn, i) => (
      <TurnView key={turn.userSeq ?? "preamble"} turn={turn} number={numbers[i] ?? null} hit={hit !== null && holdsSeq(turn, hit)} />
    ));
  }
}

function PermissionCard({ session, pending }: { session: string; pending: PendingInput }) {
  const [error, setError] = useState<string | null>(null);
  const answer = async (option: string | null) => {
    const result = await answerPermission({ path: { session_id: session, input_id: pending.input_id }, body: { option_id: option } });
    if (result.error !== undefined) setError(problemMessage(result.error));
  };
  return (
    <section role="region" aria-label="Permission request" class="permission">
      <p>
        <strong>Permission:</strong> {pending.title}
      </p>
      <div class="actions">
        {pending.options.map(([id, label]) => (
          <button type="button" class="primary" onClick={() => void answer(id)}>
            {label}
          </button>
        ))}
        <button type="button" onClick={() => void answer(null)}>
          Deny
        </button>
      </div>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </section>
  );
}

function Settings({ session, onError }: { session: SessionSnapshot; onError: (message: string | null) => void }) {
  const report = (result: { error?: unknown; data?: unknown }) => onError(result.data === undefined ? problemMessage(result.error) : null);
  // The pair being applied: a second change before the first's answer builds on it, not on
  // the server's older pair (the protocol writes both axes at once). It is shown until the
  // authoritative `execution_policy_changed` lands after the last answer.
  const [pending, setPending] = useState<ExecutionPolicy | null>(null);
  // Writes go out one after another: two PUTs in flight on separate connections may reach the
  // server in either order, and the older pair would then win.
  const chain = useRef<Promise<void>>(Promise.resolve());
  const inFlight = useRef(0);
  const answered = useRef(false);
  const latest = useRef(session);
  latest.current = session;
  const shown = pending ?? session.policy;
  useEffect(() => {
    if (answered.current) setPending(null);
  }, [session.policy.mode, session.policy.sandbox]);
  const write = async (next: ExecutionPolicy) => {
    let result: Awaited<ReturnType<typeof setExecutionPolicy>>;
    try {
      result = await setExecutionPolicy({
        path: { session_id: session.id },
        body: { ...next, request_id: requestId() },
      });
    } finally {
      inFlight.current -= 1;
    }
    report(result);
    if (inFlight.current > 0) return;
    if (result.data === undefined) {
      setPending(null);
      return;
    }
    answered.current = true;
    const now = latest.current.policy;
    if (now.mode === next.mode && now.sandbox === next.sandbox) setPending((c) => (c === next ? null : c));
  };
  const policy = (next: ExecutionPolicy) => {
    setPending(next);
    answered.current = false;
    inFlight.current += 1;
    // A write that throws (the network is gone) drops the shown pair; the queue goes on.
    chain.current = chain.current.then(() => write(next)).catch(() => setPending(null));
  };
  const models = session.models?.available ?? [];
  return (
    <div class="settings">
      {models.length > 0 && (
        <label>
          Model
          <select
            value={session.models?.current ?? session.model ?? ""}
            onChange={async (e) => report(await setModel({ path: { session_id: session.id }, body: { model: e.currentTarget.value } }))}
          >
            {models.map((m) => (
              <option value={m.id}>{m.name}</option>
            ))}
          </select>
        </label>
      )}
      {(session.modes?.available.length ?? 0) > 0 && (
        <label>
          Mode
          <select
            value={session.modes?.current ?? ""}
            onChange={async (e) => report(await setMode({ path: { session_id: session.id }, body: { mode_id: e.currentTarget.value, request_id: requestId() } }))}
          >
            {session.modes?.available.map((m) => (
              <option value={m.id}>{m.name}</option>
            ))}
          </select>
        </label>
      )}
      <label>
        Approval
        <select value={shown.mode} onChange={(e) => policy({ ...shown, mode: e.currentTarget.value as PermissionMode })}>
          {MODES.map(([value, label]) => (
            <option value={value}>{label}</option>
          ))}
        </select>
      </label>
      <label>
        Sandbox
        <select value={shown.sandbox} onChange={(e) => policy({ ...shown, sandbox: e.currentTarget.value as SandboxPolicy })}>
          {SANDBOXES.map(([value, label]) => (
            <option value={value}>{label}</option>
          ))}
        </select>
      </label>
      {session.config_options
        .filter((option) => (option.choices?.length ?? 0) > 0)
        .map((option) => (
          <label>
            {option.name}
            <select
              value={option.current ?? ""}
              onChange={async (e) =>
                report(await setConfigOption({ path: { session_id: session.id, config_id: option.id }, body: { value: e.currentTarget.value } }))
              }
            >
              {option.choices?.map((choice) => (
                <option value={choice.id}>{choice.name}</option>
              ))}
            </select>
          </label>
        ))}
    </div>
  );
}

const kilo = (n: number) => (n >= 1000 ? `${Math.round(n / 1000)}k` : String(n));

function ContextMeter({ session }: { session: SessionSnapshot }) {
  const reports = useStore(usage);
  const window = session.context_window;
  const used = reports[session.id];
  return (
    <>
      {window && window.context_window > 0 && (
        <span class="context">
          <meter aria-label="Context window" min={0} max={window.context_window} value={window.used_tokens} />
          {kilo(window.used_tokens)} / {kilo(window.context_window)} tokens
        </span>
      )}
      {used && (
        <span class="usage">
          usage: {kilo(used.input)} in · {kilo(used.output)} out
        </span>
      )}
    </>
  );
}

type DocBlock = PreviewBody["doc"][number];
interface SkillChoice {
  skill: SkillInfo;
  params: Record<string, string>;
}

/** Skills (with their parameters) and @chat references the next prompt carries. */
function Attachments({
  session,
  skills,
  setSkills,
  chats,
  setChats,
}: {
  session: SessionSnapshot;
  skills: SkillChoice[];
  setSkills: (next: SkillChoice[]) => void;
  chats: string[];
  setChats: (next: string[]) => void;
}) {
  const list = useStore(sessions);
  const [library, setLibrary] = useState<SkillInfo[]>([]);
  useEffect(() => {
    void listSkills({ query: { cwd: session.cwd } }).then((result) => setLibrary(result.data ?? []));
  }, [session.cwd]);
  const others = list.filter((s) => s.id !== session.id);
  const title = (id: string) => list.find((s) => s.id === id)?.title ?? id.slice(0, 8);
  return (
    <div class="attachments">
      <div class="row">
        {library.length > 0 && (
          <select
            aria-label="Add skill"
            value=""
            onChange={(e) => {
              const skill = library.find((k) => k.id === e.currentTarget.value);
              if (skill) setSkills([...skills, { skill, params: { ...skill.params } }]);
            }}
          >
            <option value="">Add a skill…</option>
            {library.map((skill) => (
              <option value={skill.id} title={skill.description}>
                {skill.name}
              </option>
            ))}
          </select>
        )}
        {others.length > 0 && (
          <select
            aria-label="Reference a chat"
            value=""
            onChange={(e) => {
              const id = e.currentTarget.value;
              if (id && !chats.includes(id)) setChats([...chats, id]);
            }}
          >
            <option value="">@ a chat…</option>
            {others.map((s) => (
              <option value={s.id}>{s.title || s.id.slice(0, 8)}</option>
            ))}
          </select>
        )}
      </div>
      {skills.map((choice, index) => (
        <fieldset class="chip" key={`${choice.skill.id}-${index}`}>
          <legend>Skill: {choice.skill.name}</legend>
          {Object.keys(choice.params).map((name) => (
            <label>
              {name}
              <input
                type="text"
                value={choice.params[name]}
                onInput={(e) => {
                  const value = e.currentTarget.value;
                  setSkills(skills.map((c, i) => (i === index ? { ...c, params: { ...c.params, [name]: value } } : c)));
                }}
              />
            </label>
          ))}
          <button type="button" onClick={() => setSkills(skills.filter((_, i) => i !== index))}>
            Remove skill {choice.skill.name}
          </button>
        </fieldset>
      ))}
      {chats.map((id) => (
        <span class="badge chat">
          @{title(id)}{" "}
          <button type="button" class="link" aria-label={`Remove reference to ${title(id)}`} onClick={() => setChats(chats.filter((c) => c !== id))}>
            ×
          </button>
        </span>
      ))}
    </div>
  );
}

function Composer({
  session,
  running,
  queue,
  onSent,
}: {
  session: SessionSnapshot;
  running: boolean;
  queue: QueueState;
  onSent: (rid: string, text: string) => void;
}) {
  const [text, setText] = useState("");
  const [skills, setSkills] = useState<SkillChoice[]>([]);
  const [chats, setChats] = useState<string[]>([]);
  const [preview, setPreview] = useState<PromptPreview | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const doc = (): DocBlock[] => [
    ...skills.map((c): DocBlock => ({ type: "skill", skill_id: c.skill.id, params: c.params })),
    ...chats.map((id): DocBlock => ({ type: "session", session_id: id })),
    ...(text.trim() ? [{ type: "text", text } as DocBlock] : []),
  ];
  const empty = text.trim() === "" && skills.length === 0 && chats.length === 0;
  // While a turn runs the message can only wait in the queue; with a queue, it may.
  const queueable = running || queue.paused || queue.items.length > 0;
  // Sent: the composer empties, unless something new was typed while the request was out.
  const cleared = (sent: string) => {
    setError(null);
    setText((now) => (now === sent ? "" : now));
    setSkills([]);
    setChats([]);
    setPreview(null);
  };
  const send = async (event?: Event) => {
    event?.preventDefault();
    if (running) return enqueue();
    if (empty || busy) return;
    setBusy(true);
    const rid = requestId();
    const sent = text;
    onSent(rid, sent);
    const result = await prompt({ path: { session_id: session.id }, body: { doc: doc(), request_id: rid } });
    setBusy(false);
    if (result.error !== undefined || result.data === undefined) {
      setError(problemMessage(result.error));
      return;
    }
    cleared(sent);
  };
  // Its turn's prompt text is read from the transcript when it starts (it may be edited first).
  const enqueue = async () => {
    if (empty || busy) return;
    setBusy(true);
    const sent = text;
    const result = await queuePrompt({ path: { session_id: session.id }, body: { doc: doc(), request_id: requestId() } });
    setBusy(false);
    if (result.data === undefined) setError(problemMessage(result.error));
    else cleared(sent);
  };
  const showPreview = async () => {
    const result = await previewPrompt({ path: { session_id: session.id }, body: { doc: doc() } });
    if (result.data === undefined) setError(problemMessage(result.error));
    else setPreview(result.data);
  };
  const stop = async () => {
    const result = await cancel({ path: { session_id: session.id } });
    setError(result.error !== undefined ? problemMessage(result.error) : null);
  };
  return (
    <form class="composer" onSubmit={send}>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <Attachments session={session} skills={skills} setSkills={setSkills} chats={chats} setChats={setChats} />
      {preview && (
        <div class="preview">
          <div class="row">
            <strong>What the agent will receive</strong>
            <button type="button" class="link" onClick={() => setPreview(null)}>
              Close preview
            </button>
          </div>
          <pre aria-label="Prompt preview">{preview.prompt}</pre>
          {preview.unresolved.length > 0 && <p class="error">Unresolved: {preview.unresolved.join(", ")}</p>}
        </div>
      )}
      <textarea
        aria-label="Message"
        placeholder={running ? "Queue a message for when this turn ends (Ctrl+Enter)" : "Message the agent (Ctrl+Enter sends)"}
        rows={2}
        value={text}
        onInput={(e) => {
          setText(e.currentTarget.value);
          setPreview(null);
        }}
        onKeyDown={(e) => {
          if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) void send(e);
        }}
      />
      <div class="actions">
        <button type="button" disabled={empty} onClick={() => void showPreview()}>
          Preview
        </button>
        {running && (
          <button type="button" class="danger" onClick={() => void stop()}>
            Stop
          </button>
        )}
        {queueable && (
          <button type="button" class={running ? "primary" : ""} disabled={busy || empty} onClick={() => void enqueue()}>
            Queue
          </button>
        )}
        {!running && (
          <button type="submit" class="primary" disabled={busy || empty}>
            Send
          </button>
        )}
      </div>
    </form>
  );
}

interface Model {
  turns: Turn[];
  nextBefore: number | null;
  loaded: boolean;
}

/**
 * The conversation of session `id`: the newest page plus live events, or — opened from a
 * search hit on an older page (`at.before`) — that page alone, without live events (pages
 * only go backwards; "Back to latest" returns to the live view).
 */
function useConversation(id: string, at: HitTarget | null) {
  const jumped = at !== null && at.before !== null;
  const generation = useStore(epoch);
  const model = useRef<Model>({ turns: [], nextBefore: null, loaded: false });
  const sentPrompts = useRef(new Map<string, string>());
  const [, render] = useState(0);
  const [error, setError] = useState<string | null>(null);
  const update = (turns: Turn[]) => {
    if (turns === model.current.turns) return;
    model.current = { ...model.current, turns };
    render((n) => n + 1);
  };

  useEffect(() => {
    let alive = true;
    let buffer: StreamEvent[] | null = [];
    let snapshotThrough: number | null = null;
    model.current = { turns: [], nextBefore: null, loaded: false };
    const fillPrompt = async (seq: number, rid: string | null | undefined) => {
      const mine = rid ? sentPrompts.current.get(rid) : undefined;
      if (mine !== undefined) {
        update(withPrompt(model.current.turns, seq, mine));
        return;
      }
      // The newest turns hold it; more may have started meanwhile (a queue runs them back to
      // back), so a page that misses it is read again, twice as long.
      for (let limit = 1; limit <= 64 && alive; limit *= 2) {
        const page = await getTranscript({ path: { session_id: id }, query: { limit } });
        if (page.data === undefined) return;
        const row = page.data.entries.find((e) => e.seq === seq && e.role === "user");
        if (row !== undefined) {
          if (alive && (row.part.kind === "prompt" || row.part.kind === "text")) update(withPrompt(model.current.turns, seq, row.part.text));
          return;
        }
        if (page.data.next_before === null || page.data.entries.some((e) => e.seq < seq)) return;
      }
    };
    const apply = (event: StreamEvent) => {
      if (event.event === "turn_ended") {
        update(withTurnEnd(model.current.turns, event.turn ?? null, event.checkpoint ?? null));
        return;
      }
      const part = eventPart(event);
      if (part === null || !isNewer(part.seq, snapshotThrough)) return;
      update(applyPart(model.current.turns, part.seq, part.role, part.part));
      if (event.event === "turn_started") {
        update(withTurnStart(model.current.turns, part.seq, event.turn ?? null, event.primed_from ?? null));
        void fillPrompt(part.seq, event.request_id);
      }
    };
    const off = onEvent((event) => {
      if (event.session !== id || jumped) return;
      if (buffer !== null) buffer.push(event);
      else apply(event);
    });
    const query = jumped ? { before: at.before as number, limit: PAGE_TURNS } : { limit: PAGE_TURNS };
    const stop = whenLive(() => void getTranscript({ path: { session_id: id }, query }).then((page) => {
      if (!alive) return;
      if (page.data === undefined) {
        setError(problemMessage(page.error));
        return;
      }
      snapshotThrough = page.data.snapshot_through;
      model.current = { turns: fromEntries(page.data.entries), nextBefore: page.data.next_before, loaded: true };
      const pending = buffer ?? [];
      buffer = null;
      for (const event of pending) apply(event);
      render((n) => n + 1);
    }));
    return () => {
      alive = false;
      stop();
      off();
    };
  }, [id, generation]);

  const loadEarlier = async () => {
    const before = model.current.nextBefore;
    if (before === null) return;
    const page = await getTranscript({ path: { session_id: id }, query: { before, limit: PAGE_TURNS } });
    if (page.data === undefined) {
      setError(problemMessage(page.error));
      return;
    }
    model.current = { ...model.current, turns: prepend(fromEntries(page.data.entries), model.current.turns), nextBefore: page.data.next_before };
    render((n) => n + 1);
  };
  return { model: model.current, loadEarlier, error, sentPrompts: sentPrompts.current, jumped };
}

export function SessionPage({ id, at = null }: { id: string; at?: HitTarget | null }) {
  const list = useStore(sessions);
  const complete = useStore(sessionsComplete);
  const session = list.find((s) => s.id === id);
  const { model, loadEarlier, error, sentPrompts, jumped } = useConversation(id, at);
  const hit = at?.seq ?? null;
  const shownHit = useRef(false);
  const [notice, setNotice] = useState<string | null>(null);
  const [showSettings, setShowSettings] = useState(false);
  const scroller = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const anchor = useRef<number | null>(null);
  const paging = useRef(false);
  const follow = useRef(false);
  const followedTo = useRef(0); // where the last follow scrolled to
  const queue = useQueue(id);
  // Diffs and rewinds need checkpoints: a worktree still there, or a turn that recorded one.
  const discarded = session?.worktree_discarded ?? false;
  const checkpoints = session !== undefined && !discarded && (session.worktree_path !== null || model.turns.some((t) => t.checkpoint !== null));
  const { review, overlays } = useReview(id, checkpoints, setNotice);

  useLayoutEffect(() => {
    const el = scroller.current;
    if (el === null) return;
    if (hit !== null && !shownHit.current && model.loaded) {
      // Opened from a search hit: bring its turn into view once, then stop following.
      const target = el.querySelector(".turn.hit");
      if (target !== null) {
        shownHit.current = true;
        stick.current = false;
        target.scrollIntoView({ block: "center" });
        return;
      }
    }
    if (anchor.current !== null) {
      el.scrollTop = el.scrollHeight - anchor.current; // keep the view still after paging in
      anchor.current = null;
    } else if (stick.current && !follow.current) {
      // Follow the stream once per frame, not per chunk: no forced layout in the render path.
      follow.current = true;
      requestAnimationFrame(() => {
        follow.current = false;
        if (!stick.current) return;
        el.scrollTop = el.scrollHeight;
        followedTo.current = el.scrollTop;
      });
    }
  });

  if (session === undefined) {
    return (
      <div class="empty">
        <p>{complete ? "This session does not exist (or was deleted)." : "Loading…"}</p>
      </div>
    );
  }
  const state = session.activity.state;
  const running = state?.kind === "running" || state?.kind === "awaiting_input";
  const pending = state?.kind === "awaiting_input" ? state.pending : [];
  const activity = activityLabel(session);
  const numbers = turnNumbers(model.turns, model.loaded && model.nextBefore === null && !jumped);
  const last = model.turns.length - 1;

  const older = async () => {
    if (paging.current) return;
    paging.current = true;
    const el = scroller.current;
    if (el) anchor.current = el.scrollHeight - el.scrollTop;
    try {
      await loadEarlier();
    } finally {
      paging.current = false;
    }
  };
  // Scrolling up by hand (wheel, touch, keys) near the top pages older turns in by itself.
  const nearTop = () => {
    const el = scroller.current;
    if (el && el.scrollTop < 400 && model.nextBefore !== null) void older();
  };
  const remove = async () => {
    if (!confirm(`Delete “${session.title}”? Its agent stops; the transcript stays readable.`)) return;
    const result = await deleteSession({ path: { session_id: id } });
    if (result.error !== undefined) setNotice(problemMessage(result.error));
    else location.hash = "#/";
  };
  const discard = async () => {
    if (!confirm("Discard this session's worktree and its branch?")) return;
    const result = await discardWorktree({ path: { session_id: id } });
    if (result.data === undefined) setNotice(problemMessage(result.error));
    // The snapshot keeps the worktree as provenance and says it was discarded.
    else mergeSnapshot({ ...session, worktree_discarded: true });
  };

  return (
    <ReviewContext.Provider value={review}>
      <div class="session">
        <div class="session-head">
          <a class="back" href="#/">
            ‹ All sessions
          </a>
          <h1>{session.title || "Untitled"}</h1>
          <span class="meta">
            <span class="agent">{providerLabel(session.provider)}</span>
            <span class={`badge ${activity.tone}`}>{activity.text}</span>
            {session.worktree_baseline && (
              <span class="badge worktree">
                {discarded ? "worktree discarded" : "worktree"} · {session.worktree_baseline.display}
              </span>
            )}
            {session.owner && <OwnerBadge owner={session.owner} />}
            <ContextMeter session={session} />
          </span>
          {session.forked_from && <LineageNote from={session.forked_from} />}
          <div class="session-tools">
            {checkpoints && (
              <button type="button" class="link" onClick={() => review.showChanges(null)}>
                All changes
              </button>
            )}
            {checkpoints && (
              <button type="button" class="link" onClick={() => review.rewind({ toTurn: 0 }, true)}>
                Rewind to start
              </button>
            )}
            <button type="button" class="link" onClick={() => review.fork(null)}>
              Fork session
            </button>
          </div>
          <button type="button" class="settings-toggle" aria-expanded={showSettings} onClick={() => setShowSettings(!showSettings)}>
            Settings
          </button>
          <div class={`head-more ${showSettings ? "open" : ""}`}>
            <Settings session={session} onError={setNotice} />
            <div class="head-actions">
              {session.worktree_path && !discarded && (
                <button type="button" onClick={() => void discard()} disabled={running}>
                  Discard worktree
                </button>
              )}
              <button type="button" class="danger" onClick={() => void remove()}>
                Delete session
              </button>
            </div>
          </div>
          {(notice || error) && (
            <p role="alert" class="error">
              {notice ?? error}
            </p>
          )}
          {state?.kind === "failed" && <p class="error">The last turn failed: {state.message}</p>}
        </div>
        <div
          class="scroller"
          ref={scroller}
          onScroll={(e) => {
            const el = e.currentTarget;
            const atEnd = el.scrollHeight - el.scrollTop - el.clientHeight < 40;
            // Only the reader scrolling up stops the following. The event of our own scroll
            // to the end can arrive after a tall block (a plan, a tool call) was added below:
            // measured then, that scroll would read as far from the end.
            stick.current = atEnd || (stick.current && el.scrollTop >= followedTo.current - 1);
          }}
          onWheel={(e) => {
            if (e.deltaY < 0) nearTop();
          }}
          onTouchMove={nearTop}
          onKeyUp={(e) => {
            if (["ArrowUp", "PageUp", "Home"].includes(e.key)) nearTop();
          }}
        >
          <section aria-label="Conversation" class="conversation">
            {jumped && (
              <p class="jumped" role="note">
                Showing an earlier part of this conversation. <a href={sessionHref(id)}>Back to latest</a>
              </p>
            )}
            {model.nextBefore !== null && (
              <button type="button" class="earlier" onClick={() => void older()}>
                Load earlier messages
              </button>
            )}
            {model.loaded && model.turns.length === 0 && <p class="muted">No messages yet: say something below.</p>}
            <OlderTurns turns={model.turns.slice(0, -1)} numbers={numbers.slice(0, -1)} hit={hit} />
            {last >= 0 && (
              <TurnView
                key={model.turns[last]?.userSeq ?? "preamble"}
                turn={model.turns[last] as Turn}
                number={numbers[last] ?? null}
                live={running && !jumped}
                newest={!jumped}
                hit={hit !== null && holdsSeq(model.turns[last] as Turn, hit)}
              />
            )}
            {running && <p class="working muted">{state?.kind === "awaiting_input" ? "Waiting for your answer…" : "Working…"}</p>}
          </section>
        </div>
        {pending.map((p) => (
          <PermissionCard key={p.input_id} session={id} pending={p} />
        ))}
        {overlays}
        <QueuePanel session={id} queue={queue} />
        <Composer
          session={session}
          running={running}
          queue={queue}
          onSent={(rid, text) => {
            sentPrompts.set(rid, text);
            if (jumped) location.hash = sessionHref(id); // a new turn is seen in the live view
          }}
        />
      </div>
    </ReviewContext.Provider>
  );
}
