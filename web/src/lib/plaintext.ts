import { Lexer, type Token, type Tokens } from 'marked'

// Agents write markdown. Where it cannot be rendered (a one-line preview,
// a browser notification, a banner) it is shown as the text a reader
// would see: no ** or #, links as their words, table cells joined.

const ENTITIES: Record<string, string> = { amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", nbsp: ' ' }

function decode(s: string): string {
  return s.replace(/&(#x[0-9a-f]+|#\d+|[a-z]+);/gi, (m, e: string) => {
    if (e[0] === '#') {
      const n = e[1] === 'x' || e[1] === 'X' ? parseInt(e.slice(2), 16) : parseInt(e.slice(1), 10)
      return n > 0 && n <= 0x10ffff ? String.fromCodePoint(n) : m
    }
    return ENTITIES[e.toLowerCase()] ?? m
  })
}

function inline(tokens: Token[] | undefined): string {
  let out = ''
  for (const t of tokens ?? []) {
    switch (t.type) {
      case 'html':
      case 'tag':
      case 'checkbox':
        break // markup, not words
      case 'br':
        out += '\n'
        break
      case 'image':
        out += (t as Tokens.Image).text
        break
      case 'codespan':
        out += decode((t as Tokens.Codespan).text)
        break
      default: {
        const c = t as { tokens?: Token[]; text?: string }
        out += c.tokens ? inline(c.tokens) : decode(c.text ?? '')
      }
    }
  }
  return out
}

function blocks(tokens: Token[] | undefined): string[] {
  const out: string[] = []
  for (const t of tokens ?? []) {
    switch (t.type) {
      case 'space':
      case 'hr':
      case 'def':
        break
      case 'code':
        out.push((t as Tokens.Code).text)
        break
      case 'html':
        out.push(decode((t as Tokens.HTML).text.replace(/<[^>]*>/g, '')))
        break
      case 'table': {
        const tb = t as Tokens.Table
        const row = (cells: Tokens.TableCell[]) => cells.map((c) => inline(c.tokens).trim()).join(', ')
        out.push([row(tb.header), ...tb.rows.map(row)].join('; '))
        break
      }
      case 'list':
        for (const it of (t as Tokens.List).items) out.push(blocks(it.tokens).join('\n'))
        break
      case 'blockquote':
        out.push(...blocks((t as Tokens.Blockquote).tokens))
        break
      default: {
        const c = t as { tokens?: Token[]; text?: string }
        out.push(c.tokens ? inline(c.tokens) : decode(c.text ?? ''))
      }
    }
  }
  return out.map((s) => s.trim()).filter(Boolean)
}

const lexer = { gfm: true, breaks: true }

// markdownToText is the plain text of markdown: one line per block.
export function markdownToText(src: string): string {
  try {
    return blocks(Lexer.lex(src, lexer)).join('\n')
  } catch {
    return src
  }
}

// oneLine is markdownToText on a single line, cut to max characters.
export function oneLine(src: string, max = 70): string {
  const cs = Array.from(markdownToText(src).replace(/\s+/g, ' ').trim()) // whole characters, emoji included
  return cs.length > max ? cs.slice(0, max).join('').trimEnd() + '…' : cs.join('')
}
