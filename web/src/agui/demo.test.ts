import { describe, expect, it } from 'vitest'
import type { Message } from '@ag-ui/core'
import { applyTool, chatLines } from './demo'

const isColour = (c: string) => ['blue', '#336699', 'rgb(1, 2, 3)'].includes(c)

describe('the demo frontend tool', () => {
  it('changes the background and answers with a tool message for the call', () => {
    const { msg, state } = applyTool('c1', 'change_background', '{"color":" blue "}', { background: 'white' }, isColour)
    expect(state.background).toBe('blue')
    expect(msg).toMatchObject({ role: 'tool', toolCallId: 'c1' })
    expect(JSON.parse(msg.content as string)).toEqual({ status: 'ok', background: 'blue' })
    expect('error' in msg).toBe(false)
  })

  it('refuses what is not a colour, an unknown tool and broken arguments, and changes nothing', () => {
    for (const [name, args] of [['change_background', '{"color":"url(x)"}'], ['change_background', '{}'], ['change_background', '{'], ['delete', '{"color":"blue"}']]) {
      const { msg, state } = applyTool('c2', name, args, { background: 'white' }, isColour)
      expect(state.background, `${name} ${args}`).toBe('white')
      expect(msg).toMatchObject({ role: 'tool', toolCallId: 'c2' })
      expect((msg as Message & { error?: string }).error, `${name} ${args}`).toBeTruthy()
    }
  })
})

describe('the chat', () => {
  it('shows the user and the agent, the agent\'s tool calls, not the tool messages', () => {
    const lines = chatLines([
      { id: 'u', role: 'user', content: 'blue please' },
      { id: 'a', role: 'assistant', content: '', toolCalls: [{ id: 'c', type: 'function', function: { name: 'change_background', arguments: '{"color":"blue"}' } }] },
      { id: 't', role: 'tool', toolCallId: 'c', content: '{"status":"ok"}' },
      { id: 'a2', role: 'assistant', content: '', toolCalls: [{ id: 'd', type: 'function', function: { name: 'change_background', arguments: '{"color":"x"}' } }] },
      { id: 't2', role: 'tool', toolCallId: 'd', content: '{"status":"error"}', error: 'not a colour' },
      { id: 'b', role: 'assistant', content: 'Done.' },
    ])
    expect(lines.map((l) => [l.role, l.text, l.tools.map((t) => `${t.name}${t.failed ? ' failed' : ''}`).join()])).toEqual([
      ['user', 'blue please', ''], ['assistant', '', 'change_background'], ['assistant', '', 'change_background failed'], ['assistant', 'Done.', ''],
    ])
  })
})
