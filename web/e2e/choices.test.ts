import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, SHOTS, startMCP, startServer, text, type Server, type ToolResult } from './harness'

let srv: Server
let mcp: Client
let browser: Browser
const ctxs: BrowserContext[] = []

beforeAll(async () => {
  srv = await startServer()
  mcp = await startMCP(srv)
  browser = await launch()
})

afterAll(async () => {
  for (const c of ctxs) await c.close()
  await browser?.close()
  await mcp?.close()
  await srv?.stop()
})

async function openInbox(width: number, height: number, scheme: 'light' | 'dark'): Promise<Page> {
  const phone = width < 600
  const ctx = await browser.newContext({ viewport: { width, height }, locale: 'en-US', colorScheme: scheme, isMobile: phone, hasTouch: phone })
  ctxs.push(ctx)
  await ctx.addInitScript((n) => localStorage.setItem('aa.nickname', n), `device-${width}-${scheme}`)
  const page = await ctx.newPage()
  await page.goto(`${srv.url}/?token=${srv.token}`)
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  return page
}

type Structured = ToolResult & { structuredContent?: { answered: boolean; chosen: string[]; text: string; images: number } }

function ask(args: Record<string, unknown>, tool = 'ask_question') {
  return mcp.callTool({ name: tool, arguments: args }, undefined, { timeout: 120_000 }) as Promise<Structured>
}

