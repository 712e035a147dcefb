import { describe, expect, it } from 'vitest'
import { create, fromBinary, toBinary } from '@bufbuild/protobuf'
import { envelope, parseEnvelope } from './protocol'
import { WebsocketMessageSchema } from '../gen/agentassistproto/agentassist_pb'

describe('mvp-0.2 envelopes', () => {
  it('encodes as the seed shows', () => {
    expect(JSON.parse(envelope('tool.result', { ok: true, toolName: 'select' }, { replyTo: 'req-003' }))).toEqual({
      v: 'mvp-0.2', type: 'tool.result', replyTo: 'req-003', payload: { ok: true, toolName: 'select' },
    })
    expect(JSON.parse(envelope('state.updated', { source: 'user' }))).not.toHaveProperty('id')
  })
  it('parses the seed example and refuses the rest', () => {
    const e = parseEnvelope('{"v":"mvp-0.2","type":"tool.call","id":"req-003","payload":{"toolName":"select","params":{"itemId":"m1"},"reason":"r"}}')
    expect(e).toMatchObject({ type: 'tool.call', id: 'req-003', payload: { toolName: 'select' } })
    for (const bad of ['', 'nope', '[]', '{"v":"mvp-0.1","type":"x"}', '{"v":"mvp-0.2"}', '{"v":"mvp-0.2","type":7}', 42])
      expect(parseEnvelope(bad)).toBeNull()
    expect(parseEnvelope('{"v":"mvp-0.2","type":"x","payload":[1]}')?.payload).toEqual({})
  })
})

describe('/ws protobuf frames', () => {
  it('round-trips a reply with text and image, keeping the wire names', () => {
    const m = create(WebsocketMessageSchema, {
      Cmd: 'AskQuestionReply',
      AskQuestionRequest: { ID: 'r1' },
      AskQuestionResponse: { ID: 'r1', contents: [{ type: 1, text: { type: 'text', text: 'yes' } }, { type: 2, image: { type: 'image', data: 'AAAA', mimeType: 'image/png' } }] },
    })
    const back = fromBinary(WebsocketMessageSchema, toBinary(WebsocketMessageSchema, m))
    expect(back.Cmd).toBe('AskQuestionReply')
    expect(back.AskQuestionResponse?.contents[1]?.image?.mimeType).toBe('image/png')
    // Field 1 (Cmd) first on the wire: 0x0a, length, bytes.
    expect(Array.from(toBinary(WebsocketMessageSchema, create(WebsocketMessageSchema, { Cmd: 'UserLogin' })).slice(0, 2))).toEqual([0x0a, 9])
  })
})
