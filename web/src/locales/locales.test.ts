import { describe, expect, it } from 'vitest'
import { createI18n } from 'vue-i18n'
import { LOCALES, messages, quasarLangs } from './index'

// Every leaf of a message tree as "a.b.c" → text.
function leaves(tree: object, prefix = ''): Map<string, unknown> {
  const out = new Map<string, unknown>()
  for (const [k, v] of Object.entries(tree)) {
    const key = prefix + k
    if (v && typeof v === 'object') for (const [kk, vv] of leaves(v, key + '.')) out.set(kk, vv)
    else out.set(key, v)
  }
  return out
}

const en = leaves(messages.en)
const placeholders = (s: string) => [...new Set([...s.matchAll(/\{(\w+)\}/g)].map((m) => m[1]))].sort()

// The app's own sources (not the catalogues, tests or generated code).
const sources = Object.entries(import.meta.glob(['../**/*.{ts,vue}', '!../locales/**', '!../**/*.test.ts', '!../gen/**'], {
  query: '?raw', import: 'default', eager: true,
}) as Record<string, string>)

describe('the message catalogues', () => {
  it('every language has exactly the keys English has, with the same placeholders', () => {
    for (const l of LOCALES) {
      const m = leaves(messages[l])
      expect([...m.keys()].sort(), l).toEqual([...en.keys()].sort())
      for (const [k, v] of m) {
        expect(typeof v === 'string' && v.trim() !== '', `${l}: ${k} is empty`).toBe(true)
        expect(placeholders(v as string), `${l}: ${k}`).toEqual(placeholders(en.get(k) as string))
      }
    }
  })

  it('every message compiles and renders in every language', () => {
    const i18n = createI18n({ legacy: false, locale: 'en', messages, missingWarn: false, fallbackWarn: false })
    const { t } = i18n.global
    for (const l of LOCALES) {
      i18n.global.locale.value = l
      for (const k of en.keys()) {
        const out = t(k, { n: 3, key: 'Ctrl' })
        expect(out, `${l}: ${k}`).not.toBe(k)
        expect(out, `${l}: ${k}`).not.toMatch(/[{}]/)
        const src = leaves(messages[l]).get(k) as string
        if (!/[{|]/.test(src)) expect(out, `${l}: ${k} is shown as written`).toBe(src)
      }
    }
    i18n.global.locale.value = 'en'
    expect(t('reply.pick', 2)).toBe('2 questions are waiting. Which one are you answering?')
    expect(t('reply.pick', 1)).toBe('1 question is waiting. Which one are you answering?')
  })

  it("Quasar's language pack follows ours", () => {
    expect(Object.keys(quasarLangs).sort()).toEqual([...LOCALES].sort())
    expect(quasarLangs.zh.label.cancel).toBe('取消')
    expect(quasarLangs.en.label.cancel).toBe('Cancel')
  })
})

describe('the components and the catalogues agree', () => {
  // Quoted strings shaped like a key ('reply.quick.yes'), wherever they
  // are (in templates, attribute values are "…" and keys '…' inside them).
  const keyLike = new RegExp(`'((?:${Object.keys(messages.en).join('|')})(?:\\.\\w+)+)'`, 'g')
  const quotedKeys = sources.flatMap(([file, src]) => [...src.matchAll(keyLike)].map((m) => ({ file, key: m[1]! })))

  it('finds the sources', () => {
    expect(sources.length).toBeGreaterThan(10)
    expect(sources.some(([f]) => f.endsWith('InboxView.vue'))).toBe(true)
  })

  it('every t() names its key literally, and the key exists', () => {
    const bad: string[] = []
    for (const [file, src] of sources) {
      const code = src.replace(/^\s*\/\/.*$/gm, '') // not comment lines
      for (const m of code.matchAll(/(?<![\w.$])\$?te?\(\s*([^,)]*)/g)) {
        const arg = m[1]!.trim()
        const lit = /^'([^']+)'$/.exec(arg)
        if (!lit) bad.push(`${file}: t(${arg}) is not a literal key`)
        else if (typeof en.get(lit[1]!) !== 'string') bad.push(`${file}: no message '${lit[1]}'`)
      }
    }
    expect(bad).toEqual([])
  })

  it('every string that looks like a key is one', () => {
    expect(quotedKeys.length).toBeGreaterThan(50)
    const bad = quotedKeys.filter(({ key }) => typeof en.get(key) !== 'string').map(({ file, key }) => `${file}: '${key}'`)
    expect(bad).toEqual([])
  })

  it('every message is used somewhere', () => {
    const used = new Set(quotedKeys.map(({ key }) => key))
    expect([...en.keys()].filter((k) => !used.has(k))).toEqual([])
  })
})

// The pages of docs/ (shipped in the release archive beside the binaries).
const docs = Object.fromEntries(Object.entries(import.meta.glob('../../../docs/*.md', {
  query: '?raw', import: 'default', eager: true,
}) as Record<string, string>).map(([p, text]) => [p.replace('../../../', ''), text]))

describe('what the messages send a reader to', () => {
  it('finds the pages', () => {
    expect(Object.keys(docs)).toContain('docs/push.md')
  })

  // A message read on a phone cannot point at a part of the README by a
  // name it does not have: it names a page of docs/ and a heading of it.
  it('every page and heading a message names exists', () => {
    for (const l of LOCALES) {
      for (const [k, v] of leaves(messages[l])) {
        const s = String(v)
        expect(s, `${l}: ${k} names the README, which is not where a phone is`).not.toMatch(/README/)
        for (const m of s.matchAll(/(docs\/[\w-]+\.md)(?:[,，]?\s*(?:的)?\s*“([^”]+)”)?/g)) {
          expect(docs[m[1]], `${l}: ${k} names ${m[1]}`).toBeDefined()
          if (m[2]) expect(docs[m[1]], `${l}: ${k} names “${m[2]}” in ${m[1]}`).toMatch(new RegExp(`^#+ ${m[2]}$`, 'm'))
        }
      }
    }
  })
})
