/**
 * Entry point: redeem a pairing token if the address bar carries one, then render the app —
 * the pairing screen without a credential, else the shell (header, sessions, pages).
 */
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { connection, credential, redeemPairing, sessions, startStream, stopStream } from "./app.js";
import { useRoute, useStore, sessionHref } from "./hooks.js";
import { registerWorker } from "./push.js";
import { instances, refreshInstances } from "./instances.js";
import { DevicesPage } from "./ui/devices.js";
import { InstancesPage } from "./ui/instances.js";
import { SearchBox, SearchPage } from "./ui/search.js";
import { UsagePage } from "./ui/usage.js";
import { WebhooksPage } from "./ui/webhooks.js";
import { NewSessionButton, SessionList } from "./ui/sessions.js";
import { SessionPage } from "./ui/session.js";
import "./style.css";

const CONNECTION_TEXT = {
  connecting: "Connecting…",
  open: "Connected",
  reconnecting: "Reconnecting…",
  closed: "Offline",
} as const;

function ConnectionStatus() {
  const state = useStore(connection);
  return (
    <span role="status" aria-label="Connection" class={`conn conn-${state}`}>
      {CONNECTION_TEXT[state]}
    </span>
  );
}

/** A "needs you" link to the oldest parked permission, shown on every page. */
function NeedsYou({ current }: { current: string | null }) {
  const list = useStore(sessions);
  const waiting = list
    .flatMap((s) => (s.activity.state?.kind === "awaiting_input" ? s.activity.state.pending.map((p) => ({ s, p })) : []))
    .sort((a, b) => a.p.sequence - b.p.sequence);
  const first = waiting.find((w) => w.s.id !== current);
  if (first === undefined) return null;
  return (
    <a class="badge needs" href={sessionHref(first.s.id)}>
      {waiting.length} needs you
    </a>
  );
}

function Shell() {
  const route = useRoute();
  // In a cluster (any live member listed) the header links the Instances page.
  const clustered = (useStore(instances)?.length ?? 0) > 0;
  useEffect(() => {
    startStream();
    void refreshInstances();
    // The worker shows push notifications and opens a session on a click (push.ts).
    registerWorker().catch(() => undefined);
    return stopStream;
  }, []);
  const current = route.page === "session" ? route.id : null;
  return (
    <div class={`shell page-${route.page}`}>
      <header class="top">
        <a class="brand" href="#/">
          c2
        </a>
        <ConnectionStatus />
        <NeedsYou current={current} />
        <span class="spacer" />
        {/* Phones show the search box only on the home and search pages: elsewhere, a link to it. */}
        <a class="to-search" href="#/search">
          Search
        </a>
        <a href="#/devices">Devices</a>
        <a href="#/usage">Usage</a>
        <a href="#/webhooks">Webhooks</a>
        {clustered && <a href="#/instances">Instances</a>}
        <NewSessionButton />
      </header>
      <aside class="side">
        <SearchBox
          initial={route.page === "search" ? route.q : ""}
          focus={route.page === "search" && route.q === ""}
        />
        <SessionList current={current} />
      </aside>
      <main class="main">
        {route.page === "session" ? (
          <SessionPage key={`${route.id}:${route.at?.seq ?? ""}`} id={route.id} at={route.at} />
        ) : route.page === "devices" ? (
          <DevicesPage />
        ) : route.page === "usage" ? (
          <UsagePage />
        ) : route.page === "webhooks" ? (
          <WebhooksPage />
        ) : route.page === "instances" ? (
          <InstancesPage />
        ) : route.page === "search" ? (
          <SearchPage q={route.q} />
        ) : (
          <div class="empty">
            <p>Pick a session, or start one with “New session”.</p>
          </div>
        )}
      </main>
    </div>
  );
}

function PairingScreen({ error }: { error: string | null }) {
  return (
    <main class="pairing">
      <h1>Pair this browser with c2</h1>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <p>This browser holds no c2 credential yet. To pair it:</p>
      <ol>
        <li>
          On the machine running c2, start it with <code>c2 serve</code>: it prints a one-time pairing URL
          (<code>http://…/pair#token=…</code>, valid 15 minutes).
        </li>
        <li>
          Or mint a fresh one for a running server with <code>c2 pair-url</code>.
        </li>
        <li>Open that URL in this browser. It pairs once, automatically, and brings you here.</li>
      </ol>
    </main>
  );
}

function Root() {
  const current = useStore(credential);
  const [pairing, setPairing] = useState<{ busy: boolean; error: string | null }>({ busy: true, error: null });
  useEffect(() => {
    redeemPairing().then(
      (error) => setPairing({ busy: false, error }),
      () => setPairing({ busy: false, error: "c2 could not be reached to pair: check the address and try again." }),
    );
  }, []);
  if (pairing.busy) return <p class="loading">Pairing…</p>;
  if (current === null) return <PairingScreen error={pairing.error} />;
  return <Shell key={current.device_id} />;
}

render(<Root />, document.getElementById("app") as HTMLElement);
