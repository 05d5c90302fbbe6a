/**
 * A client developer's flow with the generated TypeScript client and the typed event stream,
 * against a live c2. Run by tests/clients/test_generated_clients.py as
 * `node dist/test/flow.js BASE_URL PAIR_URL`; prints one JSON summary line.
 */
import { C2EventStream } from "../src/events.js";
import { client } from "../src/generated/client.gen.js";
import {
  answerPermission,
  createSession,
  createStreamTicket,
  getSession,
  getTranscript,
  pair,
  prompt,
} from "../src/generated/sdk.gen.js";
import type { GetSessionErrors, StreamFrame } from "../src/generated/types.gen.js";

declare const process: { argv: string[] };

function fail(message: string): never {
  throw new Error(message);
}

async function main(baseUrl: string, pairUrl: string): Promise<unknown> {
  client.setConfig({ baseUrl });
  const token = pairUrl.split("#token=")[1] ?? fail("no token in the pairing URL");
  const paired = await pair({ body: { token } });
  const bearer = paired.data?.bearer ?? fail(`pair failed: ${JSON.stringify(paired.error)}`);
  client.setConfig({ baseUrl, auth: () => bearer });

  const created = await createSession({
    body: { provider: { custom: "echo" }, cwd: "/tmp", use_worktree: false },
  });
  const session = created.data ?? fail(`create failed: ${JSON.stringify(created.error)}`);

  const states: string[] = [];
  const stream = new C2EventStream({
    baseUrl,
    session: session.id,
    retryDelayMs: 50,
    onState: (state) => states.push(state),
    mintTicket: async () => {
      const minted = await createStreamTicket();
      return minted.data?.ticket ?? fail("no stream ticket");
    },
  });
  const frames = stream[Symbol.asyncIterator]();
  const next = async (): Promise<StreamFrame> =>
    (await frames.next()).value ?? fail("the event stream ended");

  const welcome = await next();
  if (welcome.kind !== "sessions") fail(`first frame is ${welcome.kind}`);
  const events: string[] = [];
  const turn = async (text: string): Promise<string> => {
    const accepted = await prompt({
      path: { session_id: session.id },
      body: { doc: [{ type: "text", text }] },
    });
    if (accepted.error !== undefined) fail(`prompt failed: ${JSON.stringify(accepted.error)}`);
    for (;;) {
      const frame = await next();
      if (frame.kind !== "event") fail(`unexpected ${frame.kind} frame`);
      events.push(frame.event.event);
      if (frame.event.event === "turn_ended") return frame.event.stop_reason;
    }
  };
  const stopReason = await turn("hello from typescript");
  const resumeAfter = stream.lastEventId;
  stream.drop(); // as a network drop: the next read reconnects with Last-Event-ID
  const secondStop = await turn("again");
  stream.close();

  const page = await getTranscript({ path: { session_id: session.id }, query: { limit: 10 } });
  const entries = page.data?.entries ?? fail("no transcript page");
  const missing = await getSession({ path: { session_id: "no-such-session" } });
  const notFound: GetSessionErrors[keyof GetSessionErrors] = missing.error ?? fail("a missing session was found");
  const answered = await answerPermission({
    path: { session_id: session.id, input_id: "not-pending" },
    body: { option_id: null },
  });
  const conflict = answered.error ?? fail("answering nothing succeeded");
  return {
    events,
    stop_reasons: [stopReason, secondStop],
    resumed_after: resumeAfter,
    states,
    transcript_roles: entries.map((entry) => entry.role),
    problems: [
      [notFound.status, notFound.code],
      [conflict.status, conflict.code],
    ],
  };
}

main(process.argv[2] ?? fail("BASE_URL"), process.argv[3] ?? fail("PAIR_URL")).then(
  (summary) => console.log(JSON.stringify(summary)),
  (error: unknown) => {
    console.error(error);
    throw error;
  },
);
