// Draws the app's PNG icons from public/favicon.svg with Chromium
// (playwright-core, already a dev dependency): 192 and 512 px "any", and
// a 512 px maskable one whose drawing keeps inside the 80 % safe zone,
// the 180 px apple-touch-icon drawn the same way (an iPhone's Home
// Screen shows a transparent icon's clear parts black, and rounds the
// corners itself),
// and a notification's 96 px badge: the bubble alone, white on nothing,
// its dots cut out (a status bar draws a badge from its alpha only).
// Run: node scripts/icons.mjs (CHROMIUM names the browser).
import { readFileSync } from 'node:fs'
import { chromium } from 'playwright-core'

const svg = readFileSync(new URL('../public/favicon.svg', import.meta.url), 'utf8')
const src = 'data:image/svg+xml;base64,' + Buffer.from(svg).toString('base64')
const out = (name) => new URL('../public/icons/' + name, import.meta.url).pathname

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: ['--no-sandbox'] })
const page = await browser.newPage()
async function draw(size, name, maskable) {
  await page.setViewportSize({ width: size, height: size })
  const pad = maskable ? size * 0.14 : 0
  await page.setContent(`<body style="margin:0;background:${maskable ? '#1976d2' : 'transparent'}">
    <img src="${src}" style="display:block;width:${size - 2 * pad}px;height:${size - 2 * pad}px;margin:${pad}px"></body>`)
  await page.locator('img').evaluate((img) => img.decode())
  await page.screenshot({ path: out(name), omitBackground: !maskable })
}
async function badge(size, name) {
  const bubble = /<path d="([^"]+)"/.exec(svg)[1]
  const dots = [...svg.matchAll(/<circle cx="([\d.]+)" cy="([\d.]+)" r="([\d.]+)"/g)]
    .map(([, x, y, r]) => `M${x - r} ${y}a${r} ${r} 0 1 0 ${2 * r} 0a${r} ${r} 0 1 0 ${-2 * r} 0z`).join('')
  const cut = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="12 16.5 40 40"><path fill="#fff" fill-rule="evenodd" d="${bubble}${dots}"/></svg>`
  await page.setViewportSize({ width: size, height: size })
  await page.setContent(`<body style="margin:0;background:transparent">
    <img src="data:image/svg+xml;base64,${Buffer.from(cut).toString('base64')}" style="display:block;width:${size}px;height:${size}px"></body>`)
  await page.locator('img').evaluate((img) => img.decode())
  await page.screenshot({ path: out(name), omitBackground: true })
}
await draw(192, 'icon-192.png', false)
await draw(512, 'icon-512.png', false)
await draw(512, 'maskable-512.png', true)
await draw(180, 'apple-touch-icon.png', true)
await badge(96, 'badge-96.png')
await browser.close()
