import { describe, expect, it } from 'vitest'
import { cleanReplies } from './replies'
import { notificationOptions } from './pushmessage'

describe('quick replies', () => {
  it('keep what the server takes: at most 8, each 1 to 40 bytes, no repeats', () => {
    expect(cleanReplies([' Yes ', '', 'Yes', 'No'])).toEqual(['Yes', 'No'])
    expect(cleanReplies(Array.from({ length: 10 }, (_, i) => `r${i}`))).toHaveLength(8)
    const long = cleanReplies(['好'.repeat(20)])[0]!
    expect(new TextEncoder().encode(long).length).toBeLessThanOrEqual(40)
    expect(long).toBe('好'.repeat(13)) // cut on a character, never inside one
  })
})

describe('a push as a notification', () => {
  const m = { v: 1, type: 'ask' as const, id: 'r1', tag: 't1', kind: 'question' as const, title: 'T', body: 'B',
    actions: ['Ship it', 'Hold on', 'Stop'], cap: 'c', answer: '/push/answer', url: '/?request=r1' }
  it('has as many buttons as the browser shows, named after the answers they post', () => {
    expect(notificationOptions(m, 2).actions).toEqual([{ action: 'a0', title: 'Ship it' }, { action: 'a1', title: 'Hold on' }])
    expect(notificationOptions(m, 0).actions).toEqual([])
  })
  it('keeps the question up until it is answered; a report may go', () => {
    const o = notificationOptions(m, 2)
    expect(o).toMatchObject({ tag: 't1', body: 'B', requireInteraction: true,
      data: { id: 'r1', cap: 'c', answer: '/push/answer', url: '/?request=r1', actions: ['Ship it', 'Hold on', 'Stop'] } })
    expect(notificationOptions({ ...m, kind: 'report' }, 2).requireInteraction).toBe(false)
  })
})
