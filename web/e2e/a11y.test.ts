// The inbox for a person who uses only a keyboard, or a screen reader:
// every control named, the page's structure in headings and groups, a
// new question announced, focus never lost, readable contrast.
import { mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, opened, PNG, SHOTS, startMCP, startServer, text, type Server, type ToolResult } from './harness'

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

async function open(o: { scheme?: 'light' | 'dark'; width?: number; nickname?: string } = {}): Promise<Page> {
  const width = o.width ?? 1280
  const ctx = await browser.newContext({ viewport: { width, height: 800 }, locale: 'en-US', colorScheme: o.scheme ?? 'light' })
  ctxs.push(ctx)
  await ctx.addInitScript((n) => localStorage.setItem('aa.nickname', n), o.nickname ?? `a11y-${ctxs.length}`)
  await ctx.addInitScript(installContrast)
  const page = await ctx.newPage()
  await page.goto(`${srv.url}/?token=${srv.token}`)
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  return page
}

// installContrast gives the page WCAG's contrast ratio: aaContrast(fg,
// bg) for two CSS colours, aaBackground(el) for the opaque colour under
// an element (its ancestors' backgrounds composed, then the body's).
function installContrast() {
  type RGBA = { r: number; g: number; b: number; a: number }
  const parse = (c: string): RGBA => {
    const m = (c.match(/[\d.]+/g) ?? ['0', '0', '0', '0']).map(Number)
    if (c.startsWith('color(srgb')) return { r: m[0]! * 255, g: m[1]! * 255, b: m[2]! * 255, a: m[3] ?? 1 }
    return { r: m[0]!, g: m[1]!, b: m[2]!, a: m[3] ?? 1 }
  }
  const over = (top: RGBA, under: RGBA): RGBA => ({
    r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a), b: top.b * top.a + under.b * (1 - top.a), a: 1,
  })
  const lum = (c: RGBA) => {
    const f = (v: number) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4)
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b)
  }
  const background = (el: Element | null): RGBA => {
    const layers: RGBA[] = []
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor)
      if (c.a > 0) layers.push(c)
      if (c.a >= 1) break
    }
    let base = parse(getComputedStyle(document.body).backgroundColor)
    if (base.a < 1) base = { r: 255, g: 255, b: 255, a: 1 }
    for (const l of layers.reverse()) base = over(l, base)
    return base
  }
  const ratio = (fg: RGBA, bg: RGBA) => {
    const a = lum(over(fg, bg)), b = lum(bg)
    return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05)
  }
  // textContrast: the ratio of an element's text to what is under it,
  // its opacity (and its ancestors') applied.
  const textContrast = (el: Element) => {
    let opacity = 1
    for (let e: Element | null = el; e; e = e.parentElement) opacity *= Number(getComputedStyle(e).opacity)
    const fg = parse(getComputedStyle(el).color)
    return ratio({ ...fg, a: fg.a * opacity }, background(el))
  }
  Object.assign(window, { aaRatio: (fg: string, el: Element) => ratio(parse(fg), background(el)), aaTextContrast: textContrast })
}

function ask(args: Record<string, unknown>, tool = 'ask_question') {
  return mcp.callTool({ name: tool, arguments: args }, undefined, { timeout: 120_000 }) as Promise<ToolResult>
}

// unnamed lists the lines of an ARIA snapshot that are a control a
// screen reader would announce by its role alone.
function unnamed(snapshot: string): string[] {
  return snapshot.split('\n').filter((l) => /^\s*- (button|link|textbox|combobox|checkbox|switch|radio|img)(\s*\[[^\]]*\])*:?\s*$/.test(l))
}

