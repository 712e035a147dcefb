import { describe, expect, it } from 'vitest'
import { chatFrame, loginRequests, replyFrame, replyTarget, type Item } from './model'

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
})
