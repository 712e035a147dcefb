import { describe, expect, it } from 'vitest'
import { markdownToText, oneLine } from './plaintext'

describe('markdown as plain text', () => {
  it('drops the syntax and keeps the words', () => {
    expect(markdownToText('## Which **database**?\n\nPick _one_, see [the docs](https://x.test).')).toBe(
      'Which database?\nPick one, see the docs.',
    )
    expect(markdownToText('- one\n- **two**\n\n1. three\n\n> quoted `code`')).toBe('one\ntwo\nthree\nquoted code')
    expect(markdownToText('```sql\nSELECT 1;\n```')).toBe('SELECT 1;')
    expect(markdownToText('\\*not bold\\* &amp; &lt;tag&gt; &#39;q&#39;')).toBe("*not bold* & <tag> 'q'")
    expect(markdownToText('<b>hi</b> there <img src=x onerror="alert(1)">')).toBe('hi there')
    expect(markdownToText('![a chart](x.png)')).toBe('a chart')
  })

  it('joins table cells instead of showing pipes', () => {
    const t = markdownToText('Options:\n\n| name | cost |\n|---|---|\n| pg | `0` |\n| mysql | 1 |')
    expect(t).toBe('Options:\nname, cost; pg, 0; mysql, 1')
    expect(t).not.toContain('|')
  })

  it('makes one cut line for previews', () => {
    expect(oneLine('# Title\n\nline one\nline two')).toBe('Title line one line two')
    expect(oneLine('word '.repeat(40), 12)).toBe('word word wo…')
    expect(oneLine('😀'.repeat(5), 3)).toBe('😀😀😀…')
    expect(oneLine('')).toBe('')
  })
})
