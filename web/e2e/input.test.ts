// Remote input end to end: a phone's browser chats to agentassistant-input
// -listen, which types into an xterm (running `cat > FILE`) on Xvfb; the
// file must hold exactly the text, Chinese included.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import type { Browser, Page } from 'playwright-core'
import { launch, SHOTS, startProxy, startServer, type Server } from './harness'

const BIN = resolve(__dirname, '../../bin')
const run = promisify(execFile)
const missing = ['Xvfb', 'xterm', 'xdotool'].filter((p) => spawnSync('sh', ['-c', `command -v ${p}`]).status !== 0)
if (missing.length)
  console.warn(`remote input browser test skipped: ${missing.join(', ')} not installed (Debian/Ubuntu: apt install xvfb xterm xdotool)`)

let srv: Server
let browser: Browser
let xvfb: ChildProcess
let xterm: ChildProcess
let companion: ChildProcess
let companionLog = ''
let display = ''
const dir = mkdtempSync(join(tmpdir(), 'aa-input-'))
const file = join(dir, 'typed.txt')
let win = ''

function startCompanion() {
  companion = spawn(join(BIN, 'agentassistant-input'),
    ['-listen', '-host', srv.host, '-port', srv.port, '-token', srv.token, '-nickname', 'PC input (desk)'],
    { env: xenv(), stdio: ['ignore', 'ignore', 'pipe'] })
  companion.stderr!.on('data', (b) => (companionLog += b))
}

function xenv(): NodeJS.ProcessEnv {
  const { WAYLAND_DISPLAY: _, ...env } = process.env
  return { ...env, DISPLAY: display, LC_ALL: 'C.UTF-8', LANG: 'C.UTF-8', HOME: dir, XDG_CONFIG_HOME: dir }
}

const xdotool = (...args: string[]) => run('xdotool', args, { env: xenv(), timeout: 20_000 })

async function waitFor<T>(what: string, f: () => T | undefined | false, ms = 20_000): Promise<T> {
  const end = Date.now() + ms
  for (;;) {
    const v = f()
    if (v) return v
    if (Date.now() > end) throw new Error(`${what}: not within ${ms / 1000} s`)
    await new Promise((r) => setTimeout(r, 50))
  }
}