describe('a screen reader', () => {
  it('hears a name for every control: the reply box, an attached image, the chat', async () => {
    const page = await open({ nickname: 'reader' })
    const other = await open({ nickname: 'other desk' })
    const call = ask({ question: 'Names: what does the screen show?' })
    await page.locator('[data-status=waiting]', { hasText: 'Names:' }).waitFor()
    await page.getByRole('textbox', { name: 'Your answer' }).waitFor()

    await page.locator('[data-testid=file]').setInputFiles({ name: 'shot.png', mimeType: 'image/png', buffer: PNG })
    await page.getByRole('img', { name: 'Attached image 1' }).waitFor()
    await page.getByRole('button', { name: 'Remove image 1' }).waitFor()
    expect(unnamed(await page.locator('body').ariaSnapshot())).toEqual([])
    await page.getByRole('textbox', { name: 'Your answer' }).fill('This.')
    await page.getByRole('button', { name: 'Send', exact: true }).click()
    expect(text(await call)).toBe('This.')
    // The answer as sent: its image is named too.
    const reply = page.locator('[data-status=answeredHere]', { hasText: 'Names:' }).locator('[data-testid=reply]')
    await reply.getByRole('img', { name: 'Image 1' }).waitFor()

    await page.locator('[data-testid=users] [data-client-id]', { hasText: 'other desk' }).click()
    const chat = page.locator('[data-testid=chat]')
    await chat.waitFor()
    await page.getByRole('dialog', { name: 'Chat with other desk' }).waitFor()
    await chat.getByRole('textbox', { name: 'Message' }).waitFor()
    await chat.getByRole('button', { name: 'Send', exact: true }).waitFor()
    expect(unnamed(await chat.ariaSnapshot())).toEqual([])
    await other.context().close()
  })
})

describe('the page\'s structure', () => {
  it('has a title heading and one heading per card that says what it is and asks', async () => {
    const page = await open()
    const calls = [ask({ question: 'Heading: ship it?' }), ask({ summary: 'Heading report: the build is green.' }, 'task_finish')]
    await page.locator('[data-status=waiting]', { hasText: 'Heading report' }).waitFor()
    await page.getByRole('heading', { level: 1, name: 'Agent Assistant' }).waitFor()
    const q = page.locator('[data-status=waiting]', { hasText: 'Heading: ship' })
    expect(await q.getByRole('heading', { level: 2 }).getAttribute('aria-label')).toBe('Question, Waiting for you: Heading: ship it?')
    const r = page.locator('[data-status=waiting]', { hasText: 'Heading report' })
    await r.getByRole('heading', { level: 2, name: 'Task finished, Waiting for you: Heading report: the build is green.' }).waitFor()
    for (const id of await page.locator('[data-status=waiting]').evaluateAll((es) => es.map((e) => e.getAttribute('data-request-id')))) {
      await page.locator(`[data-request-id="${id}"] [data-testid=answer]`).click()
      await page.getByRole('textbox', { name: 'Your answer' }).fill('ok')
      await page.keyboard.press('Control+Enter')
    }
    for (const c of calls) expect(text(await c)).toBe('ok')
  })

  it('puts a question\'s options in a group named by the question', async () => {
    const page = await open()
    const single = ask({ question: 'Group: which database?', options: [{ label: 'Postgres', description: 'the usual' }, { label: 'MySQL' }, { label: 'SQLite' }, { label: 'None' }], allow_other: true })
    const multi = ask({ question: 'Group: which checks?', options: [{ label: 'Unit' }, { label: 'E2E' }, { label: 'Lint' }, { label: 'Bench' }], multi_select: true, allow_other: true })
    await page.locator('[data-status=waiting]', { hasText: 'which checks' }).waitFor()
    const one = page.getByRole('group', { name: 'Group: which database?' })
    expect(await one.getByRole('button').allTextContents()).toEqual(['Postgresthe usual', 'MySQL', 'SQLite', 'None'])
    const many = page.getByRole('group', { name: 'Group: which checks?' })
    expect(await many.getByRole('checkbox').count()).toBe(4)
    await many.getByRole('checkbox', { name: 'E2E' }).waitFor()
    await one.getByRole('button', { name: /SQLite/ }).click()
    expect(text(await single)).toContain('SQLite')
    await many.getByRole('checkbox', { name: 'Lint' }).click()
    await page.locator('[data-status=waiting]', { hasText: 'which checks' }).locator('[data-testid=send-choices]').click()
    expect(text(await multi)).toContain('Lint')
  })
})

describe('a new question', () => {
  it('is announced in a live region, with what it asks', async () => {
    const page = await open()
    const live = page.locator('[aria-live=polite][data-testid=announce]')
    const call = ask({ question: 'Live: **deploy** now?' })
    await expect.poll(() => live.textContent()).toBe('New question from your agent: Live: deploy now?')
    const report = ask({ summary: 'Live report: done.' }, 'task_finish')
    await expect.poll(() => live.textContent()).toBe('Your agent finished a task: Live report: done.')
    for (const [c, hint] of [[call, 'Live: '], [report, 'Live report']] as const) {
      await page.locator('[data-status=waiting]', { hasText: hint }).locator('[data-testid=answer]').click()
      await page.getByRole('textbox', { name: 'Your answer' }).fill('ok')
      await page.keyboard.press('Control+Enter')
      expect(text(await c)).toBe('ok')
    }
  })
})