describe('options in the inbox', () => {
  it('shows a question\'s options as buttons; one tap answers, and the agent is told which', async () => {
    const pages: Page[] = []
    for (const [w, h, scheme] of [[1280, 800, 'light'], [1280, 800, 'dark'], [390, 844, 'light'], [390, 844, 'dark']] as const) {
      pages.push(await openInbox(w, h, scheme))
    }
    const call = ask({
      question: 'The migration on **staging** finished. Deploy to production now?', project_directory: '/home/me/shop',
      agent_name: 'Claude Code', reasoning_model_name: 'claude-opus-4',
      options: [
        { label: 'Deploy now', description: 'run the production migration and switch traffic' },
        { label: 'Wait for the backup', description: 'deploy after the nightly backup at 02:00' },
        { label: 'Cancel the release' },
      ],
    })
    for (const [i, page] of pages.entries()) {
      const item = page.locator('[data-status=waiting]', { hasText: 'Deploy to production' })
      await item.waitFor()
      const buttons = item.locator('[data-testid=option]')
      await expect(buttons.count()).resolves.toBe(3)
      // The page says at login it shows options: they are not also in the text.
      await expect(item.textContent()).resolves.not.toContain('Answer with one of')
      await expect(buttons.nth(0).textContent()).resolves.toContain('run the production migration')
      // Free text is allowed: the reply box still takes it, without the generic quick replies.
      await expect(page.locator('textarea[data-testid=reply-input]').isDisabled()).resolves.toBe(false)
      await expect(page.locator('.q-footer .q-chip').count()).resolves.toBe(0)
      const [w, scheme] = [[1280, 'light'], [1280, 'dark'], [390, 'light'], [390, 'dark']][i]!
      if (SHOTS) await page.screenshot({ path: `${SHOTS}/inbox-options-${w}-${scheme}.png` })
    }
    await pages[2]!.locator('[data-testid=option]', { hasText: 'Wait for the backup' }).click()
    const r = await call
    expect(r.isError).toBeFalsy()
    expect(text(r)).toBe('The person chose the option "Wait for the backup".')
    expect(r.structuredContent).toEqual({ answered: true, chosen: ['Wait for the backup'], text: '', images: 0 })
    // Answered on one device: the buttons leave every screen.
    for (const page of pages) {
      await page.locator('[data-status=answeredElsewhere], [data-status=answeredHere]', { hasText: 'Deploy to production' }).waitFor()
      await expect(page.locator('[data-testid=option]').count()).resolves.toBe(0)
    }
  })

  it('takes several choices with multi_select, and only the options without allow_other', async () => {
    const page = await openInbox(1280, 800, 'light')
    const call = ask({
      summary: 'Refactored the cart. What next?', multi_select: true, allow_other: false,
      options: [{ label: 'Run the tests again' }, { label: 'Update the docs' }, { label: 'Stop' }],
    }, 'task_finish')
    const item = page.locator('[data-status=waiting]', { hasText: 'Refactored the cart' })
    await item.waitFor()
    await expect(page.locator('textarea[data-testid=reply-input]').isDisabled()).resolves.toBe(true)
    const send = item.locator('[data-testid=send-choices]')
    await expect(send.isDisabled()).resolves.toBe(true)
    await item.locator('[data-testid=option]', { hasText: 'Update the docs' }).click()
    await item.locator('[data-testid=option]', { hasText: 'Run the tests again' }).click()
    await expect(send.textContent()).resolves.toContain('Send 2 choices')
    if (SHOTS) await page.screenshot({ path: `${SHOTS}/inbox-options-multi-1280-light.png` })
    await send.click()
    const r = await call
    expect(text(r)).toBe('The person chose the options "Run the tests again", "Update the docs".')
    expect(r.structuredContent?.chosen).toEqual(['Run the tests again', 'Update the docs'])
  })

  it('keeps a multi_select card\'s ticks across a reload, until the answer goes', async () => {
    const page = await openInbox(390, 844, 'light')
    const call = ask({
      question: 'Which checks should run before the release?', multi_select: true,
      options: [{ label: 'Unit tests' }, { label: 'Browser tests' }, { label: 'Load test' }],
    })
    const item = page.locator('[data-status=waiting]', { hasText: 'Which checks' })
    await item.waitFor()
    await item.locator('[data-testid=option]', { hasText: 'Load test' }).click()
    await item.locator('[data-testid=option]', { hasText: 'Unit tests' }).click()
    await item.locator('[data-testid=option][aria-checked=true]', { hasText: 'Unit tests' }).waitFor()
    await page.reload()
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    await item.waitFor()
    const ticked = () => item.locator('[data-testid=option][aria-checked=true]').allTextContents()
    expect(await ticked()).toEqual(['Unit tests', 'Load test'])
    await expect(item.locator('[data-testid=send-choices]').textContent()).resolves.toContain('Send 2 choices')
    // Untick one: that too is kept.
    await item.locator('[data-testid=option]', { hasText: 'Load test' }).click()
    await item.locator('[data-testid=option][aria-checked=false]', { hasText: 'Load test' }).waitFor()
    await page.reload()
    await item.waitFor()
    expect(await ticked()).toEqual(['Unit tests'])
    const id = await page.locator('[data-request-id]', { hasText: 'Which checks' }).getAttribute('data-request-id')
    expect(id).toBeTruthy()
    const kept = () => page.evaluate((id) => Object.keys(localStorage).filter((k) => k.endsWith('.ticks'))
      .some((k) => id in (JSON.parse(localStorage.getItem(k) ?? '{}') as object)), id!)
    expect(await kept()).toBe(true)
    await item.locator('[data-testid=send-choices]').click()
    expect((await call).structuredContent?.chosen).toEqual(['Unit tests'])
    // Sent: nothing of them is kept on the device.
    await expect.poll(kept).toBe(false)
  })
  it('sets a right-to-left question and its options right to left, a left-to-right line beside them left to right', async () => {
    const page = await openInbox(390, 844, 'light')
    const call = ask({
      question: 'هل ننشر الإصدار الثاني الآن؟\n\nDeploy v2 now?',
      options: [{ label: 'انشر الآن', description: 'ترحيل قاعدة البيانات أولا' }, { label: 'Wait' }],
    })
    const item = page.locator('[data-status=waiting]', { hasText: 'Deploy v2 now' })
    await item.waitFor()
    const dir = (l: ReturnType<Page['locator']>) => l.evaluate((e) => getComputedStyle(e).direction)
    const paras = item.locator('[data-testid=question] p')
    await expect(dir(paras.nth(0))).resolves.toBe('rtl')
    await expect(dir(paras.nth(1))).resolves.toBe('ltr')
    const arabic = item.locator('[data-testid=option]', { hasText: 'انشر الآن' })
    await expect(dir(arabic.getByText('انشر الآن', { exact: true }))).resolves.toBe('rtl')
    await expect(dir(arabic.getByText('ترحيل قاعدة البيانات أولا', { exact: true }))).resolves.toBe('rtl')
    await expect(dir(item.locator('[data-testid=option]', { hasText: 'Wait' }).getByText('Wait', { exact: true }))).resolves.toBe('ltr')
    // Each line sits at its own start inside the button: the Arabic ones
    // at its right, the English one at its left.
    const inset = (l: ReturnType<Page['locator']>) => l.evaluate((e) => {
      const r = document.createRange()
      r.selectNodeContents(e)
      const t = r.getBoundingClientRect()
      const b = e.closest('[data-testid=option]')!.getBoundingClientRect()
      return { start: Math.round(t.left - b.left), end: Math.round(b.right - t.right) }
    })
    for (const line of ['انشر الآن', 'ترحيل قاعدة البيانات أولا']) {
      const { start, end } = await inset(arabic.getByText(line, { exact: true }))
      expect(end).toBeLessThan(start)
      expect(end).toBeLessThanOrEqual(16)
    }
    const wait = await inset(item.locator('[data-testid=option]', { hasText: 'Wait' }).getByText('Wait', { exact: true }))
    expect(wait.start).toBeLessThanOrEqual(16)
    await arabic.click()
    expect((await call).structuredContent?.chosen).toEqual(['انشر الآن'])
  })
})
