import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { pushID, recheck, resend, turnOff, turnOn } from './push'

// A browser with one push subscription (one endpoint), which the server
// knows under each token by an ID of its own: POST /push/subscriptions
// answers the next of ids. subscribed: the browser is subscribed already.
function browser(ids: string[], subscribed = false, put: { status: number; changed?: boolean } = { status: 200 }) {
  const store = new Map<string, string>()
  vi.stubGlobal('localStorage', {
    getItem: (k: string) => store.get(k) ?? null,
    setItem: (k: string, v: string) => void store.set(k, String(v)),
    removeItem: (k: string) => void store.delete(k),
    key: (i: number) => [...store.keys()][i] ?? null,
    get length() {
      return store.size
    },
  })
  const keyOf = (k: number[]) => btoa(String.fromCharCode(...k)).replace(/=+$/, '')
  // server.publicKey is the server's; each subscription is made under
  // the key given, at an endpoint of its own.
  const server = { publicKey: keyOf([4, 1, 2, 3]) }
  const unsubscribed = vi.fn(async () => {
    subscribed = false
    return true
  })
  let endpoints = 0
  const made = (key: ArrayBuffer) => {
    const endpoint = `https://push.example/e${++endpoints}`
    return { options: { applicationServerKey: key }, unsubscribe: unsubscribed, toJSON: () => ({ endpoint, keys: { p256dh: 'p', auth: 'a' } }) }
  }
  let sub = made(new Uint8Array([4, 1, 2, 3]).buffer)
  const reg = {
    pushManager: {
      getSubscription: async () => (subscribed ? sub : null),
      subscribe: async (o: { applicationServerKey: Uint8Array }) => {
        if (subscribed) return sub
        subscribed = true
        sub = made(o.applicationServerKey.slice().buffer)
        return sub
      },
    },
  }
  vi.stubGlobal('window', { isSecureContext: true, PushManager: class {}, Notification: {} })
  vi.stubGlobal('Notification', { permission: 'granted' })
  vi.stubGlobal('navigator', {
    serviceWorker: { register: async () => reg, ready: Promise.resolve(reg), getRegistration: async () => reg },
  })
  const calls: string[] = []
  const bodies: unknown[] = []
  vi.stubGlobal('fetch', async (path: string, init: { method: string; headers: Record<string, string>; body?: string }) => {
    calls.push(`${init.method} ${path} ${init.headers['X-Agentassistant-Token']}`)
    if (init.body) bodies.push(JSON.parse(init.body))
    if (init.method === 'PUT') return { ok: put.status === 200, status: put.status, json: async () => ({ changed: put.changed }) }
    const body = path === '/push/key' ? { publicKey: server.publicKey } : init.method === 'POST' ? { id: ids.shift() } : {}
    return { ok: true, status: init.method === 'DELETE' ? 204 : 200, json: async () => body }
  })
  return { calls, unsubscribed, server, keyOf, bodies }
}

beforeEach(() => vi.stubGlobal('indexedDB', undefined))
afterEach(() => vi.unstubAllGlobals())

describe('push under several tokens in one browser', () => {
  it('keeps each token\'s subscription ID apart', async () => {
    const b = browser(['sub-a', 'sub-b'])
    await turnOn('tok-a', 'phone', [])
    await turnOn('tok-b', 'phone', [])
    // Each page counts its own token's questions and adds the others'
    // (lib/badge.ts), and knows its own answers by this ID.
    expect(pushID('tok-a')).toBe('sub-a')
    expect(pushID('tok-b')).toBe('sub-b')
    expect(pushID('tok-c')).toBe('')

    // A token with push off sends no subscription when its replies change.
    b.calls.length = 0
    await resend('tok-c', 'phone', ['Later'])
    expect(b.calls).toEqual([])

    // Off under one token: the browser keeps the subscription the other
    // still gets its pushes through.
    await turnOff('tok-b')
    expect(b.calls).toContain('DELETE /push/subscriptions/sub-b tok-b')
    expect(b.unsubscribed).not.toHaveBeenCalled()
    expect(pushID('tok-b')).toBe('')
    expect(pushID('tok-a')).toBe('sub-a')

    // Off under the last: the browser unsubscribes.
    await turnOff('tok-a')
    expect(b.calls).toContain('DELETE /push/subscriptions/sub-a tok-a')
    expect(b.unsubscribed).toHaveBeenCalledOnce()
  })

  it('reads the one ID an older version kept, for the token it was given under', async () => {
    browser(['sub-b', 'sub-old'], true)
    localStorage.setItem('aa.push', 'sub-old')
    expect(pushID('tok-a')).toBe('sub-old')
    // Another token's: the server names it otherwise.
    await turnOn('tok-b', 'phone', [])
    expect(pushID('tok-b')).toBe('sub-b')
    expect(pushID('tok-a')).toBe('sub-old')
    // Its own token's, named the same again: kept as that token's.
    await turnOn('tok-a', 'phone', [])
    expect(localStorage.getItem('aa.push')).toBeNull()
    expect(pushID('tok-a')).toBe('sub-old')
    expect(pushID('tok-c')).toBe('')
  })
})

