import { computed, reactive } from 'vue'
import type { AskQuestionRequest, TaskFinishRequest, WebsocketMessage } from '../gen/agentassistproto/agentassist_pb'
import type { Init } from './client'
import {
  answererId, cancelOutcome, chatFrame, choices, contentsToParts, emptyDraft, EMPTY_DRAFT, HISTORY_PAGE, loginRequests, partsToDraft,
  replyFrame, replyTarget, requestText, sameWords, validityCheck, who,
  type ChatLine, type Draft, type Ended, type Item, type Kind, type LostReq, type OnlineUser, type ReplyPart, type Req, type Status,
} from './model'
import { pushID } from '../lib/push'

export type { Kind, Status, ReplyPart, Item, ChatLine, OnlineUser, LostReq, Draft } from './model'

// How a request answered here but not yet taken ended elsewhere, as the
// server said it, kept until the server says whether ours was taken.
type Outcome = { status: Status } & Partial<Pick<Item, 'reply' | 'answeredBy' | 'answeredById' | 'answeredAt' | 'ended'>>

const MAX_ITEMS = 500

// The inbox state: every request seen under this token on this device,
// kept in localStorage so history survives reloads. token names the
// push subscription whose buttons' answers are this device's (ownPush).
export function createStore(storageKey: string, token = '') {
  const state = reactive({
    items: [] as Item[],
    users: [] as OnlineUser[],
    chats: [] as ChatLine[],
    unreadChat: {} as Record<string, number>,
    selected: '' as string,
    project: '' as string, // the project shown; '' for all
    historyMore: true, // the server may have older items
    // What the server could not restore, as it says at each login, until
    // someone dismisses it (on any device).
    lost: [] as LostReq[],
    // What the person typed and did not send, per request id ('' while
    // no question is chosen), kept on the device: a reload, a killed
    // tab or an answer from another device never wipes it.
    drafts: {} as Record<string, Draft>,
    // The options ticked on a multi_select card and not sent, per request
    // id, kept on the device like the drafts, while the request waits.
    ticks: {} as Record<string, string[]>,
  })
  // The outbox is the items answered here with sending set. On this
  // connection: those whose answer went with a check after it
  // (inFlight), and those sent on an earlier one that the server is
  // asked about (asking).
  const inFlight = new Set<string>()
  const asking = new Set<string>()
  // How the server says a request answered here ended, heard before it
  // said whether ours was taken: shown if ours was not.
  const rival = new Map<string, Outcome>()
  const draftsKey = storageKey + '.drafts'
  const ticksKey = storageKey + '.ticks'

  const projects = computed(() => [...new Set(state.items.map((i) => i.project))])
  const shown = computed(() => state.items.filter((i) => !state.project || i.project === state.project))
  const waiting = computed(() => shown.value.filter((i) => i.status === 'waiting'))
  const target = computed(() => replyTarget(waiting.value, state.selected))

  try {
    const saved = JSON.parse(localStorage.getItem(storageKey) ?? '[]') as Item[]
    if (Array.isArray(saved)) state.items.push(...saved.filter((i) => i && typeof i.id === 'string'))
  } catch {
    /* corrupt history: start fresh */
  }
  try {
    const saved = JSON.parse(localStorage.getItem(draftsKey) ?? '{}') as Record<string, Draft>
    for (const [id, d] of Object.entries(saved ?? {})) {
      if (d && typeof d.text === 'string' && Array.isArray(d.images)) state.drafts[id] = { text: d.text, images: d.images }
    }
  } catch {
    /* corrupt drafts: none */
  }
  try {
    const saved = JSON.parse(localStorage.getItem(ticksKey) ?? '{}') as Record<string, unknown>
    for (const [id, t] of Object.entries(saved ?? {})) {
      if (Array.isArray(t) && t.length && t.every((l) => typeof l === 'string')) state.ticks[id] = t
    }
  } catch {
    /* corrupt ticks: none */
  }

  function save() {
    const keep = state.items.slice(-MAX_ITEMS)
    try {
      localStorage.setItem(storageKey, JSON.stringify(keep))
    } catch {
      // Quota: drop images from the oldest answers and try once more;
      // never from an answer still to be sent.
      for (const it of keep.slice(0, keep.length / 2)) if (!it.sending) it.reply = it.reply?.filter((p) => p.type === 'text')
      try {
        localStorage.setItem(storageKey, JSON.stringify(keep))
      } catch {
        /* give up persisting; the page still works */
      }
    }
  }

  function find(id: string) {
    return state.items.find((i) => i.id === id)
  }

  function saveDrafts() {
    try {
      localStorage.setItem(draftsKey, JSON.stringify(state.drafts))
    } catch {
      // Quota: keep the words at least.
      try {
        localStorage.setItem(draftsKey, JSON.stringify(Object.fromEntries(
          Object.entries(state.drafts).map(([id, d]) => [id, { text: d.text, images: [] }]))))
      } catch {
        /* give up persisting; the page still holds them */
      }
    }
  }

  // ownPush is how the server names this device's push subscription when
  // one of its notification's buttons answers ('' with push off).
  function ownPush(): string {
    const id = token ? pushID(token) : ''
    return id ? 'push:' + id : ''
  }

  // draft is what the person has typed for id and not sent.
  function draft(id: string): Draft {
    return state.drafts[id] ?? EMPTY_DRAFT
  }

  function setDraft(id: string, d: Draft) {
    if (emptyDraft(d)) delete state.drafts[id]
    else state.drafts[id] = { text: d.text, images: [...d.images] }
    saveDrafts()
  }

  // setTicks keeps the options ticked on id's card; the ticks of cards
  // no longer waiting go with it, so what is kept stays as small as
  // what waits.
  function setTicks(id: string, labels: string[]) {
    if (labels.length) state.ticks[id] = [...labels]
    else delete state.ticks[id]
    for (const k of Object.keys(state.ticks)) if (find(k)?.status !== 'waiting') delete state.ticks[k]
    try {
      localStorage.setItem(ticksKey, JSON.stringify(state.ticks))
    } catch {
      /* give up persisting; the page still holds them */
    }
  }

  // keepDraft puts words that did not go back with their question,
  // after whatever is typed there already.
  function keepDraft(id: string, parts: ReplyPart[] | undefined) {
    const back = partsToDraft(parts ?? [])
    if (emptyDraft(back)) return
    const d = draft(id)
    setDraft(id, { text: [d.text, back.text].filter((t) => t.trim()).join('\n\n'), images: [...d.images, ...back.images] })
  }

  // adopt gives what was typed before a question was chosen to the one
  // chosen, unless it has words of its own.
  function adopt(id: string) {
    if (!id || emptyDraft(state.drafts['']) || !emptyDraft(state.drafts[id])) return
    setDraft(id, draft(''))
    setDraft('', EMPTY_DRAFT)
  }

  // unsent takes an answer that could not go off its item: the words go
  // back to the person as the question's draft.
  function unsent(it: Item) {
    if (!it.sending) return
    keepDraft(it.id, it.reply)
    it.sending = undefined
    it.reply = undefined
    it.answeredBy = undefined
    it.answeredAt = undefined
    inFlight.delete(it.id)
    asking.delete(it.id)
    rival.delete(it.id)
  }

  // upsert records a request; returns true when it is new to this device.
  function upsert(kind: Kind, req: AskQuestionRequest | TaskFinishRequest, createdAt?: number, timeout?: number): boolean {
    const r = req.Request as Req | undefined
    const existing = find(req.ID)
    if (existing) {
      if (existing.status !== 'waiting' && existing.status !== 'answeredHere') existing.status = 'waiting'
      return false
    }
    state.items.push({
      id: req.ID,
      kind,
      project: r?.ProjectDirectory ?? '',
      text: requestText(kind, r),
      createdAt: createdAt ?? Date.now(),
      timeout: timeout ?? r?.Timeout ?? 0,
      status: 'waiting',
      ...who(r),
      ...choices(r),
    })
    state.items.sort((a, b) => a.createdAt - b.createdAt)
    save()
    return true
  }

  function setStatus(id: string, status: Status, extra: Partial<Item> = {}) {
    const it = find(id)
    if (!it) return
    Object.assign(it, extra, { status })
    if (state.selected === id && status !== 'waiting') state.selected = ''
    save()
  }

  // handle applies a server frame. It returns the id of a request that is
  // new to this device, so the view can notify and focus.
  function handle(m: WebsocketMessage): string | undefined {
    switch (m.Cmd) {
      case 'AskQuestion':
        if (m.AskQuestionRequest && upsert('AskQuestion', m.AskQuestionRequest)) return m.AskQuestionRequest.ID
        break
      case 'TaskFinish':
      case 'WorkReport': // the same report under the current upstream name; upsert keeps one
        if (m.TaskFinishRequest && upsert('TaskFinish', m.TaskFinishRequest)) return m.TaskFinishRequest.ID
        break
      case 'GetPendingMessages': {
        let fresh: string | undefined
        const pending = new Set<string>()
        for (const p of m.GetPendingMessagesResponse?.pendingMessages ?? []) {
          const kind: Kind = p.messageType === 'AskQuestion' ? 'AskQuestion' : 'TaskFinish' // TaskFinish or WorkReport
          const req = kind === 'TaskFinish' ? p.taskFinishRequest : p.askQuestionRequest
          if (!req) continue
          pending.add(req.ID)
          if (upsert(kind, req, Number(p.createdAt), p.timeout)) fresh = req.ID
          const it = find(req.ID)
          if (it) it.agentGone = p.agentGone
        }
        // What this device thought was waiting but the server no longer
        // has was settled while we were away.
        for (const it of state.items) if (it.status === 'waiting' && !pending.has(it.id)) it.status = 'closed'
        save()
        return fresh
      }
      case 'AskQuestionReplyNotification':
      case 'TaskFinishReplyNotification':
      case 'WorkReportReplyNotification': {
        const id = m.AskQuestionRequest?.ID || m.TaskFinishRequest?.ID || ''
        const resp = m.AskQuestionResponse ?? m.TaskFinishResponse
        const outcome = {
          reply: contentsToParts(resp?.contents), answeredBy: m.Nickname || m.StrParam, answeredById: answererId(m.StrParam, m.Nickname),
          answeredAt: Date.now(),
        }
        if (outcome.answeredById && outcome.answeredById === ownPush()) {
          // Answered with a button of this device's notification.
          setStatus(id, 'answeredHere', outcome)
          break
        }
        if (find(id)?.status === 'answeredHere') {
          // Our own answer, replayed after a reconnect; or another
          // device's, sent at the same moment as ours or while ours
          // waited to go: if the server refuses ours, this one won.
          if (find(id)?.sending) rival.set(id, { status: 'answeredElsewhere', ...outcome })
          break
        }
        setStatus(id, 'answeredElsewhere', outcome)
        break
      }
      case 'GetHistory': {
        const h = m.GetHistoryResponse
        for (const it of h?.items ?? []) {
          const req = it.messageType === 'TaskFinish' ? it.taskFinishRequest : it.askQuestionRequest
          if (!req) continue
          const r = req.Request as Req | undefined
          // Unanswered: why, as the live notice said it (older servers
          // send no reason: then it is only closed unanswered).
          // Answered with a button of this device's notification while
          // no page was open: its own answer.
          const own = !!it.answeredById && it.answeredById === ownPush()
          const { status, ended } = it.status === 'answered'
            ? { status: (own ? 'answeredHere' : 'answeredElsewhere') as Status, ended: undefined }
            : it.status === 'timeout' ? { status: 'timedOut' as Status, ended: undefined } : historyCancel(it.reason)
          const outcome = {
            reply: contentsToParts(it.response?.contents),
            answeredBy: it.answeredBy || undefined,
            answeredById: it.answeredById || undefined,
            answeredAt: Number(it.closedAt) || undefined,
            ended,
          }
          const known = find(req.ID)
          if (known?.status === 'answeredHere' && known.sending) rival.set(req.ID, { status, ...outcome })
          // Settled while this device was away ("closed") or while it was
          // loading: history says how.
          if (known?.status === 'closed' || known?.status === 'waiting') setStatus(req.ID, status, outcome)
          if (known) continue
          state.items.push({
            id: req.ID,
            kind: it.messageType as Kind,
            project: r?.ProjectDirectory ?? '',
            text: requestText(it.messageType === 'TaskFinish' ? 'TaskFinish' : 'AskQuestion', r),
            createdAt: Number(it.createdAt),
            timeout: r?.Timeout ?? 0,
            status,
            ...outcome,
            ...who(r),
            ...choices(r),
          })
        }
        state.items.sort((a, b) => a.createdAt - b.createdAt)
        state.historyMore = !!h?.more
        save()
        break
      }
      case 'RequestsLost':
        state.lost = (m.RequestsLost?.requests ?? []).map((l) => ({
          id: l.requestId,
          kind: l.messageType === 'TaskFinish' ? 'TaskFinish' : 'AskQuestion',
          project: l.projectDirectory,
          createdAt: Number(l.createdAt),
        }))
        break
      case 'RequestAgentStatus': {
        const n = m.RequestAgentStatusNotification
        const it = n && find(n.requestId)
        if (it) {
          it.agentGone = n.agentGone
          save()
        }
        break
      }
      case 'RequestCancelled': {
        const n = m.RequestCancelledNotification
        if (!n) break
        const { status, ended } = cancelOutcome(n.reason)
        // An answer here that had not gone: it will not; its words stay.
        const it = find(n.requestId)
        if (it) unsent(it)
        setStatus(n.requestId, status, { ended })
        break
      }
      case 'CheckMessageValidity':
        for (const [id, open] of Object.entries(m.CheckMessageValidityResponse?.validity ?? {})) checked(id, open)
        save()
        break
      case 'GetOnlineUsers':
        state.users = (m.GetOnlineUsersResponse?.onlineUsers ?? []).map((u) => ({
          clientId: u.clientId,
          nickname: u.nickname,
          connectedAt: Number(u.connectedAt) * 1000,
        }))
        break
      case 'UserConnectionStatusNotification': {
        const n = m.UserConnectionStatusNotification
        if (n?.status === 'changed') return 'presence-changed' // a big room: the view fetches the list
        if (!n?.user) break
        const u = { clientId: n.user.clientId, nickname: n.user.nickname, connectedAt: Number(n.user.connectedAt) * 1000 }
        const at = state.users.findIndex((x) => x.clientId === u.clientId)
        if (n.status !== 'connected') state.users = state.users.filter((x) => x.clientId !== u.clientId)
        else if (at >= 0) {
          // Connected again: a rename. Its answers take the new name.
          if (state.users[at]!.nickname !== u.nickname) renamed(u.clientId, u.nickname)
          state.users[at] = u
        }
        else state.users.push(u)
        break
      }
      case 'ChatMessageNotification': {
        const c = m.ChatMessageNotification?.chatMessage
        if (!c) break
        state.chats.push({ id: c.messageId, peer: c.senderClientId, from: c.senderNickname, mine: false, text: c.content, at: Number(c.sentAt) * 1000 })
        state.unreadChat[c.senderClientId] = (state.unreadChat[c.senderClientId] ?? 0) + 1
        break
      }
    }
    return undefined
  }

  // olderPage asks for the page of history before the oldest item shown,
  // while the server may have one.
  function olderPage(now = Date.now()): Init | undefined {
    if (!state.historyMore) return undefined
    const oldest = state.items.reduce((m, i) => Math.min(m, i.createdAt), now)
    return { Cmd: 'GetHistory', GetHistoryRequest: { before: BigInt(oldest), limit: HISTORY_PAGE } }
  }

  // reply is the frame answering a request shown here.
  function reply(id: string, parts: ReplyPart[]): Init | undefined {
    const it = find(id)
    return it && replyFrame(it, parts)
  }

  // markAnsweredHere records a reply this device sent. The next target is
  // never chosen silently: only a single question left is the obvious next.
  // It stays in the outbox (sending) until the server is seen to take it.
  function markAnsweredHere(id: string, parts: ReplyPart[], by: string) {
    setStatus(id, 'answeredHere', { reply: parts, answeredBy: by, answeredAt: Date.now(), sending: 'queued' })
    const w = waiting.value
    state.selected = w.length === 1 ? w[0]!.id : ''
  }

  // refused takes back a reply the server did not accept, and gives its
  // parts back to the person. When the server could not save it
  // (not_saved) the question is still open and stays the reply's target;
  // otherwise it is no longer waiting here.
  // The words go back as the question's draft, in the reply box while it
  // is open, on its card when not.
  function refused(id: string, code?: string): ReplyPart[] | undefined {
    const it = find(id)
    if (!it?.sending) return undefined
    const parts = it.reply ?? []
    const won = rival.get(id)
    unsent(it)
    if (code === 'not_saved' || code === 'invalid_request') {
      // Still pending: the person may try again (or pick an option).
      setStatus(id, 'waiting')
      state.selected = id
    } else if (won) {
      setStatus(id, won.status, won)
    } else {
      setStatus(id, 'closed')
    }
    return parts
  }

  // checked applies the server's word on whether id is still pending,
  // asked after an answer from here. Not pending, with no refusal
  // before it: ours was taken, unless the server has told of another
  // answer or ending. Still pending after a check from a new connection:
  // the answer died with the old one, and goes again.
  function checked(id: string, open: boolean) {
    const it = find(id)
    if (!it?.sending || it.status !== 'answeredHere') return
    const doubt = asking.delete(id)
    inFlight.delete(id)
    if (open) {
      if (doubt) it.sending = 'queued'
      return
    }
    const other = rival.get(id)
    rival.delete(id)
    if (other && !(other.status === 'answeredElsewhere' && sameWords(other.reply, it.reply))) {
      const mine = it.reply
      it.sending = undefined
      keepDraft(id, mine)
      setStatus(id, other.status, { ...other, reply: other.reply })
      return
    }
    it.sending = undefined
  }

  // loggedIn starts a new connection: whatever was in flight on the old
  // one is in doubt until the server is asked.
  function loggedIn() {
    inFlight.clear()
    asking.clear()
  }

  // flush sends what the outbox holds on the connection send writes to
  // (false: it is down; the rest waits): each answer not yet sent, with
  // a check after it; one check for answers sent on an earlier
  // connection. Nothing goes twice on one connection.
  function flush(send: (f: Init) => boolean) {
    const doubt: string[] = []
    let changed = false
    for (const it of state.items) {
      if (it.status !== 'answeredHere' || !it.sending || inFlight.has(it.id) || asking.has(it.id)) continue
      if (it.sending === 'sent') {
        doubt.push(it.id)
        continue
      }
      if (!send(replyFrame(it, it.reply ?? []))) return
      it.sending = 'sent'
      inFlight.add(it.id)
      changed = true
      send(validityCheck([it.id]))
    }
    if (doubt.length && send(validityCheck(doubt))) for (const id of doubt) asking.add(id)
    if (changed) save()
  }

  // arrived moves the reply target for a question new to this device. One
  // waiting: it is the one answered. More: the person picks, unless they
  // are in the middle of answering the one they chose.
  function arrived(id: string, drafting: boolean) {
    const w = waiting.value
    if (w.length === 1) state.selected = id
    else if (!(w.some((i) => i.id === state.selected) && drafting)) state.selected = ''
  }

  // dismissLost is the frame that tells the server the person saw the
  // notice of lost requests; it goes from this screen at once.
  function dismissLost(): Init | undefined {
    if (!state.lost.length) return undefined
    const requests = state.lost.map((l) => ({ requestId: l.id }))
    state.lost = []
    return { Cmd: 'RequestsLost', RequestsLost: { requests } }
  }

  function openChat(clientId: string) {
    state.unreadChat[clientId] = 0
  }

  // chatSent shows a line this device sent (control: a command to a
  // remote-input PC, shown as what was asked).
  function chatSent(peer: string, from: string, text: string, control = false) {
    state.chats.push({ id: crypto.randomUUID(), peer, from, mine: true, text, at: Date.now(), ...(control ? { control } : {}) })
  }

  // renamed gives a renamed device's name to the answers it gave: those
  // answered by its client id, and, when it is this one (mine), those
  // answered here.
  function renamed(clientId: string, nickname: string, mine = false) {
    let changed = false
    for (const it of state.items) {
      if ((clientId && it.answeredById === clientId) || (mine && it.status === 'answeredHere')) {
        it.answeredBy = nickname
        changed = true
      }
    }
    if (changed) save()
  }

  function clear() {
    state.items.splice(0, state.items.length, ...state.items.filter((i) => i.status === 'waiting'))
    save()
  }

  return {
    state, projects, shown, waiting, target,
    handle, loginRequests, olderPage, reply, markAnsweredHere, refused, arrived, dismissLost, loggedIn, flush,
    draft, setDraft, adopt, setTicks,
    openChat, chatFrame, chatSent, setStatus, find, clear, save, renamed,
  }
}

export type Store = ReturnType<typeof createStore>

// historyCancel is how a history item closed unanswered ended: what its
// reason says, and never "closed" (history is how a device learns that).
function historyCancel(reason: string): { status: Status; ended?: Ended } {
  const o = cancelOutcome(reason)
  return o.status === 'closed' ? { status: 'cancelled' } : o
}
