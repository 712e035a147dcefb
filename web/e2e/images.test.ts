// Images a person attaches to an answer reach the agent fit for its
// model: a phone's photo or a large screenshot smaller (its long side at
// most 1,568 pixels), a format a model does not read (BMP) drawn again
// as PNG, a file that is no image refused with a word, a small PNG as it
// was.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, photo, PNG, SHOTS, startMCP, startServer, text, type Server, type ToolResult } from './harness'

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

async function open(o: { width?: number; scheme?: 'light' | 'dark' } = {}): Promise<Page> {
  const ctx = await browser.newContext({ viewport: { width: o.width ?? 390, height: 844 }, locale: 'en-US', colorScheme: o.scheme ?? 'light' })
  ctxs.push(ctx)
  const page = await ctx.newPage()
  await page.goto(`${srv.url}/?token=${srv.token}`)
  await page.locator('[data-testid=conn][data-state=online]').waitFor()
  return page
}

function ask(question: string) {
  return mcp.callTool({ name: 'ask_question', arguments: { question } }, undefined, { timeout: 120_000 }) as Promise<ToolResult>
}

// bmp is a 24-bit BMP of w×h pixels, all one colour.
function bmp(w: number, h: number): Buffer {
  const row = Math.ceil((w * 3) / 4) * 4
  const b = Buffer.alloc(54 + row * h)
  b.write('BM', 0, 'latin1')
  b.writeUInt32LE(b.length, 2)
  b.writeUInt32LE(54, 10)
  b.writeUInt32LE(40, 14)
  b.writeInt32LE(w, 18)
  b.writeInt32LE(h, 22)
  b.writeUInt16LE(1, 26)
  b.writeUInt16LE(24, 28)
  b.writeUInt32LE(row * h, 34)
  for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) b.writeUIntLE(0x3366cc, 54 + y * row + x * 3, 3)
  return b
}


// size is an image's width and height, as the page reads it.
async function size(page: Page, data: string, mime: string): Promise<[number, number]> {
  return page.evaluate(async ([data, mime]) => {
    const img = new Image()
    img.src = `data:${mime};base64,${data}`
    await img.decode()
    return [img.naturalWidth, img.naturalHeight] as [number, number]
  }, [data, mime])
}

async function answerWith(page: Page, question: string, files: { name: string; mimeType: string; buffer: Buffer }[]) {
  const call = ask(question)
  await page.locator('[data-status=waiting]', { hasText: question }).locator('[data-testid=answer]').click()
  await page.locator('textarea[data-testid=reply-input]').fill('See the picture.')
  await page.locator('input[data-testid=file]').setInputFiles(files)
  return { call } // not the call itself: an async function's await would wait for its answer
}

describe('images in an answer', () => {
  it('reach the agent fit for its model: smaller, a BMP as PNG, a small PNG as it was', async () => {
    const page = await open()
    const big = await photo(page, 3000, 2000)
    const { call } = await answerWith(page, 'Images: how does the screen look?', [
      { name: 'screen.png', mimeType: 'image/png', buffer: big },
      { name: 'scan.bmp', mimeType: 'image/bmp', buffer: bmp(40, 30) },
      { name: 'dot.png', mimeType: 'image/png', buffer: PNG },
    ])
    await expect.poll(() => page.locator('[data-testid=thumb]').count()).toBe(3)
    await page.locator('[data-testid=send]').click()
    const r = await call
    expect(text(r)).toContain('See the picture.')
    const images = r.content.filter((c) => c.type === 'image')
    expect(images.map((c) => c.mimeType)).toEqual(['image/png', 'image/png', 'image/png'])
    expect(await size(page, images[0]!.data!, 'image/png')).toEqual([1568, 1045])
    expect(await size(page, images[1]!.data!, 'image/png')).toEqual([40, 30])
    expect(images[2]!.data).toBe(PNG.toString('base64'))
  })

  it('a photo too large for a PNG of its size goes as a JPEG', async () => {
    const page = await open()
    const noisy = await page.evaluate(async () => {
      const c = new OffscreenCanvas(2400, 1800)
      const g = c.getContext('2d')!
      const px = g.createImageData(2400, 1800)
      let x = 12345
      for (let i = 0; i < px.data.length; i++) px.data[i] = i % 4 === 3 ? 255 : (x = (x * 1103515245 + 12345) & 0x7fffffff) >> 23
      g.putImageData(px, 0, 0)
      const b = await c.convertToBlob({ type: 'image/png' })
      const bytes = new Uint8Array(await b.arrayBuffer())
      let s = ''
      for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000))
      return btoa(s)
    })
    const { call } = await answerWith(page, 'Images: and the photo?', [{ name: 'photo.png', mimeType: 'image/png', buffer: Buffer.from(noisy, 'base64') }])
    await page.locator('[data-testid=thumb]').waitFor()
    await page.locator('[data-testid=send]').click()
    const images = (await call).content.filter((c) => c.type === 'image')
    expect(images.map((c) => c.mimeType)).toEqual(['image/jpeg'])
    expect(Buffer.from(images[0]!.data!, 'base64').length).toBeLessThanOrEqual(3_750_000)
    expect(await size(page, images[0]!.data!, 'image/jpeg')).toEqual([1568, 1176])
  })

  it('a file that is no image is refused with a word, and the answer goes without it', async () => {
    const page = await open()
    const { call } = await answerWith(page, 'Images: anything else?', [{ name: 'notes.png', mimeType: 'image/png', buffer: Buffer.from('not an image at all') }])
    await page.getByText('notes.png cannot be read as an image').waitFor()
    expect(await page.locator('[data-testid=thumb]').count()).toBe(0)
    if (SHOTS) {
      await page.screenshot({ path: `${SHOTS}/image-unread-390-light.png`, animations: 'disabled' })
      for (const [width, scheme] of [[1280, 'light'], [390, 'dark'], [1280, 'dark']] as const) {
        const p = await open({ width, scheme })
        await p.locator('[data-status=waiting]', { hasText: 'Images: anything else?' }).locator('[data-testid=answer]').click()
        await p.locator('input[data-testid=file]').setInputFiles([{ name: 'notes.png', mimeType: 'image/png', buffer: Buffer.from('not an image') }])
        await p.getByText('notes.png cannot be read as an image').waitFor()
        await p.screenshot({ path: `${SHOTS}/image-unread-${width}-${scheme}.png`, animations: 'disabled' })
      }
    }
    await page.locator('[data-testid=send]').click()
    const r = await call
    expect(text(r)).toContain('See the picture.')
    expect(r.content.filter((c) => c.type === 'image')).toEqual([])
  })
})
