import { describe, expect, it } from 'vitest'
import { notificationOptions, titleOf, type PushMessage } from './pushmessage'

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

  it('say the options they leave out are in the app', () => {
    const ten = { ...ask, options: 10, actions: ['Production', 'Staging', 'Canary'] }
    expect(notificationOptions(ten, 2).body).toBe('Which to deploy?\n\n8 more answers in the app')
    expect(notificationOptions({ ...ten, options: 4 }, 3).body).toBe('Which to deploy?\n\n1 more answer in the app')
    expect(notificationOptions(ten, 2, 'zh-CN').body).toBe('Which to deploy?\n\n应用里还有 8 个答案')
    // Every option a button: the body as it came.
    expect(notificationOptions({ ...ten, options: 3 }, 3).body).toBe('Which to deploy?')
    // Quick replies, not options: nothing is left out.
    expect(notificationOptions({ ...ask, actions: ['Yes', 'No', 'Later'] }, 2).body).toBe('Which to deploy?')
  })
})

describe('a notification\'s title', () => {
  it('is the server\'s in English, and worded in the language chosen from its parts', () => {
    const named = { ...ask, title: 'shop · Claude asks', asker: 'Claude', project: 'shop' }
    expect(titleOf(named, 'en-US')).toBe('shop · Claude asks')
    expect(titleOf(named, 'zh-CN')).toBe('shop · Claude 提问')
    expect(titleOf({ ...named, kind: 'report', title: 'shop · Claude reports' }, 'zh-CN')).toBe('shop · Claude 完成了任务')
    // No name from the agent, no project: the language's own words.
    expect(titleOf({ ...ask, title: 'Your agent asks' }, 'zh-CN')).toBe('你的 Agent 提问')
    // A push of a server that sends no parts keeps its title.
    expect(titleOf({ ...ask, title: 'shop · Claude asks', kind: undefined }, 'zh-CN')).toBe('shop · Claude asks')
    expect(titleOf({ ...ask, title: undefined, kind: undefined }, 'zh-CN')).toBe('agentassistant')
  })

  it('sets an Arabic or Hebrew project or agent name apart in the Chinese title, as the server does in English', () => {
    const named = { ...ask, title: '\u2068متجر\u2069 · Claude asks', asker: 'وكيل', project: 'متجر' }
    expect(titleOf(named, 'zh-CN')).toBe('\u2068متجر\u2069 · \u2068وكيل\u2069 提问')
    expect(titleOf({ ...named, project: '商店', asker: 'Claude' }, 'zh-CN')).toBe('商店 · Claude 提问')
  })
})
