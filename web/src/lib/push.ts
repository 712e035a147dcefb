// Web Push for this device: subscribe through the service worker and
// hand the subscription to the server (POST /push/subscriptions), with
// the device's name and the person's quick replies (the notification's
// buttons); turning it off removes it there, and unsubscribes the
// browser once no token's push is on. The browser has one subscription,
// which the server knows under each token by an ID of its own: the ID is
// kept per token on the device.
//
// The push service may change or expire that subscription
// (pushsubscriptionchange, with no page open): the service worker then
// tells the server the new one under each token's ID (PUT
// /push/subscriptions/{id}), which keeps the device's name and replies.
// For that it holds each token with its ID in this origin's IndexedDB
// (the page holds the token in localStorage already), and sends it only
// in the X-Agentassistant-Token header. An opened page checks it too
// (recheck): a subscription the server dropped is made again.
import { registerSW } from './sw'
import { idbCounts } from './badge'
import { pushKept } from './idb'
import { tokenTag } from './token'

// KEY + '.' + a token's tag keeps that token's subscription ID; KEY
// alone is the one ID an older version kept, whichever token's it was.
const KEY = 'aa.push'

function keyOf(token: string): string {
  return KEY + '.' + tokenTag(token)
}

// Why push cannot be turned on here: not a secure context (https or
// localhost), no Push API in this browser, or notifications denied.
export type PushBlock = 'insecure' | 'unsupported' | 'denied'

export class PushError extends Error {
  constructor(readonly why: PushBlock | 'server' | 'refused', message?: string) {
    super(message ?? why)
  }
}

export function pushBlock(): PushBlock | null {
  if (!window.isSecureContext) return 'insecure'
  if (!('serviceWorker' in navigator) || !('PushManager' in window) || !('Notification' in window)) return 'unsupported'
  if (Notification.permission === 'denied') return 'denied'
  return null
}

// pushID is the server's ID of this device's subscription under token,
// '' when its push is off. Another token's ID would have a page count
// that token's questions as its own (lib/badge.ts), and take its answers
// for this device's.
export function pushID(token: string): string {
  return localStorage.getItem(keyOf(token)) ?? localStorage.getItem(KEY) ?? ''
}

// keepID keeps id as token's subscription ID. The older version's one
// ID is token's when the server names it the same; else another
// token's, which still reads it.
function keepID(token: string, id: string) {
  localStorage.setItem(keyOf(token), id)
  if (localStorage.getItem(KEY) === id) localStorage.removeItem(KEY)
}

// pushOnElsewhere says whether a token other than token keeps an ID
// (the older version's one, when not token's): the browser's
// subscription is still theirs.
function pushOnElsewhere(token: string): boolean {
  const own = keyOf(token)
  const old = localStorage.getItem(KEY)
  if (old !== null && localStorage.getItem(own) !== null && old !== localStorage.getItem(own)) return true
  for (let i = 0; i < localStorage.length; i++) {
    const k = localStorage.key(i)
    if (k && k !== own && k.startsWith(KEY + '.')) return true
  }
  return false
}

// forgetIDs forgets every token's ID: the browser's subscription is new,
// those IDs name its old one.
async function forgetIDs() {
  const keys: string[] = []
  for (let i = 0; i < localStorage.length; i++) {
    const k = localStorage.key(i)
    if (k && (k === KEY || k.startsWith(KEY + '.'))) keys.push(k)
  }
  for (const k of keys) localStorage.removeItem(k)
  for (const h of await holders()) await pushKept()?.delete(HELD + h.id)
}

// held is what the service worker needs to tell the server of a new
// subscription: each token push is on under, by its subscription's ID.
const HELD = 'sub:'

async function holders(s = pushKept()): Promise<{ id: string; token: string }[]> {
  return ((await s?.entries()) ?? []).flatMap(([k, token]) => (k.startsWith(HELD) && typeof token === 'string' ? [{ id: k.slice(HELD.length), token }] : []))
}

