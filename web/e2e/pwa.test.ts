// The installable app: Chromium finds nothing that stops installing it,
// its service worker activates, and Web Push reaches a question's
// notification whose button answers the agent.
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
//
// Chromium sends its subscriptions to Google's push service, which a
// test cannot reach or read. So the page's PushManager hands out a
// subscription to the test's own push service (an https server on
// 127.0.0.1, the server trusting its certificate through SSL_CERT_FILE),
// with keys the test made: the server encrypts each push to them, the
// test decrypts it with npm's http_ece, and CDP delivers what the server
// sent to the real service worker (ServiceWorker.deliverPushMessage).
import { execFileSync } from 'node:child_process'
import { createECDH, randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer, type Server as HTTPSServer } from 'node:https'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { chromium, type BrowserContext, type Page, type Worker } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { CHROMIUM, SHOTS, startMCP, startServer, text, type Server, type ToolResult } from './harness'

const ece = createRequire(import.meta.url)('http_ece') as {
  decrypt(b: Buffer, o: { version: string; privateKey: unknown; authSecret: string }): Buffer
}

let srv: Server
let mcp: Client
// A second token of the same server: one browser may be subscribed
// under both.
const tokenB = 'e2e-second-' + randomBytes(12).toString('hex')
let pushService: PushDouble
const profiles: string[] = []
const tmp = mkdtempSync(join(tmpdir(), 'aa-pwa-'))

beforeAll(async () => {
  pushService = await startPushDouble()
  process.env.SSL_CERT_FILE = pushService.certFile // the server's trust, only
  // The double is on this machine, where a push service is not allowed
  // to be unless the server is told.
  srv = await startServer({ config: `[push]\nallow_private_endpoints = true\n[server]\ntokens = ["${tokenB}"]\n` })
  delete process.env.SSL_CERT_FILE
  mcp = await startMCP(srv)
})

afterAll(async () => {
  await mcp?.close()
  await srv?.stop()
  pushService?.server.close()
  for (const p of [...profiles, tmp]) rmSync(p, { recursive: true, force: true })
})

interface Device { endpoint: string; p256dh: string; auth: string }
type Got = { plaintext: string; authorization: string; path: string }

interface PushDouble extends Device {
  server: HTTPSServer
  certFile: string
  // renewed is the browser's subscription once the push service changed
  // it: another endpoint, other keys.
  renewed: Device
  // gone are the paths it answers 410 Gone.
  gone: Set<string>
  next(): Promise<Got>
  // drain forgets what came and was not read.
  drain(): void
}

// startPushDouble is a push service for two subscriptions (the browser's
// first one and the one it changed to): it keeps what it is sent,
// decrypted with the subscription's private key.
async function startPushDouble(): Promise<PushDouble> {
  const certFile = join(tmp, 'cert.pem')
  const keyFile = join(tmp, 'key.pem')
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '1',
    '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', keyFile, '-out', certFile], { stdio: 'ignore' })
  const keys = new Map(['/push/e2e-device', '/push/e2e-renewed'].map((path) => {
    const ecdh = createECDH('prime256v1')
    ecdh.generateKeys()
    return [path, { ecdh, auth: randomBytes(16).toString('base64url') }]
  }))
  const got: Got[] = []
  const waiting: ((v: Got) => void)[] = []
  const gone = new Set<string>()
  const server = createServer({ cert: readFileSync(certFile), key: readFileSync(keyFile) }, (req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const path = req.url ?? ''
      const k = keys.get(path)
      if (!k) return void res.writeHead(404).end()
      const plaintext = ece.decrypt(Buffer.concat(chunks), { version: 'aes128gcm', privateKey: k.ecdh, authSecret: k.auth }).toString('utf8')
      const m = { plaintext, authorization: String(req.headers.authorization), path }
      const w = waiting.shift()
      if (w) w(m)
      else got.push(m)
      res.writeHead(gone.has(path) ? 410 : 201).end()
    })
  })
  await new Promise<void>((ok) => server.listen(0, '127.0.0.1', ok))
  const port = (server.address() as { port: number }).port
  const device = (path: string): Device => ({ endpoint: `https://127.0.0.1:${port}${path}`,
    p256dh: keys.get(path)!.ecdh.getPublicKey().toString('base64url'), auth: keys.get(path)!.auth })
  return {
    server, certFile, gone, ...device('/push/e2e-device'), renewed: device('/push/e2e-renewed'),
    drain: () => void got.splice(0),
    next: () => new Promise((ok) => {
      const m = got.shift()
      if (m) ok(m)
      else waiting.push(ok)
    }),
  }
}

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

// first is the browser's first subscription at the push double.
const first = (): Device => ({ endpoint: pushService.endpoint, p256dh: pushService.p256dh, auth: pushService.auth })

