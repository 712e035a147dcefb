import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createStore } from './store'
import type { Init } from './client'
import { ask, frame, memoryStorage } from './testing'

// A connection for the store's outbox: what it was given to send, or
// nothing while it is down.
function link() {
  const out: Init[] = []
  let up = true
  return {
    out,
    send: (f: Init) => {
      if (up) out.push(f)
      return up
    },
    down: () => (up = false),
    up: () => (up = true),
    cmds: () => out.map((f) => f?.Cmd),
  }
}

const valid = (v: Record<string, boolean>) => frame({ Cmd: 'CheckMessageValidity', CheckMessageValidityResponse: { validity: v } })
const parts = [{ type: 'text' as const, text: 'A long answer typed in a tunnel.' }]

describe('the outbox: nothing answered here is lost, nothing goes twice', () => {
  beforeEach(() => {
    vi.stubGlobal('localStorage', memoryStorage())
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(1_700_000_000_000)
  })
  afterEach(() => {
    vi.useRealTimers()
    vi.unstubAllGlobals()
  })

  it('an answer made offline waits on its card, goes once when the connection is back, and is confirmed', () => {
    const s = createStore('t')
    const c = link()
    s.handle(ask('q'))
    c.down()
    s.markAnsweredHere('q', parts, 'phone')
    s.flush(c.send)
    expect(s.find('q')).toMatchObject({ status: 'answeredHere', sending: 'queued', reply: parts })
    c.up()
    s.loggedIn()
    s.flush(c.send)
    expect(c.cmds()).toEqual(['AskQuestionReply', 'CheckMessageValidity'])
    s.flush(c.send) // on its way: not again
    expect(c.out).toHaveLength(2)
    s.handle(valid({ q: false })) // the server took it: no error came first
    expect(s.find('q')?.sending).toBeUndefined()
    s.loggedIn()
    s.flush(c.send)
    expect(c.out).toHaveLength(2)
  })

  it('an answer sent into a connection that died is asked about after the next login, and sent again only if the server never had it', () => {
    const s = createStore('t')
    const c = link()
    s.handle(ask('lost'))
    s.handle(ask('taken'))
    s.markAnsweredHere('lost', parts, 'phone')
    s.flush(c.send)
    s.markAnsweredHere('taken', [{ type: 'text', text: 'ok' }], 'phone')
    s.flush(c.send)
    expect(c.cmds()).toEqual(['AskQuestionReply', 'CheckMessageValidity', 'AskQuestionReply', 'CheckMessageValidity'])
    // The socket was dead: no answer to either check. A new login.
    c.out.length = 0
    s.loggedIn()
    s.flush(c.send)
    expect(c.out).toEqual([{ Cmd: 'CheckMessageValidity', CheckMessageValidityRequest: { requestIds: ['lost', 'taken'] } }])
    c.out.length = 0
    s.handle(valid({ lost: true, taken: false }))
    s.flush(c.send)
    expect(c.cmds()).toEqual(['AskQuestionReply', 'CheckMessageValidity'])
    expect(c.out[0]).toMatchObject({ AskQuestionRequest: { ID: 'lost' } })
    expect(s.find('taken')).toMatchObject({ status: 'answeredHere', sending: undefined })
    s.handle(valid({ lost: false }))
    expect(s.find('lost')).toMatchObject({ status: 'answeredHere', sending: undefined, reply: parts })
  })

  it('an answer waiting to go survives a reload and goes after it', () => {
    const s = createStore('aa.history.reload')
    s.handle(ask('q'))
    s.markAnsweredHere('q', parts, 'phone')
    s.flush(() => false)
    const again = createStore('aa.history.reload')
    const c = link()
    again.loggedIn()
    again.flush(c.send)
    expect(c.cmds()).toEqual(['AskQuestionReply', 'CheckMessageValidity'])
    expect(c.out[0]).toMatchObject({ AskQuestionResponse: { ID: 'q', contents: [{ text: { text: parts[0]!.text } }] } })
  })

  it('another device answered while this one was offline: theirs is shown, ours stays on the card as a draft', () => {
    const s = createStore('t')
    const c = link()
    s.handle(ask('q'))
    s.markAnsweredHere('q', parts, 'phone')
    s.handle(frame({
      Cmd: 'AskQuestionReplyNotification', AskQuestionRequest: { ID: 'q' }, Nickname: 'pc', StrParam: 'Response received from client c2 (pc)',
      AskQuestionResponse: { ID: 'q', contents: [{ type: 1, text: { text: 'theirs' } }] },
    }))
    s.loggedIn()
    s.flush(c.send)
    expect(s.refused('q', 'not_pending')).toEqual(parts)
    expect(s.find('q')).toMatchObject({ status: 'answeredElsewhere', answeredBy: 'pc', reply: [{ type: 'text', text: 'theirs' }], sending: undefined })
    expect(s.draft('q')).toMatchObject({ text: parts[0]!.text })
  })

  it('timed out or withdrawn before an answer waiting here could go: it is not sent, and the words stay on the card', () => {
    const s = createStore('t')
    const c = link()
    s.handle(ask('q'))
    s.markAnsweredHere('q', parts, 'phone')
    s.handle(frame({ Cmd: 'RequestCancelled', RequestCancelledNotification: { requestId: 'q', reason: 'timeout' } }))
    expect(s.find('q')).toMatchObject({ status: 'timedOut', reply: undefined, sending: undefined })
    expect(s.draft('q')).toMatchObject({ text: parts[0]!.text })
    s.flush(c.send)
    expect(c.out).toEqual([])
  })
})

describe('drafts: one per question, kept on the device', () => {
  beforeEach(() => vi.stubGlobal('localStorage', memoryStorage()))
  afterEach(() => vi.unstubAllGlobals())

  it('a draft and its images survive a reload', () => {
    const s = createStore('aa.history.d')
    s.handle(ask('q'))
    s.setDraft('q', { text: 'half typed', images: [{ data: 'iVBO', mime: 'image/png' }] })
    expect(createStore('aa.history.d').draft('q')).toEqual({ text: 'half typed', images: [{ data: 'iVBO', mime: 'image/png' }] })
    s.setDraft('q', { text: '  ', images: [] })
    expect(createStore('aa.history.d').draft('q')).toEqual({ text: '', images: [] })
  })

  it('answered on another device while a draft was half typed: the draft stays with its question, not with the next one', () => {
    const s = createStore('t')
    s.handle(ask('a'))
    s.handle(ask('b'))
    s.state.selected = 'a'
    s.setDraft('a', { text: 'my thoughts on a', images: [] })
    s.handle(frame({
      Cmd: 'AskQuestionReplyNotification', AskQuestionRequest: { ID: 'a' }, Nickname: 'pc',
      AskQuestionResponse: { ID: 'a', contents: [{ type: 1, text: { text: 'theirs' } }] },
    }))
    expect(s.target.value?.id).toBe('b')
    expect(s.draft('b').text).toBe('')
    expect(s.draft('a').text).toBe('my thoughts on a')
  })
})
