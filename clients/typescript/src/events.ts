/**
 * A typed, reconnecting reader of c2's `GET /v1/events` (docs/api.md §6), beside the generated
 * client.
 *
 * Yields `StreamFrame`s (narrow on `frame.kind`, then `frame.event.event`). Each connection
 * authenticates with a freshly minted single-use stream ticket; after a drop or a server restart
 * it reconnects with `Last-Event-ID` (the last `id:` seen) so no event is lost or repeated. A
 * `resync` frame means that position cannot be replayed: drop derived state, the `sessions`
 * frame that follows is the new baseline. `state` tells the UI where the connection is.
 */
import type { StreamFrame } from "./generated/types.gen.js";

export type ConnectionState = "connecting" | "open" | "reconnecting" | "closed";

export interface EventStreamOptions {
  /** Server root, e.g. `http://127.0.0.1:8000`. */
  baseUrl: string;
  /** Mints a fresh stream ticket (`POST /v1/stream-tickets`); called once per connection. */
  mintTicket: () => Promise<string>;
  /** Only this session's events (`?session=`). */
  session?: string;
  /** Resume after this sequence on the first connection (later ones use `Last-Event-ID`). */
  after?: number;
  /** First reconnect delay; doubles per failed attempt up to `maxRetryDelayMs`. */
  retryDelayMs?: number;
  maxRetryDelayMs?: number;
  onState?: (state: ConnectionState) => void;
  fetch?: typeof fetch;
}

/** A 4xx answer to the stream request (a problem+json body): retrying would not help. */
export class EventStreamError extends Error {
  constructor(
    readonly status: number,
    readonly problem: { code?: string; detail?: string } | undefined,
  ) {
    super(`event stream refused: ${status} ${problem?.code ?? ""}`.trim());
  }
}

export class C2EventStream implements AsyncIterable<StreamFrame> {
  /** The `id:` of the last frame that carried one: where a reconnect resumes. */
  lastEventId: string | undefined;
  state: ConnectionState = "connecting";
  private closed = false;
  private current: AbortController | undefined;

  constructor(private readonly options: EventStreamOptions) {
    if (options.after !== undefined) this.lastEventId = String(options.after);
  }

  /** Stop for good: the iteration ends. */
  close(): void {
    this.closed = true;
    this.current?.abort();
    this.setState("closed");
  }

  /** End the current connection only (as a network drop would); the iteration reconnects. */
  drop(): void {
    this.current?.abort();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<StreamFrame> {
    const fetchFn = this.options.fetch ?? globalThis.fetch;
    let delay = this.options.retryDelayMs ?? 500;
    let first = true;
    try {
      yield* this.connections(fetchFn, delay, first);
    } finally {
      this.current?.abort(); // the consumer stopped iterating: end the connection
      this.setState("closed");
    }
  }

  private async *connections(
    fetchFn: typeof fetch,
    delay: number,
    first: boolean,
  ): AsyncGenerator<StreamFrame> {
    while (!this.closed) {
      this.setState(first ? "connecting" : "reconnecting");
      first = false;
      this.current = new AbortController();
      try {
        const response = await fetchFn(await this.url(), {
          headers: this.headers(),
          signal: this.current.signal,
        });
        if (response.status >= 400 && response.status < 500) {
          const problem = (await response.json().catch(() => undefined)) as
            | { code?: string; detail?: string }
            | undefined;
          throw new EventStreamError(response.status, problem);
        }
        if (!response.ok || response.body === null) throw new Error(`HTTP ${response.status}`);
        this.setState("open");
        delay = this.options.retryDelayMs ?? 500;
        for await (const frame of this.frames(response.body)) yield frame;
      } catch (error) {
        if (error instanceof EventStreamError) {
          this.close();
          throw error;
        }
        // A drop, an abort from drop(), a restart: reconnect below unless closed.
      }
      if (this.closed) break;
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, this.options.maxRetryDelayMs ?? 10_000);
    }
  }

  private async url(): Promise<string> {
    const query = new URLSearchParams({ ticket: await this.options.mintTicket() });
    if (this.options.session !== undefined) query.set("session", this.options.session);
    return `${this.options.baseUrl}/v1/events?${query.toString()}`;
  }

  private headers(): Record<string, string> {
    const headers: Record<string, string> = { Accept: "text/event-stream" };
    if (this.lastEventId !== undefined) headers["Last-Event-ID"] = this.lastEventId;
    return headers;
  }

  private async *frames(body: ReadableStream<Uint8Array>): AsyncGenerator<StreamFrame> {
    const decoder = new TextDecoder();
    const reader = body.getReader();
    let buffer = "";
    try {
      while (true) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          let id: string | undefined;
          const data: string[] = [];
          for (const line of block.split("\n")) {
            if (line.startsWith("id:")) id = line.slice(3).trim();
            else if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
          }
          if (data.length === 0) continue; // `: ping` comments
          if (id !== undefined) this.lastEventId = id;
          yield JSON.parse(data.join("\n")) as StreamFrame;
        }
      }
    } finally {
      reader.releaseLock();
    }
  }

  private setState(state: ConnectionState): void {
    if (this.state === state) return;
    this.state = state;
    this.options.onState?.(state);
  }
}
