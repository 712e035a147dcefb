// One object store of this origin's IndexedDB, shared by the pages and
// the service worker (which forgets its variables between events).
export interface Store {
  get(key: string): Promise<unknown>
  put(key: string, value: unknown): Promise<void>
  delete(key: string): Promise<void>
  clear(): Promise<void>
  entries(): Promise<[string, unknown][]>
}

// idbStore is the store name of the database db (version 1, the store
// made with it).
export function idbStore(db: string, name: string, factory: IDBFactory = indexedDB): Store {
  const open = () => new Promise<IDBDatabase>((ok, fail) => {
    const r = factory.open(db, 1)
    r.onupgradeneeded = () => r.result.createObjectStore(name)
    r.onsuccess = () => ok(r.result)
    r.onerror = () => fail(r.error)
  })
  const run = async <T>(mode: IDBTransactionMode, f: (s: IDBObjectStore) => IDBRequest<T> | undefined): Promise<T | undefined> => {
    const d = await open()
    try {
      return await new Promise<T | undefined>((ok, fail) => {
        const tx = d.transaction(name, mode)
        const r = f(tx.objectStore(name))
        tx.oncomplete = () => ok(r?.result)
        tx.onerror = () => fail(tx.error)
        tx.onabort = () => fail(tx.error)
      })
    } finally {
      d.close()
    }
  }
  return {
    get: (key) => run('readonly', (s) => s.get(key)),
    put: async (key, v) => void (await run('readwrite', (s) => s.put(v, key))),
    delete: async (key) => void (await run('readwrite', (s) => s.delete(key))),
    clear: async () => void (await run('readwrite', (s) => s.clear())),
    entries: async () => {
      const out: [string, unknown][] = []
      await run('readonly', (s) => {
        const r = s.openCursor()
        r.onsuccess = () => {
          const cur = r.result
          if (!cur) return
          if (typeof cur.key === 'string') out.push([cur.key, cur.value])
          cur.continue()
        }
        return undefined
      })
      return out
    },
  }
}

// pushKept is what the service worker reads of the pages' choices, with
// no page open (lib/push.ts, lib/pushmessage.ts); undefined without
// IndexedDB.
export function pushKept(factory?: IDBFactory): Store | undefined {
  if (!factory && typeof indexedDB === 'undefined') return undefined
  return idbStore('aa-push', 'kept', factory)
}