describe.skipIf(missing.length > 0)('remote input: dictate on the phone, typed on the PC', () => {
  beforeAll(async () => {
    srv = await startServer()
    // -displayfd: Xvfb picks a free display and writes its number on fd 3;
    // -fbdir: the screen is also a file (XWD), for the screenshot.
    xvfb = spawn('Xvfb', ['-displayfd', '3', '-screen', '0', '1024x640x24', '-nolisten', 'tcp', '-fbdir', dir], {
      stdio: ['ignore', 'ignore', 'pipe', 'pipe'],
    })
    display = ':' + (await new Promise<string>((ok, fail) => {
      let out = ''
      xvfb.stdio[3]!.on('data', (b) => {
        out += b
        if (out.includes('\n')) ok(out.trim())
      })
      xvfb.on('exit', (c) => fail(new Error(`Xvfb exited ${c}`)))
    }))
    const title = 'aa-input-e2e'
    xterm = spawn('xterm', ['-u8', '-fa', 'WenQuanYi Micro Hei Mono', '-fs', '14', '-geometry', '46x6+0+0', '-title', title,
      '-e', 'sh', '-c', 'exec cat > "$0"', file], { env: xenv(), stdio: 'ignore' })
    win = (await xdotool('search', '--sync', '--onlyvisible', '--name', title)).stdout.trim().split('\n')[0]!
    await xdotool('windowfocus', '--sync', win)
    await waitFor('cat running in the xterm', () => existsSync(file))

    startCompanion()
    browser = await launch()
  })

  afterAll(async () => {
    await browser?.close()
    for (const p of [companion, xterm, xvfb]) {
      if (p && p.exitCode === null) {
        p.kill('SIGTERM')
        await new Promise((r) => p.once('exit', r))
      }
    }
    await srv?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  async function openPhone(): Promise<Page> {
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'en-US', isMobile: true, hasTouch: true })
    await ctx.addInitScript(() => localStorage.setItem('aa.nickname', 'my-phone'))
    const page = await ctx.newPage()
    await page.goto(`${srv.url}/?token=${srv.token}`)
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    return page
  }

  it('a dictation that cannot be sent stays in the box', async () => {
    const proxy = await startProxy(Number(srv.port))
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'en-US', isMobile: true, hasTouch: true })
    const phone = await ctx.newPage()
    await phone.goto(`http://127.0.0.1:${proxy.port}/?token=${srv.token}`)
    await phone.locator('[data-testid=conn][data-state=online]').waitFor()
    await phone.locator('[data-testid=users]').getByText('desk', { exact: true }).click()
    proxy.setDown(true)
    await phone.locator('[data-testid=conn][data-state=offline]').waitFor()
    const box = phone.locator('textarea[data-testid=chat-input]')
    await box.fill('a long dictation that must not be lost')
    await phone.locator('[data-testid=type-send]').click()
    await phone.getByText('Not delivered').waitFor()
    expect(await box.inputValue()).toBe('a long dictation that must not be lost')
    await ctx.close()
    await proxy.close()
  })

  it('types a chat message from the browser into the focused X11 window, exactly', async () => {
    const phone = await openPhone()
    // The PC is among the online devices, marked as one that types.
    await phone.locator('[data-testid=users]').getByText('desk', { exact: true }).click()
    const chat = phone.locator('[data-testid=chat][data-typing]')
    await chat.waitFor()
    await expect(chat.locator('[data-testid=type-send]').textContent()).resolves.toContain('Type on desk')
    const box = chat.locator('textarea[data-testid=chat-input]')
    // A phone has no keyboard shortcut to offer.
    expect(await box.getAttribute('placeholder')).not.toContain('Enter')
    const answers = chat.locator('[data-testid=chat-answer]')

    // A dictation with a mistake on its second line…
    await box.fill('hello 你好\nsecond lien')
    await chat.locator('[data-testid=type-send]').click()
    await expect.poll(() => answers.allTextContents(), { timeout: 20_000 }).toEqual(['✓ typed 20 characters'])
    expect(await box.inputValue()).toBe('')
    // …undone (back to the Enter) and said again.
    await chat.locator('[data-testid=type-undo]').click()
    await expect.poll(() => answers.allTextContents(), { timeout: 20_000 }).toEqual(['✓ typed 20 characters', '✓ erased 11 characters'])
    await box.fill('second line')
    await chat.locator('[data-testid=type-send]').click()
    await expect.poll(() => answers.count(), { timeout: 20_000 }).toBe(3)
    expect(await answers.nth(2).textContent()).toBe('✓ typed 11 characters')
    // Answers in the open chat are read as they arrive: no unread badge.
    expect(await phone.locator('[data-testid=users] .q-badge').count()).toBe(0)

    if (SHOTS) await screenshot(phone)

    // End the input: Ctrl-D hands the unfinished line to cat, the next
    // one is end of file, and the xterm closes.
    await xdotool('key', 'ctrl+d')
    const exited = new Promise((r) => xterm.once('exit', r))
    const timer = setInterval(() => void xdotool('key', 'ctrl+d').catch(() => {}), 300)
    await exited
    clearInterval(timer)
    expect(readFileSync(file, 'utf8')).toBe('hello 你好\nsecond line')
    expect(companionLog).not.toContain(srv.token)
    expect(companionLog).not.toContain('你好') // what is typed is nobody's log
    await phone.context().close()
  })

  it('a device that names itself like the PC does not look like it', async () => {
    const phone = await openPhone()
    const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'en-US' })
    await ctx.addInitScript(() => localStorage.setItem('aa.nickname', '⌨ PC input (desk)'))
    const impostor = await ctx.newPage()
    await impostor.goto(`${srv.url}/?token=${srv.token}`)
    await impostor.locator('[data-testid=conn][data-state=online]').waitFor()
    const chips = phone.locator('[data-testid=users] [data-client-id]')
    await expect.poll(() => chips.count(), { timeout: 20_000 }).toBe(2)
    const texts = (await chips.allTextContents()).map((t) => t.trim())
    expect(new Set(texts).size).toBe(2)
    for (const t of texts) expect(t).toMatch(/^desk · [0-9a-f]{6}$/)
    for (const id of await chips.evaluateAll((els) => els.map((e) => e.getAttribute('data-client-id') ?? '')))
      expect(texts).toContain(`desk · ${id.slice(0, 6)}`)
    if (process.env.AA_LOOK) await phone.screenshot({ path: join(process.env.AA_LOOK, 'people-same-name-phone.png') })
    await ctx.close()
    await expect.poll(() => chips.allTextContents(), { timeout: 20_000 }).toEqual([expect.stringMatching(/^\s*desk\s*$/)])
    await phone.context().close()
  })

  it('the open chat follows the PC when it comes back under a new client id', async () => {
    const phone = await openPhone()
    await phone.locator('[data-testid=users]').getByText('desk', { exact: true }).click()
    const chat = phone.locator('[data-testid=chat][data-typing]')
    await chat.waitFor()
    const chip = phone.locator('[data-testid=users]').getByText('desk', { exact: true })
    companion.kill('SIGTERM')
    await new Promise((r) => companion.once('exit', r))
    await chip.waitFor({ state: 'detached' })
    startCompanion()
    await chip.waitFor()
    await chat.locator('textarea[data-testid=chat-input]').fill('again')
    await chat.locator('[data-testid=type-send]').click()
    await expect.poll(() => chat.locator('[data-testid=chat-answer]').allTextContents(), { timeout: 20_000 }).toEqual(['✓ typed 5 characters'])
    await phone.context().close()
  })
})

