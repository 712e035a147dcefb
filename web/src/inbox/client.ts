import { create, fromBinary, toBinary } from '@bufbuild/protobuf'
import {
  WebsocketMessageSchema,
  type WebsocketMessage,
} from '../gen/agentassistproto/agentassist_pb'
import { Backoff } from '../lib/backoff'

export type ConnState = 'connecting' | 'online' | 'offline' | 'refused'

export type Init = Parameters<typeof create<typeof WebsocketMessageSchema>>[1]

// InboxClient keeps a /ws connection logged in: it reconnects with
// backoff, logs in again and lets the store resync after every login.
export class InboxClient {
  state: ConnState = 'connecting'
  clientId = ''
  // What this page last saw, so a reconnect gets exactly what it missed.
  private epoch = ''
  private lastSeq = 0n
  private ws: WebSocket | null = null
  private backoff = new Backoff()
  private timer: ReturnType<typeof setTimeout> | undefined
  private stopped = false

  constructor(
    private url: string,
    private token: string,
    private nickname: () => string,
    private on: {
      message: (m: WebsocketMessage) => void
      state: (s: ConnState) => void
      login: (clientId: string, resumed: boolean) => void
    },
  ) {}

  start() {
    this.stopped = false
    this.open()
  }

  stop() {
    this.stopped = true
    clearTimeout(this.timer)
    this.ws?.close()
  }

  send(init: Init): boolean {
    if (this.ws?.readyState !== WebSocket.OPEN || this.state !== 'online') return false
    this.ws.send(toBinary(WebsocketMessageSchema, create(WebsocketMessageSchema, init)))
    return true
  }

  // reconnectNow skips the wait, e.g. when the browser comes back online.
  reconnectNow() {
    if (this.state === 'offline') {
      clearTimeout(this.timer)
      this.open()
    }
  }

  private setState(s: ConnState) {
    this.state = s
    this.on.state(s)
  }

  private open() {
    this.setState('connecting')
    const ws = new WebSocket(this.url)
    ws.binaryType = 'arraybuffer'
    this.ws = ws
    ws.onopen = () => {
      ws.send(
        toBinary(
          WebsocketMessageSchema,
          create(WebsocketMessageSchema, {
            Cmd: 'UserLogin', StrParam: this.token, Nickname: this.nickname(),
            Epoch: this.epoch, ResumeFrom: this.lastSeq,
          }),
        ),
      )
    }
    ws.onmessage = (ev) => {
      if (!(ev.data instanceof ArrayBuffer)) return
      let m: WebsocketMessage
      try {
        m = fromBinary(WebsocketMessageSchema, new Uint8Array(ev.data))
      } catch {
        return
      }
      if (m.Cmd === 'UserLogin' && m.UserLoginResponse) {
        if (!m.UserLoginResponse.success) {
          this.stopped = true
          this.setState('refused')
          return
        }
        this.clientId = m.UserLoginResponse.clientId
        if (m.UserLoginResponse.epoch !== this.epoch) this.lastSeq = 0n
        this.epoch = m.UserLoginResponse.epoch
        this.backoff.reset()
        this.setState('online')
        this.on.login(this.clientId, m.UserLoginResponse.resumed)
        return
      }
      if (m.Seq > this.lastSeq) this.lastSeq = m.Seq
      this.on.message(m)
    }
    ws.onclose = () => {
      if (this.ws !== ws) return
      this.ws = null
      if (this.stopped) return
      this.setState('offline')
      this.timer = setTimeout(() => this.open(), this.backoff.next())
    }
  }
}
