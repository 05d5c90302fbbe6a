/**
 * A clear sentence for every problem `code` c2 answers with (docs/api.md §1), for people who never
 * read the API: what happened and what to do. Unknown codes fall back to the problem's detail.
 * The cluster's owner problems name the instance that runs the session instead.
 */
import { instanceName } from "./instances.js";

const MESSAGES: Record<string, string> = {
  agent_auth_required: "The agent needs you to log in first (see its documentation), then try again.",
  budget_exceeded: "This session's budget is used up: raise it or start a new session.",
  capacity: "c2 is running as many agents as it may. Close a session or try again shortly.",
  checkpoint_failed: "c2 could not record or restore the files (see its log).",
  domain_error: "c2 could not do that.",
  force_required: "This session works in your own folder: rewinding it must be confirmed.",
  host_not_allowed: "c2 does not answer on this address (start it with --allow-host).",
  http_error: "The request was refused.",
  insufficient_scope: "This device is not allowed to do that.",
  internal_error: "c2 hit an internal error; see its log.",
  invalid_cwd: "That folder does not exist or cannot be used.",
  invalid_host: "The request's Host header was refused.",
  invalid_mcp_server: "An MCP server setting is invalid.",
  invalid_option: "That answer is no longer offered.",
  invalid_pairing_token: "This pairing link was already used or has expired.",
  invalid_ticket: "The live connection was refused; reconnecting.",
  invalid_usage_query: "That usage query is invalid.",
  mcp_unsupported: "This agent does not support that MCP transport.",
  method_not_allowed: "That action is not allowed here.",
  no_checkpoints: "c2 keeps no checkpoints for this session (its folder is not a git checkout, or its worktree was discarded).",
  no_such_checkpoint: "That saved state of the files is gone.",
  no_such_device: "That device no longer exists.",
  no_such_queue_item: "That queued message already ran or was removed.",
  no_such_session: "That session no longer exists.",
  no_such_turn: "That turn is not there (or has not finished yet).",
  not_found: "Not found.",
  not_implemented: "This agent does not support that.",
  not_ready: "c2 is starting or stopping; try again in a moment.",
  operation_failed: "The agent refused the change.",
  outside_changes: "Files changed outside any turn since c2 last recorded them.",
  owner_unavailable: "The c2 instance that runs this session is gone; the session can only be read until it is back.",
  owner_unreachable: "The c2 instance that runs this session is not answering; try again in a few seconds.",
  payload_too_large: "That message is too large.",
  permission_not_pending: "That permission was already answered.",
  provider_unavailable: "This agent is not installed on the server.",
  rate_limited: "Too many attempts: wait a little and try again.",
  request_id_reused: "That request was already sent with different content.",
  session_unavailable: "The session's agent is not available right now.",
  shutting_down: "c2 is shutting down.",
  store_unavailable: "c2's database is unavailable; try again shortly.",
  too_many_streams: "Too many tabs are connected for this device; close one.",
  transcript_error: "That part of the conversation could not be loaded.",
  turn_already_running: "The agent is still working: wait for it, or press Stop.",
  turn_failed: "The turn could not start.",
  unauthorized: "This device is no longer paired.",
  unknown_mode: "The agent does not offer that mode.",
  unknown_model: "The agent does not offer that model.",
  unknown_provider: "That agent is unknown to c2.",
  unsupported_media_type: "The request was malformed.",
  validation_error: "Some fields are missing or invalid.",
  worktree_error: "The git worktree could not be made or used.",
};

// The owner problems of a cluster (issue 18), naming the instance (problem member `owner`).
const OWNER_MESSAGES: Record<string, (instance: string) => string> = {
  owner_unavailable: (instance) =>
    `The c2 instance ${instance} that runs this session is gone. Its worktree lives on that machine, so the session can continue only when that instance is back; until then you can still read it.`,
  owner_unreachable: (instance) => `The c2 instance ${instance} that runs this session is not answering; try again in a few seconds.`,
};

interface ProblemLike {
  code?: string | null;
  detail?: string | null;
  owner?: string | null;
}

/** The sentence to show for a failed request's problem body (or a network failure). */
export function problemMessage(error: unknown): string {
  if (error === undefined || error === null) return "c2 could not be reached: check the connection.";
  const problem = error as ProblemLike;
  const owner = problem.code && problem.owner ? OWNER_MESSAGES[problem.code] : undefined;
  if (owner && problem.owner) return owner(instanceName(problem.owner));
  const base = (problem.code ? MESSAGES[problem.code] : undefined) ?? "The request failed.";
  return problem.detail ? `${base} (${problem.detail})` : base;
}

/** The problem `code` of a failed request's body, if any. */
export function problemCode(error: unknown): string | null {
  return (error as ProblemLike | undefined)?.code ?? null;
}