// usePushDouble makes the page's PushManager subscribe to the push
// double, with its keys: its first subscription, or the renewed one once
// e2e.renewed is set (the push service changed it).
async function usePushDouble(ctx: BrowserContext) {
  await ctx.addInitScript(({ first, renewed }) => {
    const KEY = 'e2e.subscribed'
    const { endpoint, p256dh, auth } = localStorage.getItem('e2e.renewed') ? renewed : first
    const sub = (key: ArrayBuffer) => ({
      endpoint, expirationTime: null, options: { userVisibleOnly: true, applicationServerKey: key },
      toJSON: () => ({ endpoint, expirationTime: null, keys: { p256dh, auth } }),
      unsubscribe: async () => (localStorage.removeItem(KEY), true),
    })
    const b64 = (s: string) => Uint8Array.from(atob(s), (c) => c.charCodeAt(0)).buffer
    PushManager.prototype.subscribe = async function (o?: PushSubscriptionOptionsInit) {
      const k = new Uint8Array(o!.applicationServerKey as ArrayBuffer)
      localStorage.setItem(KEY, btoa(String.fromCharCode(...k)))
      return sub(k.buffer) as unknown as PushSubscription
    }
    PushManager.prototype.getSubscription = async function () {
      const k = localStorage.getItem(KEY)
      return (k ? sub(b64(k)) : null) as unknown as PushSubscription
    }
  }, { first: first(), renewed: pushService.renewed })
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
    expect(manifest).toMatchObject({ start_url: '/', scope: '/', display: 'standalone' })
    // A phone's install prompt names the app as its title bar does, and
    // its status bar is the top bar's colour: no seam between them.
    const look = await page.evaluate(() => ({ title: document.title, meta: document.querySelector('meta[name=theme-color]')?.getAttribute('content'),
      header: getComputedStyle(document.querySelector('.q-header')!).backgroundColor }))
    const rgb = (hex: string) => `rgb(${[1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)).join(', ')})`
    expect(manifest.name).toBe(look.title)
    expect(rgb(manifest.theme_color)).toBe(look.header)
    expect(rgb(look.meta ?? '')).toBe(look.header)
    // The home screen's label is the app's name too (short_name is what
    // a launcher shows), and the icon, the maskable icon's edge and the
    // reply box's drop outline are the top bar's blue: one colour.
    expect(manifest.short_name).toBe(manifest.name)
    const colours = await page.evaluate(async () => {
      const svg = await (await fetch('/favicon.svg')).text()
      const fills = [...svg.matchAll(/fill="(#[0-9a-fA-F]{6})"/g)].map((m) => m[1].toLowerCase()).filter((c) => c !== '#ffffff' && c !== '#fff')
      const img = new Image()
      img.src = '/icons/maskable-512.png'
      await img.decode()
      const c = document.createElement('canvas')
      c.width = c.height = 512
      const g = c.getContext('2d')!
      g.drawImage(img, 0, 0)
      const [r, gr, b] = g.getImageData(2, 2, 1, 1).data
      const drop = document.createElement('div')
      drop.className = 'aa-drop'
      document.body.append(drop)
      const outline = getComputedStyle(drop).outlineColor
      drop.remove()
      return { fills: [...new Set(fills)], maskable: `rgb(${r}, ${gr}, ${b})`, outline }
    })
    expect(colours.fills.map(rgb)).toEqual([look.header])
    expect(colours.maskable).toBe(look.header)
    expect(colours.outline).toBe(look.header)
    expect(manifest.start_url).not.toContain('token')
    expect(manifest.icons.map((i: { sizes: string; purpose: string }) => i.sizes + ' ' + i.purpose))
      .toEqual(['192x192 any', '512x512 any', '512x512 maskable'])
    const state = await page.evaluate(async () => {
      // ready resolves once a worker is active, which may still be
      // activating: wait for its state to settle.
      const r = await navigator.serviceWorker.ready
      const w = r.active
      if (w && w.state === 'activating') {
        await new Promise<void>((done) => w.addEventListener('statechange', () => { if (w.state !== 'activating') done() }))
      }
      return { active: w?.state, scope: r.scope }
    })
    expect(state).toEqual({ active: 'activated', scope: `${srv.url}/` })
    await ctx.close()
  })

  it('a notification\'s badge is one colour on a clear ground: the status bar draws only its alpha', async () => {
    // Android draws a notification's badge in the status bar from its
    // alpha alone: the app's icon (an opaque blue square) shows there as
    // a plain white square. The badge is a shape cut from nothing.
    const { notificationOptions } = await import('../src/lib/pushmessage')
    const { badge } = notificationOptions({ v: 1, type: 'ask', id: 'q', tag: 'q', url: '/' }, 2)
    const ctx = await profile()
    const { page } = await openApp(ctx)
    const px = await page.evaluate(async (src) => {
      const img = new Image()
      img.src = src
      await img.decode()
      const c = document.createElement('canvas')
      c.width = img.naturalWidth
      c.height = img.naturalHeight
      const g = c.getContext('2d')!
      g.drawImage(img, 0, 0)
      const d = g.getImageData(0, 0, c.width, c.height).data
      const colours = new Set<string>()
      let clear = 0
      let solid = 0
      for (let i = 0; i < d.length; i += 4) {
        if (d[i + 3] === 0) clear++
        // (an edge's faint pixels round off their colour)
        else if (d[i + 3] >= 128) colours.add(d.slice(i, i + 3).join(','))
        if (d[i + 3] === 255) solid++
      }
      // Down the middle: clear, the shape, a hole (a dot cut out), the
      // shape again, so it says "a message" and is not a blob.
      let runs = ''
      for (let y = 0; y < c.height; y++) {
        const s = d[(y * c.width + Math.floor(c.width / 2)) * 4 + 3] >= 128 ? 'x' : '.'
        if (!runs.endsWith(s)) runs += s
      }
      return { w: c.width, h: c.height, colours: [...colours], clear, solid, runs }
    }, badge!)
    expect(px.w).toBeGreaterThanOrEqual(72)
    expect(px.h).toBe(px.w)
    expect(px.colours).toEqual(['255,255,255'])
    expect(px.clear).toBeGreaterThan(px.w * px.h / 3)
    expect(px.solid).toBeGreaterThan(px.w * px.h / 5)
    expect(px.runs).toMatch(/^\.?x\.x/)
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

type Shown = { title: string; body: string; tag: string; requireInteraction: boolean; actions: { action: string; title: string }[] }

// workerPushes delivers pushes to the app's service worker through
// DevTools, from page (any page of the browser: the app's need not be
// open), and reads the notifications the worker shows.
async function workerPushes(ctx: BrowserContext, page: Page, sw: Worker) {
  const cdp = await ctx.newCDPSession(page)
  const regs: { registrationId: string; scopeURL: string }[] = []
  cdp.on('ServiceWorker.workerRegistrationUpdated', (e: { registrations: { registrationId: string; scopeURL: string }[] }) => regs.push(...e.registrations))
  const versions: { registrationId: string; runningStatus: string; status: string }[] = []
  cdp.on('ServiceWorker.workerVersionUpdated', (e: { versions: typeof versions }) => versions.push(...e.versions))
  await cdp.send('ServiceWorker.enable')
  await expect.poll(() => regs.find((r) => r.scopeURL === `${srv.url}/`)).toBeTruthy()
  const registrationId = regs.find((r) => r.scopeURL === `${srv.url}/`)!.registrationId
  // DevTools delivers to the running, activated version it knows of.
  await expect.poll(() => versions.some((v) => v.registrationId === registrationId && v.runningStatus === 'running' && v.status === 'activated')).toBe(true)
  expect(await sw.evaluate(() => self.registration.active?.state)).toBe('activated')
  const shown = () => sw.evaluate(async () => (await self.registration.getNotifications()).map((n) => ({
    title: n.title, body: n.body, tag: n.tag, requireInteraction: n.requireInteraction,
    actions: (n as unknown as { actions: { action: string; title: string }[] }).actions.map((a) => ({ action: a.action, title: a.title })),
  }))) as Promise<Shown[]>
  const send = (data: string) => cdp.send('ServiceWorker.deliverPushMessage', { origin: srv.url, registrationId, data })
  // DevTools now and then drops a push it was given (it answers {} all
  // the same); a push service redelivers what was not received, and so
  // does this, until the push has done what it does (by default: the
  // notifications are as it makes them). A push shows or closes one tag
  // and sets the badge to a number, so twice is the same as once.
  const deliver = async (data: string, done?: () => Promise<boolean>) => {
    const m = JSON.parse(data) as { type: string; tag: string }
    done ??= async () => (await shown()).some((n) => n.tag === m.tag) === (m.type === 'ask')
    for (let i = 0; i < 5; i++) {
      await send(data)
      try {
        await expect.poll(done, { timeout: 3000 }).toBe(true)
        return
      } catch {
        // not received: again
      }
    }
    throw new Error('push not received: ' + data)
  }
  return { shown, deliver }
}

type Sub = { id: string; endpoint: string; device: string; replies: string[] }

function subscriptions(): Sub[] {
  try {
    const all = JSON.parse(readFileSync(join(srv.data, 'push-subscriptions.json'), 'utf8')) as Record<string, unknown>
    return Object.values(all).flat() as Sub[]
  } catch {
    return []
  }
}

describe('Web Push', () => {
  it('the toggle subscribes this device with its quick replies; a push shows the question; its button answers the agent', async () => {
    const ctx = await profile()
    await ctx.grantPermissions(['notifications'], { origin: srv.url })
    await usePushDouble(ctx)
    await ctx.addInitScript(() => localStorage.setItem('aa.nickname', 'Pixel 8'))
    const { page, sw } = await openApp(ctx)

    await page.locator('button[aria-label=Settings]').click()
    await page.getByTestId('push-toggle').click()
    await page.locator('[data-testid=push-toggle][aria-checked=true]').waitFor()
    await expect.poll(() => subscriptions()).toEqual([expect.objectContaining({ endpoint: pushService.endpoint, device: 'Pixel 8',
      replies: ['Yes', 'No', 'Go ahead', 'Stop and wait'] })])

    // The person's own replies, edited while subscribed, reach the server.
    for (const r of ['Yes', 'No', 'Go ahead', 'Stop and wait']) await page.getByRole('button', { name: `Remove “${r}”` }).click()
    for (const r of ['Ship it', 'Hold on']) {
      await page.locator('input[data-testid=add-reply], [data-testid=add-reply] input').first().fill(r)
      await page.locator('input[data-testid=add-reply], [data-testid=add-reply] input').first().press('Enter')
    }
    await expect.poll(() => subscriptions()[0]?.replies).toEqual(['Ship it', 'Hold on'])
    await page.keyboard.press('Escape')

    const { shown, deliver } = await workerPushes(ctx, page, sw)

    const first = mcp.callTool({ name: 'ask_question', arguments: { question: 'Deploy **v2** to production?', project_directory: '/home/me/shop' } },
      undefined, { timeout: 60_000 }) as Promise<ToolResult>
    const ask = await pushService.next()
    expect(ask.authorization).toMatch(/^vapid t=/)
    const m = JSON.parse(ask.plaintext)
    expect(m).toMatchObject({ type: 'ask', kind: 'question', title: 'shop · e2e asks', body: 'Deploy v2 to production?', actions: ['Ship it', 'Hold on'] })
    expect(ask.plaintext).not.toContain(srv.token)
    await deliver(ask.plaintext)
    await expect.poll(shown).toEqual([{ title: 'shop · e2e asks', body: 'Deploy v2 to production?', tag: m.tag, requireInteraction: true,
      actions: [{ action: 'a0', title: 'Ship it' }, { action: 'a1', title: 'Hold on' }] }])

    // The lock screen's button: the worker answers with the capability.
    await sw.evaluate(async (tag) => {
      const [n] = await self.registration.getNotifications({ tag })
      self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n!, action: 'a1' }))
    }, m.tag)
    expect(text(await first)).toBe('Hold on')
    await expect.poll(shown).toEqual([])
    // The open page says it was answered here: from its own notification.
    const card = page.locator(`[data-request-id="${m.id}"]`)
    await card.and(page.locator('[data-status=answeredHere]')).waitFor()
    await expect(card.locator('[data-testid=status]').textContent()).resolves.toContain('Answered here')
    // Its notification closed at the tap: no settled push comes for it
    // (the next push is the next question's).

    // A button pressed too late (the capability is used): the app opens
    // on the question instead.
    await page.evaluate(() => {
      const w = window as unknown as { opened: unknown[] }
      w.opened = []
      navigator.serviceWorker.addEventListener('message', (e) => e.data?.type === 'open' && w.opened.push(e.data))
    })
    await deliver(ask.plaintext)
    await expect.poll(async () => (await shown()).length).toBe(1)
    await sw.evaluate(async (tag) => {
      const [n] = await self.registration.getNotifications({ tag })
      self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n!, action: 'a0' }))
    }, m.tag)
    await expect.poll(() => page.evaluate(() => (window as unknown as { opened: unknown[] }).opened))
      .toEqual([{ type: 'open', url: `/?request=${m.id}` }])
    await expect.poll(shown).toEqual([])

    // Answered in the open page instead: the settled push closes it.
    const call = (q: string) => mcp.callTool({ name: 'ask_question', arguments: { question: q } }, undefined, { timeout: 60_000 }) as Promise<ToolResult>
    const second = call('Merge the branch?')
    const m2 = JSON.parse((await pushService.next()).plaintext)
    const third = call('Tag the release?')
    const m3 = JSON.parse((await pushService.next()).plaintext)
    await deliver(JSON.stringify(m2))
    await expect.poll(async () => (await shown()).map((n) => n.tag)).toEqual([m2.tag])
    await deliver(JSON.stringify(m3))
    await expect.poll(async () => (await shown()).map((n) => n.tag).sort()).toEqual([m2.tag, m3.tag].sort())
    // Its body tapped: the open page turns to that question.
    await page.getByTestId('pick-question').waitFor()
    await sw.evaluate(async (tag) => {
      const [n] = await self.registration.getNotifications({ tag })
      self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n! }))
    }, m2.tag)
    await page.locator(`[data-request-id="${m2.id}"] [data-testid=answer][aria-pressed=true]`).waitFor()
    await expect.poll(async () => (await shown()).map((n) => n.tag)).toEqual([m3.tag])
    await page.getByTestId('quick').filter({ hasText: 'Ship it' }).click()
    expect(text(await second)).toBe('Ship it')
    expect(JSON.parse((await pushService.next()).plaintext)).toMatchObject({ type: 'settled', tag: m2.tag })
    await page.getByTestId('quick').filter({ hasText: 'Hold on' }).click()
    expect(text(await third)).toBe('Hold on')
    const settled = await pushService.next()
    // It names the quick reply chosen, one of the device's buttons.
    expect(JSON.parse(settled.plaintext)).toMatchObject({ type: 'settled', tag: m3.tag, outcome: 'Answered on Pixel 8: Hold on' })
    await deliver(settled.plaintext)
    await expect.poll(shown).toEqual([])

    // Off: unsubscribed here and removed on the server.
    await page.locator('button[aria-label=Settings]').click()
    await page.getByTestId('push-toggle').click()
    await page.locator('[data-testid=push-toggle][aria-checked=false]').waitFor()
    await expect.poll(() => subscriptions()).toEqual([])
    expect(await page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith('aa.push')))).toEqual([])
    await ctx.close()
  })

  // A private window (and a browser without a push service) refuses the
  // subscription although notifications are allowed; the browser's own
  // words ("Registration failed - permission denied") send the person to
  // site settings that already allow them.
  it('a browser that refuses a subscription with notifications allowed says why and what to do', async () => {
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] })
    const ctx = await browser.newContext({ locale: 'en-US' })
    await ctx.grantPermissions(['notifications'], { origin: srv.url })
    const { page } = await openApp(ctx)
    await page.locator('button[aria-label=Settings]').click()
    await page.getByTestId('push-toggle').click()
    const why = page.getByTestId('push-why')
    await why.waitFor()
    expect(await why.textContent()).toContain('a private (incognito) window, or a browser without a push service')
    await page.locator('[data-testid=push-toggle][aria-checked=false]').waitFor()
    expect(subscriptions()).toEqual([])
    await browser.close()
  })

  it('with the app closed, a push sets its badge to the questions waiting, and a settled one lowers it', async () => {
    const ctx = await profile()
    await ctx.grantPermissions(['notifications'], { origin: srv.url })
    await usePushDouble(ctx)
    const { page, sw } = await openApp(ctx)
    await page.locator('button[aria-label=Settings]').click()
    await page.getByTestId('push-toggle').click()
    await page.locator('[data-testid=push-toggle][aria-checked=true]').waitFor()
    await expect.poll(() => subscriptions().length).toBe(1)

    // The app closed: no page of it is open, only its service worker.
    const other = await ctx.newPage()
    await page.close()
    const { shown, deliver } = await workerPushes(ctx, other, sw)
    // Headless Chromium keeps no badge to read: what the worker sets it
    // to is recorded.
    await sw.evaluate(() => {
      const w = self as unknown as { badges: number[] }
      w.badges = []
      const nav = WorkerNavigator.prototype as unknown as { setAppBadge(n?: number): Promise<void>; clearAppBadge(): Promise<void> }
      nav.setAppBadge = async (n?: number) => void w.badges.push(n ?? -1)
      nav.clearAppBadge = async () => void w.badges.push(0)
    })
    const badge = () => sw.evaluate(() => (self as unknown as { badges: number[] }).badges.at(-1))
    const badgeIs = (n: number) => async () => (await badge()) === n

    const call = (q: string) => mcp.callTool({ name: 'ask_question', arguments: { question: q } }, undefined, { timeout: 60_000 }) as Promise<ToolResult>
    const first = call('Deploy v2?')
    const m1 = JSON.parse((await pushService.next()).plaintext)
    expect(m1).toMatchObject({ type: 'ask', waiting: 1 })
    await deliver(JSON.stringify(m1))
    await expect.poll(badge).toBe(1)
    const secondQ = call('Merge the branch?')
    const m2 = JSON.parse((await pushService.next()).plaintext)
    expect(m2).toMatchObject({ type: 'ask', waiting: 2 })
    await deliver(JSON.stringify(m2))
    await expect.poll(badge).toBe(2)

    // Answered from the lock screen: the badge counts one less at once
    // (the server sends this device no settled push for its own answer).
    for (const [m, answered, left] of [[m1, first, 1], [m2, secondQ, 0]] as const) {
      await sw.evaluate(async (tag) => {
        const [n] = await self.registration.getNotifications({ tag })
        self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n!, action: 'a0' }))
      }, m.tag)
      expect(text(await answered)).toBe('Yes')
      await expect.poll(badge).toBe(left)
    }
    expect(await shown()).toEqual([])

    // Its body tapped with the app closed: the worker opens the push's
    // address (a window opens only on a person's real tap, so it is
    // opened here), and the app opens on the question.
    const fourth = call('Rotate the **keys** now?')
    const m4 = JSON.parse((await pushService.next()).plaintext)
    await deliver(JSON.stringify(m4), async () => (await shown()).length === 1 && (await badge()) === 1)
    const tapped = await ctx.newPage()
    await tapped.goto(new URL(m4.url, srv.url).href)
    await tapped.setViewportSize({ width: 390, height: 844 })
    await tapped.locator(`[data-request-id="${m4.id}"] [data-testid=answer][aria-pressed=true]`).waitFor()
    if (SHOTS) await tapped.screenshot({ path: `${SHOTS}/push-opened-390-light.png` })
    await tapped.getByTestId('quick').filter({ hasText: 'Yes' }).click()
    expect(text(await fourth)).toBe('Yes')
    // Answered in the app, not by this device's button: a settled push.
    const late = (await pushService.next()).plaintext
    expect(JSON.parse(late)).toMatchObject({ type: 'settled', tag: m4.tag, waiting: 0 })
    await deliver(late, badgeIs(0))
    await tapped.close()

    // The app open: it counts what it shows (unread chat too), and sets
    // its count again after a push, even a late one that counted less.
    await ctx.addInitScript(() => {
      const w = window as unknown as { badges: number[] }
      w.badges = []
      const nav = Navigator.prototype as unknown as { setAppBadge(n?: number): Promise<void>; clearAppBadge(): Promise<void> }
      nav.setAppBadge = async (n?: number) => void w.badges.push(n ?? -1)
      nav.clearAppBadge = async () => void w.badges.push(0)
    })
    const third = call('Tag the release?')
    const m3 = JSON.parse((await pushService.next()).plaintext)
    const app = await ctx.newPage()
    await app.goto(`${srv.url}/`)
    await app.locator('[data-status=waiting]', { hasText: 'Tag the release?' }).waitFor()
    // Answered with this device's notification while no page was open:
    // its history says so, not "on another device".
    for (const m of [m1, m2]) await app.locator(`[data-request-id="${m.id}"][data-status=answeredHere]`).waitFor()
    const pageBadge = () => app.evaluate(() => (window as unknown as { badges: number[] }).badges.at(-1))
    await expect.poll(pageBadge).toBe(1)
    const before = await app.evaluate(() => (window as unknown as { badges: number[] }).badges.length)
    await deliver(late, badgeIs(0))
    await expect.poll(() => app.evaluate(() => (window as unknown as { badges: number[] }).badges.length)).toBeGreaterThan(before)
    expect(await pageBadge()).toBe(1)
    await app.getByTestId('quick').filter({ hasText: 'Yes' }).click()
    expect(text(await third)).toBe('Yes')
    await expect.poll(pageBadge).toBe(0)
    expect(m3).toMatchObject({ type: 'ask', waiting: 1 })
    expect(JSON.parse((await pushService.next()).plaintext)).toMatchObject({ type: 'settled', tag: m3.tag, waiting: 0 })
    await ctx.close()
  })
})

