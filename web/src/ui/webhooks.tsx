/**
 * The Webhooks page (admin, issue 15): list, add (URL, events, secret), enable or disable,
 * delete, and each webhook's delivery log. The secret is write-only: c2 never shows it again.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { createWebhook, deleteWebhook, listWebhookDeliveries, listWebhooks, updateWebhook } from "../c2/generated/sdk.gen.js";
import type { DeliveryOut, WebhookOut } from "../c2/generated/types.gen.js";
import { problemMessage } from "../errors.js";
import { requestId } from "../hooks.js";

/** The events a webhook may subscribe to (core/notify/payloads.py WEBHOOK_EVENTS). */
const EVENTS = [
  "permission_request",
  "permission_resolved",
  "turn_started",
  "turn_ended",
  "error",
  "budget_exceeded",
  "session_created",
  "session_deleted",
  "session_title_changed",
  "webhook_disabled",
];

function when(stamp: string | null | undefined): string {
  return stamp ? new Date(stamp).toLocaleString() : "—";
}

function Deliveries({ webhook }: { webhook: WebhookOut }) {
  const [rows, setRows] = useState<DeliveryOut[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    void listWebhookDeliveries({ path: { webhook_id: webhook.id }, query: { limit: 50 } }).then((result) => {
      if (result.data === undefined) setError(problemMessage(result.error));
      else setRows(result.data.deliveries);
    });
  }, [webhook.id]);
  if (error) return <p class="error">{error}</p>;
  if (rows === null) return <p class="muted">Loading…</p>;
  if (rows.length === 0) return <p class="muted">No deliveries yet.</p>;
  return (
    <table aria-label={`Deliveries of ${webhook.url}`} class="deliveries">
      <thead>
        <tr>
          <th>Event</th>
          <th>State</th>
          <th>Attempts</th>
          <th>Last status</th>
          <th>Delivered</th>
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => (
          <tr key={row.delivery_id}>
            <td>{row.event}</td>
            <td>{row.state}</td>
            <td>{row.attempts}</td>
            <td>{row.last_status ?? "—"}</td>
            <td>{when(row.delivered_at)}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}

function AddWebhook({ onAdded }: { onAdded: () => void }) {
  const [url, setUrl] = useState("");
  const [secret, setSecret] = useState("");
  const [events, setEvents] = useState<string[]>(["permission_request", "turn_ended", "error"]);
  const [content, setContent] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const rid = useRef(requestId());
  const submit = async (event: Event) => {
    event.preventDefault();
    const result = await createWebhook({ body: { url: url.trim(), secret, events, include_content: content, request_id: rid.current } });
    if (result.data === undefined) {
      setError(problemMessage(result.error));
      return;
    }
    rid.current = requestId();
    setError(null);
    setUrl("");
    setSecret("");
    onAdded();
  };
  return (
    <form class="add-webhook" aria-label="Add a webhook" onSubmit={submit}>
      <h2>Add a webhook</h2>
      <label>
        URL
        <input type="url" required value={url} placeholder="https://example.com/c2-hook" onInput={(e) => setUrl(e.currentTarget.value)} />
      </label>
      <fieldset>
        <legend>Events</legend>
        {EVENTS.map((name) => (
          <label class="check" key={name}>
            <input
              type="checkbox"
              checked={events.includes(name)}
              onChange={(e) => setEvents(e.currentTarget.checked ? [...events, name] : events.filter((n) => n !== name))}
            />
            {name}
          </label>
        ))}
      </fieldset>
      <label>
        Secret
        <input type="password" required autocomplete="off" value={secret} onInput={(e) => setSecret(e.currentTarget.value)} />
      </label>
      <label class="check">
        <input type="checkbox" checked={content} onChange={(e) => setContent(e.currentTarget.checked)} />
        Include transcript content
      </label>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      <button type="submit" class="primary" disabled={events.length === 0}>
        Add webhook
      </button>
    </form>
  );
}

export function WebhooksPage() {
  const [hooks, setHooks] = useState<WebhookOut[] | null>(null);
  const [open, setOpen] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = async () => {
    const result = await listWebhooks();
    if (result.data === undefined) setError(problemMessage(result.error));
    else setHooks(result.data.webhooks);
  };
  useEffect(() => void load(), []);
  const toggle = async (hook: WebhookOut) => {
    const result = await updateWebhook({ path: { webhook_id: hook.id }, body: { enabled: !hook.enabled } });
    if (result.data === undefined) setError(problemMessage(result.error));
    else await load();
  };
  const remove = async (hook: WebhookOut) => {
    if (!confirm(`Delete the webhook to ${hook.url}? Its pending deliveries are dropped.`)) return;
    const result = await deleteWebhook({ path: { webhook_id: hook.id } });
    if (result.error !== undefined) setError(problemMessage(result.error));
    else await load();
  };
  return (
    <div class="webhooks">
      <h1>Webhooks</h1>
      <p class="muted">c2 POSTs signed JSON to each URL for the chosen events (README “Webhooks”).</p>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {hooks === null ? (
        !error && <p class="muted">Loading…</p>
      ) : hooks.length === 0 ? (
        <p class="muted">No webhooks.</p>
      ) : (
        <ul aria-label="Webhooks">
          {hooks.map((hook) => (
            <li key={hook.id}>
              <div>
                <strong>{hook.url}</strong> <span class={`badge ${hook.enabled ? "running" : "failed"}`}>{hook.enabled ? "enabled" : "disabled"}</span>
                <div class="muted">
                  {hook.events.join(", ")}
                  {hook.include_content && " · with content"}
                  {hook.failures > 0 && ` · ${hook.failures} failed attempts`}
                </div>
                {open === hook.id && <Deliveries webhook={hook} />}
              </div>
              <div class="actions">
                <button type="button" aria-expanded={open === hook.id} aria-label={`Deliveries of ${hook.url}`} onClick={() => setOpen(open === hook.id ? null : hook.id)}>
                  Deliveries
                </button>
                <button type="button" aria-label={`${hook.enabled ? "Disable" : "Enable"} ${hook.url}`} onClick={() => void toggle(hook)}>
                  {hook.enabled ? "Disable" : "Enable"}
                </button>
                <button type="button" class="danger" aria-label={`Delete ${hook.url}`} onClick={() => void remove(hook)}>
                  Delete
                </button>
              </div>
            </li>
          ))}
        </ul>
      )}
      <AddWebhook onAdded={() => void load()} />
    </div>
  );
}
