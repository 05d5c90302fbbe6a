/**
 * Search across every session (issue 15): the "Search" box of the navigation and the results
 * page. A hit links to its session at the transcript page that holds it (`before`) and names
 * its row (`seq`), which the conversation highlights.
 *
 * Snippets are plain text with matches wrapped in literal `<mark>…</mark>` and nothing else
 * escaped, so they are split on those tags into text nodes: never parsed as HTML.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { sessions } from "../app.js";
import { search } from "../c2/generated/sdk.gen.js";
import type { SearchHit } from "../c2/generated/types.gen.js";
import { problemMessage } from "../errors.js";
import { searchHref, sessionHref, useStore } from "../hooks.js";

/** The snippet as runs of text, `mark` where c2 wrapped a match. */
export function snippetRuns(snippet: string): { text: string; mark: boolean }[] {
  const runs: { text: string; mark: boolean }[] = [];
  let rest = snippet;
  while (rest.length > 0) {
    const open = rest.indexOf("<mark>");
    const close = open < 0 ? -1 : rest.indexOf("</mark>", open + 6);
    if (open < 0 || close < 0) {
      runs.push({ text: rest, mark: false });
      break;
    }
    if (open > 0) runs.push({ text: rest.slice(0, open), mark: false });
    runs.push({ text: rest.slice(open + 6, close), mark: true });
    rest = rest.slice(close + 7);
  }
  return runs;
}

const KIND_LABELS: Record<SearchHit["kind"], string> = {
  prompt: "prompt",
  text: "agent reply",
  thought: "thought",
  tool_call: "tool call",
  title: "title",
};

/** The search box; `focus`: take the keyboard (the search page opened with no words yet). */
export function SearchBox({ initial, focus }: { initial: string; focus: boolean }) {
  const [q, setQ] = useState(initial);
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => setQ(initial), [initial]);
  useEffect(() => {
    if (focus) input.current?.focus();
  }, [focus]);
  return (
    <form
      role="search"
      class="search-box"
      onSubmit={(event) => {
        event.preventDefault();
        if (q.trim() !== "") location.hash = searchHref(q.trim());
      }}
    >
      <input
        ref={input}
        type="text"
        aria-label="Search"
        placeholder="Search all sessions"
        enterkeyhint="search"
        autocomplete="off"
        value={q}
        onInput={(e) => setQ(e.currentTarget.value)}
      />
    </form>
  );
}

function HitView({ hit }: { hit: SearchHit }) {
  const list = useStore(sessions);
  const title = list.find((s) => s.id === hit.session)?.title || "Untitled";
  const href = hit.transcript_seq === null ? sessionHref(hit.session) : sessionHref(hit.session, { before: hit.before, seq: hit.transcript_seq });
  return (
    <li>
      <a href={href}>{title}</a> <span class="badge idle">{KIND_LABELS[hit.kind]}</span>
      <p class="snippet">
        {snippetRuns(hit.snippet).map((run) => (run.mark ? <mark>{run.text}</mark> : run.text))}
      </p>
    </li>
  );
}

export function SearchPage({ q }: { q: string }) {
  const [hits, setHits] = useState<SearchHit[] | null>(null);
  const [cursor, setCursor] = useState<string | null>(null);
  // The last page that could not be read, and why: the store may be busy or the network down
  // for a moment, so the same page can be asked again without typing the search anew.
  const [failure, setFailure] = useState<{ message: string; after: string | null } | null>(null);
  const load = async (after: string | null, shown: SearchHit[]) => {
    const result = await search({ query: { q, limit: 20, ...(after ? { cursor: after } : {}) } });
    if (result.data === undefined) {
      setFailure({ message: problemMessage(result.error), after });
      setHits(shown);
      return;
    }
    setFailure(null);
    setHits([...shown, ...result.data.hits]);
    setCursor(result.data.next_cursor);
  };
  useEffect(() => {
    setHits(null);
    setCursor(null);
    setFailure(null);
    if (q !== "") void load(null, []);
  }, [q]);
  return (
    <section class="search-results" aria-label="Search results">
      <h1>{q === "" ? "Search" : `Search: ${q}`}</h1>
      <p class="muted">Words must all occur; "a phrase", a OR b, -word and prefix* work too.</p>
      {failure && (
        <p role="alert" class="error">
          {failure.message}
        </p>
      )}
      {failure && hits !== null && (
        <button type="button" onClick={() => void load(failure.after, hits)}>
          Try again
        </button>
      )}
      {q === "" ? null : hits === null ? (
        <p class="muted">Searching…</p>
      ) : hits.length === 0 && failure === null ? (
        <p class="muted">Nothing found.</p>
      ) : (
        <ul>
          {hits.map((hit) => (
            <HitView key={`${hit.session}:${hit.transcript_seq ?? "title"}:${hit.kind}`} hit={hit} />
          ))}
        </ul>
      )}
      {cursor !== null && hits !== null && (
        <button type="button" onClick={() => void load(cursor, hits)}>
          More results
        </button>
      )}
    </section>
  );
}
