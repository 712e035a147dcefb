import { Backoff } from './backoff'

// Reconnecting keeps one WebSocket open: on every drop it waits (1 s, ×2,
// up to 30 s) and opens a new one, until stopped or told the drop is final.
// Subclasses log in on open and read the frames.
export abstract class Reconnecting {
  protected ws: WebSocket | null = null
  protected backoff = new Backoff()
  protected stopped = false
  private timer: ReturnType<typeof setTimeout> | undefined

  // protocols are offered in the upgrade (tokenProtocols).
  constructor(private url: string, private binary = false, private protocols: string[] = []) {}

  start() {
    this.stopped = false
    this.open()
  }

  stop() {
    this.stopped = true
    clearTimeout(this.timer)
    this.ws?.close()
  }

  // reconnectNow skips the wait, e.g. when the browser comes back online.
  reconnectNow() {
    if (this.ws === null && !this.stopped) {
      clearTimeout(this.timer)
      this.open()
    }
  }

  // dropNow gives the socket up at once, as after any drop, e.g. when
  // the browser goes offline: a socket whose network vanished may stay
  // open for minutes, sending into nothing, while the page says it is
  // online. (A server on this very machine is reached again at once.)
  dropNow() {
    const ws = this.ws
    if (ws === null || this.stopped) return
    this.ws = null
    ws.onmessage = null // what it may still bring is no longer this page's
    ws.close()
    this.lost(new CloseEvent('close', { code: 1006 }))
  }

  protected abstract connecting(): void
  protected abstract opened(ws: WebSocket): void
  protected abstract received(data: unknown): void
  // dropped reports whether to reconnect after the socket closed with ev.
  protected abstract dropped(ev: CloseEvent): boolean

  private open() {
    this.connecting()
    const ws = new WebSocket(this.url, this.protocols)
    if (this.binary) ws.binaryType = 'arraybuffer'
    this.ws = ws
    ws.onopen = () => this.opened(ws)
    ws.onmessage = (ev) => this.received(ev.data)
    ws.onclose = (ev) => {
      if (this.ws !== ws) return
      this.ws = null
      this.lost(ev)
    }
  }

  // lost tells the subclass the socket is gone, and tries a new one
  // after the backoff unless stopped or told the drop is final.
  private lost(ev: CloseEvent) {
    if (this.stopped || !this.dropped(ev)) return
    this.timer = setTimeout(() => this.open(), this.backoff.next())
  }
}
