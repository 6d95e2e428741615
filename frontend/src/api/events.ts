import type { EventPayloads, EventType, HelloPayload } from "./events.gen";
import type { EventMessage } from "./types";

export type { EventPayloads, EventType } from "./events.gen";
export { DEPLOY_STAGE_SPANS, EVENT_TOPIC_KINDS } from "./events.gen";

/** One event of the manager's catalog, its payload typed by its `type` (events.gen.ts is
 * generated from backend/events/catalog.py). */
export type PopulaceEvent = {
  [T in EventType]: { type: T; topic: string; seq: number; ts: string; payload: EventPayloads[T] };
}[EventType];

export type EventOf<T extends EventType> = Extract<PopulaceEvent, { type: T }>;

/** Narrows a message from the socket to one event of the catalog, by its type. */
export function isEvent<T extends EventType>(message: EventMessage, type: T): message is EventMessage & EventOf<T> {
  return message.type === type && typeof message.payload === "object" && message.payload !== null;
}

/** The `hello` message's payload, when the message is one. */
function helloPayload(message: EventMessage): Partial<HelloPayload> | undefined {
  return message.type === "hello" ? (message.payload as Partial<HelloPayload> | undefined) : undefined;
}

/** "stale": the socket is open but nothing (not even a keep-alive ping) came for about two ping
 * intervals, e.g. the laptop went offline; it is dropped and reopened. */
export type ConnectionStatus = "connecting" | "live" | "stale" | "reconnecting" | "closed";

/** The manager's keep-alive interval when its hello does not say (backend/api/events_ws.py). */
export const DEFAULT_PING_INTERVAL_MS = 5_000;

/** Silent this long, a socket is presumed dead: two ping intervals and some slack for a busy tab. */
export function staleAfterMs(pingIntervalMs: number): number {
  return Math.round(pingIntervalMs * 2.5);
}

/** Where a reconnecting client resumes: the last seq it applied, in the manager run (epoch) that issued it. */
export interface ResumePoint {
  since: number;
  epoch: string;
}

/** The websocket URL for the manager's event stream on the page's own origin (no token: see eventsProtocols). */
export function eventsUrl(location: { protocol: string; host: string }, topics: string[], resume: ResumePoint | null = null): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const params = new URLSearchParams({ topics: topics.join(",") });
  if (resume) {
    params.set("since", String(resume.since));
    params.set("epoch", resume.epoch);
  }
  return `${scheme}//${location.host}/ws/events?${params.toString()}`;
}

/**
 * The subprotocols that authenticate the socket: `populace.v1` and `populace.auth.<token as
 * base64url, no padding>`. The token goes in the Sec-WebSocket-Protocol header, never in the
 * URL (which access logs and proxies record); the manager answers with `populace.v1` only.
 */
export function eventsProtocols(token: string): string[] {
  let binary = "";
  for (const byte of new TextEncoder().encode(token)) binary += String.fromCharCode(byte);
  const encoded = btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
  return ["populace.v1", `populace.auth.${encoded}`];
}

/** Exponential backoff with jitter: attempt 0 waits about initialMs, capped at maxMs. */
export function backoffDelay(attempt: number, initialMs: number, maxMs: number, random: () => number = Math.random): number {
  const base = Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt));
  // Jitter in [0.5, 1.0] * base so many tabs don't reconnect in lockstep after a manager restart.
  return Math.round(base * (0.5 + random() / 2));
}

/** What a consumer does with one message from the socket. */
export type Verdict = "event" | "duplicate" | "resync" | "ignore";

/**
 * The client half of the replay protocol, pure so it is unit-tested.
 *
 * The first connection's `hello` gives the base seq: the consumer takes a snapshot (resync).
 * A reconnection passes `since` (the last seq applied) and the epoch; the manager then sends
 * the missed events, which may overlap what we already have (a socket that closed while
 * messages were in flight), so anything at or below the last seq is a duplicate. When the
 * manager cannot replay it says `resync`, and the consumer refetches.
 */
export class ReplayCursor {
  lastSeq: number | null = null;
  epoch: string | null = null;
  private resuming = false;

  /** Call when opening a socket; returns where to resume, or null for a fresh start. */
  beginConnection(): ResumePoint | null {
    this.resuming = this.lastSeq !== null && this.epoch !== null;
    return this.resuming ? { since: this.lastSeq as number, epoch: this.epoch as string } : null;
  }

  accept(message: EventMessage): Verdict {
    if (message.type === "ping") return "ignore"; // keep-alive: no seq, nothing to apply
    if (message.type === "hello") {
      const epoch = helloPayload(message)?.epoch;
      // When resuming, a different epoch means the manager restarted: it follows with a resync.
      if (typeof epoch === "string") this.epoch = epoch;
      if (this.resuming) return "ignore"; // the manager follows with the replay or a resync
      if (typeof message.seq === "number") this.lastSeq = message.seq;
      return "resync";
    }
    if (message.type === "resync") {
      if (typeof message.seq === "number") this.lastSeq = message.seq;
      this.resuming = false;
      return "resync";
    }
    if (typeof message.seq !== "number") return "event";
    if (this.lastSeq !== null && message.seq <= this.lastSeq) return "duplicate";
    this.lastSeq = message.seq;
    return "event";
  }
}

