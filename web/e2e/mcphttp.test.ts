// MCP over Streamable HTTP at /mcp, and questions offered as a form in the
// agent's client (elicitation), with the official MCP TypeScript SDK
// client against the real binaries and a real inbox page.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { request as httpRequest } from 'node:http'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ElicitRequestSchema, type ElicitRequest, type ElicitResult } from '@modelcontextprotocol/sdk/types.js'
import { launch, SHOTS, startServer, text, type Server, type ToolResult } from './harness'

const BIN = resolve(__dirname, '../../bin')

let srv: Server
let browser: Browser
const clients: Client[] = []

beforeAll(async () => {
  srv = await startServer()
  browser = await launch()
})

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => {})
  await browser?.close()
  await srv?.stop()
})

// A form the client was asked to show: the request, the handler's abort
// signal, and a way to answer it.
interface Form {
  request: ElicitRequest
  signal: AbortSignal
  answer(r: ElicitResult): void
}

// formsOf makes c show forms: each one arrives on the returned queue.
function formsOf(c: Client): () => Promise<Form> {
  const waiting: ((f: Form) => void)[] = []
  const queued: Form[] = []
  c.setRequestHandler(ElicitRequestSchema, (request, extra) => new Promise<ElicitResult>((answer) => {
    const f = { request, signal: extra.signal, answer }
    const w = waiting.shift()
    if (w) w(f)
    else queued.push(f)
  }))
  return () => queued.length ? Promise.resolve(queued.shift()!) : new Promise((ok) => waiting.push(ok))
}

async function overHTTP(token = srv.token, forms = false, query = ''): Promise<Client> {
  const transport = new StreamableHTTPClientTransport(new URL(`${srv.url}/mcp${query}`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  })
  const c = new Client({ name: 'e2e-http', version: '1.0.0' }, { capabilities: forms ? { elicitation: { form: {} } } : {} })
  await c.connect(transport)
  clients.push(c)
  return c
}

async function overStdio(): Promise<Client> {
  const home = mkdtempSync(join(tmpdir(), 'aa-home-'))
  const transport = new StdioClientTransport({
    command: join(BIN, 'agentassistant-mcp'),
    args: ['-host', srv.host, '-port', srv.port, '-token', srv.token],
    env: { HOME: home, XDG_CONFIG_HOME: home, PATH: process.env.PATH ?? '' },
    cwd: home,
    stderr: 'ignore',
  })
  const c = new Client({ name: 'e2e-stdio', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } })
  c.onclose = () => rmSync(home, { recursive: true, force: true })
  await c.connect(transport)
  clients.push(c)
  return c
}

async function openInbox(nickname: string, viewport = { width: 1200, height: 850 }): Promise<Page> {
  const phone = viewport.width < 600
  const ctx = await browser.newContext({ viewport, locale: 'en-US', isMobile: phone, hasTouch: phone })
  await ctx.addInitScript((n) => localStorage.setItem('aa.nickname', n), nickname)
  const page = await ctx.newPage()
  await page.goto(`${srv.url}/?token=${srv.token}`)
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  return page
}

async function answerOnPage(page: Page, hasText: string, reply: string) {
  await page.locator('[data-status=waiting]', { hasText }).click()
  await page.locator('textarea[data-testid=reply-input]').fill(reply)
  await page.locator('[data-testid=send]').click()
}

// status is the HTTP status of a raw POST to /mcp with the given headers.
function status(headers: Record<string, string>): Promise<number> {
  const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } })
  return new Promise((ok, fail) => {
    const req = httpRequest(`${srv.url}/mcp`, { method: 'POST', headers: { 'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream', ...headers } }, (res) => {
      res.resume()
      ok(res.statusCode!)
    })
    req.on('error', fail)
    req.end(body)
  })
}

describe('MCP over Streamable HTTP', () => {
  it('lists the tools, waits with progress, returns the inbox answer', async () => {
    const c = await overHTTP()
    const names = (await c.listTools()).tools.map((t) => t.name)
    expect(names).toEqual(expect.arrayContaining(['ask_question', 'task_finish', 'work_report', 'get_ui_state', 'call_ui_tool']))
    const page = await openInbox('http-pc')
    let progressed!: () => void
    const progress = new Promise<void>((ok) => (progressed = ok))
    const call = c.callTool({ name: 'ask_question', arguments: { question: 'Over HTTP: which **branch**?' } }, undefined,
      { timeout: 120_000, onprogress: () => progressed() }) as Promise<ToolResult>
    await page.locator('[data-status=waiting]', { hasText: 'Over HTTP' }).waitFor()
    await progress // every 10 s while the call waits
    await answerOnPage(page, 'Over HTTP', 'main, please.')
    const r = await call
    expect(r.isError).toBeFalsy()
    expect(text(r)).toBe('main, please.')
    await page.context().close()
  })

  it('cancelling the call withdraws the question from the page', async () => {
    const c = await overHTTP()
    const page = await openInbox('http-watcher')
    const ac = new AbortController()
    const call = c.callTool({ name: 'ask_question', arguments: { question: 'Over HTTP: wait for me?' } }, undefined, { signal: ac.signal, timeout: 120_000 })
    await page.locator('[data-status=waiting]', { hasText: 'wait for me' }).waitFor()
    ac.abort()
    await expect(call).rejects.toThrow()
    await page.locator('[data-status=cancelled]', { hasText: 'wait for me' }).waitFor()
    await page.context().close()
  })

  it('ending the session (DELETE) ends its waiting call; the question stays for the next call', async () => {
    const c = await overHTTP()
    const transport = c.transport as StreamableHTTPClientTransport
    const page = await openInbox('http-ender')
    const call = c.callTool({ name: 'ask_question', arguments: { question: 'Over HTTP: ended with the session?' } }, undefined, { timeout: 120_000 })
    call.catch(() => {}) // the SDK rejects it when the client closes
    await page.locator('[data-status=waiting]', { hasText: 'ended with the session' }).waitFor()
    await transport.terminateSession()
    await page.locator('[data-status=waiting][data-agent-gone=true]', { hasText: 'ended with the session' }).waitFor()
    await page.context().close()
  })

  it('refuses a wrong token (401) and a page of another site (403)', async () => {
    await expect(overHTTP('e2e-wrong-token-123456')).rejects.toMatchObject({ code: 401 })
    expect(await status({})).toBe(401)
    expect(await status({ Authorization: `Bearer ${srv.token}x` })).toBe(401)
    expect(await status({ Authorization: `Bearer ${srv.token}`, Origin: 'http://evil.example' })).toBe(403)
    expect(await status({ Authorization: `Bearer ${srv.token}`, Origin: srv.url })).toBe(200)
  })
})

