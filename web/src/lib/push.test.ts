import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { pushID, resend, turnOff, turnOn } from './push'

// A browser with one push subscription (one endpoint), which the server
// knows under each token by an ID of its own: POST /push/subscriptions
// answers the next of ids. subscribed: the browser is subscribed already.
function browser(ids: string[], subscribed = false) {
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
  const key = new Uint8Array([4, 1, 2, 3])
  const publicKey = btoa(String.fromCharCode(...key)).replace(/=+$/, '')
  const unsubscribed = vi.fn(async () => {
    subscribed = false
    return true
  })
  const sub = {
    options: { applicationServerKey: key.buffer },
    unsubscribe: unsubscribed,
    toJSON: () => ({ endpoint: 'https://push.example/e1', keys: { p256dh: 'p', auth: 'a' } }),
  }
  const reg = {
    pushManager: {
      getSubscription: async () => (subscribed ? sub : null),
      subscribe: async () => {
        subscribed = true
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
  vi.stubGlobal('fetch', async (path: string, init: { method: string; headers: Record<string, string> }) => {
    calls.push(`${init.method} ${path} ${init.headers['X-Agentassistant-Token']}`)
    const body = path === '/push/key' ? { publicKey } : init.method === 'POST' ? { id: ids.shift() } : {}
    return { ok: true, status: init.method === 'DELETE' ? 204 : 200, json: async () => body }
  })
  return { calls, unsubscribed }
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
