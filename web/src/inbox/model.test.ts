import { describe, expect, it } from 'vitest'
import { chatFrame, loginRequests, matches, replyFrame, replyTarget, tabTitle, type Item } from './model'

describe('the inbox\'s rules and frames', () => {
  it('a fresh login fetches the pending list, the newest history page and who is online; a resumed one only who is online', () => {
    expect(loginRequests(false)).toEqual([
      { Cmd: 'GetPendingMessages', GetPendingMessagesRequest: {} },
      { Cmd: 'GetHistory', GetHistoryRequest: { limit: 30 } },
      { Cmd: 'GetOnlineUsers', GetOnlineUsersRequest: {} },
    ])
    expect(loginRequests(true)).toEqual([{ Cmd: 'GetOnlineUsers', GetOnlineUsersRequest: {} }])
  })

  it('the reply\'s target is the question chosen, or the only one waiting, otherwise none', () => {
    const item = (id: string): Item => ({ id, kind: 'AskQuestion', project: '', text: id, createdAt: 0, timeout: 0, status: 'waiting' })
    const [a, b] = [item('a'), item('b')]
    expect(replyTarget([a, b], 'b')).toBe(b)
    expect(replyTarget([a], '')).toBe(a)
    expect(replyTarget([a], 'gone')).toBe(a)
    expect(replyTarget([a, b], '')).toBeUndefined()
    expect(replyTarget([a, b], 'gone')).toBeUndefined()
    expect(replyTarget([], '')).toBeUndefined()
  })

  it('a reply takes the Cmd of the request\'s kind, text and images as MCP contents', () => {
    const parts = [{ type: 'text' as const, text: 'ok' }, { type: 'image' as const, data: 'AAAA', mime: 'image/jpeg' }, { type: 'image' as const, data: 'BBBB' }]
    const contents = [
      { type: 1, text: { type: 'text', text: 'ok' } },
      { type: 2, image: { type: 'image', data: 'AAAA', mimeType: 'image/jpeg' } },
      { type: 2, image: { type: 'image', data: 'BBBB', mimeType: 'image/png' } },
    ]
    expect(replyFrame({ id: 'q', kind: 'AskQuestion' }, parts)).toEqual(
      { Cmd: 'AskQuestionReply', AskQuestionRequest: { ID: 'q' }, AskQuestionResponse: { ID: 'q', contents } })
    expect(replyFrame({ id: 'r', kind: 'TaskFinish' }, parts)).toEqual(
      { Cmd: 'TaskFinishReply', TaskFinishRequest: { ID: 'r' }, TaskFinishResponse: { ID: 'r', contents } })
  })

  it('a chat line goes to one device', () => {
    expect(chatFrame('phone-1', 'hello')).toEqual({ Cmd: 'SendChatMessage', SendChatMessageRequest: { receiverClientId: 'phone-1', content: 'hello' } })
  })

  it('the tab\'s title counts what waits for the person', () => {
    expect(tabTitle('Agent Assistant', 3)).toBe('(3) Agent Assistant')
    expect(tabTitle('Agent Assistant', 0)).toBe('Agent Assistant')
  })

  it('a search matches the text, the project, the agent, the model and the answer; every word somewhere', () => {
    const it: Item = {
      id: 'x', kind: 'AskQuestion', project: '/home/me/shop', text: 'Which **database** for the service?', createdAt: 0, timeout: 0,
      status: 'answeredElsewhere', agent: 'Claude Code', model: 'claude-opus-4', reply: [{ type: 'text', text: 'PostgreSQL' }],
    }
    for (const q of ['', 'database', 'DataBase', 'shop', 'claude code', 'opus', 'postgres', 'shop database', '  shop   claude ']) expect(matches(it, q), q).toBe(true)
    for (const q of ['mysql', 'shop mysql', 'cursor', '**']) expect(matches(it, q), q).toBe(false)
  })
})
