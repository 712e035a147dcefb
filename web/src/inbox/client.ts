import { create, fromBinary, toBinary } from '@bufbuild/protobuf'
import {
  WebsocketMessageSchema,
  type WebsocketMessage,
} from '../gen/agentassistproto/agentassist_pb'
import { Reconnecting } from '../lib/reconnecting'
import { tokenProtocols } from '../lib/token'

export type ConnState = 'connecting' | 'online' | 'offline' | 'refused'

export type Init = Parameters<typeof create<typeof WebsocketMessageSchema>>[1]

// InboxClient keeps a /ws connection logged in: it reconnects with
// backoff, logs in again and lets the store resync after every login.
export class InboxClient extends Reconnecting {
  state: ConnState = 'connecting'
  clientId = ''
  // What this page last saw, so a reconnect gets exactly what it missed.
  private epoch = ''
  private lastSeq = 0n

  constructor(
    url: string,
    private token: string,
    private nickname: () => string,
    private on: {
      message: (m: WebsocketMessage) => void
      state: (s: ConnState) => void
      login: (clientId: string, resumed: boolean) => void
    },
  ) {
    super(url, true, tokenProtocols(token))
  }

  send(init: Init): boolean {
    if (this.ws?.readyState !== WebSocket.OPEN || this.state !== 'online') return false
    this.ws.send(toBinary(WebsocketMessageSchema, create(WebsocketMessageSchema, init)))
    return true
  }

  // rename tells the server this page's new name on the connection it
  // has (UserLogin again): the client id stays, so the other devices see
  // the same device renamed, and its answers follow. Offline, the next
  // login carries the name.
  rename() {
    if (this.ws?.readyState !== WebSocket.OPEN || this.state !== 'online') return
    this.ws.send(this.login())
  }

  // login is the UserLogin frame: the token, this page's name, where it
  // resumes from, and that it shows a request's options as buttons (a
  // client that does not say so reads them in the request's text).
  private login() {
    return toBinary(WebsocketMessageSchema, create(WebsocketMessageSchema, {
      Cmd: 'UserLogin', StrParam: this.token, Nickname: this.nickname(), Epoch: this.epoch, ResumeFrom: this.lastSeq,
      ShowsOptions: true,
    }))
  }

  private setState(s: ConnState) {
    this.state = s
    this.on.state(s)
  }

  protected connecting() {
    this.setState('connecting')
  }

  protected opened(ws: WebSocket) {
    ws.send(this.login())
  }

  protected received(data: unknown) {
    if (!(data instanceof ArrayBuffer)) return
    let m: WebsocketMessage
    try {
      m = fromBinary(WebsocketMessageSchema, new Uint8Array(data))
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

  protected dropped(): boolean {
    this.setState('offline')
    return true
  }
}
