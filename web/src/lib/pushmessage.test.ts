import { describe, expect, it } from 'vitest'
import { notificationOptions, type PushMessage } from './pushmessage'

const ask: PushMessage = { v: 1, type: 'ask', id: 'r1', tag: 't1', kind: 'question', title: 'shop · Claude asks', body: 'Which to deploy?',
  url: '/?request=r1', cap: 'c', answer: '/push/answer', sub: 's1' }

describe('a notification\'s buttons', () => {
  it('are the answers for a question of one choice', () => {
    const o = notificationOptions({ ...ask, actions: ['Web', 'API', 'Worker'] }, 2)
    expect(o.actions).toEqual([{ action: 'a0', title: 'Web' }, { action: 'a1', title: 'API' }])
  })

  it('open the card first for a question of several choices, then the replies it takes', () => {
    const o = notificationOptions({ ...ask, choose: true, actions: ['Not now', 'Later'] }, 2)
    expect(o.actions).toEqual([{ action: 'open', title: 'Choose…' }, { action: 'a0', title: 'Not now' }])
    expect(o.data).toMatchObject({ url: '/?request=r1', actions: ['Not now', 'Later'], sub: 's1' })
    expect(notificationOptions({ ...ask, choose: true }, 3, 'zh-CN').actions).toEqual([{ action: 'open', title: '去选择…' }])
  })
})
