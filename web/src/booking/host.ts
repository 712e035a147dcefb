import { Reconnecting } from '../lib/reconnecting'
import { tokenProtocols } from '../lib/token'
import { envelope, parseEnvelope, type Envelope } from './protocol'
import type { Booking, Source } from './machine'

export type HostState = 'connecting' | 'online' | 'offline' | 'replaced' | 'refused'

// HostClient is the booking page's side of the relay: it joins /agent/ws
// as host, publishes the state on every change, whoever made it, and
// executes the agent's requests on the booking machine.
export class HostClient extends Reconnecting {
  state: HostState = 'connecting'
  sessionId = ''
  // replacedBy is what took over, from relay.replaced's "by": 'page' (another
  // tab), 'agui' (an AG-UI frontend's thread), 'ingress' (an Ingress client),
  // '' if the server did not say.
  replacedBy = ''

  constructor(
    url: string,
    private token: string,
    private relaySession: string,
    private booking: Booking,
    private on: { state: (s: HostState) => void; change: () => void },
  ) {
    super(url, false, tokenProtocols(token))
  }

  private setState(s: HostState) {
    this.state = s
    this.on.state(s)
  }

  private send(s: string) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(s)
  }

  private snapshot() {
    return { uiSpec: this.booking.uiSpec(), messageHistory: this.booking.messages, toolSchema: this.booking.toolSchema() }
  }

  // publish sends state.updated: the authoritative sync event.
  publish(source: Source) {
    this.on.change()
    this.send(envelope('state.updated', { source, ...this.snapshot() }))
  }

  // click applies a participant's action.
  click(tool: string, params: Record<string, unknown> = {}) {
    const out = this.booking.apply(tool, params, 'user')
    if (out.ok) this.publish('user')
    return out
  }

  // say forwards what the participant typed in the chat.
  say(text: string) {
    this.booking.say('user', text)
    this.send(envelope('user.message', { text, stage: this.booking.stage }))
    this.publish('user')
  }

  startSession() {
    if (this.sessionId) return
    this.booking.reset()
    this.send(envelope('session.started', {}))
    this.publish('host')
  }

  endSession() {
    if (!this.sessionId) return
    this.send(envelope('session.ended', { sessionId: this.sessionId }))
    this.booking.reset()
    this.publish('host')
  }

  protected connecting() {
    this.setState('connecting')
  }

  protected opened(ws: WebSocket) {
    ws.send(envelope('relay.join', { role: 'host', sessionId: this.relaySession, token: this.token }, { id: 'join' }))
  }

  protected received(data: unknown) {
    const e = parseEnvelope(data)
    if (e) this.handle(e)
  }

  protected dropped(ev: CloseEvent): boolean {
    if (ev.code === 4001) {
      this.setState('replaced')
      return false
    }
    if (ev.code === 1008 && this.state === 'connecting') {
      this.setState('refused')
      return false
    }
    this.setState('offline')
    return true
  }

  private handle(e: Envelope) {
    const p = e.payload
    switch (e.type) {
      case 'relay.joined':
        this.backoff.reset()
        this.sessionId = typeof p.activeSession === 'string' ? p.activeSession : ''
        this.setState('online')
        this.publish('host')
        return
      case 'relay.session':
        this.sessionId = p.active && typeof p.sessionId === 'string' ? p.sessionId : ''
        this.on.change()
        return
      case 'relay.replaced':
        this.stopped = true
        this.replacedBy = typeof p.by === 'string' ? p.by : ''
        this.setState('replaced')
        return
      case 'session.start':
        this.booking.reset()
        this.sessionId = typeof p.sessionId === 'string' ? p.sessionId : ''
        this.send(envelope('session.started', { sessionId: this.sessionId }, { replyTo: e.id }))
        this.publish('host')
        return
      case 'snapshot.get':
        this.send(envelope('snapshot.state', { sessionId: this.sessionId, ...this.snapshot() }, { replyTo: e.id }))
        return
      case 'tool.call': {
        const name = typeof p.toolName === 'string' ? p.toolName : ''
        const params = p.params && typeof p.params === 'object' && !Array.isArray(p.params) ? (p.params as Record<string, unknown>) : {}
        const reason = typeof p.reason === 'string' ? p.reason : ''
        const out = this.booking.apply(name, params, 'agent', reason)
        if (!out.ok) {
          this.send(envelope('error', { code: out.code, message: out.message }, { replyTo: e.id }))
          return
        }
        const result: Record<string, unknown> = { ok: true, toolName: name }
        if (out.withSpec) result.uiSpec = this.booking.uiSpec()
        this.send(envelope('tool.result', result, { replyTo: e.id }))
        this.publish('agent')
        return
      }
      case 'agent.message': {
        const text = typeof p.text === 'string' ? p.text : ''
        if (!text.trim()) {
          this.send(envelope('error', { code: 'INVALID_PARAMS', message: 'agent.message needs text' }, { replyTo: e.id }))
          return
        }
        this.booking.say('agent', text)
        this.publish('agent')
        return
      }
      case 'session.end': {
        const sid = this.sessionId
        this.booking.reset()
        this.sessionId = ''
        this.send(envelope('session.ended', { sessionId: sid }, { replyTo: e.id }))
        this.publish('host')
        return
      }
      case 'session.ended':
        this.sessionId = ''
        this.on.change()
        return
    }
  }
}
