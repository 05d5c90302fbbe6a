/**
 * The Usage page (issue 15): tokens and cost as the agents reported them (`GET /v1/usage`),
 * summed per session, per agent or per UTC day.
 */
import { useEffect, useState } from "preact/hooks";
import { sessions } from "../app.js";
import { getUsage } from "../c2/generated/sdk.gen.js";
import type { UsageGroup } from "../c2/generated/types.gen.js";
import { problemMessage } from "../errors.js";
import { useStore } from "../hooks.js";

type GroupBy = "session" | "provider" | "day";
const GROUPINGS: [GroupBy, string][] = [
  ["session", "Session"],
  ["provider", "Agent"],
  ["day", "Day (UTC)"],
];

function cost(group: UsageGroup): string {
  return group.cost === null ? "—" : `${group.cost.amount.toFixed(4)} ${group.cost.currency}`;
}

export function UsagePage() {
  const list = useStore(sessions);
  const [groupBy, setGroupBy] = useState<GroupBy>("session");
  const [groups, setGroups] = useState<UsageGroup[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    setGroups(null);
    void getUsage({ query: { group_by: groupBy } }).then((result) => {
      if (result.data === undefined) setError(problemMessage(result.error));
      else setGroups(result.data.groups);
    });
  }, [groupBy]);
  const label = (key: UsageGroup["key"]): string => {
    if (typeof key !== "string") return Object.values(key)[0] ?? "custom";
    if (groupBy === "session") return list.find((s) => s.id === key)?.title || key;
    return key;
  };
  return (
    <div class="usage-page">
      <h1>Usage</h1>
      <label>
        Group by{" "}
        <select value={groupBy} onChange={(e) => setGroupBy(e.currentTarget.value as GroupBy)}>
          {GROUPINGS.map(([value, text]) => (
            <option value={value}>{text}</option>
          ))}
        </select>
      </label>
      {error && (
        <p role="alert" class="error">
          {error}
        </p>
      )}
      {groups === null ? (
        !error && <p class="muted">Loading…</p>
      ) : groups.length === 0 ? (
        <p class="muted">No usage reported yet.</p>
      ) : (
        <table aria-label="Usage" class="deliveries">
          <thead>
            <tr>
              <th>{GROUPINGS.find(([value]) => value === groupBy)?.[1]}</th>
              <th>Input tokens</th>
              <th>Output tokens</th>
              <th>Total tokens</th>
              <th>Cost</th>
            </tr>
          </thead>
          <tbody>
            {groups.map((group) => (
              <tr key={JSON.stringify(group.key)}>
                <td>{label(group.key)}</td>
                <td>{group.input_tokens}</td>
                <td>{group.output_tokens}</td>
                <td>{group.total_tokens}</td>
                <td>{cost(group)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </div>
  );
}
