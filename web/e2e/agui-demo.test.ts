// The AG-UI demo page (/agui-demo) in Chromium: a person asks for a
// colour in its chat; the real MCP client, over stdio with
// agentassistant-mcp -session <the page's thread>, plays the agent: it
// reads the message, calls the page's frontend tool change_background,
// which the page runs (its background changes) and answers in phase two,
// then sends its summary, which the page shows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, SHOTS, startMCP, startServer, text, type Server, type ToolResult } from './harness'

const THREAD = 'demo'
let srv: Server
let mcp: Client
let browser: Browser
let page: Page

beforeAll(async () => {
  srv = await startServer()
  mcp = await startMCP(srv, { session: THREAD })
  browser = await launch()
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' })
  page = await ctx.newPage()
  await page.goto(`${srv.url}/agui-demo?token=${srv.token}&thread=${THREAD}`)
  await page.locator('[data-testid=agui-thread]', { hasText: THREAD }).waitFor()
})

afterAll(async () => {
  await browser?.close()
  await mcp?.close()
  await srv?.stop()
})

async function tool(name: string, args: Record<string, unknown> = {}): Promise<ToolResult> {
  return (await mcp.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })) as ToolResult
}

const background = () => page.locator('[data-testid=agui-canvas]').evaluate((el) => getComputedStyle(el).backgroundColor)

describe('the AG-UI demo page driven through agentassistant-mcp', () => {
  it('drops the token from the address bar', () => {
    expect(page.url()).toBe(`${srv.url}/agui-demo?thread=${THREAD}`)
  })

  it('with a token the server refuses, says what to do and takes nothing more', async () => {
    const other = await browser.newPage({ viewport: { width: 390, height: 844 }, locale: 'en-US' })
    await other.goto(`${srv.url}/agui-demo?token=not-the-token&thread=elsewhere`)
    await other.locator('input[data-testid=agui-input]').fill('hello')
    await other.locator('input[data-testid=agui-input]').press('Enter')
    await expect(other.locator('[data-testid=agui-error]').textContent()).resolves.toContain('The server refused this token')
    await expect(other.locator('input[data-testid=agui-input]').isDisabled()).resolves.toBe(true)
    if (process.env.AA_LOOK) await other.screenshot({ path: `${process.env.AA_LOOK}/agui-refused-phone.png` })
    await other.close()
  })

  it('changes its background when the agent calls change_background, and shows the summary', async () => {
    expect(await background()).toBe('rgb(255, 255, 255)')
    const heard = tool('wait_user_message', { timeout: 30 })
    await page.locator('input[data-testid=agui-input]').fill('Please make the background steel blue.')
    await page.locator('input[data-testid=agui-input]').press('Enter')
    await page.locator('[data-testid=agui-message][data-role=user]', { hasText: 'steel blue' }).waitFor()
    await page.locator('[data-testid=agui-waiting]').waitFor()
    expect(text(await heard)).toContain('Please make the background steel blue.')

    expect((await tool('start_session', { study_id: 'agui-demo' })).isError).toBeFalsy()
    const state = text(await tool('get_ui_state'))
    expect(state).toContain('change_background')
    expect(state).toContain('"background":"white"')
    expect((await mcp.listTools()).tools.map((t) => t.name)).toContain('change_background')
    await tool('send_agent_message', { text: 'Changing the background to **steel blue**.' })

    // A colour the page refuses: the agent hears why, nothing changes.
    const bad = await tool('change_background', { color: 'url(https://evil.example/x.png)', reason: 'testing' })
    expect(bad.isError).toBe(true)
    expect(text(bad)).toContain('CSS colour')
    expect(await background()).toBe('rgb(255, 255, 255)')
    await page.locator('[data-testid=agui-tool][data-failed=true]', { hasText: 'evil.example' }).waitFor()

    const res = await tool('change_background', { color: 'steelblue', reason: 'the person asked for steel blue' })
    expect(res.isError, text(res)).toBeFalsy()
    expect(text(res)).toContain('"status":"ok"')
    await expect.poll(background).toBe('rgb(70, 130, 180)') // steelblue, once the transition has run
    await expect.poll(async () => text(await tool('get_ui_state'))).toContain('"background":"steelblue"')
    await page.locator('[data-testid=agui-tool]', { hasText: 'steelblue' }).waitFor()

    await tool('send_agent_message', { text: 'Done: the background is steel blue now.' })
    await tool('wait_user_message', { timeout: 1 }) // yields the turn: the run ends
    await page.locator('[data-testid=agui-message][data-role=assistant]', { hasText: 'the background is steel blue now' }).waitFor()
    await page.locator('[data-testid=agui-waiting]').waitFor({ state: 'detached' })
    await expect.poll(() => page.locator('[data-testid=agui-background]').textContent()).toBe('steelblue')
    await expect.poll(() => page.locator('[data-testid=agui-send]').isEnabled()).toBe(true)
    expect(await page.locator('[data-testid=agui-error]').count()).toBe(0)

    if (SHOTS) {
      await page.screenshot({ path: `${SHOTS}/agui-demo-desktop.png` })
      await page.setViewportSize({ width: 390, height: 844 })
      await page.locator('[data-testid=agui-message][data-role=assistant]', { hasText: 'steel blue now' }).scrollIntoViewIfNeeded()
      await page.screenshot({ path: `${SHOTS}/agui-demo-phone.png` })
    }
  })
})