describe('forms in the agent\'s client (elicitation)', () => {
  for (const [name, connect] of [['HTTP', () => overHTTP(srv.token, true)], ['stdio', overStdio]] as const) {
    it(`${name}: the client answers first, the inbox shows who answered`, async () => {
      const c = await connect()
      const nextForm = formsOf(c)
      const page = await openInbox(`${name}-pc`)
      const q = `${name} form: which **region**?`
      const call = c.callTool({ name: 'ask_question', arguments: { question: q } }, undefined, { timeout: 120_000 }) as Promise<ToolResult>
      const f = await nextForm()
      expect(f.request.params.message).toContain(q)
      await page.locator('[data-status=waiting]', { hasText: `${name} form` }).waitFor()
      f.answer({ action: 'accept', content: { answer: 'eu-west-1' } })
      expect(text(await call)).toBe('eu-west-1')
      const item = page.locator('[data-status=answeredElsewhere]', { hasText: `${name} form` })
      await item.waitFor()
      const reply = item.locator('[data-testid=reply]')
      await expect(reply.textContent()).resolves.toContain('eu-west-1')
      await expect(reply.textContent()).resolves.toContain(`by the agent's client (e2e-${name.toLowerCase()})`)
      if (SHOTS && name === 'HTTP') await page.screenshot({ path: `${SHOTS}/inbox-answered-in-client.png` })
      await page.context().close()
    })

    it(`${name}: the inbox answers first, the client's form is withdrawn`, async () => {
      const c = await connect()
      const nextForm = formsOf(c)
      const phone = await openInbox(`${name}-phone`, { width: 390, height: 844 })
      const call = c.callTool({ name: 'task_finish', arguments: { summary: `${name} report: upgraded the **database**.` } }, undefined,
        { timeout: 120_000 }) as Promise<ToolResult>
      const f = await nextForm()
      expect(f.request.params.message).toContain('upgraded the **database**')
      const withdrawn = new Promise<unknown>((ok) => f.signal.addEventListener('abort', () => ok(f.signal.reason)))
      await answerOnPage(phone, `${name} report`, 'Looks good.')
      expect(await withdrawn).toBe(`answered on the phone/PC (${name}-phone)`)
      const r = await call
      expect(text(r)).toContain('Looks good.')
      expect(text(r)).toContain(`answered on the phone/PC (${name}-phone)`)
      await phone.context().close()
    })
  }
})

describe('MCP sessions past the cap', () => {
  let capped: Server
  beforeAll(async () => { capped = await startServer({ config: '[limits]\nmcp_sessions_per_token = 2\n' }) })
  afterAll(async () => { await capped?.stop() })

  // listening connects an SDK client and resolves once its standalone
  // stream (GET), which the SDK opens after initialize, is open.
  async function listening(): Promise<Client> {
    let opened!: () => void
    const open = new Promise<void>((ok) => (opened = ok))
    const transport = new StreamableHTTPClientTransport(new URL(`${capped.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${capped.token}` } },
      reconnectionOptions: { maxRetries: 0, initialReconnectionDelay: 1000, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1 },
      fetch: async (url, init) => {
        const res = await fetch(url, init)
        if ((init?.method ?? 'GET') === 'GET' && res.status === 200) opened()
        return res
      },
    })
    const c = new Client({ name: 'e2e-capped', version: '1.0.0' })
    c.onerror = () => {} // the replaced one's stream ends
    await c.connect(transport)
    clients.push(c)
    await open
    return c
  }

  it('a new client takes the place of the idle one unused the longest, its stream open or not; that one takes it back', async () => {
    const first = await listening()
    const second = await listening()
    const third = await listening() // was 503: both idle clients counted as busy
    expect((await third.listTools()).tools.length).toBeGreaterThan(0)
    // Each goes on with its session: the one that made way is taken
    // over again (was 404), the one unused the longest making way.
    for (const c of [first, second, third, first]) expect((await c.listTools()).tools.length).toBeGreaterThan(0)
    const health = await fetch(`${capped.url}/health`, { headers: { Authorization: `Bearer ${capped.token}` } })
    expect((await health.json()).mcpSessions).toBeLessThanOrEqual(2)
  })
})
