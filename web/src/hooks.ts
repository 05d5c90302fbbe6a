/** Preact glue: subscribe a component to an Observable, and the hash route. */
import { useEffect, useState } from "preact/hooks";
import type { Observable } from "./app.js";

export function useStore<T>(store: Observable<T>): T {
  const [, setTick] = useState(0);
  useEffect(() => store.subscribe(() => setTick((n) => n + 1)), [store]);
  return store.value;
}

export type Route = { page: "home" } | { page: "session"; id: string } | { page: "devices" };

export function parseRoute(hash: string): Route {
  const session = /^#\/s\/([^/?#]+)$/.exec(hash);
  if (session?.[1]) return { page: "session", id: decodeURIComponent(session[1]) };
  if (hash === "#/devices") return { page: "devices" };
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

export function sessionHref(id: string): string {
  return `#/s/${encodeURIComponent(id)}`;
}

/** A fresh id for an op's `request_id` (idempotent retries, event correlation). */
export function requestId(): string {
  return crypto.randomUUID();
}
