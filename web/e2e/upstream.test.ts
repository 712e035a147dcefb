// The existing agentassistant's own clients against this server: its
// agentassistant-mcp (both generations) asking through this server and
// answered in this web UI, and its web UI answering this server's
// questions, and this agentassistant-mcp asking through its server. Opt-in: AA_UPSTREAM is a build of its main branch,
// AA_UPSTREAM_OPTIONS one of its interreactiveui-askquetion branch (each
// a checkout with bin/agentassistant-mcp and, for its web UI, www/dist
// built with its own tooling).
import { spawn } from 'node:child_process'
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { createServer, type AddressInfo } from 'node:net'
import { extname, join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { launch, photo, startMCP, startServer, text, type Server, type ToolResult } from './harness'

const MAIN = process.env.AA_UPSTREAM
const OPTIONS = process.env.AA_UPSTREAM_OPTIONS

let srv: Server
let browser: Browser
const ctxs: BrowserContext[] = []
const clients: Client[] = []

beforeAll(async () => {
  if (!MAIN && !OPTIONS) return
  srv = await startServer()
  // Upstream's page is fulfilled by the test, not fetched from this
  // loopback server: Chromium's Local Network Access would refuse its
  // WebSocket to it.
  browser = await launch(['--disable-features=LocalNetworkAccessChecks'])
})

afterAll(async () => {
  for (const c of ctxs) await c.close()
  for (const c of clients) await c.close()
  await browser?.close()
  await srv?.stop()
})

// upstreamMCP runs upstream's agentassistant-mcp of the checkout dir
// behind the official MCP client.
async function upstreamMCP(dir: string): Promise<Client> {
  const home = mkdtempSync(join(tmpdir(), 'aa-home-'))
  const transport = new StdioClientTransport({
    command: join(dir, 'bin/agentassistant-mcp'),
    args: ['-host', srv.host, '-port', srv.port, '-token', srv.token],
    env: { HOME: home, PATH: process.env.PATH ?? '' },
    cwd: home,
    stderr: 'ignore',
  })
  const client = new Client({ name: 'e2e', version: '1.0.0' })
  client.onclose = () => rmSync(home, { recursive: true, force: true })
  await client.connect(transport)
  clients.push(client)
  return client
}

async function inbox(): Promise<Page> {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' })
  ctxs.push(ctx)
  const page = await ctx.newPage()
  await page.goto(`${srv.url}/?token=${srv.token}`)
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  return page
}

function call(c: Client, name: string, args: Record<string, unknown>) {
  return c.callTool({ name, arguments: args }, undefined, { timeout: 120_000 }) as Promise<ToolResult & { structuredContent?: unknown }>
}

const who = { project_directory: '/home/me/shop', agent_name: 'Claude Code', reasoning_model_name: 'claude-opus-4' }


async function reply(page: Page, question: string, words: string) {
  await page.locator('[data-status=waiting]', { hasText: question }).locator('[data-testid=answer]').click()
  await page.locator('textarea[data-testid=reply-input]').fill(words)
  await page.locator('[data-testid=send]').click()
}

describe.skipIf(!MAIN)('upstream agentassistant-mcp (main) answered in this web UI', () => {
  it('asks a question and is told the text', async () => {
    const mcp = await upstreamMCP(MAIN!)
    const page = await inbox()
    const r = call(mcp, 'ask_question', { ...who, question: 'Upstream: keep the old cache?' })
    await reply(page, 'Upstream: keep the old cache?', 'Keep it for a week.')
    const got = await r
    expect(got.isError).toBeFalsy()
    expect(text(got)).toContain('Keep it for a week.')
  })

  it('reports its work and is told the reply', async () => {
    const mcp = await upstreamMCP(MAIN!)
    const page = await inbox()
    const r = call(mcp, 'work_report', { ...who, summary: 'Upstream: refactored the cart.' })
    await reply(page, 'Upstream: refactored the cart.', 'Now the docs.')
    const got = await r
    expect(got.isError).toBeFalsy()
    expect(text(got)).toContain('Now the docs.')
  })

  it('is handed a large screenshot as an image the model reads, fit', async () => {
    const mcp = await upstreamMCP(MAIN!)
    const page = await inbox()
    const big = await photo(page, 3000, 2000)
    const r = call(mcp, 'ask_question', { ...who, question: 'Upstream images: how does it look?' })
    await page.locator('[data-status=waiting]', { hasText: 'Upstream images' }).locator('[data-testid=answer]').click()
    await page.locator('textarea[data-testid=reply-input]').fill('See the picture.')
    await page.locator('input[data-testid=file]').setInputFiles([{ name: 'screen.png', mimeType: 'image/png', buffer: big }])
    await page.locator('[data-testid=thumb]').waitFor()
    await page.locator('[data-testid=send]').click()
    const got = await r
    expect(text(got)).toContain('See the picture.')
    const images = got.content.filter((c) => c.type === 'image')
    expect(images.map((c) => c.mimeType)).toEqual(['image/png'])
    expect(await page.evaluate(async (data) => {
      const img = new Image()
      img.src = `data:image/png;base64,${data}`
      await img.decode()
      return [img.naturalWidth, img.naturalHeight]
    }, images[0]!.data!)).toEqual([1568, 1045])
  })
})

describe.skipIf(!OPTIONS)('upstream agentassistant-mcp (options) answered in this web UI', () => {
  it('asks with options; a tap answers, and it is told which', async () => {
    const mcp = await upstreamMCP(OPTIONS!)
    const page = await inbox()
    const r = call(mcp, 'ask_question', {
      ...who,
      questions: [{ question: 'Upstream options: deploy now?', header: 'Deploy', options: [{ label: 'Deploy now', description: 'switch traffic' }, { label: 'Wait' }] }],
    })
    const item = page.locator('[data-status=waiting]', { hasText: 'Upstream options: deploy now?' })
    await item.locator('[data-testid=option]', { hasText: 'Wait' }).click()
    const got = await r
    expect(got.isError).toBeFalsy()
    expect(text(got)).toContain('Wait')
  })
})

// upstreamWeb opens upstream's web UI (the checkout dir's www/dist) as
// if this server served it: its page, then its WebSocket to /ws here.
async function upstreamWeb(dir: string): Promise<Page> {
  const dist = join(dir, 'www/dist')
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' })
  ctxs.push(ctx)
  await ctx.route(`${srv.url}/**`, (route) => {
    const path = new URL(route.request().url()).pathname
    const file = join(dist, path === '/' ? 'index.html' : path)
    const found = existsSync(file) ? file : join(dist, 'index.html')
    const type: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.ico': 'image/x-icon', '.png': 'image/png', '.woff2': 'font/woff2', '.woff': 'font/woff', '.svg': 'image/svg+xml' }
    return route.fulfill({ body: readFileSync(found), contentType: type[extname(found)] ?? 'application/octet-stream' })
  })
  const page = await ctx.newPage()
  await page.goto(`${srv.url}/#/chat?token=${srv.token}`)
  return page
}

for (const [name, dir] of [['main', MAIN], ['options', OPTIONS]] as const) {
  describe.skipIf(!dir)(`upstream web UI (${name}) against this server`, () => {
    it('shows a question and sends the typed answer', async () => {
      const mcp = await startMCP(srv)
      clients.push(mcp)
      const page = await upstreamWeb(dir!)
      const r = call(mcp, 'ask_question', { ...who, question: `Web ${name}: rename the table?` })
      const card = page.locator('.q-card', { hasText: `Web ${name}: rename the table?` })
      await card.waitFor()
      await card.locator('textarea, input').first().fill('Yes, to orders.')
      await card.getByRole('button', { name: '发送回复' }).click()
      const got = await r
      expect(got.isError).toBeFalsy()
      expect(text(got)).toContain('Yes, to orders.')
    })

    it('shows a question with options, and sends the option typed', async () => {
      const mcp = await startMCP(srv)
      clients.push(mcp)
      const page = await upstreamWeb(dir!)
      const r = call(mcp, 'ask_question', { ...who, question: `Web ${name}: which checks?`, multi_select: true, allow_other: false,
        options: [{ label: 'Unit tests' }, { label: 'Load test', description: 'an hour' }] })
      const card = page.locator('.q-card', { hasText: `Web ${name}: which checks?` })
      await card.waitFor()
      await card.locator('textarea, input').first().fill('Unit tests')
      await card.getByRole('button', { name: '发送回复' }).click()
      const got = await r
      expect(got.isError).toBeFalsy()
      expect(got.structuredContent).toMatchObject({ chosen: ['Unit tests'] })
    })

    it('shows a finished task and sends the confirmation', async () => {
      const mcp = await startMCP(srv)
      clients.push(mcp)
      const page = await upstreamWeb(dir!)
      const r = call(mcp, 'task_finish', { ...who, summary: `Web ${name}: the cart is refactored.` })
      const card = page.locator('.q-card', { hasText: `Web ${name}: the cart is refactored.` })
      await card.waitFor()
      await card.getByRole('button', { name: '确认完成' }).click()
      const got = await r
      expect(got.isError).toBeFalsy()
      expect(text(got)).toBe('任务已确认') // its confirmation's default text
    })
  })
}

describe.skipIf(!MAIN)('this agentassistant-mcp against upstream\'s server, answered in its web UI', () => {
  it('asks plainly, with options, several options, and reports a finished task', async () => {
    const port = await new Promise<number>((ok) => {
      const l = createServer().listen(0, '127.0.0.1', () => {
        const p = (l.address() as AddressInfo).port
        l.close(() => ok(p))
      })
    })
    // Upstream's server reads its port from agentassistant-mcp.toml beside
    // it and serves www/dist of its working directory.
    const dir = mkdtempSync(join(tmpdir(), 'aa-upstream-'))
    copyFileSync(join(MAIN!, 'bin/agentassistant-srv'), join(dir, 'agentassistant-srv'))
    writeFileSync(join(dir, 'agentassistant-mcp.toml'), `agentassistant_server_port = ${port}\n`)
    symlinkSync(join(MAIN!, 'www'), join(dir, 'www'))
    const up = spawn(join(dir, 'agentassistant-srv'), [], { cwd: dir, stdio: 'ignore' })
    const exited = new Promise((ok) => up.once('exit', ok))
    try {
      const token = 'up-' + Math.random().toString(36).slice(2)
      const page = await (await browser.newContext()).newPage()
      ctxs.push(page.context())
      const loggedIn = page.waitForEvent('console', { predicate: (m) => m.text().startsWith('User login successful'), timeout: 30_000 })
      // Its server starts listening a moment after it starts: load until it answers.
      for (let i = 0; ; i++) {
        try {
          await page.goto(`http://127.0.0.1:${port}/#/chat?token=${token}`)
          break
        } catch (e) {
          if (i === 50) throw e
          await page.waitForTimeout(200)
        }
      }
      await loggedIn
      const mcp = await startMCP({ ...srv, host: '127.0.0.1', port: String(port), token })
      clients.push(mcp)
      for (const [tool, args, typed, want] of [
        ['ask_question', { question: 'Theirs: rename the table?' }, 'Yes, to orders.', { text: 'Yes, to orders.' }],
        ['ask_question', { question: 'Theirs: deploy now?', options: [{ label: 'Deploy now' }, { label: 'Wait' }] }, 'Wait', { chosen: ['Wait'] }],
        ['ask_question', { question: 'Theirs: which checks?', multi_select: true, allow_other: false, options: [{ label: 'Unit' }, { label: 'Load' }] },
          'Unit, Load', { chosen: ['Unit', 'Load'] }],
        ['task_finish', { summary: 'Theirs: the cart is refactored.' }, '', { text: '任务已确认' }],
      ] as const) {
        const r = call(mcp, tool, { ...who, ...args })
        const card = page.locator('.q-card', { hasText: 'question' in args ? args.question : args.summary })
        await card.waitFor()
        if (typed) await card.locator('textarea, input').first().fill(typed)
        await card.getByRole('button', { name: typed ? '发送回复' : '确认完成' }).click()
        const got = await r
        expect(got.isError).toBeFalsy()
        expect(got.structuredContent).toMatchObject(want)
      }
    } finally {
      up.kill('SIGINT')
      await exited
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