describe('recheck, as the page opens', () => {
  it('the server has the subscription as it is: nothing to say', async () => {
    const { calls } = browser(['sub-a'])
    await turnOn('tok-a', 'phone', [])
    expect(await recheck('tok-a', 'phone', [])).toBe('same')
    expect(calls.at(-1)).toBe('PUT /push/subscriptions/sub-a tok-a')
  })

  it('the server had another endpoint under its ID: it has this one now, and the page says so', async () => {
    browser(['sub-a'], false, { status: 200, changed: true })
    await turnOn('tok-a', 'phone', [])
    expect(await recheck('tok-a', 'phone', [])).toBe('renewed')
    expect(pushID('tok-a')).toBe('sub-a')
  })

  it('the server dropped it: subscribed again, under the ID the server gives', async () => {
    const { calls } = browser(['sub-a', 'sub-a2'], false, { status: 404 })
    await turnOn('tok-a', 'phone', ['Later'])
    expect(await recheck('tok-a', 'phone', ['Later'])).toBe('renewed')
    expect(calls.slice(-2)).toEqual(['PUT /push/subscriptions/sub-a tok-a', 'POST /push/subscriptions tok-a'])
    expect(pushID('tok-a')).toBe('sub-a2')
  })

  it('notifications blocked since: push off here and on the server', async () => {
    const { calls } = browser(['sub-a'])
    await turnOn('tok-a', 'phone', [])
    vi.stubGlobal('Notification', { permission: 'denied' })
    expect(await recheck('tok-a', 'phone', [])).toBe('lost')
    expect(calls.at(-1)).toBe('DELETE /push/subscriptions/sub-a tok-a')
    expect(pushID('tok-a')).toBe('')
  })

  it('the server signs with new keys: subscribed again under them', async () => {
    const b = browser(['sub-a', 'sub-b'])
    await turnOn('tok-a', 'phone', [])
    await turnOn('tok-b', 'tablet', [])
    // The push service refuses what is signed with other keys than the
    // subscription was made under.
    b.server.publicKey = b.keyOf([4, 9, 9, 9])
    const old = (b.bodies.at(-1) as { endpoint: string }).endpoint
    b.calls.length = 0
    expect(await recheck('tok-a', 'phone', [])).toBe('renewed')
    expect(b.unsubscribed).toHaveBeenCalledOnce()
    expect(b.calls.at(-1)).toBe('PUT /push/subscriptions/sub-a tok-a')
    const now = (b.bodies.at(-1) as { endpoint: string }).endpoint
    expect(now).not.toBe(old)
    expect(pushID('tok-a')).toBe('sub-a')
    // The other token's page, opened, tells the server the new one too
    // (the service worker does for every token at once where the
    // browser has IndexedDB).
    await recheck('tok-b', 'tablet', [])
    expect(b.unsubscribed).toHaveBeenCalledOnce()
    expect(b.calls.at(-1)).toBe('PUT /push/subscriptions/sub-b tok-b')
    expect(b.bodies.at(-1)).toMatchObject({ endpoint: now })
  })

  it('push turned on under another token after new keys: the first token\'s stays on', async () => {
    const b = browser(['sub-a', 'sub-b'])
    await turnOn('tok-a', 'phone', [])
    b.server.publicKey = b.keyOf([4, 9, 9, 9])
    // The browser's one subscription, made under the old keys, is made
    // again for tok-b; tok-a still has its push on under its ID.
    await turnOn('tok-b', 'tablet', [])
    expect(b.unsubscribed).toHaveBeenCalledOnce()
    const now = (b.bodies.at(-1) as { endpoint: string }).endpoint
    expect(pushID('tok-a')).toBe('sub-a')
    b.calls.length = 0
    await recheck('tok-a', 'phone', [])
    expect(b.calls.at(-1)).toBe('PUT /push/subscriptions/sub-a tok-a')
    expect(b.bodies.at(-1)).toMatchObject({ endpoint: now })
  })

  it('push off under the token: nothing asked', async () => {
    const { calls } = browser([])
    expect(await recheck('tok-a', 'phone', [])).toBe('same')
    expect(calls).toEqual([])
  })
})
