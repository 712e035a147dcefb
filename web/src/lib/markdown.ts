import { Marked } from 'marked'
import DOMPurify from 'dompurify'

const md = new Marked({ gfm: true, breaks: true })

// Agents' markdown is rendered, then sanitized: no script, no event
// handlers, no javascript: URLs, links open in a new tab without referrer.
DOMPurify.addHook('afterSanitizeAttributes', (node) => {
  if (node.tagName === 'A') {
    node.setAttribute('target', '_blank')
    node.setAttribute('rel', 'noopener noreferrer')
  }
})

// The page loads images only from itself or inline (its CSP), so an
// image from elsewhere would show broken, and a relative one would ask this
// server for a file it does not have: both become a link to the image,
// named by its alt text. Inline images (data:, blob:) are shown.
const shown = /^(data:image\/|blob:)/i

export function renderMarkdown(src: string): string {
  const html = md.parse(src, { async: false }) as string
  const doc = DOMPurify.sanitize(html, {
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select', 'iframe', 'object', 'embed'],
    FORBID_ATTR: ['style'],
    RETURN_DOM_FRAGMENT: true,
  })
  for (const img of Array.from(doc.querySelectorAll('img'))) {
    const at = img.getAttribute('src') ?? ''
    if (shown.test(at)) continue
    const web = /^https?:\/\//i.test(at)
    const name = img.getAttribute('alt')?.trim() || img.getAttribute('title')?.trim() || (web ? at : 'image')
    let link: Node = document.createTextNode(`[${name}]`)
    if (web) {
      const a = document.createElement('a')
      a.href = at
      a.target = '_blank'
      a.rel = 'noopener noreferrer'
      a.textContent = name
      link = a
    }
    img.replaceWith(link)
  }
  const box = document.createElement('div')
  box.append(doc)
  return box.innerHTML
}
