// A call over /mcp whose stream is cut while the person has the question:
// the official MCP TypeScript SDK's client resumes the stream
// (Last-Event-ID) by itself and the call resolves with the answer given
// meanwhile, not after the client's own timeout.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser } from 'playwright-core'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { launch, startProxy, startServer, text, type Proxy, type Server, type ToolResult } from './harness'

let srv: Server
let browser: Browser
let proxy: Proxy
let client: Client

beforeAll(async () => {
  srv = await startServer()
  browser = await launch()
  proxy = await startProxy(Number(srv.port))
})

afterAll(async () => {
  await client?.close().catch(() => {})
  await proxy?.close()
  await browser?.close()
  await srv?.stop()
})

describe('MCP over Streamable HTTP, a cut stream', () => {
  it('resumes and resolves with the answer given while it was cut', async () => {
    // The client reaches the server through a proxy that can cut every
    // connection; the inbox page reaches it directly.
    const transport = new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${proxy.port}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${srv.token}` } },
    })
    client = new Client({ name: 'e2e-resume', version: '1.0.0' })
    await client.connect(transport)

    const ctx = await browser.newContext({ viewport: { width: 1200, height: 850 }, locale: 'en-US' })
    await ctx.addInitScript(() => localStorage.setItem('aa.nickname', 'resume-pc'))
    const page = await ctx.newPage()
    await page.goto(`${srv.url}/?token=${srv.token}`)
    await page.locator('[data-testid=conn][data-state=online]').waitFor()

    // No progressToken: the stream's first event is what makes it resumable.
    const call = client.callTool({ name: 'ask_question', arguments: { question: 'Over HTTP: cut, then resumed?' } }, undefined,
      { timeout: 300_000 }) as Promise<ToolResult>
    await page.locator('[data-status=waiting]', { hasText: 'cut, then resumed' }).waitFor()
    proxy.setDown(true) // every connection of the client cut: a Wi-Fi blip
    proxy.setDown(false)

    await page.locator('[data-status=waiting]', { hasText: 'cut, then resumed' }).click()
    await page.locator('textarea[data-testid=reply-input]').fill('Yes, it came through.')
    await page.locator('[data-testid=send]').click()
    const r = await call
    expect(r.isError).toBeFalsy()
    expect(text(r)).toBe('Yes, it came through.')
    await ctx.close()
  })
})

describe('MCP over Streamable HTTP, the server restarted', () => {
  for (const how of ['stopped', 'killed'] as const) {
    it(`${how}: the call waiting then resolves with the answer given after it, the session goes on`, async () => {
      // The client keeps its session ID (the SDK never initializes
      // again by itself) and resumes the call's stream from it.
      let s = await startServer()
      const transport = new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${s.token}` } },
      })
      const c = new Client({ name: 'e2e-restart', version: '1.0.0' })
      try {
        await c.connect(transport)
        const call = c.callTool({ name: 'ask_question', arguments: { question: `Asked before the server was ${how}?` } }, undefined,
          { timeout: 300_000 }) as Promise<ToolResult>
        const ctx = await browser.newContext({ viewport: { width: 1200, height: 850 }, locale: 'en-US' })
        let page = await ctx.newPage()
        await page.goto(`${s.url}/?token=${s.token}`)
        await page.locator('[data-status=waiting]', { hasText: 'Asked before the server' }).waitFor()
        await page.close()
        const { data, token, port } = s
        if (how === 'killed') await s.kill9()
        else {
          s.proc.kill('SIGTERM')
          await new Promise((r) => s.proc.once('exit', r))
        }
        s = await startServer({ data, token, port })
        page = await ctx.newPage()
        await page.goto(`${s.url}/?token=${s.token}`)
        await page.locator('[data-status=waiting]', { hasText: 'Asked before the server' }).click()
        await page.locator('textarea[data-testid=reply-input]').fill('Answered after the restart.')
        await page.locator('[data-testid=send]').click()
        const r = await call
        expect(r.isError).toBeFalsy()
        expect(text(r)).toBe('Answered after the restart.')
        expect((await c.listTools()).tools.map((t) => t.name)).toContain('ask_question')
        await ctx.close()
      } finally {
        await c.close().catch(() => {})
        await s.stop()
      }
    })
  }
})
