/**
 * The Instances page (issue 18): the live members of the cluster this server belongs to
 * (`GET /v1/instances`), each with its advertised URL and how long ago it renewed its lease,
 * read again every few seconds while the page is open. And the owner badge of a session.
 */
import { useEffect, useState } from "preact/hooks";
import { sessions, sessionsComplete } from "../app.js";
import { problemMessage } from "../errors.js";
import { useStore } from "../hooks.js";
import { instanceGone, instanceName, instances, refreshInstances, shortId } from "../instances.js";

// Members renew their lease every third of it (5 s by default): read about as often.
const REFRESH_MS = 3000;

/** "4 s ago" from a database timestamp (clamped: the browser's clock may run behind it). */
export function ago(stamp: string, now = Date.now()): string {
  const seconds = Math.max(0, Math.round((now - Date.parse(stamp)) / 1000));
  if (seconds < 120) return `${seconds} s ago`;
  const minutes = Math.round(seconds / 60);
  return minutes < 120 ? `${minutes} min ago` : `${Math.round(minutes / 60)} h ago`;
}

export function InstancesPage() {
  const list = useStore(instances);
  const known = useStore(sessions);
  const complete = useStore(sessionsComplete);
  // Sessions this browser has loaded, per owner ("at least" while the list is partial).
  const owned = (id: string): string => {
    const count = known.filter((s) => s.owner === id).length;
    return complete ? String(count) : `≥ ${count}`;
  };
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    const load = async () => {
      const failed = await refreshInstances();
      setError(failed === undefined ? null : problemMessage(failed.error));
    };
    void load();
    const timer = window.setInterval(() => void load(), REFRESH_MS);
    return () => window.clearInterval(timer);
  }, []);
  return (
    <div class="instances-page">
      <h1>Instances</h1>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {list === null ? (
        !error && <p class="muted">Loading…</p>
      ) : list.length === 0 ? (
        <p class="muted">This c2 server runs alone: it is not a member of a cluster.</p>
      ) : (
        <>
          <p class="muted">
            The c2 servers sharing this database. Each runs the agents of the sessions it owns; any of them serves every
            session.
          </p>
          <table aria-label="Instances" class="deliveries">
            <thead>
              <tr>
                <th>Instance</th>
                <th>URL</th>
                <th>Heartbeat</th>
                <th>Started</th>
                <th>Sessions</th>
              </tr>
            </thead>
            <tbody>
              {list.map((member) => (
                <tr key={member.id}>
                  <td>
                    <code title={member.id}>{shortId(member.id)}</code>
                    {member.url === location.origin && <span class="badge idle">this server</span>}
                  </td>
                  <td>{member.url}</td>
                  <td>{ago(member.heartbeat_at)}</td>
                  <td>{new Date(member.started_at).toLocaleString()}</td>
                  <td>{owned(member.id)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </div>
  );
}

/** The instance a session runs on, in a cluster (the snapshot's `owner`); marked when gone. */
export function OwnerBadge({ owner }: { owner: string }) {
  useStore(instances);
  useEffect(() => void refreshInstances(), [owner]);
  const gone = instanceGone(owner);
  return (
    <a
      class={`badge owner ${gone ? "warn" : ""}`}
      href="#/instances"
      title={`Runs on c2 instance ${owner}${gone ? ", which is gone" : ""}`}
    >
      on {instanceName(owner)}
      {gone && " · gone"}
    </a>
  );
}
