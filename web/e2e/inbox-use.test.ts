// The inbox as a person uses it: a screen full of history, questions
// arriving, two at once, agents' markdown, a phone.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, BrowserContextOptions, Locator, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, startMCP, startServer, text, type Server, type ToolResult } from './harness'

let srv: Server
let mcp: Client
let browser: Browser

const DESKTOP: BrowserContextOptions = { viewport: { width: 1280, height: 800 }, locale: 'en-US' }
// Chromium at a phone's size with a touch screen, as a person tries it
// with the desktop browser's device toolbar: the user agent stays the
// desktop one, the pointer is coarse.
const PHONE: BrowserContextOptions = { viewport: { width: 390, height: 844 }, locale: 'en-US', isMobile: true, hasTouch: true }

beforeAll(async () => {
  srv = await startServer()
  mcp = await startMCP(srv)
  browser = await launch()
  // A screen full of answered questions, as after a day of work.
  const post = (path: string, body: unknown) =>
    fetch(`${srv.url}/agentassistproto.${path}`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) })
  for (let i = 0; i < 12; i++) {
    const id = `day-${String(i).padStart(2, '0')}`
    const asked = post('SrvAgentAssist/AskQuestion', { ID: id, UserToken: srv.token, Request: { Question: `Earlier question ${i}: keep going with step ${i}?`, Timeout: 60 } })
    for (let tries = 0; ; tries++) {
      const r = await post('SrvAgentAssistReply/AskQuestionReply', { UserToken: srv.token, Response: { ID: id, contents: [{ type: 1, text: { type: 'text', text: `yes ${i}` } }] } })
      if (r.ok) break
      if (tries > 100) throw new Error(`could not answer ${id}`)
      await new Promise((r) => setTimeout(r, 10))
    }
    expect((await asked).ok).toBe(true)
  }
})

afterAll(async () => {
  await browser?.close()
  await mcp?.close()
  await srv?.stop()
})

async function open(opts: BrowserContextOptions, nickname?: string, init?: () => void): Promise<Page> {
  const ctx = await browser.newContext(opts)
  if (nickname) await ctx.addInitScript((n) => localStorage.setItem('aa.nickname', n), nickname)
  if (init) await ctx.addInitScript(init)
  const page = await ctx.newPage()
  await page.goto(`${srv.url}/?token=${srv.token}`)
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  await page.locator('[data-request-id=day-11]').waitFor() // the history is on screen
  return page
}

function ask(question: string) {
  return mcp.callTool({ name: 'ask_question', arguments: { question } }, undefined, { timeout: 120_000 }) as Promise<ToolResult>
}

// inView tells whether the whole element is between the header and the
// fixed reply bar, where a person can see it.
async function inView(page: Page, el: Locator) {
  return page.evaluate((e) => {
    const r = e!.getBoundingClientRect()
    const top = document.querySelector('.q-header')!.getBoundingClientRect().bottom
    const bottom = document.querySelector('.q-footer')!.getBoundingClientRect().top
    return r.height > 0 && r.top >= top - 1 && r.bottom <= bottom + 1
  }, await el.elementHandle())
}

async function answer(page: Page, id: string, reply: string) {
  await page.locator(`[data-request-id="${id}"] [data-testid=answer]`).click()
  await page.locator('textarea[data-testid=reply-input]').fill(reply)
  await page.keyboard.press('Control+Enter')
}

