/** Preact glue: subscribe a component to an Observable, and the hash route. */
import { useEffect, useState } from "preact/hooks";
import type { Observable } from "./app.js";

export function useStore<T>(store: Observable<T>): T {
  const rendered = store.value;
  const [, setTick] = useState(0);
  useEffect(() => {
    const unsubscribe = store.subscribe(() => setTick((n) => n + 1));
    // Effects run after paint: a change that landed between this render and the subscription
    // (the welcome frame arriving just as a page first draws) would otherwise never be shown.
    if (store.value !== rendered) setTick((n) => n + 1);
    return unsubscribe;
  }, [store]);
  return rendered;
}

/** Where a search hit points: the transcript page (`before`, null = newest) and its row. */
export interface HitTarget {
  before: number | null;
  seq: number;
}

export type Route =
  | { page: "home" }
  | { page: "session"; id: string; at: HitTarget | null }
  | { page: "devices" }
  | { page: "webhooks" }
  | { page: "usage" }
  | { page: "instances" }
  | { page: "search"; q: string };

function intOrNull(value: string | null): number | null {
  return value !== null && /^\d+$/.test(value) ? Number(value) : null;
}

export function parseRoute(hash: string): Route {
  const session = /^#\/s\/([^/?#]+)(?:\?(.*))?$/.exec(hash);
  if (session?.[1]) {
    const query = new URLSearchParams(session[2] ?? "");
    const seq = intOrNull(query.get("seq"));
    const at = seq === null ? null : { before: intOrNull(query.get("before")), seq };
    return { page: "session", id: decodeURIComponent(session[1]), at };
  }
  if (hash === "#/devices") return { page: "devices" };
  if (hash === "#/webhooks") return { page: "webhooks" };
  if (hash === "#/usage") return { page: "usage" };
  if (hash === "#/instances") return { page: "instances" };
  const search = /^#\/search(?:\?(.*))?$/.exec(hash);
  if (search) return { page: "search", q: new URLSearchParams(search[1] ?? "").get("q") ?? "" };
  return { page: "home" };
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.hash));
    window.addEventListener("hashchange", update);
    return () => window.removeEventListener("hashchange", update);
  }, []);
  return route;
}

export function sessionHref(id: string, at: HitTarget | null = null): string {
  const base = `#/s/${encodeURIComponent(id)}`;
  if (at === null) return base;
  const query = new URLSearchParams({ seq: String(at.seq) });
  if (at.before !== null) query.set("before", String(at.before));
  return `${base}?${query.toString()}`;
}

export function searchHref(q: string): string {
  return `#/search?${new URLSearchParams({ q }).toString()}`;
}

/** A fresh id for an op's `request_id` (idempotent retries, event correlation). */
export function requestId(): string {
  return crypto.randomUUID();
}