// call asks the server with the token in its header; a status other
// than 2xx or accept's is thrown as the server's refusal.
async function call(token: string, method: string, path: string, body?: unknown, accept: number[] = []): Promise<Response> {
  const r = await fetch(path, {
    method,
    headers: { 'X-Agentassistant-Token': token, ...(body ? { 'Content-Type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
    referrerPolicy: 'no-referrer',
    cache: 'no-store',
  })
  if (!r.ok && !accept.includes(r.status)) {
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
  const publicKey = await serverKey(token)
  let sub = await reg.pushManager.getSubscription()
  const old = sub && !madeUnder(sub, publicKey) ? sub : null
  if (old) {
    await old.unsubscribe() // another server's, or this one's old keys'
    sub = null
  }
  if (!sub) {
    try {
      sub = await subscribe(reg.pushManager, token, publicKey)
    } catch (e) {
      // Notifications are allowed, yet the browser gives no subscription
      // (its words: "Registration failed - permission denied"): a private
      // window, or a browser without a push service.
      if (e instanceof DOMException && (e.name === 'NotAllowedError' || e.name === 'AbortError')) throw new PushError('refused', e.message)
      throw e
    }
    if (old) {
      // Made again under the server's keys: the other tokens' push stays
      // on, told to the server under their IDs (here, or as recheck does
      // when their page opens).
      await resubscribe(reg.pushManager, old, sub)
    } else {
      // A new subscription: the IDs and the badge's counts kept came
      // under an old one.
      await forgetIDs()
      await forgetCounts()
    }
  }
  await send(token, sub, device, replies)
}

async function send(token: string, sub: PushSubscription, device: string, replies: string[]) {
  const j = sub.toJSON()
  const r = await call(token, 'POST', '/push/subscriptions', {
    endpoint: j.endpoint, keys: { p256dh: j.keys?.p256dh, auth: j.keys?.auth }, device: clipBytes(device, 64), replies,
  })
  const id = ((await r.json()) as { id: string }).id
  keepID(token, id)
  await pushKept()?.put(HELD + id, token)
}

type Renewed = 'same' | 'changed' | 'gone'

// renew tells the server that sub is token's subscription id now: gone
// when it has none of that ID (a push service called it gone), or takes
// the token no more.
async function renew(token: string, id: string, sub: PushSubscription): Promise<Renewed> {
  const j = sub.toJSON()
  const r = await call(token, 'PUT', '/push/subscriptions/' + encodeURIComponent(id),
    { endpoint: j.endpoint, keys: { p256dh: j.keys?.p256dh, auth: j.keys?.auth } }, [401, 404])
  if (!r.ok) return 'gone'
  return ((await r.json()) as { changed?: boolean }).changed ? 'changed' : 'same'
}

// serverKey is the server's public key (base64url) pushes are signed
// with.
async function serverKey(token: string): Promise<Uint8Array<ArrayBuffer>> {
  return b64url(((await (await call(token, 'GET', '/push/key')).json()) as { publicKey: string }).publicKey)
}

// madeUnder says whether sub was made under key: the push service
// refuses pushes signed with another.
function madeUnder(sub: PushSubscription, key: Uint8Array): boolean {
  const k = sub.options.applicationServerKey
  return !k || String.fromCharCode(...new Uint8Array(k)) === String.fromCharCode(...key)
}

async function subscribe(pm: PushManager, token: string, key?: BufferSource | null): Promise<PushSubscription> {
  key ??= await serverKey(token)
  return pm.subscribe({ userVisibleOnly: true, applicationServerKey: key })
}

// resubscribe is the service worker's pushsubscriptionchange: the push
// service changed or expired the browser's subscription. The new one
// (made with the old one's key when the browser gave none) is told to
// the server under each token's ID; a token the server has it no more
// under is forgotten here, and its page subscribes again when opened
// (recheck).
export async function resubscribe(pm: PushManager, old: PushSubscription | null, next: PushSubscription | null): Promise<void> {
  const hs = await holders()
  if (hs.length === 0) return
  next ??= await pm.getSubscription() ?? await subscribe(pm, hs[0]!.token, old?.options.applicationServerKey)
  for (const h of hs) {
    try {
      if ((await renew(h.token, h.id, next)) === 'gone') await pushKept()?.delete(HELD + h.id)
    } catch (e) {
      console.warn('push: the new subscription not told to the server:', e instanceof Error ? e.message : e)
    }
  }
}

// recheck, on opening the page, makes sure the server pushes to this
// browser's subscription under token's ID: renewed when the server had
// another (the push service changed it with no page open, and no event
// told) or none (dropped after a push service called it gone), which it
// has now; lost when this browser may no longer show notifications (the
// person blocked them), push then off here; else same.
export async function recheck(token: string, device: string, replies: string[]): Promise<'same' | 'renewed' | 'lost'> {
  const id = pushID(token)
  const block = pushBlock()
  if (!id || block === 'insecure' || block === 'unsupported') return 'same'
  if (Notification.permission !== 'granted') {
    await turnOff(token)
    return 'lost'
  }
  await pushKept()?.put(HELD + id, token)
  const pm = (await navigator.serviceWorker.ready).pushManager
  const key = await serverKey(token)
  let sub = await pm.getSubscription()
  let made = false
  if (sub && !madeUnder(sub, key)) {
    // The server signs with new keys (its data directory's were lost):
    // a subscription under them, told to the server under each token's
    // ID.
    const old = sub
    await old.unsubscribe()
    sub = await subscribe(pm, token, key)
    await resubscribe(pm, old, sub)
    made = true
  }
  sub ??= await subscribe(pm, token, key)
  const r = await renew(token, id, sub)
  if (r === 'gone') {
    await pushKept()?.delete(HELD + id)
    await send(token, sub, device, replies)
  }
  return r === 'same' && !made ? 'same' : 'renewed'
}

// resend tells the server the device's new name or quick replies.
export async function resend(token: string, device: string, replies: string[]): Promise<void> {
  if (!pushID(token) || pushBlock()) return
  const sub = await (await navigator.serviceWorker.ready).pushManager.getSubscription()
  if (sub) await send(token, sub, device, replies)
}

// turnOff removes token's subscription from the server, and
// unsubscribes the browser unless another token's push is on.
export async function turnOff(token: string): Promise<void> {
  const id = pushID(token)
  const last = !pushOnElsewhere(token)
  if (last && 'serviceWorker' in navigator && window.isSecureContext) {
    const reg = await navigator.serviceWorker.getRegistration('/')
    await (await reg?.pushManager.getSubscription())?.unsubscribe()
  }
  if (id) await call(token, 'DELETE', '/push/subscriptions/' + encodeURIComponent(id), undefined, [404])
  localStorage.removeItem(keyOf(token))
  if (localStorage.getItem(KEY) === id) localStorage.removeItem(KEY)
  if (id) await pushKept()?.delete(HELD + id)
  // Its count goes from the badge; unsubscribed, this browser gets no
  // push under any token: all of them go.
  if (last) await forgetCounts()
  else if (id) await forgetCounts(id)
}

// forgetCounts drops sub's count from the badge, every count without.
async function forgetCounts(sub?: string) {
  if (typeof indexedDB === 'undefined') return
  const c = idbCounts()
  await (sub === undefined ? c.clear() : c.delete(sub)).catch(() => undefined)
}

function clipBytes(s: string, n: number): string {
  const enc = new TextEncoder()
  s = s.trim()
  while (enc.encode(s).length > n) s = s.slice(0, -1)
  return s
}
