// A person answering from a phone on a flaky network: the connection
// drops in a tunnel, dies silently in a lift, the tab is reloaded, and
// another device answers first. Nothing typed is lost, and nothing goes
// twice.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, PNG, SHOTS, startMCP, startProxy, startServer, text, type Server, type ToolResult } from './harness'

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

type Open = { width?: number; height?: number; scheme?: 'light' | 'dark'; origin?: string; server?: Server }

async function open(nickname: string, o: Open = {}): Promise<Page> {
  const width = o.width ?? 390
  const phone = width < 600
  const ctx = await browser.newContext({ viewport: { width, height: o.height ?? 844 }, locale: 'en-US', colorScheme: o.scheme ?? 'light', isMobile: phone, hasTouch: phone })
  ctxs.push(ctx)
  await ctx.addInitScript((n) => localStorage.setItem('aa.nickname', n), nickname)
  const page = await ctx.newPage()
  const server = o.server ?? srv
  await page.goto(`${o.origin ?? server.url}/?token=${server.token}`)
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  return page
}

// ask calls the tool; the call's own limit is generous, and bounds a
// test whose answer never reaches the agent.
function ask(args: Record<string, unknown>, tool = 'ask_question') {
  return mcp.callTool({ name: tool, arguments: args }, undefined, { timeout: 60_000 }) as Promise<ToolResult>
}

