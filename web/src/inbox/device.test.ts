import { describe, expect, it } from 'vitest'
import { autoName } from './device'

const CHROME_ANDROID = 'Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36'
const brands = (...names: string[]) => names.map((brand) => ({ brand, version: '131' }))

describe('a device named from its platform and browser', () => {
  it('names the model when the browser tells it, the platform otherwise', () => {
    expect(autoName({ ua: CHROME_ANDROID, platform: 'Android', model: 'Pixel 8', mobile: true, brands: brands('Not_A Brand', 'Chromium', 'Google Chrome') })).toBe('Pixel 8 · Chrome')
    expect(autoName({ ua: CHROME_ANDROID, platform: 'Android', mobile: true, brands: brands('Chromium', 'Google Chrome') })).toBe('Android phone · Chrome')
    expect(autoName({ ua: 'Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36' }))
      .toBe('SM-S918B · Samsung Internet')
    expect(autoName({ ua: 'Mozilla/5.0 (Linux; Android 14; Pixel Tablet) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36' }))
      .toBe('Pixel Tablet · Chrome')
  })

  it('reads the user agent string where there is no userAgentData (Safari, Firefox)', () => {
    const cases: [string, string, number?][] = [
      ['Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15', 'Mac · Safari'],
      ['Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15', 'iPad · Safari', 5],
      ['Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1', 'iPhone · Safari'],
      ['Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0 Mobile/15E148 Safari/604.1', 'iPhone · Chrome'],
      ['Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0', 'Windows · Edge'],
      ['Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0', 'Windows · Firefox'],
      ['Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0', 'Linux · Firefox'],
      ['Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0', 'Android phone · Firefox'],
      ['Mozilla/5.0 (X11; CrOS x86_64 14541.0.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36', 'Chromebook · Chrome'],
      ['Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/115.0.0.0', 'Windows · Opera'],
    ]
    for (const [ua, name, touch] of cases) expect(autoName({ ua, touch }), ua).toBe(name)
  })

  it('takes the browser from its brands, which tell apart what the string does not', () => {
    const ua = 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36'
    expect(autoName({ ua, platform: 'Linux', brands: brands('Chromium', 'Not A(Brand') })).toBe('Linux · Chromium')
    expect(autoName({ ua, platform: 'Linux', brands: brands('Brave', 'Chromium') })).toBe('Linux · Brave')
    expect(autoName({ ua, platform: 'macOS', brands: brands('Microsoft Edge', 'Chromium') })).toBe('Mac · Edge')
  })
})
