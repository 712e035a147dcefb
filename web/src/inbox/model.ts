// The inbox's vocabulary: what a request, a reply and a chat line are on
// this device, and the pure rules and frames around them. The store
// (store.ts) keeps them; this file has no state.
import type { McpResultContent } from '../gen/agentassistproto/agentassist_pb'
import type { Init } from './client'
import { markdownToText } from '../lib/plaintext'

export type Kind = 'AskQuestion' | 'TaskFinish'
export type Status = 'waiting' | 'answeredHere' | 'answeredElsewhere' | 'cancelled' | 'timedOut' | 'closed'

export interface ReplyPart {
  type: 'text' | 'image'
  text?: string
  data?: string // base64
  mime?: string
}

// A request the server could not restore after finding its store
// damaged: its agent waits in vain.
export interface LostReq {
  id: string
  kind: Kind
  project: string
  createdAt: number // ms
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
  answeredById?: string // the client id of the device that answered, to follow its renames
  answeredAt?: number
  // No agent waits for the answer now; the server keeps it for the
  // agent's next call from the project.
  agentGone?: boolean
  // Why a cancelled one ended, when the server said (RequestCancelled's
  // reason); history says only "cancelled", which is all it is then.
  ended?: Ended
  agent?: string // the agent (or its MCP client) that asked
  model?: string // the model it runs
  // The choices offered with it (the wire's Questions, field 7): buttons
  // that answer with their label; multiple: several may be chosen;
  // custom: free text is allowed besides (true unless the agent said no).
  options?: Choice[]
  multiple?: boolean
  custom?: boolean
  // An answer given here the server has not yet been seen to take:
  // queued (it has not left this device) or sent (it went on a
  // connection that may have died with it). Kept across reloads.
  sending?: 'queued' | 'sent'
}

// What the person has typed (and attached) for a question and not sent.
export interface Draft {
  text: string
  images: { data: string; mime: string }[] // base64
}

export const EMPTY_DRAFT: Draft = Object.freeze({ text: '', images: [] }) as Draft

export function emptyDraft(d: Draft | undefined): boolean {
  return !d || (!d.text.trim() && !d.images.length)
}

// partsToDraft turns a reply's parts back into what the person typed.
export function partsToDraft(parts: ReplyPart[]): Draft {
  return {
    text: parts.filter((p) => p.type === 'text').map((p) => p.text ?? '').join('\n'),
    images: parts.filter((p) => p.type === 'image').map((p) => ({ data: p.data ?? '', mime: p.mime ?? 'image/png' })),
  }
}

// sameWords says whether two replies say the same (an answer the server
// holds is this device's own when its words are).
export function sameWords(a: ReplyPart[] | undefined, b: ReplyPart[] | undefined): boolean {
  const key = (ps: ReplyPart[] | undefined) => JSON.stringify((ps ?? []).map((p) => [p.type, p.text ?? '', p.data ?? '']))
  return key(a) === key(b)
}

// validityCheck asks the server which of ids are still pending.
export function validityCheck(ids: string[]): Init {
  return { Cmd: 'CheckMessageValidity', CheckMessageValidityRequest: { requestIds: ids } }
}

// How a request withdrawn before anyone answered ended: its agent
// withdrew it, its agent went away (the MCP client ended or restarted and
// did not come back for it), or the server could not save it.
export type Ended = 'agent' | 'agentLeft' | 'notSaved'

// cancelOutcome is what a RequestCancelled's reason says happened. The
// reasons are the server's (srv/hub: "timeout", "cancelled", "abandoned",
// "not saved", "no longer pending"); one this page does not know is a
// request closed without an answer, and no more is claimed.
export function cancelOutcome(reason: string): { status: Status; ended?: Ended } {
  switch (reason) {
    case 'timeout': return { status: 'timedOut' }
    case 'cancelled': return { status: 'cancelled', ended: 'agent' }
    case 'abandoned': return { status: 'cancelled', ended: 'agentLeft' }
    case 'not saved': return { status: 'cancelled', ended: 'notSaved' }
    case 'no longer pending': return { status: 'closed' }
  }
  return { status: 'cancelled' }
}