describe('a phone on a flaky network', () => {
  it('in a tunnel: an answer (typed or an option) sent offline waits on its card and goes once when the network is back', async () => {
    const proxy = await startProxy(Number(srv.port))
    try {
      const page = await open('tunnel-phone', { origin: `http://127.0.0.1:${proxy.port}` })
      const pc = await open('tunnel-pc', { width: 1280, height: 800 })
      const typed = ask({ question: 'Tunnel: which region for the replica?' })
      const picked = ask({ question: 'Tunnel: restart the workers?', options: [{ label: 'Restart now' }, { label: 'Tonight' }] })
      const card = page.locator('[data-request-id]', { hasText: 'Tunnel: which region' })
      const optionCard = page.locator('[data-request-id]', { hasText: 'Tunnel: restart the workers' })
      await card.and(page.locator('[data-status=waiting]')).waitFor()
      await optionCard.and(page.locator('[data-status=waiting]')).waitFor()

      const long = 'Use eu-west-1. ' + 'It is close to most of our customers and the latency budget holds. '.repeat(20)
      await card.locator('[data-testid=answer]').click()
      await page.locator('textarea[data-testid=reply-input]').fill(long)
      proxy.setDown(true)
      await page.locator('[data-testid=conn][data-state=offline]').waitFor()
      const send = page.locator('[data-testid=send]')
      await expect(send.isEnabled()).resolves.toBe(true)
      await send.click()
      await card.locator('[data-testid=sending]').waitFor()
      await expect(card.getAttribute('data-status')).resolves.toBe('answeredHere')
      await expect(card.locator('[data-testid=status]').textContent()).resolves.toContain('Not sent yet')
      await expect(card.locator('[data-testid=reply]').textContent()).resolves.toContain('latency budget holds')
      await optionCard.locator('[data-testid=option]', { hasText: 'Tonight' }).click()
      await optionCard.locator('[data-testid=sending]').waitFor()

      proxy.setDown(false)
      await page.locator('[data-testid=conn][data-state=online]').waitFor({ timeout: 20_000 })
      expect(text(await typed)).toBe(long.trim())
      expect((await picked).structuredContent?.chosen).toEqual(['Tonight'])
      await card.locator('[data-testid=sending]').waitFor({ state: 'detached' })
      await optionCard.locator('[data-testid=sending]').waitFor({ state: 'detached' })
      await expect(card.locator('[data-testid=status]').textContent()).resolves.toContain('Answered here')
      // Once: the other device shows one answer, and this one was not told it was refused.
      const there = pc.locator('[data-status=answeredElsewhere]', { hasText: 'Tunnel: which region' })
      await there.waitFor()
      await expect(there.locator('[data-testid=reply]').count()).resolves.toBe(1)
      await expect(page.getByText('The answer was not accepted').count()).resolves.toBe(0)
    } finally {
      await proxy.close()
    }
  })

  // Offline, the devices in the top bar are only who was online when the
  // connection went: the bar says so, and says "Online" again once back.
  it('offline, the top bar names the other devices as last seen online, not online', async () => {
    const proxy = await startProxy(Number(srv.port))
    try {
      await open('cellar-pc', { width: 1280, height: 800 })
      const page = await open('cellar-phone', { origin: `http://127.0.0.1:${proxy.port}` })
      const bar = page.locator('[data-testid=users]')
      const peer = bar.locator('[data-client-id]', { hasText: 'cellar-pc' })
      await peer.waitFor()
      const label = () => bar.locator('.text-caption').allTextContents()
      expect(await label()).toEqual(['Online:'])
      expect(await peer.getAttribute('data-stale')).toBeNull()

      proxy.setDown(true)
      await page.locator('[data-testid=conn][data-state=offline]').waitFor()
      expect(await bar.innerText()).not.toMatch(/^Online/)
      expect(await label()).toEqual(['Last seen online:'])
      expect(await peer.getAttribute('data-stale')).toBe('true')
      // Still in reach: its chat opens, with what was said.
      expect(await peer.isEnabled()).toBe(true)

      proxy.setDown(false)
      await page.locator('[data-testid=conn][data-state=online]').waitFor()
      await bar.locator('[data-client-id]:not([data-stale])', { hasText: 'cellar-pc' }).waitFor()
      expect(await label()).toEqual(['Online:'])
    } finally {
      await proxy.close()
    }
  })

  // On a phone "Online:" leaves room for this device and one other;
  // offline, "Last seen online:" in words would push that one out of
  // sight. There the words are an icon's (read out, and its tooltip):
  // the device is no further right than it was online.
  it('offline on a phone, the device last seen stays where it was in view', async () => {
    const own = await startServer() // only these two devices under its token
    const proxy = await startProxy(Number(own.port))
    try {
      await open('Windows · Edge', { width: 1280, height: 800, server: own })
      const page = await open('Pixel 8 · Chrome', { origin: `http://127.0.0.1:${proxy.port}`, server: own })
      const bar = page.locator('[data-testid=users]')
      const peer = bar.locator('[data-client-id]', { hasText: 'Windows · Edge' })
      await peer.waitFor()
      const right = async () => { const b = (await peer.boundingBox())!; return b.x + b.width }
      const online = await right()
      expect(online).toBeLessThanOrEqual(390)
      proxy.setDown(true)
      await page.locator('[data-testid=conn][data-state=offline]').waitFor()
      await bar.locator('[data-stale]', { hasText: 'Windows · Edge' }).waitFor()
      expect(await right()).toBeLessThanOrEqual(online)
      expect(await bar.locator('[data-testid=last-seen]').textContent()).toContain('Last seen online:')
    } finally {
      await proxy.close()
      await own.stop()
    }
  })

  it('in a lift: an answer sent into a connection that died silently goes when the connection is back', async () => {
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'en-US', isMobile: true, hasTouch: true })
    ctxs.push(ctx)
    // The page's socket goes through here: in the lift, what the page
    // sends is lost, and then the connection drops.
    let lift = false
    const pages: { close: () => Promise<void> }[] = []
    await ctx.routeWebSocket(/\/ws$/, (ws) => {
      const server = ws.connectToServer()
      ws.onMessage((m) => {
        if (!lift) server.send(m)
      })
      server.onMessage((m) => ws.send(m))
      pages.push({ close: () => ws.close({ code: 1006 }).catch(() => ws.close()) })
    })
    const page = await ctx.newPage()
    await page.goto(`${srv.url}/?token=${srv.token}`)
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    const call = ask({ question: 'Lift: merge the release branch?' })
    const card = page.locator('[data-request-id]', { hasText: 'Lift: merge' })
    await card.and(page.locator('[data-status=waiting]')).waitFor()
    await card.locator('[data-testid=answer]').click()
    await page.locator('textarea[data-testid=reply-input]').fill('Merge it after the changelog is in.')
    lift = true
    await page.locator('[data-testid=send]').click()
    await card.locator('[data-testid=sending]').waitFor() // the page cannot know yet that it went nowhere
    lift = false
    await pages.at(-1)!.close()
    expect(text(await call)).toBe('Merge it after the changelog is in.')
    await card.locator('[data-testid=sending]').waitFor({ state: 'detached' })
    await expect(card.getAttribute('data-status')).resolves.toBe('answeredHere')
  })

  // The network gone (aeroplane mode, Wi-Fi off): the browser says it is
  // offline, but a socket whose network vanished may stay open for
  // minutes. The page says it is offline as the browser does, and an
  // answer sent then waits on its card until the network is back.
  it('the network gone: the page says it is offline as the browser does, and an answer waits for the network', async () => {
    const page = await open('plane-phone')
    const call = ask({ question: 'Plane: tag the release?' })
    const card = page.locator('[data-request-id]', { hasText: 'Plane: tag' })
    await card.and(page.locator('[data-status=waiting]')).waitFor()
    await card.locator('[data-testid=answer]').click()
    await page.locator('textarea[data-testid=reply-input]').fill('Tag it v2.1.0.')
    await page.context().setOffline(true)
    await page.locator('[data-testid=conn][data-state=offline]').waitFor()
    await page.locator('[data-testid=send]').click()
    await card.locator('[data-testid=sending]').waitFor()
    await expect(card.locator('[data-testid=status]').textContent()).resolves.toContain('Not sent yet')
    await page.context().setOffline(false)
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    expect(text(await call)).toBe('Tag it v2.1.0.')
    await card.locator('[data-testid=sending]').waitFor({ state: 'detached' })
    await expect(card.getAttribute('data-status')).resolves.toBe('answeredHere')
  })

  it('a draft with an image survives a reload of the tab, and then goes whole', async () => {
    const page = await open('reload-phone')
    const call = ask({ question: 'Reload: does the chart look right?' })
    await page.locator('[data-status=waiting]', { hasText: 'Reload: does the chart' }).locator('[data-testid=answer]').click()
    const input = page.locator('textarea[data-testid=reply-input]')
    await input.fill('The y axis is off by one; see the picture.')
    await page.locator('input[data-testid=file]').setInputFiles({ name: 'chart.png', mimeType: 'image/png', buffer: PNG })
    await page.locator('[data-testid=thumb]').waitFor()
    await page.reload()
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    await page.locator('[data-status=waiting]', { hasText: 'Reload: does the chart' }).waitFor()
    await expect.poll(() => input.inputValue()).toBe('The y axis is off by one; see the picture.')
    await expect(page.locator('[data-testid=thumb]').count()).resolves.toBe(1)
    await page.locator('[data-testid=send]').click()
    const r = await call
    expect(text(r)).toBe('The y axis is off by one; see the picture.')
    expect(r.content.filter((c) => c.type === 'image').map((c) => c.data)).toEqual([PNG.toString('base64')])
    // Sent: the draft is gone, and a reload does not bring it back.
    await page.reload()
    await page.locator('[data-status=answeredHere]', { hasText: 'Reload: does the chart' }).waitFor()
    await expect(page.locator('[data-testid=leftover]').count()).resolves.toBe(0)
  })

  it('answered on another device while this one has a half-typed answer: it says so, and the words stay on the card', async () => {
    const phone = await open('half-phone')
    const pc = await open('half-pc', { width: 1280, height: 800 })
    const first = ask({ question: 'Half: rename the service to billing-api?' })
    const second = ask({ question: 'Half: keep the old endpoint for a month?' })
    for (const p of [phone, pc]) for (const q of ['Half: rename', 'Half: keep the old']) await p.locator('[data-status=waiting]', { hasText: q }).waitFor()
    const mine = 'I would rather call it payments-api, because billing is only'
    await phone.locator('[data-request-id]', { hasText: 'Half: rename' }).locator('[data-testid=answer]').click()
    const input = phone.locator('textarea[data-testid=reply-input]')
    await input.fill(mine)

    await pc.locator('[data-request-id]', { hasText: 'Half: rename' }).locator('[data-testid=answer]').click()
    await pc.locator('textarea[data-testid=reply-input]').fill('Yes, billing-api.')
    await pc.locator('[data-testid=send]').click()
    expect(text(await first)).toBe('Yes, billing-api.')

    const card = phone.locator('[data-status=answeredElsewhere]', { hasText: 'Half: rename' })
    await card.waitFor()
    await expect(card.locator('[data-testid=reply]').textContent()).resolves.toContain('Yes, billing-api.')
    await expect(card.locator('[data-testid=leftover-text]').textContent()).resolves.toBe(mine)
    // The words did not move to the question still waiting.
    await expect(phone.locator('[data-testid=reply-target]').textContent()).resolves.toContain('Half: keep the old')
    await expect(input.inputValue()).resolves.toBe('')
    if (SHOTS) {
      await card.evaluate((e) => e.scrollIntoView({ block: 'center' }))
      await phone.screenshot({ path: `${SHOTS}/inbox-leftover-390-light.png` })
    }
    // Still there after a reload, until discarded.
    await phone.reload()
    await phone.locator('[data-testid=conn][data-state=online]').waitFor()
    const again = phone.locator('[data-request-id]', { hasText: 'Half: rename' })
    await expect(again.locator('[data-testid=leftover-text]').textContent()).resolves.toBe(mine)
    await again.locator('[data-testid=leftover-discard]').click()
    await expect(again.locator('[data-testid=leftover]').count()).resolves.toBe(0)

    await phone.locator('textarea[data-testid=reply-input]').fill('Yes, a month.')
    await phone.locator('[data-testid=send]').click()
    expect(text(await second)).toBe('Yes, a month.')
  })
})