describe('the inbox as a person uses it', () => {
  for (const [name, opts] of [['desktop', DESKTOP], ['phone', PHONE]] as const) {
    it(`${name}: a newly waiting question is scrolled into view above the reply bar`, async () => {
      const page = await open(opts, `viewer-${name}`)
      const first = ask(`First on the ${name}: shall I migrate the database?\n\nIt takes about ten minutes.`)
      const card = page.locator('[data-status=waiting]', { hasText: `First on the ${name}` })
      await card.waitFor()
      await expect.poll(() => inView(page, card)).toBe(true)
      const second = ask(`Second on the ${name}: and rebuild the search index?`)
      const card2 = page.locator('[data-status=waiting]', { hasText: `Second on the ${name}` })
      await card2.waitFor()
      await expect.poll(() => inView(page, card2)).toBe(true)
      for (const [call, c, reply] of [[first, card, 'Migrate.'], [second, card2, 'Rebuild.']] as const) {
        await answer(page, (await c.getAttribute('data-request-id'))!, reply)
        expect(text(await call)).toBe(reply)
      }
      await page.context().close()
    })
  }

  it('two waiting: nothing goes to a question the person did not pick', async () => {
    const page = await open(DESKTOP, 'picker')
    const older = ask('Older: use tabs or spaces?')
    const olderCard = page.locator('[data-status=waiting]', { hasText: 'Older: use tabs' })
    await olderCard.waitFor()
    const newer = ask('Newer: ship on Friday?')
    const newerCard = page.locator('[data-status=waiting]', { hasText: 'Newer: ship on Friday' })
    await newerCard.waitFor()

    // Typed with no question chosen: the bar asks to pick one, nothing is sent.
    const input = page.locator('textarea[data-testid=reply-input]')
    await input.fill('No, on Monday.')
    await page.keyboard.press('Control+Enter')
    expect(await page.locator('[data-status=answeredHere]').count()).toBe(0)
    await page.locator('[data-testid=pick-question]').waitFor()
    expect(await page.locator('[data-testid=send]').isDisabled()).toBe(true)
    expect(await input.inputValue()).toBe('No, on Monday.') // what was typed stays

    // "Answer" on the newer card makes it the target, highlighted and named.
    await newerCard.locator('[data-testid=answer]').click()
    await expect.poll(() => newerCard.locator('.aa-highlight').count()).toBe(1)
    expect(await olderCard.locator('.aa-highlight').count()).toBe(0)
    expect(await page.locator('[data-testid=reply-target]').textContent()).toContain('Newer: ship on Friday?')
    await expect.poll(() => page.evaluate(() => document.activeElement?.tagName)).toBe('TEXTAREA')
    await page.keyboard.press('Control+Enter')
    expect(text(await newer)).toBe('No, on Monday.')
    await page.locator('[data-status=answeredHere]', { hasText: 'Newer: ship on Friday' }).waitFor()
    expect(await olderCard.getAttribute('data-status')).toBe('waiting')

    // Two again; this time chosen from the reply bar's list.
    const third = ask('Third: squash the commits?')
    await page.locator('[data-status=waiting]', { hasText: 'Third: squash' }).waitFor()
    await page.locator('[data-testid=pick-question]').waitFor()
    await page.locator('[data-testid=reply-target-select]').click()
    await page.locator('.q-menu .q-item', { hasText: 'Older: use tabs' }).click()
    expect(await page.locator('[data-testid=reply-target]').textContent()).toContain('Older: use tabs or spaces?')
    await expect.poll(() => olderCard.locator('.aa-highlight').count()).toBe(1)
    await input.fill('Spaces.')
    await page.locator('[data-testid=send]').click()
    expect(text(await older)).toBe('Spaces.')

    // One left: it is the target, named in the bar.
    expect(await page.locator('[data-testid=reply-target]').textContent()).toContain('Third: squash the commits?')
    await page.locator('.q-footer').getByText('Yes', { exact: true }).click()
    expect(text(await third)).toBe('Yes')
    await page.context().close()
  })

  it('markdown: card-sized headings, plain-text previews and notifications', async () => {
    const page = await open(DESKTOP, 'reader', () => {
      // The tab is in the background and notifications are allowed: what
      // would the person read in them?
      const notes: { title: string; body: string }[] = []
      ;(window as unknown as { notes: typeof notes }).notes = notes
      Object.defineProperty(Document.prototype, 'hidden', { get: () => true })
      class FakeNotification {
        static permission = 'granted'
        static requestPermission = async () => 'granted'
        onclick: unknown = null
        constructor(title: string, o?: { body?: string }) {
          notes.push({ title, body: o?.body ?? '' })
        }
        close() {}
      }
      ;(window as unknown as { Notification: unknown }).Notification = FakeNotification
    })
    const q = '## Which database?\n\n| name | cost |\n|---|---|\n| **pg** | 0 |\n| mysql | 1 |\n\nPick **one**.'
    const call = ask(q)
    const card = page.locator('[data-status=waiting]', { hasText: 'Which database?' })
    await card.waitFor()

    const size = (sel: string) => card.locator(sel).first().evaluate((e) => parseFloat(getComputedStyle(e).fontSize))
    const h2 = await size('[data-testid=question] h2')
    const p = await size('[data-testid=question] p')
    expect(h2 / p).toBeLessThanOrEqual(1.3)

    const preview = (await page.locator('[data-testid=reply-target]').textContent()) ?? ''
    expect(preview).toContain('Which database?')
    expect(preview).toContain('name, cost; pg, 0')
    expect(preview).not.toMatch(/[|*#]/)

    const notes = await page.evaluate(() => (window as unknown as { notes: { body: string }[] }).notes)
    expect(notes.length).toBe(1)
    expect(notes[0]!.body).toContain('Which database?')
    expect(notes[0]!.body).not.toMatch(/[|*#]/)

    await page.locator('textarea[data-testid=reply-input]').fill('pg')
    await page.keyboard.press('Control+Enter')
    expect(text(await call)).toBe('pg')
    await page.context().close()
  })

  it('phone: no keyboard shortcut offered; the device is named by platform and browser and invites a nickname', async () => {
    const phone = await open(PHONE)
    const call = ask('Phone check: all good?')
    await phone.locator('[data-status=waiting]', { hasText: 'Phone check' }).waitFor()
    const placeholder = await phone.locator('textarea[data-testid=reply-input]').getAttribute('placeholder')
    expect(placeholder).not.toContain('Ctrl')
    const desk = await open(DESKTOP, 'desk')
    expect(await desk.locator('textarea[data-testid=reply-input]').getAttribute('placeholder')).toContain('Ctrl+Enter')

    // Named by its platform and browser, and the same name after a reload.
    const me = phone.locator('[data-testid=me]')
    const auto = (await me.textContent())!.trim()
    expect(auto).toMatch(/^Linux · (Chrome|Chromium) \(You\)$/)
    await phone.reload()
    await phone.locator('[data-testid=conn][data-state=online]').waitFor()
    expect((await me.textContent())!.trim()).toBe(auto)

    // The invitation to choose a name; the chosen name is kept and others see it.
    await phone.locator('[data-testid=name-device]').click()
    const field = phone.locator('.q-dialog input')
    await field.fill("Anna's phone")
    await phone.keyboard.press('Enter')
    await expect.poll(() => me.textContent()).toContain("Anna's phone")
    expect(await phone.evaluate(() => localStorage.getItem('aa.nickname'))).toBe("Anna's phone")
    expect(await phone.locator('[data-testid=name-device]').count()).toBe(0)
    await desk.locator('[data-testid=users]').getByText("Anna's phone").waitFor()

    // So is a desktop; an old random name ("PC-sd8y") gives way to it.
    const pc = await open(DESKTOP, undefined, () => localStorage.setItem('aa.device', 'PC-sd8y'))
    expect((await pc.locator('[data-testid=me]').textContent())!.trim()).toMatch(/^Linux · (Chrome|Chromium) \(You\)$/)

    await phone.locator('.q-footer').getByText('Yes', { exact: true }).click()
    expect(text(await call)).toBe('Yes')
    for (const p of [phone, desk, pc]) await p.context().close()
  })
})
