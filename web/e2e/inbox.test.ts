import { statSync, truncateSync } from 'node:fs'
import { join } from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, PNG, SHOTS, startMCP, startProxy, startServer, text, type Server, type ToolResult } from './harness'

let srv: Server
let mcp: Client
let browser: Browser

beforeAll(async () => {
  srv = await startServer()
  mcp = await startMCP(srv)
  browser = await launch()
})

afterAll(async () => {
  await browser?.close()
  await mcp?.close()
  await srv?.stop()
})

async function openInbox(nickname: string, viewport = { width: 1200, height: 850 }): Promise<Page> {
  const phone = viewport.width < 600 // a touch screen, as on a phone
  const ctx = await browser.newContext({ viewport, locale: 'en-US', isMobile: phone, hasTouch: phone })
  await ctx.addInitScript((n) => localStorage.setItem('aa.nickname', n), nickname)
  const page = await ctx.newPage()
  await page.goto(`${srv.url}/?token=${srv.token}`)
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  return page
}

function ask(args: Record<string, unknown>, tool = 'ask_question') {
  return mcp.callTool({ name: tool, arguments: args }, undefined, { timeout: 120_000 }) as Promise<ToolResult>
}

describe('inbox in a real browser', () => {
  it('presents the token in its WebSocket upgrade; the server answers the plain subprotocol', async () => {
    const ctx = await browser.newContext()
    const page = await ctx.newPage()
    const cdp = await ctx.newCDPSession(page)
    await cdp.send('Network.enable')
    const header = (h: Record<string, string>) => Object.entries(h).find(([k]) => k.toLowerCase() === 'sec-websocket-protocol')?.[1] ?? ''
    const offered: string[] = []
    const answered: string[] = []
    cdp.on('Network.webSocketWillSendHandshakeRequest', (e) => offered.push(header(e.request.headers)))
    cdp.on('Network.webSocketHandshakeResponseReceived', (e) => answered.push(header(e.response.headers)))
    await page.goto(`${srv.url}/?token=${srv.token}`)
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    const enc = btoa(srv.token).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
    expect(offered[0]).toBe(`agentassistant, agentassistant.bearer.${enc}`)
    expect(answered[0]).toBe('agentassistant')
    await ctx.close()
  })

  it('shows a question, takes a text and image reply, and the MCP result carries both', async () => {
    const page = await openInbox('laptop')
    expect(page.url()).toBe(`${srv.url}/`) // the token left the address bar
    const call = ask({ question: 'Which **database**?\n\n```sql\nSELECT 1;\n```\n<img src=x onerror="window.pwned=1">\n\n![schema](https://example.com/schema.png) and ![dot](data:image/gif;base64,R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7)', project_directory: '/home/me/shop',
      agent_name: 'Claude Code', reasoning_model_name: 'claude-opus-4' })
    const item = page.locator('[data-status=waiting]', { hasText: 'database' })
    await item.waitFor()
    // The card names the agent and the model that ask.
    await expect(item.locator('[data-testid=who]').textContent()).resolves.toBe('Claude Code · claude-opus-4')
    await expect(item.locator('[data-testid=question] strong').textContent()).resolves.toBe('database')
    await expect(item.locator('[data-testid=question] pre code').textContent()).resolves.toContain('SELECT 1;')
    expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).toBeUndefined()
    // The page loads no image from elsewhere (its CSP would show a broken
    // one): a remote image is a link to it, an inline one is shown.
    const images = item.locator('[data-testid=question] img')
    await expect(images.evaluateAll((els) => els.map((e) => (e as HTMLImageElement).src.slice(0, 15)))).resolves.toEqual(['data:image/gif;'])
    await expect.poll(() => images.evaluateAll((els) => els.every((e) => (e as HTMLImageElement).naturalWidth > 0))).toBe(true)
    await expect(item.getByRole('link', { name: 'schema' }).getAttribute('href')).resolves.toBe('https://example.com/schema.png')
    // The reply box has focus as the question arrives.
    await expect.poll(() => page.evaluate(() => document.activeElement?.tagName)).toBe('TEXTAREA')
    if (SHOTS) await page.screenshot({ path: `${SHOTS}/inbox-desktop.png` })

    await page.locator('textarea[data-testid=reply-input]').fill('PostgreSQL, please.')
    await page.locator('[data-testid=file]').setInputFiles({ name: 'shot.png', mimeType: 'image/png', buffer: PNG })
    await page.locator('[data-testid=thumb]').waitFor()
    await page.keyboard.press('Control+Enter')

    const r = await call
    expect(r.isError).toBeFalsy()
    expect(text(r)).toBe('PostgreSQL, please.')
    const img = r.content.find((c) => c.type === 'image')
    expect(img?.mimeType).toBe('image/png')
    expect(Buffer.from(img!.data!, 'base64').equals(PNG)).toBe(true)
    await page.locator('[data-status=answeredHere]').waitFor()
    await page.context().close()
  })

  it('two devices: one answers, the other shows it as answered elsewhere', async () => {
    const pc = await openInbox('pc')
    const phone = await openInbox('phone', { width: 390, height: 844 })
    await pc.getByText('phone', { exact: false }).first().waitFor() // online users under the title bar
    const call = ask({ summary: 'Refactored the **payment** module; all tests pass.', project_directory: '/home/me/shop',
      agent_name: 'Cursor', reasoning_model_name: 'gpt-5' }, 'task_finish')
    await pc.locator('[data-status=waiting]', { hasText: 'payment' }).waitFor()
    const onPhone = phone.locator('[data-status=waiting]', { hasText: 'payment' })
    await onPhone.waitFor()
    // One card for the report, though it arrives under both generations' names.
    await expect(phone.locator('[data-status=waiting]', { hasText: 'payment' }).count()).resolves.toBe(1)
    await expect(onPhone.locator('[data-testid=who]').textContent()).resolves.toBe('Cursor · gpt-5')
    if (SHOTS) await phone.screenshot({ path: `${SHOTS}/inbox-phone.png` })
    await phone.getByText('Please continue').click()
    const r = await call
    expect(text(r)).toBe('Please continue')
    const item = pc.locator('[data-status=answeredElsewhere]', { hasText: 'payment' })
    await item.waitFor()
    await expect(item.locator('[data-testid=status]').textContent()).resolves.toContain('another device')
    await expect(item.locator('[data-testid=reply]').textContent()).resolves.toContain('Please continue')
    await pc.context().close()
    await phone.context().close()
  })

  it('a pending question survives a reload and can still be answered', async () => {
    const page = await openInbox('reloader')
    const call = ask({ question: 'Deploy to production now?' })
    await page.locator('[data-status=waiting]', { hasText: 'Deploy to production' }).waitFor()
    await page.reload()
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    const item = page.locator('[data-status=waiting]', { hasText: 'Deploy to production' })
    await item.waitFor()
    await page.locator('textarea[data-testid=reply-input]').fill('Not yet, wait for QA.')
    await page.locator('[data-testid=send]').click()
    expect(text(await call)).toBe('Not yet, wait for QA.')
    // History survives a reload too.
    await page.reload()
    await page.locator('[data-status=answeredHere]', { hasText: 'Deploy to production' }).waitFor()
    await page.context().close()
  })

  it('an answer the server cannot save: the question stays open, the reply back in its box', async () => {
    const full = await startServer({ fileBlocks: 256 }) // no file beyond 128 KiB: the disk is full for it
    const agent = await startMCP(full)
    const ctx = await browser.newContext({ viewport: { width: 1200, height: 850 }, locale: 'en-US' })
    try {
      const page = await ctx.newPage()
      await page.goto(`${full.url}/?token=${full.token}`)
      await page.locator('[data-testid=conn][data-state=online]').waitFor()
      const call = agent.callTool({ name: 'ask_question', arguments: { question: 'Ship the release notes?' } }, undefined, { timeout: 120_000 }) as Promise<ToolResult>
      await page.locator('[data-status=waiting]', { hasText: 'Ship the release notes?' }).waitFor()
      const long = 'Yes. ' + 'These notes are long. '.repeat(12_000) + 'The end.' // 260 KB: more than the disk takes
      const input = page.locator('textarea[data-testid=reply-input]')
      await input.fill(long)
      await page.locator('[data-testid=send]').click()
      await page.getByText('the server cannot save the answer').waitFor()
      await page.locator('[data-status=waiting]', { hasText: 'Ship the release notes?' }).waitFor()
      await expect.poll(async () => (await input.inputValue()) === long).toBe(true)
      await input.fill('Yes, ship them.')
      await page.locator('[data-testid=send]').click()
      expect(text(await call)).toBe('Yes, ship them.')
      await page.locator('[data-status=answeredHere]', { hasText: 'Ship the release notes?' }).waitFor()
    } finally {
      await ctx.close()
      await agent.close()
      await full.stop()
    }
  })

  it('cancelling the MCP call withdraws the question from the page', async () => {
    const page = await openInbox('watcher')
    const ac = new AbortController()
    const call = mcp.callTool({ name: 'ask_question', arguments: { question: 'Should I wait?' } }, undefined, { signal: ac.signal, timeout: 120_000 })
    await page.locator('[data-status=waiting]', { hasText: 'Should I wait?' }).waitFor()
    ac.abort()
    await expect(call).rejects.toThrow()
    await page.locator('[data-status=cancelled]', { hasText: 'Should I wait?' }).waitFor()
    await page.context().close()
  })

  it('the agent restarts mid-question: the page says no agent waits, the answer goes to its next call', async () => {
    const page = await openInbox('restart-pc')
    const phone = await openInbox('restart-phone', { width: 390, height: 844 })
    const old = await startMCP(srv)
    const args = { question: 'Keep the **staging** database, or drop it?', project_directory: '/home/me/shop' }
    const first = old.callTool({ name: 'ask_question', arguments: args }, undefined, { timeout: 120_000 }).catch((e: unknown) => e)
    await page.locator('[data-status=waiting]', { hasText: 'staging' }).waitFor()
    await old.close() // the MCP client restarts its server
    await first

    const gone = page.locator('[data-status=waiting][data-agent-gone=true]', { hasText: 'staging' })
    await gone.waitFor({ timeout: 20_000 })
    await expect(gone.locator('[data-testid=status]').textContent()).resolves.toContain('No agent waiting')
    await expect(gone.locator('[data-testid=agent-gone]').textContent()).resolves.toContain("kept for the agent's next call")
    await phone.locator('[data-status=waiting][data-agent-gone=true]', { hasText: 'staging' }).waitFor()
    if (SHOTS) {
      for (const p of [page, phone]) await p.locator('[data-agent-gone=true]', { hasText: 'staging' }).evaluate((e) => e.scrollIntoView({ block: 'center' }))
      await page.screenshot({ path: `${SHOTS}/inbox-agent-gone-desktop.png` })
      await phone.screenshot({ path: `${SHOTS}/inbox-agent-gone-phone.png` })
    }
    await gone.click()
    await page.locator('textarea[data-testid=reply-input]').fill('Keep it until Friday.')
    await page.locator('[data-testid=send]').click()
    await page.locator('[data-status=answeredHere]', { hasText: 'staging' }).waitFor()

    // The restarted server's next call from the project gets the answer
    // instead of asking.
    const again = await startMCP(srv)
    const r = (await again.callTool({ name: 'ask_question', arguments: { question: 'Which staging host?', project_directory: '/home/me/shop' } },
      undefined, { timeout: 30_000 })) as ToolResult
    expect(r.isError).toBeFalsy()
    expect(text(r)).toContain('Keep the **staging** database, or drop it?')
    expect(text(r)).toContain('Keep it until Friday.')
    expect(await page.locator('[data-request-id]', { hasText: 'Which staging host?' }).count()).toBe(0)
    await again.close()
    await page.context().close()
    await phone.context().close()
  })

  it('offline for 5 s and back: what it missed, once each, in order', async () => {
    const proxy = await startProxy(Number(srv.port))
    const ctx = await browser.newContext({ viewport: { width: 1200, height: 850 }, locale: 'en-US' })
    const page = await ctx.newPage()
    await page.goto(`http://127.0.0.1:${proxy.port}/?token=${srv.token}`)
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    const phone = await openInbox('phone-online')

    const first = ask({ question: 'Offline one: keep the cache?' })
    await page.locator('[data-status=waiting]', { hasText: 'Offline one' }).waitFor()
    proxy.setDown(true)
    await page.locator('[data-testid=conn][data-state=offline]').waitFor()
    const second = ask({ question: 'Offline two: rename the table?' })
    await phone.locator('[data-status=waiting]', { hasText: 'Offline one' }).waitFor()
    await phone.locator('[data-status=waiting]', { hasText: 'Offline two' }).waitFor()
    // Answered on the phone while the PC is offline.
    await phone.locator('[data-status=waiting]', { hasText: 'Offline one' }).click()
    await phone.locator('textarea[data-testid=reply-input]').fill('Keep it.')
    await phone.locator('[data-testid=send]').click()
    expect(text(await first)).toBe('Keep it.')
    const third = ask({ question: 'Offline three: bump the version?' })
    await phone.locator('[data-status=waiting]', { hasText: 'Offline three' }).waitFor()
    await new Promise((r) => setTimeout(r, 5000 - 1500))
    proxy.setDown(false)

    await page.locator('[data-testid=conn][data-state=online]').waitFor({ timeout: 20_000 })
    await page.locator('[data-status=answeredElsewhere]', { hasText: 'Offline one' }).waitFor()
    await page.locator('[data-status=waiting]', { hasText: 'Offline two' }).waitFor()
    await page.locator('[data-status=waiting]', { hasText: 'Offline three' }).waitFor()
    const order = await page.locator('[data-request-id]').evaluateAll((els) => els.map((e) => e.textContent ?? ''))
    const mine = order.filter((t) => t.includes('Offline'))
    expect(mine.map((t) => /Offline (one|two|three)/.exec(t)![1])).toEqual(['one', 'two', 'three'])
    const ids = await page.locator('[data-request-id]').evaluateAll((els) => els.map((e) => e.getAttribute('data-request-id')))
    expect(new Set(ids).size).toBe(ids.length) // no duplicates

    for (const [call, which, answer] of [[second, 'Offline two', 'Yes, rename it.'], [third, 'Offline three', 'Not yet.']] as const) {
      await page.locator('[data-status=waiting]', { hasText: which }).click()
      await page.locator('textarea[data-testid=reply-input]').fill(answer)
      await page.locator('[data-testid=send]').click()
      expect(text(await call)).toBe(answer)
    }
    await ctx.close()
    await phone.context().close()
    await proxy.close()
  })

  it('history comes from the server on a new device, older pages on reaching the top, and clears', async () => {
    // 35 questions asked and answered through the Connect API.
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${srv.url}/agentassistproto.${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json', ...headers }, body: JSON.stringify(body) })
    for (let i = 0; i < 35; i++) {
      const id = `hist-${String(i).padStart(2, '0')}`
      const asked = post('SrvAgentAssist/AskQuestion', { ID: id, UserToken: srv.token, Request: { Question: `History question ${id}`, Timeout: 60 } })
      for (let tries = 0; ; tries++) {
        const r = await post('SrvAgentAssistReply/AskQuestionReply', { UserToken: srv.token, Response: { ID: id, contents: [{ type: 1, text: { type: 'text', text: `answer ${id}` } }] } })
        if (r.ok) break
        if (tries > 100) throw new Error(`could not answer ${id}`)
        await new Promise((r) => setTimeout(r, 10))
      }
      expect((await asked).ok).toBe(true)
    }
    const page = await openInbox('new-device') // empty storage: all from the server
    const items = page.locator('[data-request-id^=hist-]')
    await expect.poll(() => items.count()).toBe(30)
    expect(await items.first().getAttribute('data-request-id')).toBe('hist-05')
    await page.locator('[data-testid=load-older]').scrollIntoViewIfNeeded()
    await expect.poll(() => items.count(), { timeout: 10_000 }).toBe(35)
    expect(await items.first().getAttribute('data-request-id')).toBe('hist-00')
    await expect(page.locator('[data-request-id=hist-00] [data-testid=reply]').textContent()).resolves.toContain('answer hist-00')

    // Clearing clears it on the server: another new device sees none.
    await page.locator('button[aria-label=Settings]').click()
    await page.locator('[data-testid=clear-history]').click()
    await expect.poll(() => items.count()).toBe(0)
    const other = await openInbox('another-new-device')
    await other.locator('[data-testid=empty]').waitFor()
    expect(await other.locator('[data-request-id^=hist-]').count()).toBe(0)
    await page.context().close()
    await other.context().close()
  })

  it('online devices chat live; the language follows the browser and can be switched', async () => {
    const pc = await openInbox('desk-pc')
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'zh-CN' })
    await ctx.addInitScript(() => localStorage.setItem('aa.nickname', 'my-phone'))
    const phone = await ctx.newPage()
    await phone.goto(`${srv.url}/?token=${srv.token}`)
    await phone.locator('[data-testid=conn][data-state=online]').waitFor()
    expect(await phone.locator('.q-toolbar__title').textContent()).toContain('Agent 助手')

    // The PC lists the phone under the title bar; clicking it opens a chat.
    await pc.locator('[data-testid=users]').getByText('my-phone').click()
    await pc.locator('input[data-testid=chat-input]').fill('Dictate the commit message for me?')
    await pc.keyboard.press('Enter')
    // The phone sees an unread badge on the PC's name, opens the chat, answers.
    const badge = phone.locator('[data-testid=users]').getByText('desk-pc')
    await badge.waitFor()
    await expect.poll(() => phone.locator('[data-testid=users] .q-badge').textContent()).toBe('1')
    await badge.click()
    await phone.locator('[data-testid=chat]').getByText('Dictate the commit message for me?').waitFor()
    await phone.locator('input[data-testid=chat-input]').fill('fix: keep answers across restarts')
    await phone.keyboard.press('Enter')
    await pc.locator('[data-testid=chat]').getByText('fix: keep answers across restarts').waitFor()

    // Switch the phone to English.
    await phone.keyboard.press('Escape')
    await phone.locator('button[aria-label="语言"]').click()
    await expect.poll(() => phone.locator('.q-toolbar__title').textContent()).toContain('Agent Assistant')
    await pc.context().close()
    await ctx.close()
  })

  it('questions lost with a damaged store: every device is told which projects, until one dismisses it', async () => {
    const first = await startServer()
    const agent = await startMCP(first)
    const projects = ['/home/me/shop', '/home/me/blog', '/srv/infra']
    const calls = projects.map((p, i) => agent.callTool({ name: 'ask_question', arguments: { question: `Lost question ${i}`, project_directory: p } },
      undefined, { timeout: 600_000 }).catch(() => undefined)) // they never get an answer
    let srv2: Server | undefined
    const ctxs: import('playwright-core').BrowserContext[] = []
    try {
      const watch = await browser.newContext({ viewport: { width: 1200, height: 850 }, locale: 'en-US' })
      ctxs.push(watch)
      const w = await watch.newPage()
      await w.goto(`${first.url}/?token=${first.token}`)
      await expect.poll(() => w.locator('[data-status=waiting]', { hasText: 'Lost question' }).count(), { timeout: 15_000 }).toBe(3)
      // Folded into the database: the journal is empty again.
      await expect.poll(() => statSync(join(first.data, 'agentassistant.journal')).size, { timeout: 15_000 }).toBe(0)
      await first.kill9()
      truncateSync(join(first.data, 'agentassistant.db'), 12_288)
      srv2 = await startServer({ data: first.data, token: first.token })

      const pages: Page[] = []
      for (const [width, height, scheme] of [[1280, 800, 'light'], [1280, 800, 'dark'], [390, 844, 'light'], [390, 844, 'dark']] as const) {
        const phone = width < 600
        const ctx = await browser.newContext({ viewport: { width, height }, locale: 'en-US', colorScheme: scheme, isMobile: phone, hasTouch: phone })
        ctxs.push(ctx)
        await ctx.addInitScript((n) => localStorage.setItem('aa.nickname', n), `device-${width}-${scheme}`)
        const page = await ctx.newPage()
        await page.goto(`${srv2.url}/?token=${srv2.token}`)
        const banner = page.locator('[data-testid=lost]')
        await banner.waitFor()
        await expect(banner.locator('[data-testid=lost-title]').textContent()).resolves.toBe('3 questions could not be restored')
        const body = await banner.locator('[data-testid=lost-body]').textContent()
        for (const p of projects) expect(body).toContain(p)
        await expect(page.locator('[data-status=waiting]').count()).resolves.toBe(0)
        if (SHOTS) await page.screenshot({ path: `${SHOTS}/inbox-lost-${width}-${scheme}.png` })
        pages.push(page)
      }
      // In Chinese too.
      const zh = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'zh-CN' })
      ctxs.push(zh)
      const zp = await zh.newPage()
      await zp.goto(`${srv2.url}/?token=${srv2.token}`)
      await expect.poll(() => zp.locator('[data-testid=lost-title]').textContent()).toBe('有 3 个问题无法恢复')

      // Dismissed on one device: gone from every screen, and not told again.
      await pages[0]!.locator('[data-testid=lost-dismiss]').click()
      for (const page of [...pages, zp]) await page.locator('[data-testid=lost]').waitFor({ state: 'detached' })
      await pages[1]!.reload()
      // The online list is asked for after the login, so it comes after
      // any notice the login would have brought.
      await pages[1]!.getByText('device-390-light', { exact: false }).first().waitFor()
      await expect(pages[1]!.locator('[data-testid=lost]').count()).resolves.toBe(0)
    } finally {
      for (const c of ctxs) await c.close()
      await agent.close()
      await Promise.all(calls)
      await srv2?.stop()
    }
  })
})