describe('coming back to the app', () => {
  it('a notification tapped while the app was closed opens it on that question, and the badge counts what waits', async () => {
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'en-US', isMobile: true, hasTouch: true })
    ctxs.push(ctx)
    // What the page sets as the app's badge (an installed app shows it).
    await ctx.addInitScript(() => {
      const w = window as unknown as { badges: (number | null)[] }
      w.badges = []
      Object.assign(navigator, {
        setAppBadge: async (n?: number) => void w.badges.push(n ?? 0),
        clearAppBadge: async () => void w.badges.push(null),
      })
    })
    const first = await ctx.newPage()
    await first.goto(`${srv.url}/?token=${srv.token}`)
    await first.locator('[data-testid=conn][data-state=online]').waitFor()
    const waitingBefore = await first.locator('[data-status=waiting]').count()
    await first.close() // the app is closed

    const long = 'Details: ' + 'the numbers are in the attached report and they look fine to me. '.repeat(8)
    const calls = ['Badge one', 'Badge two', 'Badge three', 'Badge four'].map((q) => ask({ question: `${q}: go ahead? ${long}` }))
    const pc = await open('badge-pc', { width: 1280, height: 800 })
    await pc.locator('[data-status=waiting]', { hasText: 'Badge four' }).waitFor()
    const id = await pc.locator('[data-request-id]', { hasText: 'Badge one' }).getAttribute('data-request-id')

    // The service worker opens a window on the notification's address.
    const page = await ctx.newPage()
    await page.goto(`${srv.url}/?request=${id}`)
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    const card = page.locator(`[data-request-id="${id}"]`)
    await card.locator('[data-testid=answer][aria-pressed=true]').waitFor()
    await expect(page.locator('[data-testid=reply-target]').textContent()).resolves.toContain('Badge one')
    // And it is on screen, between the title bar and the reply bar.
    await expect.poll(async () => {
      const [c, head, foot] = await Promise.all([card.boundingBox(), page.locator('.q-header').boundingBox(), page.locator('.q-footer').boundingBox()])
      return !!c && !!head && !!foot && c.y + 40 > head.y + head.height && c.y < foot.y
    }).toBe(true)
    const waiting = waitingBefore + 4
    await expect.poll(() => page.title()).toBe(`(${waiting}) Agent Assistant`)
    await expect.poll(() => page.evaluate(() => (window as unknown as { badges: number[] }).badges.at(-1))).toBe(waiting)

    await page.locator('textarea[data-testid=reply-input]').fill('Go ahead.')
    await page.locator('[data-testid=send]').click()
    expect(text(await calls[0]!)).toBe('Go ahead.')
    await expect.poll(() => page.evaluate(() => (window as unknown as { badges: number[] }).badges.at(-1))).toBe(waiting - 1)
    for (const [i, q] of ['Badge two', 'Badge three', 'Badge four'].entries()) {
      await pc.locator('[data-request-id]', { hasText: q }).locator('[data-testid=answer]').click()
      await pc.locator('textarea[data-testid=reply-input]').fill('ok')
      await pc.locator('[data-testid=send]').click()
      await calls[i + 1]
    }
  })
})