export interface EventStreamOptions {
  url: (resume: ResumePoint | null) => string;
  /** Subprotocols offered on every connection (see eventsProtocols). */
  protocols?: string[];
  /** Each event once, in seq order, across reconnections. */
  onEvent: (event: EventMessage) => void;
  /** The consumer must (re)load its snapshot over REST: first connection, or the gap could not be replayed. */
  onResync?: () => void;
  /** Called on every status change; `closeCode` is set when a socket closed. */
  onStatus?: (status: ConnectionStatus, info: { closeCode?: number; everOpened: boolean }) => void;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  WebSocketImpl?: typeof WebSocket;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
}

/** A websocket to /ws/events that reconnects with backoff until stopped, resuming from the last seq. */
export class EventStream {
  private readonly options: EventStreamOptions;
  private readonly cursor = new ReplayCursor();
  private socket: WebSocket | null = null;
  private timer: unknown = null;
  private attempt = 0;
  private stopped = true;
  private everOpened = false;
  private status: ConnectionStatus = "closed";
  private watchdog: unknown = null;
  private pingIntervalMs = DEFAULT_PING_INTERVAL_MS;

  constructor(options: EventStreamOptions) {
    this.options = options;
  }

  get currentStatus(): ConnectionStatus {
    return this.status;
  }

  get lastSeq(): number | null {
    return this.cursor.lastSeq;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) {
      this.clear(this.timer);
      this.timer = null;
    }
    this.dropSocket();
    this.setStatus("closed");
  }

  private clear(handle: unknown): void {
    (this.options.clearTimer ?? ((h) => clearTimeout(h as ReturnType<typeof setTimeout>)))(handle);
  }

  /** (Re)starts the countdown after which a silent socket counts as dead. */
  private armWatchdog(socket: WebSocket): void {
    if (this.watchdog !== null) this.clear(this.watchdog);
    const setTimer = this.options.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
    this.watchdog = setTimer(() => {
      this.watchdog = null;
      if (this.socket !== socket || this.stopped) return;
      this.setStatus("stale");
      this.dropSocket();
      this.scheduleReconnect();
    }, staleAfterMs(this.pingIntervalMs));
  }

  private dropSocket(): void {
    if (this.watchdog !== null) {
      this.clear(this.watchdog);
      this.watchdog = null;
    }
    const socket = this.socket;
    this.socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      socket.close();
    }
  }

  private setStatus(status: ConnectionStatus, closeCode?: number): void {
    this.status = status;
    this.options.onStatus?.(status, { closeCode, everOpened: this.everOpened });
  }

  private connect(): void {
    const Impl = this.options.WebSocketImpl ?? WebSocket;
    this.setStatus(this.everOpened || this.attempt > 0 ? "reconnecting" : "connecting");
    let socket: WebSocket;
    try {
      socket = new Impl(this.options.url(this.cursor.beginConnection()), this.options.protocols);
    } catch {
      this.scheduleReconnect();
      return;
    }
    this.socket = socket;
    socket.onopen = () => {
      if (this.socket !== socket) return;
      this.attempt = 0;
      this.everOpened = true;
      this.setStatus("live");
      this.armWatchdog(socket);
    };
    socket.onmessage = (message: MessageEvent) => {
      if (this.socket !== socket || typeof message.data !== "string") return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(message.data);
      } catch {
        return;
      }
      if (!parsed || typeof parsed !== "object" || typeof (parsed as EventMessage).type !== "string") return;
      const event = parsed as EventMessage;
      const interval = helloPayload(event)?.ping_interval_s;
      if (typeof interval === "number" && interval > 0) this.pingIntervalMs = interval * 1000;
      this.armWatchdog(socket);
      const verdict = this.cursor.accept(event);
      if (verdict === "event") this.options.onEvent(event);
      else if (verdict === "resync") this.options.onResync?.();
    };
    socket.onclose = (event: CloseEvent) => {
      if (this.socket !== socket) return;
      this.dropSocket();
      this.setStatus("reconnecting", event.code);
      this.scheduleReconnect();
    };
    // An error is always followed by close; reconnecting is handled there.
    socket.onerror = () => undefined;
  }

  private scheduleReconnect(): void {
    if (this.stopped) return;
    const delay = backoffDelay(this.attempt, this.options.initialBackoffMs ?? 500, this.options.maxBackoffMs ?? 10_000);
    this.attempt += 1;
    const setTimer = this.options.setTimer ?? ((fn, ms) => setTimeout(fn, ms));
    this.timer = setTimer(() => {
      this.timer = null;
      if (!this.stopped) this.connect();
    }, delay);
  }
}
