// The inbox as a phone app: at 390 px and 1280 px, light and dark, with
// a question of every kind on screen (waiting, answered on another
// device, a task report, one whose agent went away) and a chat open.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, opened, SHOTS, startMCP, startServer, type Server } from './harness'

let srv: Server
let mcp: Client
let browser: Browser
const ctxs: BrowserContext[] = []
const calls: Promise<unknown>[] = []

const post = (path: string, body: unknown, signal?: AbortSignal) =>
  fetch(`${srv.url}/agentassistproto.${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), signal })

beforeAll(async () => {
  srv = await startServer()
  mcp = await startMCP(srv)
  browser = await launch()

  // Answered on another device.
  const asked = post('SrvAgentAssist/AskQuestion', { ID: 'answered', UserToken: srv.token, Request: {
    Question: 'Use the new cache layer for the **search** endpoint?', ProjectDirectory: '/home/me/shop', AgentName: 'Claude Code', ReasoningModelName: 'claude-opus-4', Timeout: 600 } })
  for (let tries = 0; ; tries++) {
    const r = await post('SrvAgentAssistReply/AskQuestionReply', { UserToken: srv.token, Nickname: 'Pixel 8 · Chrome',
      Response: { ID: 'answered', contents: [{ type: 1, text: { type: 'text', text: 'Yes, behind a flag.' } }] } })
    if (r.ok) break
    if (tries > 100) throw new Error('could not answer')
    await new Promise((r) => setTimeout(r, 10))
  }
  expect((await asked).ok).toBe(true)

  // A task report and a question, both waiting.
  calls.push(mcp.callTool({ name: 'task_finish', arguments: { summary: 'Refactored the **payment** module; all 214 tests pass.',
    project_directory: '/home/me/shop', agent_name: 'Claude Code', reasoning_model_name: 'claude-opus-4' } }, undefined, { timeout: 600_000 }).catch(() => undefined))
  calls.push(mcp.callTool({ name: 'ask_question', arguments: {
    question: 'Which **database** for the new service? See [the design doc](https://example.com/design) and the diagram:\n\n![architecture diagram](https://example.com/arch.png) ![load chart](charts/load.png)',
    project_directory: '/home/me/shop', agent_name: 'Claude Code', reasoning_model_name: 'claude-opus-4' } }, undefined, { timeout: 600_000 }).catch(() => undefined))
})

// agentLeaves asks a question from a caller that takes no missed
// answers, as upstream's agentassistant-mcp, which then goes away: the
// question is withdrawn, and pages open now are told why.
async function agentLeaves(id: string, question: string, pages: Page[]) {
  const ac = new AbortController()
  const left = post('SrvAgentAssist/AskQuestion', { ID: id, UserToken: srv.token, Request: {
    Question: question, ProjectDirectory: '/home/me/infra', AgentName: 'Cursor', Timeout: 600 } }, ac.signal).catch(() => undefined)
  for (const p of pages) await p.locator(`[data-request-id=${id}][data-status=waiting]`).waitFor()
  ac.abort()
  await left
  for (const p of pages) await p.locator(`[data-request-id=${id}][data-status=cancelled]`).waitFor()
}

afterAll(async () => {
  for (const c of ctxs) await c.close()
  await browser?.close()
  await mcp?.close()
  await srv?.stop()
  await Promise.all(calls)
})

async function open(width: number, height: number, scheme: 'light' | 'dark', nickname: string, scene = true): Promise<Page> {
  const phone = width < 600
  const ctx = await browser.newContext({ viewport: { width, height }, locale: 'en-US', colorScheme: scheme, isMobile: phone, hasTouch: phone })
  ctxs.push(ctx)
  await ctx.addInitScript((n) => localStorage.setItem('aa.nickname', n), nickname)
  const page = await ctx.newPage()
  await page.goto(`${srv.url}/?token=${srv.token}`)
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  if (!scene) return page
  await page.locator('[data-status=waiting]', { hasText: 'database' }).waitFor()
  await page.locator('[data-status=waiting]', { hasText: 'payment' }).waitFor()
  return page
}

const SIZES = [[1280, 800, 'light'], [1280, 800, 'dark'], [390, 844, 'light'], [390, 844, 'dark']] as const

// The relative luminance of a CSS rgb()/rgba() colour (WCAG).
function luminance(css: string): number {
  const [r, g, b] = (/rgba?\(([^)]+)\)/.exec(css)?.[1] ?? '0,0,0').split(',').slice(0, 3).map((v) => {
    const c = parseFloat(v) / 255
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4
  }) as [number, number, number]
  return 0.2126 * r + 0.7152 * g + 0.0722 * b
}
const contrast = (a: string, b: string) => {
  const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p) as [number, number]
  return (x + 0.05) / (y + 0.05)
}

// The colour an element is painted on: its own background, or the first
// ancestor's that is not transparent.
async function backdrop(page: Page, selector: string): Promise<string> {
  return page.locator(selector).first().evaluate((e) => {
    for (let n: Element | null = e; n; n = n.parentElement) {
      const c = getComputedStyle(n).backgroundColor
      if (c && !/rgba\(.*,\s*0\)$/.test(c) && c !== 'transparent') return c
    }
    return getComputedStyle(document.body).backgroundColor
  })
}

const boxes = (page: Page, selector: string) => page.locator(selector).evaluateAll((els) => els.map((e) => {
  const r = e.getBoundingClientRect()
  return { top: r.top, bottom: r.bottom, left: r.left, right: r.right }
}))

describe('the inbox as a phone app', () => {
  it('at 1280 px and 390 px, light and dark: every kind of question, and a chat', async () => {
    const other = await open(1280, 800, 'light', 'Anna’s phone', false)
    const pages: Page[] = []
    for (const [w, h, scheme] of SIZES) pages.push(await open(w, h, scheme, `desk-${w}-${scheme}`))
    await agentLeaves('left', 'Rotate the API keys tonight?', pages)
    for (const [i, [w, , scheme]] of SIZES.entries()) {
      const page = pages[i]!
      // The chat is typed in and closed once it has opened, and closed
      // once the line is shown as sent.
      await other.locator('[data-testid=users]').getByText(`desk-${w}-${scheme}`).click()
      await opened(other)
      await other.locator('input[data-testid=chat-input]').fill('Shall I dictate the commit message?')
      await other.keyboard.press('Enter')
      await other.locator('[data-testid=chat-lines]').getByText('dictate').waitFor()
      await other.locator('[data-testid=chat-close]').click()
      await other.locator('[data-testid=chat]').waitFor({ state: 'detached' })
      await expect.poll(() => page.locator('[data-testid=users] [data-testid=unread]').textContent()).toBe('1')
      await expect(page.locator('[data-request-id=left] [data-testid=status]').textContent()).resolves.toBe('The agent went away')
      await page.locator('[data-request-id=answered]').evaluate((e) => {
        e.scrollIntoView({ block: 'start' })
        scrollBy(0, -document.querySelector('.q-header')!.getBoundingClientRect().height - 8)
      })
      if (SHOTS) await page.screenshot({ path: `${SHOTS}/inbox-${w}-${scheme}.png` })
      await page.locator('[data-testid=users]').getByText('Anna').click()
      await page.locator('[data-testid=chat]').getByText('dictate').waitFor()
      await page.locator('.q-dialog .q-transition--slide-up-enter-active').waitFor({ state: 'detached' })
      if (SHOTS) await page.screenshot({ path: `${SHOTS}/inbox-chat-${w}-${scheme}.png` })
      await page.locator('[data-testid=chat-close]').click()
      await page.locator('[data-testid=chat]').waitFor({ state: 'detached' })
    }
  })

  it('the app\'s title is whole at 390 px, beside the status and the buttons', async () => {
    const page = await open(390, 844, 'light', 'title-check', false)
    const cut = await page.locator('.q-toolbar__title').evaluate((e) => e.scrollWidth > e.clientWidth)
    expect(cut).toBe(false)
  })

  it('a wide Markdown table scrolls inside its card at 390 px, its words whole, and what follows keeps its distance', async () => {
    const page = await open(390, 844, 'light', 'table-check', false)
    const id = 'wide-table'
    const asked = post('SrvAgentAssist/AskQuestion', { ID: id, UserToken: srv.token, Request: {
      Question: 'Which columns to keep?\n\n| Column | Type | Nullable | Default | Index | Comment |\n|---|---|---|---|---|---|\n' +
        '| customer_identifier | varchar(255) | no | none | orders_customer_identifier_idx | who placed the order |\n\n> Dropping one is irreversible.',
      ProjectDirectory: '/home/me/shop', AgentName: 'Claude Code', Timeout: 600 } }).catch(() => undefined)
    const card = page.locator(`[data-request-id=${id}][data-status=waiting]`)
    await card.waitFor()
    const look = await card.evaluate((c) => {
      const md = c.querySelector('.aa-md')!
      const table = md.querySelector('table')!
      const quote = md.querySelector('blockquote')!
      const r = c.getBoundingClientRect()
      // A heading of one word is read whole, not broken into syllables.
      const broken = Array.from(md.querySelectorAll('th')).filter((th) => {
        const range = document.createRange()
        range.selectNodeContents(th)
        return new Set(Array.from(range.getClientRects()).filter((b) => b.width > 0).map((b) => Math.round(b.top))).size > 1
      }).map((th) => th.textContent)
      return { broken, cardOverflows: c.scrollWidth > c.clientWidth + 1, tableRight: table.getBoundingClientRect().right, cardRight: r.right,
        tableScrolls: table.scrollWidth > table.clientWidth, gap: quote.getBoundingClientRect().top - table.getBoundingClientRect().bottom }
    })
    expect(look.broken).toEqual([])
    expect(look.cardOverflows).toBe(false)
    expect(look.tableRight).toBeLessThanOrEqual(look.cardRight)
    expect(look.tableScrolls).toBe(true)
    expect(look.gap).toBeGreaterThanOrEqual(6)
    await post('SrvAgentAssistReply/AskQuestionReply', { UserToken: srv.token, Nickname: 'table-check',
      Response: { ID: id, contents: [{ type: 1, text: { type: 'text', text: 'all' } }] } })
    await asked
    await page.context().close()
  })

  it('every card header is one line at 390 px', async () => {
    const page = await open(390, 844, 'light', 'header-check')
    await page.locator('[data-request-id=answered][data-status=answeredElsewhere]').waitFor()
    await agentLeaves('left-0', 'Rotate the API keys tonight?', [page])
    // Every piece of text in a card's header is one line high, and the
    // pieces sit side by side on the same line.
    await expect(page.locator('[data-testid=card-head]').count()).resolves.toBe(await page.locator('[data-request-id]').count())
    const wrapped = await page.locator('[data-testid=card-head]').evaluateAll((heads) => heads.flatMap((h) => {
      const bad: string[] = []
      const mids: number[] = []
      const walker = document.createTreeWalker(h, NodeFilter.SHOW_TEXT)
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        if (!n.textContent!.trim()) continue
        const range = document.createRange()
        range.selectNodeContents(n)
        const lines = new Set(Array.from(range.getClientRects()).filter((r) => r.width > 0).map((r) => Math.round(r.top / 4)))
        if (lines.size > 1) bad.push(`"${n.textContent}" wraps into ${lines.size} lines`)
        const r = range.getBoundingClientRect()
        mids.push((r.top + r.bottom) / 2)
      }
      if (Math.max(...mids) - Math.min(...mids) > 6) bad.push(`"${h.textContent}" is not on one line`)
      return bad
    }))
    expect(wrapped).toEqual([])
    await page.context().close()
  })

  it('the reply bar stays under a sixth of a phone screen, and the question answered stays in view', async () => {
    const page = await open(390, 844, 'light', 'bar-check')
    const ratio = () => page.evaluate(() => document.querySelector('.q-footer')!.getBoundingClientRect().height / innerHeight)
    expect(await ratio()).toBeLessThan(0.16) // two waiting: pick one
    const card = page.locator('[data-status=waiting]', { hasText: 'payment' })
    await card.locator('[data-testid=answer]').click()
    await page.locator('[data-testid=reply-target]').waitFor()
    await page.locator('textarea[data-testid=reply-input]').fill('Looks good.\nPlease also update the changelog\nand tag the release.')
    await expect.poll(ratio).toBeLessThan(0.16)
    const q = await card.locator('[data-testid=question]').elementHandle()
    await expect.poll(() => page.evaluate((e) => {
      const r = e!.getBoundingClientRect()
      return r.bottom <= document.querySelector('.q-footer')!.getBoundingClientRect().top + 1
    }, q)).toBe(true)
    await page.context().close()
  })

  it('dark mode: the reply bar is dark and links are readable on dark cards', async () => {
    const page = await open(390, 844, 'dark', 'dark-check')
    expect(luminance(await backdrop(page, '.q-footer'))).toBeLessThan(0.05)
    expect(luminance(await backdrop(page, '[data-testid=pick-question] .q-field__control'))).toBeLessThan(0.05)
    const link = page.locator('[data-status=waiting] [data-testid=question] a').first()
    const color = await link.evaluate((e) => getComputedStyle(e).color)
    expect(contrast(color, await backdrop(page, '[data-status=waiting] [data-testid=question]'))).toBeGreaterThan(4.5)
    await page.context().close()
  })

  it('the chat: a close button closes it; the unread badge leaves the name readable', async () => {
    const page = await open(390, 844, 'light', 'chat-check')
    const other = await open(1280, 800, 'light', 'Desk PC with a long name', false)
    await other.locator('[data-testid=users]').getByText('chat-check').click()
    await other.locator('input[data-testid=chat-input]').fill('Shall I dictate the commit message?')
    await other.keyboard.press('Enter')
    const chip = page.locator('[data-testid=users] .q-chip', { hasText: 'Desk PC' })
    await chip.locator('.q-badge').waitFor()
    const [badge] = await boxes(page, '[data-testid=users] .q-chip:has-text("Desk PC") .q-badge')
    const name = await chip.getByText('Desk PC with a long name').evaluate((e) => {
      const range = document.createRange()
      range.selectNodeContents(e)
      const r = range.getBoundingClientRect()
      return { top: r.top, bottom: r.bottom, left: r.left, right: r.right }
    })
    const overlap = !(badge!.right <= name.left || badge!.left >= name.right || badge!.bottom <= name.top || badge!.top >= name.bottom)
    expect(overlap).toBe(false)
    await chip.click()
    const chat = page.locator('[data-testid=chat]')
    await chat.getByText('dictate').waitFor()
    await chat.getByRole('button', { name: 'Close' }).click()
    await chat.waitFor({ state: 'detached' })
    await page.context().close()
    await other.context().close()
  })

  it('the language tooltip does not stay after a tap', async () => {
    const page = await open(390, 844, 'light', 'tooltip-check')
    await page.locator('button[aria-label=Language]').tap()
    await expect.poll(() => page.locator('.q-toolbar__title').textContent()).toContain('Agent 助手')
    // The tap is over and the page has painted since: no tooltip is
    // showing or on its way.
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))))
    expect(await page.locator('.q-tooltip').count()).toBe(0)
    await page.context().close()
  })

  it('an image from elsewhere is a link that says so, one without a web address a note; the tool says it too', async () => {
    const page = await open(390, 844, 'light', 'image-check')
    const q = page.locator('[data-status=waiting]', { hasText: 'database' }).locator('[data-testid=question]')
    const link = q.locator('a[data-image=link]')
    await expect(link.textContent()).resolves.toBe('Image, not loaded: architecture diagram (example.com)')
    await expect(link.getAttribute('href')).resolves.toBe('https://example.com/arch.png')
    await expect(q.locator('[data-image=left-out]').textContent()).resolves.toBe('Image left out: load chart')
    await expect(q.locator('img').count()).resolves.toBe(0)
    const { tools } = await mcp.listTools()
    const d = tools.find((t) => t.name === 'ask_question')!.description!
    expect(d).toContain('data: URL')
    expect(d).toMatch(/link/)
    await page.context().close()
  })

  it('a new device is named from its model and browser; a rename shows in the answers it gave, on every screen', async () => {
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'en-US', isMobile: true, hasTouch: true })
    ctxs.push(ctx)
    // Chrome on a Pixel 8, as navigator.userAgentData tells it.
    await ctx.addInitScript(() => Object.defineProperty(Navigator.prototype, 'userAgentData', {
      get: () => ({
        platform: 'Android', mobile: true, brands: [{ brand: 'Chromium', version: '131' }, { brand: 'Google Chrome', version: '131' }],
        getHighEntropyValues: async () => ({ platform: 'Android', model: 'Pixel 8' }),
      }),
    }))
    const phone = await ctx.newPage()
    await phone.goto(`${srv.url}/?token=${srv.token}`)
    await phone.locator('[data-testid=conn][data-state=online]').waitFor()
    const me = phone.locator('[data-testid=me]')
    await expect.poll(() => me.textContent()).toBe('Pixel 8 · Chrome (You)')
    const desk = await open(1280, 800, 'light', 'rename-desk', false)
    await desk.locator('[data-testid=users]').getByText('Pixel 8 · Chrome').waitFor()

    const call = mcp.callTool({ name: 'ask_question', arguments: { question: 'Rename check: merge the branch?' } }, undefined, { timeout: 120_000 })
    const card = phone.locator('[data-status=waiting]', { hasText: 'Rename check' })
    await card.locator('[data-testid=answer]').click()
    await phone.locator('textarea[data-testid=reply-input]').fill('Merge it.')
    await phone.locator('[data-testid=send]').click()
    await call
    const onDesk = desk.locator('[data-status=answeredElsewhere]', { hasText: 'Rename check' }).locator('[data-testid=reply]')
    await expect.poll(() => onDesk.textContent()).toContain('by Pixel 8 · Chrome')

    await phone.locator('[data-testid=name-device]').click()
    await phone.locator('.q-dialog input').fill("Anna's phone")
    await phone.keyboard.press('Enter')
    await expect.poll(() => onDesk.textContent()).toContain("by Anna's phone")
    const onPhone = phone.locator('[data-status=answeredHere]', { hasText: 'Rename check' }).locator('[data-testid=reply]')
    await expect.poll(() => onPhone.textContent()).toContain("by Anna's phone")
    // Kept on the desk across a reload.
    await desk.reload()
    await expect.poll(() => desk.locator('[data-request-id]', { hasText: 'Rename check' }).locator('[data-testid=reply]').textContent()).toContain("by Anna's phone")
    await desk.context().close()
  })

  it('the tab\'s title counts what waits; a search finds by text, project and agent', async () => {
    const page = await open(390, 844, 'light', 'search-check')
    await agentLeaves('left-s', 'Rotate the API keys tonight?', [page]) // asked by Cursor in /home/me/infra
    const waiting = await page.locator('[data-status=waiting]').count()
    expect(waiting).toBeGreaterThan(1)
    await expect.poll(() => page.title()).toBe(`(${waiting}) Agent Assistant`)

    await page.locator('[data-testid=search-toggle]').click()
    const search = page.locator('input[data-testid=search]')
    const shown = () => page.locator('[data-request-id]').evaluateAll((els) => els.map((e) => e.getAttribute('data-request-id')).sort())
    await search.fill('payment')
    await expect.poll(() => page.locator('[data-request-id]').count()).toBe(1)
    await expect(page.locator('[data-request-id]').textContent()).resolves.toContain('payment')
    await search.fill('cursor infra') // the agent and the project
    await expect.poll(async () => (await shown()).every((id) => id!.startsWith('left'))).toBe(true)
    await expect.poll(() => page.locator('[data-request-id]').count()).toBeGreaterThan(0)
    if (SHOTS) await page.screenshot({ path: `${SHOTS}/inbox-search-390-light.png` })
    await search.fill('no such thing anywhere')
    await page.locator('[data-testid=none-found]').waitFor()
    await page.locator('[data-testid=search-toggle]').click()
    await expect.poll(() => page.locator('[data-status=waiting]').count()).toBe(waiting)
    await page.context().close()
  })

  it('an agent that went away is named so, not as withdrawing', async () => {
    const page = await open(390, 844, 'light', 'label-check')
    await agentLeaves('left-1', 'Rotate the API keys tonight?', [page])
    await expect(page.locator('[data-request-id=left-1] [data-testid=status]').textContent()).resolves.toBe('The agent went away')
    await page.context().close()
  })


})
