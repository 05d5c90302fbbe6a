/**
 * The cluster's live members (`GET /v1/instances`, issue 18), for the Instances page, the
 * owner badge of a session and the owner problems: an empty list when the server is not a
 * cluster member, null until first read. Instances are named by a short id and the host of
 * their advertised URL.
 */
import { Observable } from "./app.js";
import { listInstances } from "./c2/generated/sdk.gen.js";
import type { InstanceOut } from "./c2/generated/types.gen.js";

export const instances = new Observable<InstanceOut[] | null>(null);

/** Read the members again; the failed request's problem body (undefined when it worked). */
export async function refreshInstances(): Promise<{ error: unknown } | undefined> {
  const result = await listInstances();
  if (result.data === undefined) return { error: result.error };
  instances.set(result.data.instances);
  return undefined;
}

export function shortId(id: string): string {
  return id.slice(0, 8);
}

export function urlHost(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return url;
  }
}

/** "1a2b3c4d (host-a:4599)" for a live member, else the short id alone. */
export function instanceName(id: string): string {
  const member = instances.value?.find((i) => i.id === id);
  return member ? `${shortId(id)} (${urlHost(member.url)})` : shortId(id);
}

/** Whether `id` is known gone: the list was read and does not hold it. */
export function instanceGone(id: string): boolean {
  const list = instances.value;
  return list !== null && !list.some((i) => i.id === id);
}
