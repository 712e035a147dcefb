// An Ingress client (seed 003) on /ingress/ws, its WebSocket the real one
// of a Chromium page, runs the token's MCP agent: the real MCP client, over
// stdio with agentassistant-mcp -session <client_meta.session>, plays the
// agent. The client's declared tools become the agent's MCP tools
// (tools/list_changed); agent_invoke is the agent's wait_user_message,
// send_agent_message a delta, a call of a client tool a tool_request whose
// tool_result answers the call, a tool with requires_approval an
// approval_required first; the agent waiting again ends the run with done;
// cancel_run ends a run whose tool call is open. Every message the client
// receives is checked against seed 003's shapes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { launch, startMCP, startServer, text, type Server, type ToolResult } from './harness'

const SESSION = 'ingress-e2e'
let srv: Server
let mcp: Client
let browser: Browser
let listChanged = 0
let onListChanged: (() => void) | undefined

beforeAll(async () => {
  srv = await startServer()
  mcp = await startMCP(srv, { session: SESSION })
  mcp.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
    listChanged++
    onListChanged?.()
  })
  browser = await launch()
})

afterAll(async () => {
  await browser?.close()
  await mcp?.close()
  await srv?.stop()
})

type Ev = Record<string, unknown> & { type: string; ts: number }

// Seed 003 (数据模型): each event type's fields. BaseMessage's are every
// type's; seq, and hello_ack's last_seq, replayed and gap, are this
// server's documented additions (docs/ingress.md).
const BASE = ['type', 'ts', 'request_id', 'session_id', 'run_id', 'seq']
const SHAPES: Record<string, { fields: string[]; required: string[] }> = {
  hello_ack: { fields: ['last_seq', 'replayed', 'gap'], required: ['session_id'] },
  run_started: { fields: ['agent_id'], required: ['request_id', 'run_id', 'session_id', 'agent_id'] },
  delta: { fields: ['text'], required: ['run_id', 'text'] },
  state: { fields: ['state', 'detail'], required: ['run_id', 'state'] },
  tool_request: { fields: ['tool_call_id', 'tool_name', 'args', 'deadline_ts'], required: ['run_id', 'tool_call_id', 'tool_name', 'args'] },
  approval_required: {
    fields: ['approval_id', 'tool_call_id', 'tool_name', 'args_summary'],
    required: ['run_id', 'approval_id', 'tool_call_id', 'tool_name', 'args_summary'],
  },
  error: { fields: ['code', 'message', 'tool_call_id', 'approval_id'], required: ['code', 'message'] },
  done: { fields: ['usage'], required: ['run_id', 'usage'] },
}
const CODES = ['invalid_message', 'auth_failed', 'session_not_found', 'client_offline', 'orchestrator_error', 'internal_error']
const STRINGS = ['request_id', 'session_id', 'run_id', 'agent_id', 'text', 'state', 'tool_call_id', 'tool_name', 'approval_id', 'args_summary', 'code', 'message']
const OBJECTS = ['detail', 'args', 'usage']

// checkShape throws unless ev is a message of seed 003's shape.
function checkShape(ev: Ev): void {
  const shape = SHAPES[ev.type]
  if (!shape) throw new Error(`unknown event type: ${JSON.stringify(ev)}`)
  if (!Number.isInteger(ev.ts) || Math.abs(ev.ts - Date.now()) > 10 * 60_000) throw new Error(`ts is not the time in ms: ${JSON.stringify(ev)}`)
  for (const k of Object.keys(ev)) {
    if (!BASE.includes(k) && !shape.fields.includes(k)) throw new Error(`${ev.type} has a field seed 003 does not define, ${k}: ${JSON.stringify(ev)}`)
  }
  for (const k of shape.required) {
    if (ev[k] === undefined) throw new Error(`${ev.type} lacks ${k}: ${JSON.stringify(ev)}`)
  }
  for (const k of STRINGS) {
    if (ev[k] !== undefined && (typeof ev[k] !== 'string' || (k !== 'text' && ev[k] === ''))) throw new Error(`${ev.type}.${k} is not a string: ${JSON.stringify(ev)}`)
  }
  for (const k of OBJECTS) {
    const v = ev[k]
    if (v !== undefined && (typeof v !== 'object' || v === null || Array.isArray(v))) throw new Error(`${ev.type}.${k} is not an object: ${JSON.stringify(ev)}`)
  }
  for (const k of ['seq', 'last_seq', 'deadline_ts', 'replayed']) {
    if (ev[k] !== undefined && (!Number.isInteger(ev[k]) || (ev[k] as number) < 0)) throw new Error(`${ev.type}.${k} is not a count: ${JSON.stringify(ev)}`)
  }
  if (ev.type === 'error' && !CODES.includes(ev.code as string)) throw new Error(`error code not seed 003's: ${JSON.stringify(ev)}`)
  if (ev.type === 'tool_request' && ev.deadline_ts !== undefined && (ev.deadline_ts as number) <= ev.ts) throw new Error(`deadline_ts not ahead: ${JSON.stringify(ev)}`)
}

