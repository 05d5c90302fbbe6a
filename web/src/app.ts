/**
 * The app's connection to c2: the stored credential, the generated client configured with it,
 * one typed event stream per tab, and the live session list that stream keeps current.
 *
 * The credential lives in localStorage (shared by the tabs of this origin), never in a URL.
 * A 401 anywhere (revoked device) forgets it and returns to the pairing screen. Session
 * snapshots merge by activity revision so a late list never rolls state backwards.
 */
import { C2EventStream, type ConnectionState } from "./c2/events.js";
import { client } from "./c2/generated/client.gen.js";
import { createStreamTicket, getSession, listSessions, pair } from "./c2/generated/sdk.gen.js";
import type { SessionSnapshot, StreamEvent, StreamFrame } from "./c2/generated/types.gen.js";

const CREDENTIAL_KEY = "c2.credential";

export interface Credential {
  device_id: string;
  bearer: string;
}

type Listener = () => void;

/** A tiny observable value for Preact components (`useStore`). */
export class Observable<T> {
  private listeners = new Set<Listener>();
  constructor(private current: T) {}
  get value(): T {
    return this.current;
  }
  set(next: T): void {
    if (next === this.current) return;
    this.current = next;
    for (const listener of [...this.listeners]) listener();
  }
  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

export function loadCredential(): Credential | null {
  try {
    const raw = localStorage.getItem(CREDENTIAL_KEY);
    const parsed = raw === null ? null : (JSON.parse(raw) as Partial<Credential>);
    if (parsed && typeof parsed.bearer === "string" && typeof parsed.device_id === "string") {
      return { device_id: parsed.device_id, bearer: parsed.bearer };
    }
  } catch {
    /* unreadable: treat as unpaired */
  }
  return null;
}

export const credential = new Observable<Credential | null>(loadCredential());

function saveCredential(value: Credential | null): void {
  if (value === null) localStorage.removeItem(CREDENTIAL_KEY);
  else localStorage.setItem(CREDENTIAL_KEY, JSON.stringify(value));
  credential.set(value);
}

// Another tab paired or was revoked: follow it.
window.addEventListener("storage", (event) => {
  if (event.key === CREDENTIAL_KEY) credential.set(loadCredential());
});

client.setConfig({
  baseUrl: location.origin,
  auth: () => credential.value?.bearer,
});
// Any 401 from c2 means this device's bearer is gone (revoked): back to pairing.
client.interceptors.response.use((response) => {
  if (response.status === 401 && !response.url.endsWith("/v1/pair")) saveCredential(null);
  return response;
});

/** "Chrome on Android" and the like: the device name pairing records. */
export function browserName(agent = navigator.userAgent): string {
  const browser =
    /Edg\//.test(agent) ? "Edge" : /Firefox\//.test(agent) ? "Firefox" : /Chrom(e|ium)\//.test(agent) ? "Chrome" : /Safari\//.test(agent) ? "Safari" : "Browser";
  const os =
    /Android/.test(agent) ? "Android" : /iPhone|iPad/.test(agent) ? "iOS" : /Mac OS X/.test(agent) ? "macOS" : /Windows/.test(agent) ? "Windows" : /Linux/.test(agent) ? "Linux" : "";
  return os ? `${browser} on ${os}` : browser;
}

const PENDING_TOKEN_KEY = "c2.pairing-token";

/**
 * Redeem a pairing token from the address bar, once: the token leaves the URL at once (kept in
 * sessionStorage until redeemed, so a reload mid-request retries instead of losing it), a
 * device that already holds a credential never spends it, and a Web Lock stops two tabs
 * redeeming together. Returns an error message, or null when paired (or nothing to do).
 */
export async function redeemPairing(): Promise<string | null> {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const fromUrl = fragment.get("token");
  if (fromUrl !== null) {
    sessionStorage.setItem(PENDING_TOKEN_KEY, fromUrl);
    history.replaceState(null, "", "/");
  }
  const run = async (): Promise<string | null> => {
    const token = sessionStorage.getItem(PENDING_TOKEN_KEY);
    if (token === null) return null;
    const existing = loadCredential();
    if (existing !== null) {
      sessionStorage.removeItem(PENDING_TOKEN_KEY);
      credential.set(existing);
      return null;
    }
    const result = await pair({ body: { token, device_name: browserName() } });
    sessionStorage.removeItem(PENDING_TOKEN_KEY);
    if (result.data !== undefined) {
      saveCredential({ device_id: result.data.device_id, bearer: result.data.bearer });
      return null;
    }
    const status = result.response?.status;
    if (status === 429) return "Too many pairing attempts: wait a minute, then open the link again.";
    return "This pairing link was already used or has expired. Run `c2 pair-url` on the server for a new one.";
  };
  if ("locks" in navigator) return navigator.locks.request("c2-pairing", run);
  return run();
}

export function signOut(): void {
  saveCredential(null);
}

// -- live state ----------------------------------------------------------------------------

export const connection = new Observable<ConnectionState>("connecting");
export const sessions = new Observable<SessionSnapshot[]>([]);
/** Whether `sessions` holds every session: the welcome frame holds the newest page only. */
export const sessionsComplete = new Observable<boolean>(false);
/** The latest `usage` report per session (not part of the snapshot). */
export const usage = new Observable<Record<string, { input: number; output: number }>>({});
/** Bumped by a `resync`: views drop derived state and reload. */
export const epoch = new Observable<number>(0);

/**
 * Whether this tab's stream has had its welcome frame: from then on every event reaches the
 * `onEvent` listeners (a reconnect resumes after the last event). A fresh stream starts at the
 * log's head when the server takes it, so state read before then misses whatever happened
 * between the read and that start; views read through `whenLive`.
 */
export const streamLive = new Observable<boolean>(false);

/**
 * Call `read` once the stream is live (at once when it is); returns a canceller. A view
 * subscribes with `onEvent` first, then reads here, then applies what it buffered meanwhile.
 */
export function whenLive(read: () => void): () => void {
  if (streamLive.value) {
    read();
    return () => undefined;
  }
  const off = streamLive.subscribe(() => {
    if (!streamLive.value) return;
    off();
    read();
  });
  return off;
}

type EventListener = (event: StreamEvent) => void;
const eventListeners = new Set<EventListener>();

/** Every protocol event as it arrives; returns the unsubscribe function. */
export function onEvent(listener: EventListener): () => void {
  eventListeners.add(listener);
  return () => eventListeners.delete(listener);
}

function revisionOf(snapshot: SessionSnapshot): number {
  return snapshot.activity.revision ?? 0;
}

function sortNewestFirst(list: SessionSnapshot[]): SessionSnapshot[] {
  return [...list].sort((a, b) => (a.created_at < b.created_at ? 1 : a.created_at > b.created_at ? -1 : 0));
}

/** Put a snapshot in the list, unless the list holds a newer activity revision. */
export function mergeSnapshot(snapshot: SessionSnapshot): void {
  mergeSnapshots([snapshot]);
}

/** Sessions deleted while this stream is open: a list page read before the delete must not
 * bring one back. */
const deleted = new Set<string>();

/** Merge many snapshots at once (a page of the list): one pass and one sort. */
function mergeSnapshots(snapshots: SessionSnapshot[]): void {
  const byId = new Map(sessions.value.map((s) => [s.id, s]));
  for (const snapshot of snapshots) {
    if (deleted.has(snapshot.id)) continue;
    const known = byId.get(snapshot.id);
    const activity = known !== undefined && revisionOf(known) > revisionOf(snapshot) ? known.activity : snapshot.activity;
    byId.set(snapshot.id, { ...snapshot, activity });
  }
  sessions.set(sortNewestFirst([...byId.values()]));
}

const LIST_PAGE = 200;
let listing = 0; // the generation of the list being paged in; a newer one stops an older

/** Page in the sessions the welcome frame did not hold, oldest pages last, merged by
 * revision (they are read after the frame, so they may be newer; never older). */
async function loadRest(cursor: string | null): Promise<void> {
  const mine = ++listing;
  sessionsComplete.set(cursor === null);
  let failures = 0;
  while (cursor !== null) {
    const page = await listSessions({ query: { cursor, limit: LIST_PAGE } });
    if (mine !== listing) return;
    if (page.data === undefined) {
      if (++failures >= 3) break; // show what is there; a reconnect starts over
      await new Promise((resolve) => setTimeout(resolve, 500 * failures));
      continue;
    }
    mergeSnapshots(page.data.sessions);
    cursor = page.data.next_cursor;
  }
  if (mine === listing) sessionsComplete.set(true);
}

function patch(id: string, change: (s: SessionSnapshot) => SessionSnapshot): void {
  const list = sessions.value;
  if (!list.some((s) => s.id === id)) return;
  sessions.set(list.map((s) => (s.id === id ? change(s) : s)));
}

async function refreshSession(id: string): Promise<void> {
  const result = await getSession({ path: { session_id: id } });
  if (result.data !== undefined) mergeSnapshot(result.data);
}

function applyEvent(event: StreamEvent): void {
  switch (event.event) {
    case "session_created":
      void refreshSession(event.session);
      break;
    case "session_deleted":
      deleted.add(event.session);
      sessions.set(sessions.value.filter((s) => s.id !== event.session));
      break;
    case "session_title_changed":
      patch(event.session, (s) => ({ ...s, title: event.title }));
      break;
    case "session_activity_changed":
      patch(event.session, (s) => (revisionOf(s) > (event.activity.revision ?? 0) ? s : { ...s, activity: event.activity }));
      break;
    case "models":
      patch(event.session, (s) => ({ ...s, models: { available: event.available, current: event.current }, model: event.current }));
      break;
    case "usage":
      usage.set({ ...usage.value, [event.session]: { input: event.input_tokens, output: event.output_tokens } });
      break;
    case "modes":
      patch(event.session, (s) => ({ ...s, modes: { available: event.available, current: event.current } }));
      break;
    case "config_options":
      patch(event.session, (s) => ({ ...s, config_options: event.options }));
      break;
    case "execution_policy_changed":
      patch(event.session, (s) => ({ ...s, policy: event.policy }));
      break;
    case "worktree_discarded":
      patch(event.session, (s) => ({ ...s, worktree_discarded: true }));
      break;
    case "context_window":
      patch(event.session, (s) => ({ ...s, context_window: { used_tokens: event.used_tokens, context_window: event.context_window } }));
      break;
    default:
      break;
  }
}

function dispatch(frame: StreamFrame): void {
  if (frame.kind === "sessions") {
    deleted.clear();
    sessions.set(sortNewestFirst(frame.sessions));
    void loadRest(frame.next_cursor);
    streamLive.set(true);
  } else if (frame.kind === "resync") {
    epoch.set(epoch.value + 1);
  } else if (frame.kind === "event") {
    applyEvent(frame.event);
    for (const listener of [...eventListeners]) listener(frame.event);
  }
}

let stream: C2EventStream | null = null;

/** Open this tab's event stream (once per credential); it reconnects by itself. */
export function startStream(): void {
  if (stream !== null) return;
  const current = new C2EventStream({
    baseUrl: location.origin,
    retryDelayMs: 250,
    maxRetryDelayMs: 2000,
    onState: (state) => connection.set(state),
    mintTicket: async () => {
      const minted = await createStreamTicket();
      if (minted.data === undefined) throw new Error(`no stream ticket (${minted.response?.status ?? "network"})`);
      return minted.data.ticket;
    },
  });
  stream = current;
  void (async () => {
    try {
      for await (const frame of current) dispatch(frame);
    } catch {
      // 4xx on the stream: the bearer is gone (revoked) or refused; pairing takes over.
      if (stream === current) signOut();
    }
  })();
}

export function stopStream(): void {
  stream?.close();
  stream = null;
  streamLive.set(false);
  listing++;
  sessions.set([]);
  sessionsComplete.set(false);
}