describe('screens', () => {
  // An answer waiting to go, under its card while offline, and words
  // typed for a question another device answered: the docs' pictures.
  // Each on a server of its own, so that the history holds only these.
  it('an answer not sent yet and words not sent, 1280 and 390 px wide, light and dark', async () => {
    for (const [width, height, scheme, name] of [[1280, 800, 'light', 'Laptop'], [1280, 800, 'dark', 'Laptop'],
      [390, 844, 'light', 'Pixel 8'], [390, 844, 'dark', 'Pixel 8']] as const) {
      const s = await startServer()
      const agent = await startMCP(s)
      const proxy = await startProxy(Number(s.port))
      try {
        const opened: Page[] = []
        for (const [nick, origin, w, h] of [["Anna's PC", s.url, 1280, 800], [name, `http://127.0.0.1:${proxy.port}`, width, height]] as const) {
          const phone = w < 600
          const ctx = await browser.newContext({ viewport: { width: w, height: h }, locale: 'en-US', colorScheme: scheme, isMobile: phone, hasTouch: phone })
          ctxs.push(ctx)
          await ctx.addInitScript((n) => localStorage.setItem('aa.nickname', n), nick)
          const p = await ctx.newPage()
          await p.goto(`${origin}/?token=${s.token}`)
          await p.locator('[data-testid=conn][data-state=online]').waitFor()
          opened.push(p)
        }
        const [pc, page] = opened as [Page, Page]
        const asked = (question: string) => agent.callTool({ name: 'ask_question', arguments: {
          question, project_directory: '/home/me/shop', agent_name: 'Claude Code', reasoning_model_name: 'claude-opus-4',
        } }, undefined, { timeout: 60_000 }) as Promise<ToolResult>
        const region = asked('Which region for the new **replica**?')
        const card = page.locator('[data-request-id]', { hasText: 'Which region' })
        await card.and(page.locator('[data-status=waiting]')).waitFor()
        const rename = asked('Rename the service to **billing-api**?')
        const other = page.locator('[data-request-id]', { hasText: 'Rename the service' })
        await other.and(page.locator('[data-status=waiting]')).waitFor()

        await other.locator('[data-testid=answer]').click()
        await page.locator('textarea[data-testid=reply-input]').fill('I would rather call it payments-api: billing is only one part of what it does, and')
        await pc.locator('[data-request-id]', { hasText: 'Rename the service' }).locator('[data-testid=answer]').click()
        await pc.locator('textarea[data-testid=reply-input]').fill('Yes, billing-api.')
        await pc.locator('[data-testid=send]').click()
        expect(text(await rename)).toBe('Yes, billing-api.')
        await other.locator('[data-testid=leftover]').waitFor()

        proxy.setDown(true)
        await page.locator('[data-testid=conn][data-state=offline]').waitFor()
        // Offline, the title bar still has room for the title.
        expect(await page.locator('.aa-title').evaluate((e) => e.scrollWidth <= e.clientWidth)).toBe(true)
        await card.locator('[data-testid=answer]').click()
        await page.locator('textarea[data-testid=reply-input]').fill('eu-west-1, close to most customers.')
        await page.locator('[data-testid=send]').click()
        const hint = card.locator('[data-testid=sending]')
        await hint.waitFor()

        // The hint under the answer is as wide as an answer's bubble at
        // most (85%), right-aligned under it, its icon before its words.
        const at = await hint.evaluate((el) => {
          const icon = el.querySelector('.q-icon')!.getBoundingClientRect()
          const box = el.getBoundingClientRect()
          const words = [...el.querySelectorAll('*')].flatMap((e) => [...e.childNodes]).concat([...el.childNodes])
            .find((n) => n.nodeType === Node.TEXT_NODE && n.textContent!.trim())!
          const r = document.createRange()
          r.selectNodeContents(words)
          const lines = [...r.getClientRects()]
          return { icon: { left: icon.left, right: icon.right, mid: (icon.top + icon.bottom) / 2 }, box: { left: box.left, right: box.right },
            first: { left: lines[0]!.left, top: lines[0]!.top, bottom: lines[0]!.bottom }, lastRight: lines.at(-1)!.right }
        })
        const bubble = await card.locator('[data-testid=reply]').boundingBox()
        expect(at.icon.left).toBeGreaterThanOrEqual(at.box.left + 0.15 * (at.box.right - at.box.left) - 1)
        expect(at.icon.right).toBeLessThanOrEqual(at.first.left + 1)
        expect(at.icon.mid).toBeGreaterThan(at.first.top)
        expect(at.icon.mid).toBeLessThan(at.first.bottom)
        expect(Math.abs(at.lastRight - (bubble!.x + bubble!.width))).toBeLessThanOrEqual(2)
        if (SHOTS) await page.screenshot({ path: `${SHOTS}/inbox-unsent-${width}-${scheme}.png` })

        proxy.setDown(false)
        expect(text(await region)).toBe('eu-west-1, close to most customers.')
      } finally {
        await proxy.close()
        await agent.close()
        await s.stop()
      }
    }
  })
})

