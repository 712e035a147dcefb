// The token arrives once in ?token=; it is then kept for this tab and this
// device (so reloads and bookmarks without it work) and removed from the
// address bar so it is not shared, bookmarked or sent in a Referer.
const KEY = 'aa.token'

export function takeToken(loc: Location = location, hist: History = history): string | null {
  const url = new URL(loc.href)
  const fromURL = url.searchParams.get('token')
  if (fromURL) {
    sessionStorage.setItem(KEY, fromURL)
    localStorage.setItem(KEY, fromURL)
    url.searchParams.delete('token')
    hist.replaceState(hist.state, '', url.pathname + url.search + url.hash)
    return fromURL
  }
  return sessionStorage.getItem(KEY) ?? localStorage.getItem(KEY)
}

export function forgetToken() {
  sessionStorage.removeItem(KEY)
  localStorage.removeItem(KEY)
}

// A short, stable, non-reversible tag of the token, to key what is stored
// per token (history) without writing the token into more keys.
export function tokenTag(token: string): string {
  let h = 0x811c9dc5
  for (let i = 0; i < token.length; i++) {
    h ^= token.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  return (h >>> 0).toString(36)
}

export function wsURL(path: string, loc: Location = location): string {
  return (loc.protocol === 'https:' ? 'wss://' : 'ws://') + loc.host + path
}

// tokenProtocols presents the token in a WebSocket's upgrade, where a
// browser can set no header: the server checks it before the first frame,
// and connections that never log in, however many, cannot take this one's
// place while its login is on its way. The server answers with the plain
// 'agentassistant', never the token's. The login frame still carries the
// token: it is what decides the room.
export function tokenProtocols(token: string): string[] {
  let bin = ''
  for (const b of new TextEncoder().encode(token)) bin += String.fromCharCode(b)
  const b64 = btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
  return ['agentassistant', 'agentassistant.bearer.' + b64]
}

// pastedToken reads what a person pasted to open the inbox: the URL the
// server printed (its ?token= or #token=), or the token itself; '' when
// it holds none.
export function pastedToken(s: string): string {
  const v = s.trim()
  const m = /[?#&]token=([^&#\s]+)/.exec(v)
  if (m) {
    try {
      return decodeURIComponent(m[1]).trim()
    } catch {
      return m[1]
    }
  }
  return /\s/.test(v) || /^[a-z]+:\/\//i.test(v) ? '' : v
}

// keepToken keeps a token the person gave, as one from the address is.
export function keepToken(token: string) {
  sessionStorage.setItem(KEY, token)
  localStorage.setItem(KEY, token)
}
