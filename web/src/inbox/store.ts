import { reactive } from 'vue'
import type {
  AskQuestionRequest,
  McpResultContent,
  TaskFinishRequest,
  WebsocketMessage,
} from '../gen/agentassistproto/agentassist_pb'

export type Kind = 'AskQuestion' | 'TaskFinish'
export type Status = 'waiting' | 'answeredHere' | 'answeredElsewhere' | 'cancelled' | 'timedOut' | 'closed'

export interface ReplyPart {
  type: 'text' | 'image'
  text?: string
  data?: string // base64
  mime?: string
}

export interface Item {
  id: string
  kind: Kind
  project: string
  text: string
  createdAt: number // ms
  timeout: number // s
  status: Status
  reply?: ReplyPart[]
  answeredBy?: string
  answeredAt?: number
  // No agent waits for the answer now; the server keeps it for the
  // agent's next call from the project.
  agentGone?: boolean
  agent?: string // the agent (or its MCP client) that asked
  model?: string // the model it runs
}

export interface ChatLine {
  id: string
  peer: string // the other client's id
  from: string // nickname
  mine: boolean
  text: string
  at: number // ms (the wire has seconds)
  control?: boolean // a command to a remote-input PC (undo, clear, enter)
}

export interface OnlineUser {
  clientId: string
  nickname: string
  connectedAt: number // ms (the wire has seconds)
}

const MAX_ITEMS = 500

// The inbox state: every request seen under this token on this device,
// kept in localStorage so history survives reloads.
export function createStore(storageKey: string) {
  const state = reactive({
    items: [] as Item[],
    users: [] as OnlineUser[],
    chats: [] as ChatLine[],
    unreadChat: {} as Record<string, number>,
    selected: '' as string,
    historyMore: true, // the server may have older items
  })

  try {
    const saved = JSON.parse(localStorage.getItem(storageKey) ?? '[]') as Item[]
    if (Array.isArray(saved)) state.items.push(...saved.filter((i) => i && typeof i.id === 'string'))
  } catch {
    /* corrupt history: start fresh */
  }

  function save() {
    const keep = state.items.slice(-MAX_ITEMS)
    try {
      localStorage.setItem(storageKey, JSON.stringify(keep))
    } catch {
      // Quota: drop images from the oldest answers and try once more.
      for (const it of keep.slice(0, keep.length / 2)) it.reply = it.reply?.filter((p) => p.type === 'text')
      try {
        localStorage.setItem(storageKey, JSON.stringify(keep))
      } catch {
        /* give up persisting; the page still works */
      }
    }
  }

  type Req = {
    ProjectDirectory?: string; Question?: string; Summary?: string; Timeout?: number
    AgentName?: string; ReasoningModelName?: string; McpClientName?: string
  }

  // who names the agent and model of a request, when it says.
  function who(r: Req | undefined): Pick<Item, 'agent' | 'model'> {
    const agent = r?.AgentName || r?.McpClientName
    return { ...(agent ? { agent } : {}), ...(r?.ReasoningModelName ? { model: r.ReasoningModelName } : {}) }
  }

  function find(id: string) {
    return state.items.find((i) => i.id === id)
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
      text: (kind === 'AskQuestion' ? r?.Question : r?.Summary) ?? '',
      createdAt: createdAt ?? Date.now(),
      timeout: timeout ?? r?.Timeout ?? 0,
      status: 'waiting',
      ...who(r),
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

  function contentsToParts(cs: McpResultContent[] | undefined): ReplyPart[] {
    const out: ReplyPart[] = []
    for (const c of cs ?? []) {
      if (c.text?.text) out.push({ type: 'text', text: c.text.text })
      else if (c.image?.data) out.push({ type: 'image', data: c.image.data, mime: c.image.mimeType || 'image/png' })
    }
    return out
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
        if (find(id)?.status === 'answeredHere') break // our own answer, replayed after a reconnect
        setStatus(id, 'answeredElsewhere', {
          reply: contentsToParts(resp?.contents),
          answeredBy: m.Nickname || m.StrParam,
          answeredAt: Date.now(),
        })
        break
      }
      case 'GetHistory': {
        const h = m.GetHistoryResponse
        for (const it of h?.items ?? []) {
          const req = it.messageType === 'TaskFinish' ? it.taskFinishRequest : it.askQuestionRequest
          if (!req || find(req.ID)) continue
          const r = req.Request as Req | undefined
          state.items.push({
            id: req.ID,
            kind: it.messageType as Kind,
            project: r?.ProjectDirectory ?? '',
            text: (it.messageType === 'TaskFinish' ? r?.Summary : r?.Question) ?? '',
            createdAt: Number(it.createdAt),
            timeout: r?.Timeout ?? 0,
            status: it.status === 'answered' ? 'answeredElsewhere' : it.status === 'timeout' ? 'timedOut' : 'cancelled',
            reply: contentsToParts(it.response?.contents),
            answeredBy: it.answeredBy || undefined,
            answeredAt: Number(it.closedAt) || undefined,
            ...who(r),
          })
        }
        state.items.sort((a, b) => a.createdAt - b.createdAt)
        state.historyMore = !!h?.more
        save()
        break
      }
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
        if (n) setStatus(n.requestId, n.reason === 'timeout' ? 'timedOut' : 'cancelled')
        break
      }
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
        else if (at >= 0) state.users[at] = u // connected again: a rename
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

  function markAnsweredHere(id: string, parts: ReplyPart[], by: string) {
    setStatus(id, 'answeredHere', { reply: parts, answeredBy: by, answeredAt: Date.now() })
  }

  function clear() {
    state.items.splice(0, state.items.length, ...state.items.filter((i) => i.status === 'waiting'))
    save()
  }

  return { state, handle, markAnsweredHere, setStatus, find, clear, save }
}

export type Store = ReturnType<typeof createStore>
