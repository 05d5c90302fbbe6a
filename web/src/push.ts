/**
 * Web Push for this browser (issue 15): register the service worker (/sw.js, which shows and
 * withdraws notifications), and subscribe or unsubscribe with c2's VAPID key.
 *
 * The id c2 gave the subscription is kept in localStorage so "Disable notifications" can
 * delete exactly this browser's subscription; the page asks c2 whether it still exists.
 */
import { createPushSubscription, deletePushSubscription, getVapidPublicKey, listPushSubscriptions } from "./c2/generated/sdk.gen.js";
import type { PushSubscriptionIn } from "./c2/generated/types.gen.js";
import { problemMessage } from "./errors.js";

const SUBSCRIPTION_KEY = "c2.push-subscription";

export function pushSupported(): boolean {
  return "serviceWorker" in navigator && "PushManager" in window && "Notification" in window;
}

/** Register the worker (idempotent); null where service workers are unavailable. */
export async function registerWorker(): Promise<ServiceWorkerRegistration | null> {
  if (!("serviceWorker" in navigator)) return null;
  await navigator.serviceWorker.register("/sw.js", { scope: "/" });
  return navigator.serviceWorker.ready;
}

function keyBytes(base64url: string): Uint8Array<ArrayBuffer> {
  const base64 = base64url.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (base64url.length % 4)) % 4);
  const raw = atob(base64);
  const bytes = new Uint8Array(new ArrayBuffer(raw.length));
  for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  return bytes;
}

/** Whether this browser holds a subscription c2 still lists, or an error sentence when c2 could
 * not say (shown, not read as "off": the subscription may well be there). */
export async function notificationsEnabled(): Promise<boolean | string> {
  const id = localStorage.getItem(SUBSCRIPTION_KEY);
  if (id === null) return false;
  const listed = await listPushSubscriptions();
  if (listed.data === undefined) return problemMessage(listed.error);
  return listed.data.subscriptions.some((s) => s.id === id);
}

/** Ask permission, subscribe with the VAPID key, give c2 the subscription. Returns an error
 * sentence, or null once enabled. */
export async function enableNotifications(): Promise<string | null> {
  if (!pushSupported()) return "This browser cannot show notifications from c2.";
  const permission = await Notification.requestPermission();
  if (permission !== "granted") return "Notifications are blocked for this site: allow them in the browser's settings.";
  const registration = await registerWorker();
  if (registration === null) return "This browser cannot show notifications from c2.";
  const key = await getVapidPublicKey();
  if (key.data === undefined) return problemMessage(key.error);
  let subscription: PushSubscription;
  try {
    subscription = await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(key.data.public_key) });
  } catch (error) {
    return `The browser's push service refused the subscription (${String(error)}).`;
  }
  const created = await createPushSubscription({ body: subscription.toJSON() as PushSubscriptionIn });
  if (created.data === undefined) return problemMessage(created.error);
  localStorage.setItem(SUBSCRIPTION_KEY, created.data.id);
  return null;
}

/** Delete this browser's subscription at c2 and at the push service. */
export async function disableNotifications(): Promise<string | null> {
  const id = localStorage.getItem(SUBSCRIPTION_KEY);
  if (id !== null) {
    const deleted = await deletePushSubscription({ path: { subscription_id: id } });
    if (deleted.error !== undefined && deleted.response?.status !== 404) return problemMessage(deleted.error);
    localStorage.removeItem(SUBSCRIPTION_KEY);
  }
  const registration = "serviceWorker" in navigator ? await navigator.serviceWorker.getRegistration("/") : undefined;
  await (await registration?.pushManager.getSubscription())?.unsubscribe();
  return null;
}
