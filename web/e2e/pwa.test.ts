// The installable app: Chromium finds nothing that stops installing it,
// its service worker activates, and Web Push reaches a question's
// notification whose button answers the agent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext, type Page, type Worker } from 'playwright-core'
import { CHROMIUM, startServer, type Server } from './harness'

let srv: Server
const profiles: string[] = []

beforeAll(async () => {
  srv = await startServer()
})

afterAll(async () => {
  await srv?.stop()
  for (const p of profiles) rmSync(p, { recursive: true, force: true })
})

// profile is a browser with a profile on disk: Chromium installs no app
// and keeps no push subscription in an incognito context.
async function profile(): Promise<BrowserContext> {
  const dir = mkdtempSync(join(tmpdir(), 'aa-profile-'))
  profiles.push(dir)
  return chromium.launchPersistentContext(dir, {
    executablePath: CHROMIUM, locale: 'en-US', viewport: { width: 1280, height: 800 },
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-component-update', '--disable-sync'],
  })
}

async function openApp(ctx: BrowserContext): Promise<{ page: Page; sw: Worker }> {
  const page = await ctx.newPage()
  const swSeen = ctx.waitForEvent('serviceworker')
  await page.goto(`${srv.url}/?token=${srv.token}`)
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  const sw = ctx.serviceWorkers()[0] ?? (await swSeen)
  await page.evaluate(() => navigator.serviceWorker.ready)
  return { page, sw }
}

describe('installable app', () => {
  it('has a manifest Chromium can install from, and an active service worker', async () => {
    const ctx = await profile()
    const { page, sw } = await openApp(ctx)
    expect(sw.url()).toBe(`${srv.url}/sw.js`)
    const cdp = await ctx.newCDPSession(page)
    const { installabilityErrors } = (await cdp.send('Page.getInstallabilityErrors')) as { installabilityErrors: { errorId: string }[] }
    expect(installabilityErrors).toEqual([])
    const m = (await cdp.send('Page.getAppManifest')) as { url: string; errors: unknown[]; data?: string }
    expect(m.errors).toEqual([])
    const manifest = JSON.parse(m.data ?? '{}')
    expect(manifest).toMatchObject({ name: 'agentassistant', start_url: '/', scope: '/', display: 'standalone' })
    expect(manifest.start_url).not.toContain('token')
    expect(manifest.icons.map((i: { sizes: string; purpose: string }) => i.sizes + ' ' + i.purpose))
      .toEqual(['192x192 any', '512x512 any', '512x512 maskable'])
    const state = await page.evaluate(async () => {
      const r = await navigator.serviceWorker.ready
      return { active: r.active?.state, scope: r.scope }
    })
    expect(state).toEqual({ active: 'activated', scope: `${srv.url}/` })
    await ctx.close()
  })

  it('opens from its precached shell when the server is unreachable, and says it is offline', async () => {
    const ctx = await profile()
    const { page } = await openApp(ctx)
    await page.waitForFunction(() => navigator.serviceWorker.controller !== null)
    await ctx.setOffline(true)
    await page.goto(`${srv.url}/`) // start_url: no token in it
    const chip = page.locator('[data-testid=conn][data-state=offline]')
    await chip.waitFor()
    expect(await chip.textContent()).toContain('Offline')
    await ctx.close()
  })
})