describe('Web Push, one browser and several tokens or choices', () => {
  // The app's badges recorded: headless Chromium keeps none to read.
  const recordBadges = (sw: Worker) => sw.evaluate(() => {
    const w = self as unknown as { badges: number[] }
    w.badges = []
    const nav = WorkerNavigator.prototype as unknown as { setAppBadge(n?: number): Promise<void>; clearAppBadge(): Promise<void> }
    nav.setAppBadge = async (n?: number) => void w.badges.push(n ?? -1)
    nav.clearAppBadge = async () => void w.badges.push(0)
  })
  const lastBadge = (sw: Worker) => () => sw.evaluate(() => (self as unknown as { badges: number[] }).badges.at(-1))
  const tap = (sw: Worker, tag: string, action?: string) => sw.evaluate(async ([tag, action]) => {
    const [n] = await self.registration.getNotifications({ tag })
    self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n!, action: action ?? '' }))
  }, [tag, action] as const)

  it('subscribed under two tokens, the badge is the sum of both tokens\' questions, an open page\'s too', async () => {
    const ctx = await profile()
    await ctx.grantPermissions(['notifications'], { origin: srv.url })
    await usePushDouble(ctx)
    const { page, sw } = await openApp(ctx)
    await page.locator('button[aria-label=Settings]').click()
    await page.getByTestId('push-toggle').click()
    await page.locator('[data-testid=push-toggle][aria-checked=true]').waitFor()
    await expect.poll(() => subscriptions().length).toBe(1)
    // The same browser opens the second token's inbox, where push is off
    // until turned on there too: the browser's one subscription, now
    // under that token as well.
    await page.goto(`${srv.url}/?token=${tokenB}`)
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    await page.locator('button[aria-label=Settings]').click()
    await page.locator('[data-testid=push-toggle][aria-checked=false]').waitFor()
    await page.getByTestId('push-toggle').click()
    await page.locator('[data-testid=push-toggle][aria-checked=true]').waitFor()
    await expect.poll(() => subscriptions().map((x) => x.endpoint)).toEqual([pushService.endpoint, pushService.endpoint])

    const other = await ctx.newPage()
    await page.close()
    const { deliver } = await workerPushes(ctx, other, sw)
    await recordBadges(sw)
    const badge = lastBadge(sw)
    const mcpB = await startMCP({ ...srv, token: tokenB })
    const ask = (c: Client, q: string) => c.callTool({ name: 'ask_question', arguments: { question: q } }, undefined, { timeout: 60_000 }) as Promise<ToolResult>
    const next = async () => JSON.parse((await pushService.next()).plaintext)

    const a1 = ask(mcp, 'Deploy v2?')
    const ma1 = await next()
    await deliver(JSON.stringify(ma1))
    await expect.poll(badge).toBe(1)
    const b1 = ask(mcpB, 'Rotate the keys?')
    const mb1 = await next()
    const b2 = ask(mcpB, 'Renew the certificate?')
    const mb2 = await next()
    expect([ma1.waiting, mb1.waiting, mb2.waiting]).toEqual([1, 1, 2])
    expect(mb1.sub).toBeTruthy()
    expect(mb1.sub).not.toBe(ma1.sub)
    expect(mb2.sub).toBe(mb1.sub)
    await deliver(JSON.stringify(mb1))
    await expect.poll(badge).toBe(2) // the first token's one and the second's
    await deliver(JSON.stringify(mb2))
    await expect.poll(badge).toBe(3)
    // The first token's question answered from its notification: the
    // second token's two still wait.
    await tap(sw, ma1.tag, 'a0')
    expect(text(await a1)).toBe('Yes')
    await expect.poll(badge).toBe(2)

    // The app open (under the second token): its own two, and what a
    // push brings under the first token added.
    await ctx.addInitScript(() => {
      const w = window as unknown as { badges: number[] }
      w.badges = []
      const nav = Navigator.prototype as unknown as { setAppBadge(n?: number): Promise<void>; clearAppBadge(): Promise<void> }
      nav.setAppBadge = async (n?: number) => void w.badges.push(n ?? -1)
      nav.clearAppBadge = async () => void w.badges.push(0)
    })
    const app = await ctx.newPage()
    await app.goto(`${srv.url}/`)
    await app.locator('[data-status=waiting]', { hasText: 'Renew the certificate?' }).waitFor()
    const pageBadge = () => app.evaluate(() => (window as unknown as { badges: number[] }).badges.at(-1))
    await expect.poll(pageBadge).toBe(2)
    const a2 = ask(mcp, 'Merge the branch?')
    const ma2 = await next()
    await deliver(JSON.stringify(ma2), async () => (await badge()) === 3)
    await expect.poll(pageBadge).toBe(3)

    // Answered: the page's, then the last by its notification.
    for (const [q, done] of [['Rotate the keys?', b1], ['Renew the certificate?', b2]] as const) {
      await app.locator(`[data-status=waiting]`, { hasText: q }).click()
      await app.getByTestId('quick').filter({ hasText: 'Yes' }).click()
      expect(text(await done)).toBe('Yes')
      await deliver((await pushService.next()).plaintext, async () => true)
    }
    await expect.poll(pageBadge).toBe(1)
    await tap(sw, ma2.tag, 'a0')
    expect(text(await a2)).toBe('Yes')
    await expect.poll(badge).toBe(0)
    await mcpB.close()
    await ctx.close()
  })

  it('a question of several choices: no option is a button; "Choose…" opens its card, ticks ready', async () => {
    const ctx = await profile()
    await ctx.grantPermissions(['notifications'], { origin: srv.url })
    await usePushDouble(ctx)
    const { page, sw } = await openApp(ctx)
    await page.locator('button[aria-label=Settings]').click()
    await page.getByTestId('push-toggle').click()
    await page.locator('[data-testid=push-toggle][aria-checked=true]').waitFor()
    await expect.poll(() => subscriptions().length).toBeGreaterThan(0)
    await page.keyboard.press('Escape')
    const other = await ctx.newPage()
    await page.close()
    const { shown, deliver } = await workerPushes(ctx, other, sw)

    const asked = mcp.callTool({ name: 'ask_question', arguments: { question: 'Which services go out today?', multi_select: true, allow_other: true,
      options: [{ label: 'Web' }, { label: 'API' }, { label: 'Worker' }] } }, undefined, { timeout: 60_000 }) as Promise<ToolResult>
    const m = JSON.parse((await pushService.next()).plaintext)
    // The person's replies, which the question takes besides its options.
    expect(m).toMatchObject({ type: 'ask', choose: true, actions: ['Yes', 'No'] })
    await deliver(JSON.stringify(m))
    await expect.poll(async () => (await shown()).map((n) => n.actions))
      .toEqual([[{ action: 'open', title: 'Choose…' }, { action: 'a0', title: 'Yes' }]])
    // Its capability answers with those replies only: not with one of
    // the options, which the person picks several of.
    const posted = await fetch(srv.url + '/push/answer', { method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ cap: m.cap, text: 'Web' }) })
    expect(posted.status).toBe(400)

    // Tapped with the app closed: the worker opens the push's address
    // (a window opens only on a person's real tap, so it is opened
    // here); the card is picked, its options ready to tick.
    const opened = await ctx.newPage()
    await opened.goto(new URL(m.url, srv.url).href)
    const card = opened.locator(`[data-request-id="${m.id}"]`)
    await card.locator('[data-testid=answer][aria-pressed=true]').waitFor()
    for (const o of ['Web', 'Worker']) await card.locator('[data-testid=option]', { hasText: o }).click()
    await card.locator('[data-testid=send-choices]').click()
    expect(text(await asked)).toContain('"Web", "Worker"')
    await ctx.close()
  })
})