// IngressClient is a WebSocket of a Chromium page on /ingress/ws, opened
// from the server's own origin as a web client's would be; what it
// receives comes back here, checked.
class IngressClient {
  private queue: Ev[] = []
  private wake?: () => void
  private lastSeq = 0
  bad?: Error // a message not of seed 003's shape
  closed?: { code: number; reason: string }
  session = ''

  private constructor(private page: Page, private id: number) {}

  static async open(page: Page, id: number): Promise<IngressClient> {
    const c = new IngressClient(page, id)
    await page.exposeFunction(`ingress${id}`, (data: string) => c.receive(data))
    await page.exposeFunction(`ingressClosed${id}`, (code: number, reason: string) => {
      c.closed = { code, reason }
      c.wake?.()
    })
    await page.evaluate(
      ([url, id]) =>
        new Promise<void>((ok, fail) => {
          const ws = new WebSocket(url as string)
          const w = window as unknown as Record<string, unknown>
          w[`ws${id}`] = ws
          ws.onmessage = (e) => (w[`ingress${id}`] as (d: string) => void)(e.data as string)
          ws.onclose = (e) => (w[`ingressClosed${id}`] as (c: number, r: string) => void)(e.code, e.reason)
          ws.onopen = () => ok()
          ws.onerror = () => fail(new Error('websocket error'))
        }),
      [srv.url.replace('http', 'ws') + '/ingress/ws', id],
    )
    return c
  }

  // receive runs in the page's callback, whose errors stay in the page:
  // a bad message is kept for next to throw.
  private receive(data: string): void {
    try {
      const ev = JSON.parse(data) as Ev
      checkShape(ev)
      if (typeof ev.seq === 'number') {
        if (ev.seq <= this.lastSeq) throw new Error(`event out of order or twice (last seq ${this.lastSeq}): ${data}`)
        this.lastSeq = ev.seq
      }
      this.queue.push(ev)
    } catch (e) {
      this.bad ??= e as Error
    }
    this.wake?.()
  }

  // left returns what came and was not read.
  left(): Ev[] {
    return [...this.queue]
  }

  async send(msg: Record<string, unknown>): Promise<void> {
    await this.page.evaluate(([id, s]) => ((window as unknown as Record<string, WebSocket>)[`ws${id}`]).send(s as string), [this.id, JSON.stringify(msg)])
  }

  async next(): Promise<Ev> {
    const deadline = Date.now() + 20_000
    while (this.queue.length === 0 || this.bad) {
      if (this.bad) throw this.bad
      if (this.closed) throw new Error(`connection closed: ${JSON.stringify(this.closed)}`)
      const left = deadline - Date.now()
      if (left <= 0) throw new Error('no event within 20s')
      await new Promise<void>((ok) => {
        const t = setTimeout(ok, left)
        this.wake = () => {
          clearTimeout(t)
          ok()
        }
      })
      this.wake = undefined
    }
    return this.queue.shift()!
  }

  async expect(type: string): Promise<Ev> {
    const ev = await this.next()
    if (ev.type !== type) throw new Error(`got ${JSON.stringify(ev)}, want a ${type}`)
    return ev
  }
}

