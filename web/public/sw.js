// c2's service worker (served by c2 at /sw.js, scope /): shows a notification for each Web
// Push c2 sends and closes it again when c2 withdraws it (the input was answered elsewhere).
// Payload (README "Web Push"): {type, session, session_title, title, tool_kind, tag}, where
// type is permission_request | turn_ended | withdrawn and tag is the same for a notification
// and its withdrawal. No credential lives here and no page content is fetched: the payload
// carries ids, titles and kinds only, and a click opens the session in the app.
"use strict";

const HEADINGS = {
  permission_request: "Needs you",
  turn_ended: "Turn finished",
};

function readPayload(event) {
  try {
    return event.data ? event.data.json() : {};
  } catch {
    return {};
  }
}

async function handlePush(data) {
  const tag = typeof data.tag === "string" && data.tag ? data.tag : undefined;
  if (data.type === "withdrawn") {
    const shown = await self.registration.getNotifications(tag ? { tag } : {});
    for (const notification of shown) notification.close();
    return;
  }
  const heading = HEADINGS[data.type] || "c2";
  const session = data.session_title || "A session";
  const lines = [data.title, data.tool_kind ? `(${data.tool_kind})` : ""].filter(Boolean).join(" ");
  await self.registration.showNotification(`${heading}: ${session}`, {
    body: lines,
    tag,
    renotify: tag !== undefined,
    requireInteraction: data.type === "permission_request",
    data: { session: typeof data.session === "string" ? data.session : null },
  });
}

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (event) => event.waitUntil(self.clients.claim()));
self.addEventListener("push", (event) => event.waitUntil(handlePush(readPayload(event))));

self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const session = event.notification.data && event.notification.data.session;
  const url = new URL(session ? `/#/s/${encodeURIComponent(session)}` : "/", self.location.origin).href;
  event.waitUntil(
    (async () => {
      const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
      const open = windows.find((client) => new URL(client.url).origin === self.location.origin);
      if (open) {
        try {
          await open.focus();
          await open.navigate(url); // only a page this worker controls can be navigated
          return;
        } catch {
          /* fall through: open a new window */
        }
      }
      await self.clients.openWindow(url);
    })(),
  );
});