describe('Web Push, a subscription that changes or lapses', () => {
  // The tests before left their browsers subscribed, and settled pushes
  // unread: the server forgets them, through its API, and the push
  // double what came, so that each test here sees its own.
  beforeEach(async () => {
    for (const s of subscriptions()) {
      for (const token of [srv.token, tokenB]) {
        await fetch(`${srv.url}/push/subscriptions/${s.id}`, { method: 'DELETE', headers: { 'X-Agentassistant-Token': token, Origin: srv.url } })
      }
    }
    expect(subscriptions()).toEqual([])
    pushService.drain()
  })
  const on = async (page: Page) => {
    await page.locator('button[aria-label=Settings]').click()
    await page.getByTestId('push-toggle').click()
    await page.locator('[data-testid=push-toggle][aria-checked=true]').waitFor()
    await page.keyboard.press('Escape')
  }
  const ask = (q: string) => mcp.callTool({ name: 'ask_question', arguments: { question: q } }, undefined, { timeout: 60_000 }) as Promise<ToolResult>

  // Chromium never fires pushsubscriptionchange itself: the test fires it
  // in the worker, as Firefox does when its push service changes the
  // subscription, with the worker's PushManager handing out the push
  // double's subscriptions as the page's does.
  const change = (sw: Worker, o: { old: Device; next?: Device; subscribes?: Device }) => sw.evaluate(({ old, next, subscribes }) => {
    const w = self as unknown as { subscribedWith: string[] }
    w.subscribedWith = []
    const b64 = (k: ArrayBuffer | null) => btoa(String.fromCharCode(...new Uint8Array(k ?? new ArrayBuffer(0))))
    const sub = (d: { endpoint: string; p256dh: string; auth: string }, key: ArrayBuffer | null) => ({
      endpoint: d.endpoint, expirationTime: null, options: { userVisibleOnly: true, applicationServerKey: key },
      toJSON: () => ({ endpoint: d.endpoint, expirationTime: null, keys: { p256dh: d.p256dh, auth: d.auth } }),
      unsubscribe: async () => true,
    })
    let current: ReturnType<typeof sub> | null = null
    PushManager.prototype.getSubscription = async () => current as unknown as PushSubscription
    PushManager.prototype.subscribe = async (opts?: PushSubscriptionOptionsInit) => {
      const key = opts?.applicationServerKey as ArrayBuffer
      w.subscribedWith.push(b64(key))
      current = sub(subscribes!, key)
      return current as unknown as PushSubscription
    }
    const key = Uint8Array.from(atob((self as unknown as { serverKey: string }).serverKey), (c) => c.charCodeAt(0)).buffer
    const e = new ExtendableEvent('pushsubscriptionchange')
    Object.defineProperties(e, {
      oldSubscription: { value: sub(old, key) },
      newSubscription: { value: next ? sub(next, key) : null },
    })
    self.dispatchEvent(e)
  }, o)

  it('the push service changes the subscription with no page open: the worker gives the server the new one, the same device', async () => {
    const ctx = await profile()
    await ctx.grantPermissions(['notifications'], { origin: srv.url })
    await usePushDouble(ctx)
    await ctx.addInitScript(() => localStorage.setItem('aa.nickname', 'Firefox phone'))
    const { page, sw } = await openApp(ctx)
    await on(page)
    await expect.poll(() => subscriptions()).toEqual([expect.objectContaining({ endpoint: pushService.endpoint, device: 'Firefox phone' })])
    const [before] = subscriptions()
    const { publicKey } = await page.evaluate(async (token) => (await fetch('/push/key', { headers: { 'X-Agentassistant-Token': token } })).json(), srv.token) as { publicKey: string }
    const serverKey = Buffer.from(publicKey, 'base64url').toString('base64')
    await sw.evaluate((k) => void ((self as unknown as { serverKey: string }).serverKey = k), serverKey)
    // The app closed: only its service worker runs.
    const other = await ctx.newPage()
    await page.close()

    // The event with the new subscription: the server has it under the
    // same ID, with the device's name and replies, and pushes go there.
    await change(sw, { old: first(), next: pushService.renewed })
    await expect.poll(() => subscriptions()).toEqual([{ ...before, ...pushService.renewed }])
    const q = ask('Deploy after the change?')
    const m = await pushService.next()
    expect(m.path).toBe('/push/e2e-renewed')
    const msg = JSON.parse(m.plaintext)
    expect(msg).toMatchObject({ type: 'ask', body: 'Deploy after the change?', sub: before!.id })
    const { shown, deliver } = await workerPushes(ctx, other, sw)
    await deliver(m.plaintext)
    await sw.evaluate(async (tag) => {
      const [n] = await self.registration.getNotifications({ tag })
      self.dispatchEvent(new NotificationEvent('notificationclick', { notification: n!, action: 'a0' }))
    }, msg.tag)
    expect(text(await q)).toBe('Yes')
    await expect.poll(shown).toEqual([])

    // The event without one (the subscription expired): the worker
    // subscribes again with the server's key, and tells the server.
    await change(sw, { old: pushService.renewed, subscribes: first() })
    await expect.poll(() => subscriptions()).toEqual([before])
    expect(await sw.evaluate(() => (self as unknown as { subscribedWith: string[] }).subscribedWith)).toEqual([serverKey])
    await ctx.close()
  })

  it('the page opens to a subscription the server does not push to: it gives it again and says so', async () => {
    const ctx = await profile()
    await ctx.grantPermissions(['notifications'], { origin: srv.url })
    await usePushDouble(ctx)
    const { page } = await openApp(ctx)
    await on(page)
    await expect.poll(() => subscriptions().length).toBe(1)
    const [before] = subscriptions()

    // The browser's subscription changed and no event told the server
    // (a browser that does not fire it, or a worker stopped meanwhile).
    await page.evaluate(() => localStorage.setItem('e2e.renewed', '1'))
    await page.reload()
    await page.getByTestId('push-renewed').waitFor()
    expect(await page.getByTestId('push-renewed').textContent()).toContain('Notifications to this device were set up again')
    await expect.poll(() => subscriptions()).toEqual([{ ...before, ...pushService.renewed }])
    if (SHOTS) {
      for (const [w, h] of [[1280, 800], [390, 844]]) {
        for (const scheme of ['light', 'dark'] as const) {
          await page.emulateMedia({ colorScheme: scheme })
          await page.setViewportSize({ width: w, height: h })
          // The notice slides in: shown once it has come to rest.
          await page.evaluate(() => Promise.all(document.getAnimations().map((a) => a.finished)))
          await page.getByTestId('push-renewed').waitFor()
          await page.screenshot({ path: `${SHOTS}/push-renewed-${w}-${scheme}.png` })
        }
      }
      await page.emulateMedia({ colorScheme: 'light' })
      await page.setViewportSize({ width: 1280, height: 800 })
    }

    // Its push service calls it gone: the server drops it. The page
    // opened again subscribes again, under a new ID, and says so; the
    // toggle is on and pushes arrive.
    pushService.gone.add('/push/e2e-renewed')
    const q = ask('Pushed to a dead endpoint?')
    expect((await pushService.next()).path).toBe('/push/e2e-renewed')
    await expect.poll(() => subscriptions()).toEqual([])
    pushService.gone.clear()
    await page.reload()
    await page.getByTestId('push-renewed').waitFor()
    await expect.poll(() => subscriptions()).toEqual([expect.objectContaining({ endpoint: pushService.renewed.endpoint, device: before!.device })])
    const [after] = subscriptions()
    expect(after!.id).not.toBe(before!.id)
    expect(await page.evaluate(() => Object.entries(localStorage).filter(([k]) => k.startsWith('aa.push.')).map(([, v]) => v))).toEqual([after!.id])
    await page.locator('button[aria-label=Settings]').click()
    await page.locator('[data-testid=push-toggle][aria-checked=true]').waitFor()
    await page.keyboard.press('Escape')
    await page.getByTestId('quick').filter({ hasText: 'Yes' }).click()
    expect(text(await q)).toBe('Yes')
    expect(JSON.parse((await pushService.next()).plaintext)).toMatchObject({ type: 'settled', sub: after!.id })

    // Off: nothing left on the server, nor for the worker.
    await page.locator('button[aria-label=Settings]').click()
    await page.getByTestId('push-toggle').click()
    await page.locator('[data-testid=push-toggle][aria-checked=false]').waitFor()
    await expect.poll(() => subscriptions()).toEqual([])
    await ctx.close()
  })

  it('a notification\'s own words follow the language chosen in the app, not the browser\'s', async () => {
    const ctx = await profile() // the browser speaks en-US
    await ctx.grantPermissions(['notifications'], { origin: srv.url })
    await usePushDouble(ctx)
    const { page, sw } = await openApp(ctx)
    await on(page)
    await expect.poll(() => subscriptions().length).toBe(1)
    await page.locator('button[aria-label=Language]').click()
    await expect.poll(() => page.evaluate(() => document.documentElement.lang)).toBe('zh-CN')
    const other = await ctx.newPage()
    await page.close()
    const { shown, deliver } = await workerPushes(ctx, other, sw)
    const asked = mcp.callTool({ name: 'ask_question', arguments: { question: 'Which services go out today?', multi_select: true,
      options: [{ label: 'Web' }, { label: 'API' }] } }, undefined, { timeout: 60_000 }) as Promise<ToolResult>
    const m = JSON.parse((await pushService.next()).plaintext)
    await deliver(JSON.stringify(m))
    await expect.poll(async () => (await shown()).map((n) => n.actions[0])).toEqual([{ action: 'open', title: '去选择…' }])
    expect((await shown())[0]!.title).toMatch(/ 提问$/)
    const app = await ctx.newPage()
    await app.goto(new URL(m.url, srv.url).href)
    const card = app.locator(`[data-request-id="${m.id}"]`)
    await card.locator('[data-testid=option]', { hasText: 'Web' }).click()
    await card.locator('[data-testid=send-choices]').click()
    expect(text(await asked)).toContain('Web')
    expect(JSON.parse((await pushService.next()).plaintext)).toMatchObject({ type: 'settled', tag: m.tag })
    await app.locator('button[aria-label=设置]').click()
    await app.getByTestId('push-toggle').click()
    await app.locator('[data-testid=push-toggle][aria-checked=false]').waitFor()
    await expect.poll(() => subscriptions()).toEqual([])
    await ctx.close()
  })
})

