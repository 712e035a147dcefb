import { describe, expect, it, vi } from 'vitest'
import { homeScreenNeeded, install, installable, watchInstall } from './install'

function offer(outcome: 'accepted' | 'dismissed') {
  const e = new Event('beforeinstallprompt') as Event & { prompt: () => Promise<void>; userChoice: Promise<{ outcome: string }> }
  e.prompt = vi.fn(async () => undefined)
  e.userChoice = Promise.resolve({ outcome })
  return e
}

describe('install', () => {
  it('keeps the browser\'s offer until the button shows its dialog, once', async () => {
    const w = new EventTarget() as unknown as Window
    watchInstall(w)
    expect(installable.value).toBe(false)
    expect(await install()).toBe(false) // no offer: nothing to show
    const e = offer('accepted')
    w.dispatchEvent(e)
    expect(installable.value).toBe(true)
    expect(e.defaultPrevented).toBe(false) // the browser's own banner stays
    expect(await install()).toBe(true)
    expect(e.prompt).toHaveBeenCalledTimes(1)
    expect(installable.value).toBe(false)
    expect(await install()).toBe(false) // spent
    expect(e.prompt).toHaveBeenCalledTimes(1)
  })

  it('forgets the offer once the app is installed from the browser\'s own menu', () => {
    const w = new EventTarget() as unknown as Window
    watchInstall(w)
    w.dispatchEvent(offer('dismissed'))
    expect(installable.value).toBe(true)
    w.dispatchEvent(new Event('appinstalled'))
    expect(installable.value).toBe(false)
  })

  it('tells an iPhone or iPad outside the Home Screen app, and nothing else', () => {
    const nav = (userAgent: string, maxTouchPoints = 0, standalone?: boolean) => ({ userAgent, maxTouchPoints, standalone }) as unknown as Navigator
    const iphone = 'Mozilla/5.0 (iPhone; CPU iPhone OS 18_0 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Mobile/15E148 Safari/604.1'
    const ipad = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Safari/605.1.15'
    expect(homeScreenNeeded(nav(iphone), false)).toBe(true)
    expect(homeScreenNeeded(nav(ipad, 5), false)).toBe(true)
    expect(homeScreenNeeded(nav(ipad, 0), false)).toBe(false) // a Mac
    expect(homeScreenNeeded(nav(iphone, 5, true), false)).toBe(false) // opened from the Home Screen
    expect(homeScreenNeeded(nav(iphone), true)).toBe(false)
    expect(homeScreenNeeded(nav('Mozilla/5.0 (Linux; Android 14; Pixel 8) Chrome/131.0 Mobile Safari/537.36'), false)).toBe(false)
  })
})
