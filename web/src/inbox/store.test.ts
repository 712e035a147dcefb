import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createStore } from './store'
import { tokenTag } from '../lib/token'
import { answererId } from './model'
import { ask, frame, ids, memoryStorage, pending } from './testing'

describe('the inbox store reads frames as the server sends them', () => {
  it('presence and chat times arrive in seconds and are kept in ms; a second "connected" is a rename', () => {
    const s = createStore('test-presence')
    s.handle(frame({ Cmd: 'GetOnlineUsers', GetOnlineUsersResponse: { onlineUsers: [{ clientId: 'a', nickname: 'pc', connectedAt: 1_700_000_000n }] } }))
    s.handle(frame({
      Cmd: 'UserConnectionStatusNotification',
      UserConnectionStatusNotification: { status: 'connected', user: { clientId: 'b', nickname: 'phone', connectedAt: 1_700_000_100n } },
    }))
    expect(s.state.users.map((u) => [u.nickname, u.connectedAt])).toEqual([['pc', 1_700_000_000_000], ['phone', 1_700_000_100_000]])
    s.handle(frame({
      Cmd: 'UserConnectionStatusNotification',
      UserConnectionStatusNotification: { status: 'connected', user: { clientId: 'a', nickname: 'kitchen', connectedAt: 1_700_000_000n } },
    }))
    expect(s.state.users.map((u) => u.nickname)).toEqual(['kitchen', 'phone'])
    s.handle(frame({ Cmd: 'UserConnectionStatusNotification', UserConnectionStatusNotification: { status: 'disconnected', user: { clientId: 'b' } } }))
    expect(s.state.users.map((u) => u.nickname)).toEqual(['kitchen'])

    s.handle(frame({ Cmd: 'ChatMessageNotification', ChatMessageNotification: { chatMessage: { messageId: 'm', senderClientId: 'a', content: 'hi', sentAt: 1_700_000_200n } } }))
    expect(s.state.chats[0]?.at).toBe(1_700_000_200_000)
  })

  it('requests the server lost are kept as it says them, and a dismissal names each and clears them', () => {
    const s = createStore('test-lost')
    s.handle(frame({
      Cmd: 'RequestsLost', RequestsLost: { requests: [
        { requestId: 'a', messageType: 'AskQuestion', projectDirectory: '/home/me/shop', createdAt: 1_700_000_000_000n },
        { requestId: 'b', messageType: 'TaskFinish', projectDirectory: '/srv/infra', createdAt: 1_700_000_001_000n },
      ] },
    }))
    expect(s.state.lost).toEqual([
      { id: 'a', kind: 'AskQuestion', project: '/home/me/shop', createdAt: 1_700_000_000_000 },
      { id: 'b', kind: 'TaskFinish', project: '/srv/infra', createdAt: 1_700_000_001_000 },
    ])
    expect(s.dismissLost()).toEqual({ Cmd: 'RequestsLost', RequestsLost: { requests: [{ requestId: 'a' }, { requestId: 'b' }] } })
    expect(s.state.lost).toEqual([])
    expect(s.dismissLost()).toBeUndefined()
    // Another device dismissed them: the server says what is left.
    s.handle(frame({ Cmd: 'RequestsLost', RequestsLost: { requests: [{ requestId: 'c', messageType: 'AskQuestion' }] } }))
    s.handle(frame({ Cmd: 'RequestsLost', RequestsLost: {} }))
    expect(s.state.lost).toEqual([])
  })

  it('a request\'s options (field 7) are kept with it; a question asked in Questions alone takes its text', () => {
    const s = createStore('test-options')
    s.handle(frame({ Cmd: 'AskQuestion', AskQuestionRequest: { ID: 'q1', Request: { Question: 'Deploy?', Questions: [{
      question: 'Deploy?', options: [{ label: 'Yes', description: 'now' }, { label: 'No' }], multiple: true, custom: false,
    }] } } }))
    s.handle(frame({ Cmd: 'AskQuestion', AskQuestionRequest: { ID: 'q2', Request: { Questions: [{ question: 'Which port?', options: [{ label: '80' }], custom: true }] } } }))
    s.handle(frame({ Cmd: 'AskQuestion', AskQuestionRequest: { ID: 'q3', Request: { Question: 'Plain?' } } }))
    expect(s.state.items.find((i) => i.id === 'q1')).toMatchObject({ text: 'Deploy?', options: [{ label: 'Yes', description: 'now' }, { label: 'No' }], multiple: true, custom: false })
    expect(s.state.items.find((i) => i.id === 'q2')).toMatchObject({ text: 'Which port?', options: [{ label: '80' }], multiple: false, custom: true })
    expect(s.state.items.find((i) => i.id === 'q3')?.options).toBeUndefined()
  })

  it('a task report under both generations\' Cmds is one item, with who asked', () => {
    const s = createStore('test-generations')
    const req = { ID: 't1', Request: { Summary: 'Done.', AgentName: 'Cursor', ReasoningModelName: 'gpt-5' } }
    expect(s.handle(frame({ Cmd: 'TaskFinish', TaskFinishRequest: req, Seq: 1n }))).toBe('t1')
    expect(s.handle(frame({ Cmd: 'WorkReport', TaskFinishRequest: req, Seq: 1n }))).toBeUndefined()
    expect(s.state.items).toHaveLength(1)
    expect(s.state.items[0]).toMatchObject({ kind: 'TaskFinish', text: 'Done.', agent: 'Cursor', model: 'gpt-5' })
    s.handle(frame({
      Cmd: 'WorkReportReplyNotification', TaskFinishRequest: { ID: 't1' },
      TaskFinishResponse: { ID: 't1', contents: [{ type: 1, text: { text: 'ok' } }] }, Nickname: 'phone',
    }))
    expect(s.state.items[0]).toMatchObject({ status: 'answeredElsewhere', answeredBy: 'phone' })
  })

  it('the pending list names a report twice; it stays one item, and the MCP client stands in for a missing agent name', () => {
    const s = createStore('test-pending')
    const req = { ID: 't2', Request: { Summary: 'Report.', McpClientName: 'windsurf' } }
    s.handle(frame({
      Cmd: 'GetPendingMessages',
      GetPendingMessagesResponse: { pendingMessages: [
        { messageType: 'TaskFinish', taskFinishRequest: req, createdAt: 1_700_000_000_000n },
        { messageType: 'WorkReport', taskFinishRequest: req, createdAt: 1_700_000_000_000n },
      ] },
    }))
    expect(s.state.items).toHaveLength(1)
    expect(s.state.items[0]).toMatchObject({ kind: 'TaskFinish', agent: 'windsurf', status: 'waiting' })
  })
})


