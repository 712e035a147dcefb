import { describe, expect, it } from 'vitest'
import { claudeCommand, CLIENTS_GUIDE, HIDDEN } from './connect'

// A command line split into its words as a POSIX shell reads it (single
// quotes, and a backslash outside them): what the shell hands claude.
function words(line: string): string[] {
  const out: string[] = []
  let cur: string | null = null
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!
    if (c === "'") {
      const end = line.indexOf("'", i + 1)
      cur = (cur ?? '') + line.slice(i + 1, end)
      i = end
    } else if (c === '\\') {
      cur = (cur ?? '') + line[++i]
    } else if (c === ' ') {
      if (cur !== null) out.push(cur)
      cur = null
    } else {
      cur = (cur ?? '') + c
    }
  }
  if (cur !== null) out.push(cur)
  return out
}

describe('claudeCommand', () => {
  it("registers this server's /mcp endpoint with the token as a bearer header", () => {
    const cmd = claudeCommand('http://127.0.0.1:22080', 'sV4PSTbYoRaFOufGZDMeTEWND_dlaDvf')
    expect(words(cmd)).toEqual(['claude', 'mcp', 'add', '--transport', 'http', 'agentassistant', 'http://127.0.0.1:22080/mcp',
      '--header', 'Authorization: Bearer sV4PSTbYoRaFOufGZDMeTEWND_dlaDvf'])
  })

  it('keeps a configured token whole whatever it holds', () => {
    for (const token of ["it's $HOME `id` \"x\"", 'a b\tc', '--header']) {
      const w = words(claudeCommand('https://inbox.example.org', token))
      expect(w.at(-1)).toBe(`Authorization: Bearer ${token}`)
      expect(w).toHaveLength(9)
    }
  })

  it('shows the token hidden, at a length that says nothing of it', () => {
    const shown = claudeCommand('http://192.168.1.20:22080', null)
    expect(words(shown).at(-1)).toBe(`Authorization: Bearer ${HIDDEN}`)
    expect(HIDDEN).not.toMatch(/[A-Za-z0-9]/)
    expect(claudeCommand('http://192.168.1.20:22080', '')).toBe(shown)
  })
})

// The pages of docs/, as a link to them on the project's site names them.
const docs = Object.fromEntries(Object.entries(import.meta.glob('../../../docs/*.md', {
  query: '?raw', import: 'default', eager: true,
}) as Record<string, string>).map(([p, text]) => [p.replace('../../../', ''), text]))

// slug is the anchor GitHub gives a heading.
const slug = (h: string) => h.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')

describe('CLIENTS_GUIDE', () => {
  it('links a page of docs/ at a heading it has, where a phone can open it', () => {
    const u = new URL(CLIENTS_GUIDE)
    expect(u.protocol).toBe('https:')
    const m = /^\/agentassistant\/agentassistant\/blob\/main\/(docs\/[\w-]+\.md)$/.exec(u.pathname)
    expect(m, u.pathname).not.toBeNull()
    const page = docs[m![1]!]
    expect(page, m![1]).toBeDefined()
    const anchors = [...page!.matchAll(/^#+ (.+)$/gm)].map((h) => slug(h[1]!))
    expect(anchors).toContain(u.hash.slice(1))
  })
})
