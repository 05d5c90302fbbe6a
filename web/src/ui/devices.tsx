/**
 * The Devices page: paired devices, each revocable (revoking this one returns to pairing), and
 * this browser's notifications (Web Push) on or off.
 */
import { useEffect, useState } from "preact/hooks";
import { credential, signOut } from "../app.js";
import { listDevices, revokeDevice } from "../c2/generated/sdk.gen.js";
import type { DeviceOut } from "../c2/generated/types.gen.js";
import { problemMessage } from "../errors.js";
import { useStore } from "../hooks.js";
import { disableNotifications, enableNotifications, notificationsEnabled, pushSupported } from "../push.js";

function when(stamp: string | null | undefined): string {
  return stamp ? new Date(stamp).toLocaleString() : "never";
}

function Notifications() {
  const [enabled, setEnabled] = useState<boolean | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  // What c2 lists for this browser; a failed look is shown as an error, and the button offers
  // to enable (enabling again is idempotent: the same endpoint replaces its keys).
  const refresh = async (failed: string | null) => {
    const state = await notificationsEnabled();
    setError(failed ?? (typeof state === "string" ? state : null));
    setEnabled(state === true);
  };
  useEffect(() => {
    void refresh(null);
  }, []);
  const change = async (on: boolean) => {
    setBusy(true);
    let failed: string | null;
    try {
      failed = on ? await enableNotifications() : await disableNotifications();
    } catch (error) {
      // A browser API that throws (the worker's script would not load, storage refused) must
      // not leave the button busy for good with nothing said.
      failed = `This browser could not change its notifications (${String(error)}).`;
    }
    setBusy(false);
    await refresh(failed);
  };
  return (
    <section class="notifications" aria-label="Notifications">
      <h2>Notifications</h2>
      <p class="muted">
        A notification on this browser when an agent needs you or a turn finishes (titles and kinds only, never the
        conversation).
      </p>
      {!pushSupported() ? (
        <p class="muted">This browser cannot receive notifications from c2.</p>
      ) : enabled ? (
        <button type="button" disabled={busy} onClick={() => void change(false)}>
          Disable notifications
        </button>
      ) : (
        <button type="button" class="primary" disabled={busy || enabled === null} onClick={() => void change(true)}>
          Enable notifications
        </button>
      )}
      {enabled && <p role="status">Notifications are on for this browser.</p>}
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
    </section>
  );
}

export function DevicesPage() {
  const me = useStore(credential);
  const [devices, setDevices] = useState<DeviceOut[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const load = async () => {
    const result = await listDevices();
    if (result.data === undefined) setError(problemMessage(result.error));
    else setDevices(result.data);
  };
  useEffect(() => void load(), []);
  const revoke = async (device: DeviceOut) => {
    const self = device.id === me?.device_id;
    if (!confirm(self ? "Revoke this browser? You will need a new pairing link." : `Revoke “${device.name}”?`)) return;
    const result = await revokeDevice({ path: { device_id: device.id } });
    if (result.error !== undefined && result.response?.status !== 401) {
      setError(problemMessage(result.error));
      return;
    }
    if (self) signOut();
    else await load();
  };
  return (
    <div class="devices">
      <h1>Devices</h1>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {devices === null ? (
        <p class="muted">Loading…</p>
      ) : (
        <ul>
          {devices.map((device) => (
            <li key={device.id}>
              <div>
                <strong>{device.name}</strong>
                {device.id === me?.device_id && <span class="badge idle">this browser</span>}
                <div class="muted">
                  paired {when(device.created_at)} · last seen {when(device.last_seen)}
                </div>
              </div>
              <button type="button" class="danger" aria-label={`Revoke ${device.name}`} onClick={() => void revoke(device)}>
                Revoke
              </button>
            </li>
          ))}
        </ul>
      )}
      <Notifications />
    </div>
  );
}