describe('screens', () => {
  // The settings with the push toggle and the quick replies, and what a
  // question's notification shows (headless Chromium draws no system
  // notification: the page draws its title, body and buttons, from the
  // options the service worker shows it with).
  it('settings and a notification, 1280 and 390 px wide, light and dark', async () => {
    const ctx = await profile()
    await ctx.grantPermissions(['notifications'], { origin: srv.url })
    await usePushDouble(ctx)
    const { page } = await openApp(ctx)
    const { notificationOptions, titleOf } = await import('../src/lib/pushmessage')
    const m = { v: 1, type: 'ask' as const, id: 'r1', tag: 't1', kind: 'question' as const, title: 'shop · Claude asks',
      body: 'Deploy v2 to production? The migration adds a column to orders.', actions: ['Ship it', 'Hold on', 'Stop and wait'], options: 4, url: '/?request=r1' }
    const o = notificationOptions(m, 2)
    for (const scheme of ['light', 'dark'] as const) {
      for (const width of [1280, 390]) {
        await page.emulateMedia({ colorScheme: scheme })
        await page.setViewportSize({ width, height: width > 600 ? 800 : 844 })
        await page.reload()
        await page.locator('[data-testid=conn][data-state=online]').waitFor()
        await page.locator('button[aria-label=Settings]').click()
        await page.getByTestId('push-toggle').waitFor()
        await page.getByTestId('quick-reply').first().waitFor()
        await page.locator('.q-menu').evaluate((el) => Promise.all(el.getAnimations({ subtree: true }).map((a) => a.finished)))
        const name = `push-settings-${width}-${scheme}.png`
        if (SHOTS) await page.screenshot({ path: `${SHOTS}/${name}` })
        await page.keyboard.press('Escape')
      }
      const note = await ctx.newPage()
      await note.emulateMedia({ colorScheme: scheme })
      await note.setViewportSize({ width: 390, height: 220 })
      await note.setContent(notificationHTML(m.title, o.body ?? '', o.actions.map((a) => a.title), scheme))
      if (SHOTS) await note.screenshot({ path: `${SHOTS}/push-notification-${scheme}.png` })
      expect(await note.locator('button').allTextContents()).toEqual(['Ship it', 'Hold on'])
      // The options no button shows are said to be in the app.
      expect(await note.getByText('2 more answers in the app').isVisible()).toBe(true)
      // A question of several choices: its card opens, no option is a
      // button; a phone's shade at 390, a desktop's corner at 1280.
      const multi = { ...m, body: 'Which services go out today? Web, API, Worker.', choose: true, actions: ['Not now', 'Later'] }
      const mo = notificationOptions(multi, 2)
      for (const width of [1280, 390]) {
        await note.setViewportSize({ width, height: 220 })
        await note.setContent(notificationHTML(multi.title, mo.body ?? '', mo.actions.map((a) => a.title), scheme, width > 600))
        if (SHOTS) await note.screenshot({ path: `${SHOTS}/push-notification-multi-${width}-${scheme}.png` })
        expect(await note.locator('button').allTextContents()).toEqual(['Choose…', 'Not now'])
      }
      // The app set to Chinese: the notification's own words follow it.
      const zh = { ...multi, asker: 'Claude', project: 'shop', body: '今天发布哪些服务？Web、API、Worker。', actions: ['稍后'] }
      const zo = notificationOptions(zh, 2, 'zh-CN')
      await note.setViewportSize({ width: 390, height: 220 })
      await note.setContent(notificationHTML(titleOf(zh, 'zh-CN'), zo.body ?? '', zo.actions.map((a) => a.title), scheme))
      if (SHOTS) await note.screenshot({ path: `${SHOTS}/push-notification-zh-${scheme}.png` })
      expect(await note.locator('button').allTextContents()).toEqual(['去选择…', '稍后'])
      await note.close()
    }
    await ctx.close()
  })
})