describe('the title bar on a phone', () => {
  // In a tunnel the status flips between offline and connecting at each
  // try: the title beside it stays whole all the while, in each
  // language, on the common phone widths.
  it('keeps the title whole, online, offline and connecting', async () => {
    const { messages } = await import('../src/locales')
    const proxy = await startProxy(Number(srv.port))
    try {
      for (const [locale, lang] of [['en-US', 'en'], ['zh-CN', 'zh']] as const) {
        for (const width of [320, 360, 390, 412, 430, 460]) {
          const ctx = await browser.newContext({ viewport: { width, height: 800 }, locale, isMobile: true, hasTouch: true })
          ctxs.push(ctx)
          const page = await ctx.newPage()
          await page.goto(`http://127.0.0.1:${proxy.port}/?token=${srv.token}`)
          const whole = () => page.locator('.aa-title').evaluate((e) => e.scrollWidth <= e.clientWidth)
          await page.locator('[data-testid=conn][data-state=online]').waitFor()
          expect(await whole(), `${lang} ${width} online`).toBe(true)
          proxy.setDown(true)
          const off = page.locator('[data-testid=conn][data-state=offline]')
          await off.waitFor()
          expect(await whole(), `${lang} ${width} offline`).toBe(true)
          // Said short, the long words in its tooltip.
          expect(await off.getAttribute('title')).toBe(messages[lang].conn.offline)
          // The packets lost: the next try stays connecting.
          proxy.setHang(true)
          proxy.setDown(false)
          const conn = page.locator('[data-testid=conn][data-state=connecting]')
          await conn.waitFor()
          expect(await whole(), `${lang} ${width} connecting`).toBe(true)
          // Said in words, to the eye or (dots below 360 px) to a screen reader.
          expect(await conn.textContent()).toContain(messages[lang].conn.connecting)
          proxy.setHang(false)
          await ctx.close()
        }
      }
    } finally {
      await proxy.close()
    }
  })
})
