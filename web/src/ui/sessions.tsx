/** The live session list (navigation "Sessions") and the "New session" dialog. */
import { useEffect, useRef, useState } from "preact/hooks";
import { sessions } from "../app.js";
import { createSession, getWorktreeBaselines, listProviders } from "../c2/generated/sdk.gen.js";
import type {
  BaselineChoice,
  PermissionMode,
  ProviderInfo,
  SandboxPolicy,
  SessionSnapshot,
} from "../c2/generated/types.gen.js";
import { problemMessage } from "../errors.js";
import { requestId, sessionHref, useStore } from "../hooks.js";

export const MODES: [PermissionMode, string][] = [
  ["ask", "Ask before acting"],
  ["accept_edits", "Accept edits"],
  ["yolo", "Allow everything"],
];
export const SANDBOXES: [SandboxPolicy, string][] = [
  ["read_only", "Read only"],
  ["workspace_write", "Workspace write"],
  ["danger_full_access", "Full access"],
];

export function providerLabel(provider: SessionSnapshot["provider"]): string {
  return typeof provider === "string" ? provider : Object.values(provider)[0] ?? "custom";
}

export function activityLabel(session: SessionSnapshot): { text: string; tone: string } {
  const state = session.activity.state;
  switch (state?.kind) {
    case "running":
      return { text: "working", tone: "running" };
    case "awaiting_input":
      return { text: "needs you", tone: "needs" };
    case "failed":
      return { text: "failed", tone: "failed" };
    default:
      return { text: "idle", tone: "idle" };
  }
}

export function SessionList({ current }: { current: string | null }) {
  const list = useStore(sessions);
  return (
    <nav aria-label="Sessions" class="sessions">
      <h2>Sessions</h2>
      {list.length === 0 ? (
        <p class="muted">No sessions yet.</p>
      ) : (
        <ul>
          {list.map((session) => {
            const activity = activityLabel(session);
            return (
              <li key={session.id} class={session.id === current ? "current" : ""}>
                <a href={sessionHref(session.id)} aria-current={session.id === current ? "page" : undefined}>
                  {session.title || "Untitled"}
                </a>
                <span class="meta">
                  <span class="agent">{providerLabel(session.provider)}</span>
                  <span class={`badge ${activity.tone}`}>{activity.text}</span>
                  {session.worktree_path && !session.worktree_discarded && <span class="badge worktree">worktree</span>}
                </span>
              </li>
            );
          })}
        </ul>
      )}
    </nav>
  );
}

const FOLDER_KEY = "c2.last-folder";

function providerKey(id: ProviderInfo["id"]): string {
  return JSON.stringify(id);
}

function shortSha(choice: BaselineChoice): string {
  const resolved = choice.resolved;
  if (resolved === null) return choice.unavailable_reason ?? "unavailable";
  return `${resolved.display} (${resolved.sha.slice(0, 8)})`;
}

const BASE_LABELS: Record<string, string> = { current: "Current checkout", origin_default: "origin's default branch" };

