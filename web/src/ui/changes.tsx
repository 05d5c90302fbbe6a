/**
 * What a turn — or the whole session — changed in the working tree: the "Changes" dialog
 * (`GET …/turns/{n}/diff`, `GET …/diff`).
 *
 * Diff text is untrusted (it is file content): it is split into lines and each line lands in
 * a text node of its own element; nothing is parsed as HTML. A long file shows its first
 * LINE_LIMIT lines until "Show all" is pressed, so a 1 MiB answer does not build tens of
 * thousands of nodes before anyone asked for them.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { sessionDiff, turnDiff } from "../c2/generated/sdk.gen.js";
import type { DiffResult, FileChange } from "../c2/generated/types.gen.js";
import { problemMessage } from "../errors.js";

const LINE_LIMIT = 800;
// git's own header lines: the file row above already says what they say.
const HEADER = /^(diff --git |index |--- |\+\+\+ |rename from |rename to |(new|deleted) file mode 100644$)/;

type Line = { text: string; tone: "add" | "del" | "hunk" | "meta" | "ctx" };

/** The lines of one file's unified diff, each with its colour. */
export function diffLines(text: string): Line[] {
  const lines: Line[] = [];
  let inHunk = false;
  for (const line of (text.endsWith("\n") ? text.slice(0, -1) : text).split("\n")) {
    if (line.startsWith("diff --git ")) inHunk = false;
    if (line.startsWith("@@")) {
      inHunk = true;
      lines.push({ text: line, tone: "hunk" });
    } else if (!inHunk) {
      if (line !== "" && !HEADER.test(line)) lines.push({ text: line, tone: "meta" });
    } else if (line.startsWith("+")) lines.push({ text: line, tone: "add" });
    else if (line.startsWith("-")) lines.push({ text: line, tone: "del" });
    else lines.push({ text: line, tone: line.startsWith("\\") ? "meta" : "ctx" });
  }
  return lines;
}

function DiffText({ path, text }: { path: string; text: string }) {
  const [all, setAll] = useState(false);
  const lines = diffLines(text);
  if (lines.length === 0) return null;
  const shown = all ? lines : lines.slice(0, LINE_LIMIT);
  return (
    <>
      <pre class="diff" aria-label={`Diff of ${path}`}>
        {shown.map((line) => (
          <span class={line.tone}>{line.text || " "}</span>
        ))}
      </pre>
      {shown.length < lines.length && (
        <button type="button" class="link" onClick={() => setAll(true)}>
          Show all {lines.length} lines
        </button>
      )}
    </>
  );
}

function FileView({ file }: { file: FileChange }) {
  return (
    <li class="file">
      <details open>
        <summary>
          <span class={`badge st-${file.status.replace(/[^a-z]/g, "")}`}>{file.status}</span>{" "}
          <span class="path">{file.old_path ? `${file.old_path} → ${file.path}` : file.path}</span>
          {file.binary && <span class="badge">binary</span>}
          {file.truncated && <span class="badge warn">cut short</span>}
        </summary>
        {file.binary ? <p class="muted">Binary file: no text diff.</p> : <DiffText path={file.path} text={file.diff} />}
        {file.truncated && <p class="muted">This file's diff was cut short (256 KiB per file, 1 MiB in all).</p>}
      </details>
    </li>
  );
}

function count(files: FileChange[]): string {
  const by = new Map<string, number>();
  for (const file of files) by.set(file.status, (by.get(file.status) ?? 0) + 1);
  return [...by].map(([status, n]) => `${n} ${status}`).join(", ");
}

export function DiffBody({ diff }: { diff: DiffResult }) {
  const files = diff.files;
  return (
    <>
      {diff.running && (
        <p class="so-far" role="note">
          {diff.turn === null ? "A turn is running: this includes its changes so far." : "This turn is still running: these are its changes so far."}
        </p>
      )}
      {diff.truncated && (
        <p class="so-far" role="note">
          The diff is larger than c2 sends (1 MiB): some files show only part of it, or none.
        </p>
      )}
      <p class="muted">{files.length === 0 ? "No files changed." : `${files.length} ${files.length === 1 ? "file" : "files"} changed: ${count(files)}`}</p>
      <ul class="files">
        {files.map((file) => (
          <FileView key={`${file.old_path ?? ""}>${file.path}`} file={file} />
        ))}
      </ul>
    </>
  );
}

/** The modal diff of turn `turn` (null: everything since the session's baseline). */
export function ChangesDialog({ session, turn, onClose }: { session: string; turn: number | null; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [diff, setDiff] = useState<DiffResult | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const load = async () => {
    setLoading(true);
    const result =
      turn === null ? await sessionDiff({ path: { session_id: session } }) : await turnDiff({ path: { session_id: session, turn } });
    setLoading(false);
    if (result.data === undefined) setError(problemMessage(result.error));
    else {
      setError(null);
      setDiff(result.data);
    }
  };
  useEffect(() => {
    dialog.current?.showModal();
    void load();
  }, []);
  const title = turn === null ? "All changes" : `Changes of turn ${turn}${diff?.running ? " so far" : ""}`;
  return (
    <dialog ref={dialog} aria-labelledby="changes-title" class="changes" onClose={onClose}>
      <div class="changes-head">
        <h2 id="changes-title">{title}</h2>
        <button type="button" onClick={() => void load()} disabled={loading}>
          Refresh
        </button>
        <button type="button" onClick={() => dialog.current?.close()}>
          Close
        </button>
      </div>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {diff === null ? !error && <p class="muted">Loading…</p> : <DiffBody diff={diff} />}
    </dialog>
  );
}
