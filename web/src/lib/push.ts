// Web Push for this device: subscribe through the service worker and
// hand the subscription to the server (POST /push/subscriptions), with
// the device's name and the person's quick replies (the notification's
// buttons); turning it off unsubscribes and removes it there. The
// subscription's ID is kept on the device.
import { registerSW } from './sw'
import { idbCounts } from './badge'

const KEY = 'aa.push'

// Why push cannot be turned on here: not a secure context (https or
// localhost), no Push API in this browser, or notifications denied.
export type PushBlock = 'insecure' | 'unsupported' | 'denied'

export class PushError extends Error {
  constructor(readonly why: PushBlock | 'server', message?: string) {
    super(message ?? why)
  }
}

export function pushBlock(): PushBlock | null {
  if (!window.isSecureContext) return 'insecure'
  if (!('serviceWorker' in navigator) || !('PushManager' in window) || !('Notification' in window)) return 'unsupported'
  if (Notification.permission === 'denied') return 'denied'
  return null
}

// pushID is the server's ID of this device's subscription, '' when off.
export function pushID(): string {
  return localStorage.getItem(KEY) ?? ''
}

async function call(token: string, method: string, path: string, body?: unknown): Promise<Response> {
  const r = await fetch(path, {
    method,
    headers: { 'X-Agentassistant-Token': token, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    referrerPolicy: 'no-referrer',
    cache: 'no-store',
  })
  if (!r.ok && !(method === 'DELETE' && r.status === 404)) {
    let why = `${r.status}`
    try {
      why = ((await r.json()) as { error?: string }).error ?? why
    } catch {
      // not JSON: the status says it
    }
    throw new PushError('server', why)
  }
  return r
}

function b64url(s: string): Uint8Array<ArrayBuffer> {
  const b = atob(s.replace(/-/g, '+').replace(/_/g, '/'))
  const out = new Uint8Array(b.length)
  for (let i = 0; i < b.length; i++) out[i] = b.charCodeAt(i)
  return out
}

// turnOn asks for the permission (it must follow a click), subscribes
// and tells the server.
export async function turnOn(token: string, device: string, replies: string[]): Promise<void> {
  const block = pushBlock()
  if (block) throw new PushError(block)
  if (Notification.permission !== 'granted' && (await Notification.requestPermission()) !== 'granted') throw new PushError('denied')
  await registerSW()
  const reg = await navigator.serviceWorker.ready
  const { publicKey } = (await (await call(token, 'GET', '/push/key')).json()) as { publicKey: string }
  let sub = await reg.pushManager.getSubscription()
  const key = sub?.options.applicationServerKey
  if (sub && key && btoa(String.fromCharCode(...new Uint8Array(key))) !== btoa(String.fromCharCode(...b64url(publicKey)))) {
    await sub.unsubscribe() // another server's
    sub = null
  }
  if (!sub) {
    sub = await reg.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: b64url(publicKey) })
    await forgetCounts() // a new subscription: what the badge kept came under an old one
  }
  await send(token, sub, device, replies)
}

async function send(token: string, sub: PushSubscription, device: string, replies: string[]) {
  const j = sub.toJSON()
  const r = await call(token, 'POST', '/push/subscriptions', {
    endpoint: j.endpoint, keys: { p256dh: j.keys?.p256dh, auth: j.keys?.auth }, device: clipBytes(device, 64), replies,
  })
  localStorage.setItem(KEY, ((await r.json()) as { id: string }).id)
}

// resend tells the server the device's new name or quick replies.
export async function resend(token: string, device: string, replies: string[]): Promise<void> {
  if (!pushID() || pushBlock()) return
  const sub = await (await navigator.serviceWorker.ready).pushManager.getSubscription()
  if (sub) await send(token, sub, device, replies)
}

// turnOff unsubscribes and removes the subscription from the server.
export async function turnOff(token: string): Promise<void> {
  const id = pushID()
  if ('serviceWorker' in navigator && window.isSecureContext) {
    const reg = await navigator.serviceWorker.getRegistration('/')
    await (await reg?.pushManager.getSubscription())?.unsubscribe()
  }
  if (id) await call(token, 'DELETE', '/push/subscriptions/' + encodeURIComponent(id))
  localStorage.removeItem(KEY)
  // Unsubscribed, this browser gets no push under any token: their
  // counts go from the badge.
  await forgetCounts()
}

async function forgetCounts() {
  if (typeof indexedDB === 'undefined') return
  await idbCounts().clear().catch(() => undefined)
}

function clipBytes(s: string, n: number): string {
  const enc = new TextEncoder()
  s = s.trim()
  while (enc.encode(s).length > n) s = s.slice(0, -1)
  return s
}