// screenshot saves the phone beside the xterm the text went to, as
// docs/remote-input.png.
async function screenshot(phone: Page) {
  await new Promise((r) => setTimeout(r, 500)) // let the xterm draw the last keys
  const geo = (await xdotool('getwindowgeometry', '--shell', win)).stdout
  const num = (k: string) => Number(new RegExp(`${k}=(\\d+)`).exec(geo)![1])
  const shot = xwdCrop(readFileSync(join(dir, 'Xvfb_screen0')), num('X'), num('Y'), num('WIDTH'), num('HEIGHT'))
  const phonePng = (await phone.screenshot()).toString('base64')
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } })
  await page.setContent(`<body style="margin:0;background:#eef1f5;font:15px system-ui,sans-serif;color:#333">
    <div id=all style="display:flex;gap:32px;align-items:center;padding:24px;width:max-content">
      <figure style="margin:0"><img src="data:image/png;base64,${phonePng}" width=390 style="border-radius:18px;box-shadow:0 4px 18px #0003">
        <figcaption style="text-align:center;margin-top:8px">the phone: dictate, Type on desk</figcaption></figure>
      <div style="font-size:40px">→</div>
      <figure style="margin:0"><canvas id=x style="box-shadow:0 4px 18px #0003"></canvas>
        <figcaption style="text-align:center;margin-top:8px">the PC: agentassistant-input -listen typed it<br>into the focused window (xterm running cat)</figcaption></figure>
    </div></body>`)
  await page.evaluate(({ w, h, px }) => {
    const c = document.getElementById('x') as HTMLCanvasElement
    c.width = w
    c.height = h
    const bytes = Uint8ClampedArray.from(atob(px), (ch) => ch.charCodeAt(0))
    c.getContext('2d')!.putImageData(new ImageData(bytes, w, h), 0, 0)
  }, { w: shot.width, h: shot.height, px: Buffer.from(shot.rgba).toString('base64') })
  await page.locator('#all').screenshot({ path: `${SHOTS}/remote-input.png` })
  await page.close()
}

// xwdCrop reads a region of an XWD screen dump (Xvfb -fbdir, 32 bits per
// pixel, TrueColor) as RGBA.
function xwdCrop(b: Buffer, x0: number, y0: number, w: number, h: number) {
  const field = (i: number) => b.readUInt32BE(i * 4)
  const [headerSize, byteOrder, bpp, bytesPerLine, ncolors] = [field(0), field(7), field(11), field(12), field(19)]
  if (bpp !== 32) throw new Error(`XWD with ${bpp} bits per pixel`)
  const start = headerSize + ncolors * 12
  const rgba = new Uint8Array(w * h * 4)
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) {
      const p = b.readUInt32BE(start + (y0 + y) * bytesPerLine + (x0 + x) * 4)
      const v = byteOrder === 0 ? ((p & 0xff) << 24) | ((p & 0xff00) << 8) | ((p >>> 8) & 0xff00) | (p >>> 24) : p
      const o = (y * w + x) * 4
      rgba[o] = (v >>> 16) & 0xff
      rgba[o + 1] = (v >>> 8) & 0xff
      rgba[o + 2] = v & 0xff
      rgba[o + 3] = 255
    }
  return { width: w, height: h, rgba }
}
