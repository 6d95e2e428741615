import type { EventMessage } from "./types";

export type ConnectionStatus = "connecting" | "live" | "reconnecting" | "closed";

/** The websocket URL for the manager's event stream on the page's own origin. */
export function eventsUrl(location: { protocol: string; host: string }, token: string, topics: string[]): string {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  const params = new URLSearchParams({ token, topics: topics.join(",") });
  return `${scheme}//${location.host}/ws/events?${params.toString()}`;
}

/** Exponential backoff with jitter: attempt 0 waits about initialMs, capped at maxMs. */
export function backoffDelay(attempt: number, initialMs: number, maxMs: number, random: () => number = Math.random): number {
  const base = Math.min(maxMs, initialMs * 2 ** Math.max(0, attempt));
  // Jitter in [0.5, 1.0] * base so many tabs don't reconnect in lockstep after a manager restart.
  return Math.round(base * (0.5 + random() / 2));
}

export interface EventStreamOptions {
  url: () => string;
  onEvent: (event: EventMessage) => void;
  /** Called on every status change; `closeCode` is set when a socket closed. */
  onStatus?: (status: ConnectionStatus, info: { closeCode?: number; everOpened: boolean }) => void;
  initialBackoffMs?: number;
  maxBackoffMs?: number;
  WebSocketImpl?: typeof WebSocket;
  setTimer?: (fn: () => void, ms: number) => unknown;
  clearTimer?: (handle: unknown) => void;
}

/**
 * A websocket to /ws/events that reconnects with backoff until stopped.
 * Each (re)connection reports "live" on open; consumers refetch then, since
 * events sent while disconnected are not replayed.
 */
export class EventStream {
  private readonly options: EventStreamOptions;
  private socket: WebSocket | null = null;
  private timer: unknown = null;
  private attempt = 0;
  private stopped = true;
  private everOpened = false;
  private status: ConnectionStatus = "closed";

  constructor(options: EventStreamOptions) {
    this.options = options;
  }

  get currentStatus(): ConnectionStatus {
    return this.status;
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== null) {
      (this.options.clearTimer ?? ((h) => clearTimeout(h as ReturnType<typeof setTimeout>)))(this.timer);
      this.timer = null;
    }
    const socket = this.socket;
    this.socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      socket.close();
    }
    this.setStatus("closed");
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
      socket = new Impl(this.options.url());
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
    };
    socket.onmessage = (message: MessageEvent) => {
      if (this.socket !== socket || typeof message.data !== "string") return;
      let parsed: unknown;
      try {
        parsed = JSON.parse(message.data);
      } catch {
        return;
      }
      if (parsed && typeof parsed === "object" && typeof (parsed as EventMessage).type === "string") {
        this.options.onEvent(parsed as EventMessage);
      }
    };
    socket.onclose = (event: CloseEvent) => {
      if (this.socket !== socket) return;
      this.socket = null;
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
