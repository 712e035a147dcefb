// Every page of the web UI under the Content-Security-Policy the server
// sends (srv/webui): no script, style or request of a page is refused.
// A refusal is a feature broken, or at best a library that probed for
// eval and fell back, which the policy reports all the same (the AG-UI
// demo's schema library did, on every run).
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, startMCP, startServer, type Server } from './harness'

let srv: Server
let mcp: Client
let browser: Browser

beforeAll(async () => {
  srv = await startServer()
  mcp = await startMCP(srv, { session: 'csp' })
  browser = await launch()
})

afterAll(async () => {
  await browser?.close()
  await mcp?.close()
  await srv?.stop()
})

const tool = (name: string, args: Record<string, unknown> = {}) => mcp.callTool({ name, arguments: args }, undefined, { timeout: 60_000 })

describe('the pages under their Content-Security-Policy', () => {
  for (const path of ['/', '/booking', '/agui-demo?thread=csp']) {
    it(`${path} runs with nothing refused`, async () => {
      const page = await browser.newPage({ viewport: { width: 1280, height: 800 }, locale: 'en-US' })
      const refused: string[] = []
      await page.exposeFunction('aaRefused', (v: string) => refused.push(v))
      await page.addInitScript(() =>
        document.addEventListener('securitypolicyviolation', (e) =>
          (window as unknown as { aaRefused: (v: string) => void }).aaRefused(`${e.violatedDirective} ${e.blockedURI} ${e.sourceFile}:${e.lineNumber}`)))
      page.on('console', (m) => {
        if (/Content Security Policy/i.test(m.text())) refused.push(m.text())
      })
      const sep = path.includes('?') ? '&' : '?'
      await page.goto(`${srv.url}${path}${sep}token=${srv.token}`)
      await page.waitForLoadState('networkidle')
      if (path.startsWith('/agui-demo')) {
        // A run to its end: the events the page reads are checked by
        // its schemas.
        const heard = tool('wait_user_message', { timeout: 30 })
        await page.locator('input[data-testid=agui-input]').fill('hello')
        await page.locator('input[data-testid=agui-input]').press('Enter')
        await heard
        await tool('start_session', { study_id: 'csp' })
        await tool('send_agent_message', { text: 'Hello back.' })
        await tool('wait_user_message', { timeout: 1 }) // yields the turn: the run ends
        await page.locator('[data-testid=agui-message][data-role=assistant]', { hasText: 'Hello back' }).waitFor()
        await page.locator('[data-testid=agui-waiting]').waitFor({ state: 'detached' })
      }
      await page.close()
      expect(refused).toEqual([])
    })
  }
})
