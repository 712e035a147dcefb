import { ref } from 'vue'

// Until the person names it, a device is called by what it is: its model
// when the browser tells it, else its platform, and its browser ("Pixel 8
// · Chrome", "Mac · Safari", "Windows · Edge"). Two alike are told apart by
// the people bar (devices.ts). The name is kept across reloads, so the
// model, which the browser tells only when asked (a promise), is there
// from the start on the next load.
const DEVICE = 'aa.device'
const NICKNAME = 'aa.nickname'
// The automatic names of earlier versions ("PC-sd8y"): not chosen by anyone.
const OLD_AUTO = /^(PC|Phone|Tablet)-[a-z0-9]{4}$/

// What the browser says of itself: navigator.userAgentData where there is
// one (Chromium), the user agent string everywhere.
export interface AgentInfo {
  ua: string
  platform?: string
  model?: string
  mobile?: boolean
  brands?: { brand: string; version: string }[]
  touch?: number // navigator.maxTouchPoints: an iPad says it is a Mac
}

function platformName(i: AgentInfo): string {
  const ua = i.ua
  if (i.model?.trim()) return i.model.trim()
  if (/iPhone|iPod/.test(ua)) return 'iPhone'
  if (/iPad/.test(ua) || (/Macintosh/.test(ua) && (i.touch ?? 0) > 1)) return 'iPad'
  if (/Android/.test(ua) || i.platform === 'Android') {
    // Browsers now say "K" for the model in the string; older ones name it.
    const m = /Android [\d.]+; ([^;)]+?)(?: Build\/[^;)]*)?\)/.exec(ua)?.[1]?.trim()
    if (m && m !== 'K' && !/^(Mobile|Tablet|wv)$/.test(m)) return m
    return i.mobile || /Mobile/.test(ua) ? 'Android phone' : 'Android tablet'
  }
  if (/CrOS/.test(ua) || i.platform === 'Chrome OS') return 'Chromebook'
  if (/Macintosh|Mac OS X/.test(ua) || i.platform === 'macOS') return 'Mac'
  if (/Windows/.test(ua) || i.platform === 'Windows') return 'Windows'
  if (/Linux|X11/.test(ua) || i.platform === 'Linux') return 'Linux'
  return i.platform?.trim() || 'Device'
}

// Brands first: they tell apart browsers whose strings are Chrome's.
const BRANDS: [string, string][] = [
  ['Microsoft Edge', 'Edge'], ['Opera', 'Opera'], ['Brave', 'Brave'], ['Vivaldi', 'Vivaldi'], ['Samsung Internet', 'Samsung Internet'],
  ['YaBrowser', 'Yandex'], ['Google Chrome', 'Chrome'], ['HeadlessChrome', 'Chrome'], ['Chromium', 'Chromium'],
]
const STRINGS: [RegExp, string][] = [
  [/Edg(e|A|iOS)?\//, 'Edge'], [/OPR\/|Opera/, 'Opera'], [/SamsungBrowser\//, 'Samsung Internet'], [/Firefox\/|FxiOS\//, 'Firefox'],
  [/CriOS\/|Chrome\//, 'Chrome'], [/Version\/[\d.]+.*Safari\//, 'Safari'],
]

function browserName(i: AgentInfo): string {
  const have = new Set((i.brands ?? []).map((b) => b.brand))
  for (const [brand, name] of BRANDS) if (have.has(brand)) return name
  for (const [re, name] of STRINGS) if (re.test(i.ua)) return name
  return 'Browser'
}

// autoName is a device's name until the person gives it one.
export function autoName(i: AgentInfo): string {
  return `${platformName(i)} · ${browserName(i)}`
}

type UAData = {
  platform?: string; mobile?: boolean; brands?: { brand: string; version: string }[]
  getHighEntropyValues?: (hints: string[]) => Promise<{ model?: string; platform?: string }>
}

function uaData(): UAData | undefined {
  return (navigator as Navigator & { userAgentData?: UAData }).userAgentData
}

function knownNow(): AgentInfo {
  const d = uaData()
  return { ua: navigator.userAgent, platform: d?.platform, mobile: d?.mobile, brands: d?.brands, touch: navigator.maxTouchPoints }
}

// knownLater adds the model, which the browser gives only when asked.
async function knownLater(): Promise<AgentInfo | undefined> {
  const d = uaData()
  if (!d?.getHighEntropyValues) return undefined
  try {
    const h = await d.getHighEntropyValues(['model', 'platform'])
    return { ...knownNow(), model: h.model, platform: h.platform || d.platform }
  } catch {
    return undefined
  }
}

function isChosen(n: string | null): n is string {
  return !!n && !OLD_AUTO.test(n)
}

// useDevice is the name this device goes by: the one the person chose, or
// the automatic one. renamed is called when the name in use changes, so
// the connection can tell the others.
export function useDevice(renamed: () => void) {
  const saved = localStorage.getItem(DEVICE)
  const auto = ref(saved && !OLD_AUTO.test(saved) ? saved : autoName(knownNow()))
  localStorage.setItem(DEVICE, auto.value)
  const named = ref(isChosen(localStorage.getItem(NICKNAME)))
  const nickname = ref(named.value ? localStorage.getItem(NICKNAME)! : auto.value)

  void knownLater().then((i) => {
    const n = autoName(i ?? knownNow())
    if (n === auto.value) return
    auto.value = n
    localStorage.setItem(DEVICE, n)
    if (!named.value) {
      nickname.value = n
      renamed()
    }
  })

  // save keeps what is in nickname (an empty name goes back to the
  // automatic one).
  function save() {
    const n = nickname.value.trim().slice(0, 64)
    const was = named.value ? localStorage.getItem(NICKNAME) : auto.value
    nickname.value = n || auto.value
    named.value = nickname.value !== auto.value
    if (named.value) localStorage.setItem(NICKNAME, nickname.value)
    else localStorage.removeItem(NICKNAME)
    if (nickname.value !== was) renamed()
  }

  return { auto, named, nickname, save }
}
