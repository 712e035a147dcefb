// The booking page as a participant sees it: on a phone, with an agent
// that writes markdown.
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { launch, startMCP, startServer, text, type Server, type ToolResult } from './harness'

let srv: Server
let mcp: Client
let browser: Browser
let page: Page

beforeAll(async () => {
  srv = await startServer()
  browser = await launch()
  const ctx = await browser.newContext({ viewport: { width: 390, height: 844 }, locale: 'en-US', isMobile: true, hasTouch: true })
  page = await ctx.newPage()
  await page.goto(`${srv.url}/booking?token=${srv.token}`)
  await page.locator('[data-testid=host-conn][data-state=online]').waitFor()
  mcp = await startMCP(srv)
  const r = (await mcp.callTool({ name: 'start_session', arguments: { study_id: 'phone', participant_id: 'P01' } })) as ToolResult
  expect(r.isError, text(r)).toBeFalsy()
})

afterAll(async () => {
  await browser?.close()
  await mcp?.close()
  await srv?.stop()
})

async function ui(tool_name: string, params: Record<string, unknown>, reason: string) {
  const r = (await mcp.callTool({ name: 'call_ui_tool', arguments: { tool_name, params, reason } }, undefined, { timeout: 60_000 })) as ToolResult
  expect(r.isError, `${tool_name}: ${text(r)}`).toBeFalsy()
}

// overflow lists what sticks out of the screen's width.
function overflow(p: Page) {
  return p.evaluate(() => {
    const w = document.documentElement.clientWidth
    const out: string[] = []
    if (document.documentElement.scrollWidth > w) out.push(`page ${document.documentElement.scrollWidth}px wide`)
    for (const e of document.querySelectorAll('[data-item]')) {
      const r = e.getBoundingClientRect()
      if (r.left < 0 || r.right > w) out.push(`${e.getAttribute('data-item')} at ${Math.round(r.left)}..${Math.round(r.right)}`)
    }
    const title = document.querySelector('.q-toolbar__title') as HTMLElement
    if (title.scrollWidth > title.clientWidth) out.push(`title cut: ${title.textContent}`)
    return out
  })
}

describe('booking page on a phone', () => {
  it('names what the agent chose and renders its markdown', async () => {
    await ui('select', { itemId: 'm1' }, 'The participant wants **Dune**.')
    const banner = page.locator('[data-testid=agent-action]')
    await banner.waitFor()
    const said = (await banner.textContent()) ?? ''
    expect(said).toContain('Dune: Part Two')
    expect(said).not.toContain('m1')
    expect(said).toContain('The participant wants Dune.')
    expect(said).not.toContain('**')

    await ui('postMessage', { text: 'I picked **Dune** for you:\n\n- 166 min\n- PG-13' }, 'Tell them.')
    const msg = page.locator('[data-testid=chat-log]', { hasText: 'I picked' })
    await msg.waitFor()
    expect(await msg.locator('strong').textContent()).toBe('Dune')
    expect(await msg.locator('li').count()).toBe(2)
    expect(await msg.textContent()).not.toContain('**')
    expect(await overflow(page)).toEqual([])
  })

  it('the seat map fits a 390 px screen', async () => {
    await ui('next', {}, 'Movie chosen.')
    await ui('select', { itemId: 'd2' }, 'Saturday.')
    await ui('next', {}, 'Date chosen.')
    await ui('select', { itemId: 't4' }, 'Evening.')
    await ui('next', {}, 'Showtime chosen.')
    await ui('setQuantity', { quantity: 2 }, 'Two people.')
    await ui('next', {}, 'Tickets set.')
    await page.locator('[data-testid=stage][data-stage=seats]').waitFor()
    await ui('select', { itemId: 'B5' }, 'Centre, row B.')
    await page.locator('[data-item=B5].aa-highlight').waitFor()
    expect(await overflow(page)).toEqual([])
    // Every seat is a button a finger can hit.
    const smallest = await page.locator('[data-item]').evaluateAll((els) => Math.min(...els.map((e) => e.getBoundingClientRect().width)))
    expect(smallest).toBeGreaterThanOrEqual(24)
    // The participant picks the seat next to it by touch.
    await page.locator('[data-item=B6]').tap()
    await expect.poll(() => page.locator('[data-item=B6]').getAttribute('aria-pressed')).toBe('true')
  })
})