// focused describes the focused element: its tag, role, name and the
// request its card is for; "BODY" is focus lost.
function focused(page: Page) {
  return page.evaluate(() => {
    const e = document.activeElement
    if (!e || e === document.body) return 'BODY'
    const card = e.closest('[data-request-id]')?.getAttribute('data-request-id') ?? ''
    return [e.tagName, e.getAttribute('role'), e.getAttribute('aria-label') ?? e.getAttribute('data-testid'), card].filter(Boolean).join(' ')
  })
}

// tabTo presses Tab until the focused element's text or name matches.
async function tabTo(page: Page, name: RegExp) {
  for (let i = 0; i < 60; i++) {
    await page.keyboard.press('Tab')
    const now = await page.evaluate(() => {
      const e = document.activeElement
      if (!e || e === document.body) return ''
      return `${e.getAttribute('aria-label') ?? ''} ${e.textContent ?? ''}`
    })
    if (name.test(now)) return
  }
  throw new Error(`no Tab stop matches ${name}`)
}

async function idOf(page: Page, hasText: string) {
  const card = page.locator('[data-request-id]', { hasText })
  await card.waitFor()
  return (await card.getAttribute('data-request-id'))!
}

describe('the keyboard', () => {
  it('picks an option and sends several choices; focus stays on the card answered', async () => {
    const page = await open()
    const single = ask({ question: 'Keys: which database?', options: [{ label: 'Postgres' }, { label: 'MySQL' }, { label: 'SQLite' }, { label: 'None' }], allow_other: true })
    const id = await idOf(page, 'Keys: which database?')
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur())
    await tabTo(page, /SQLite/)
    await page.keyboard.press('Enter')
    expect(text(await single)).toContain('SQLite')
    await expect.poll(() => focused(page)).toBe(`DIV article ${id}`)

    const multi = ask({ question: 'Keys: which checks?', options: [{ label: 'Unit' }, { label: 'E2E' }, { label: 'Lint' }, { label: 'Bench' }], multi_select: true })
    const mid = await idOf(page, 'Keys: which checks?')
    await tabTo(page, /^\s*E2E/)
    await page.keyboard.press('Space')
    await page.keyboard.press('Tab')
    await page.keyboard.press('Tab')
    await page.keyboard.press('Space')
    await tabTo(page, /Send 2 choices/)
    await page.keyboard.press('Enter')
    expect(text(await multi)).toMatch(/E2E[\s\S]*Bench/)
    await expect.poll(() => focused(page)).toBe(`DIV article ${mid}`)
  })

  it('keeps focus on the card when another device answers it', async () => {
    const page = await open()
    const elsewhere = await open()
    const call = ask({ question: 'Elsewhere: fine?', options: [{ label: 'Fine' }, { label: 'Bad' }] })
    const id = await idOf(page, 'Elsewhere: fine?')
    await page.getByRole('button', { name: 'Fine' }).focus()
    await elsewhere.getByRole('button', { name: 'Bad' }).click()
    expect(text(await call)).toContain('Bad')
    await page.locator(`[data-request-id="${id}"][data-status=answeredElsewhere]`).waitFor()
    expect(await focused(page)).toBe(`DIV article ${id}`)
    await elsewhere.context().close()
  })

  it('keeps focus on the card when the reply box answers the last question', async () => {
    const page = await open()
    const call = ask({ question: 'Last: done?' })
    const id = await idOf(page, 'Last: done?')
    await expect.poll(() => focused(page)).toBe('TEXTAREA Your answer')
    await page.keyboard.type('Done.')
    await page.keyboard.press('Control+Enter')
    expect(text(await call)).toBe('Done.')
    await page.locator(`[data-request-id="${id}"][data-status=answeredHere]`).waitFor()
    await expect.poll(() => focused(page)).toBe(`DIV article ${id}`)
  })

  it('leaves focus where the person is when a question arrives, and back on the search button after Escape', async () => {
    const page = await open()
    await page.getByRole('button', { name: 'Search' }).focus()
    await page.keyboard.press('Enter')
    await expect.poll(() => focused(page)).toBe('INPUT search')
    await page.keyboard.type('nothing like it')
    const call = ask({ question: 'Arrives: while searching?' })
    await page.locator('[data-testid=announce]', { hasText: 'Arrives: while searching?' }).waitFor()
    expect(await focused(page)).toBe('INPUT search')
    await page.keyboard.press('Escape')
    await expect.poll(() => focused(page)).toBe('BUTTON Search')
    const id = await idOf(page, 'Arrives: while')
    await page.locator(`[data-request-id="${id}"] [data-testid=answer]`).click()
    await page.keyboard.type('ok')
    await page.keyboard.press('Control+Enter')
    expect(text(await call)).toBe('ok')
  })
})