function NewSessionDialog({ onClose }: { onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [providers, setProviders] = useState<ProviderInfo[] | null>(null);
  const [agent, setAgent] = useState("");
  const [folder, setFolder] = useState(() => localStorage.getItem(FOLDER_KEY) ?? "");
  const [worktree, setWorktree] = useState(false);
  const [baselines, setBaselines] = useState<BaselineChoice[] | null>(null);
  const [base, setBase] = useState<string>("current");
  const [mode, setMode] = useState<PermissionMode>("ask");
  const [sandbox, setSandbox] = useState<SandboxPolicy>("workspace_write");
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  const rid = useRef(requestId());

  useEffect(() => {
    dialog.current?.showModal();
    void listProviders().then((result) => {
      const list = result.data ?? [];
      setProviders(list);
      const first = list.find((p) => p.available);
      if (first) setAgent(providerKey(first.id));
      if (result.error !== undefined) setError(problemMessage(result.error));
    });
  }, []);

  useEffect(() => {
    if (!worktree || folder.trim() === "") {
      setBaselines(null);
      return;
    }
    let live = true;
    const timer = setTimeout(() => {
      void getWorktreeBaselines({ query: { cwd: folder.trim() } }).then((result) => {
        if (!live) return;
        if (result.data === undefined) {
          setBaselines([]);
          setError(problemMessage(result.error));
          return;
        }
        setError(null);
        setBaselines(result.data);
        const usable = result.data.find((c) => c.resolved !== null);
        if (usable) setBase(usable.kind);
      });
    }, 250);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [worktree, folder]);

  const chosenBaseline = baselines?.find((c) => c.kind === base)?.resolved ?? null;

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    const provider = JSON.parse(agent) as ProviderInfo["id"];
    const result = await createSession({
      body: {
        provider: provider as never,
        cwd: folder.trim(),
        use_worktree: worktree,
        ...(worktree ? { worktree_base: base as "current", worktree_base_sha: chosenBaseline?.sha ?? null } : {}),
        initial_policy: { mode, sandbox },
        request_id: rid.current,
      },
    });
    setBusy(false);
    if (result.data === undefined) {
      setError(problemMessage(result.error));
      if ((result.error as { code?: string } | undefined)?.code !== "request_id_reused") rid.current = requestId();
      return;
    }
    localStorage.setItem(FOLDER_KEY, folder.trim());
    sessions.set(sessions.value.some((s) => s.id === result.data.id) ? sessions.value : [result.data, ...sessions.value]);
    onClose();
    location.hash = sessionHref(result.data.id);
  };

  const worktreeBlocked = worktree && (baselines === null || chosenBaseline === null);
  return (
    <dialog ref={dialog} aria-labelledby="new-session-title" class="new-session" onClose={onClose}>
      <form onSubmit={submit}>
        <h2 id="new-session-title">New session</h2>
        <label>
          Agent
          <select value={agent} onChange={(e) => setAgent(e.currentTarget.value)} required>
            {providers === null && <option value="">Loading…</option>}
            {providers?.map((p) => (
              <option key={providerKey(p.id)} value={providerKey(p.id)} disabled={!p.available}>
                {p.available ? p.display_name : `${p.display_name} — unavailable: ${p.reason ?? "not installed"}`}
              </option>
            ))}
          </select>
        </label>
        <label>
          Folder
          <input
            type="text"
            value={folder}
            placeholder="/home/me/project"
            required
            autocomplete="off"
            spellcheck={false}
            onInput={(e) => setFolder(e.currentTarget.value)}
          />
        </label>
        <label class="check">
          <input type="checkbox" checked={worktree} onChange={(e) => setWorktree(e.currentTarget.checked)} />
          Use a git worktree
        </label>
        {worktree && (
          <fieldset role="radiogroup" aria-label="Start from">
            <legend>Start from</legend>
            {baselines === null ? (
              <p class="muted">{folder.trim() ? "Reading the repository…" : "Enter a git folder first."}</p>
            ) : (
              baselines.map((choice) => (
                <label class="check" key={choice.kind}>
                  <input
                    type="radio"
                    name="base"
                    value={choice.kind}
                    checked={base === choice.kind}
                    disabled={choice.resolved === null}
                    onChange={() => setBase(choice.kind)}
                  />
                  {BASE_LABELS[choice.kind] ?? choice.kind}: <span class="muted">{shortSha(choice)}</span>
                </label>
              ))
            )}
          </fieldset>
        )}
        <div class="row">
          <label>
            Initial approval
            <select value={mode} onChange={(e) => setMode(e.currentTarget.value as PermissionMode)}>
              {MODES.map(([value, label]) => (
                <option value={value}>{label}</option>
              ))}
            </select>
          </label>
          <label>
            Initial sandbox
            <select value={sandbox} onChange={(e) => setSandbox(e.currentTarget.value as SandboxPolicy)}>
              {SANDBOXES.map(([value, label]) => (
                <option value={value}>{label}</option>
              ))}
            </select>
          </label>
        </div>
        {error && (
          <p role="alert" class="error">
            {error}
          </p>
        )}
        <div class="actions">
          <button type="button" onClick={() => dialog.current?.close()}>
            Cancel
          </button>
          <button type="submit" class="primary" disabled={busy || agent === "" || worktreeBlocked}>
            Create
          </button>
        </div>
      </form>
    </dialog>
  );
}

export function NewSessionButton() {
  const [open, setOpen] = useState(false);
  return (
    <>
      <button type="button" class="primary" onClick={() => setOpen(true)}>
        New session
      </button>
      {open && <NewSessionDialog onClose={() => setOpen(false)} />}
    </>
  );
}
