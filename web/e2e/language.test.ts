import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import { launch, opened, startServer, type Server } from './harness'

// One language for the whole page: our words and Quasar's own (dialog
// buttons), switched together and remembered on the device.
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

async function open(locale: string, path = '/'): Promise<Page> {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 }, locale })
  const page = await ctx.newPage()
  await page.goto(`${srv.url}${path}?token=${srv.token}`)
  await page.locator('[data-testid=conn][data-state=online], [data-testid=host-conn][data-state=online]').waitFor()
  return page
}

// The buttons of the dialog that names the device, as written.
async function dialogButtons(page: Page): Promise<string[]> {
  await page.locator('[data-testid=me]').click()
  const buttons = page.locator('.q-dialog .q-card__actions .q-btn')
  await buttons.first().waitFor()
  const labels = await buttons.evaluateAll((bs) => bs.map((b) => b.textContent?.trim() ?? ''))
  await opened(page)
  await page.keyboard.press('Escape')
  await page.locator('.q-dialog').waitFor({ state: 'detached' })
  return labels
}

describe('the page speaks one language', () => {
  it('a browser in Chinese opens in Chinese, Quasar\'s own buttons included', async () => {
    const page = await open('zh-CN')
    expect(await page.locator('.q-toolbar__title').textContent()).toContain('Agent 助手')
    expect(await dialogButtons(page)).toEqual(['取消', '确定'])
    expect(await page.evaluate(() => document.documentElement.lang)).toBe('zh-CN')
    await page.context().close()
  })

  it('the toggle switches ours and Quasar\'s together, and the choice is kept for the booking page and reloads', async () => {
    const page = await open('en-US')
    expect(await dialogButtons(page)).toEqual(['Cancel', 'OK'])
    await page.locator('button[aria-label=Language]').click()
    await expect.poll(() => page.locator('.q-toolbar__title').textContent()).toContain('Agent 助手')
    expect(await dialogButtons(page)).toEqual(['取消', '确定'])

    await page.goto(`${srv.url}/booking`)
    await page.locator('[data-testid=host-conn][data-state=online]').waitFor()
    expect(await page.locator('[data-testid=next]').textContent()).toContain('下一步')
    await page.locator('.q-toolbar .q-btn').last().click() // the booking page's language toggle
    await expect.poll(() => page.locator('[data-testid=next]').textContent()).toContain('Next')

    await page.goto(`${srv.url}/`)
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    expect(await page.locator('.q-toolbar__title').textContent()).toContain('Agent Assistant')
    expect(await dialogButtons(page)).toEqual(['Cancel', 'OK'])
    await page.context().close()
  })
})