describe('the inbox store', () => {
  beforeEach(() => {
    vi.stubGlobal('localStorage', memoryStorage())
    vi.useFakeTimers({ toFake: ['Date'] })
    vi.setSystemTime(1_700_000_000_000)
  })
  afterEach(() => {
    vi.useRealTimers()
    vi.unstubAllGlobals()
  })

  describe('reloads', () => {
    it('what a device has seen survives a reload, per token; a corrupt copy starts empty', () => {
      const s = createStore('aa.history.one')
      s.handle(ask('q1'))
      s.markAnsweredHere('q1', [{ type: 'text', text: 'yes' }], 'laptop')
      const again = createStore('aa.history.one')
      expect(again.state.items).toMatchObject([{ id: 'q1', status: 'answeredHere', answeredBy: 'laptop', reply: [{ type: 'text', text: 'yes' }] }])
      expect(createStore('aa.history.other').state.items).toEqual([])
      localStorage.setItem('aa.history.bad', '{not json')
      expect(createStore('aa.history.bad').state.items).toEqual([])
      localStorage.setItem('aa.history.odd', JSON.stringify([null, { id: 7 }, { id: 'ok', status: 'cancelled', createdAt: 1 }]))
      expect(ids(createStore('aa.history.odd').state.items)).toEqual(['ok'])
    })
  })

  describe('the pending list', () => {
    it('adds what is new with the server\'s times (ms), in order, and names the newest for the view', () => {
      const s = createStore('t')
      const fresh = s.handle(pending({ id: 'b', at: 1_700_000_002_000n }, { id: 'a', at: 1_700_000_001_000n, kind: 'TaskFinish' }))
      expect(fresh).toBe('a') // the last new one listed
      expect(s.state.items.map((i) => [i.id, i.kind, i.createdAt, i.status])).toEqual([
        ['a', 'TaskFinish', 1_700_000_001_000, 'waiting'],
        ['b', 'AskQuestion', 1_700_000_002_000, 'waiting'],
      ])
      expect(s.state.items[1]).toMatchObject({ text: 'Question b', timeout: 600 })
      expect(s.handle(pending({ id: 'b', at: 1_700_000_002_000n }, { id: 'a', at: 1_700_000_001_000n, kind: 'TaskFinish' }))).toBeUndefined()
      expect(s.state.items).toHaveLength(2)
    })

    it('what this device thought was waiting and the server no longer lists was settled while away', () => {
      const s = createStore('t')
      s.handle(ask('gone'))
      s.handle(ask('kept'))
      s.handle(ask('mine'))
      s.markAnsweredHere('mine', [{ type: 'text', text: 'ok' }], 'pc')
      s.handle(pending({ id: 'kept' }))
      expect(s.state.items.map((i) => [i.id, i.status])).toEqual([['gone', 'closed'], ['kept', 'waiting'], ['mine', 'answeredHere']])
    })

    it('a request listed again is waiting again, unless this device answered it', () => {
      const s = createStore('t')
      s.handle(ask('x'))
      s.handle(frame({ Cmd: 'RequestCancelled', RequestCancelledNotification: { requestId: 'x', reason: 'cancelled' } }))
      s.handle(ask('y'))
      s.markAnsweredHere('y', [{ type: 'text', text: 'ok' }], 'pc')
      s.handle(pending({ id: 'x' }, { id: 'y' }))
      expect(s.state.items.map((i) => i.status)).toEqual(['waiting', 'answeredHere'])
    })
  })

  describe('requests as they come', () => {
    it('a live question is stamped with this device\'s clock and carries its timeout and asker', () => {
      const s = createStore('t')
      expect(s.handle(ask('q', 'Which DB?', { Timeout: 90, ProjectDirectory: '/src/shop', AgentName: 'Claude Code', ReasoningModelName: 'opus' }))).toBe('q')
      expect(s.state.items[0]).toEqual({
        id: 'q', kind: 'AskQuestion', project: '/src/shop', text: 'Which DB?', createdAt: 1_700_000_000_000,
        timeout: 90, status: 'waiting', agent: 'Claude Code', model: 'opus',
      })
      expect(s.handle(ask('q'))).toBeUndefined() // the same question again (a replay) is not new
    })

    it('answered elsewhere: the answer and who gave it are shown; our own answer, replayed, stays ours', () => {
      const s = createStore('t')
      s.handle(ask('a'))
      s.handle(ask('b'))
      s.state.selected = 'a'
      s.handle(frame({
        Cmd: 'AskQuestionReplyNotification', AskQuestionRequest: { ID: 'a' }, StrParam: 'phone',
        AskQuestionResponse: { ID: 'a', contents: [{ type: 1, text: { text: 'Postgres' } }, { type: 2, image: { data: 'iVBO', mimeType: '' } }] },
      }))
      expect(s.find('a')).toMatchObject({
        status: 'answeredElsewhere', answeredBy: 'phone', answeredAt: 1_700_000_000_000,
        reply: [{ type: 'text', text: 'Postgres' }, { type: 'image', data: 'iVBO', mime: 'image/png' }],
      })
      expect(s.state.selected).toBe('') // no longer the reply's target

      s.markAnsweredHere('b', [{ type: 'text', text: 'mine' }], 'pc')
      s.handle(frame({ Cmd: 'AskQuestionReplyNotification', AskQuestionRequest: { ID: 'b' }, Nickname: 'pc', AskQuestionResponse: { ID: 'b' } }))
      expect(s.find('b')).toMatchObject({ status: 'answeredHere', reply: [{ type: 'text', text: 'mine' }] })
    })

    it('two devices answer at once: the one that lost shows the answer that won, and gets its own words back', () => {
      const s = createStore('t')
      s.handle(ask('r'))
      s.markAnsweredHere('r', [{ type: 'text', text: 'mine' }], 'pc')
      // The winner's notification comes before this device's refusal.
      s.handle(frame({
        Cmd: 'AskQuestionReplyNotification', AskQuestionRequest: { ID: 'r' }, Nickname: 'phone',
        AskQuestionResponse: { ID: 'r', contents: [{ type: 1, text: { text: 'theirs' } }] },
      }))
      expect(s.refused('r', 'not_pending')).toEqual([{ type: 'text', text: 'mine' }])
      expect(s.find('r')).toMatchObject({ status: 'answeredElsewhere', answeredBy: 'phone', reply: [{ type: 'text', text: 'theirs' }] })
    })

    it('cancelled by the agent, or timed out', () => {
      const s = createStore('t')
      s.handle(ask('c'))
      s.handle(ask('t'))
      s.handle(frame({ Cmd: 'RequestCancelled', RequestCancelledNotification: { requestId: 'c', reason: 'cancelled' } }))
      s.handle(frame({ Cmd: 'RequestCancelled', RequestCancelledNotification: { requestId: 't', reason: 'timeout' } }))
      s.handle(frame({ Cmd: 'RequestCancelled', RequestCancelledNotification: { requestId: 'unknown', reason: 'timeout' } }))
      expect(s.state.items.map((i) => [i.id, i.status])).toEqual([['c', 'cancelled'], ['t', 'timedOut']])
    })

    it('each reason a withdrawal carries keeps what really happened', () => {
      const s = createStore('t')
      const reasons = { c: 'cancelled', a: 'abandoned', n: 'not saved', g: 'no longer pending', t: 'timeout', o: 'some future reason' }
      for (const [id, reason] of Object.entries(reasons)) {
        s.handle(ask(id))
        s.handle(frame({ Cmd: 'RequestCancelled', RequestCancelledNotification: { requestId: id, reason } }))
      }
      expect(s.state.items.map((i) => [i.id, i.status, i.ended])).toEqual([
        ['c', 'cancelled', 'agent'], // the agent withdrew it
        ['a', 'cancelled', 'agentLeft'], // its agent went away and did not come back
        ['n', 'cancelled', 'notSaved'],
        ['g', 'closed', undefined],
        ['t', 'timedOut', undefined],
        ['o', 'cancelled', undefined], // a reason this page does not know: closed unanswered, nothing more
      ])
    })

    it('an answer names the device that gave it, and follows that device when it is renamed', () => {
      const s = createStore('t')
      s.handle(ask('q'))
      s.handle(ask('mine'))
      s.handle(frame({ Cmd: 'GetOnlineUsers', GetOnlineUsersResponse: { onlineUsers: [{ clientId: 'c-1', nickname: 'Pixel 8 · Chrome', connectedAt: 1n }] } }))
      s.handle(frame({
        Cmd: 'AskQuestionReplyNotification', AskQuestionRequest: { ID: 'q' }, Nickname: 'Pixel 8 · Chrome',
        StrParam: 'Response received from client c-1 (Pixel 8 · Chrome)',
        AskQuestionResponse: { ID: 'q', contents: [{ type: 1, text: { text: 'yes' } }] },
      }))
      expect(s.find('q')).toMatchObject({ answeredBy: 'Pixel 8 · Chrome', answeredById: 'c-1' })
      s.markAnsweredHere('mine', [{ type: 'text', text: 'ok' }], 'Linux · Chrome')
      // The phone is renamed: the others hear it connected again under the same id.
      s.handle(frame({
        Cmd: 'UserConnectionStatusNotification',
        UserConnectionStatusNotification: { status: 'connected', user: { clientId: 'c-1', nickname: "Anna's phone", connectedAt: 1n } },
      }))
      expect(s.find('q')?.answeredBy).toBe("Anna's phone")
      expect(JSON.parse(localStorage.getItem('t')!).find((i: { id: string }) => i.id === 'q').answeredBy).toBe("Anna's phone")
      expect(s.find('mine')?.answeredBy).toBe('Linux · Chrome') // not that device's
      // This device is renamed: its own answers follow.
      s.renamed('c-me', 'Desk', true)
      expect(s.find('mine')?.answeredBy).toBe('Desk')
      expect(s.find('q')?.answeredBy).toBe("Anna's phone")
    })

    it('who answered: the client id from the notification, without the nickname after it', () => {
      expect(answererId('Response received from client c-1 (Pixel 8 · Chrome)', 'Pixel 8 · Chrome')).toBe('c-1')
      expect(answererId('Task completion confirmed by client c-2', '')).toBe('c-2')
      expect(answererId('Response received from client rpc:Pixel (x) (Pixel (x))', 'Pixel (x)')).toBe('rpc:Pixel (x)')
      expect(answererId('Response received from client phone', 'phone')).toBeUndefined() // named by its nickname alone
      expect(answererId('', 'phone')).toBeUndefined()
    })

    it('agent gone: from the pending list and from a status notification, both ways', () => {
      const s = createStore('t')
      s.handle(pending({ id: 'g', gone: true }))
      expect(s.find('g')?.agentGone).toBe(true)
      s.handle(frame({ Cmd: 'RequestAgentStatus', RequestAgentStatusNotification: { requestId: 'g', agentGone: false } }))
      expect(s.find('g')?.agentGone).toBe(false)
      s.handle(frame({ Cmd: 'RequestAgentStatus', RequestAgentStatusNotification: { requestId: 'g', agentGone: true } }))
      expect(s.find('g')).toMatchObject({ agentGone: true, status: 'waiting' }) // still answerable
      expect(JSON.parse(localStorage.getItem('t')!)[0].agentGone).toBe(true)
    })

    it('a big room only says presence changed; the view fetches the list', () => {
      const s = createStore('t')
      expect(s.handle(frame({ Cmd: 'UserConnectionStatusNotification', UserConnectionStatusNotification: { status: 'changed' } }))).toBe('presence-changed')
    })
  })

  describe('history', () => {
    const page = (more: boolean, ...items: { id: string; at: number; status: string; kind?: string; answer?: string; by?: string; byId?: string; reason?: string }[]) => frame({
      Cmd: 'GetHistory',
      GetHistoryResponse: {
        more,
        items: items.map((h) => ({
          messageType: h.kind ?? 'AskQuestion',
          ...(h.kind === 'TaskFinish'
            ? { taskFinishRequest: { ID: h.id, Request: { Summary: `Report ${h.id}` } } }
            : { askQuestionRequest: { ID: h.id, Request: { Question: `Question ${h.id}`, Timeout: 60 } } }),
          createdAt: BigInt(h.at), closedAt: BigInt(h.at + 500), status: h.status, answeredBy: h.by ?? '', answeredById: h.byId ?? '', reason: h.reason ?? '',
          response: h.answer ? { contents: [{ type: 1, text: { text: h.answer } }] } : undefined,
        })),
      },
    })

    it("says answered here for an answer from this device's notification, given while no page was open", () => {
      localStorage.setItem('aa.push.' + tokenTag('tok'), 'sub-1')
      const s = createStore('t', 'tok')
      s.handle(ask('w')) // cached from before the app was closed
      s.handle(page(false,
        { id: 'mine', at: 3000, status: 'answered', answer: 'Yes', by: 'Pixel 8 · Chrome', byId: 'push:sub-1' },
        { id: 'theirs', at: 2000, status: 'answered', answer: 'No', by: 'Laptop', byId: 'push:sub-2' },
        { id: 'w', at: 1000, status: 'answered', answer: 'Go', by: 'Pixel 8 · Chrome', byId: 'push:sub-1' }))
      expect(['mine', 'theirs', 'w'].map((id) => s.find(id)?.status)).toEqual(['answeredHere', 'answeredElsewhere', 'answeredHere'])
    })

    it('says why an item closed unanswered, as the live notice would', () => {
      const s = createStore('t')
      s.handle(page(false,
        { id: 'c1', at: 4000, status: 'cancelled', reason: 'abandoned' },
        { id: 'c2', at: 3000, status: 'cancelled', reason: 'cancelled' },
        { id: 'c3', at: 2000, status: 'cancelled', reason: 'not saved' },
        { id: 'c4', at: 1000, status: 'cancelled' },
        { id: 'c5', at: 500, status: 'cancelled', reason: 'no longer pending' }))
      expect(['c1', 'c2', 'c3', 'c4', 'c5'].map((id) => [s.find(id)?.status, s.find(id)?.ended])).toEqual([
        ['cancelled', 'agentLeft'], ['cancelled', 'agent'], ['cancelled', 'notSaved'], ['cancelled', undefined], ['cancelled', undefined]])
    })

    it('pages back from the oldest item shown while the server has more', () => {
      const s = createStore('t')
      expect(s.olderPage()).toEqual({ Cmd: 'GetHistory', GetHistoryRequest: { before: 1_700_000_000_000n, limit: 30 } })
      s.handle(page(true,
        { id: 'h3', at: 3000, status: 'answered', answer: 'three', by: 'phone' },
        { id: 'h2', at: 2000, status: 'timeout', kind: 'TaskFinish' }))
      expect(s.state.items.map((i) => [i.id, i.kind, i.status, i.createdAt])).toEqual([
        ['h2', 'TaskFinish', 'timedOut', 2000], ['h3', 'AskQuestion', 'answeredElsewhere', 3000]])
      expect(s.find('h3')).toMatchObject({ text: 'Question h3', answeredBy: 'phone', answeredAt: 3500, timeout: 60, reply: [{ type: 'text', text: 'three' }] })
      expect(s.find('h2')).toMatchObject({ text: 'Report h2', answeredBy: undefined, reply: [] })
      expect(s.olderPage()).toEqual({ Cmd: 'GetHistory', GetHistoryRequest: { before: 2000n, limit: 30 } })

      s.handle(page(false, { id: 'h1', at: 1000, status: 'cancelled' }, { id: 'h2', at: 2000, status: 'timeout' }))
      expect(s.state.items.map((i) => [i.id, i.status])).toEqual([['h1', 'cancelled'], ['h2', 'timedOut'], ['h3', 'answeredElsewhere']])
      expect(s.state.historyMore).toBe(false)
      expect(s.olderPage()).toBeUndefined()
    })

    it('tells how a request this device saw end while it was away ended', () => {
      const s = createStore('t')
      s.handle(ask('away'))
      s.handle(pending()) // the server no longer lists it: settled while away
      expect(s.find('away')?.status).toBe('closed')
      s.handle(page(false, { id: 'away', at: 1_699_999_999_000, status: 'answered', answer: 'done on the phone', by: 'phone' }))
      expect(s.find('away')).toMatchObject({ status: 'answeredElsewhere', answeredBy: 'phone', reply: [{ type: 'text', text: 'done on the phone' }] })
    })

    it('clearing keeps only what is still waiting', () => {
      const s = createStore('t')
      s.handle(page(false, { id: 'old', at: 1, status: 'answered' }))
      s.handle(ask('now'))
      s.clear()
      expect(ids(s.state.items)).toEqual(['now'])
      expect(ids(JSON.parse(localStorage.getItem('t')!))).toEqual(['now'])
    })
  })

  describe('chat', () => {
    it('a line received counts as unread until the chat is opened; a line sent is ours', () => {
      const s = createStore('t')
      const line = (id: string) => frame({ Cmd: 'ChatMessageNotification', ChatMessageNotification: { chatMessage: {
        messageId: id, senderClientId: 'phone-1', senderNickname: 'phone', content: `hi ${id}`, sentAt: 1_700_000_100n } } })
      s.handle(line('m1'))
      s.handle(line('m2'))
      expect(s.state.unreadChat).toEqual({ 'phone-1': 2 })
      expect(s.state.chats[0]).toEqual({ id: 'm1', peer: 'phone-1', from: 'phone', mine: false, text: 'hi m1', at: 1_700_000_100_000 })
      s.openChat('phone-1')
      expect(s.state.unreadChat['phone-1']).toBe(0)
      s.chatSent('phone-1', 'laptop', 'hello')
      expect(s.state.chats[2]).toMatchObject({ peer: 'phone-1', from: 'laptop', mine: true, text: 'hello', at: 1_700_000_000_000 })
    })
  })
})
