// The first screens a newcomer meets: an inbox with nothing in it says
// how to connect an agent (the command for Claude Code, the guide for the
// others) without putting the token on the screen, and every button of
// the title bar says what it is.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, SHOTS, startMCP, startServer, text, type Server, type ToolResult } from './harness'

let srv: Server
let mcp: Client
const defaultServer = () => srv
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

async function open(o: { width?: number; scheme?: 'light' | 'dark'; locale?: string; server?: Server } = {}): Promise<Page> {
  const srv = o.server ?? defaultServer()
  const width = o.width ?? 1280
  const phone = width < 600
  const ctx = await browser.newContext({ viewport: { width, height: phone ? 844 : 800 }, locale: o.locale ?? 'en-US',
    colorScheme: o.scheme ?? 'light', isMobile: phone, hasTouch: phone })
  await ctx.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: srv.url })
  await ctx.addInitScript(() => localStorage.setItem('aa.nickname', 'newcomer'))
  const page = await ctx.newPage()
  await page.goto(`${srv.url}/?token=${srv.token}`)
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  return page
}

describe('the empty inbox', () => {
  it("shows Claude Code's command for this server, the token hidden, and copies it whole", async () => {
    const page = await open()
    const empty = page.locator('[data-testid=empty]')
    await empty.waitFor()
    const shown = await empty.locator('[data-testid=connect-command]').innerText()
    expect(shown).toContain(`claude mcp add --transport http agentassistant ${srv.url}/mcp --header`)
    expect(shown).toContain('Authorization: Bearer')
    // Nowhere on the page, not even out of sight: only the copy has it.
    expect(await page.content()).not.toContain(srv.token)

    await empty.getByRole('button', { name: /copy/i }).click()
    await expect.poll(() => page.evaluate(() => navigator.clipboard.readText()))
      .toBe(`claude mcp add --transport http agentassistant ${srv.url}/mcp --header 'Authorization: Bearer ${srv.token}'`)
    await empty.getByText('Copied').waitFor()

    const guide = empty.getByRole('link', { name: /docs\/clients\.md/ })
    const href = await guide.getAttribute('href')
    expect(href).toMatch(/^https:\/\/github\.com\/agentassistant\/agentassistant\/blob\/main\/docs\/clients\.md#/)
    expect(await guide.getAttribute('target')).toBe('_blank')
    expect(await guide.getAttribute('rel')).toContain('noopener')
    await page.context().close()
  })

  it('says it in Chinese too', async () => {
    const page = await open({ locale: 'zh-CN' })
    const empty = page.locator('[data-testid=empty]')
    await empty.waitFor()
    expect(await empty.innerText()).toMatch(/Claude Code/)
    expect(await empty.innerText()).toMatch(/复制/)
    await page.context().close()
  })
})

// The title bar's buttons, as a person sees them: name, and what shows
// the words (the button's own label, or a tooltip on hover).
function barButtons(page: Page) {
  return page.locator('.q-header .q-toolbar').first().locator('a.q-btn, button.q-btn').evaluateAll((els) => els.map((e) => ({
    name: e.getAttribute('aria-label') ?? '',
    text: (e.querySelector('.q-btn__content')?.textContent ?? '').trim(),
    href: e.getAttribute('href') ?? '',
  })))
}

describe('the title bar', () => {
  it('1280 px: the booking link has its words on it; every icon-only button is named and has a tooltip', async () => {
    const page = await open()
    const buttons = await barButtons(page)
    expect(buttons.length).toBeGreaterThanOrEqual(4)
    const booking = buttons.find((b) => b.href === '/booking')
    expect(booking?.text).toBe('Booking demo')
    expect(booking?.name).toMatch(/^Booking demo\b.*agent/)
    for (const b of buttons) {
      expect(b.name, JSON.stringify(b)).not.toBe('')
      if (b.text) continue
      await page.locator(`.q-header .q-toolbar [aria-label="${b.name}"]`).hover()
      const tip = page.locator('.q-tooltip')
      await tip.waitFor()
      expect((await tip.innerText()).trim(), b.name).not.toBe('')
      await page.mouse.move(0, 400)
      await tip.waitFor({ state: 'detached' })
    }
    await page.context().close()
  })

  it('390 px (a phone): no bare ticket; the booking demo is in the settings, in words', async () => {
    const page = await open({ width: 390 })
    const buttons = await barButtons(page)
    expect(buttons.filter((b) => b.href === '/booking')).toEqual([])
    await page.getByRole('button', { name: 'Settings' }).click()
    const link = page.locator('.q-menu').getByRole('link', { name: /Booking demo/ })
    await link.waitFor()
    expect(await link.getAttribute('href')).toBe('/booking')
    expect(await link.innerText()).toMatch(/Booking demo[\s\S]*agent/)
    await page.context().close()
  })

  // Quasar holds an input's focus() back while a popup is on its way in
  // or out, a tooltip too: the words typed right after "Answer" went to
  // the button, not to the answer.
  it('a tooltip showing in the bar does not hold the reply box back: what is typed at once is the answer', async () => {
    const page = await open()
    const call = mcp.callTool({ name: 'ask_question', arguments: { question: 'Tooltip: typed at once?' } }, undefined, { timeout: 120_000 }) as Promise<ToolResult>
    const card = page.locator('[data-status=waiting]', { hasText: 'Tooltip: typed at once?' })
    await card.waitFor()
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur())
    for (let i = 0; i < 20 && !(await page.evaluate(() => document.activeElement?.getAttribute('aria-label') === 'Search')); i++) {
      await page.keyboard.press('Tab')
    }
    await page.locator('.q-tooltip', { hasText: 'Search' }).waitFor()
    await card.locator('[data-testid=answer]').click()
    await page.keyboard.type('typed at once')
    expect(await page.getByRole('textbox', { name: 'Your answer' }).inputValue()).toBe('typed at once')
    await page.keyboard.press('Control+Enter')
    expect(text(await call)).toBe('typed at once')
    await page.context().close()
  })
})

describe.runIf(SHOTS)('screenshots', () => {
  // A server of their own: the one above has had questions by now.
  let fresh: Server
  beforeAll(async () => {
    fresh = await startServer()
  })
  afterAll(async () => {
    await fresh?.stop()
  })
  for (const width of [1280, 390]) {
    for (const scheme of ['light', 'dark'] as const) {
      it(`the empty inbox, ${width} ${scheme}`, async () => {
        const page = await open({ width, scheme, server: fresh })
        await page.locator('[data-testid=empty]').waitFor()
        await page.screenshot({ path: `${SHOTS}/inbox-empty-${width}-${scheme}.png` })
        await page.context().close()
      })
    }
  }
})
