import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, SHOTS, startMCP, startServer, text, type Server, type ToolResult } from './harness'

let srv: Server
let mcp: Client
let browser: Browser
let page: Page

beforeAll(async () => {
  srv = await startServer()
  browser = await launch()
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 860 }, locale: 'en-US' })
  page = await ctx.newPage()
  await page.goto(`${srv.url}/booking?token=${srv.token}`)
  await page.locator('[data-testid=host-conn][data-state=online]').waitFor()
  mcp = await startMCP(srv) // after the host joined, so its first tools are known at start
})

afterAll(async () => {
  await browser?.close()
  await mcp?.close()
  await srv?.stop()
})

async function tool(name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  return (await mcp.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as ToolResult
}

async function ok(name: string, args: Record<string, unknown> = {}) {
  const r = await tool(name, args)
  expect(r.isError, `${name} ${JSON.stringify(args)}: ${text(r)}`).toBeFalsy()
  expect(text(r)).not.toContain('backendData')
  return text(r)
}

async function stageIs(stage: string) {
  await page.locator(`[data-testid=stage][data-stage=${stage}]`).waitFor()
}

describe('booking host in a real browser, driven through agentassistant-mcp', () => {
  it('the host page drops the token from the address bar and publishes its tools', async () => {
    expect(page.url()).toBe(`${srv.url}/booking`)
    const names = (await mcp.listTools()).tools.map((t) => t.name)
    for (const n of ['select', 'next', 'postMessage', 'get_ui_state', 'call_ui_tool']) expect(names).toContain(n)
  })

  it('books two seats step by step while the page shows each step', async () => {
    const started = await ok('start_session', { study_id: 'pilot-01', participant_id: 'P07' })
    const sid = /s-\d{8}-\d{3}/.exec(started)![0]
    await page.locator(`[data-testid=session][data-session=${sid}]`).waitFor()

    expect(await ok('get_ui_state')).toContain('stage: movie')
    await ok('select', { itemId: 'm1', reason: 'The participant wants Dune.' })
    await page.locator('[data-testid=agent-action]', { hasText: 'The participant wants Dune.' }).waitFor()
    await page.locator('[data-item=m1].aa-highlight').waitFor()
    if (SHOTS) await page.screenshot({ path: `${SHOTS}/booking-desktop.png` })
    expect(await ok('next', { reason: 'Movie chosen.' })).toContain('stage: date')
    await stageIs('date')
    await ok('select', { itemId: 'd2', reason: 'Saturday.' })
    await ok('next', { reason: 'Date chosen.' })
    await stageIs('showtime')
    await ok('select', { itemId: 't4', reason: 'Evening show.' })
    expect(await ok('next', { reason: 'Showtime chosen.' })).toContain('setQuantity')
    await stageIs('tickets')

    const bad = await tool('call_ui_tool', { tool_name: 'setQuantity', params: { quantity: -2 }, reason: 'test' })
    expect(bad.isError).toBe(true)
    expect(text(bad)).toContain('INVALID_PARAMS')
    await ok('call_ui_tool', { tool_name: 'setQuantity', params: { quantity: 2 }, reason: 'Two people.' })
    await expect.poll(() => page.locator('[data-testid=quantity]').textContent()).toBe('2')
    await ok('next', { reason: 'Tickets set.' })
    await stageIs('seats')
    const taken = await tool('select', { itemId: 'C4', reason: 'centre' })
    expect(text(taken)).toContain('taken')
    await ok('select', { itemId: 'B5', reason: 'Centre, row B.' })
    await ok('select', { itemId: 'B6', reason: 'Next to it.' })
    await page.locator('[data-item=B6].aa-highlight').waitFor()
    await ok('next', { reason: 'Seats chosen.' })
    await stageIs('confirm')
    await ok('send_agent_message', { text: 'Two seats, B5 and B6, Saturday 20:30. Shall I book?' })
    await page.locator('[data-testid=chat-log]', { hasText: 'Shall I book?' }).waitFor()

    // The participant answers in the booking chat; the agent hears it.
    await page.locator('input[data-testid=booking-chat]').fill('Yes, book them.')
    await page.keyboard.press('Enter')
    const heard = await ok('wait_user_message', { timeout: 10 })
    expect(heard).toContain('Yes, book them.')
    expect(heard).toContain('stage: confirm')

    const done = await ok('next', { reason: 'The participant confirmed.' })
    expect(done).toContain('stage: done')
    expect(done).toContain('"booked":true')
    await stageIs('done')
    await expect.poll(() => page.locator('[data-testid=booked-seats]').textContent()).toBe('B5, B6')

    const ended = await ok('end_session', { reason: 'study-complete' })
    expect(ended).toContain(`logs/study/${sid}.jsonl`)
    await stageIs('movie') // the host reset
    await page.locator('[data-testid=session][data-session=""]').waitFor()

    const lines = readFileSync(join(srv.data, 'logs', 'study', `${sid}.jsonl`), 'utf8').trim().split('\n')
    const events = lines.map((l) => JSON.parse(l))
    events.forEach((e, i) => {
      expect(e.eventIndex).toBe(i)
      expect(e.sessionId).toBe(sid)
      expect(['in', 'out', 'internal']).toContain(e.direction)
    })
    const types = events.map((e) => `${e.direction} ${e.type}`)
    for (const want of ['in session.start', 'out session.started', 'in tool.call', 'out tool.result', 'out state.updated',
      'in agent.message', 'out user.message', 'out error', 'in session.end', 'out session.ended'])
      expect(types).toContain(want)
    const raw = lines.join('\n')
    expect(raw).not.toContain('backendData')
    expect(raw).not.toContain('seatMap')
    expect(raw).not.toContain(srv.token)
  })

  it('phone layout of the booking page', async () => {
    if (!SHOTS) return
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'zh-CN' })
    const p = await ctx.newPage()
    await p.goto(`${srv.url}/booking?token=${srv.token}`)
    await p.locator('[data-testid=host-conn][data-state=online]').waitFor()
    await p.screenshot({ path: `${SHOTS}/booking-phone.png` })
    await ctx.close()
    // The phone took over as host; the desktop page was told.
    await page.locator('[data-testid=host-conn][data-state=replaced]').waitFor()
  })
})
