// An AG-UI frontend (the real @ag-ui/client HttpAgent) drives a thread on
// POST /agui while the real MCP client, over stdio with agentassistant-mcp
// -session <threadId>, plays the agent: phase one (the agent calls the
// frontend tool: TOOL_CALL_START, ARGS, END, RUN_FINISHED), phase two (the
// frontend's tool result, alone, reaches the waiting MCP call). Every event
// is checked against @ag-ui/core's schemas.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { HttpAgent } from '@ag-ui/client'
import type { BaseEvent, Tool } from '@ag-ui/core'
import { EventSchemas } from '@ag-ui/core/schemas'
import { launch, SHOTS, startMCP, startServer, text, type Server, type ToolResult } from './harness'

const THREAD = 'agui-e2e'
let srv: Server
let mcp: Client

beforeAll(async () => {
  srv = await startServer()
  mcp = await startMCP(srv, { session: THREAD })
})

afterAll(async () => {
  await mcp?.close()
  await srv?.stop()
})

const changeBackground: Tool = {
  name: 'change_background',
  description: 'Change the background colour of the page.',
  parameters: { type: 'object', properties: { color: { type: 'string' } }, required: ['color'] },
}

// run runs the agent once and returns every event it saw, each one
// parsed with @ag-ui/core's schema first.
async function run(agent: HttpAgent, runId: string): Promise<BaseEvent[]> {
  const events: BaseEvent[] = []
  await agent.runAgent({ runId, tools: [changeBackground] }, {
    onEvent({ event }) {
      const parsed = EventSchemas.safeParse(event)
      if (!parsed.success) throw new Error(`invalid ${event.type}: ${parsed.error.message}`)
      events.push(event)
    },
  })
  return events
}

const types = (evs: BaseEvent[]) => evs.map((e) => e.type).join(' ')

describe('AG-UI front door', () => {
  it('runs both phases of a frontend tool call with the MCP agent', async () => {
    const agent = new HttpAgent({
      url: `${srv.url}/agui`,
      headers: { Authorization: `Bearer ${srv.token}` },
      threadId: THREAD,
      initialState: { background: 'white' },
    })
    agent.addMessage({ id: 'u1', role: 'user', content: 'Make the background blue, please.' })

    // The agent's side, as an LLM client would act on the user's message.
    const agentTurn = (async () => {
      const heard = text((await mcp.callTool({ name: 'wait_user_message', arguments: { timeout: 20 } })) as ToolResult)
      expect(heard).toContain('Make the background blue')
      expect((await mcp.callTool({ name: 'start_session', arguments: { study_id: 'agui' } })).isError).toBeFalsy()
      const state = text((await mcp.callTool({ name: 'get_ui_state', arguments: {} })) as ToolResult)
      expect(state).toContain('white')
      const { tools } = await mcp.listTools()
      expect(tools.map((t) => t.name)).toContain('change_background')
      await mcp.callTool({ name: 'send_agent_message', arguments: { text: 'Changing it now.' } })
      return mcp.callTool({ name: 'change_background', arguments: { color: 'blue', reason: 'the user asked for blue' } }, undefined, { timeout: 60_000 })
    })()

    // Phase one: the tool call is the run's end.
    const one = await run(agent, 'run-1')
    expect(types(one)).toBe(
      'RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED',
    )
    expect(one.map((e) => e.type)).not.toContain('TOOL_CALL_RESULT')
    expect(one.map((e) => e.type)).not.toContain('RUN_ERROR')
    const start = one[4] as BaseEvent & { toolCallId: string; toolCallName: string }
    expect(start.toolCallName).toBe('change_background')
    const args = JSON.parse((one[5] as BaseEvent & { delta: string }).delta)
    expect(args).toEqual({ color: 'blue' })
    // The client assembled the assistant's tool call from the events.
    const call = agent.messages.flatMap((m) => (m.role === 'assistant' ? (m.toolCalls ?? []) : [])).find((c) => c.id === start.toolCallId)
    expect(call?.function.name).toBe('change_background')

    // The frontend runs the tool and sends only its result.
    agent.setState({ background: 'blue' })
    agent.addMessage({ id: 't1', role: 'tool', toolCallId: start.toolCallId, content: JSON.stringify({ status: 'ok' }) })
    const afterTool = (async () => {
      const res = (await agentTurn) as ToolResult
      expect(res.isError).toBeFalsy()
      expect(text(res)).toContain('status')
      await mcp.callTool({ name: 'send_agent_message', arguments: { text: 'The background is blue now.' } })
      await mcp.callTool({ name: 'wait_user_message', arguments: { timeout: 2 } }) // yields the turn
    })()
    const two = await run(agent, 'run-2')
    await afterTool
    expect(types(two)).toBe('RUN_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END RUN_FINISHED')
    expect((two[2] as BaseEvent & { delta: string }).delta).toBe('The background is blue now.')
  })
})