// ring describes how the focused element shows its focus: a field by
// its own focused border, anything else by an outline of at least 2 px
// that stands out 3:1 from what is around it.
function ring(page: Page) {
  return page.evaluate(() => {
    const e = document.activeElement
    if (!e || e === document.body) return { name: 'BODY', ok: false, why: 'focus on the page' }
    const name = `${e.tagName} ${e.getAttribute('aria-label') ?? (e.textContent ?? '').trim().slice(0, 24)}`
    if (e.matches('input, textarea')) {
      const field = e.closest('.q-field')
      return { name, ok: !!field?.classList.contains('q-field--focused'), why: 'field not shown focused' }
    }
    const s = getComputedStyle(e)
    const w = parseFloat(s.outlineWidth)
    const r = (window as unknown as { aaRatio: (c: string, el: Element) => number }).aaRatio(s.outlineColor, e.parentElement!)
    return { name, ok: s.outlineStyle !== 'none' && w >= 2 && r >= 3, why: `outline ${s.outlineStyle} ${w}px ratio ${r.toFixed(2)}` }
  })
}

describe('the focus ring', () => {
  for (const scheme of ['light', 'dark'] as const) {
    it(`${scheme}: every Tab stop shows where focus is, and Tab goes round without a trap`, async () => {
      const page = await open({ scheme })
      const calls = [
        ask({ question: `Ring ${scheme}: which database?`, options: [{ label: 'Postgres' }, { label: 'MySQL' }], allow_other: true }),
        ask({ question: `Ring ${scheme}: which checks?`, options: [{ label: 'Unit' }, { label: 'Lint' }], multi_select: true }),
      ]
      await idOf(page, `Ring ${scheme}: which checks?`)
      await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur())
      const seen: string[] = []
      const bad: string[] = []
      let round = false
      for (let i = 0; i < 40; i++) {
        await page.keyboard.press('Tab')
        const r = await ring(page)
        if (r.name === 'BODY') continue // past the end, Tab goes round through the browser
        if (seen[0] === r.name) {
          round = true
          break
        }
        seen.push(r.name)
        if (!r.ok) bad.push(`${r.name}: ${r.why}`)
      }
      expect(round).toBe(true)
      expect(seen[0]).toMatch(/Search/)
      expect(seen.some((n) => /Postgres/.test(n))).toBe(true)
      expect(bad).toEqual([])
      // Shift+Tab walks back out of the reply box.
      await page.getByRole('textbox', { name: 'Your answer' }).focus()
      await page.keyboard.press('Shift+Tab')
      expect(await focused(page)).toBe('BUTTON Attach image')

      await page.getByRole('button', { name: 'Postgres' }).click()
      const checks = page.getByRole('group', { name: `Ring ${scheme}: which checks?` })
      await checks.getByRole('checkbox', { name: 'Unit' }).click()
      await checks.getByRole('button', { name: /Send/ }).click()
      for (const c of calls) await c
    })
  }
})

// lowContrast lists the visible text on the page (or in root) below
// WCAG AA: 4.5:1, or 3:1 for large text (24 px, or 18.66 px bold).
// A disabled control's text is exempt.
function lowContrast(page: Page, root = 'body') {
  return page.evaluate((sel) => {
    const out: string[] = []
    const seen = new Set<Element>()
    const walker = document.createTreeWalker(document.querySelector(sel)!, NodeFilter.SHOW_TEXT)
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement!
      if (!n.textContent!.trim() || seen.has(el)) continue
      seen.add(el)
      const box = el.getBoundingClientRect()
      if (!box.width || !box.height || getComputedStyle(el).visibility === 'hidden' || el.closest('.aa-sr-only')) continue
      if (el.closest('[disabled], [aria-disabled=true], .disabled')) continue
      const s = getComputedStyle(el)
      const size = parseFloat(s.fontSize)
      const large = size >= 24 || (size >= 18.66 && Number(s.fontWeight) >= 700)
      const r = (window as unknown as { aaTextContrast: (e: Element) => number }).aaTextContrast(el)
      if (r < (large ? 3 : 4.5)) out.push(`${r.toFixed(2)} "${n.textContent!.trim().slice(0, 30)}"`)
    }
    return out
  }, root)
}

