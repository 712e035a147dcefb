// The AG-UI demo's frontend, as any AG-UI app would be: an HttpAgent on
// this server's POST /agui, one frontend tool (change_background, seed
// 004's example) and a chat. A user message is a run; the agent's text
// streams in; when a run ends with tool calls left for the frontend
// (phase one), the page runs them and sends only their results in the
// next run (phase two), until a run ends with nothing left to do.
import './jitless' // first: before @ag-ui's schemas are built
import { HttpAgent, type AgentSubscriber } from '@ag-ui/client'
import type { Message, Tool } from '@ag-ui/core'

export const changeBackground: Tool = {
  name: 'change_background',
  description: "Change the background colour of the demo page. Give any CSS colour: a name (\"teal\"), #rrggbb or rgb().",
  parameters: {
    type: 'object',
    properties: { color: { type: 'string', description: 'A CSS colour, e.g. "steelblue" or "#336699".' } },
    required: ['color'],
  },
}

export interface DemoState {
  background: string
}

// A line of the chat as the page shows it.
export interface ChatLine {
  id: string
  role: 'user' | 'assistant'
  text: string
  // The agent's tool calls; failed once the page refused one.
  tools: { name: string; args: string; failed: boolean }[]
}

// isColour is CSS's own judgement of a colour, so the page applies
// nothing else.
export type ColourCheck = (c: string) => boolean

// applyTool runs one frontend tool call and returns its tool message.
export function applyTool(id: string, name: string, args: string, state: DemoState, isColour: ColourCheck): { msg: Message; state: DemoState } {
  const fail = (error: string) => ({ msg: { id: `result-${id}`, role: 'tool', toolCallId: id, content: JSON.stringify({ status: 'error', error }), error } as Message, state })
  if (name !== changeBackground.name) return fail(`this page has no tool "${name}"`)
  let color: unknown
  try {
    color = (JSON.parse(args || '{}') as { color?: unknown }).color
  } catch {
    return fail('the arguments are not JSON')
  }
  if (typeof color !== 'string' || !color.trim() || color.length > 64 || !isColour(color.trim())) {
    return fail(`"color" must be a CSS colour, e.g. "steelblue" or "#336699"`)
  }
  const next = { ...state, background: color.trim() }
  return { msg: { id: `result-${id}`, role: 'tool', toolCallId: id, content: JSON.stringify({ status: 'ok', background: next.background }) }, state: next }
}

// chatLines is what the chat shows of the thread's messages.
export function chatLines(messages: readonly Message[]): ChatLine[] {
  const failed = new Set(messages.flatMap((m) => (m.role === 'tool' && m.error ? [m.toolCallId] : [])))
  const out: ChatLine[] = []
  for (const m of messages) {
    if (m.role !== 'user' && m.role !== 'assistant') continue
    const text = typeof m.content === 'string' ? m.content : Array.isArray(m.content) ? m.content.map((p) => ('text' in p ? p.text : '')).join('') : ''
    const tools = m.role === 'assistant'
      ? (m.toolCalls ?? []).map((c) => ({ name: c.function.name, args: c.function.arguments, failed: failed.has(c.id) }))
      : []
    if (text || tools.length) out.push({ id: m.id, role: m.role, text, tools })
  }
  return out
}

export interface DemoOptions {
  token: string
  threadId: string
  isColour: ColourCheck
  onChange: () => void
  initial?: DemoState
  url?: string
}

export class DemoChat {
  readonly agent: HttpAgent
  state: DemoState
  busy = false
  error = ''
  private readonly o: DemoOptions

  constructor(o: DemoOptions) {
    this.o = o
    this.state = o.initial ?? { background: 'white' }
    this.agent = new HttpAgent({
      url: o.url ?? '/agui',
      headers: { Authorization: `Bearer ${o.token}` },
      threadId: o.threadId,
      initialState: { ...this.state },
    })
  }

  get lines(): ChatLine[] {
    return chatLines(this.agent.messages)
  }

  // send posts what the person typed as a run and follows the runs it
  // leads to until the agent yields the turn.
  async send(text: string): Promise<void> {
    const s = text.trim()
    if (!s || this.busy) return
    this.agent.addMessage({ id: crypto.getRandomValues(new Uint32Array(2)).join('-'), role: 'user', content: s })
    this.error = ''
    this.busy = true
    this.o.onChange()
    try {
      for (let runs = 0; runs < 50; runs++) {
        const pending = await this.run()
        if (pending.length === 0) break
        for (const id of pending) this.runTool(id)
      }
    } catch (e) {
      this.error = e instanceof Error ? e.message : String(e)
    } finally {
      this.busy = false
      this.o.onChange()
    }
  }

  // stop ends the open run (the server counts the frontend away until
  // its next run).
  stop() {
    this.agent.abortRun()
  }

  // run runs the agent once and returns the tool calls it left for the page.
  private async run(): Promise<string[]> {
    let pending: string[] = []
    const sub: AgentSubscriber = {
      onMessagesChanged: () => this.o.onChange(),
      onRunFinishedEvent: (p) => {
        if (p.outcome === 'success') pending = p.pendingToolCallIds
      },
      onRunErrorEvent: ({ event }) => {
        this.error = event.message
      },
    }
    await this.agent.runAgent({ tools: [changeBackground] }, sub)
    return pending
  }

  private runTool(id: string) {
    const call = this.agent.messages.flatMap((m) => (m.role === 'assistant' ? (m.toolCalls ?? []) : [])).find((c) => c.id === id)
    if (!call) return
    const { msg, state } = applyTool(id, call.function.name, call.function.arguments, this.state, this.o.isColour)
    this.state = state
    this.agent.setState({ ...state })
    this.agent.addMessage(msg)
    this.o.onChange()
  }
}
