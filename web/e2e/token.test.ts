import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import { launch, SHOTS, startServer, type Server } from './harness'

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

async function open(path: string, viewport = { width: 1280, height: 800 }, colorScheme: 'light' | 'dark' = 'light'): Promise<Page> {
  const phone = viewport.width < 600
  const ctx = await browser.newContext({ viewport, locale: 'en-US', colorScheme, isMobile: phone, hasTouch: phone })
  const page = await ctx.newPage()
  await page.goto(srv.url + path)
  return page
}

// A person who lost the token opens the server's address without it. The
// page says a token is needed, where it is (the URL the server printed,
// the data directory's token file) and takes it pasted; it shows nothing
// that implies a connection (no "Online" line, no presence, no reply
// box) and never says "refused" when no token was given. A wrong token is
// said to be wrong, on the same screen; pasting the right one opens the
// inbox.
describe('the inbox without its token', () => {
  it('asks for the token, says where it is, and says nothing was refused', async () => {
    const page = await open('/')
    const screen = page.locator('[data-testid=token-needed]')
    await screen.waitFor()
    const said = await screen.innerText()
    expect(said).toMatch(/needs? (the|its|a) token/i)
    expect(said).toContain('?token=')
    // The default, and the rule the server follows to find it: the page
    // cannot know the server's environment.
    expect(said).toContain('~/.config/agentassistant/token')
    expect(said).toContain('$XDG_CONFIG_HOME/agentassistant/token')
    expect(said).toContain('~/Library/Application Support/agentassistant/token')
    expect(said).toContain('%AppData%\\agentassistant\\token')
    expect(said).toMatch(/generated a new token/)
    expect(said).not.toMatch(/refused|wrong/i)
    expect(await page.locator('[data-testid=users]').count()).toBe(0)
    expect(await page.locator('[data-testid=me]').count()).toBe(0)
    expect(await page.locator('[data-testid=conn]').count()).toBe(0)
    expect(await page.locator('[data-testid=reply-input]').count()).toBe(0)
    expect(await page.getByText(/Online/).count()).toBe(0)
    expect(await page.getByText(/Token refused/).count()).toBe(0)
    await page.context().close()
  })

  it('says a wrong token is wrong, and a pasted right one opens the inbox', async () => {
    const page = await open('/?token=not-the-token-0123456789')
    const screen = page.locator('[data-testid=token-needed][data-refused=true]')
    await screen.waitFor()
    const said = await screen.innerText()
    expect(said).toMatch(/refused|wrong/i)
    expect(said).toContain('~/.config/agentassistant/token')
    expect(await page.locator('[data-testid=users]').count()).toBe(0)
    expect(await page.getByText(/Online/).count()).toBe(0)
    // The whole URL the server printed, pasted, is read for its token.
    await page.locator('[data-testid=token-input]').fill(`${srv.url}/?token=${srv.token}`)
    await page.locator('[data-testid=token-use]').click()
    await page.locator('[data-testid=conn][data-state=online]').waitFor()
    expect(await page.locator('[data-testid=token-needed]').count()).toBe(0)
    await page.context().close()
  })

  it('shows the two screens at 1280 and 390 px, light and dark', async () => {
    if (!SHOTS) return
    for (const [width, height, scheme] of [[1280, 800, 'light'], [1280, 800, 'dark'], [390, 844, 'light'], [390, 844, 'dark']] as const) {
      for (const [name, path, sel] of [
        ['token-needed', '/', '[data-testid=token-needed]'],
        ['token-refused', '/?token=not-the-token-0123456789', '[data-testid=token-needed][data-refused=true]'],
      ] as const) {
        const page = await open(path, { width, height }, scheme)
        await page.locator(sel).waitFor()
        await page.screenshot({ path: `${SHOTS}/inbox-${name}-${width}-${scheme}.png` })
        await page.context().close()
      }
    }
  })
})