describe('contrast', () => {
  for (const scheme of ['light', 'dark'] as const) {
    it(`${scheme}: text on cards, statuses, chips, the bars and the settings reads at AA`, async () => {
      const page = await open({ scheme })
      const other = await open({ scheme })
      const stop = new AbortController()
      const withdrawn = mcp.callTool({ name: 'ask_question', arguments: { question: `Contrast ${scheme}: withdrawn?` } }, undefined, { timeout: 120_000, signal: stop.signal }).catch(() => 'withdrawn')
      const here = ask({ question: `Contrast ${scheme}: answered here?` })
      const there = ask({ question: `Contrast ${scheme}: answered there?`, options: [{ label: 'There', description: 'on the other device' }, { label: 'Not there' }] })
      const opts = ask({ question: `Contrast ${scheme}: options?`, options: [{ label: 'One', description: 'the first one' }, { label: 'Two' }], allow_other: true })
      const report = ask({ summary: `Contrast ${scheme}: task done.` }, 'task_finish')
      await idOf(page, `Contrast ${scheme}: task done.`)
      stop.abort()
      expect(await withdrawn).toBe('withdrawn')
      await other.getByRole('button', { name: /^There/ }).click()
      await there
      const hid = await idOf(page, `Contrast ${scheme}: answered here?`)
      await page.locator(`[data-request-id="${hid}"] [data-testid=answer]`).click()
      await page.getByRole('textbox', { name: 'Your answer' }).fill('Here.')
      await page.keyboard.press('Control+Enter')
      await here
      const rid = await idOf(page, `Contrast ${scheme}: task done.`)
      await page.locator(`[data-request-id="${rid}"] [data-testid=answer]`).click()
      await page.locator('[data-testid=quick]').first().waitFor()
      for (const s of ['cancelled', 'answeredHere', 'answeredElsewhere', 'waiting']) await page.locator(`[data-status=${s}]`).first().waitFor()
      // The whole list, not only what is in view.
      await page.setViewportSize({ width: 1280, height: 3000 })
      expect(await lowContrast(page)).toEqual([])

      await page.getByRole('button', { name: 'Settings' }).click()
      const menu = page.locator('.q-menu')
      await expect.poll(() => menu.evaluate((m) => getComputedStyle(m).opacity)).toBe('1')
      expect(await lowContrast(page, '.q-menu')).toEqual([])
      await page.keyboard.press('Escape')

      await page.getByRole('button', { name: 'Two' }).click()
      await opts
      await page.locator('[data-testid=quick]').first().click()
      await report
      await other.context().close()
    })
  }
})

describe('more names and states', () => {
  it('says which project filter is on, and names the field of the device-name dialog', async () => {
    const page = await open()
    const calls = [
      ask({ question: 'Filter: in one?', project_directory: '/work/one' }),
      ask({ question: 'Filter: in two?', project_directory: '/work/two' }),
    ]
    await idOf(page, 'Filter: in two?')
    await page.getByRole('button', { name: 'All projects', pressed: true }).waitFor()
    await page.getByRole('button', { name: 'two', pressed: false }).click()
    await page.getByRole('button', { name: 'two', pressed: true }).waitFor()
    expect(await page.getByRole('button', { name: 'All projects', pressed: false }).count()).toBe(1)
    await page.getByRole('button', { name: 'All projects' }).click()

    await page.locator('[data-testid=me]').click()
    const dialog = page.getByRole('dialog', { name: 'Name this device' })
    const field = dialog.getByRole('textbox', { name: 'Name this device' })
    await field.waitFor()
    expect(await field.getAttribute('maxlength')).toBe('64')
    expect(await field.getAttribute('placeholder')).toMatch(/Linux/)
    await opened(page)
    await page.keyboard.press('Escape')
    for (const hint of ['Filter: in one?', 'Filter: in two?']) {
      await page.locator(`[data-request-id="${await idOf(page, hint)}"] [data-testid=answer]`).click()
      await page.getByRole('textbox', { name: 'Your answer' }).fill('ok')
      await page.keyboard.press('Control+Enter')
    }
    for (const c of calls) expect(text(await c)).toBe('ok')
  })
})

