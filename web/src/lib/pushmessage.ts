// What a push carries (srv/push/message.go) and the notification it
// shows: shared by the service worker and the screenshot of one.
export interface PushMessage {
  v: number
  type: 'ask' | 'settled'
  id: string
  tag: string
  kind?: 'question' | 'report'
  title?: string
  body?: string
  actions?: string[]
  cap?: string
  answer?: string
  url: string
  outcome?: string
  // The questions waiting, this one counted if asked: the app's badge.
  waiting?: number
}

// The buttons are named a0, a1... after the answers they post; a
// browser shows at most max of them.
export function notificationOptions(m: PushMessage, max: number): NotificationOptions & { actions: { action: string; title: string }[] } {
  const actions = (m.actions ?? []).slice(0, Math.max(0, max)).map((title, i) => ({ action: 'a' + i, title }))
  return {
    body: m.body ?? '',
    tag: m.tag,
    icon: '/icons/icon-192.png',
    badge: '/icons/icon-192.png',
    data: { id: m.id, cap: m.cap, answer: m.answer, url: m.url, actions: m.actions ?? [] },
    actions,
    requireInteraction: m.kind === 'question',
  }
}