function notificationHTML(title: string, body: string, actions: string[], scheme: 'light' | 'dark', desktop = false): string {
  const esc = (s: string) => s.replace(/[&<>"]/g, (c) => `&#${c.charCodeAt(0)};`)
  const [bg, fg, sub, line] = scheme === 'dark' ? ['#2b2d31', '#e8eaed', '#bdc1c6', '#3c4043'] : ['#ffffff', '#202124', '#5f6368', '#e0e0e0']
  return `<body style="margin:0;padding:16px;background:${scheme === 'dark' ? '#111' : '#e8eaed'};font:14px/1.4 system-ui,sans-serif">
<div style="background:${bg};color:${fg};border-radius:16px;box-shadow:0 2px 8px #0004;overflow:hidden${desktop ? ';width:360px;margin-left:auto' : ''}">
 <div style="display:flex;gap:12px;padding:14px 16px">
  <img src="data:image/png;base64,${readFileSync(join(__dirname, '../public/icons/icon-192.png')).toString('base64')}" width="36" height="36" style="border-radius:8px">
  <div><div style="font-size:12px;color:${sub}">agentassistant · 127.0.0.1</div>
   <div style="font-weight:600">${esc(title)}</div><div style="color:${sub};white-space:pre-line">${esc(body)}</div></div>
 </div>
 <div style="display:flex;border-top:1px solid ${line}">${actions.map((a) => `<button style="flex:1;padding:12px;border:0;background:none;color:#1f6feb;font:600 14px system-ui">${esc(a)}</button>`).join('')}</div>
</div></body>`
}