export interface Choice {
  label: string
  description?: string
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

export const HISTORY_PAGE = 30

// replyTarget is the question a reply goes to: the one the person chose,
// or the only one waiting. With several waiting and none chosen there is
// none: the person picks, never a silent default.
export function replyTarget(waiting: Item[], selected: string): Item | undefined {
  return waiting.find((i) => i.id === selected) ?? (waiting.length === 1 ? waiting[0] : undefined)
}

// The fields of a request the inbox reads (both generations name them alike).
export type Req = {
  ProjectDirectory?: string; Question?: string; Summary?: string; Timeout?: number
  AgentName?: string; ReasoningModelName?: string; McpClientName?: string
  Questions?: { question?: string; options?: { label: string; description?: string }[]; multiple?: boolean; custom?: boolean }[]
}

// choices are the options a request offers (the first set of its
// Questions), none when it offers none.
export function choices(r: Req | undefined): Pick<Item, 'options' | 'multiple' | 'custom'> {
  const q = r?.Questions?.[0]
  const opts = (q?.options ?? []).filter((o) => o.label)
  if (!opts.length) return {}
  return {
    options: opts.map((o) => (o.description ? { label: o.label, description: o.description } : { label: o.label })),
    multiple: !!q?.multiple,
    custom: !!q?.custom,
  }
}

// requestText is a request's text: the question or summary, or, when it
// asks in Questions alone (the current upstream generation), the first
// one's question.
export function requestText(kind: Kind, r: Req | undefined): string {
  return (kind === 'AskQuestion' ? r?.Question : r?.Summary) || r?.Questions?.[0]?.question || ''
}

// who names the agent and model of a request, when it says.
export function who(r: Req | undefined): Pick<Item, 'agent' | 'model'> {
  const agent = r?.AgentName || r?.McpClientName
  return { ...(agent ? { agent } : {}), ...(r?.ReasoningModelName ? { model: r.ReasoningModelName } : {}) }
}

// answererId is the client id in a reply notification's text (seed 002:
// "… from client <id>", the nickname after it in parentheses); none when
// the answer is named by its nickname alone.
export function answererId(text: string, nickname: string): string | undefined {
  const at = text.indexOf('client ')
  if (at < 0) return undefined
  let id = text.slice(at + 'client '.length)
  const tail = ` (${nickname})`
  if (nickname && id.endsWith(tail)) id = id.slice(0, -tail.length)
  else if (id === nickname) return undefined
  return id || undefined
}

export function contentsToParts(cs: McpResultContent[] | undefined): ReplyPart[] {
  const out: ReplyPart[] = []
  for (const c of cs ?? []) {
    if (c.text?.text) out.push({ type: 'text', text: c.text.text })
    else if (c.image?.data) out.push({ type: 'image', data: c.image.data, mime: c.image.mimeType || 'image/png' })
  }
  return out
}

// loginRequests is what a login asks for: a resumed login is followed by
// exactly the events this page missed; otherwise the pending list and the
// newest page of history are fetched whole.
export function loginRequests(resumed: boolean): Init[] {
  const users: Init = { Cmd: 'GetOnlineUsers', GetOnlineUsersRequest: {} }
  if (resumed) return [users]
  return [
    { Cmd: 'GetPendingMessages', GetPendingMessagesRequest: {} },
    { Cmd: 'GetHistory', GetHistoryRequest: { limit: HISTORY_PAGE } },
    users,
  ]
}

// replyFrame is the answer to a request, under the Cmd its kind takes.
export function replyFrame(it: Pick<Item, 'id' | 'kind'>, parts: ReplyPart[]): Init {
  const id = it.id
  const contents = parts.map((p) =>
    p.type === 'text'
      ? { type: 1, text: { type: 'text', text: p.text ?? '' } }
      : { type: 2, image: { type: 'image', data: p.data ?? '', mimeType: p.mime ?? 'image/png' } },
  )
  return it.kind === 'AskQuestion'
    ? { Cmd: 'AskQuestionReply', AskQuestionRequest: { ID: id }, AskQuestionResponse: { ID: id, contents } }
    : { Cmd: 'TaskFinishReply', TaskFinishRequest: { ID: id }, TaskFinishResponse: { ID: id, contents } }
}

export function chatFrame(peer: string, text: string): Init {
  return { Cmd: 'SendChatMessage', SendChatMessageRequest: { receiverClientId: peer, content: text } }
}

// tabTitle is the tab's title with the number of things waiting for the
// person, so a tab in the background says it.
export function tabTitle(base: string, waiting: number): string {
  return waiting > 0 ? `(${waiting}) ${base}` : base
}

// The words a search looks in, per request text (its markdown as plain
// text: a search for "**" finds no bold), kept while the text is seen.
const plain = new Map<string, string>()
function plainText(md: string): string {
  let p = plain.get(md)
  if (p === undefined) {
    if (plain.size > 2000) plain.clear()
    p = markdownToText(md).toLocaleLowerCase()
    plain.set(md, p)
  }
  return p
}

// matches says whether a request is found by a search: every word of the
// query is somewhere in its text, project, agent, model or answer.
export function matches(it: Item, query: string): boolean {
  const words = query.toLocaleLowerCase().split(/\s+/).filter(Boolean)
  if (!words.length) return true
  const hay = [plainText(it.text), it.project, it.agent, it.model, it.answeredBy, ...(it.reply ?? []).map((p) => p.text)]
    .filter(Boolean).join('\n').toLocaleLowerCase()
  return words.every((w) => hay.includes(w))
}
