// Installing the app, as a person meets it: the manifest and its icons
// served as a browser reads them; an Install button in the settings,
// next to the notifications, once the browser offers to install
// (beforeinstallprompt), which shows the browser's own dialog; and on an
// iPhone, whose Safari has no such offer and gives a page no
// notifications, the few words that say how.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import { SHOTS, launch, opened, startServer, type Server } from './harness'

let srv: Server
let browser: Browser

beforeAll(async () => {
  srv = await startServer()
  browser = await launch()
})

afterAll(async () => {
  await browser?.close()
  await srv?.stop()
})

// pngSize reads a PNG's width and height from its header.
function pngSize(b: Buffer): string {
  expect(b.subarray(1, 4).toString('latin1')).toBe('PNG')
  return `${b.readUInt32BE(16)}x${b.readUInt32BE(20)}`
}

async function settings(page: Page) {
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  await page.locator('button[aria-label=Settings]').click()
  await opened(page)
  await page.getByTestId('push-toggle').waitFor()
}

async function shoot(page: Page, name: string) {
  if (!SHOTS) return
  await page.locator('.q-menu').evaluate((el) => Promise.all(el.getAnimations({ subtree: true }).map((a) => a.finished)))
  await page.screenshot({ path: `${SHOTS}/${name}.png` })
}

describe('installing the app', () => {
  it('serves its manifest and icons as they say, and an icon for an iPhone\'s Home Screen', async () => {
    const r = await fetch(`${srv.url}/manifest.webmanifest`)
    expect(r.status).toBe(200)
    expect(r.headers.get('content-type')).toMatch(/^application\/manifest\+json/)
    const m = await r.json()
    expect(m).toMatchObject({ name: 'Agent Assistant', start_url: '/', scope: '/', display: 'standalone' })
    for (const icon of m.icons as { src: string; sizes: string; type: string }[]) {
      const i = await fetch(new URL(icon.src, srv.url))
      expect(i.status, icon.src).toBe(200)
      expect(i.headers.get('content-type'), icon.src).toBe(icon.type)
      expect(pngSize(Buffer.from(await i.arrayBuffer())), icon.src).toBe(icon.sizes)
    }
    // Safari puts on the Home Screen the page's apple-touch-icon, else a
    // picture of the page.
    const page = await browser.newPage()
    await page.goto(`${srv.url}/?token=${srv.token}`)
    const touch = await page.locator('link[rel=apple-touch-icon]').getAttribute('href')
    expect(touch).toBeTruthy()
    const t = await fetch(new URL(touch!, srv.url))
    expect(t.headers.get('content-type')).toBe('image/png')
    expect(pngSize(Buffer.from(await t.arrayBuffer()))).toBe('180x180')
    await page.close()
  })

  it('offers Install next to the notifications once the browser does, and shows the browser\'s dialog', async () => {
    for (const scheme of ['light', 'dark'] as const) {
      for (const width of [1280, 390]) {
        const ctx = await browser.newContext({ colorScheme: scheme, viewport: { width, height: width > 600 ? 800 : 844 }, locale: 'en-US' })
        const page = await ctx.newPage()
        await page.goto(`${srv.url}/?token=${srv.token}`)
        await settings(page)
        expect(await page.getByTestId('install-app').count()).toBe(0) // nothing offered yet
        await page.keyboard.press('Escape')
        // The browser's offer (Chromium makes one only for a person's
        // engagement with the site, which a test cannot give).
        await page.evaluate(() => {
          const e = new Event('beforeinstallprompt') as Event & { prompt: () => Promise<void>; userChoice: Promise<{ outcome: string }> }
          const w = window as unknown as { prompted: number }
          w.prompted = 0
          e.prompt = async () => void w.prompted++
          e.userChoice = Promise.resolve({ outcome: 'accepted' })
          window.dispatchEvent(e)
        })
        await settings(page)
        const button = page.getByTestId('install-app')
        await button.waitFor()
        await shoot(page, `install-settings-${width}-${scheme}`)
        await button.click()
        await button.waitFor({ state: 'detached' })
        expect(await page.evaluate(() => (window as unknown as { prompted: number }).prompted)).toBe(1)
        await ctx.close()
      }
    }
  })

  it('on an iPhone, says to add the app to the Home Screen for notifications', async () => {
    for (const scheme of ['light', 'dark'] as const) {
      const ctx = await browser.newContext({
        colorScheme: scheme, viewport: { width: 390, height: 844 }, locale: 'en-US', hasTouch: true, isMobile: true,
        userAgent: 'Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Mobile/15E148 Safari/604.1',
      })
      // Safari gives a page in a tab no Notification at all.
      await ctx.addInitScript(() => { delete (window as unknown as { Notification?: unknown }).Notification })
      const page = await ctx.newPage()
      await page.goto(`${srv.url}/?token=${srv.token}`)
      await settings(page)
      const hint = page.getByTestId('install-ios')
      await hint.waitFor()
      expect(await hint.textContent()).toContain('Add to Home Screen')
      // Said once, not again as the notifications' reason; and push,
      // which cannot work there, cannot be turned on to fail.
      expect(await page.getByTestId('notify-why').count()).toBe(0)
      expect(await page.getByTestId('push-toggle').getAttribute('aria-disabled')).toBe('true')
      await shoot(page, `install-iphone-${scheme}`)
      await ctx.close()
    }
  })
})
