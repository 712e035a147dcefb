import { describe, expect, it } from 'vitest'
import { create } from '@bufbuild/protobuf'
import { WebsocketMessageSchema } from '../gen/agentassistproto/agentassist_pb'
import { createStore } from './store'

type Init = Parameters<typeof create<typeof WebsocketMessageSchema>>[1]
const frame = (init: Init) => create(WebsocketMessageSchema, init)

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
