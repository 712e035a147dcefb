// Frames and a localStorage for the inbox store's tests.
import { create } from '@bufbuild/protobuf'
import { WebsocketMessageSchema } from '../gen/agentassistproto/agentassist_pb'

type Init = Parameters<typeof create<typeof WebsocketMessageSchema>>[1]
export const frame = (init: Init) => create(WebsocketMessageSchema, init)

// An in-memory localStorage, so what the store keeps across reloads is
// tested the same on every Node version.
export function memoryStorage() {
  const m = new Map<string, string>()
  return { getItem: (k: string) => m.get(k) ?? null, setItem: (k: string, v: string) => void m.set(k, String(v)) }
}

export const ask = (ID: string, Question = `Question ${ID}`, more: Record<string, unknown> = {}) =>
  frame({ Cmd: 'AskQuestion', AskQuestionRequest: { ID, Request: { Question, ...more } } })
export const pending = (...ps: { id: string; kind?: string; at?: bigint; gone?: boolean; project?: string }[]) => frame({
  Cmd: 'GetPendingMessages',
  GetPendingMessagesResponse: {
    pendingMessages: ps.map((p) => p.kind === 'TaskFinish'
      ? { messageType: 'TaskFinish', taskFinishRequest: { ID: p.id, Request: { Summary: `Report ${p.id}`, ProjectDirectory: p.project } }, createdAt: p.at ?? 0n, agentGone: !!p.gone }
      : { messageType: 'AskQuestion', askQuestionRequest: { ID: p.id, Request: { Question: `Question ${p.id}`, ProjectDirectory: p.project } }, createdAt: p.at ?? 0n, timeout: 600, agentGone: !!p.gone }),
  },
})
export const ids = (items: { id: string }[]) => items.map((i) => i.id)
