// What a push carries (srv/push/message.go) and the notification it
// shows: shared by the service worker and the screenshot of one.
import { pushKept } from './idb'

export interface PushMessage {
  v: number
  type: 'ask' | 'settled'
  id: string
  tag: string
  kind?: 'question' | 'report'
  title?: string
  // The title's parts: who asks (none when the agent gave no name) and
  // the project, for the title in the language chosen in the app.
  asker?: string
  project?: string
  body?: string
  actions?: string[]
  cap?: string
  answer?: string
  url: string
  outcome?: string
  // The questions waiting, this one counted if asked: the app's badge.
  waiting?: number
  // The question takes several of its options: the first button opens
  // its card in the app, actions are only the replies it takes besides.
  choose?: boolean
  // How many options a question of one choice offers: those not shown
  // as buttons are said to be in the app.
  options?: number
  // The subscription this push came under: a browser subscribed under
  // several tokens keeps each one's waiting apart (lib/badge.ts).
  sub?: string
}

// The language chosen in the app, kept where the service worker reads
// it: a notification's own words follow it, not the browser's.
const LANG = 'lang'

export async function keepLang(lang: string): Promise<void> {
  await pushKept()?.put(LANG, lang)
}

// keptLang is the language chosen in the app, else fallback (the
// browser's).
export async function keptLang(fallback: string): Promise<string> {
  const l = await pushKept()?.get(LANG).catch(() => undefined)
  return typeof l === 'string' ? l : fallback
}

// chooseLabel is the button that opens a question of several choices,
// in lang.
export function chooseLabel(lang: string): string {
  return lang.toLowerCase().startsWith('zh') ? '去选择…' : 'Choose…'
}

// moreLabel says n answers are left to the app, in lang.
function moreLabel(n: number, lang: string): string {
  if (lang.toLowerCase().startsWith('zh')) return `应用里还有 ${n} 个答案`
  return `${n} more ${n === 1 ? 'answer' : 'answers'} in the app`
}

// isolated is s set apart (FSI…PDI) from the words around it when it
// holds a right-to-left letter, as the server sets it in its titles.
function isolated(s: string): string {
  return /[\p{Script=Arabic}\p{Script=Hebrew}\p{Script=Syriac}\p{Script=Thaana}\p{Script=Nko}]/u.test(s) ? `\u2068${s}\u2069` : s
}

// titleOf is the notification's title in lang: the server's (in
// English), or made of its parts in another language the app speaks.
export function titleOf(m: PushMessage, lang: string): string {
  if (!lang.toLowerCase().startsWith('zh') || !m.kind) return m.title || 'agentassistant'
  const t = (m.asker ? isolated(m.asker) : '你的 Agent') + (m.kind === 'report' ? ' 完成了任务' : ' 提问')
  return m.project ? `${isolated(m.project)} · ${t}` : t
}

// The buttons are named a0, a1... after the answers they post, and
// 'open' for the one that opens the question's card; a browser shows at
// most max of them.
export function notificationOptions(m: PushMessage, max: number, lang = 'en'): NotificationOptions & { actions: { action: string; title: string }[] } {
  const open = m.choose ? [{ action: 'open', title: chooseLabel(lang) }] : []
  const answers = (m.actions ?? []).map((title, i) => ({ action: 'a' + i, title }))
  const actions = [...open, ...answers].slice(0, Math.max(0, max))
  const more = (m.options ?? 0) - actions.length
  return {
    body: (m.body ?? '') + (more > 0 ? '\n\n' + moreLabel(more, lang) : ''),
    tag: m.tag,
    icon: '/icons/icon-192.png',
    // The status bar draws a badge from its alpha alone: the app's icon
    // (an opaque square) would be a blank square there.
    badge: '/icons/badge-96.png',
    data: { id: m.id, cap: m.cap, answer: m.answer, url: m.url, actions: m.actions ?? [], sub: m.sub },
    actions,
    requireInteraction: m.kind === 'question',
  }
}
