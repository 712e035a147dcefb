import { describe, expect, it } from 'vitest'
import { answered, maxSubs, others, record, type Counts } from './badge'

// memCounts keeps counts as IndexedDB does (idbCounts), in memory.
function memCounts(): Counts & { m: Map<string, number> } {
  const m = new Map<string, number>()
  return {
    m,
    set: async (s, n) => void m.set(s, n),
    delete: async (s) => void m.delete(s),
    clear: async () => m.clear(),
    all: async () => new Map(m),
  }
}

describe('the badge across tokens', () => {
  it('is the sum of each subscription\'s last count, not the last push\'s', async () => {
    const c = memCounts()
    expect(await record(c, 'sub-a', 2)).toBe(2)
    expect(await record(c, 'sub-b', 1)).toBe(3) // token B's push: A's two still wait
    expect(await record(c, 'sub-a', 1)).toBe(2) // one of A's settled
    expect(await record(c, 'sub-b', 0)).toBe(1)
    expect(await record(c, 'sub-a', 0)).toBe(0)
  })

  it('takes an older server\'s push, with no subscription, as the count', async () => {
    const c = memCounts()
    await record(c, 'sub-a', 4)
    expect(await record(c, undefined, 1)).toBe(1)
  })

  it('counts one less under the subscription whose button answered', async () => {
    const c = memCounts()
    await record(c, 'sub-a', 2)
    await record(c, 'sub-b', 3)
    expect(await answered(c, 'sub-a')).toBe(4)
    expect(await answered(c, 'sub-a')).toBe(3)
    expect(await answered(c, 'sub-a')).toBe(3) // never below none
    expect(await answered(c, 'sub-gone')).toBeUndefined()
  })

  it('gives an open page the other tokens\' counts to add to its own', async () => {
    const c = memCounts()
    await record(c, 'sub-a', 2)
    await record(c, 'sub-b', 3)
    expect(await others(c, 'sub-a')).toBe(3)
    expect(await others(c, '')).toBe(5)
  })

  it('keeps a bounded number of subscriptions, the new one always', async () => {
    const c = memCounts()
    for (let i = 0; i < maxSubs + 5; i++) await record(c, 'sub-' + i, i + 1)
    expect(c.m.size).toBe(maxSubs)
    expect(c.m.get('sub-' + (maxSubs + 4))).toBe(maxSubs + 5)
    await record(c, 'sub-new', 0)
    expect(c.m.get('sub-new')).toBe(0)
  })
})