describe('AG-UI frontend that goes away', () => {
  const GONE = 'agui-gone'
  let gsrv: Server
  let gmcp: Client

  beforeAll(async () => {
    gsrv = await startServer({ config: '[agui]\nfrontend_grace = "2s"\n' })
    gmcp = await startMCP(gsrv, { session: GONE })
  })

  afterAll(async () => {
    await gmcp?.close()
    await gsrv?.stop()
  })

  it('fails the MCP call with a clear message when the frontend never sends the tool result', async () => {
    const agent = new HttpAgent({
      url: `${gsrv.url}/agui`,
      headers: { Authorization: `Bearer ${gsrv.token}` },
      threadId: GONE,
    })
    agent.addMessage({ id: 'u1', role: 'user', content: 'Make it red.' })
    const agentTurn = (async () => {
      await gmcp.callTool({ name: 'wait_user_message', arguments: { timeout: 20 } })
      expect((await gmcp.callTool({ name: 'start_session', arguments: {} })).isError).toBeFalsy()
      return (await gmcp.callTool({ name: 'call_ui_tool', arguments: { tool_name: 'change_background', params: { color: 'red' }, reason: 'asked' } },
        undefined, { timeout: 60_000 })) as ToolResult
    })()
    const one = await run(agent, 'run-1')
    expect(types(one)).toBe('RUN_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END RUN_FINISHED')

    // The page is closed: no phase two ever comes. The call fails after
    // the 2 s grace (not the 20 s timeout), saying what happened.
    const res = await agentTurn
    expect(res.isError).toBe(true)
    expect(text(res)).toContain(`AG-UI frontend of thread "${GONE}"`)
    expect(text(res)).toContain('may or may not have happened')
    expect(text(res)).not.toContain('did not answer within')
    const state = text((await gmcp.callTool({ name: 'get_ui_state', arguments: {} })) as ToolResult)
    expect(state).toContain('disconnected')

    // The frontend's next run joins again: the agent hears the user.
    agent.addMessage({ id: 'u2', role: 'user', content: 'Still there?' })
    const heard = (async () => text((await gmcp.callTool({ name: 'wait_user_message', arguments: { timeout: 20 } })) as ToolResult))()
    const again = run(agent, 'run-2')
    expect(await heard).toContain('Still there?')
    await gmcp.callTool({ name: 'wait_user_message', arguments: { timeout: 1 } }) // yields the turn
    expect(types(await again)).toBe('RUN_STARTED RUN_FINISHED')
  })
})

// firstEvents posts a run with fetch and returns its first n events,
// each parsed with @ag-ui/core's schema, then lets the run go.
async function firstEvents(s: Server, body: unknown, n: number): Promise<BaseEvent[]> {
  const ctl = new AbortController()
  const r = await fetch(`${s.url}/agui`, {
    method: 'POST', signal: ctl.signal, body: JSON.stringify(body),
    headers: { Authorization: `Bearer ${s.token}`, 'Content-Type': 'application/json', Accept: 'text/event-stream' },
  })
  expect(r.status).toBe(200)
  const reader = r.body!.getReader()
  const dec = new TextDecoder()
  let buf = ''
  const out: BaseEvent[] = []
  while (out.length < n) {
    const { value, done } = await reader.read()
    if (done) break
    buf += dec.decode(value, { stream: true })
    let i: number
    while ((i = buf.indexOf('\n\n')) >= 0 && out.length < n) {
      const data = buf.slice(0, i).split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n')
      buf = buf.slice(i + 2)
      const ev = JSON.parse(data)
      const parsed = EventSchemas.safeParse(ev)
      if (!parsed.success) throw new Error(`invalid ${ev.type}: ${parsed.error.message}`)
      out.push(ev)
    }
  }
  ctl.abort()
  return out
}

describe('AG-UI tool names and take-overs', () => {
  it('tells the frontend, in a valid CUSTOM event, which tools the agent knows by another name', async () => {
    const evs = await firstEvents(srv, {
      threadId: 'agui-names', runId: 'r1', messages: [], state: {}, context: [], forwardedProps: {},
      tools: [changeBackground, { name: 'page.reload', description: 'Reload', parameters: { type: 'object' } },
        { name: 'get_ui_state', description: 'The page state', parameters: { type: 'object' } }],
    }, 2)
    expect(types(evs)).toBe('RUN_STARTED CUSTOM')
    const custom = evs[1] as BaseEvent & { name: string; value: { tools: { name: string; mcpName?: string; note?: string }[] } }
    expect(custom.name).toBe('agentassistant.tool_names')
    expect(custom.value.tools).toEqual([
      { name: 'page.reload', mcpName: 'page_reload' },
      { name: 'get_ui_state', note: expect.stringContaining('call_ui_tool') },
    ])
  })

  it('says on the booking page that an AG-UI frontend took over its relay session', async () => {
    const browser = await launch()
    try {
      for (const [width, height, locale] of [[1280, 800, 'en-US'], [390, 844, 'en-US']] as const) {
        const session = `takeover-${width}`
        const ctx = await browser.newContext({ viewport: { width, height }, locale })
        const page = await ctx.newPage()
        await page.goto(`${srv.url}/booking?token=${srv.token}&session=${session}`)
        await page.locator('[data-testid=host-conn][data-state=online]').waitFor()
        await firstEvents(srv, { threadId: session, runId: 'r1', messages: [], tools: [] }, 1)

        const chip = page.locator('[data-testid=host-conn][data-state=replaced]')
        await chip.waitFor()
        expect(await chip.getAttribute('aria-label')).toBe(`An AG-UI frontend (thread ${session}) took over`)
        if (SHOTS) await page.screenshot({ path: `${SHOTS}/booking-replaced-by-agui-${width}.png` })
        await ctx.close()
      }
    } finally {
      await browser.close()
    }
  })
})