describe('320 px wide (a phone, or 400% zoom)', () => {
  it('the title bar\'s words are at least 12 px: a new device\'s "Name this device" too', async () => {
    // A device not named yet (no nickname kept) offers its naming.
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale: 'en-US' })
    ctxs.push(ctx)
    const page = await ctx.newPage()
    await page.goto(`${srv.url}/?token=${srv.token}`)
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    await page.locator('[data-testid=name-device]').waitFor()
    const small = await page.locator('.q-header').evaluate((h) => {
      const out: string[] = []
      const walker = document.createTreeWalker(h, NodeFilter.SHOW_TEXT)
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        const el = n.parentElement!
        if (!n.textContent!.trim() || el.closest('.aa-sr-only') || !el.getBoundingClientRect().width) continue
        const size = parseFloat(getComputedStyle(el).fontSize)
        if (size < 12) out.push(`${size}px "${n.textContent!.trim()}"`)
      }
      return out
    })
    expect(small).toEqual([])
  })

  it('the inbox\'s title bar: the title whole beside the status and the buttons, and nothing scrolls sideways', async () => {
    const page = await open({ width: 320 })
    const title = page.locator('.aa-title')
    const cut = await title.evaluate((e) => {
      const inner = e.querySelector('div') ?? e
      return e.scrollWidth > e.clientWidth + 0.5 || inner.scrollWidth > inner.clientWidth + 0.5
    })
    expect(cut).toBe(false)
    const bar = await page.locator('.q-header .q-toolbar').evaluate((t) => [...t.children].map((c) => c.getBoundingClientRect().right))
    expect(Math.max(...bar)).toBeLessThanOrEqual(320)
    expect(await page.evaluate(() => document.scrollingElement!.scrollWidth)).toBeLessThanOrEqual(320)
  })

  it('the token screen fits: nothing is cut off or scrolls sideways', async () => {
    const ctx = await browser.newContext({ viewport: { width: 320, height: 640 }, locale: 'en-US' })
    ctxs.push(ctx)
    const page = await ctx.newPage()
    await page.goto(`${srv.url}/`)
    await page.locator('[data-testid=token-needed]').waitFor()
    const wide = await page.evaluate(() => [...document.querySelectorAll('[data-testid=token-needed] *')]
      .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
      .map((e) => e.textContent!.trim().slice(0, 40)))
    expect(wide).toEqual([])
    expect(await page.evaluate(() => document.scrollingElement!.scrollWidth)).toBeLessThanOrEqual(320)
  })
})

// The screens for the docs (AA_SCREENSHOTS=dir): keyboard focus on an
// option, and the token screens. The ones the docs show go to dir, the
// others beside them in the temporary directory, to look at.
describe.runIf(SHOTS)('screenshots', () => {
  const docs = new Set(['a11y-focus-1280-light', 'a11y-focus-390-dark', 'inbox-token-needed-1280-light', 'inbox-token-refused-390-dark'])
  const aside = `${tmpdir()}/aa-a11y-shots`
  mkdirSync(aside, { recursive: true })
  const where = (name: string) => `${docs.has(name) ? SHOTS : aside}/${name}.png`
  for (const scheme of ['light', 'dark'] as const) {
    it(`320 ${scheme}: the title bar`, async () => {
      const page = await open({ scheme, width: 320, nickname: 'Small phone' })
      await page.screenshot({ path: where(`inbox-320-${scheme}`) })
    })
  }
  for (const width of [1280, 390]) {
    for (const scheme of ['light', 'dark'] as const) {
      it(`${width} ${scheme}`, async () => {
        const page = await open({ scheme, width, nickname: width > 600 ? 'Desk' : 'Phone' })
        const call = ask({ question: `Deploy the **${scheme}** build now?`, options: [{ label: 'Deploy now', description: 'switch traffic after the migration' }, { label: 'Wait for the backup' }], allow_other: true })
        await page.locator('[data-status=waiting]', { hasText: `Deploy the ${scheme} build` }).waitFor()
        await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur())
        await tabTo(page, /Deploy now/)
        await page.screenshot({ path: where(`a11y-focus-${width}-${scheme}`) })
        await page.keyboard.press('Enter')
        expect(text(await call)).toContain('Deploy now')

        const ctx = await browser.newContext({ viewport: { width, height: 800 }, locale: 'en-US', colorScheme: scheme })
        ctxs.push(ctx)
        const t = await ctx.newPage()
        await t.goto(`${srv.url}/`)
        await t.locator('[data-testid=token-needed]').waitFor()
        await t.screenshot({ path: where(`inbox-token-needed-${width}-${scheme}`) })
        await t.goto(`${srv.url}/?token=wrong`)
        await t.locator('[data-testid=token-needed][data-refused=true]').waitFor()
        await t.screenshot({ path: where(`inbox-token-refused-${width}-${scheme}`) })
      })
    }
  }
})
