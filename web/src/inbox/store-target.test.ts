import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createStore } from './store'
import { ask, frame, ids, memoryStorage } from './testing'

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

  describe('the reply\'s target', () => {
    it('a reply goes under the Cmd of its request\'s kind, to a request shown here', () => {
      const s = createStore('t')
      s.handle(ask('q'))
      s.handle(frame({ Cmd: 'TaskFinish', TaskFinishRequest: { ID: 'r', Request: { Summary: 'done' } } }))
      expect([s.reply('q', [])?.Cmd, s.reply('r', [])?.Cmd, s.reply('unknown', [])]).toEqual(['AskQuestionReply', 'TaskFinishReply', undefined])
    })

    it('follows the project shown', () => {
      const s = createStore('t')
      s.handle(ask('a', 'A', { ProjectDirectory: '/one' }))
      s.handle(ask('b', 'B', { ProjectDirectory: '/two' }))
      expect(s.target.value).toBeUndefined()
      expect(s.projects.value).toEqual(['/one', '/two'])
      s.state.project = '/two'
      expect(ids(s.shown.value)).toEqual(['b'])
      expect(s.target.value?.id).toBe('b')
    })

    it('a new question: the only one waiting is the target; with more, the person picks unless they are writing to the one chosen', () => {
      const s = createStore('t')
      s.arrived(s.handle(ask('a'))!, false)
      expect(s.state.selected).toBe('a')
      s.arrived(s.handle(ask('b'))!, false)
      expect(s.state.selected).toBe('') // two waiting: none chosen for the person
      expect(s.target.value).toBeUndefined()
      s.state.selected = 'a'
      s.arrived(s.handle(ask('c'))!, true) // writing to a: a stays
      expect(s.target.value?.id).toBe('a')
      s.arrived(s.handle(ask('d'))!, false) // chosen but nothing written: pick again
      expect(s.target.value).toBeUndefined()
    })

    it('after an answer, the only question left is next; with more, none', () => {
      const s = createStore('t')
      for (const id of ['a', 'b', 'c']) s.handle(ask(id))
      s.state.selected = 'a'
      s.markAnsweredHere('a', [{ type: 'text', text: 'x' }], 'pc')
      expect(s.state.selected).toBe('')
      s.markAnsweredHere('b', [{ type: 'text', text: 'y' }], 'pc')
      expect(s.state.selected).toBe('c')
    })

    it('a reply the server refuses comes back to the person, once', () => {
      const s = createStore('t')
      s.handle(ask('a'))
      const parts = [{ type: 'text' as const, text: 'typed' }]
      s.markAnsweredHere('a', parts, 'pc')
      expect(s.refused('other')).toBeUndefined()
      expect(s.refused('a')).toEqual(parts)
      expect(s.find('a')).toMatchObject({ status: 'closed', reply: undefined, answeredBy: undefined })
      expect(s.refused('a')).toBeUndefined()
    })

    it('an answer the server could not save leaves the question open and chosen', () => {
      const s = createStore('t')
      s.handle(ask('a'))
      s.handle(ask('b'))
      s.state.selected = 'a'
      const parts = [{ type: 'text' as const, text: 'typed' }]
      s.markAnsweredHere('a', parts, 'pc')
      expect(s.refused('a', 'not_saved')).toEqual(parts)
      expect(s.find('a')).toMatchObject({ status: 'waiting', reply: undefined, answeredBy: undefined })
      expect(s.state.selected).toBe('a')
    })

  })

})
