/// <reference lib="webworker" />
// The service worker: the app's shell precached (Workbox), so the
// installed app opens without the network and says it is offline; and
// Web Push: a question's notification with the person's quick replies as
// buttons, answered with the push's single-use capability (never the
// token); and a subscription the push service changed told to the
// server, with the tokens the pages keep for it (lib/push.ts), in the
// header only.
import { createHandlerBoundToURL, precacheAndRoute, cleanupOutdatedCaches } from 'workbox-precaching'
import { NavigationRoute, registerRoute } from 'workbox-routing'
import { clientsClaim } from 'workbox-core'
import { keptLang, notificationOptions, titleOf, type PushMessage } from './lib/pushmessage'
import { resubscribe } from './lib/push'
import { answered, idbCounts, record, validCount } from './lib/badge'

declare const self: ServiceWorkerGlobalScope

precacheAndRoute(self.__WB_MANIFEST)
cleanupOutdatedCaches()
// The app's pages are one index.html; other paths (/health, /push/...)
// are the server's and are never answered from the cache.
registerRoute(new NavigationRoute(createHandlerBoundToURL('/index.html'), {
  allowlist: [/^\/(index\.html)?(\?.*)?$/, /^\/(booking|agui-demo)\/?(\?.*)?$/],
}))

self.addEventListener('install', () => void self.skipWaiting())
clientsClaim()

self.addEventListener('push', (e) => {
  let m: PushMessage | undefined
  try {
    m = e.data?.json() as PushMessage
  } catch {
    return
  }
  if (m?.v === 1) e.waitUntil(onPush(m))
})

async function onPush(m: PushMessage) {
  if (m.type === 'settled') {
    for (const n of await self.registration.getNotifications({ tag: m.tag })) n.close()
  } else {
    const max = (Notification as unknown as { maxActions?: number }).maxActions ?? 2
    const lang = await keptLang(self.navigator.language)
    await self.registration.showNotification(titleOf(m, lang), notificationOptions(m, max, lang))
  }
  // In the same push's waitUntil: Safari lets a worker badge the app
  // only there.
  if (validCount(m.waiting)) await setBadge(() => record(counts, m.sub, m.waiting!))
}

const counts = idbCounts()

// badging runs one badge change at a time: two pushes handled at once
// would each add up the counts, and the one to finish last, not the one
// to read last, would set the badge.
let badging: Promise<unknown> = Promise.resolve()

// setBadge shows on the app's icon how many questions wait under every
// token this browser is subscribed under (total: lib/badge.ts): with no
// page open, nothing else would change it. An open page counts its
// unread chat too: it is told to set its own count again.
function setBadge(total: () => Promise<number | undefined>): Promise<void> {
  const next = badging.then(async () => {
    let n: number | undefined
    try {
      n = await total()
    } catch {
      return // no IndexedDB here: the notifications say it
    }
    if (n === undefined) return
    const nav = self.navigator as WorkerNavigator & { setAppBadge?: (n: number) => Promise<void>; clearAppBadge?: () => Promise<void> }
    try {
      await (n > 0 ? nav.setAppBadge?.(n) : nav.clearAppBadge?.())
    } catch {
      // no badges on this platform, or not allowed: the notifications say it
    }
    for (const c of await self.clients.matchAll({ type: 'window' })) c.postMessage({ type: 'badge' })
  })
  badging = next
  return next
}

// The push service changed or expired this browser's subscription
// (Firefox, and the Push API's pushsubscriptionchange): the server is
// told the new one, else its pushes go on to the dead endpoint.
self.addEventListener('pushsubscriptionchange', (e) => {
  e.waitUntil(resubscribe(self.registration.pushManager, e.oldSubscription, e.newSubscription)
    .catch((err: unknown) => console.warn('push: not subscribed again:', err instanceof Error ? err.message : err)))
})

self.addEventListener('notificationclick', (e) => {
  e.notification.close()
  e.waitUntil(onClick(e.notification.data ?? {}, e.action))
})

interface NoteData { url?: string; cap?: string; answer?: string; actions?: string[]; sub?: string }

async function onClick(d: NoteData, action: string) {
  // A question of several choices: its card, where they are made.
  if (action === 'open') return openApp(d.url)
  const i = /^a(\d+)$/.exec(action)?.[1]
  const text = i === undefined ? undefined : d.actions?.[Number(i)]
  if (text && d.cap && d.answer) {
    const to = new URL(d.answer, self.location.origin)
    if (to.origin === self.location.origin) {
      try {
        const r = await fetch(to, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ cap: d.cap, text }) })
        if (r.ok) {
          // The server sends this device no settled push for its own
          // answer (it would close nothing): the badge counts one less now.
          await setBadge(() => answered(counts, d.sub))
          return
        }
      } catch {
        // the network: the app shows the question instead
      }
    }
  }
  await openApp(d.url)
}

// openApp focuses an open page of the app on the question, or opens one.
async function openApp(url = '/') {
  const to = new URL(url, self.location.origin)
  if (to.origin !== self.location.origin) return
  const open = await self.clients.matchAll({ type: 'window', includeUncontrolled: true })
  const page = open.find((c) => new URL(c.url).origin === self.location.origin)
  if (page) {
    page.postMessage({ type: 'open', url: to.pathname + to.search })
    // Allowed only while handling the person's tap.
    await page.focus().catch(() => undefined)
    return
  }
  await self.clients.openWindow(to.pathname + to.search)
}