// The client's tools, as hello's client_meta declares them.
const TOOLS = [
  {
    name: 'browser.screenshot',
    description: 'Take a screenshot of a page',
    parameters: { type: 'object', properties: { url: { type: 'string' } }, required: ['url'] },
  },
  {
    name: 'payments.transfer',
    description: 'Send money',
    parameters: { type: 'object', properties: { amount: { type: 'number' } } },
    requires_approval: true,
  },
]

const now = () => Date.now()

// untilTools waits for tools/list_changed until the agent's tool list has
// every name.
async function untilTools(names: string[]): Promise<Awaited<ReturnType<Client['listTools']>>['tools']> {
  const deadline = Date.now() + 30_000
  for (let seen = listChanged; ; ) {
    if (listChanged === seen) {
      await new Promise<void>((ok, fail) => {
        const t = setTimeout(() => fail(new Error(`no tools/list_changed with ${names}`)), deadline - Date.now())
        onListChanged = () => {
          clearTimeout(t)
          ok()
        }
      })
      onListChanged = undefined
    }
    seen = listChanged
    const { tools } = await mcp.listTools()
    if (names.every((n) => tools.some((t) => t.name === n))) return tools
  }
}

describe('Ingress client with the MCP agent as the orchestrator', () => {
  it('streams a run, runs client tools with approval, and cancels', async () => {
    const page = await browser.newPage()
    await page.goto(`${srv.url}/health`)
    const c = await IngressClient.open(page, 1)

    // hello: the declared tools become the agent's MCP tools.
    const before = listChanged
    await c.send({ type: 'hello', ts: now(), user_id: 'u1', api_key: srv.token, client_meta: { app: 'web', version: '1.0.0', session: SESSION, tools: TOOLS } })
    const ack = await c.expect('hello_ack')
    c.session = ack.session_id as string
    expect(c.session).toMatch(/^sess_/)
    const tools = await untilTools(['browser_screenshot', 'payments_transfer'])
    expect(listChanged).toBeGreaterThan(before)
    const shot = tools.find((t) => t.name === 'browser_screenshot')!
    expect(shot.description).toContain('Take a screenshot')
    expect(Object.keys(shot.inputSchema.properties ?? {}).sort()).toEqual(['reason', 'url'])

    // agent_invoke (Appendix A's, but for the session) → run_started; the
    // agent's wait_user_message gets the message and the run id.
    const heard = mcp.callTool({ name: 'wait_user_message', arguments: { timeout: 30 } })
    await c.send({ type: 'agent_invoke', ts: now(), request_id: 'req_001', session_id: c.session, agent_id: 'agent_a', message: { role: 'user', content: '帮我截个图' } })
    const started = await c.expect('run_started')
    expect(started).toMatchObject({ request_id: 'req_001', session_id: c.session, agent_id: 'agent_a' })
    const run = started.run_id as string
    const msg = text((await heard) as ToolResult)
    expect(msg).toContain('帮我截个图')
    expect(msg).toContain(`Ingress run ${run}`)

    // send_agent_message → delta.
    await mcp.callTool({ name: 'send_agent_message', arguments: { text: '好的，' } })
    expect(await c.expect('delta')).toMatchObject({ run_id: run, text: '好的，' })
    await mcp.callTool({ name: 'send_agent_message', arguments: { text: '马上截图' } })
    expect(await c.expect('delta')).toMatchObject({ run_id: run, text: '马上截图' })

    // The agent calls the client's tool: tool_request; the client's
    // tool_result answers the MCP call.
    const call = mcp.callTool({ name: 'browser_screenshot', arguments: { url: 'https://example.com', reason: 'the user asked' } })
    const req = await c.expect('tool_request')
    expect(req).toMatchObject({ run_id: run, tool_name: 'browser.screenshot', args: { url: 'https://example.com' } })
    expect(req.deadline_ts).toBeGreaterThan(req.ts)
    await c.send({ type: 'tool_result', ts: now(), run_id: run, tool_call_id: req.tool_call_id, ok: true, result: { file_path: '/tmp/screenshot.png' } })
    const res = (await call) as ToolResult
    expect(res.isError).toBeFalsy()
    expect(text(res)).toContain('/tmp/screenshot.png')

    // A tool that needs approval: approval_required, then the approved
    // call is a tool_request.
    const pay = mcp.callTool({ name: 'payments_transfer', arguments: { amount: 100, reason: 'pay the electricity bill' } })
    const ap = await c.expect('approval_required')
    expect(ap).toMatchObject({ run_id: run, tool_name: 'payments.transfer' })
    expect(ap.args_summary).toContain('pay the electricity bill')
    expect(ap.args_summary).toContain('100')
    await c.send({ type: 'approval_decision', ts: now(), run_id: run, approval_id: ap.approval_id, decision: 'approve', reason: '已确认' })
    expect(await c.expect('state')).toMatchObject({ run_id: run, state: 'RUNNING', detail: { approval_id: ap.approval_id, decision: 'approve', decided_by: 'client' } })
    const payReq = await c.expect('tool_request')
    expect(payReq).toMatchObject({ run_id: run, tool_call_id: ap.tool_call_id, tool_name: 'payments.transfer', args: { amount: 100 } })
    await c.send({ type: 'tool_result', ts: now(), run_id: run, tool_call_id: payReq.tool_call_id, ok: true, result: { receipt: 'r-42' } })
    const paid = (await pay) as ToolResult
    expect(paid.isError).toBeFalsy()
    expect(text(paid)).toContain('r-42')

    // A rejection answers the agent's call with the reason.
    const pay2 = mcp.callTool({ name: 'payments_transfer', arguments: { amount: 5000, reason: 'pay again' } })
    const ap2 = await c.expect('approval_required')
    await c.send({ type: 'approval_decision', ts: now(), run_id: run, approval_id: ap2.approval_id, decision: 'reject', reason: 'too much' })
    expect(await c.expect('state')).toMatchObject({ run_id: run, state: 'REJECTED' })
    const refused = (await pay2) as ToolResult
    expect(refused.isError).toBe(true)
    expect(text(refused)).toContain('too much')

    // The agent yields the turn: done, with usage.
    const waited = mcp.callTool({ name: 'wait_user_message', arguments: { timeout: 1 } })
    const done = await c.expect('done')
    expect(done.run_id).toBe(run)
    expect(done.usage).toMatchObject({ messages: 2 })
    expect(typeof (done.usage as Record<string, unknown>).duration_ms).toBe('number')
    await waited

    // cancel_run ends a run whose tool call is open; the agent's call fails.
    const heard2 = mcp.callTool({ name: 'wait_user_message', arguments: { timeout: 30 } })
    await c.send({ type: 'agent_invoke', ts: now(), request_id: 'req_002', session_id: c.session, agent_id: 'agent_a', message: { role: 'user', content: 'another screenshot' } })
    const run2 = (await c.expect('run_started')).run_id as string
    expect(run2).not.toBe(run)
    expect(text((await heard2) as ToolResult)).toContain(run2)
    const call2 = mcp.callTool({ name: 'browser_screenshot', arguments: { url: 'https://example.org', reason: 'asked again' } })
    expect(await c.expect('tool_request')).toMatchObject({ run_id: run2, tool_name: 'browser.screenshot' })
    await c.send({ type: 'cancel_run', ts: now(), run_id: run2 })
    expect(await c.expect('state')).toMatchObject({ run_id: run2, state: 'CANCELLED' })
    expect((await c.expect('done')).run_id).toBe(run2)
    const cut = (await call2) as ToolResult
    expect(cut.isError).toBe(true)
    expect(text(cut)).toContain(`run ${run2} ended`)

    // Cancelling a run that has ended gets seed 003's error, and the
    // connection lives on.
    await c.send({ type: 'cancel_run', ts: now(), run_id: run2 })
    expect(await c.expect('error')).toMatchObject({ code: 'invalid_message' })
    expect(c.closed).toBeUndefined()
    expect(c.bad).toBeUndefined()
    expect(c.left()).toEqual([])
    await page.close()
  })
})
