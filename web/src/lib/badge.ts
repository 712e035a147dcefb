// The app's badge with no page open: the sum of what waits under each
// token this browser is subscribed under. A push carries its token's
// count and the subscription it came under (an opaque ID the server gave
// this browser for that token, never the token); each is kept under its
// subscription, so that one token's push does not overwrite another's.
// Kept in IndexedDB: a service worker forgets its variables between
// pushes, and the page reads the others' counts to add its own.

import { idbStore } from './idb'

// Counts is where the counts are kept, one per subscription.
export interface Counts {
  set(sub: string, n: number): Promise<void>
  all(): Promise<Map<string, number>>
  delete(sub: string): Promise<void>
  clear(): Promise<void>
}

// maxSubs bounds what is kept: a token's subscriptions are 32 on the
// server, a browser's far fewer; past it the smallest counts go.
export const maxSubs = 32

// validCount says whether n is a count a push may carry.
export function validCount(n: unknown): n is number {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0
}

// record keeps sub's count and returns the sum across subscriptions;
// without a sub (an older server's push) the push's count is the badge.
export async function record(c: Counts, sub: string | undefined, n: number): Promise<number> {
  if (!sub) return n
  await c.set(sub, n)
  const all = await c.all()
  if (all.size > maxSubs) {
    const small = [...all].filter(([s]) => s !== sub).sort((a, b) => a[1] - b[1]).slice(0, all.size - maxSubs)
    for (const [s] of small) {
      await c.delete(s)
      all.delete(s)
    }
  }
  return sum(all)
}

// answered lowers sub's count by one (its notification's button answered
// a question it counted) and returns the sum; undefined when sub has no
// count kept.
export async function answered(c: Counts, sub: string | undefined): Promise<number | undefined> {
  if (!sub) return undefined
  const all = await c.all()
  const n = all.get(sub)
  if (n === undefined) return undefined
  all.set(sub, Math.max(0, n - 1))
  await c.set(sub, all.get(sub)!)
  return sum(all)
}

// others is the sum of the counts of subscriptions other than own: what
// an open page, which counts its own token's, adds to its count.
export async function others(c: Counts, own: string): Promise<number> {
  const all = await c.all()
  all.delete(own)
  return sum(all)
}

function sum(all: Map<string, number>): number {
  let n = 0
  for (const v of all.values()) n += v
  return n
}

// idbCounts keeps the counts in this origin's IndexedDB, shared by the
// service worker and the pages.
export function idbCounts(factory: IDBFactory = indexedDB): Counts {
  const s = idbStore('aa-badge', 'counts', factory)
  return {
    set: (sub, n) => s.put(sub, n),
    delete: (sub) => s.delete(sub),
    clear: () => s.clear(),
    all: async () => new Map((await s.entries()).filter((e): e is [string, number] => validCount(e[1]))),
  }
}
